"""An outbox worker: a batch whose journal is the set of entries it has claimed.

The worker feeds claimed entries, each a :class:`~invoicing_async.Submission` with its
own endpoint, into one batch of the client, so outcomes, retries, the retry budget, the
circuit breaker and the adaptive in-flight limit are those of ``submit_stream``. The
batch's journal is :class:`Claims`: lookups answer from the claimed rows, and every
write is fenced by the claim's lease (a worker whose claim was taken over writes
nothing, and does not send). A heartbeat extends the leases; a worker that dies stops
extending them, and another worker claims the entries when they expire: a request that
may have left is re-sent with ``maybe_committed``, so the provider's ``409`` makes it
``accepted`` and the document is committed once.

A worker is a daemon: when the outbox database goes away (a restart, a failover, a lost
connection: :class:`~invoicing_async.LedgerError` with reason ``unavailable``), the
batch in progress ends, and the worker waits for the database with capped backoff
(one WARNING per outage, one INFO when it answers again), puts back the entries it held
(their requests are re-sent, answered ``409`` if they were committed) and goes on. It
ends only when cancelled (a stop signal), on a configuration failure, or when
``stop_when_empty`` finds nothing left to send.

Poison documents (the provider fails on one every time) cost a bounded number of
requests: an entry put back after a failed round waits before it is claimed again,
longer after every round that counts against it (``RetryPolicy.delay_after_round``,
across rounds, workers and restarts: the wait is stored with the entry as
``available_at``; a round the provider certainly never processed, an outage, waits the
first round's delay however long the outage lasts), and once
``RetryPolicy.max_rounds`` rounds have failed against its budget (``unknown``
outcomes: :func:`~._ledger._rules.charged`) the entry is *parked*: kept with its last
outcome, including whether a request for it may have been committed, and claimed
again only after an explicit retry. A worker that stops when empty stops when only
parked entries remain, and says so (one WARNING per entry parked, one when it stops).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from . import _telemetry as telemetry
from ._batch import BatchOptions
from ._documents import Submission
from ._errors import LedgerError
from ._journal import Ref, Verdict, Withdrawn
from ._ledger._entry import PARKED, PENDING, outcome_json
from ._ledger._rules import charged, decide, digest_of, is_final, requeue
from ._ledger._store import Settlement
from ._log import ledger as log
from ._outcomes import OutcomeStatus
from ._retry import Backoff

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

    from ._batch import Batch
    from ._documents import Prepared
    from ._engine import Engine
    from ._ledger._store import Claim, Store
    from ._outcomes import Outcome
    from ._retry import RetryPolicy

__all__ = ["Claims", "Hooks", "run_worker"]


class Hooks(Protocol):
    """What the owner of a worker (the client's drainer of deferred sales) is told and asked."""

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
        pending: telemetry.Pending | None = None,
    ) -> None:
        self._store = store
        self._pending = pending
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

    @property
    def waits_on_others(self) -> bool:
        """Whether ``before_send`` may wait for another document: the hooks' gate may."""
        return self._hooks is not None

    async def take(self, limit: int) -> list[Claim]:
        """Claim up to ``limit`` entries under a new lease."""
        lease = uuid.uuid4().hex
        claiming = asyncio.ensure_future(self._store.claim(limit, lease, self._seconds))
        try:
            claimed = await asyncio.shield(claiming)
        except asyncio.CancelledError:
            # Stopped while claiming: the claim may be made all the same. Held, what it
            # took is put back with the rest when the worker stops.
            with contextlib.suppress(Exception):
                self._hold(lease, await claiming)
            raise
        return self._hold(lease, claimed)

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

    async def before_send(self, ref: Ref) -> None:
        """Mark the entry sending, under its lease; a lost lease withdraws it."""
        self._check()
        if self._hooks is not None:
            await self._hooks.before_send(ref)
        claim = self.held.get(ref)
        if claim is None or not await self._sending.put(claim):
            raise Withdrawn(f"the claim on {ref.key} was taken over by another worker")

    def after_outcome(self, outcome: Outcome, prepared: Prepared | None) -> None:
        """Settle the entry under its lease: done, or back to be sent again later."""
        self._check()
        if self._hooks is not None:
            self._hooks.answered(outcome)
        claim = self.held.pop(Ref.of_outcome(outcome), None)
        if claim is None:
            return
        self._drop(claim.lease)
        fingerprint = digest_of(outcome, prepared)
        final = is_final(outcome, fingerprint)
        policy = self._policy
        again = requeue(outcome, final=final, resend_ambiguous=policy.resend_ambiguous)
        counted = again and charged(outcome)
        failures = claim.entry.failures + int(counted)
        park = again and policy.max_rounds is not None and failures >= policy.max_rounds
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
            # The wait grows with the rounds that counted against the document; one that
            # did not (an outage, a 429) waits the first round's: the provider's trouble
            # must not hold the backlog back for minutes once it answers again.
            policy.delay_after_round(failures if counted else 1) if state == PENDING else 0.0,
            failures,
            claim.content,
        )
        future = self._settling.put(settlement)
        future.add_done_callback(self._settled_done)
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

    async def release(self, delay: float = 0.0) -> list[str]:
        """Put back every entry still held (never sent, or interrupted).

        Returns the leases that could not be put back (the database is unavailable):
        put them back once it answers, or let them expire.
        """
        leases = list(self._leases)
        self.held.clear()
        self._leases.clear()
        if leases:
            try:
                await asyncio.shield(self._store.release(leases, delay))
            except Exception as exc:  # noqa: BLE001  (best effort: leases expire anyway)
                log.debug("outbox: cannot put the entries held back: %s", exc)
                return leases
        return []

    def _drop(self, lease: str) -> None:
        left = self._leases.get(lease, 0) - 1
        if left > 0:
            self._leases[lease] = left
        else:
            self._leases.pop(lease, None)

    def _settled_done(self, future: asyncio.Future[bool]) -> None:
        if future.cancelled():
            return
        error = future.exception()
        if isinstance(error, LedgerError) and self._failure is None:
            self._failure = error
        elif error is None and not future.result():
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
        self, batch: Batch, *, size: int, poll: float, stop_when_empty: bool
    ) -> AsyncIterator[Submission]:
        """Claimed documents, as the batch asks for them; stops with the batch's breaker."""
        buffer: collections.deque[Claim] = collections.deque()
        while batch.stopped is None:
            if not buffer:
                if self._pending is not None:  # the gauge, while metrics are read
                    await self._pending.refresh(self._store.remaining)
                buffer.extend(await self.take(size))
                if not buffer:
                    if self._pending is not None:
                        await self._pending.refresh(self._store.remaining, force=True)
                    if stop_when_empty and await self._store.remaining() <= len(self.held):
                        return
                    await asyncio.sleep(poll)
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


