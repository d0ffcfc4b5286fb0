"""The ledger's finality rules over real HTTP to the sandbox, and one sender per ledger.

Each test runs a batch with a ledger, then runs it again (as a user would after fixing
something) and checks which documents the second run sends: only a definite refusal of
the same content, or a document the provider holds, is never sent again.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from invoicing_async import (
    InvoicingClient,
    Ledger,
    LedgerError,
    OutcomeStatus,
    RetryPolicy,
    TokenCache,
)
from invoicing_async.testing import instant_retries
from invoicing_sandbox import Fault, Sandbox, sample_invoices

SCRIPT = Path(__file__).parent / "scripts" / "adv_submit.py"


def client(sb, secret=None):
    return InvoicingClient(sb.base_url, sb.client_id, secret or sb.client_secret)


def sent(sb, start):
    return [r.identity for r in sb.requests[start:] if r.identity]


async def test_refused_credentials_are_never_final(tmp_path):
    """A typo in the API key ends the batch not_sent; the fixed rerun sends everything
    (the ledger does not remember a configuration failure as final)."""
    ledger = tmp_path / "batch.db"
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(20, issuer_vat=sb.client_id, lines=1)
        with instant_retries():
            async with client(sb, "a-typo") as bad:
                first = await bad.submit_many(documents, encrypted=False, ledger=ledger)
            assert {o.status for o in first} == {OutcomeStatus.NOT_SENT}
            async with client(sb) as good:
                second = await good.submit_many(documents, encrypted=False, ledger=ledger)
        assert all(o.status is OutcomeStatus.ACCEPTED and o.attempts == 1 for o in second)
        assert sb.commit_count == 20


async def test_a_401_to_a_document_is_not_final(tmp_path):
    """A document answered 401 (a VAT/credentials problem, or a transient one) is
    ``not_sent`` in that run — never ``rejected``: the provider did not judge it — and
    sent again by the next."""
    ledger = tmp_path / "batch.db"
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(3, issuer_vat=sb.client_id, lines=1)
        # Refused with the first token and with the one that refusal forced (a 401
        # once is cured by a new token; TokenCache's 401 policy).
        sb.script(Fault.status(401), Fault.status(401))
        cache = TokenCache(propagation_delay=0)
        with instant_retries():
            async with InvoicingClient(
                sb.base_url, sb.client_id, sb.client_secret, token_cache=cache
            ) as c:
                first = await c.submit_many(
                    documents[:1],
                    encrypted=False,
                    ledger=ledger,
                    retry=RetryPolicy(max_attempts=1),
                )
                assert first[0].status is OutcomeStatus.NOT_SENT
                second = await c.submit_many(documents, encrypted=False, ledger=ledger)
        assert [o.status for o in second] == [OutcomeStatus.ACCEPTED] * 3
        assert second[0].attempts == 1


async def test_a_400_is_final_for_that_content_only(tmp_path):
    """A document refused with 400 is not sent again unchanged (its outcome is replayed
    with attempts 0); corrected, with the same identity, it is sent and accepted."""
    ledger = tmp_path / "batch.db"
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(3, issuer_vat=sb.client_id, lines=1)
        gross = documents[1]["Summaries"]["TotalGrossValue"]
        documents[1]["Summaries"]["TotalGrossValue"] = -1
        with instant_retries():
            async with client(sb) as c:
                first = await c.submit_many(documents, encrypted=False, ledger=ledger)
                assert first[1].status is OutcomeStatus.REJECTED
                start = len(sb.requests)
                again = await c.submit_many(documents, encrypted=False, ledger=ledger)
                assert sent(sb, start) == []
                assert again[1].status is OutcomeStatus.REJECTED
                assert again[1].attempts == 0
                documents[1]["Summaries"]["TotalGrossValue"] = gross
                fixed = await c.submit_many(documents, encrypted=False, ledger=ledger)
        assert [o.status for o in fixed] == [OutcomeStatus.ACCEPTED] * 3
        assert fixed[1].attempts == 1
        assert fixed[0].attempts == 0
        assert sb.commit_count == 3


@pytest.mark.parametrize("resend", [False, True])
async def test_unknown_is_resent_only_when_the_policy_allows(tmp_path, resend):
    """An answer lost after the commit ends unknown under resend_ambiguous=False; a
    rerun under the same policy reports it unknown without sending (against a provider
    without duplicate detection, a re-send would commit it twice); a rerun that allows
    ambiguous re-sends re-sends it, and the 409 is its own commit: accepted."""
    ledger = tmp_path / "batch.db"
    async with Sandbox(key_algorithm="cv25519", duplicate_detection=resend) as sb:
        documents = sample_invoices(4, issuer_vat=sb.client_id, lines=1)
        strict = RetryPolicy(resend_ambiguous=False)
        sb.script(Fault.commit_then_drop())
        with instant_retries():
            async with client(sb) as c:
                first = await c.submit_many(
                    documents, encrypted=False, ledger=ledger, retry=strict, concurrency=1
                )
                assert [o.status for o in first].count(OutcomeStatus.UNKNOWN) == 1
                start = len(sb.requests)
                policy = RetryPolicy() if resend else strict
                second = await c.submit_many(
                    documents, encrypted=False, ledger=ledger, retry=policy
                )
        if resend:
            assert len(sent(sb, start)) == 1
            assert all(o.status is OutcomeStatus.ACCEPTED for o in second)
        else:
            assert sent(sb, start) == []
            assert [o.status for o in second].count(OutcomeStatus.UNKNOWN) == 1
        assert all(c.commits == 1 for c in sb.committed.values())
        async with Ledger(ledger) as opened:
            counts = await opened.counts()
        assert counts == ({"accepted": 4} if resend else {"accepted": 3, "unknown": 1})


async def test_a_second_process_on_the_same_ledger_is_refused(tmp_path):
    """Two processes submitting with one ledger: the second stops at once with
    LedgerError (the ledger is in use) and sends nothing; the first commits every
    invoice exactly once, even without duplicate detection."""
    ledger = tmp_path / "batch.db"
    async with Sandbox(key_algorithm="cv25519", duplicate_detection=False) as sb:
        sb.hold(after=3)  # the first run is certainly still sending while the second tries
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        args = [sys.executable, str(SCRIPT), sb.base_url, sb.client_id, str(key_file)]
        env = {**os.environ, "INVOICING_API_KEY": sb.client_secret}
        first = await asyncio.create_subprocess_exec(
            *args,
            str(ledger),
            "120",
            "4",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        await sb.wait_held(1)
        requests = len(sb.requests)
        second = await asyncio.create_subprocess_exec(
            *args,
            str(ledger),
            "120",
            "4",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, error = await asyncio.wait_for(second.communicate(), 60)
        assert second.returncode != 0
        assert b"LedgerError" in error
        assert b"in use by another process" in error
        assert first.returncode is None, "the first run must still be sending"
        sb.release()
        out, error = await asyncio.wait_for(first.communicate(), 120)
        assert first.returncode == 0, error.decode()
        assert out.decode().startswith("done 120 not-ok 0 ")
        assert requests < len(sb.requests)
        assert sb.commit_count == 120
        assert all(c.commits == 1 for c in sb.committed.values())


async def test_disk_full_stops_the_batch_with_a_typed_error_and_loses_nothing(tmp_path, tiny_tmpfs):
    """The ledger on a filesystem that fills up (a real ENOSPC from a tiny tmpfs): the
    batch stops with LedgerError (write_failed); every document the provider committed
    is recorded in the ledger as sent or settled; resuming from a copy on a roomy disk
    commits every invoice exactly once."""
    path = tiny_tmpfs / "batch.db"
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(600, issuer_vat=sb.client_id, lines=8)
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            with pytest.raises(LedgerError) as caught:
                await client.submit_many(
                    documents,
                    encrypted=False,
                    ledger=path,
                    concurrency=8,
                    retry=RetryPolicy(base_delay=0, max_delay=0),
                )
            assert caught.value.reason == "write_failed"
            assert "disk is full" in str(caught.value)
            committed = set(sb.committed)
            assert 0 < len(committed) < 600
            import ledgertools  # noqa: PLC0415

            recorded = ledgertools.rows(path)
            assert committed <= set(recorded), "a document was sent before it was recorded"
            roomy = tmp_path / "copy.db"
            for suffix in ("", "-wal"):
                source = tiny_tmpfs / ("batch.db" + suffix)
                if source.exists():
                    (tmp_path / ("copy.db" + suffix)).write_bytes(source.read_bytes())
            outcomes = await client.submit_many(
                documents, encrypted=False, ledger=roomy, concurrency=8
            )
        assert all(o.ok for o in outcomes)
        assert sb.commit_count == 600
        assert all(c.commits == 1 for c in sb.committed.values())
        assert not any(o.status is OutcomeStatus.DUPLICATE for o in outcomes)
    await asyncio.sleep(0)
