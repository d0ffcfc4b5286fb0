"""Adversarial: hung and trickling answers end within the configured timeouts.

A provider that never answers (``Fault.hang``) or answers one byte at a time
(``Fault.trickle``, which resets every per-read timer) must not hold a request longer
than the timeout the caller set: the client's ``timeout=`` for single calls,
``RetryPolicy(attempt_timeout=)`` per attempt and ``deadline=`` for a whole batch. Bounds
are generous (timeout + 5 s): they prove the timeout is honoured (the alternative is
the client's 120 s, or a trickle's minutes), not how precisely, on a loaded machine too.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from helpers import once

from invoicing_async import InvoicingClient, OutcomeStatus, RetryPolicy, TransportError
from invoicing_sandbox import Fault, Sandbox, sample_invoice, sample_invoices

SLACK = 5.0
SLOW_TRICKLE = Fault.trickle(0.25, chunk_size=1)  # ~1 KB record: minutes to send


def client_for(sb: Sandbox, **kwargs) -> InvoicingClient:
    return InvoicingClient(sb.base_url, sb.client_id, sb.client_secret, **kwargs)


@pytest.fixture
async def sb():
    async with Sandbox(key_algorithm="cv25519") as sandbox:
        yield sandbox


@pytest.mark.parametrize("fault", [Fault.hang(), SLOW_TRICKLE], ids=["hang", "trickle"])
async def test_single_submit_ends_within_the_client_timeout(sb, fault):
    """submit_json against a hung or trickling answer raises TransportError (maybe sent)
    within the client's timeout.
    """
    timeout = 0.6
    sb.script(fault)
    async with client_for(sb, timeout=timeout) as client:
        await client.token()
        started = time.perf_counter()
        with pytest.raises(TransportError) as caught:
            await once(client, sample_invoice(1, issuer_vat=sb.client_id))
        elapsed = time.perf_counter() - started
    assert caught.value.maybe_sent is True
    assert elapsed < timeout + SLACK, elapsed
    assert elapsed >= timeout * 0.9, elapsed  # it did wait for the timeout, not fail early


@pytest.mark.parametrize("fault", [Fault.hang(), SLOW_TRICKLE], ids=["hang", "trickle"])
async def test_batch_attempts_end_within_attempt_timeout(sb, fault):
    """In a batch, every attempt against a hung or trickling answer ends within
    RetryPolicy.attempt_timeout (the client's own timeout is long): 3 attempts take
    about 3 x attempt_timeout, and the document ends UNKNOWN (it may be committed).
    """
    attempt_timeout = 0.5
    sb.random_faults(rate=1.0, seed=1, kinds=(fault,), max_per_document=10)
    retry = RetryPolicy(
        max_attempts=3, base_delay=0.01, max_delay=0.01, attempt_timeout=attempt_timeout
    )
    documents = sample_invoices(4, issuer_vat=sb.client_id, lines=1)
    async with client_for(sb, timeout=120) as client:
        await client.token()
        started = time.perf_counter()
        outcomes = await client.submit_many(documents, concurrency=4, encrypted=False, retry=retry)
        elapsed = time.perf_counter() - started
    assert [o.status for o in outcomes] == [OutcomeStatus.UNKNOWN] * 4
    assert [o.attempts for o in outcomes] == [3] * 4
    assert elapsed < 3 * attempt_timeout + SLACK, elapsed
    if fault.kind == "trickle":
        assert len(sb.committed) == 4  # committed, answer never complete: UNKNOWN is true


@pytest.mark.parametrize("fault", [Fault.hang(), SLOW_TRICKLE], ids=["hang", "trickle"])
async def test_batch_deadline_caps_every_attempt(sb, fault):
    """With no attempt timeout and a long client timeout, deadline= still ends a batch
    whose every answer hangs or trickles: within deadline + slack, sent documents
    UNKNOWN, the others NOT_SENT.
    """
    deadline = 1.0
    sb.random_faults(rate=1.0, seed=1, kinds=(fault,), max_per_document=10)
    retry = RetryPolicy(base_delay=0.01, max_delay=0.01, attempt_timeout=None)
    documents = sample_invoices(6, issuer_vat=sb.client_id, lines=1)
    async with client_for(sb, timeout=120, limit=2) as client:
        await client.token()
        started = time.perf_counter()
        outcomes = await client.submit_many(
            documents, concurrency=2, encrypted=False, retry=retry, deadline=deadline
        )
        elapsed = time.perf_counter() - started
    assert elapsed < deadline + SLACK, elapsed
    statuses = {o.status for o in outcomes}
    assert statuses <= {OutcomeStatus.UNKNOWN, OutcomeStatus.NOT_SENT}, outcomes
    assert OutcomeStatus.UNKNOWN in statuses
    for outcome in outcomes:
        if outcome.status is OutcomeStatus.NOT_SENT:
            assert outcome.attempts == 0


@pytest.mark.parametrize("fault", [Fault.hang(), SLOW_TRICKLE], ids=["hang", "trickle"])
async def test_token_request_ends_within_the_client_timeout(sb, fault):
    """A hung or trickling token endpoint ends within the client's timeout per try."""
    timeout = 0.5
    sb.script_token(fault)
    async with client_for(sb, timeout=timeout, token_attempts=1) as client:
        started = time.perf_counter()
        with pytest.raises(TransportError):
            await client.token()
        elapsed = time.perf_counter() - started
    assert elapsed < timeout + SLACK, elapsed


async def test_batch_deadline_also_bounds_a_hung_token_endpoint(sb):
    """A batch with deadline=1 s whose token endpoint hangs ends within the deadline
    (plus slack), its documents NOT_SENT, instead of waiting for the client's 120 s
    timeout on each token try.
    """
    deadline = 1.0
    # Hung for the whole batch: how many token requests fit in the deadline depends on
    # the order in which the documents' timers fire (a waiter takes over a cancelled
    # fetch), so two scripted hangs could be used up early and the third request answered.
    sb.script_token(*[Fault.hang()] * 20)
    documents = sample_invoices(2, issuer_vat=sb.client_id, lines=1)
    retry = RetryPolicy(base_delay=0.01, max_delay=0.01, attempt_timeout=0.5)
    async with client_for(sb, token_attempts=2) as client:
        started = time.perf_counter()
        try:
            outcomes = await asyncio.wait_for(
                client.submit_many(documents, encrypted=False, retry=retry, deadline=deadline),
                deadline + SLACK + 1,
            )
        except asyncio.TimeoutError:
            outcomes = None
        elapsed = time.perf_counter() - started
    assert outcomes is not None, f"still running after {elapsed:.1f} s"
    assert elapsed < deadline + SLACK, elapsed
    assert [o.status for o in outcomes] == [OutcomeStatus.NOT_SENT] * 2
