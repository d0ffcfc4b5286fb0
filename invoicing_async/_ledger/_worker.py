"""An outbox worker: claimed entries go through the same batch machinery as a stream.

The worker runs one batch (:class:`~invoicing_async._batch._Batch`) fed by an async
generator of claimed entries, so outcomes, retries, the retry budget, the circuit
breaker and the adaptive in-flight limit are those of ``submit_stream``. The batch's
ledger is :class:`Claims`: lookups answer from the claimed rows, and every write is
fenced by the claim's lease (a worker whose claim was taken over writes nothing, and
does not send). A heartbeat extends the leases; a worker that dies stops extending
them, and another worker claims the entries when they expire: a request that may
have left is re-sent with ``maybe_committed``, so the provider's ``409`` makes it
``accepted`` and the document is committed once.

A :class:`Store` is the storage side (PostgreSQL or SQLite): claim, extend, mark
sending, settle and release, each fenced by lease.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import uuid
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from invoicing_async._batch import BatchOptions, _Batch
from invoicing_async._errors import InvoicingError, LedgerError
from invoicing_async._outcomes import OutcomeStatus, RetryPolicy

from ._entry import PENDING, entry_from_row, outcome_json
from ._rules import is_final, requeue

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

    from invoicing_async._batch import Sender
    from invoicing_async._models import DocumentResult
    from invoicing_async._outcomes import Outcome

    from ._entry import LedgerEntry

__all__ = ["Claim", "Claims", "Settlement", "Store", "run_worker"]

log = logging.getLogger("invoicing_async.ledger")


class RowDocument(bytes):
    """A claimed entry's serialised document, carrying its key and endpoint."""

    key: str
    encrypted: bool


class _Payload(bytes):
    encrypted: bool


@attrs.frozen
class Claim:
    """One entry a worker holds under ``lease``."""

    id: Any
    lease: str
    document: RowDocument = attrs.field(repr=False)
    entry: LedgerEntry
    claims: int


@attrs.frozen
class Settlement:
    """An outcome to write, if the lease still holds."""

    id: Any
    lease: str
    state: str  # "done", or "pending" to be sent again after ``delay`` seconds
    status: str
    final: bool
    ambiguous: bool
    fingerprint: str | None
    attempts: int
    outcome: str
    delay: float


class Store(Protocol):
    """The storage side of an outbox; every write is fenced by lease."""

    async def claim(self, limit: int, lease: str, seconds: float) -> list[Claim]:
        """Claim up to ``limit`` entries (pending, or whose lease expired)."""

    async def extend(self, leases: Sequence[str], seconds: float) -> None:
        """Extend the leases still held."""

    async def mark_sending(self, items: Sequence[tuple[Any, str]]) -> set[Any]:
        """Record that requests leave; returns the ids whose lease held."""

    async def settle(self, items: Sequence[Settlement]) -> set[Any]:
        """Write outcomes; returns the ids whose lease held."""

    async def release(self, leases: Sequence[str], delay: float) -> None:
        """Put entries still held under ``leases`` back as pending."""

    async def remaining(self) -> int:
        """Entries pending or in flight (anyone's)."""


