"""Bulk submission through real HTTP against the sandbox, with seeded faults.

These prove the promises of bulk submission end to end: N documents in, N outcomes out in
order; every document committed exactly once; everything committed reported ok; nothing
committed reported failed; each result belongs to its own invoice; a SIGKILLed run
resumes from its ledger without losing or re-sending settled documents.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import ledgertools
import pytest
from sandboxtools import until

from invoicing_async import InvoicingClient, OutcomeStatus, RetryPolicy, TokenCache
from invoicing_sandbox import Fault, Sandbox, sample_invoices

SCRIPTS = Path(__file__).parent / "scripts"
QUICK = RetryPolicy(
    base_delay=0.005, max_delay=0.02, max_attempts=8, attempt_timeout=5, budget_ratio=3
)


def check_exactly_once(sb, documents, outcomes):
    """The invariants every batch must keep, whatever the faults."""
    assert [o.index for o in outcomes] == list(range(len(documents)))
    committed = {c.record.internal_id: c for c in sb.committed.values()}
    for document, outcome in zip(documents, outcomes, strict=True):
        internal_id = document["DistributionDetails"]["InternalDocumentId"]
        holder = committed.get(internal_id)
        if holder is not None:
            assert holder.commits == 1
            assert outcome.ok, (internal_id, outcome)  # committed: never reported failed
            assert outcome.status is not OutcomeStatus.DUPLICATE  # it was this batch's
            if outcome.result is not None:
                assert outcome.result.internal_id == internal_id  # its own record
                assert outcome.result.mark == holder.record.mark
        else:
            assert not outcome.ok, (internal_id, outcome)  # ok only if the provider holds it
    assert len(committed) == len(sb.committed)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_seeded_faults_before_and_after_commit(seed):
    """Under a seeded mix of faults every document ends accepted and committed once."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.random_faults(rate=0.4, seed=seed, max_per_document=3)
        documents = sample_invoices(150, issuer_vat=sb.client_id, lines=2, seed=seed)
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client:
            outcomes = await client.submit_many(documents, concurrency=16, retry=QUICK)
        check_exactly_once(sb, documents, outcomes)
        assert all(o.status is OutcomeStatus.ACCEPTED for o in outcomes)
        assert len(sb.committed) == len(documents)
        faulted = [r for r in sb.requests if r.fault]
        assert faulted, "the seed produced no faults"


async def test_without_resend_ambiguous_failures_end_unknown_not_rejected():
    """With re-sending off, commit-then-drop ends UNKNOWN (never REJECTED), committed once."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.script(Fault.commit_then_drop(), Fault.commit_then_500(), Fault.status(500))
        documents = sample_invoices(3, issuer_vat=sb.client_id, lines=1)
        policy = RetryPolicy(base_delay=0, resend_ambiguous=False)
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            outcomes = await client.submit_many(
                documents, concurrency=1, encrypted=False, retry=policy
            )
        assert [o.status for o in outcomes] == [OutcomeStatus.UNKNOWN] * 3
        assert len(sb.committed) == 2  # the 500 came before commit


async def test_commit_then_disconnect_is_recovered_as_accepted():
    """Commit then drop: re-sent, 409, ACCEPTED with the original record; two requests."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.script(Fault.commit_then_drop())
        [document] = sample_invoices(1, issuer_vat=sb.client_id)
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client:
            [outcome] = await client.submit_many([document], retry=QUICK)
        assert outcome.status is OutcomeStatus.ACCEPTED
        assert outcome.attempts == 2
        [committed] = sb.committed.values()
        assert outcome.result == committed.record
        statuses = [r.status for r in sb.requests if r.path.endswith("/Invoice/secure")]
        assert statuses[-1] == 409
        assert len(statuses) == 2


