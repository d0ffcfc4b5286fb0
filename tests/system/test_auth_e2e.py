"""Adversarial: authentication under pressure, against the sandbox.

A herd of requests failing on one expired token, a client whose requests are always
refused, and a refresh token revoked in the middle of a batch while the clock moves into
the renewal window. The token cache must stay single-flight, never loop, and fall back
to client credentials without losing a document.
"""

from __future__ import annotations

import asyncio
import collections

import pytest
from sandboxtools import FakeClock, token_statuses

from invoicing_async import (
    AuthenticationError,
    InvoicingClient,
    OutcomeStatus,
    RetryPolicy,
    TokenCache,
)
from invoicing_async.testing import set_instant_retries
from invoicing_sandbox import Fault, Sandbox, sample_invoice, sample_invoices

QUICK = RetryPolicy(base_delay=0.002, max_delay=0.01, attempt_timeout=5)


async def test_concurrent_401s_on_one_expired_token_cause_one_token_request():
    """64 concurrent submissions all meet 401 with the same token the provider expired:
    the cache drops it once and fetches once (2 token requests in all), and every
    submission succeeds on its single retry.
    """
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(65, issuer_vat=sb.client_id, lines=1)
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            await client.submit_json(documents[0])
            sb.expire_tokens()
            results = await asyncio.gather(*(client.submit_json(d) for d in documents[1:]))
        assert len(results) == 64
        assert sb.stats.token_requests == 2
        assert token_statuses(sb) == [200, 200]
        statuses = collections.Counter(r.status for r in sb.requests if r.path == "/Invoice/json")
        assert statuses[401] == 64
        assert statuses[201] == 65
        assert sb.commit_count == 65


async def test_persistent_401_raises_after_exactly_two_attempts_without_looping():
    """A document whose issuer VAT does not match the API key is always answered 401. The
    first 401 forces one new token and the call is retried once with it; the second 401
    (to a token old enough to be known everywhere) is the answer: AuthenticationError.
    """
    clock = FakeClock(5000.0)
    async with Sandbox(key_algorithm="cv25519", clock=clock) as sb:
        foreign = sample_invoice(1, issuer_vat="999999999", lines=1)
        cache = TokenCache(clock=clock, propagation_delay=0)
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, token_cache=cache
        ) as client:
            await client.token()
            clock.now += 60
            with pytest.raises(AuthenticationError) as caught:
                await asyncio.wait_for(client.submit_json(foreign), 10)
        assert caught.value.status == 401
        documents = [r for r in sb.requests if r.path == "/Invoice/json"]
        assert [r.status for r in documents] == [401, 401]
        assert sb.stats.token_requests == 2
        assert sb.commit_count == 0


async def test_persistent_401_in_a_batch_is_not_sent_after_one_new_token():
    """In bulk submission the always-refused document ends ``not_sent`` (never
    ``rejected``: a 401 judges the credentials, not the document) after one delivery
    attempt (the first 401 forced a new token, the retry with it was refused too); the
    others are accepted, and the token endpoint saw one extra request.
    """
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(6, issuer_vat=sb.client_id, lines=1)
        documents[3] = sample_invoice(3, issuer_vat="999999999", lines=1)
        cache = TokenCache(propagation_delay=0)
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, token_cache=cache
        ) as client:
            outcomes = await client.submit_many(
                documents, concurrency=3, encrypted=False, retry=QUICK
            )
        assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED] * 3 + [
            OutcomeStatus.NOT_SENT
        ] + [OutcomeStatus.ACCEPTED] * 2
        assert isinstance(outcomes[3].error, AuthenticationError)
        assert outcomes[3].attempts == 1
        refused = [r for r in sb.requests if r.path == "/Invoice/json" and r.status == 401]
        assert len(refused) == 2
        assert sb.stats.token_requests == 2
        assert sb.commit_count == 5


async def test_many_always_refused_documents_do_not_cost_a_token_request_each():
    """A batch with 20 documents that the provider refuses with 401 for the issuer VAT
    (not for the token) does not fetch a token per document; after a run of 401s the
    circuit breaker stops it: every document ends ``not_sent`` (a 401 is no judgement
    of the document), those after the stop without a request.
    """
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = [sample_invoice(n, issuer_vat="999999999", lines=1) for n in range(20)]
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            outcomes = await client.submit_many(
                documents, concurrency=4, encrypted=False, retry=QUICK
            )
        assert {o.status for o in outcomes} == {OutcomeStatus.NOT_SENT}
        answered = [o for o in outcomes if o.attempts]
        assert len(answered) >= RetryPolicy().circuit_breaker
        assert all(isinstance(o.error, AuthenticationError) for o in answered)
        assert len(answered) < 20  # the breaker stopped the batch
        assert sb.stats.token_requests <= 3, sb.stats.token_requests


