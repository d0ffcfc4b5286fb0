"""Bulk submission: bounded fan-out, one truthful outcome per document.

A fixed pool of worker coroutines takes documents from a bounded queue fed lazily from
the caller's (async) iterable, so memory follows the concurrency, not the input. Each
document moves one way: read (identified, and looked up in the journal), prepared (on
the event loop by one task ahead of the workers, paced per turn of the loop by
:mod:`._pacer`, which also reads a plain iterable itself when there is no journal to
ask; or in chunks by an ``encrypt_executor``), delivered
(:class:`~._delivery.Delivery`, the retry rules single calls use too), settled (recorded
in the journal and reported). The documents of
a batch share a retry budget, a circuit breaker and an adaptive in-flight limit, so an
outage or a misconfiguration does not multiply traffic.

A document that cannot be identified or prepared ends alone (rejected locally); once the
breaker is open or the deadline has passed, the documents still to come end NOT_SENT
without being prepared. Each input is a document sent as the batch's options say, or a
:class:`~._documents.Submission` with its own options.

With a journal (:mod:`._journal`), its three hooks decide what is sent again and record
what happened; the batch knows nothing of how (a ledger file, an outbox's claims).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import types
from collections import Counter
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._core import calls
from invoicing_async._core.entries import SEND, Verdict
from invoicing_async._core.errors import InvoicingError, ValidationError
from invoicing_async._core.log import delivery as log
from invoicing_async._core.machine import End
from invoicing_async._core.outcomes import BatchProgress, Outcome, OutcomeStatus
from invoicing_async._core.retry import RetryPolicy
from invoicing_async._core.shared import Shared
from invoicing_async._doc.document import (
    Identity,
    Prepared,
    SendOptions,
    Submission,
    describe,
    document_key,
    identify,
    send_options,
)
from invoicing_async._doc.pacer import Pacer

from ._lanes import Lane, Lanes, OneLane
from .delivery import Delivery
from .journal import Ref, Withdrawn

if TYPE_CHECKING:
    from collections.abc import Callable

    from invoicing_async._doc.checked import Checked
    from invoicing_async._doc.prepare import Body, Preparer
    from invoicing_async._io.channel import Channel, Channels
    from invoicing_async._io.transport import Transport

    from .journal import Journal

__all__ = ["Batch", "BatchOptions"]


@attrs.frozen(kw_only=True)
class BatchOptions:
    """The options of one batch, as :meth:`InvoicingClient.submit_stream` documents them."""

    concurrency: int = 32
    #: How documents that are not a :class:`~._documents.Submission` are sent.
    send: SendOptions = attrs.field(factory=SendOptions)
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    deadline: float | None = None
    on_progress: Callable[[BatchProgress], object] | None = None
    key: Callable[[Any], str] = document_key
    #: The largest document sent, in bytes (``None``: the client's limit).
    max_document_size: int | None = None
    #: Each document is checked before it is sent (:func:`invoicing_async.documents.check`'s
    #: errors): one the provider would refuse ends ``rejected``, unsent.
    check: bool = False
    #: A span for the batch, its documents' under it; ``False``: each document's span
    #: starts a trace of its own (an outbox worker's batch, which may never end).
    trace: bool = True
    #: The documents were identified where they entered, and refused there if ambiguous
    #: (an outbox worker's, enqueued by ``ready``): their JSON text is not read twice.
    identified: bool = False


_END = object()
#: Documents read (and looked up in the journal) at once when a journal is in use.
_JOURNAL_READ = 512
#: Documents of a plain iterable read at once without a journal.
_READ = 16
#: Documents held ahead of sending, at least, in a batch of many issuers: the issuers
#: whose documents are among them take turns (one issuer's: as many as its workers).
_LOOKAHEAD = 2048


class _Halted(Exception):  # noqa: N818  (a signal between the batch and its deliveries)
    """Raised as a request would leave a halted batch (:meth:`Batch.halt`): it does not."""


@attrs.frozen
class _Failed:
    """A stage failed: the batch ends with this exception."""

    error: BaseException


class _Pending:
    """A document read from the input, not yet prepared (one per document: slots)."""

    __slots__ = ("_ref", "document", "identity", "index", "key", "options", "verdict")

    def __init__(
        self,
        index: int,
        key: str,
        identity: Identity,
        document: Any,
        options: SendOptions,
    ) -> None:
        self.index = index
        self.key = key
        self.identity = identity
        self.document = document
        self.options = options
        self.verdict = SEND
        self._ref: Ref | None = None

    @property
    def ref(self) -> Ref:
        """The document as a journal knows it (made once)."""
        ref = self._ref
        if ref is None:
            ref = self._ref = Ref.of(self.key, self.identity.issuer)
        return ref

    def __repr__(self) -> str:
        return f"<_Pending {self.index} {self.key}>"


class Batch:
    """One batch: its documents' shared state and its stages (see the module docstring)."""

    def __init__(
        self,
        preparer: Preparer,
        transport: Transport,
        channels: Channels,
        options: BatchOptions,
        journal: Journal | None,
    ) -> None:
        if options.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        transport.ensure_usable()
        self._preparer = preparer
        self._channels = channels
        # More workers than pooled connections would only wait for a slot inside the
        # request's timeout; keep them within the pool.
        pool = transport.limit  # 0: a caller's session without a connection limit
        concurrency = options.concurrency
        self._workers = min(concurrency, pool) if pool > 0 else concurrency
        self._options = options
        #: What marks a document to be checked (``check=True``; loaded only then).
        self._checked: type[Checked] | None = None
        if options.check:
            from invoicing_async._doc.checked import Checked  # noqa: PLC0415

            self._checked = Checked
        self._journal = journal
        self._per_issuer = channels.per_issuer
        #: What the documents share: the batch's (one issuer), else each issuer its own.
        self._shared = self._new_shared()
        #: Why nothing more is sent by anyone (no provider key, the client closed).
        self._stop: InvoicingError | None = None
        #: The issuers whose documents stopped (their breaker opened), and why.
        self._stop_told: dict[str | None, InvoicingError] = {}
        #: Documents marked sending in the journal, not settled: interrupted if cut off.
        self._out: set[_Item] = set()
        #: The deliveries whose request left and is not answered yet (see :meth:`halt`).
        self._flying: set[Delivery] = set()
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._halted = False
        self._on_leave = self._leaving  # made once: every delivery is handed it
        #: The journal recording documents' sending, off the workers (see :meth:`_record`).
        self._recording: set[asyncio.Task[None]] = set()
        self._deadline = (
            None
            if options.deadline is None
            else asyncio.get_running_loop().time() + options.deadline
        )
        self._chunk_size, self._preparers = preparer.parallelism
        self._pacer = Pacer()
        self._counts: Counter[OutcomeStatus] = Counter()
        self._replayed = 0
        self._random = random.Random()

    @property
    def stopped(self) -> InvoicingError | None:
        """Why the batch stopped sending, or ``None``.

        One issuer: its circuit breaker opened. Many: nothing can be sent for any of
        them (no provider key, the client closed); one issuer's breaker stops only its
        own documents.
        """
        if self._stop is None and not self._per_issuer:
            return self._shared.breaker.error
        return self._stop

    @property
    def stopped_issuers(self) -> Mapping[str | None, InvoicingError]:
        """The issuers whose documents this batch stopped sending, and why (read-only).

        Each issuer whose breaker opened (refused credentials, answers blaming the
        configuration again and again); a batch of many issuers goes on for the others.
        """
        return types.MappingProxyType(self._stop_told)

    def _new_shared(self) -> Shared:
        return Shared.of(self._options.retry)

    async def resume(self, issuers: Iterable[str]) -> None:
        """Send ``issuers``' documents again, in this batch (a batch of many issuers).

        Each of them stopped (its breaker opened: its credentials refused, say) and its
        credentials may have changed: its breaker closes, and its lane sends through
        the channel its channels give now (a pool resolves the issuer again: a new key
        gives a new channel); documents still in its lane go with it. If there is
        no channel for it now, its lane stays stopped, with that reason.
        """
        if not self._per_issuer:
            return
        for issuer in issuers:
            self._stop_told.pop(issuer, None)
            lane = self._lanes.peek(issuer)
            if lane is None:  # none open: its next document opens one
                continue
            old: _Issuer = lane.context
            try:
                route = await self._channels.acquire(issuer)
            except InvoicingError as exc:  # still none: its documents stop, saying why
                old.shared.breaker.reset()
                old.shared.breaker.trip(exc)
                continue
            if lane.context is not old or self._lanes.peek(issuer) is not lane:
                self._channels.release(route)  # the lane changed meanwhile
                continue
            lane.context = _Issuer(issuer, route, old.shared)
            old.shared.breaker.reset()
            self._channels.release(old.route)

    def halt(self) -> None:
        """Let no request leave from now on; those out go on (a graceful stop).

        A request about to leave (its token just in hand) does not: its document waits,
        certainly not sent, for the batch to be closed, and is recorded ``NOT_SENT``
        with the requests that did leave (none: it was never sent).
        """
        self._halted = True

    async def none_out(self) -> None:
        """Return once no request that left is unanswered (see :meth:`halt`)."""
        await self._quiet.wait()

    def _leaving(self, delivery: Delivery) -> None:
        """A request of ``delivery`` leaves, unless the batch is halted."""
        if self._halted:
            raise _Halted
        self._flying.add(delivery)
        self._quiet.clear()

    def _landed(self, delivery: Delivery) -> None:
        """``delivery``'s attempt ended: its request, if one left, is no longer out."""
        flying = self._flying
        if flying:
            flying.discard(delivery)
            if not flying:
                self._quiet.set()

    async def run(
        self, documents: Iterable[Any] | AsyncIterable[Any]
    ) -> AsyncGenerator[Outcome, None]:
        """Stages joined by bounded queues: read, prepare, send.

        Yields one outcome per document as it settles. Close the generator to stop
        early: the workers are cancelled, and documents in flight are recorded in the
        journal as interrupted.

        Without an executor one task prepares the documents on the loop, ahead of the
        workers (see :meth:`_prepare_ahead`), and without a journal to ask it also reads
        a plain iterable itself: no reader. With an executor, preparing a
        chunk of documents in one call amortises the hop to the thread or process pool,
        which costs as much as the encryption itself for a 4 KB invoice. Chunks are
        formed only from plain iterables; an async iterable may block between items, so
        its documents are prepared one at a time rather than wait for company.

        A supervisor watches every stage: the first one to fail (a bug, the caller's
        iterable or callback raising, the journal's disk filling) cancels the others and
        the failure reaches the consumer, whatever queue was full at that moment.
        """
        self._lanes = self._new_lanes()
        self._outbox: asyncio.Queue[Any] = asyncio.Queue(self._workers * 2)
        reader, preparers = self._readers(documents)
        self._telemetry = calls.Batch("invoicing.batch" if self._options.trace else None, {})
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
            recording = list(self._recording)
            for task in [*tasks, *recording]:
                task.cancel()
            await asyncio.gather(*tasks, *recording, return_exceptions=True)
            self._lanes.drop_all()  # every issuer's route let go, a batch cut off too
            self._interrupted()
            self._telemetry.close()

    def _new_lanes(self) -> Lanes[_Item] | OneLane[_Item]:
        if self._per_issuer:
            return Lanes(
                max(self._workers * 16, _LOOKAHEAD),
                limit=self._workers,
                on_empty=self._lane_done,
                keep_idle=self._channels.max_issuers,
            )
        return OneLane(2 * self._workers, limit=self._workers)  # a document ready for each

    def _readers(
        self, documents: Iterable[Any] | AsyncIterable[Any]
    ) -> tuple[asyncio.Future[None], list[asyncio.Future[None]]]:
        """The task that reads the input, and the tasks that prepare (with an executor).

        With a journal: one lookup (and one commit of sending records) for many
        documents; without, a few at a time; an async iterable one at a time.
        """
        streaming = isinstance(documents, AsyncIterable)
        chunk_size = 1 if streaming else self._chunk_size
        self._preparing = self._preparers or 1
        self._chunks: asyncio.Queue[list[_Pending] | None] = asyncio.Queue(self._preparing)
        if streaming:
            read_size = 1
        elif self._journal is not None:
            read_size = max(chunk_size, _JOURNAL_READ)
        else:
            read_size = max(chunk_size, _READ)
        if self._preparers:  # an executor: a reader, and chunks prepared elsewhere
            reader = asyncio.ensure_future(self._read_all(documents, read_size))
            return reader, [asyncio.ensure_future(self._prepare()) for _ in range(self._preparing)]
        if self._journal is None and not isinstance(documents, AsyncIterable):
            # Nothing to ask a journal, nothing to prepare elsewhere: the task that
            # prepares the documents takes them from the input itself.
            return asyncio.ensure_future(self._prepare_ahead(iter(enumerate(documents)))), []
        # One task reads, asks the journal a chunk ahead, and prepares.
        return asyncio.ensure_future(self._read_and_prepare(documents, read_size)), []

    async def _read_all(self, documents: Iterable[Any] | AsyncIterable[Any], size: int) -> None:
        async for read in _chunks(documents, size):
            await self._dispatch(await self._read(read))
        for _ in range(self._preparing):
            await self._chunks.put(None)

    async def _read_and_prepare(
        self, documents: Iterable[Any] | AsyncIterable[Any], size: int
    ) -> None:
        """Read, look up in the journal and prepare on the loop, in one task.

        From a plain iterable, the journal's answer for the next chunk (its writer
        thread's round trip) is awaited while this one's documents are prepared. An
        async iterable is never read ahead: its next document may be long in coming (an
        outbox worker's next claim), and this one must not wait for it.
        """
        if self._journal is None or isinstance(documents, AsyncIterable):
            async for read in _chunks(documents, size):
                await self._prepare_items(await self._read(read))
            return
        ahead: asyncio.Future[list[_Pending | Outcome]] | None = None
        try:
            async for read in _chunks(documents, size):
                # The next chunk's lookup is ``ahead`` before anything is awaited: cut
                # off here, this task cancels it (it never outlives the batch's journal).
                previous, ahead = ahead, asyncio.ensure_future(self._read(read))
                if previous is not None:
                    await self._prepare_items(await previous)
            if ahead is not None:
                await self._prepare_items(await ahead)
                ahead = None
        finally:
            if ahead is not None and not ahead.done():
                ahead.cancel()

    async def _prepare_items(self, items: list[_Pending | Outcome]) -> None:
        for item in items:
            if isinstance(item, Outcome):  # settled already, or not to be sent: not recorded
                await self._outbox.put(self._settled(item, None, record=False))
            else:
                await self._prepare_paced(item)

    async def _dispatch(self, items: list[_Pending | Outcome]) -> None:
        """Documents to prepare go on in chunks; outcomes known already are reported."""
        chunk: list[_Pending] = []
        for item in items:
            if isinstance(item, Outcome):  # settled already, or not to be sent: not recorded
                await self._outbox.put(self._settled(item, None, record=False))
            else:
                chunk.append(item)
        size = self._chunk_size
        for start in range(0, len(chunk), size):
            await self._chunks.put(chunk[start : start + size])

    async def _prepare(self) -> None:
        while (chunk := await self._chunks.get()) is not None:
            bodies = await self._preparer.prepare_many(
                [(pending.document, pending.options.encrypted) for pending in chunk]
            )
            for pending, body in zip(chunk, bodies, strict=True):
                await self._enqueue(pending, body)

    async def _prepare_paced(self, pending: _Pending) -> None:
        """One document prepared on the loop, within the pacer's budget, and enqueued.

        A large one (or any, with an executor) is encrypted elsewhere, off the budget.
        """
        pacer = self._pacer
        if not pacer.free:
            await pacer.turn()
        started = time.perf_counter()
        body = self._preparer.prepare_here(pending.document, encrypted=pending.options.encrypted)
        pacer.spend(time.perf_counter() - started)
        if isinstance(body, InvoicingError):
            await self._enqueue(pending, body)
            return
        made, plain = body
        if made is None:  # to be encrypted elsewhere
            await self._enqueue(pending, await self._preparer.elsewhere(plain))
        else:
            await self._enqueue(pending, (made, plain))

    async def _work(self) -> None:
        while (taken := await self._lanes.take()) is not None:
            with taken[1].call:  # the document's: its span, its log records' fields
                await self._attempt(*taken)

    async def _prepare_ahead(self, source: Iterator[tuple[int, Any]]) -> None:
        """Take the documents of a plain iterable and prepare them for the workers.

        One task on the loop, in slices of the pacer's budget per turn of the loop: when
        every worker waits for an answer it fills the time the loop would idle (and the
        provider wait for the next burst of requests), and a worker back from an answer
        finds its next document ready; when the loop is busy, the others' callbacks run
        between the slices.
        """
        for index, document in source:
            item = self._identify(index, document)
            if isinstance(item, _Pending):
                item = self._unless_stopped(item)
            if isinstance(item, Outcome):  # not to be sent: not recorded
                await self._outbox.put(self._settled(item, None, record=False))
                continue
            await self._prepare_paced(item)

    async def _supervise(
        self,
        reader: asyncio.Future[None],
        preparers: Sequence[asyncio.Future[None]],
        workers: Sequence[asyncio.Future[None]],
    ) -> None:
        """Wait for every stage; on the first failure, stop them all and pass it on."""

        async def stop_workers() -> None:
            self._lanes.close()

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

        The journal is asked about the whole chunk at once.
        """
        identified = [self._identify(index, document) for index, document in read]
        if self._journal is not None:
            pending = [item for item in identified if isinstance(item, _Pending)]
            if pending:
                verdicts = await self._journal.lookup([item.ref for item in pending])
                found = dict(zip(map(id, pending), verdicts, strict=True))
                identified = [
                    item if isinstance(item, Outcome) else self._verdict(item, found[id(item)])
                    for item in identified
                ]
        return [
            item if isinstance(item, Outcome) else self._unless_stopped(item) for item in identified
        ]

    def _unless_stopped(self, item: _Pending) -> _Pending | Outcome:
        """Once nothing more will be sent, say so without preparing the document."""
        stopped = self.stopped
        if stopped is None and not self._expired():
            return item
        return self._delivery(item).give_up("deadline" if stopped is None else "stop", stopped)

    @staticmethod
    def _verdict(item: _Pending, verdict: Verdict) -> _Pending | Outcome:
        if verdict.replay is not None:
            return attrs.evolve(verdict.replay, index=item.index, attempts=0, replayed=True)
        if verdict is not SEND:
            item.verdict = verdict
        return item

    def _identify(self, index: int, document: Any) -> _Pending | Outcome:
        """The document's key and identity, or its refusal if they cannot be computed."""
        options = self._options.send
        key = issuer = None
        if isinstance(document, Submission):
            options = send_options(document, options)
            key, issuer = document.key, document.issuer
            document = document.document
        checked = self._checked
        if checked is not None and not isinstance(document, checked):
            document = checked(document)
        try:
            if key is None and self._options.key is not document_key:
                key = self._options.key(document)
        except Exception as exc:  # noqa: BLE001  (a caller's key function may raise anything)
            error = ValidationError(
                f"the document's identity cannot be computed: {type(exc).__name__}: "
                f"{str(exc)[:200]}"
            )
            key = f"index:{index}"
            return Delivery(key, index, Identity(), policy=RetryPolicy()).refuse(error)
        try:
            described, identity = (describe if self._options.identified else identify)(document)
        except InvoicingError as exc:  # ambiguous JSON: refused where it is prepared, recorded
            (described, identity), document = describe(document), exc
        key = described if key is None else key
        if issuer is not None:
            identity = identity._replace(issuer=issuer)
        return _Pending(index, key, identity, document, options)

    def _expired(self) -> bool:
        return self._deadline is not None and asyncio.get_running_loop().time() >= self._deadline

    def _delivery(self, pending: _Pending, shared: Shared | None = None) -> Delivery:
        return Delivery(
            pending.key,
            pending.index,
            pending.identity,
            policy=self._options.retry,
            shared=shared or self._shared,
            maybe_committed=pending.verdict.maybe_committed,
            deadline=self._deadline,
            rng=self._random,
            on_leave=self._on_leave,
        )

    def _settled(
        self, outcome: Outcome, prepared: Prepared | None, *, record: bool = True
    ) -> Outcome:
        """Record (unless read from the journal), count and report an outcome."""
        if outcome.replayed:
            self._replayed += 1
        elif record and self._journal is not None:
            self._journal.after_outcome(outcome, prepared)
        self._counts[outcome.status] += 1
        self._telemetry.settled(outcome, count=not outcome.replayed)
        if self._options.on_progress is not None:
            self._options.on_progress(
                BatchProgress(sum(self._counts.values()), dict(self._counts), self._replayed)
            )
        return outcome

    # --- sending: each document in its issuer's lane, an attempt per turn -----------------

    async def _enqueue(self, pending: _Pending, ready: Body) -> None:
        """Put a prepared document in its issuer's lane, or settle it now.

        Settled now: refused before sending, refused before with the same content, or no
        credentials for its issuer.
        """
        if isinstance(ready, InvoicingError):  # cannot be sent
            outcome = self._delivery(pending).refuse(ready)
            if self._shared.breaker.everyone:
                self._stop_all(ready)
            await self._outbox.put(self._settled(outcome, None))
            return
        body, plain = ready
        prepared = Prepared(pending.key, pending.identity, body, pending.options, plain=plain)
        verdict = pending.verdict
        if verdict.refused is not None and prepared.digest == verdict.refused_digest:
            # Refused for good before, and the content has not changed since.
            refused = attrs.evolve(verdict.refused, index=pending.index, replayed=True)
            await self._outbox.put(self._settled(attrs.evolve(refused, attempts=0), prepared))
            return
        issuer_of = pending.identity.issuer
        found = self._lanes.find(issuer_of if self._per_issuer else None)
        lane = found if found is not None else await self._open_lane(issuer_of)
        if isinstance(lane, InvoicingError):  # no (usable) credentials for the issuer
            # Its own shared state: the batch's is no issuer's to stop.
            outcome = self._delivery(pending, self._new_shared()).refuse(lane)
            await self._outbox.put(self._settled(outcome, prepared))
            return
        issuer: _Issuer = lane.context
        issuer.shared.budget.started()
        call = self._telemetry.document(pending.key, pending.identity.issuer)
        item = _Item(pending, prepared, self._delivery(pending, issuer.shared), call)
        if not self._lanes.put_now(lane, item):
            await self._lanes.put(lane, item)

    async def _open_lane(self, issuer: str | None) -> Lane[_Item] | InvoicingError:
        """The lane of ``issuer``'s documents, opened with its route; or why there is none."""
        key = issuer if self._per_issuer else None
        try:
            route = await self._channels.acquire(issuer)
        except InvoicingError as exc:  # no credentials for it: the core says what follows
            return exc
        lane = self._lanes.find(key)
        if lane is not None:  # opened meanwhile by another preparer
            self._channels.release(route)
            return lane
        shared = self._new_shared() if self._per_issuer else self._shared
        return self._lanes.open(key, _Issuer(issuer, route, shared))

    def _lane_done(self, lane: Lane[_Item]) -> None:
        """An issuer's lane holds nothing any more: its route is let go."""
        issuer: _Issuer = lane.context
        self._channels.release(issuer.route)

    async def _attempt(self, lane: Lane[_Item], item: _Item, slot: int) -> None:
        """One turn of a document: at most one attempt, then settled or back in its lane."""
        if item.failure is not None:  # the journal failed: the batch fails with it
            self._lanes.sent(lane, slot, None)
            raise item.failure
        issuer: _Issuer = lane.context
        delivery = item.delivery
        stopped = self._stop or (issuer.shared.breaker.error if not item.started else None)
        if stopped is not None:  # nothing more is sent (and never marked sending)
            self._lanes.sent(lane, slot, None)
            await self._finish(lane, item, delivery.give_up("stop", stopped))
            return
        journal = self._journal
        if not item.started:
            item.started = True
            if journal is not None:
                self._out.add(item)
                if journal.waits_on_others:
                    self._lanes.sent(lane, slot, None)
                    self._record(lane, item)
                    return
                try:
                    await journal.before_send(item.pending.ref)
                except Withdrawn:
                    self._lanes.sent(lane, slot, None)
                    await self._finish(lane, item, delivery.give_up("lease lost"))
                    return
                except BaseException:
                    self._lanes.sent(lane, slot, None)
                    raise
        await self._step(lane, item, slot)

    async def _step(self, lane: Lane[_Item], item: _Item, slot: int) -> None:
        """One attempt of ``item``, then settled or back in its lane.

        Neither if the batch halted as its request would leave: it did not, and is
        recorded ``NOT_SENT`` when the batch is closed.
        """
        delivery = item.delivery
        try:
            decision = await delivery.step(lane.context.route, item.prepared)
        except _Halted:
            return
        finally:
            self._lanes.sent(lane, slot, delivery.core.load)
            self._landed(delivery)
        if isinstance(decision, End):
            await self._finish(lane, item, delivery.outcome(decision))
            return
        if decision.pause:
            self._lanes.pause(lane, decision.seconds)  # the issuer was asked to slow down
        self._lanes.later(lane, item, decision.seconds)

    def _record(self, lane: Lane[_Item], item: _Item) -> None:
        """Have the journal record that ``item`` is sending; then it goes, first in its lane.

        Off the worker, holding no room, when the journal says its ``before_send`` may
        wait for another document (:attr:`~._journal.Journal.waits_on_others`): a gate of
        the journal's owner (a drainer lets one probe through while the provider is
        down) may wait for another document of the batch to settle, one in its retry
        wait, say, and that one needs a worker and room to be sent. A worker waiting
        there would make them wait for each other once every worker did.
        """
        task = asyncio.ensure_future(self._recorded(lane, item))
        self._recording.add(task)
        task.add_done_callback(self._recording.discard)

    async def _recorded(self, lane: Lane[_Item], item: _Item) -> None:
        assert self._journal is not None  # noqa: S101  (recorded only with one)
        with item.call:
            try:
                await self._journal.before_send(item.pending.ref)
            except Withdrawn:
                await self._finish(lane, item, item.delivery.give_up("lease lost"))
                return
            except Exception as exc:  # noqa: BLE001  (raised by the worker that takes it)
                item.failure = exc
        self._lanes.later(lane, item, 0.0)

    async def _finish(self, lane: Lane[_Item], item: _Item, outcome: Outcome) -> None:
        self._out.discard(item)
        self._telemetry.finished(item.call, outcome)
        issuer: _Issuer = lane.context
        breaker = issuer.shared.breaker
        error = breaker.error
        if error is not None:
            if breaker.everyone:
                self._stop_all(error)
            elif issuer.key not in self._stop_told:
                self._stop_told[issuer.key] = error
                if self._per_issuer:
                    log.warning(
                        "stopping issuer %s's documents: %s",
                        issuer.key,
                        error,
                        extra={"invoicing.issuer": issuer.key},
                    )
                else:
                    log.warning("stopping the batch: %s", error)
        await self._outbox.put(self._settled(outcome, item.prepared))
        self._lanes.settled(lane)

    def _stop_all(self, error: InvoicingError) -> None:
        """Nothing more is sent for anyone (said once)."""
        if self._stop is None:
            self._stop = error
            self._shared.breaker.trip(error)
            log.warning("stopping the batch: %s", error)

    def _interrupted(self) -> None:
        """Record the documents cut off after they were marked sending."""
        journal = self._journal
        if journal is None:
            return
        for item in self._out:
            with contextlib.suppress(Exception):  # the journal may be what failed
                journal.after_outcome(item.delivery.interrupted(), item.prepared)
        self._out.clear()