async def run_worker(
    store: Store,
    engine: Engine,
    *,
    concurrency: int,
    stop_when_empty: bool,
    retry: RetryPolicy,
    lease: float,
    poll: float,
    hooks: Hooks | None = None,
    name: str = "outbox",
) -> dict[OutcomeStatus, int]:
    """Drain the outbox (see :meth:`PostgresOutbox.run_worker`); returns outcome counts.

    :param hooks: told of every outcome, and asked before every first request.
    :param name: the outbox's name on its ``invoicing.outbox.pending`` gauge.
    """
    counts: collections.Counter[OutcomeStatus] = collections.Counter()
    # After a batch whose breaker opened: poll, then doubling from a second to a minute.
    pauses = Backoff(1.0, _MAX_PAUSE, jitter="none")
    pause = poll
    orphaned: list[str] = []  # leases held when the database went away
    pending = telemetry.Pending(name)  # observed while this function runs
    while True:
        claims = Claims(store, seconds=lease, policy=retry, hooks=hooks, pending=pending)
        options = BatchOptions(concurrency=concurrency, retry=retry, trace=False)
        batch = engine.batch(options, claims)
        try:
            if orphaned:
                await store.release(orphaned, 0.0)
                orphaned = []
            orphaned += await _round(
                claims, batch, counts, size=concurrency, poll=poll,
                stop_when_empty=stop_when_empty, pause=pause,
            )  # fmt: skip
            empty = stop_when_empty and batch.stopped is None and await store.remaining() == 0
        except LedgerError as exc:
            if exc.reason != "unavailable":
                raise
            orphaned += await claims.release()
            await _wait_for(store, exc)
            continue
        if batch.stopped is not None:
            if stop_when_empty:
                log.warning("outbox worker stops: %s", batch.stopped)
                return dict(counts)
            log.warning("outbox worker paused %.0f s: %s", pause, batch.stopped)
            await asyncio.sleep(pause)
            pause = pauses.next()
            continue
        pauses.reset()
        pause = poll
        if empty:
            await _stopping(store)
            return dict(counts)


