"""A wrong or rotated provider key is a configuration failure, never the document's.

The provider answers 400 "the message cannot be decrypted" to everything encrypted to a
key it does not hold. What it refused is the ciphertext, which depends on the key: the
batch stops (as for a missing key), nothing is recorded as final, and the same batch
run again with the right key commits every invoice once.
"""

from __future__ import annotations

import pytest

from invoicing_async import (
    InvoicingClient,
    Ledger,
    OutcomeStatus,
    ProviderKey,
    ProviderKeyError,
    ValidationError,
)
from invoicing_sandbox import Sandbox, cached_keypair, sample_invoices


def wrong_key() -> ProviderKey:
    """A valid key the sandbox (which holds the cv25519 one) cannot decrypt for."""
    return ProviderKey.from_armored(cached_keypair("rsa2048").public_armored)


def client(sb: Sandbox, key: ProviderKey) -> InvoicingClient:
    return InvoicingClient(sb.base_url, sb.client_id, sb.client_secret, provider_key=key)


async def test_wrong_key_batch_then_the_right_key_commits_every_invoice_once(tmp_path):
    """A journaled batch of 20 encrypted to a key the provider does not hold: it stops,
    no invoice is recorded final (none ``rejected``); the same batch with the right key
    commits every invoice once (before: all 20 recorded ``rejected`` for good, and the
    second run sent nothing)."""
    ledger = tmp_path / "shift.db"
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(20, issuer_vat=sb.client_id, lines=1)
        async with client(sb, wrong_key()) as c:
            first = await c.submit_many(documents, ledger=ledger, concurrency=4)
        assert {o.status for o in first} == {OutcomeStatus.NOT_SENT}
        assert any(
            isinstance(o.error, ProviderKeyError) and o.error.reason == "not_decryptable"
            for o in first
        )
        assert sb.commit_count == 0
        async with Ledger(ledger) as book:
            entries = [entry async for entry in book.entries()]
        assert not any(entry.final for entry in entries), entries

        async with client(sb, sb.provider_key) as c:
            second = await c.submit_many(documents, ledger=ledger, concurrency=4)
        assert {o.status for o in second} == {OutcomeStatus.ACCEPTED}
        assert sb.commit_count == 20
        assert all(held.commits == 1 for held in sb.committed.values())
        async with Ledger(ledger) as book:
            assert await book.counts() == {"accepted": 20}


async def test_single_call_reports_a_wrong_key_as_a_key_problem():
    """A single call encrypted to the wrong key raises ProviderKeyError (reason
    ``not_decryptable``, the provider's 400 kept), not a ValidationError an application
    would ask the cashier to fix; nothing is committed."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        [document] = sample_invoices(1, issuer_vat=sb.client_id, lines=1)
        async with client(sb, wrong_key()) as c:
            with pytest.raises(ProviderKeyError) as refused:
                await c.submit_secure(document, timeout=10)
        assert not isinstance(refused.value, ValidationError)
        assert refused.value.reason == "not_decryptable"
        assert refused.value.status == 400
        assert sb.commit_count == 0