async def test_duplicates_from_an_earlier_run_are_duplicate():
    """A document sent before the batch is DUPLICATE (ok) with its original record."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(3, issuer_vat=sb.client_id, lines=1)
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            first = await client.submit_json(documents[1])
            outcomes = await client.submit_many(documents, encrypted=False, retry=QUICK)
        assert [o.status for o in outcomes] == [
            OutcomeStatus.ACCEPTED,
            OutcomeStatus.DUPLICATE,
            OutcomeStatus.ACCEPTED,
        ]
        assert outcomes[1].result == first
        assert all(o.ok for o in outcomes)


async def test_invalid_documents_are_rejected_others_accepted():
    """A 400 from the provider rejects that document only."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(4, issuer_vat=sb.client_id, lines=1)
        documents[2]["Summaries"]["TotalGrossValue"] = -5
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            outcomes = await client.submit_many(documents, encrypted=False, retry=QUICK)
        assert [o.status for o in outcomes] == [
            OutcomeStatus.ACCEPTED,
            OutcomeStatus.ACCEPTED,
            OutcomeStatus.REJECTED,
            OutcomeStatus.ACCEPTED,
        ]
        assert outcomes[2].error.status == 400
        assert len(sb.committed) == 3


async def test_expired_tokens_mid_batch_cost_one_token_request():
    """Tokens expiring mid-batch cause one new token request, not one per document."""
    clock = [0.0]
    async with Sandbox(key_algorithm="cv25519", clock=lambda: clock[0]) as sb:
        documents = sample_invoices(60, issuer_vat=sb.client_id, lines=1)
        cache = TokenCache(clock=lambda: clock[0])
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, token_cache=cache
        ) as client:
            await client.submit_many(documents[:30], encrypted=False, retry=QUICK)
            sb.expire_tokens()  # the provider forgets; the client still believes
            outcomes = await client.submit_many(documents[30:], encrypted=False, retry=QUICK)
        assert all(o.status is OutcomeStatus.ACCEPTED for o in outcomes)
        assert sb.stats.token_requests == 2


async def start_submitter(sb, tmp_path, journal, count):
    key_file = sb.write_public_key(tmp_path / "provider.asc")
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPTS / "submit_journaled.py"),
        sb.base_url,
        sb.client_id,
        str(key_file),
        str(journal),
        str(count),
        "8",
        env={**os.environ, "INVOICING_API_KEY": sb.client_secret},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


def settled_keys(journal: Path) -> set[str]:
    return ledgertools.settled_ok(journal)


@pytest.mark.parametrize("kill_after", [5, 40])
async def test_sigkill_mid_batch_then_resume(tmp_path, kill_after):
    """SIGKILL a submitting process mid-batch; resume from its ledger: every document
    committed exactly once, settled ones not re-sent."""
    count = 120
    journal = tmp_path / "batch.db"
    async with Sandbox(key_algorithm="cv25519") as sb:
        # Lose some answers (each document meets at most one fault, so at most two
        # requests each); after 2 * kill_after requests the provider holds the rest, so
        # the kill certainly lands mid-batch.
        sb.random_faults(
            rate=0.3, seed=kill_after, kinds=(Fault.commit_then_drop(),), max_per_document=1
        )
        sb.hold(after=2 * kill_after)
        process = await start_submitter(sb, tmp_path, journal, count)
        while not (journal.exists() and len(settled_keys(journal)) >= kill_after):  # noqa: ASYNC110
            await asyncio.sleep(0.01)  # the ledger's state, polled: it only grows
        process.send_signal(signal.SIGKILL)
        await process.wait()
        sb.release()  # the killed run's held requests go on, their client gone
        await until(lambda: not sb._inflight)
        settled_before = settled_keys(journal)
        assert 0 < len(settled_before) < count
        requests_before = len(sb.requests)

        process = await start_submitter(sb, tmp_path, journal, count)
        stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 0, stderr.decode()
        assert stdout.decode().strip() == f"done {count} not-ok 0"

        assert len(sb.committed) == count
        assert all(c.commits == 1 for c in sb.committed.values())
        resent = {r.identity for r in sb.requests[requests_before:] if r.identity}
        assert not resent & settled_before, sorted(resent & settled_before)[:5]