def make_claim(
    row_id: Any,
    lease: str,
    *,
    key: str,
    document: bytes,
    encrypted: bool,
    status: str | None,
    maybe_committed: bool,
    claims: int,
    outcome: Any,
) -> Claim:
    """A claimed row as the batch sees it: an entry to send (``pending``)."""
    body = RowDocument(document)
    body.key = key
    body.encrypted = bool(encrypted)
    entry = entry_from_row(
        key,
        PENDING,
        status,
        final=False,
        maybe_committed=maybe_committed,
        fingerprint=None,
        outcome=outcome,
        updated_at=None,
    )
    return Claim(row_id, lease, body, entry, claims)


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
    """The batch's ledger in a worker: the claimed entries, written under their lease."""

    def __init__(self, store: Store, *, seconds: float, policy: RetryPolicy) -> None:
        self._store = store
        self._seconds = seconds
        self._policy = policy
        self.held: dict[str, Claim] = {}
        self._leases: dict[str, int] = {}
        self._failure: LedgerError | None = None
        self._sending = _Pump(lambda items: store.mark_sending([(c.id, c.lease) for c in items]))
        self._settling = _Pump(store.settle)
        self._settles: list[asyncio.Future[bool]] = []

    async def take(self, limit: int) -> list[Claim]:
        """Claim up to ``limit`` entries under a new lease."""
        lease = uuid.uuid4().hex
        claimed = await self._store.claim(limit, lease, self._seconds)
        fresh = [claim for claim in claimed if claim.entry.key not in self.held]
        for claim in fresh:
            self.held[claim.entry.key] = claim
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
                    log.warning("outbox: cannot extend the leases: %s", exc)

    async def lookup(self, keys: Sequence[str]) -> Mapping[str, LedgerEntry]:
        return {key: self.held[key].entry for key in keys if key in self.held}

    def will_send(self, keys: Sequence[str]) -> None:
        """Nothing to do early: each claim is marked, fenced, right before its request."""

    async def sending(self, key: str, index: int) -> None:  # noqa: ARG002
        self._check()
        claim = self.held.get(key)
        if claim is None or not await self._sending.put(claim):
            raise LedgerError(
                f"the claim on {key} was taken over by another worker", reason="lease_lost"
            )

    def settled(self, outcome: Outcome, fingerprint: str | None) -> None:
        self._check()
        claim = self.held.pop(outcome.key, None)
        if claim is None:
            return
        self._drop(claim.lease)
        final = is_final(outcome, fingerprint)
        again = requeue(outcome, final=final, resend_ambiguous=self._policy.resend_ambiguous)
        settlement = Settlement(
            claim.id,
            claim.lease,
            PENDING if again else "done",
            outcome.status.value,
            final,
            outcome.status is OutcomeStatus.UNKNOWN,
            fingerprint if final else None,
            outcome.attempts,
            outcome_json(outcome),
            self._policy.delay(claim.claims) if again else 0.0,
        )
        future = self._settling.put(settlement)
        future.add_done_callback(self._settled_done)
        self._settles.append(future)

    async def flush(self) -> None:
        await self._settling.drain()
        self._settles = [f for f in self._settles if not f.done()]
        self._check()

    async def release(self, delay: float = 0.0) -> None:
        """Put back every entry still held (never sent, or interrupted)."""
        leases = list(self._leases)
        self.held.clear()
        self._leases.clear()
        if leases:
            await self._store.release(leases, delay)

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

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure

    async def feed(
        self, batch: _Batch, *, size: int, poll: float, stop_when_empty: bool
    ) -> AsyncIterator[RowDocument]:
        """Claimed documents, as the batch asks for them; stops with the batch's breaker."""
        buffer: collections.deque[Claim] = collections.deque()
        while batch.stopped is None:
            if not buffer:
                buffer.extend(await self.take(size))
                if not buffer:
                    if stop_when_empty and await self._store.remaining() <= len(self.held):
                        return
                    await asyncio.sleep(poll)
                    continue
            yield buffer.popleft().document


class _RowSender:
    """The client's session, sending each claimed document to its own endpoint."""

    def __init__(self, inner: Sender) -> None:
        self._inner = inner

    def ensure_usable(self) -> None:
        self._inner.ensure_usable()

    @property
    def limit(self) -> int:
        return self._inner.limit

    @property
    def prepare_parallelism(self) -> tuple[int, int]:
        return self._inner.prepare_parallelism

    async def prepare_many(
        self, documents: Sequence[Any], *, encrypted: bool
    ) -> list[bytes | InvoicingError]:
        prepared: list[bytes | InvoicingError] = [b""] * len(documents)
        for flag in (True, False):
            where = [
                i for i, doc in enumerate(documents) if getattr(doc, "encrypted", encrypted) is flag
            ]
            if not where:
                continue
            bodies = await self._inner.prepare_many([documents[i] for i in where], encrypted=flag)
            for i, body in zip(where, bodies, strict=True):
                if isinstance(body, InvoicingError):
                    prepared[i] = body
                else:
                    payload = _Payload(body)
                    payload.encrypted = flag
                    prepared[i] = payload
        return prepared

    async def send_prepared(self, payload: bytes, **options: Any) -> DocumentResult:
        options["encrypted"] = getattr(payload, "encrypted", options["encrypted"])
        return await self._inner.send_prepared(payload, **options)


def _row_key(document: Any) -> str:
    return str(document.key)


async def run_worker(
    store: Store,
    sender: Sender,
    *,
    concurrency: int,
    stop_when_empty: bool,
    retry: RetryPolicy,
    lease: float,
    poll: float,
) -> dict[OutcomeStatus, int]:
    """Drain the outbox (see :meth:`PostgresOutbox.run_worker`); returns outcome counts."""
    counts: collections.Counter[OutcomeStatus] = collections.Counter()
    pause = poll
    while True:
        claims = Claims(store, seconds=lease, policy=retry)
        options = BatchOptions(concurrency=concurrency, retry=retry, key=_row_key)
        batch = _Batch(_RowSender(sender), options, claims)
        heartbeat = asyncio.ensure_future(claims.heartbeat())
        documents = claims.feed(batch, size=concurrency, poll=poll, stop_when_empty=stop_when_empty)
        try:
            async with contextlib.aclosing(batch.run(documents)) as outcomes:
                async for outcome in outcomes:
                    counts[outcome.status] += 1
            await claims.flush()
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            delay = 0.0 if batch.stopped is None else pause
            with contextlib.suppress(Exception):  # best effort: leases expire anyway
                await asyncio.shield(claims.release(delay))
        if batch.stopped is not None:
            if stop_when_empty:
                log.warning("outbox worker stops: %s", batch.stopped)
                return dict(counts)
            log.warning("outbox worker paused %.0f s: %s", pause, batch.stopped)
            await asyncio.sleep(pause)
            pause = min(max(pause * 2, 1.0), 60.0)
            continue
        pause = poll
        if stop_when_empty and await store.remaining() == 0:
            return dict(counts)
