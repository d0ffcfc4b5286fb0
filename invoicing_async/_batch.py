"""Bulk submission: bounded fan-out, one truthful outcome per document, safe retries.

A fixed pool of worker coroutines takes documents from a bounded queue fed lazily from
the caller's (async) iterable, so memory follows the concurrency, not the input. Each
document ends in exactly one :class:`~invoicing_async.Outcome`.

Retrying a non-idempotent POST is safe here because the provider detects duplicates: a
document it already holds is answered with 409 and its original record. Every failure
is classified (see :func:`~._errors.may_have_committed`):

* definite (400, persistent 401, refused locally): *rejected*, never retried;
* not sent (connection refused, 429): retried;
* ambiguous (reset after sending, read timeout, 408, 5xx, unreadable 2xx): retried, and a
  later 409 then means *our own* earlier attempt was committed: *accepted*, with the
  original record. Without retries (``resend_ambiguous=False``) it ends *unknown*.

Retries back off exponentially with full jitter (or as ``Retry-After`` asks) and draw on
a budget shared by the batch, so an outage does not multiply traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import Counter
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Sequence,
)
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ._documents import document_key
from ._errors import (
    DuplicateDocumentError,
    InvoicingError,
    RateLimitError,
    TransportError,
    may_have_committed,
)
from ._journal import Journal
from ._outcomes import BatchProgress, Outcome, OutcomeStatus, RetryPolicy

if TYPE_CHECKING:
    import datetime as dt
    import os

    from ._models import DocumentResult

__all__ = ["BatchOptions", "Sender", "collect", "stream"]

log = logging.getLogger("invoicing_async.batch")


class Sender(Protocol):
    """What a batch needs of a session: prepare documents, send one, and two sizes."""

    @property
    def limit(self) -> int:
        """Connection pool size (0: unlimited)."""

    @property
    def prepare_parallelism(self) -> tuple[int, int]:
        """``(documents per chunk, chunks in preparation at once)``."""

    async def prepare_many(
        self, documents: Sequence[Any], *, encrypted: bool
    ) -> list[bytes | InvoicingError]:
        """Each document's body, or the error that keeps it from being sent."""

    async def send_prepared(
        self,
        payload: bytes,
        *,
        encrypted: bool,
        send_method: str | None,
        time_stamp: dt.datetime | str | None,
        timeout: float | None,
    ) -> DocumentResult:
        """One attempt; the record, or the typed error."""


@attrs.frozen(kw_only=True)
class BatchOptions:
    """The options of one batch, as :meth:`InvoicingClient.submit_stream` documents them."""

    concurrency: int = 32
    encrypted: bool = True
    journal: str | os.PathLike[str] | Journal | None = None
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    deadline: float | None = None
    on_progress: Callable[[BatchProgress], object] | None = None
    send_method: str | None = None
    time_stamp: dt.datetime | str | None = None
    key: Callable[[Any], str] = document_key


class _Budget:
    def __init__(self, policy: RetryPolicy) -> None:
        self._tokens = float(policy.min_budget)
        self._ratio = policy.budget_ratio

    def started(self) -> None:
        self._tokens += self._ratio

    def take(self) -> bool:
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


_END = object()


@attrs.frozen
class _Pending:
    """A document read from the input, not yet prepared."""

    index: int
    key: str
    document: Any = attrs.field(repr=False)
    maybe_committed: bool


@attrs.frozen
class _Ready:
    """A prepared document: the body to send, or why it cannot be sent."""

    pending: _Pending
    payload: bytes | InvoicingError = attrs.field(repr=False)


