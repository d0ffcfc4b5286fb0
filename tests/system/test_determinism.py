"""Adversarial: seeded faults and the batch report are reproducible.

Two runs of the same batch against sandboxes with the same seeds, at concurrency 16 (so
requests interleave differently each time), must meet the same fault on every
``(document identity, attempt)`` and produce the same report: the same status and the same
number of attempts for every input index. Another fault seed must change the faults (the
seed is not ignored).
"""

from __future__ import annotations

from invoicing_async import InvoicingClient, OutcomeStatus, RetryPolicy
from invoicing_sandbox import DEFAULT_RANDOM_KINDS, Fault, Sandbox, sample_invoices

KINDS = (*DEFAULT_RANDOM_KINDS, Fault.hang())


async def run(fault_seed: int, *, resend: bool) -> tuple[dict, list]:
    """One batch: the fault met by each (identity, attempt), and (status, attempts) per
    input index.
    """
    async with Sandbox(key_algorithm="cv25519", seed=42) as sb:
        documents = sample_invoices(120, issuer_vat=sb.client_id, lines=1, seed=7)
        for document in documents[::17]:
            document["Summaries"]["TotalGrossValue"] = -1  # REJECTED (400)
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client:
            for document in documents[3::23]:  # sent before the batch: DUPLICATE
                await client.submit_json(document)
            sb.random_faults(rate=0.4, seed=fault_seed, kinds=KINDS, max_per_document=3)
            retry = RetryPolicy(
                max_attempts=6,
                base_delay=0.001,
                max_delay=0.01,
                attempt_timeout=0.3,
                budget_ratio=5,
                resend_ambiguous=resend,
            )
            outcomes = await client.submit_many(documents, concurrency=16, retry=retry)
    # Read after close(): it waits for handlers still noticing a client that left (a hang
    # is journaled when it ends, a moment after the client gave up).
    faults = {
        (r.identity, r.attempt): r.fault
        for r in sb.requests
        if r.identity is not None and r.path == "/Invoice/secure"
    }
    return faults, [(o.status, o.attempts) for o in outcomes]


async def test_same_seed_same_faults_and_same_report_with_resending():
    """Re-sending on: two runs with the same seed meet identical faults per
    (identity, attempt) and report identical statuses and attempts per index.
    """
    first_faults, first_report = await run(9, resend=True)
    second_faults, second_report = await run(9, resend=True)
    assert first_faults == second_faults
    assert first_report == second_report
    statuses = {status for status, _ in first_report}
    assert statuses == {OutcomeStatus.ACCEPTED, OutcomeStatus.DUPLICATE, OutcomeStatus.REJECTED}
    assert sum(f is not None for f in first_faults.values()) > 20
    assert max(attempts for _, attempts in first_report) > 1


async def test_same_seed_same_report_without_resending_and_another_seed_differs():
    """Re-sending off (ambiguous failures end UNKNOWN): the same seed gives the same
    report again; another seed gives other faults.
    """
    first_faults, first_report = await run(4, resend=False)
    second_faults, second_report = await run(4, resend=False)
    assert first_faults == second_faults
    assert first_report == second_report
    assert OutcomeStatus.UNKNOWN in {status for status, _ in first_report}
    other_faults, _ = await run(5, resend=False)
    assert other_faults != first_faults
