"""Bulk submission: bounded fan-out, one truthful outcome per document.

A fixed pool of worker coroutines takes documents from a bounded queue fed lazily from
the caller's (async) iterable, so memory follows the concurrency, not the input. Each
document ends in exactly one :class:`~invoicing_async.Outcome`, decided by its
:class:`~._delivery.Delivery` (the retry rules single calls use too); the documents of a
batch share a retry budget, a circuit breaker and an adaptive in-flight limit, so an
outage or a misconfiguration does not multiply traffic.

A document that cannot be identified or prepared ends alone (rejected locally); once the
breaker is open or the deadline has passed, the documents still to come end NOT_SENT
without being prepared.

With a ledger (``journal=``), documents are looked up a chunk at a time as they are read
(:func:`~._ledger._rules.decide` says whether to send each or report what is recorded),
``sending`` is durable before a document's first request leaves, and every outcome is
recorded; the ledger's writes never block the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ._delivery import Breaker, Budget, Delivery, Shared, stops_everything
from ._documents import Identity, describe, document_key
from ._errors import InvoicingError, LedgerError, ValidationError
from ._ledger._entry import fingerprint as content_fingerprint
from ._ledger._rules import SEND, decide, needs_fingerprint
from ._ledger._sqlite import Ledger, held
from ._limiter import Limiter
from ._outcomes import BatchProgress, Outcome, OutcomeStatus, RetryPolicy

if TYPE_CHECKING:
    import datetime as dt
    import os
    from collections.abc import Callable, Mapping

    from ._ledger._entry import Backend, LedgerEntry
    from ._models import DocumentResult

__all__ = ["BatchOptions", "Sender", "collect", "stream"]

log = logging.getLogger("invoicing_async.batch")


class Sender(Protocol):
    """What a batch needs of a session: prepare documents, send one, and two sizes."""

    def ensure_usable(self) -> None:
        """Raise :class:`~invoicing_async.ClientStateError` if nothing can be sent."""

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
    journal: str | os.PathLike[str] | Ledger | Backend | None = None
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    deadline: float | None = None
    on_progress: Callable[[BatchProgress], object] | None = None
    send_method: str | None = None
    time_stamp: dt.datetime | str | None = None
    key: Callable[[Any], str] = document_key


_END = object()
#: Documents read (and looked up in the ledger) at once when a ledger is in use.
_LEDGER_READ = 512


@attrs.frozen
class _Failed:
    """A stage failed: the batch ends with this exception."""

    error: BaseException


@attrs.frozen
class _Pending:
    """A document read from the input, not yet prepared."""

    index: int
    key: str
    identity: Identity
    document: Any = attrs.field(repr=False)
    maybe_committed: bool


@attrs.frozen
class _Ready:
    """A prepared document: the body to send, or why it cannot be sent."""

    pending: _Pending
    payload: bytes | InvoicingError = attrs.field(repr=False)


class _Batch:
    def __init__(self, sender: Sender, options: BatchOptions, ledger: Backend | None) -> None:
        if options.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._sender = sender
        # More workers than pooled connections would only wait for a slot inside the
        # request's timeout; keep them within the pool.
        pool = sender.limit  # 0: a caller's session without a connection limit
        concurrency = options.concurrency
        self._workers = min(concurrency, pool) if pool > 0 else concurrency
        self._options = options
        self._ledger = ledger
        self._shared = Shared(
            Budget(options.retry),
            Breaker(options.retry.circuit_breaker),
            Limiter(self._workers),
        )
        self._deadline = (
            None
            if options.deadline is None
            else asyncio.get_running_loop().time() + options.deadline
        )
        self._chunk_size, self._preparers = sender.prepare_parallelism
        self._counts: Counter[OutcomeStatus] = Counter()
        self._random = random.Random()

    @property
    def stopped(self) -> InvoicingError | None:
        """Why the batch stopped sending (its circuit breaker opened), or ``None``."""
        return self._shared.breaker.error

    async def run(
        self, documents: Iterable[Any] | AsyncIterable[Any]
    ) -> AsyncGenerator[Outcome, None]:
        """Three stages joined by bounded queues: read, prepare (in chunks), send.

        Preparing (serialising and encrypting) a chunk of documents in one executor call
        amortises the hop to the thread or process pool, which costs as much as the
        encryption itself for a 4 KB invoice. Chunks are formed only from plain
        iterables; an async iterable may block between items, so its documents are
        prepared one at a time rather than wait for company.

        A supervisor watches every stage: the first one to fail (a bug, the caller's
        iterable or callback raising, the journal's disk filling) cancels the others and
        the failure reaches the consumer, whatever queue was full at that moment.
        """
        chunk_size = 1 if isinstance(documents, AsyncIterable) else self._chunk_size
        self._chunks: asyncio.Queue[list[_Pending] | None] = asyncio.Queue(self._preparers)
        self._inbox: asyncio.Queue[_Ready | None] = asyncio.Queue(self._workers)
        self._outbox: asyncio.Queue[Any] = asyncio.Queue(self._workers * 2)
        # With a ledger: one lookup (and one commit of sending records) for several chunks.
        ledgered = self._ledger is not None and chunk_size > 1
        read_size = max(chunk_size, _LEDGER_READ) if ledgered else chunk_size
        reader = asyncio.ensure_future(self._read_all(documents, read_size))
        preparers = [asyncio.ensure_future(self._prepare()) for _ in range(self._preparers)]
        workers = [asyncio.ensure_future(self._work()) for _ in range(self._workers)]
        supervisor = asyncio.ensure_future(self._supervise(reader, preparers, workers))
        tasks = [reader, *preparers, *workers, supervisor]
        try:
            while True:
                item = await self._outbox.get()
                if item is _END:
                    break
                if isinstance(item, _Failed):
                    raise item.error
                yield item
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _read_all(self, documents: Iterable[Any] | AsyncIterable[Any], size: int) -> None:
        read: list[tuple[int, Any]] = []
        index = 0
        async for document in _aiter(documents):
            read.append((index, document))
            index += 1
            if len(read) >= size:
                await self._dispatch(await self._read(read))
                read = []
        if read:
            await self._dispatch(await self._read(read))
        for _ in range(self._preparers):
            await self._chunks.put(None)

    async def _dispatch(self, items: list[_Pending | Outcome]) -> None:
        """Documents to prepare go on in chunks; outcomes known already are reported."""
        chunk: list[_Pending] = []
        for item in items:
            if isinstance(item, Outcome):  # settled already, or cannot be sent
                await self._outbox.put(self._settled(item, record=item.attempts > 0))
            else:
                chunk.append(item)
        size = self._chunk_size
        for start in range(0, len(chunk), size):
            await self._chunks.put(chunk[start : start + size])

    async def _prepare(self) -> None:
        while (chunk := await self._chunks.get()) is not None:
            payloads = await self._sender.prepare_many(
                [pending.document for pending in chunk], encrypted=self._options.encrypted
            )
            for pending, payload in zip(chunk, payloads, strict=True):
                await self._inbox.put(_Ready(pending, payload))

    async def _work(self) -> None:
        while (ready := await self._inbox.get()) is not None:
            outcome = await self._deliver(ready)
            # A definite refusal is final for this content only: keep its fingerprint.
            refused = (
                content_fingerprint(ready.pending.document)
                if self._ledger is not None and needs_fingerprint(outcome)
                else None
            )
            await self._outbox.put(self._settled(outcome, fingerprint=refused))

    async def _supervise(
        self,
        reader: asyncio.Future[None],
        preparers: Sequence[asyncio.Future[None]],
        workers: Sequence[asyncio.Future[None]],
    ) -> None:
        """Wait for every stage; on the first failure, stop them all and pass it on."""

        async def stop_workers() -> None:
            for _ in workers:
                await self._inbox.put(None)

        stages = [reader, *preparers, *workers]
        watched: set[asyncio.Future[None]] = set(stages)
        stopping = False
        failure: BaseException | None = None
        while watched and failure is None:
            done, watched = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            failure = next(
                (task.exception() for task in done if not task.cancelled() and task.exception()),
                None,
            )
            if not stopping and reader.done() and all(p.done() for p in preparers):
                stopping = True
                watched.add(asyncio.ensure_future(stop_workers()))
        if failure is None:
            await self._outbox.put(_END)
            return
        for task in [*stages, *watched]:
            task.cancel()
        await asyncio.gather(*stages, *watched, return_exceptions=True)
        await self._outbox.put(_Failed(failure))

    async def _read(self, read: list[tuple[int, Any]]) -> list[_Pending | Outcome]:
        """What to do with documents just read: send each, or its outcome already.

        The ledger is asked about the whole chunk in one indexed query.
        """
        identified = [self._identify(index, document) for index, document in read]
        entries: Mapping[str, LedgerEntry] = {}
        if self._ledger is not None:
            keys = [item.key for item in identified if isinstance(item, _Pending)]
            if keys:
                entries = await self._ledger.lookup(keys)
        resend_ambiguous = self._options.retry.resend_ambiguous
        decided: list[_Pending | Outcome] = []
        for item in identified:
            if isinstance(item, _Pending):
                entry = entries.get(item.key)
                verdict = SEND if entry is None else decide(
                    entry,
                    index=item.index,
                    resend_ambiguous=resend_ambiguous,
                    fingerprint=functools.partial(content_fingerprint, item.document),
                )  # fmt: skip
                if verdict.replay is not None:
                    decided.append(verdict.replay)
                    continue
                if verdict.maybe_committed:
                    # Sent by an earlier run that did not learn the answer: a 409 is our
                    # own commit.
                    item = attrs.evolve(item, maybe_committed=True)  # noqa: PLW2901
                stopped = self._shared.breaker.error
                if stopped is not None or self._expired():
                    # Nothing more will be sent: say so without preparing the document.
                    why = "deadline" if stopped is None else "stop"
                    decided.append(self._delivery(item).give_up(why, stopped))
                    continue
            decided.append(item)
        if self._ledger is not None and resend_ambiguous:
            # Sending records of new documents committed while they are prepared (see
            # Ledger.will_send); never ahead when unknown ones are not to be re-sent.
            fresh = [d.key for d in decided if isinstance(d, _Pending) and d.key not in entries]
            if fresh:
                self._ledger.will_send(fresh)
        return decided

    def _identify(self, index: int, document: Any) -> _Pending | Outcome:
        """The document's key and identity, or its refusal if they cannot be computed."""
        try:
            if self._options.key is document_key:
                key, identity = describe(document)
            else:
                key, identity = self._options.key(document), describe(document)[1]
        except Exception as exc:  # noqa: BLE001  (a caller's key function may raise anything)
            error = ValidationError(
                f"the document's identity cannot be computed: {type(exc).__name__}: "
                f"{str(exc)[:200]}"
            )
            key = f"index:{index}"
            return Delivery(key=key, index=index, identity=Identity(), policy=RetryPolicy()).refuse(
                error
            )
        return _Pending(index, key, identity, document, maybe_committed=False)

    def _expired(self) -> bool:
        return self._deadline is not None and asyncio.get_running_loop().time() >= self._deadline

    def _delivery(self, pending: _Pending) -> Delivery:
        return Delivery(
            key=pending.key,
            index=pending.index,
            identity=pending.identity,
            policy=self._options.retry,
            maybe_committed=pending.maybe_committed,
            deadline=self._deadline,
        )

    def _settled(
        self, outcome: Outcome, *, record: bool = True, fingerprint: str | None = None
    ) -> Outcome:
        """Record (unless it came from the ledger), count and report an outcome."""
        if record and self._ledger is not None:
            self._ledger.settled(outcome, fingerprint)
        self._counts[outcome.status] += 1
        if self._options.on_progress is not None:
            self._options.on_progress(BatchProgress(sum(self._counts.values()), dict(self._counts)))
        return outcome

    async def _deliver(self, ready: _Ready) -> Outcome:
        pending = ready.pending
        delivery = self._delivery(pending)
        self._shared.budget.started()
        if isinstance(ready.payload, InvoicingError):  # refused before sending
            if stops_everything(ready.payload):
                self._shared.breaker.trip(ready.payload)
                return delivery.give_up("stop", ready.payload)
            return delivery.refuse(ready.payload)
        options = self._options
        send = functools.partial(
            self._sender.send_prepared,
            ready.payload,
            encrypted=options.encrypted,
            send_method=options.send_method,
            time_stamp=options.time_stamp,
        )
        ledger = self._ledger
        recorded: list[bool] = []  # the sending record was started (maybe committed)

        async def sending() -> None:
            assert ledger is not None  # noqa: S101
            recorded.append(True)
            await ledger.sending(pending.key, pending.index)

        try:
            return await delivery.run(
                send,
                shared=self._shared,
                before_first=None if ledger is None else sending,
                rng=self._random,
            )
        except LedgerError as exc:
            if exc.reason != "lease_lost":
                raise
            # An outbox worker's claim was taken over: the new holder sends it.
            return delivery.give_up("lease lost", exc)
        except asyncio.CancelledError:
            if ledger is not None and (delivery.attempts or recorded):
                with contextlib.suppress(Exception):  # the ledger may be what failed
                    ledger.settled(delivery.interrupted(), None)
            raise


async def _aiter(documents: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    if isinstance(documents, AsyncIterable):
        async for document in documents:
            yield document
    else:
        for document in documents:
            yield document


@contextlib.asynccontextmanager
async def _running(
    sender: Sender, documents: Iterable[Any] | AsyncIterable[Any], options: BatchOptions
) -> AsyncIterator[AsyncGenerator[Outcome, None]]:
    """A batch's outcomes as they settle, with its ledger held for its life."""
    sender.ensure_usable()
    async with held(options.journal) as ledger:
        batch = _Batch(sender, options, ledger)
        async with contextlib.aclosing(batch.run(documents)) as outcomes:
            yield outcomes


async def stream(
    sender: Sender, documents: Iterable[Any] | AsyncIterable[Any], options: BatchOptions
) -> AsyncGenerator[Outcome, None]:
    """Yield one outcome per document as it settles (see ``InvoicingClient.submit_stream``)."""
    async with _running(sender, documents, options) as outcomes:
        async for outcome in outcomes:
            yield outcome


async def collect(
    sender: Sender, documents: Iterable[Any] | AsyncIterable[Any], options: BatchOptions
) -> list[Outcome]:
    """Every outcome, in input order (see ``InvoicingClient.submit_many``)."""
    async with _running(sender, documents, options) as outcomes:
        collected = [outcome async for outcome in outcomes]
    collected.sort(key=lambda outcome: outcome.index)
    return collected
