"""Bulk submission logic against a scripted in-memory provider (no HTTP).

The provider fake commits documents and detects duplicates like the real service, with
faults scripted per document and attempt, so every classification rule is checked
exactly. Tests through real HTTP against the sandbox are in test_batch_sandbox.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import tracemalloc

import attrs
import pytest
from helpers import collect

from invoicing_async import (
    CredentialsError,
    DocumentResult,
    DuplicateDocumentError,
    Ledger,
    OutcomeStatus,
    RetryPolicy,
    ServerError,
    TransportError,
    ValidationError,
    document_key,
)
from invoicing_async._doc.prepare import _serialized
from invoicing_async._durable.ledger import ledger_journal
from invoicing_async._send.batch import Batch, BatchOptions
from invoicing_async._send.journal import Ref

FAST = RetryPolicy(base_delay=0, max_delay=0, attempt_timeout=None)


class FakeProvider:
    """Commits documents by identity; faults are scripted per key, one per attempt.

    Fault names: "refused" (never sent), "400", "429", "500" (before commit),
    "commit-500" and "commit-reset" (committed, then the answer is lost).
    """

    limit = 100
    parallelism = (16, 2)

    per_issuer = False

    def ensure_usable(self):
        pass

    async def acquire(self, issuer):
        return self

    def release(self, route):
        pass

    def __init__(self, script: dict[str, list[str]] | None = None) -> None:
        self.script = script or {}
        self.committed: dict[str, DocumentResult] = {}
        self.commits: dict[str, int] = {}
        self.requests: list[str] = []
        self.in_flight = 0
        self.peak_in_flight = 0

    async def prepare_many(self, documents):
        return [_serialized(document) for document, _ in documents]

    async def send(self, prepared, *, timeout, leaving):
        leaving()  # no token to wait for: the request leaves at once
        key = document_key(prepared.body)
        self.requests.append(key)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)
            fault = self.script.get(key, []).pop(0) if self.script.get(key) else None
            if fault == "refused":
                raise TransportError("refused", maybe_sent=False)
            if fault == "400":
                raise ValidationError("bad", status=400)
            if fault == "429":
                from invoicing_async import RateLimitError  # noqa: PLC0415

                raise RateLimitError("slow down", status=429, retry_after=0)
            if fault == "500":
                raise ServerError("down", status=500)
            if key in self.committed:
                raise DuplicateDocumentError("dup", result=self.committed[key])
            mark = 400001000000000 + len(self.committed) + 1
            self.committed[key] = DocumentResult(mark=mark, internal_id=key)
            self.commits[key] = self.commits.get(key, 0) + 1
            if fault == "commit-500":
                raise ServerError("committed, then failed", status=500)
            if fault == "commit-reset":
                raise TransportError("reset", maybe_sent=True)
            return self.committed[key]
        finally:
            self.in_flight -= 1


def doc(n: int) -> dict:
    return {"Issuer": {"Vat": "123456789"}, "Series": "A", "Number": n}


def key(n: int) -> str:
    return document_key(doc(n))


async def stream(provider, documents, options, ledger=None):
    """The outcomes of a batch of ``provider``'s, journaled in ``ledger`` if given."""
    async with contextlib.AsyncExitStack() as stack:
        journal = None
        if ledger is not None:
            resend = options.retry.resend_ambiguous
            journal = await stack.enter_async_context(
                ledger_journal(ledger, resend_ambiguous=resend)
            )
        batch = Batch(provider, provider, provider, options, journal)
        outcomes = await stack.enter_async_context(contextlib.aclosing(batch.run(documents)))
        async for outcome in outcomes:
            yield outcome


async def run(provider, documents, *, ledger=None, **kwargs):
    kwargs.setdefault("retry", FAST)
    outcomes = [o async for o in stream(provider, documents, BatchOptions(**kwargs), ledger)]
    outcomes.sort(key=lambda o: o.index)
    return outcomes


async def test_each_document_one_outcome_in_order():
    """N documents in, N outcomes out, ordered by input index, all accepted."""
    provider = FakeProvider()
    outcomes = await run(provider, (doc(n) for n in range(50)), concurrency=8)
    assert [o.index for o in outcomes] == list(range(50))
    assert all(o.status is OutcomeStatus.ACCEPTED and o.ok for o in outcomes)
    assert [o.result.internal_id for o in outcomes] == [key(n) for n in range(50)]
    assert provider.peak_in_flight <= 8


