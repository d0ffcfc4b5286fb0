"""Injected faults: the pure plan (which request gets which fault) and, over HTTP, what
the client sees of each.
"""

from __future__ import annotations

import contextlib
import time

import pytest
from helpers import once
from sandboxtools import client_for, invoice

from invoicing_async import (
    DuplicateDocumentError,
    MalformedResponseError,
    OutcomeStatus,
    ProviderTimeoutError,
    RateLimitError,
    RetryPolicy,
    ServerError,
    TransportError,
    document_key,
)
from invoicing_async.testing import instant_retries
from invoicing_sandbox import DEFAULT_RANDOM_KINDS, Fault, Sandbox
from invoicing_sandbox._faults import FaultPlan


@pytest.fixture
async def sb():
    async with Sandbox() as sandbox:
        yield sandbox


# --- the plan, without HTTP ------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: Fault.latency(-1),
        lambda: Fault.status(302),
        lambda: Fault.status(600),
        lambda: Fault.trickle(-0.1),
        lambda: Fault.trickle(0.1, chunk_size=0),
        lambda: Fault.oversized(-1),
    ],
    ids=["latency", "status-3xx", "status-600", "trickle-seconds", "trickle-chunk", "oversized"],
)
def test_fault_arguments_are_checked(make):
    """A fault that could not happen (negative delay, a status that is no error …) is a
    ValueError when built, not a surprise mid-test.
    """
    with pytest.raises(ValueError):
        make()


def test_fault_names_and_when_they_act():
    """Faults are labelled for the request log and act before or after the commit."""
    cases = {
        Fault.status(503): ("status:503", True),
        Fault.latency(0.25): ("latency:0.25", True),
        Fault.reset(): ("reset", True),
        Fault.hang(): ("hang", True),
        Fault.trickle(0.5): ("trickle:0.5", False),
        Fault.oversized(10, chunked=True): ("oversized:10:chunked", False),
        Fault.oversized(10): ("oversized:10", False),
        Fault.commit_then_drop(): ("commit_then_drop", False),
    }
    for fault, (name, before) in cases.items():
        assert (fault.name, fault.before_commit) == (name, before)


def test_default_random_kinds_need_no_client_settings():
    """The default random faults are ones a retrying client survives with its defaults:
    no hang, trickle or oversized body (those need timeouts or caps set for them).
    """
    assert all(isinstance(fault, Fault) for fault in DEFAULT_RANDOM_KINDS)
    assert not {f.kind for f in DEFAULT_RANDOM_KINDS} & {"hang", "trickle", "oversized"}


def test_scripted_faults_are_taken_in_order():
    """A script is taken in arrival order; None lets one request through; then empty."""
    plan = FaultPlan()
    plan.documents.extend([Fault.reset(), None])
    assert plan.take(plan.documents) == (True, Fault.reset())
    assert plan.take(plan.documents) == (True, None)
    assert plan.take(plan.documents) == (False, None)
    plan.tokens.append(Fault.hang())
    plan.clear()
    assert plan.take(plan.tokens) == (False, None)


def test_random_faults_depend_on_seed_identity_and_attempt_only():
    """The same (seed, identity, attempt) always gets the same fault; attempts beyond
    max_per_document get none; rate 0 turns random faults off.
    """
    plan = FaultPlan()
    plan.set_random(0.5, "seed", DEFAULT_RANDOM_KINDS, 2)
    first = [plan.random_fault(f"doc:{n}", 1) for n in range(50)]
    again = [plan.random_fault(f"doc:{n}", 1) for n in range(50)]
    assert first == again
    assert 5 < sum(f is not None for f in first) < 45
    assert all(plan.random_fault(f"doc:{n}", 3) is None for n in range(50))
    plan.set_random(0, "seed", DEFAULT_RANDOM_KINDS, 2)
    assert plan.random is None