class _Batch:
    def __init__(self, sender: Sender, options: BatchOptions, journal: Journal | None) -> None:
        if options.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._sender = sender
        # More workers than pooled connections would only wait for a slot inside the
        # request's timeout; keep them within the pool.
        pool = sender.limit  # 0: a caller's session without a connection limit
        concurrency = options.concurrency
        self._workers = min(concurrency, pool) if pool > 0 else concurrency
        self._encrypted = options.encrypted
        self._journal = journal
        self._retry = options.retry
        self._budget = _Budget(options.retry)
        self._deadline_at = (
            None
            if options.deadline is None
            else asyncio.get_running_loop().time() + options.deadline
        )
        self._on_progress = options.on_progress
        self._send_method = options.send_method
        self._time_stamp = options.time_stamp
        self._key = options.key
        self._chunk_size, self._preparers = sender.prepare_parallelism
        self._counts: Counter[OutcomeStatus] = Counter()
        self._random = random.Random()

    async def run(  # noqa: C901, PLR0915
        self, documents: Iterable[Any] | AsyncIterable[Any]
    ) -> AsyncGenerator[Outcome, None]:
        """Three stages joined by bounded queues: read, prepare (in chunks), send.

        Preparing (serialising and encrypting) a chunk of documents in one executor call
        amortises the hop to the thread or process pool, which costs as much as the
        encryption itself for a 4 KB invoice. Chunks are formed only from plain
        iterables; an async iterable may block between items, so its documents are
        prepared one at a time rather than wait for company.
        """
        chunk_size = 1 if isinstance(documents, AsyncIterable) else self._chunk_size
        chunks: asyncio.Queue[list[_Pending] | None] = asyncio.Queue(self._preparers)
        inbox: asyncio.Queue[_Ready | None] = asyncio.Queue(self._workers)
        outbox: asyncio.Queue[Any] = asyncio.Queue(self._workers * 2)

        async def read() -> None:
            chunk: list[_Pending] = []
            index = 0
            async for document in _aiter(documents):
                pending = self._pending(index, document)
                index += 1
                if isinstance(pending, Outcome):  # settled by an earlier run
                    await outbox.put(self._settled(pending, journal=False))
                    continue
                chunk.append(pending)
                if len(chunk) >= chunk_size:
                    await chunks.put(chunk)
                    chunk = []
            if chunk:
                await chunks.put(chunk)
            for _ in range(self._preparers):
                await chunks.put(None)

        async def prepare() -> None:
            while (chunk := await chunks.get()) is not None:
                payloads = await self._sender.prepare_many(
                    [pending.document for pending in chunk], encrypted=self._encrypted
                )
                for pending, payload in zip(chunk, payloads, strict=True):
                    await inbox.put(_Ready(pending, payload))

        async def work() -> None:
            while (ready := await inbox.get()) is not None:
                await outbox.put(self._settled(await self._process(ready)))

        async def supervise() -> None:
            # Every stage must finish; the first failure (a bug, or the caller's
            # iterable raising) is passed on to the consumer.
            try:
                await asyncio.gather(reader, *preparers)
                for _ in workers:
                    await inbox.put(None)
                await asyncio.gather(*workers)
            except asyncio.CancelledError:
                raise  # the consumer left: nobody would take an error off a full queue
            except BaseException as exc:  # noqa: BLE001
                await outbox.put(exc)
            else:
                await outbox.put(_END)

        reader = asyncio.ensure_future(read())
        preparers = [asyncio.ensure_future(prepare()) for _ in range(self._preparers)]
        workers = [asyncio.ensure_future(work()) for _ in range(self._workers)]
        supervisor = asyncio.ensure_future(supervise())
        tasks = [reader, *preparers, *workers, supervisor]
        try:
            while True:
                item = await outbox.get()
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _pending(self, index: int, document: Any) -> _Pending | Outcome:
        """Look the document up in the journal: its earlier outcome, or what to send."""
        key = self._key(document)
        entry = self._journal.get(key) if self._journal is not None else None
        if entry is not None and entry.settled and entry.outcome is not None:
            return attrs.evolve(entry.outcome, index=index, attempts=0)
        # Sent by an earlier run that did not learn the answer: a 409 is our own commit.
        maybe_committed = entry is not None and (
            entry.in_flight
            or (entry.outcome is not None and entry.outcome.status is OutcomeStatus.UNKNOWN)
        )
        return _Pending(index, key, document, maybe_committed)

    def _settled(self, outcome: Outcome, *, journal: bool = True) -> Outcome:
        """Journal (unless it came from the journal), count and report an outcome."""
        if journal and self._journal is not None:
            self._journal.settled(outcome)
        self._counts[outcome.status] += 1
        if self._on_progress is not None:
            self._on_progress(BatchProgress(sum(self._counts.values()), dict(self._counts)))
        return outcome

    async def _process(self, ready: _Ready) -> Outcome:  # noqa: C901, PLR0912
        pending = ready.pending
        index, key, maybe_committed = pending.index, pending.key, pending.maybe_committed
        self._budget.started()

        def end(status: OutcomeStatus, attempts: int, **fields: Any) -> Outcome:
            return Outcome(index=index, key=key, status=status, attempts=attempts, **fields)

        if isinstance(ready.payload, InvoicingError):  # refused before sending
            return end(OutcomeStatus.REJECTED, 0, error=ready.payload)
        payload = ready.payload
        attempts = 0
        last_error: InvoicingError | None = None
        while True:
            timeout = self._retry.attempt_timeout
            if self._deadline_at is not None:
                remaining = self._deadline_at - asyncio.get_running_loop().time()
                if remaining <= 0:
                    return self._gave_up(end, attempts, maybe_committed, last_error, "deadline")
                timeout = remaining if timeout is None else min(timeout, remaining)
            if attempts and not self._budget.take():
                return self._gave_up(end, attempts, maybe_committed, last_error, "retry budget")
            attempts += 1
            if self._journal is not None and attempts == 1:
                self._journal.sending(key, index)
            try:
                result = await self._sender.send_prepared(
                    payload,
                    encrypted=self._encrypted,
                    send_method=self._send_method,
                    time_stamp=self._time_stamp,
                    timeout=timeout,
                )
            except DuplicateDocumentError as exc:
                if maybe_committed:
                    return end(OutcomeStatus.ACCEPTED, attempts, result=exc.result)
                return end(OutcomeStatus.DUPLICATE, attempts, result=exc.result, error=exc)
            except InvoicingError as exc:
                last_error = exc
                if may_have_committed(exc):
                    maybe_committed = True
                    if not self._retry.resend_ambiguous:
                        return end(OutcomeStatus.UNKNOWN, attempts, error=exc)
                elif not _not_sent(exc):
                    return end(OutcomeStatus.REJECTED, attempts, error=exc)
                if attempts >= self._retry.max_attempts:
                    return self._gave_up(end, attempts, maybe_committed, exc, "attempts")
                delay = self._retry.delay(
                    attempts, retry_after=getattr(exc, "retry_after", None), rng=self._random
                )
            except asyncio.CancelledError:
                self._cancelled(end(OutcomeStatus.UNKNOWN, attempts))
                raise
            else:
                return end(OutcomeStatus.ACCEPTED, attempts, result=result)
            try:
                await asyncio.sleep(delay)  # outside the handler: a cancel here is seen
            except asyncio.CancelledError:
                self._cancelled(end(OutcomeStatus.UNKNOWN, attempts))
                raise

    def _cancelled(self, outcome: Outcome) -> None:
        """Journal a document whose request may be out when the batch is cancelled."""
        if self._journal is not None:
            self._journal.settled(outcome)

    def _gave_up(
        self,
        end: Callable[..., Outcome],
        attempts: int,
        maybe_committed: bool,
        error: InvoicingError | None,
        why: str,
    ) -> Outcome:
        log.debug("giving up after %d attempts (%s): %s", attempts, why, error)
        status = OutcomeStatus.UNKNOWN if maybe_committed else OutcomeStatus.NOT_SENT
        if error is None:
            error = TransportError(f"not sent: the batch's {why} ran out", maybe_sent=False)
        return end(status, attempts, error=error)