class PreparedOnTheLoop(FakeProvider):
    """A preparer without an executor (the client's default): the batch prepares each
    document with prepare_here, on the loop, ahead of the workers."""

    parallelism = (1, 0)

    def __init__(self, script=None):
        super().__init__(script)
        self.prepared_one = 0

    async def prepare_many(self, documents):
        raise AssertionError("no executor: prepare_many is never called")

    def prepare_here(self, document, *, encrypted):
        self.prepared_one += 1
        return _serialized(document)


async def test_documents_are_prepared_one_by_one_on_the_loop_without_an_executor():
    """With a preparer that prepares on the loop, every document is prepared once: one
    outcome each, in order, a document that cannot be serialised refused alone, never
    more in flight than the concurrency."""
    provider = PreparedOnTheLoop()
    documents = [doc(n) for n in range(40)]
    documents[7] = {"bad": object()}
    outcomes = await run(provider, documents, concurrency=8)
    assert [o.index for o in outcomes] == list(range(40))
    assert provider.prepared_one == 40
    assert outcomes[7].status is OutcomeStatus.REJECTED
    assert outcomes[7].attempts == 0
    assert all(o.status is OutcomeStatus.ACCEPTED for i, o in enumerate(outcomes) if i != 7)
    assert provider.peak_in_flight <= 8


class CountingJournal:
    """A journal that knows nothing and counts how often it is asked."""

    waits_on_others = False

    def __init__(self):
        self.lookups: list[int] = []

    async def lookup(self, keys):
        from invoicing_async._core.entries import SEND  # noqa: PLC0415

        self.lookups.append(len(keys))
        return [SEND] * len(keys)

    async def before_send(self, key):
        pass

    def after_outcome(self, outcome, prepared):
        pass


@pytest.mark.parametrize("provider_class", [FakeProvider, PreparedOnTheLoop])
async def test_a_journal_is_asked_about_many_documents_of_a_plain_iterable_at_once(
    provider_class,
):
    """Documents from a list are looked up in the journal hundreds at a time (a lookup
    waits for the ledger's writer), whether workers or a preparing stage prepare them."""
    provider, journal = provider_class(), CountingJournal()
    batch = Batch(provider, provider, provider, BatchOptions(concurrency=8, retry=FAST), journal)
    outcomes = await collect(batch, [doc(n) for n in range(300)])
    assert len(outcomes) == 300
    assert journal.lookups == [300]


async def test_duplicate_on_first_attempt_is_duplicate():
    """A 409 on the first attempt means it was sent before this batch: DUPLICATE, ok."""
    provider = FakeProvider()
    provider.committed[key(1)] = DocumentResult(mark=7)
    [outcome] = await run(provider, [doc(1)])
    assert outcome.status is OutcomeStatus.DUPLICATE
    assert outcome.ok
    assert outcome.result == DocumentResult(mark=7)


@pytest.mark.parametrize("fault", ["commit-500", "commit-reset"])
async def test_lost_answer_then_409_is_accepted_with_original_record(fault):
    """Committed-then-lost, re-sent, 409: ACCEPTED with the original record, one commit."""
    provider = FakeProvider({key(1): [fault]})
    [outcome] = await run(provider, [doc(1)])
    assert outcome.status is OutcomeStatus.ACCEPTED
    assert outcome.result is provider.committed[key(1)]
    assert outcome.attempts == 2
    assert provider.commits[key(1)] == 1


async def test_not_sent_and_rate_limited_are_retried():
    """Refused connections and 429 are retried until the document goes through."""
    provider = FakeProvider({key(1): ["refused", "429", "500"]})
    [outcome] = await run(provider, [doc(1)])
    assert outcome.status is OutcomeStatus.ACCEPTED
    assert outcome.attempts == 4


async def test_definite_refusal_is_rejected_without_retry():
    """A 400 ends the document REJECTED after one attempt."""
    provider = FakeProvider({key(1): ["400"]})
    [outcome] = await run(provider, [doc(1)])
    assert outcome.status is OutcomeStatus.REJECTED
    assert isinstance(outcome.error, ValidationError)
    assert outcome.attempts == 1
    assert not outcome.ok


