"""A bulk job: many invoices, one truthful outcome each, safe to stop and run again.

``main()`` runs the job against the embedded sandbox with 20% of the requests hit by
seeded faults (lost answers, resets, 5xx, 408, 429 …), stops it half-way as a crash
would, resumes it from its journal, and checks the provider's ground truth: every
invoice held exactly once. ``python docs/examples/bulk_job.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invoicing_async import (
    BatchProgress,
    InvoicingClient,
    Outcome,
    OutcomeStatus,
    RetryPolicy,
    document_key,
)
from invoicing_sandbox import Fault, Sandbox, sample_invoice

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator


# region retry
#: The defaults, spelled out: at most 6 requests per invoice, backoff with full jitter
#: from 0.25 s doubling up to 15 s (or what ``Retry-After`` asks), 30 s per request.
RETRY = RetryPolicy(
    max_attempts=6, base_delay=0.25, max_delay=15.0, attempt_timeout=30.0
)
# endregion retry


# region many
def report(progress: BatchProgress) -> None:
    """Progress callback: called after every settled invoice."""
    if progress.settled % 100 == 0:
        counts = {status.value: n for status, n in progress.counts.items() if n}
        print(f"{progress.settled} settled: {counts}")


async def run_job(
    client: InvoicingClient,
    invoices: Iterable[dict[str, Any]],
    journal: Path,
    *,
    retry: RetryPolicy = RETRY,
) -> list[Outcome]:
    """Submit ``invoices``; one outcome each, in input order. Safe to run again."""
    outcomes = await client.submit_many(
        invoices,
        concurrency=32,  # invoices in flight at once (within the connection pool)
        ledger=journal,  # write-ahead log: a second run skips what is settled
        retry=retry,
        deadline=15 * 60,  # seconds for the whole batch
        on_progress=report,
    )
    for outcome in outcomes:
        if not outcome.ok:  # rejected, unknown or not_sent: someone must look
            print(outcome.index, outcome.key, outcome.status.value, outcome.error)
    return outcomes


# endregion many


# region stream
async def stream_job(
    client: InvoicingClient,
    invoices: Iterable[dict[str, Any]],
    journal: Path,
    results: Path,
    *,
    retry: RetryPolicy = RETRY,
    stop_after: int | None = None,
) -> int:
    """Submit a stream of any length, writing each outcome as it settles."""
    written = 0
    with results.open("a", encoding="utf-8") as out:
        stream = client.submit_stream(
            invoices, concurrency=64, ledger=journal, retry=retry
        )
        async with contextlib.aclosing(stream) as outcomes:  # closing stops the workers
            async for outcome in outcomes:  # in the order they settle
                record = {
                    "key": outcome.key,
                    "status": outcome.status.value,
                    "mark": outcome.result.mark if outcome.result else None,
                }
                out.write(json.dumps(record) + "\n")
                written += 1
                if written == stop_after:
                    break  # in-flight invoices are journaled: a rerun re-sends them
    return written


# endregion stream


def invoices(issuer: str, count: int) -> Iterator[dict[str, Any]]:
    """The job's input, produced lazily (from a database cursor, a file …)."""
    for number in range(1, count + 1):
        yield sample_invoice(number, issuer_vat=issuer, lines=3)


async def main() -> None:
    """Crash half-way through a faulty batch, resume it, and check the ground truth."""
    count = 300
    quick = RetryPolicy(base_delay=0.01, max_delay=0.1)  # the example's backoff: short
    async with Sandbox() as sandbox:
        sandbox.random_faults(
            rate=0.2, seed=7
        )  # reproducible faults on 20% of requests
        with tempfile.TemporaryDirectory() as tmp:
            journal, results = Path(tmp, "job.journal"), Path(tmp, "results.jsonl")
            async with InvoicingClient(
                sandbox.base_url,
                sandbox.client_id,
                sandbox.client_secret,
                provider_key=sandbox.provider_key,
            ) as client:
                # region resume
                # The first run stops after 100 outcomes, as a crash would.
                written = await stream_job(
                    client,
                    invoices(sandbox.client_id, count),
                    journal,
                    results,
                    retry=quick,
                    stop_after=100,
                )
                # Run the same job again with the same journal: settled invoices are
                # not sent again, those that were in flight are re-sent (a 409 answers
                # any the provider already holds), the rest are submitted.
                outcomes = await run_job(
                    client, invoices(sandbox.client_id, count), journal, retry=quick
                )
                # endregion resume
            assert written == 100

        statuses = Counter(outcome.status for outcome in outcomes)
        assert statuses[OutcomeStatus.ACCEPTED] == count, statuses
        assert [outcome.index for outcome in outcomes] == list(range(count))
        assert (
            sum(outcome.attempts == 0 for outcome in outcomes) >= 100
        )  # from the journal
        # The provider's ground truth: every invoice held, none committed twice.
        assert sandbox.commit_count == count
        assert all(held.commits == 1 for held in sandbox.committed.values())
        assert {outcome.key for outcome in outcomes} == set(sandbox.committed)

        # region deadline
        # A deadline ends the batch in time. An invoice whose request was sent but not
        # answered by then ends UNKNOWN (the provider may hold it), not "failed".
        sandbox.random_faults(rate=0)
        sandbox.script(Fault.hang())  # the provider never answers the next request
        late = sample_invoice(1000, issuer_vat=sandbox.client_id)
        async with InvoicingClient(
            sandbox.base_url,
            sandbox.client_id,
            sandbox.client_secret,
            provider_key=sandbox.provider_key,
        ) as client:
            [outcome] = await client.submit_many([late], deadline=1.0)
            assert outcome.status is OutcomeStatus.UNKNOWN
            assert not outcome.ok
            # Submitting it again later is safe, and settles it.
            [outcome] = await client.submit_many([late])
            assert outcome.ok
        assert sandbox.committed[document_key(late)].commits == 1
        # endregion deadline


if __name__ == "__main__":
    asyncio.run(main())