async def test_refresh_token_revoked_in_the_renewal_window_falls_back_to_credentials():
    """Mid-batch the clock enters the renewal window and the provider has revoked every
    refresh token: one caller's refresh grant is refused (400 invalid_grant), it falls
    back to client credentials, the others keep using the still valid token, and the
    batch completes with every document accepted.
    """
    clock = FakeClock(5000.0)
    async with Sandbox(key_algorithm="cv25519", clock=clock) as sb:
        documents = sample_invoices(80, issuer_vat=sb.client_id, lines=1)
        cache = TokenCache(clock=clock)
        moved = False

        def on_progress(progress) -> None:
            nonlocal moved
            if progress.settled == 20 and not moved:
                moved = True
                sb.revoke_refresh_tokens()
                clock.now += 900 - 30  # inside the renewal window, still valid

        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, token_cache=cache
        ) as client:
            outcomes = await client.submit_many(
                documents,
                concurrency=8,
                encrypted=False,
                retry=QUICK,
                on_progress=on_progress,
            )
        assert moved
        assert all(o.status is OutcomeStatus.ACCEPTED for o in outcomes), outcomes
        assert sb.commit_count == 80
        assert sb.stats.refresh_requests == 1
        assert token_statuses(sb) == [200, 400, 200]
        assert not [r for r in sb.requests if r.path == "/Invoice/json" and r.status == 401]


async def test_refresh_token_revoked_after_expiry_costs_one_refresh_and_one_grant():
    """The clock jumps past expiry and refresh tokens are revoked: every worker waits for
    one fetch (a refused refresh, then client credentials); no 401, no herd.
    """
    clock = FakeClock(5000.0)
    async with Sandbox(key_algorithm="cv25519", clock=clock) as sb:
        documents = sample_invoices(60, issuer_vat=sb.client_id, lines=1)
        cache = TokenCache(clock=clock)
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, token_cache=cache
        ) as client:
            first = await client.submit_many(
                documents[:30], concurrency=16, encrypted=False, retry=QUICK
            )
            sb.revoke_refresh_tokens()
            clock.now += 2000
            second = await client.submit_many(
                documents[30:], concurrency=16, encrypted=False, retry=QUICK
            )
        assert all(o.status is OutcomeStatus.ACCEPTED for o in first + second)
        assert token_statuses(sb) == [200, 400, 200]
        assert not [r for r in sb.requests if r.status == 401]


@pytest.mark.parametrize("resend", [False, True])
async def test_token_endpoint_outage_leaves_documents_not_sent_not_unknown(resend):
    """The token endpoint answers 503 throughout: no document request ever leaves, so
    every document ends NOT_SENT (safe to submit again), never UNKNOWN.
    """
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.script_token(*[Fault.status(503, retry_after=0)] * 100)
        documents = sample_invoices(3, issuer_vat=sb.client_id, lines=1)
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, token_attempts=2
        ) as client:
            set_instant_retries(True)  # token retries without waiting
            retry = RetryPolicy(max_attempts=2, base_delay=0, max_delay=0, resend_ambiguous=resend)
            outcomes = await client.submit_many(
                documents, concurrency=3, encrypted=False, retry=retry
            )
        assert not [r for r in sb.requests if r.path == "/Invoice/json"]  # nothing left
        assert [o.status for o in outcomes] == [OutcomeStatus.NOT_SENT] * 3


async def test_failed_renewal_in_the_window_keeps_using_the_still_valid_token():
    """In the renewal window the token endpoint fails: the caller that tried to renew
    still sends its document with the current, still valid token.
    """
    clock = FakeClock(5000.0)
    async with Sandbox(key_algorithm="cv25519", clock=clock) as sb:
        documents = sample_invoices(2, issuer_vat=sb.client_id, lines=1)
        cache = TokenCache(clock=clock)
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, token_cache=cache, token_attempts=2
        ) as client:
            set_instant_retries(True)  # token retries without waiting
            await client.submit_json(documents[0])
            clock.now += 900 - 30  # renewal window; the token is valid for 25 s more
            sb.script_token(*[Fault.status(503, retry_after=0)] * 4)
            await client.submit_json(documents[1])
        assert sb.commit_count == 2