async def test_bad_document_rejected_locally_and_the_rest_goes_on():
    """A document that cannot be serialised is REJECTED with 0 attempts; others proceed."""
    provider = FakeProvider()
    documents = [doc(0), {"bad": object()}, doc(2)]
    outcomes = await run(provider, documents)
    assert [o.status for o in outcomes] == [
        OutcomeStatus.ACCEPTED,
        OutcomeStatus.REJECTED,
        OutcomeStatus.ACCEPTED,
    ]
    assert outcomes[1].attempts == 0
    assert outcomes[1].error.status is None


async def test_ambiguous_without_resend_is_unknown_never_rejected():
    """With resend_ambiguous off, a maybe-committed failure ends UNKNOWN, not REJECTED."""
    provider = FakeProvider({key(1): ["commit-500"], key(2): ["500"]})
    policy = RetryPolicy(base_delay=0, resend_ambiguous=False)
    outcomes = await run(provider, [doc(1), doc(2)], retry=policy)
    assert [o.status for o in outcomes] == [OutcomeStatus.UNKNOWN, OutcomeStatus.UNKNOWN]
    assert len(provider.requests) == 2


async def test_exhausted_attempts():
    """Retries stop at max_attempts: UNKNOWN if maybe committed, NOT_SENT if never sent."""
    provider = FakeProvider({key(1): ["500"] * 10, key(2): ["refused"] * 10})
    policy = RetryPolicy(base_delay=0, max_attempts=3)
    outcomes = await run(provider, [doc(1), doc(2)], retry=policy)
    assert [o.status for o in outcomes] == [OutcomeStatus.UNKNOWN, OutcomeStatus.NOT_SENT]
    assert [o.attempts for o in outcomes] == [3, 3]


async def test_shared_retry_budget_limits_traffic_in_an_outage():
    """During an outage the batch's retry budget caps the extra requests."""
    script = {key(n): ["500"] * 10 for n in range(100)}
    provider = FakeProvider(script)
    policy = RetryPolicy(base_delay=0, max_attempts=10, budget_ratio=0.1, min_budget=5)
    outcomes = await run(provider, [doc(n) for n in range(100)], retry=policy)
    assert len(outcomes) == 100
    assert all(o.status is OutcomeStatus.UNKNOWN for o in outcomes)
    assert len(provider.requests) <= 100 + 5 + 10 + 1


async def test_deadline_ends_unsent_documents_not_sent():
    """After the batch deadline, documents not yet sent end NOT_SENT."""
    provider = FakeProvider({key(n): ["refused"] * 100 for n in range(3)})
    policy = RetryPolicy(base_delay=0.05, max_delay=0.05, max_attempts=1000, min_budget=10_000)
    outcomes = await run(provider, [doc(n) for n in range(3)], retry=policy, deadline=0.2)
    assert all(o.status is OutcomeStatus.NOT_SENT for o in outcomes)


async def test_progress_callback_counts():
    """The progress callback sees every settled document, counted by status."""
    provider = FakeProvider({key(3): ["400"]})
    seen = []
    await run(provider, [doc(n) for n in range(5)], on_progress=seen.append)
    assert [p.settled for p in seen] == [1, 2, 3, 4, 5]
    assert seen[-1].counts == {OutcomeStatus.ACCEPTED: 4, OutcomeStatus.REJECTED: 1}


async def test_async_iterable_input():
    """Async generators are consumed lazily like plain iterables."""

    async def documents():
        for n in range(10):
            await asyncio.sleep(0)
            yield doc(n)

    outcomes = await run(FakeProvider(), documents(), concurrency=3)
    assert [o.index for o in outcomes] == list(range(10))


@pytest.mark.parametrize("provider_class", [FakeProvider, PreparedOnTheLoop])
async def test_input_error_propagates_and_stops_workers(provider_class):
    """An exception raised by the caller's iterable propagates; nothing keeps running
    (whether a reader or the preparing task takes the documents from it)."""

    def documents():
        yield doc(1)
        raise RuntimeError("database went away")

    with pytest.raises(RuntimeError, match="database"):
        await run(provider_class(), documents())
    await asyncio.sleep(0)
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()


async def ledger_entries(path):
    async with Ledger(path) as ledger:
        return {entry.key: entry async for entry in ledger.entries()}


