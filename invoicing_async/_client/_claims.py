"""The journal of an outbox worker's batch: the entries it claimed, written under their lease.

:class:`Claims` is what :func:`~._worker.run_worker` hands to its batch as the journal:
lookups answer from the claimed rows, and every write is fenced by the claim's lease (a
worker whose claim was taken over writes nothing, and does not send). A heartbeat
extends the leases; :meth:`Claims.feed` claims entries as the batch asks for them, fair
across issuers and skipping the issuers whose documents wait for an operator.

A worker that stops gracefully (:meth:`Claims.stop`) claims nothing more and starts no
request: an entry the batch would send next waits in :meth:`Claims.before_send` until
the batch is cut, and is put back untouched, and so is one marked sending whose request
never left (it waited for a token: its mark is taken back); the requests already out
end (or are cut at the grace, their entries put back knowing they may have been
committed).

The worker's :class:`~._progress.Documents` count the outcomes written, in documents:
an outcome whose write failed (the database went away) is not counted, and the request
sent again is, once; an entry marked sending whose request never left, put back
untouched, is counted not sent.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from invoicing_async._core.entries import (
    PARKED,
    PENDING,
    Verdict,
    charged,
    decide,
    is_final,
    needs_fingerprint,
    parks,
    requeue,
    wait_after_round,
)
from invoicing_async._core.errors import LedgerError
from invoicing_async._core.log import ledger as log
from invoicing_async._core.machine import sent_nothing
from invoicing_async._core.outcomes import OutcomeStatus
from invoicing_async._doc.document import Submission
from invoicing_async._durable.entry import outcome_json
from invoicing_async._durable.store import Settlement
from invoicing_async._io.waits import pause, within
from invoicing_async._send.journal import Ref, Withdrawn

from .progress import Documents

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

    from invoicing_async._core.outcomes import Outcome
    from invoicing_async._core.retry import RetryPolicy
    from invoicing_async._doc.document import Prepared
    from invoicing_async._durable.store import Claim, Store
    from invoicing_async._obs.metrics import Pending
    from invoicing_async._send.batch import Batch

    from ._blocked import Blocked

__all__ = ["PUT_BACK", "Claims", "Hooks"]

#: Seconds a stopping worker gives its last writes (a claim it was making, the outcomes
#: it knows, the entries it puts back) once its grace is over. A database that does not
#: answer by then leaves those entries to their leases: any worker sends them again once
#: the leases expire (a request that may have left, knowing that it may be committed).
PUT_BACK = 5.0


class Hooks(Protocol):
    """What the owner of a worker (the client's drainer of deferred sales) is told and asked.

    A protocol with one implementation, ``invoicing_async._pos._drainer.Drainer``: it
    lives in ``_pos``, above this folder, which an import of it would climb to.
    """

    async def before_send(self, ref: Ref) -> None:
        """A claimed entry is about to be sent: return when it may be."""

    def answered(self, outcome: Outcome) -> None:
        """An entry's outcome, as soon as it is known (not yet written)."""

    def settled(self, outcome: Outcome, *, done: bool) -> None:
        """An entry's outcome is written; ``done``: no worker sends it again.

        Final, or parked until an explicit retry.
        """


class _Pump:
    """Coalesces writes: whatever is queued while one write runs goes in the next."""

    def __init__(self, write: Callable[[list[Any]], Awaitable[set[Any]]]) -> None:
        self._write = write
        self._queued: list[tuple[Any, asyncio.Future[bool]]] = []
        self._task: asyncio.Task[None] | None = None

    def put(self, item: Any) -> asyncio.Future[bool]:
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._queued.append((item, future))
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
        return future

    async def drain(self) -> None:
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def _run(self) -> None:
        while self._queued:
            group, self._queued = self._queued, []
            try:
                applied = await self._write([item for item, _ in group])
            except Exception as exc:  # noqa: BLE001  (the store's failure goes to every waiter)
                error = (
                    exc
                    if isinstance(exc, LedgerError)
                    else LedgerError(f"cannot write the outbox: {exc}", reason="write_failed")
                )
                for _, future in group:
                    if not future.done():
                        future.set_exception(error)
                continue
            for item, future in group:
                if not future.done():
                    future.set_result(item.id in applied)


class Claims:
    """The batch's journal in a worker: the claimed entries, written under their lease."""

    def __init__(
        self,
        store: Store,
        *,
        seconds: float,
        policy: RetryPolicy,
        hooks: Hooks | None = None,
        pending: Pending | None = None,
        documents: Documents | None = None,
    ) -> None:
        self._store = store
        self._pending = pending
        #: The worker's documents, counted as their outcomes are written.
        self.documents = documents if documents is not None else Documents()
        self._hooks = hooks
        self._seconds = seconds
        self._policy = policy
        #: The entries claimed and not settled, by document (issuer and key).
        self.held: dict[Ref, Claim] = {}
        self._leases: dict[str, int] = {}
        self._failure: LedgerError | None = None
        self._sending = _Pump(lambda items: store.mark_sending([(c.id, c.lease) for c in items]))
        self._settling = _Pump(store.settle)
        self._settles: list[asyncio.Future[bool]] = []
        #: Told of every outcome as it settles (the worker's issuers that wait).
        self._rounds: Blocked | None = None
        #: Outcomes whose write failed as the database went away: written or not.
        self.unconfirmed = 0
        #: Entries marked sending in the outbox and not settled.
        self._marked: set[Ref] = set()
        #: Entries marked sending whose request never left: unmarked as they go back.
        self._unsent: list[Claim] = []
        #: Set by :meth:`stop`: nothing more is claimed or sent.
        self._stopping = asyncio.Event()
        #: Loop time by which the last writes of a stop must end (set when they start).
        self._put_back_by: float | None = None

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping.is_set()

    def stop(self) -> None:
        """Claim nothing more and start no request; those out go on (a graceful stop)."""
        self._stopping.set()

    async def take(self, limit: int, skip: Sequence[str] = ()) -> list[Claim]:
        """Claim up to ``limit`` entries under a new lease, none of ``skip``'s issuers."""
        lease = uuid.uuid4().hex
        claiming = asyncio.ensure_future(self._store.claim(limit, lease, self._seconds, skip))
        try:
            claimed = await asyncio.shield(claiming)
        except asyncio.CancelledError:
            # Stopped while claiming: the claim may be made all the same. Held, what it
            # took is put back with the rest when the worker stops; not made within the
            # last writes' time (the database does not answer), it is left to its lease.
            done, _ = await asyncio.wait({claiming}, timeout=self._last_writes_left())
            if done and not claiming.cancelled() and claiming.exception() is None:
                self._hold(lease, claiming.result())
            claiming.cancel()
            raise
        return self._hold(lease, claimed)

    def _last_writes_left(self) -> float:
        """Seconds left to the last writes of a stop (:data:`PUT_BACK` from the first)."""
        now = asyncio.get_running_loop().time()
        if self._put_back_by is None:
            self._put_back_by = now + PUT_BACK
        return max(0.0, self._put_back_by - now)

    def _hold(self, lease: str, claimed: list[Claim]) -> list[Claim]:
        fresh = [claim for claim in claimed if claim.ref not in self.held]
        for claim in fresh:
            self.held[claim.ref] = claim
        if fresh:
            self._leases[lease] = len(fresh)
        return fresh

    async def heartbeat(self) -> None:
        """Extend the leases held, every third of their length, until cancelled."""
        while True:
            await asyncio.sleep(self._seconds / 3)
            if self._leases:
                try:
                    await self._store.extend(list(self._leases), self._seconds)
                except Exception as exc:  # noqa: BLE001  (a missed beat: the leases may expire)
                    # An outage is told once, by the worker; a missed beat alone is harmless.
                    log.debug("outbox: cannot extend the leases: %s", exc)

    # --- the journal's hooks -----------------------------------------------------------------

    async def lookup(self, refs: Sequence[Ref]) -> list[Verdict]:
        """A claimed entry is pending: send it (knowing whether it may be committed)."""
        resend = self._policy.resend_ambiguous
        return [decide(self.held[ref].entry, resend_ambiguous=resend) for ref in refs]

    @property
    def waits_on_others(self) -> bool:
        """Whether ``before_send`` may wait for another document: the hooks' gate may."""
        return self._hooks is not None

    async def before_send(self, ref: Ref) -> None:
        """Mark the entry sending, under its lease; a lost lease withdraws it.

        Once the worker stops, no request starts: this waits until the batch is cut.
        """
        self._check()
        await self._unless_stopping()
        if self._hooks is not None:
            await self._hooks.before_send(ref)
        claim = self.held.get(ref)
        if claim is None or not await self._sending.put(claim):
            raise Withdrawn(f"the claim on {ref.key} was taken over by another worker")
        self._marked.add(ref)
        await self._unless_stopping()

    async def _unless_stopping(self) -> None:
        if self._stopping.is_set():
            await asyncio.Future()  # until the batch is cut (cancelled)

    def after_outcome(self, outcome: Outcome, prepared: Prepared | None) -> None:
        """Settle the entry under its lease: done, or back to be sent again later.

        Once stopping, an entry that was never sent is not settled: it is put back
        untouched with the others held; if it was marked sending (its request waited for
        a token: it never left), its mark is taken back and it is counted not sent.
        """
        self._check()
        if self._rounds is not None:
            # Told before the entry is written back: its issuer is skipped by the next
            # claim if it now waits (an entry put back with no wait is claimable at once).
            self._rounds.outcome(outcome)
        ref = Ref.of_outcome(outcome)
        marked = ref in self._marked
        unsent = not marked or sent_nothing(outcome.status, outcome.attempts)
        if unsent and self._stopping.is_set():
            if marked:  # on its way, it waited for its token: counted, not sent
                self._marked.discard(ref)
                self._unsent.append(self.held[ref])
                self.documents.put_back(outcome)
            return
        self._marked.discard(ref)
        if self._hooks is not None:
            self._hooks.answered(outcome)
        claim = self.held.pop(ref, None)
        if claim is None:
            return
        self._drop(claim.lease)
        fingerprint = (
            prepared.digest if prepared is not None and needs_fingerprint(outcome) else None
        )
        final = is_final(outcome, fingerprint)
        policy = self._policy
        again = requeue(outcome, final=final, resend_ambiguous=policy.resend_ambiguous)
        counted = again and charged(outcome)
        failures = claim.entry.failures + int(counted)
        park = again and parks(failures, policy)
        state = PARKED if park else PENDING if again else "done"
        settlement = Settlement(
            claim.id,
            claim.lease,
            state,
            outcome.status.value,
            final,
            outcome.status is OutcomeStatus.UNKNOWN,
            fingerprint if final else None,
            outcome.attempts,
            outcome_json(outcome),
            wait_after_round(policy, failures, counted=counted) if state == PENDING else 0.0,
            failures,
            claim.content,
        )
        future = self._settling.put(settlement)
        future.add_done_callback(functools.partial(self._settled_done, outcome, state == PENDING))
        if park:
            future.add_done_callback(functools.partial(_parked, outcome, failures))
        if self._hooks is not None:
            future.add_done_callback(functools.partial(self._tell, outcome, state != PENDING))
        self._settles.append(future)

    # --- the worker's side ----------------------------------------------------------------

    async def flush(self) -> None:
        """Wait until every settlement is written; raise a write failure."""
        await self._settling.drain()
        self._settles = [f for f in self._settles if not f.done()]
        self._check()

    async def finish(self) -> list[str]:
        """A stop's last writes: the outcomes known, then every entry held put back.

        Within :data:`PUT_BACK` seconds: returns the leases not put back (the database
        does not answer, or went away), whose entries wait for their leases to expire.
        """
        leases = list(self._leases)
        written = await within(self._finish(), self._last_writes_left())
        return written.result() if written is not None else leases

    async def _finish(self) -> list[str]:
        with contextlib.suppress(LedgerError):  # its outcomes are found again anyway
            await self.flush()
        return await self.release()

    async def release(self, delay: float = 0.0) -> list[str]:
        """Put back every entry still held (never sent, or interrupted).

        Those marked sending whose request never left are unmarked first. Returns the
        leases that could not be put back (the database is unavailable): put them back
        once it answers, or let them expire (the unsent then keep their mark: they are
        sent again knowing they may have been committed, which is safe).
        """
        leases = list(self._leases)
        unsent = [(claim.id, claim.lease) for claim in self._unsent]
        self.held.clear()
        self._leases.clear()
        self._unsent = []
        if leases:
            try:
                await asyncio.shield(self._put_back(unsent, leases, delay))
            except Exception as exc:  # noqa: BLE001  (best effort: leases expire anyway)
                log.debug("outbox: cannot put the entries held back: %s", exc)
                return leases
        return []

    async def _put_back(
        self, unsent: list[tuple[Any, str]], leases: list[str], delay: float
    ) -> None:
        if unsent:
            await self._store.mark_sending(unsent, sending=False)
        await self._store.release(leases, delay)

    def _drop(self, lease: str) -> None:
        left = self._leases.get(lease, 0) - 1
        if left > 0:
            self._leases[lease] = left
        else:
            self._leases.pop(lease, None)

    def _settled_done(self, outcome: Outcome, again: bool, future: asyncio.Future[bool]) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if isinstance(error, LedgerError):
            # The database went away while it was written: it may or may not have been.
            self.unconfirmed += 1
            if self._failure is None:
                self._failure = error
        elif error is None and future.result():
            self.documents.settled(outcome, again=again)
        elif error is None:
            log.warning("outbox: an outcome was not written: the entry's lease was taken over")

    def _tell(self, outcome: Outcome, done: bool, future: asyncio.Future[bool]) -> None:
        """Tell the hooks an outcome is written (under the lease: else it was not)."""
        hooks = self._hooks
        if hooks is not None and not future.cancelled() and future.exception() is None:
            written = future.result()
            if written:
                hooks.settled(outcome, done=done)

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure

    async def feed(
        self, batch: Batch, *, size: int, poll: float, stop_when_empty: bool, rounds: Blocked
    ) -> AsyncIterator[Submission]:
        """Claimed documents, as the batch asks for them.

        Ends with the batch's breaker, when the worker stops, or (``stop_when_empty``)
        when nothing is left but what waits for an operator. Before each claim, the
        issuers ``rounds`` says are to be tried again are sent again by this batch; a
        pause between claims ends as soon as one may be (its credentials changed).
        """
        self._rounds = rounds
        buffer: collections.deque[Claim] = collections.deque()
        while batch.stopped is None and not self.stopping:
            rounds.observe(batch)
            if not buffer:
                await rounds.retry(batch)
                skip = rounds.skipped()
                await self._count_pending()
                buffer.extend(await self.take(size, skip))
                if not buffer:
                    await self._count_pending(force=True)
                    if stop_when_empty and await self._store.remaining(skip) <= len(self.held):
                        return
                    await pause(poll, self._stopping, rounds.woken())
                    continue
            claim = buffer.popleft()
            # Sent for the issuer stored with it: a pool routes it to that issuer.
            issuer, key = claim.ref
            yield Submission(
                document=claim.document,
                key=key,
                issuer=issuer or None,
                encrypted=claim.encrypted,
            )

    async def _count_pending(self, *, force: bool = False) -> None:
        """Count the outbox's pending entries again, for the gauge and the progress."""
        pending = self._pending
        if pending is not None and await pending.refresh(self._store.remaining, force=force):
            self.documents.pending(pending.value)  # counted: while metrics or progress are read


def _parked(outcome: Outcome, failures: int, future: asyncio.Future[bool]) -> None:
    """Say that an entry was parked (once its settlement is written under the lease)."""
    if future.cancelled() or future.exception() is not None or not future.result():
        return
    error = outcome.error
    log.warning(
        "outbox: invoice %s is parked after %d failed rounds (%s%s): no worker sends it "
        "again until it is marked to be sent again (invoicing-async ledger retry)",
        outcome.key,
        failures,
        outcome.status.value,
        f": {type(error).__name__}: {error}" if error is not None else "",
    )
