"""Adversarial: a chaos soak of bulk submission against the sandbox.

Many invoices at high concurrency under a seeded mix of every fault a retrying client must
survive on its own, before and after the commit (including hangs, ended by a short
per-attempt timeout). Whatever the interleaving, the promises of bulk submission hold:
one outcome per invoice, each invoice committed exactly once, nothing committed reported
as failed, and every result record belonging to its own invoice.
"""

from __future__ import annotations

import collections

import pytest

from invoicing_async import InvoicingClient, OutcomeStatus, RetryPolicy
from invoicing_sandbox import Fault, Sandbox, sample_invoices

#: Every kind of the soak: before the commit (status, reset, hang) and after it.
CHAOS_KINDS = (
    Fault.status(500),
    Fault.status(408),
    Fault.status(429, retry_after=0),
    Fault.reset(),
    Fault.hang(),
    Fault.commit_then_drop(),
    Fault.commit_then_500(),
    Fault.truncated(),
    Fault.non_json(),
)
#: Short backoff, enough attempts to outlast ``max_per_document`` faults, a budget that
#: does not run out, and an attempt timeout that ends hangs quickly.
CHAOS_RETRY = RetryPolicy(
    max_attempts=8, base_delay=0.002, max_delay=0.02, attempt_timeout=0.4, budget_ratio=4
)


async def chaos_run(count: int, seed: int, *, concurrency: int = 32, rate: float = 0.35):
    """Submit ``count`` invoices under seeded chaos; check every invariant; return stats."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.random_faults(rate=rate, seed=seed, kinds=CHAOS_KINDS, max_per_document=3)
        documents = sample_invoices(count, issuer_vat=sb.client_id, lines=2, seed=seed)
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client:
            outcomes = await client.submit_many(
                documents, concurrency=concurrency, retry=CHAOS_RETRY
            )

        # One outcome per invoice, in input order, and the counts add up.
        assert len(outcomes) == count
        assert [o.index for o in outcomes] == list(range(count))
        counts = collections.Counter(o.status for o in outcomes)
        assert sum(counts.values()) == count

        # The ground truth: every invoice committed, and exactly once.
        assert len(sb.committed) == count
        assert sb.commit_count == count
        assert all(c.commits == 1 for c in sb.committed.values())
        committed_by_id = {c.record.internal_id: c for c in sb.committed.values()}
        assert len(committed_by_id) == count
        # No identity was answered 201 twice (a second commit would be a second 201).
        created = collections.Counter(r.identity for r in sb.requests if r.status == 201)
        assert max(created.values()) == 1

        without_record = 0
        for document, outcome in zip(documents, outcomes, strict=True):
            internal_id = document["DistributionDetails"]["InternalDocumentId"]
            holder = committed_by_id[internal_id]
            # Committed, so never reported failed, and it was this batch's own commit.
            assert outcome.ok, (internal_id, outcome)
            assert outcome.status is OutcomeStatus.ACCEPTED, (internal_id, outcome)
            assert outcome.key == f"id:{internal_id}"
            if outcome.result is None:
                without_record += 1  # a 409 whose body was lost again: ok, no record
                continue
            # Its own record, not a neighbour's.
            assert outcome.result.internal_id == internal_id
            assert outcome.result.mark == holder.record.mark
            assert outcome.result == holder.record

        faults = collections.Counter(
            r.fault.split(":")[0] for r in sb.requests if r.fault is not None
        )
        return counts, faults, without_record


def assert_chaos_was_real(faults: collections.Counter, count: int) -> None:
    """The seed did produce a broad mix: otherwise the soak proves nothing."""
    assert sum(faults.values()) > count * 0.2, faults
    expected = {"status", "reset", "hang", "commit_then_drop", "commit_then_500"}
    expected |= {"truncated", "non_json"}
    assert expected <= set(faults), faults


@pytest.mark.parametrize("seed", [101, 202])
async def test_chaos_200_invoices_each_committed_once_and_reported_truthfully(seed):
    """200 invoices at concurrency 32 under seeded faults before and after commit (500,
    408, 429, resets, hangs, lost answers, lying 500s, truncated and HTML bodies): 200
    outcomes, each committed exactly once, all reported accepted with their own record.
    """
    counts, faults, _ = await chaos_run(200, seed)
    assert counts == {OutcomeStatus.ACCEPTED: 200}
    assert_chaos_was_real(faults, 200)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
async def test_chaos_soak_1000_invoices_each_committed_once_and_reported_truthfully(seed):
    """The full soak: 1,000 invoices at concurrency 32 under the seeded fault mix, five
    seeds: counts add up, exactly-once commits, nothing committed reported failed, every
    result its own invoice's.
    """
    counts, faults, _ = await chaos_run(1000, seed)
    assert counts == {OutcomeStatus.ACCEPTED: 1000}
    assert_chaos_was_real(faults, 1000)