async def _round(
    claims: Claims,
    batch: Batch,
    counts: collections.Counter[OutcomeStatus],
    *,
    size: int,
    poll: float,
    stop_when_empty: bool,
    pause: float,
) -> list[str]:
    """One batch over the entries claimed; the leases that could not be put back.

    Entries still held at the end go back at once, or after ``pause`` when the batch's
    breaker opened. A worker stopped (cancelled: a signal, a deferral closing) writes
    the outcomes it knows and puts back what it holds before it ends, rather than
    leaving it to its leases to expire; a request that may have left keeps that
    knowledge.
    """
    heartbeat = asyncio.ensure_future(claims.heartbeat())
    documents = claims.feed(batch, size=size, poll=poll, stop_when_empty=stop_when_empty)
    try:
        async with contextlib.aclosing(batch.run(documents)) as outcomes:
            async for outcome in outcomes:
                counts[outcome.status] += 1
        await claims.flush()
    except asyncio.CancelledError:
        with contextlib.suppress(LedgerError):  # its outcomes are found again anyway
            await claims.flush()
        await claims.release()
        raise
    finally:
        heartbeat.cancel()
        # Waited for, not awaited: awaiting it would hand a cancellation of this worker
        # arriving now to the heartbeat, and suppressing the heartbeat's would swallow it.
        await asyncio.wait({heartbeat})
    return await claims.release(0.0 if batch.stopped is None else pause)


async def _stopping(store: Store) -> None:
    """A worker that stops when empty found nothing to send: say if some are parked."""
    parked = await store.parked()
    if parked:
        log.warning(
            "outbox worker stops: nothing left to send but %d parked entr%s that need "
            "attention (invoicing-async ledger show --status parked; ledger retry "
            "--status parked sends them again)",
            parked,
            "y" if parked == 1 else "ies",
        )


#: The longest wait between two looks at an unavailable outbox database.
_MAX_BACKOFF = 5.0
#: The longest pause of a worker whose batch stopped (its breaker opened).
_MAX_PAUSE = 60.0


async def _wait_for(store: Store, error: LedgerError) -> None:
    """Wait until the outbox database answers again: one WARNING, one INFO."""
    log.warning(
        "the outbox database is unavailable (%s); the worker waits for it, and the entries "
        "it held are sent again once it answers",
        error,
    )
    waits = Backoff(0.1, _MAX_BACKOFF)  # equal jitter: a fleet spreads out
    while True:
        await asyncio.sleep(waits.next())
        try:
            await store.remaining()
        except LedgerError as exc:
            if exc.reason != "unavailable":
                raise
            log.debug("the outbox database is still unavailable: %s", exc)
        else:
            log.info("the outbox database answers again: the worker goes on")
            return