@pytest.mark.parametrize(
    ("rate", "kinds", "max_per_document", "error"),
    [
        (1.5, DEFAULT_RANDOM_KINDS, 1, ValueError),
        (-0.1, DEFAULT_RANDOM_KINDS, 1, ValueError),
        (0.5, DEFAULT_RANDOM_KINDS, -1, ValueError),
        (0.5, ["status:503"], 1, TypeError),
    ],
    ids=["rate-above-1", "rate-negative", "max-negative", "not-a-fault"],
)
def test_random_fault_settings_are_checked(rate, kinds, max_per_document, error):
    """Random fault settings out of range (or kinds that are no Fault) are refused."""
    with pytest.raises(error):
        FaultPlan().set_random(rate, 1, kinds, max_per_document)


# --- over HTTP, as the client sees them ---------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "error", "retry_after"),
    [
        (Fault.status(408), ProviderTimeoutError, None),
        (Fault.status(429, retry_after=7), RateLimitError, 7.0),
        (Fault.status(500), ServerError, None),
        (Fault.status(503, retry_after=2), ServerError, 2.0),
    ],
    ids=["408", "429", "500", "503"],
)
async def test_error_statuses_map_to_typed_errors(sb, fault, error, retry_after):
    """Scripted statuses reach the client as their typed errors, nothing committed."""
    sb.script(fault)
    async with client_for(sb) as client:
        with pytest.raises(error) as caught:
            await once(client, invoice(sb, 1))
    assert caught.value.status == fault.code
    assert getattr(caught.value, "retry_after", None) == retry_after
    assert sb.commit_count == 0
    assert sb.requests[-1].fault == f"status:{fault.code}"


@pytest.mark.parametrize(
    ("fault", "error", "committed"),
    [
        (Fault.reset(), TransportError, False),
        (Fault.commit_then_drop(), TransportError, True),
        (Fault.commit_then_500(), ServerError, True),
        (Fault.truncated(), MalformedResponseError, True),
        (Fault.non_json(), MalformedResponseError, True),
        (Fault.oversized(5_000_000), MalformedResponseError, True),
        (Fault.oversized(5_000_000, chunked=True), MalformedResponseError, True),
        (Fault.wrong_content_type(), None, True),
        (Fault.trickle(0.001, chunk_size=64), None, True),
        (Fault.latency(0.05), None, True),
    ],
    ids=lambda value: value.name if isinstance(value, Fault) else None,
)
async def test_faults_as_the_client_sees_them(sb, fault, error, committed):
    """Each fault reaches the client as the right error (or none), the ground truth
    says whether it was committed, and re-sending recovers the original record.
    """
    doc = invoice(sb, 1)
    sb.script(fault)
    async with client_for(sb) as client:
        if error is None:
            result = await client.submit_json(doc)
            assert result == sb.committed[document_key(doc)].record
        else:
            with pytest.raises(error) as caught:
                await once(client, doc)
            if isinstance(caught.value, TransportError):
                assert caught.value.maybe_sent
            if isinstance(caught.value, MalformedResponseError):
                assert caught.value.status == 201
        assert (document_key(doc) in sb.committed) == committed
        if committed and error is not None:
            with pytest.raises(DuplicateDocumentError) as again:
                await once(client, doc)
            assert again.value.result == sb.committed[document_key(doc)].record
    assert sb.commit_count == int(committed)
    assert next(r.fault for r in sb.requests if r.path == "/Invoice/json") == fault.name


async def test_hang_ends_with_the_clients_timeout(sb):
    """A hung request fails within the client's timeout and commits nothing."""
    sb.script(Fault.hang())
    async with client_for(sb, timeout=0.3) as client:
        started = time.perf_counter()
        with pytest.raises(TransportError) as caught:
            await once(client, invoice(sb, 1))
        assert time.perf_counter() - started < 10  # the timeout, not a hang
    assert caught.value.maybe_sent
    assert sb.commit_count == 0


async def test_commit_survives_the_client_leaving():
    """A client that times out during a slow commit leaves the document committed:
    the handler is not cancelled, and close() (which ends the delay) waits for it.
    """
    async with Sandbox() as sb:
        sb.script(Fault.latency(60))
        async with client_for(sb, timeout=0.1) as client:
            with pytest.raises(TransportError):
                await once(client, invoice(sb, 1))
        assert sb.commit_count == 0  # still sleeping
    assert sb.commit_count == 1
    assert sb.stats.submissions == {201: 1}


