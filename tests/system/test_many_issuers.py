"""Many issuers in one batch over real HTTP to the sandbox: isolation and fairness.

One issuer's revoked key or throttling ends or slows only its own documents, and a small
issuer is not kept waiting behind a large one's backlog. Everything is said by counts
and orders, never by timings.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from invoicing_async import (
    CredentialsError,
    InvoicingClient,
    IssuerPool,
    OutcomeStatus,
    RateLimitError,
    RetryPolicy,
)
from invoicing_sandbox import Sandbox, sample_invoice, sandbox_issuers

QUICK = RetryPolicy(base_delay=0.001, max_delay=0.005, max_attempts=3)


async def test_a_revoked_and_a_throttled_issuer_hold_back_no_other_issuer():
    """Eight issuers, 240 documents in one batch, interleaved. Issuer 0's API key is
    revoked once 40 documents have settled; issuer 1 is answered 429 to every request.
    Their documents end ``not_sent`` — typed (refused credentials, 429), never final —
    except those of issuer 0 committed before the revocation; every document of the six
    others is accepted on its first request: none met a 429, none was re-sent, and each
    of them made one token request."""
    issuers = sandbox_issuers(8)
    tins = list(issuers)
    revoked, throttled, others = tins[0], tins[1], tins[2:]
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        sb.throttle_issuer(throttled, retry_after=0)
        documents = [sample_invoice(n, issuer_vat=tins[n % 8], lines=1) for n in range(240)]

        def revoke_midway(progress) -> None:
            if progress.settled == 40:
                sb.revoke_issuer(revoked)

        async with IssuerPool(sb.base_url, issuers, provider_key=sb.provider_key) as pool:
            outcomes = await pool.submit_many(
                documents, encrypted=False, retry=QUICK, on_progress=revoke_midway, concurrency=8
            )
    by_issuer: dict[str, list] = {tin: [] for tin in tins}
    for document, outcome in zip(documents, outcomes, strict=True):
        by_issuer[document["Issuer"]["Vat"]].append(outcome)
    for tin in others:
        assert {o.status for o in by_issuer[tin]} == {OutcomeStatus.ACCEPTED}
        assert all(o.attempts == 1 for o in by_issuer[tin])
        counts = sb.issuer_stats(tin)
        assert counts.submissions == {201: 30}  # one request per document, none refused
        assert (counts.throttled, counts.token_requests) == (0, 1)
    gone = {o.status for o in by_issuer[revoked]}
    assert gone <= {OutcomeStatus.ACCEPTED, OutcomeStatus.NOT_SENT}
    assert OutcomeStatus.NOT_SENT in gone
    assert all(
        isinstance(o.error, CredentialsError) or o.error.status == 401
        for o in by_issuer[revoked]
        if o.status is OutcomeStatus.NOT_SENT
    )
    assert {o.status for o in by_issuer[throttled]} == {OutcomeStatus.NOT_SENT}
    assert all(isinstance(o.error, RateLimitError) for o in by_issuer[throttled])
    assert sb.issuer_stats(throttled).commits == 0


@pytest.mark.parametrize("sender", ["pool", "client"])
async def test_a_throttled_issuer_sends_again_once_its_retry_after_has_passed(sender):
    """An issuer answered 429 with a Retry-After is paused; once the pause is over, its
    documents are sent again until their attempts are spent, and the batch ends — even
    when nothing else of that issuer is in flight to wake its lane. Each document ends
    ``not_sent`` with the 429, after more than one request. The same for a pool and for
    a client's batch (one issuer, one lane)."""
    issuers = sandbox_issuers(1)
    ((tin, api_key),) = issuers.items()
    documents = [sample_invoice(n, issuer_vat=tin, lines=1) for n in range(3)]
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        sb.throttle_issuer(tin, retry_after="0.01")
        if sender == "pool":
            batch_sender = IssuerPool(sb.base_url, issuers, provider_key=sb.provider_key)
        else:
            batch_sender = InvoicingClient(sb.base_url, tin, api_key, provider_key=sb.provider_key)
        async with batch_sender:
            outcomes = await asyncio.wait_for(
                batch_sender.submit_many(
                    documents, encrypted=False, retry=RetryPolicy(max_attempts=1), concurrency=4
                ),
                60,  # only against a hang: the batch ends in a fraction of that
            )
        throttled = sb.issuer_stats(tin).throttled
    assert [o.status for o in outcomes] == [OutcomeStatus.NOT_SENT] * 3
    assert all(isinstance(o.error, RateLimitError) for o in outcomes)
    assert all(o.attempts > 1 for o in outcomes)
    assert throttled == sum(o.attempts for o in outcomes)


async def test_a_small_issuer_is_not_kept_behind_a_large_ones_backlog():
    """20,000 documents of one issuer, and 10 of another among the first 2,000 of the
    input (from position 1,200 on): the small issuer's 10 are all settled before the
    large one's 1,000th, however the machine runs (an order, not a time). Sent in input
    order, they would come after the large one's 1,200th."""
    issuers = sandbox_issuers(2)
    large, small = list(issuers)
    documents = [sample_invoice(n, issuer_vat=large, lines=1) for n in range(20_000)]
    for k in range(10):
        documents.insert(1_200 + 50 * k, sample_invoice(k, issuer_vat=small, lines=1))
    settled: list[str] = []
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        pool = IssuerPool(sb.base_url, issuers, provider_key=sb.provider_key)
        async with (
            pool,
            contextlib.aclosing(
                pool.submit_stream(documents, encrypted=False, concurrency=16)
            ) as outcomes,
        ):
            async for outcome in outcomes:
                assert outcome.status is OutcomeStatus.ACCEPTED, outcome.error
                settled.append(documents[outcome.index]["Issuer"]["Vat"])
                if settled.count(small) == 10 or settled.count(large) >= 1_000:
                    break
    assert settled.count(small) == 10
    assert settled.count(large) < 1_000


async def test_a_key_too_long_for_a_header_is_refused_before_any_request():
    """An issuer whose API key has 10,000 characters, more than the ``APIKey`` header
    can carry (the sandbox's HTTP server, like a real one, refuses a header past 8,190
    bytes): its documents end ``not_sent`` with a CredentialsError naming the issuer,
    none of them rejected and nothing sent for it, not even a token request (before:
    the provider answered 400 and both documents ended ``rejected``, final: a
    credentials problem recorded as the documents' refusal). An issuer whose key of
    4,096 characters fits is served as any other."""
    issuers = sandbox_issuers(2)
    long_one, fitting = issuers
    issuers = {long_one: "k" * 10_000, fitting: "f" * 4096}
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        documents = [
            sample_invoice(n, issuer_vat=tin, lines=1) for n in range(2) for tin in issuers
        ]
        async with IssuerPool(sb.base_url, issuers, provider_key=sb.provider_key) as pool:
            outcomes = await pool.submit_many(documents, encrypted=False, retry=QUICK)
        stats = sb.issuer_stats(long_one)
        assert (stats.requests, stats.token_requests) == (0, 0)
        assert sb.issuer_stats(fitting).commits == 2
    refused = [o for o in outcomes if o.issuer == long_one]
    assert [o.status for o in refused] == [OutcomeStatus.NOT_SENT] * 2
    for outcome in refused:
        assert isinstance(outcome.error, CredentialsError)
        assert f"issuer {long_one}" in str(outcome.error)
        assert "10,000 characters" in str(outcome.error)
        assert "k" * 100 not in str(outcome.error)
    assert {o.status for o in outcomes if o.issuer == fitting} == {OutcomeStatus.ACCEPTED}