async def test_ledger_records_sending_before_the_request_then_the_outcome(tmp_path):
    """Each document's entry is in flight (durable) when its request leaves, then holds
    its outcome."""
    path = tmp_path / "batch.db"
    seen = []

    class Watching(FakeProvider):
        async def send(self, prepared, **kwargs):
            seen.append((await ledger_entries(path))[key(1)].status)
            return await super().send(prepared, **kwargs)

    await run(Watching(), [doc(1)], ledger=path)
    assert seen == ["in_flight"]
    entry = (await ledger_entries(path))[key(1)]
    assert entry.status is OutcomeStatus.ACCEPTED
    assert entry.final
    assert entry.outcome.result.mark is not None


@pytest.mark.parametrize("resend_ambiguous", [True, False])
async def test_which_documents_are_in_flight_while_the_first_request_is_out(
    tmp_path, resend_ambiguous
):
    """With ambiguous re-sends allowed (the default), new documents' sending records are
    committed ahead, while they are prepared: a crash leaves them in flight, to be
    re-sent. With resend_ambiguous=False each is recorded right before its request,
    so that only documents really in flight could be reported unknown after a crash.
    Either way nothing read ahead and left unsent stays recorded once the batch ends."""
    path = tmp_path / "batch.db"
    seen = []

    class Watching(FakeProvider):
        async def send(self, prepared, **kwargs):
            if not seen:
                entries = await ledger_entries(path)
                seen.append(sorted(k for k, e in entries.items() if e.status == "in_flight"))
            return await super().send(prepared, **kwargs)

    policy = attrs.evolve(FAST, resend_ambiguous=resend_ambiguous)
    documents = [doc(n) for n in range(5)]
    outcomes = await run(Watching(), documents, ledger=path, concurrency=1, retry=policy)
    assert all(o.status is OutcomeStatus.ACCEPTED for o in outcomes)
    expected = [key(n) for n in range(5)] if resend_ambiguous else [key(0)]
    assert seen == [sorted(expected)]

    # Stopped after the first outcome: what was recorded ahead and never sent is gone.
    async def first_then_stop():
        async with contextlib.aclosing(
            stream(
                Watching(),
                [doc(n) for n in range(10, 15)],
                BatchOptions(concurrency=1, retry=policy),
                path,
            )
        ) as outcomes:
            async for _ in outcomes:
                break

    await first_then_stop()
    entries = await ledger_entries(path)
    later = {k: e for k, e in entries.items() if k in {key(n) for n in range(10, 15)}}
    assert all(e.status != "in_flight" for e in later.values()), later
    assert len(later) <= 2  # the one sent first, and one that may have been in flight


async def test_resume_skips_settled_and_resends_in_flight(tmp_path):
    """A resumed batch skips settled documents and re-sends in-flight ones; a 409 for
    those is this batch's own commit: ACCEPTED."""
    path = tmp_path / "batch.db"
    provider = FakeProvider()
    await run(provider, [doc(0), doc(1)], ledger=path)
    # A crash after doc 2 was committed but before its outcome was recorded:
    provider.committed[key(2)] = DocumentResult(mark=99)
    provider.commits[key(2)] = 1
    async with Ledger(path) as ledger:
        await ledger._sending(Ref("", key(2)))
    provider.requests.clear()
    outcomes = await run(provider, [doc(n) for n in range(4)], ledger=path)
    assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED] * 4
    assert [o.attempts for o in outcomes] == [0, 0, 1, 1]
    assert sorted(provider.requests) == sorted([key(2), key(3)])
    assert outcomes[2].result == DocumentResult(mark=99)
    assert all(count == 1 for count in provider.commits.values())


async def test_cancellation_records_in_flight_as_unknown(tmp_path):
    """Cancelling a batch re-raises CancelledError, leaves no tasks, and records the
    documents in flight as unknown."""
    path = tmp_path / "batch.db"

    in_flight = 0
    all_out = asyncio.Event()

    class Slow(FakeProvider):
        async def send(self, prepared, **kwargs):
            kwargs["leaving"]()
            nonlocal in_flight
            in_flight += 1
            if in_flight == 4:
                all_out.set()
            await asyncio.sleep(3600)

    task = asyncio.ensure_future(
        run(Slow(), [doc(n) for n in range(10)], ledger=path, concurrency=4)
    )
    await all_out.wait()  # four requests out, none answered
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()
    entries = await ledger_entries(path)
    assert len(entries) == 4
    assert {e.status for e in entries.values()} == {OutcomeStatus.UNKNOWN}
    assert all(e.maybe_committed for e in entries.values())


