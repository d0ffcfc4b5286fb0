"""Testing an application with the sandbox: tests as they look in a user's own suite.

The ``invoicing_sandbox`` and ``invoicing_client`` fixtures come from the pytest
plugin of the sandbox distribution (invoicing-async-sandbox); they need
pytest-asyncio. Run with ``python -m pytest docs/examples/test_with_sandbox.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from invoicing_async import (
    DuplicateDocumentError,
    InvoicingClient,
    OutcomeStatus,
    document_key,
)
from invoicing_async.testing import instant_retries
from invoicing_sandbox import (
    Fault,
    Sandbox,
    sample_invoice,
    sample_invoices,
    sandbox_issuers,
)

# Needed in pytest-asyncio's default (strict) mode; harmless in auto mode.
pytestmark = pytest.mark.asyncio


# region code-under-test
async def checkout(client: InvoicingClient, invoice: dict[str, Any]) -> int:
    """The application's code under test: submit a sale's invoice, return its mark.

    ``submit_secure`` retries what may pass (a lost answer, a 503) by itself, safely;
    a 409 means the invoice was sold before and carries its original record.
    """
    try:
        result = await client.submit_secure(invoice, timeout=20)
    except DuplicateDocumentError as exc:
        if exc.result is None:
            raise
        result = exc.result
    assert result.mark is not None
    return result.mark


# endregion code-under-test


# region fixtures
async def test_checkout_submits_the_invoice(
    invoicing_client: InvoicingClient, invoicing_sandbox: Sandbox
) -> None:
    """A sale's invoice reaches the provider, and the till gets the provider's mark."""
    invoice = sample_invoice(1, issuer_vat=invoicing_sandbox.client_id)

    mark = await checkout(invoicing_client, invoice)

    held = invoicing_sandbox.committed[document_key(invoice)]  # the ground truth
    assert held.record.mark == mark
    assert held.encrypted  # it went to /Invoice/secure


# endregion fixtures


# region scripted
async def test_lost_answer_is_not_committed_twice(
    invoicing_client: InvoicingClient, invoicing_sandbox: Sandbox
) -> None:
    """The provider commits, then the connection drops: the retry gets the same mark."""
    invoicing_sandbox.script(Fault.commit_then_drop())  # the next document request only
    invoice = sample_invoice(2, issuer_vat=invoicing_sandbox.client_id)

    mark = await checkout(invoicing_client, invoice)

    held = invoicing_sandbox.committed[document_key(invoice)]
    assert held.commits == 1
    assert held.record.mark == mark
    assert [r.status for r in invoicing_sandbox.requests if r.identity] == [None, 409]


async def test_refusal_before_commit_is_retried(
    invoicing_client: InvoicingClient, invoicing_sandbox: Sandbox
) -> None:
    """A 503 before processing commits nothing; the second try is accepted."""
    invoicing_sandbox.script(Fault.status(503, retry_after=0))
    invoice = sample_invoice(3, issuer_vat=invoicing_sandbox.client_id)

    await checkout(invoicing_client, invoice)

    assert invoicing_sandbox.stats.submissions[503] == 1
    assert invoicing_sandbox.stats.submissions[201] == 1


# endregion scripted


# region seeded
async def test_month_end_batch_survives_faults(
    invoicing_client: InvoicingClient, invoicing_sandbox: Sandbox
) -> None:
    """30% of requests fail in reproducible ways; every invoice is still held once."""
    invoicing_sandbox.random_faults(rate=0.3, seed=7)  # same faults on every run
    invoices = [
        sample_invoice(n, issuer_vat=invoicing_sandbox.client_id) for n in range(50)
    ]

    with instant_retries():  # same retries and classification, no waiting
        outcomes = await invoicing_client.submit_many(invoices)

    assert all(outcome.status is OutcomeStatus.ACCEPTED for outcome in outcomes)
    assert invoicing_sandbox.commit_count == 50
    assert all(held.commits == 1 for held in invoicing_sandbox.committed.values())
    assert any(
        record.fault for record in invoicing_sandbox.requests
    )  # faults did happen


# endregion seeded


# region own-sandbox
async def test_expired_token_is_renewed_once() -> None:
    """A sandbox of one's own: seeded credentials; expired tokens cost one new token."""
    async with Sandbox(seed=42) as sandbox:
        async with InvoicingClient(
            sandbox.base_url,
            sandbox.client_id,
            sandbox.client_secret,
            provider_key=sandbox.provider_key,
        ) as client:
            await client.submit_json(sample_invoice(1, issuer_vat=sandbox.client_id))
            sandbox.expire_tokens()  # the provider forgets every token it issued
            await client.submit_json(sample_invoice(2, issuer_vat=sandbox.client_id))

        assert sandbox.stats.token_requests == 2
        assert sandbox.commit_count == 2
        assert sandbox.stats.submissions[401] == 1


# endregion own-sandbox


# region many-issuers
async def test_a_throttled_issuer_holds_back_nobody_else() -> None:
    """Three issuers, one throttled: the others' invoices are all committed.

    Each on its first request; the throttled issuer's are refused (429), none committed.
    """
    issuers = sandbox_issuers(3)  # {tin: api_key}, the same on every run
    slow, *others = issuers
    async with Sandbox(issuers=issuers) as sandbox:
        sandbox.throttle_issuer(slow, retry_after=0)  # every request of it: 429

        async def send(tin: str) -> None:
            async with InvoicingClient(
                sandbox.base_url, tin, issuers[tin], provider_key=sandbox.provider_key
            ) as client:
                await client.submit_many(sample_invoices(5, issuer_vat=tin))

        with instant_retries():
            await asyncio.gather(*(send(tin) for tin in issuers))

        for tin in others:
            assert len(sandbox.committed_in(client_id=tin)) == 5
            counts = sandbox.issuer_stats(tin)
            assert counts.documents == 5  # one request each: nothing refused or re-sent
            assert counts.throttled == 0
        assert sandbox.issuer_stats(slow).throttled > 0
        assert sandbox.issuer_stats(slow).commits == 0


# endregion many-issuers