def _not_sent(error: InvoicingError) -> bool:
    """Failures that certainly left nothing at the provider and may pass: retry them."""
    if isinstance(error, TransportError):
        return not error.maybe_sent
    return isinstance(error, RateLimitError)


async def _aiter(documents: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    if isinstance(documents, AsyncIterable):
        async for document in documents:
            yield document
    else:
        for document in documents:
            yield document


async def stream(
    sender: Sender, documents: Iterable[Any] | AsyncIterable[Any], options: BatchOptions
) -> AsyncGenerator[Outcome, None]:
    """Yield one outcome per document as it settles (see ``InvoicingClient.submit_stream``)."""
    journal = options.journal
    opened: Journal | None = None
    if journal is not None and not isinstance(journal, Journal):
        journal = opened = Journal(journal)
    if journal is not None:
        journal.open()
    batch = _Batch(sender, options, journal)
    try:
        async with contextlib.aclosing(batch.run(documents)) as outcomes:
            async for outcome in outcomes:
                yield outcome
    finally:
        if opened is not None:
            opened.close()


async def collect(
    sender: Sender, documents: Iterable[Any] | AsyncIterable[Any], options: BatchOptions
) -> list[Outcome]:
    """Every outcome, in input order (see ``InvoicingClient.submit_many``)."""
    async with contextlib.aclosing(stream(sender, documents, options)) as outcomes:
        collected = [outcome async for outcome in outcomes]
    collected.sort(key=lambda outcome: outcome.index)
    return collected