async def test_closing_a_stream_early_stops_the_workers():
    """Leaving submit_stream early (aclose) cancels the workers; no task is left."""
    provider = FakeProvider()
    options = BatchOptions(retry=FAST, concurrency=4)
    outcomes = stream(provider, (doc(n) for n in range(1000)), options)
    async for _ in outcomes:
        break
    await outcomes.aclose()
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()
    assert len(provider.requests) < 1000


async def test_streaming_memory_is_flat_in_the_input_size():
    """Streaming documents from a generator keeps memory bounded by concurrency, not by
    their number."""

    def documents(count):
        for n in range(count):
            yield doc(n)

    class Counting(FakeProvider):
        """Accepts everything without keeping per-document state."""

        async def send(self, prepared, **kwargs):
            kwargs["leaving"]()
            await asyncio.sleep(0)
            return DocumentResult(mark=1)

    async def peak(count: int) -> int:
        gc.collect()
        tracemalloc.start()
        settled = 0
        async for _ in stream(
            Counting(), documents(count), BatchOptions(retry=FAST, concurrency=16)
        ):
            settled += 1
        _, peak_bytes = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert settled == count
        return peak_bytes

    # 18,000 documents more may cost 400 kB more at most: 22 bytes a document, the bound
    # 100,000 against 10,000 held (2 MB), at a fifth of the time. The peaks measured are
    # flat (about 210 kB at 2,000, 20,000 and 50,000 documents).
    small = await peak(2_000)
    large = await peak(20_000)
    assert large < small + 400_000, (small, large)


async def test_documents_read_after_the_deadline_say_so():
    """Documents still to come when the deadline has passed end NOT_SENT, without a
    request, with an error that names the deadline."""

    class Slow(FakeProvider):
        async def send(self, prepared, **kwargs):
            await asyncio.sleep(0.05)
            return await super().send(prepared, **kwargs)

    outcomes = await run(Slow(), [doc(n) for n in range(200)], deadline=0.1, concurrency=2)
    late = [o for o in outcomes if o.status is OutcomeStatus.NOT_SENT and o.attempts == 0]
    assert late
    assert all("deadline" in str(o.error) for o in late)


async def test_documents_taken_by_the_workers_after_the_breaker_opened_are_not_sent():
    """When no reader stands between the input and the workers, a document read after
    the batch stopped (refused credentials) ends NOT_SENT: nothing more is sent, and
    only the few prepared ahead for the workers were prepared."""
    from invoicing_async import CredentialsError  # noqa: PLC0415

    class Refusing(PreparedOnTheLoop):
        async def send(self, prepared, *, timeout, leaving):
            leaving()
            self.requests.append(prepared.key)
            raise CredentialsError("bad key", status=401)

    provider = Refusing()
    outcomes = await run(provider, [doc(n) for n in range(30)], concurrency=2)
    assert len(provider.requests) <= 2
    assert provider.prepared_one <= 2 * 2 + 1  # a queue of one per worker, one more
    assert all(o.status is OutcomeStatus.NOT_SENT for o in outcomes)


async def test_a_journal_that_waits_for_a_retrying_document_does_not_stall_the_batch():
    """A journal whose ``before_send`` waits until an earlier document is settled (a
    till's drainer lets one probe at a time through while the provider is down): the
    earlier one, in its retry wait after a 429, still gets room to be sent while later
    documents wait in ``before_send`` (they held the room the halved limit left: the
    batch stalled)."""
    from invoicing_async._core.entries import SEND  # noqa: PLC0415

    class Probing:
        """Sends one document at a time until the first is settled, as a probe gate."""

        waits_on_others = True

        def __init__(self) -> None:
            self.probe: str | None = None
            self.free = asyncio.Event()

        async def lookup(self, refs):
            return [SEND for _ in refs]

        async def before_send(self, ref):
            while self.probe not in (None, ref.key):
                await self.free.wait()
            self.probe = ref.key

        def after_outcome(self, outcome, prepared):
            if outcome.key == self.probe:
                self.probe = None
                self.free.set()
                self.free = asyncio.Event()

    provider = FakeProvider({key(0): ["429"]})  # and the limit is halved: 1 in flight
    batch = Batch(provider, provider, provider, BatchOptions(concurrency=3, retry=FAST), Probing())
    outcomes = await asyncio.wait_for(collect(batch, [doc(n) for n in range(6)]), 30)
    assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED] * 6
    assert provider.requests.count(key(0)) == 2


