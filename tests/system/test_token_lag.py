"""A provider of two nodes that learn new tokens late, and one that revokes tokens.

``Sandbox.set_token_lag(seconds, nodes=2)``: requests alternate between two nodes; a
new token is known at once to the node that issued it and to the other one ``seconds``
later. A 401 to a token younger than the client's ``propagation_delay`` says nothing
about the document, whichever node accepted the token first: every document must end
committed and ``accepted``, with at most one extra token request.

``Sandbox.set_token_revocation(after)``: every token is revoked ``after`` seconds after
its issue. Re-authentication stays bounded by the cooldown; a batch with time left waits
the cooldown out, and one without says why its documents were not sent.
"""

from __future__ import annotations

import asyncio
import collections

import attrs

from invoicing_async import (
    AuthenticationError,
    InvoicingClient,
    OutcomeStatus,
    RetryPolicy,
    TokenCache,
)
from invoicing_sandbox import Sandbox, sample_invoices

QUICK = RetryPolicy(base_delay=0.002, max_delay=0.01, attempt_timeout=10)
#: The sandbox's lag, and the client's allowance for it: the allowance is what the
#: client waits before it retries a 401 to a young token, so the margin between the
#: two is what a slow machine may add to a request's latency.
LAG, ALLOWANCE = 0.3, 1.5


def client(sb: Sandbox, cache: TokenCache) -> InvoicingClient:
    return InvoicingClient(
        sb.base_url, sb.client_id, sb.client_secret, token_cache=cache, provider_key=sb.provider_key
    )


def statuses(outcomes) -> collections.Counter[OutcomeStatus]:
    return collections.Counter(o.status for o in outcomes)


async def test_batch_on_a_lagging_two_node_provider_is_all_accepted():
    """300 invoices sent at once with a brand-new token that only one of two nodes knows
    yet: every one committed once and ``accepted``, with at most one extra token
    request (before: about half ``rejected`` with a 401, because the other node had
    already accepted the token)."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.set_token_lag(LAG, nodes=2)
        documents = sample_invoices(300, issuer_vat=sb.client_id, lines=1)
        async with client(sb, TokenCache(propagation_delay=ALLOWANCE)) as c:
            outcomes = await c.submit_many(documents, concurrency=32, encrypted=False, retry=QUICK)
        assert statuses(outcomes) == {OutcomeStatus.ACCEPTED: 300}, [
            str(o.error) for o in outcomes if not o.ok
        ][:3]
        assert sb.commit_count == 300
        assert all(c.commits == 1 for c in sb.committed.values())
        assert sb.stats.token_requests <= 2
        assert any(r.status == 401 for r in sb.requests)  # the lag was met


async def test_single_calls_on_a_lagging_two_node_provider_are_all_accepted():
    """Single calls, ten at once and then one after another, on the lagging provider:
    each returns its record (none raises AuthenticationError), each committed once,
    with at most one extra token request."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.set_token_lag(LAG, nodes=2)
        documents = sample_invoices(14, issuer_vat=sb.client_id, lines=1)
        async with client(sb, TokenCache(propagation_delay=ALLOWANCE)) as c:
            together = await asyncio.gather(
                *(c.submit_secure(d, retry=QUICK) for d in documents[:10])
            )
            alone = [await c.submit_secure(d, retry=QUICK) for d in documents[10:]]
        assert len(together + alone) == 14
        assert sb.commit_count == 14
        assert sb.stats.token_requests <= 2
        assert any(r.status == 401 for r in sb.requests)


async def test_revoking_provider_batch_with_a_deadline_waits_out_the_cooldown():
    """Every token is revoked 0.3 s after its issue, re-authentication is limited to one
    per second: a batch with a deadline waits for the next allowed token instead of
    giving up, so all 200 invoices are committed once and ``accepted``; the token
    requests stay within one per cooldown (before: documents ended ``rejected`` and
    ``not_sent`` after the second token)."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.set_token_revocation(1.0)
        sb.set_latency(0.05)  # 200 requests, 8 at a time: 1.25 s at least, past a revocation
        documents = sample_invoices(200, issuer_vat=sb.client_id, lines=1)
        cache = TokenCache(reauth_cooldown=2.0, propagation_delay=0.05)
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client(sb, cache) as c:
            outcomes = await c.submit_many(
                documents, concurrency=8, encrypted=False, retry=QUICK, deadline=60
            )
        elapsed = loop.time() - started
        assert statuses(outcomes) == {OutcomeStatus.ACCEPTED: 200}, [
            str(o.error) for o in outcomes if not o.ok
        ][:3]
        assert all(c.commits == 1 for c in sb.committed.values())
        assert any(r.status == 401 for r in sb.requests)  # tokens were revoked under it
        assert sb.stats.token_requests <= 2 + elapsed / 2.0, (sb.stats, elapsed)


async def test_session_resetting_provider_never_makes_a_document_rejected():
    """Every token stops working 0.3 s after its issue and the client may force a new
    one only every 0.5 s: a 200-document batch at concurrency 4 without a deadline
    waits for the next token instead of judging documents by a 401, so none ends
    ``rejected`` (the provider refused none of them) and every one is committed once
    and ``accepted``; token requests stay within one per cooldown (before: 13 of 200
    ``rejected`` and 35 ``not_sent``, with the default cooldown)."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.set_token_revocation(0.3)
        sb.set_latency(0.01)
        documents = sample_invoices(200, issuer_vat=sb.client_id, lines=1)
        cache = TokenCache(reauth_cooldown=0.5, propagation_delay=0.05)
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client(sb, cache) as c:
            outcomes = await c.submit_many(documents, concurrency=4, encrypted=False, retry=QUICK)
        elapsed = loop.time() - started
        assert statuses(outcomes) == {OutcomeStatus.ACCEPTED: 200}, [
            str(o.error) for o in outcomes if not o.ok
        ][:3]
        assert all(c.commits == 1 for c in sb.committed.values())
        assert any(r.status == 401 for r in sb.requests)  # tokens were revoked under it
        assert sb.stats.token_requests <= 2 + elapsed / 0.5, (sb.stats, elapsed)


async def test_revoking_provider_batch_that_may_not_wait_ends_documents_not_sent_saying_why():
    """The same provider, a long cooldown and a batch that may not wait for the next
    token (``reauth_waits=0``): documents that met a revoked token while no new one may
    be requested end ``not_sent`` — never ``rejected``: the provider did not judge them
    — with an error that says why (the re-authentication cooldown, and when the next
    token may be requested); two token requests in all."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.set_token_revocation(1.0)
        sb.set_latency(0.1)  # 2.5 s at least: the second token is revoked too
        documents = sample_invoices(200, issuer_vat=sb.client_id, lines=1)
        cache = TokenCache(reauth_cooldown=60.0, propagation_delay=0.05)
        policy = attrs.evolve(QUICK, reauth_waits=0)
        async with client(sb, cache) as c:
            outcomes = await c.submit_many(documents, concurrency=8, encrypted=False, retry=policy)
        failed = [o for o in outcomes if not o.ok]
        assert failed  # the second token was revoked too, and no third may be requested
        assert sb.stats.token_requests == 2
        assert {o.status for o in failed} == {OutcomeStatus.NOT_SENT}
        for outcome in failed:
            assert "reauth_cooldown" in str(outcome.error), outcome.error
        refused = [o for o in failed if isinstance(o.error, AuthenticationError)]
        assert refused
        assert all(o.error.reauth_in is not None and o.error.reauth_in > 0 for o in refused)