async def test_token_faults_are_scripted_separately(sb):
    """script_token() faults hit /oauth/token only; the client's token retries absorb a
    503 and the document queue is untouched.
    """
    sb.script_token(Fault.status(503, retry_after=0))
    async with client_for(sb) as client:
        with instant_retries():  # token retries without waiting
            await client.submit_json(invoice(sb, 1))
    assert [(r.path, r.status, r.fault) for r in sb.requests] == [
        ("/oauth/token", 503, "status:503"),
        ("/oauth/token", 200, None),
        ("/Invoice/json", 201, None),
    ]


async def test_script_none_skips_a_request_and_reset_forgets(sb):
    """None in a script lets one request through; reset() forgets documents, journal,
    stats, tokens and queued faults.
    """
    sb.script(None, Fault.status(500))
    async with client_for(sb) as client:
        await client.submit_json(invoice(sb, 1))
        with pytest.raises(ServerError):
            await once(client, invoice(sb, 2))
        sb.script(Fault.reset())
        sb.reset()
        assert (sb.commit_count, sb.committed, sb.requests) == (0, {}, [])
        await client.submit_json(invoice(sb, 1))  # old token gone: 401, then a new one
    assert sb.stats.token_requests == 1
    assert sb.commit_count == 1


def fault_sequences(sb: Sandbox) -> dict[str, list[str | None]]:
    sequences: dict[str, list[str | None]] = {}
    for record in sb.requests:
        if record.identity is not None:
            sequences.setdefault(record.identity, []).append(record.fault)
    return sequences


async def test_random_faults_are_deterministic_per_document():
    """The same seed gives every document the same fault sequence whether the batch
    runs sequentially or concurrently in another order; every document ends committed
    exactly once.
    """
    kinds = (Fault.status(503), Fault.reset(), Fault.commit_then_drop(), Fault.commit_then_500())
    retry = RetryPolicy(max_attempts=10, base_delay=0, max_delay=0, min_budget=1000)
    runs = []
    for concurrency, order in ((1, 1), (16, -1)):
        async with Sandbox(seed=5) as sb:
            sb.random_faults(0.5, seed=11, kinds=kinds, max_per_document=3)
            docs = [invoice(sb, n) for n in range(40)][::order]
            async with client_for(sb) as client:
                outcomes = await client.submit_many(
                    docs, concurrency=concurrency, encrypted=False, retry=retry
                )
            assert all(o.status is OutcomeStatus.ACCEPTED for o in outcomes), outcomes
            assert sb.commit_count == 40
            assert all(c.commits == 1 for c in sb.committed.values())
            runs.append(fault_sequences(sb))
    assert runs[0] == runs[1]
    faulted = [seq for seq in runs[0].values() if seq[0] is not None]
    assert 5 < len(faulted) < 35
    assert max(sum(f is not None for f in seq) for seq in runs[0].values()) <= 3


async def test_cut_short_duplicate_answer_still_counts_as_accepted(sb):
    """A lost answer, then a 409 whose body is cut short: the document is committed,
    so bulk submission reports it accepted (the 409's status is the answer; found with
    this sandbox, fixed in 54a6ab4), and one more re-send brings its record back.
    """
    doc = invoice(sb, 1)
    sb.script(Fault.commit_then_drop(), Fault.truncated())
    retry = RetryPolicy(base_delay=0, max_delay=0)
    async with client_for(sb) as client:
        [outcome] = await client.submit_many([doc], encrypted=False, retry=retry)
    assert document_key(doc) in sb.committed
    assert [r.status for r in sb.requests if r.identity] == [None, 409, 409]
    assert outcome.status is OutcomeStatus.ACCEPTED
    assert outcome.result == sb.committed[document_key(doc)].record


async def test_random_faults_differ_by_seed():
    """Another seed gives another fault pattern (the seed is not ignored)."""
    patterns = []
    for seed in (1, 2):
        async with Sandbox() as sb:
            sb.random_faults(0.5, seed=seed, kinds=(Fault.status(500),), max_per_document=1)
            async with client_for(sb) as client:
                for n in range(30):
                    with contextlib.suppress(ServerError), instant_retries():
                        await client.submit_json(invoice(sb, n))
            patterns.append([r.fault for r in sb.requests if r.identity])
    assert patterns[0] != patterns[1]