class IssuerRoute:
    """One issuer's route, as a pool's channel: its key refused, or sending."""

    def __init__(self, provider: FakeProvider, *, refused: bool) -> None:
        self.provider = provider
        self.refused = refused
        self.sent: list[str] = []

    async def send(self, prepared, *, timeout, leaving):
        self.sent.append(document_key(prepared.body))
        if self.refused:
            raise CredentialsError("the token endpoint refused the credentials", status=400)
        return await self.provider.send(prepared, timeout=timeout, leaving=leaving)


class ManyIssuers(FakeProvider):
    """A sender of many issuers: each route made when a lane opens, with the key of now."""

    per_issuer = True
    max_issuers = 8

    def __init__(self) -> None:
        super().__init__()
        self.refusing = True  # the key the "resolver" gives now is refused
        self.routes: list[IssuerRoute] = []
        self.released: list[IssuerRoute] = []

    async def acquire(self, issuer):
        route = IssuerRoute(self, refused=self.refusing)
        self.routes.append(route)
        return route

    def release(self, route):
        self.released.append(route)


async def test_an_issuer_stopped_is_sent_again_by_the_same_batch_once_resumed():
    """An issuer whose key is refused stops (its next document is not sent); resumed
    (its credentials changed), the same batch sends its documents through the route
    the sender gives now, the old route let go (before: only a new batch could)."""
    sender = ManyIssuers()
    queue: asyncio.Queue = asyncio.Queue()

    async def documents():
        while (document := await queue.get()) is not None:
            yield document

    batch = Batch(sender, sender, sender, BatchOptions(concurrency=2, retry=FAST), None)
    async with contextlib.aclosing(batch.run(documents())) as outcomes:
        queue.put_nowait(doc(1))
        first = await anext(outcomes)
        queue.put_nowait(doc(2))
        second = await anext(outcomes)
        assert list(batch.stopped_issuers) == ["123456789"]
        sender.refusing = False
        await batch.resume(["123456789"])
        assert not batch.stopped_issuers
        queue.put_nowait(doc(3))
        third = await anext(outcomes)
        queue.put_nowait(None)
        assert [o async for o in outcomes] == []
    assert (first.status, type(first.error)) == (OutcomeStatus.NOT_SENT, CredentialsError)
    assert (second.status, second.attempts) == (OutcomeStatus.NOT_SENT, 0)
    assert third.status is OutcomeStatus.ACCEPTED
    old, new = sender.routes
    assert (old.sent, new.sent) == ([key(1)], [key(3)])
    assert sender.released == [old, new]  # the old at the resume, the new at the end


async def test_a_halted_batch_lets_no_request_leave_and_waits_only_for_those_out():
    """Halted (a worker stopping), a batch lets the requests out end, but one that waited
    for its token does not leave once the token comes, and :meth:`none_out` waits only
    for the requests that left: with none out it returns at once (issue 38: a stop
    waited its whole grace for documents whose token request the provider held)."""
    token = asyncio.Event()
    answer = asyncio.Event()
    out = asyncio.Event()

    class Tokens(FakeProvider):
        async def send(self, prepared, *, timeout, leaving):
            if key(0) == document_key(prepared.body):  # has its token: out, unanswered
                leaving()
                out.set()
                await answer.wait()
                return DocumentResult(mark=1)
            await token.wait()  # waits for its token
            return await super().send(prepared, timeout=timeout, leaving=leaving)

    provider = Tokens()
    batch = Batch(provider, provider, provider, BatchOptions(retry=FAST, concurrency=2), None)
    outcomes = []

    async def consume():
        async with contextlib.aclosing(batch.run([doc(0), doc(1)])) as stream:
            async for outcome in stream:
                outcomes.append(outcome)  # noqa: PERF401  (each as it comes: it is cut off)

    running = asyncio.ensure_future(consume())
    await out.wait()
    batch.halt()
    quiet = asyncio.ensure_future(batch.none_out())
    token.set()  # the second's token comes: it does not leave
    await asyncio.sleep(0)
    assert not quiet.done()  # the first's request is out
    answer.set()
    await quiet
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    assert provider.requests == []  # the second never reached the provider
    assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED]
