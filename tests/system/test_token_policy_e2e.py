"""The 401 policy and the token endpoint against a multi-node-like sandbox, over HTTP.

A provider may not know a token it has just issued (replication lag), may revoke a token
right after issuing it, and may fail on refresh grants while client credentials work.
None of that may reject or strand an invoice; and however many documents the provider
refuses with 401, the token endpoint sees at most one request per re-auth cooldown.
"""

from __future__ import annotations

import collections

import pytest
from sandboxtools import FakeClock, token_statuses

from invoicing_async import InvoicingClient, OutcomeStatus, RetryPolicy, TokenCache
from invoicing_sandbox import Fault, Sandbox, sample_invoice, sample_invoices

QUICK = RetryPolicy(base_delay=0.002, max_delay=0.01, attempt_timeout=5)


def document_statuses(sb) -> collections.Counter[int | None]:
    return collections.Counter(r.status for r in sb.requests if r.path == "/Invoice/json")


async def test_replication_lag_of_new_tokens_rejects_nothing():
    """The provider does not know a new token for 1.5 s (a multi-node provider's
    replication lag): 300 documents sent at once with a fresh token are all accepted,
    at the cost of at most one extra token request (before: 150 of 300 rejected)."""
    async with Sandbox(key_algorithm="cv25519", token_propagation_delay=1.5) as sb:
        documents = sample_invoices(300, issuer_vat=sb.client_id, lines=1)
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            outcomes = await client.submit_many(
                documents, concurrency=32, encrypted=False, retry=QUICK
            )
        statuses = collections.Counter(o.status for o in outcomes)
        assert statuses == {OutcomeStatus.ACCEPTED: 300}, statuses
        assert sb.stats.token_requests <= 2
        assert sb.commit_count == 300


async def test_token_revoked_right_after_issue_is_replaced_not_blamed_on_documents():
    """The provider revokes a token right after issuing it: the documents refused with
    it are retried with one new token, none is rejected (before: a 401 to a token younger
    than 10 s was the document's answer)."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(50, issuer_vat=sb.client_id, lines=1)
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            await client.token()
            sb.expire_tokens()  # revoked: unknown to the provider from now on
            outcomes = await client.submit_many(
                documents, concurrency=8, encrypted=False, retry=QUICK
            )
        assert all(o.status is OutcomeStatus.ACCEPTED for o in outcomes)
        assert sb.stats.token_requests == 2


async def test_clients_sharing_a_cache_survive_a_provider_that_revokes_on_issue():
    """Two clients with one cache, against a provider that revokes a client's earlier
    tokens whenever it issues one: they share one token, so neither revokes the other's."""
    async with Sandbox(key_algorithm="cv25519", revoke_tokens_on_issue=True) as sb:
        documents = sample_invoices(40, issuer_vat=sb.client_id, lines=1)
        cache = TokenCache()
        async with (
            InvoicingClient(sb.base_url, sb.client_id, sb.client_secret, token_cache=cache) as a,
            InvoicingClient(sb.base_url, sb.client_id, sb.client_secret, token_cache=cache) as b,
        ):
            first = await a.submit_many(documents[:20], concurrency=4, encrypted=False)
            second = await b.submit_many(documents[20:], concurrency=4, encrypted=False)
        assert all(o.ok for o in first + second)
        assert sb.stats.token_requests == 1


async def test_refused_documents_cost_at_most_one_token_request_per_cooldown():
    """Documents always refused with 401 (issuer VAT not matching the API key), over 330 s
    of the cache's clock without a circuit breaker: the token endpoint sees at most one
    request per 30 s cooldown (before: one each time the token was more than 10 s old)."""
    clock = FakeClock(5000.0)
    async with Sandbox(key_algorithm="cv25519", clock=clock, expires_in=100_000) as sb:
        documents = [sample_invoice(n, issuer_vat="999999999", lines=1) for n in range(300)]
        cache = TokenCache(clock=clock, propagation_delay=0)

        def on_progress(progress) -> None:
            if progress.settled % 10 == 0:
                clock.now += 11

        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, token_cache=cache
        ) as client:
            outcomes = await client.submit_many(
                documents,
                concurrency=4,
                encrypted=False,
                retry=RetryPolicy(base_delay=0, max_delay=0, circuit_breaker=None),
                on_progress=on_progress,
            )
        assert {o.status for o in outcomes} == {OutcomeStatus.NOT_SENT}
        elapsed = clock.now - 5000.0
        assert elapsed >= 330
        assert sb.stats.token_requests <= 2 + elapsed // 30, sb.stats.token_requests
        # A document retried after a forced new token is sent twice; the others once.
        assert document_statuses(sb)[401] <= 300 + 4 * sb.stats.token_requests


async def test_refresh_grant_authenticates_the_client_on_a_standard_server():
    """Renewal with the refresh token succeeds on a server that requires client
    authentication on refresh (RFC 6749 section 6): one request, no 401 invalid_client
    and no fallback grant."""
    clock = FakeClock(5000.0)
    async with Sandbox(key_algorithm="cv25519", clock=clock) as sb:
        cache = TokenCache(clock=clock)
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, token_cache=cache
        ) as client:
            first = await client.token()
            clock.now += 900  # expired
            second = await client.token()
        assert second.value != first.value
        assert token_statuses(sb) == [200, 200]
        assert sb.stats.refresh_requests == 1


@pytest.mark.parametrize(
    "fault",
    [Fault.status(500), Fault.status(503, retry_after=0), Fault.non_json(), Fault.hang()],
    ids=["500", "503", "malformed", "timeout"],
)
async def test_failing_refresh_endpoint_falls_back_to_client_credentials(fault, caplog):
    """After expiry the refresh grant always fails (500, 503, an unreadable answer, no
    answer at all) while client credentials work: every document is still accepted, with
    one refresh attempt and one client-credentials grant (before: a refresh answering
    500 left every document not sent after 100+ refresh requests)."""
    clock = FakeClock(5000.0)
    async with Sandbox(key_algorithm="cv25519", clock=clock) as sb:
        documents = sample_invoices(20, issuer_vat=sb.client_id, lines=1)
        cache = TokenCache(clock=clock)
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, token_cache=cache, timeout=2.0
        ) as client:
            await client.token()
            clock.now += 1000
            sb.script_token(*[fault] * 50, refresh_only=True)
            outcomes = await client.submit_many(
                documents, concurrency=8, encrypted=False, retry=QUICK
            )
        assert all(o.status is OutcomeStatus.ACCEPTED for o in outcomes), outcomes
        # The first grant, one failed refresh, one client-credentials grant.
        assert sb.stats.token_requests == 3
        assert "refresh failed" in caplog.text