class _Item:
    """A document in its issuer's lane: prepared, and its attempts so far."""

    __slots__ = ("call", "delivery", "failure", "pending", "prepared", "started")

    def __init__(
        self, pending: _Pending, prepared: Prepared, delivery: Delivery, call: calls.Call
    ) -> None:
        self.pending = pending
        self.prepared = prepared
        self.delivery = delivery
        #: Its telemetry: a span of its own, the fields of its log records.
        self.call = call
        #: Its first turn came (the journal was told it is sending).
        self.started = False
        #: The journal failed to record its sending.
        self.failure: Exception | None = None


@attrs.frozen
class _Issuer:
    """What a batch keeps for one issuer: its route, and what its documents share."""

    key: str | None
    route: Channel
    shared: Shared


async def _chunks(
    documents: Iterable[Any] | AsyncIterable[Any], size: int
) -> AsyncIterator[list[tuple[int, Any]]]:
    """``(index, document)`` pairs of the input, ``size`` at a time."""
    read: list[tuple[int, Any]] = []
    index = 0
    async for document in _aiter(documents):
        read.append((index, document))
        index += 1
        if len(read) >= size:
            yield read
            read = []
    if read:
        yield read


async def _aiter(documents: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    if isinstance(documents, AsyncIterable):
        async for document in documents:
            yield document
    else:
        for document in documents:
            yield document
