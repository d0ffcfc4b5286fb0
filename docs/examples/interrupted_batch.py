"""A bulk script that stops cleanly on Ctrl-C or SIGTERM and says where it stopped.

``python interrupted_batch.py INVOICES.jsonl LEDGER.db``: submits every invoice of the
file (one JSON object a line) with the client configured by the ``INVOICING_*``
variables, printing one line per outcome. Interrupted (Ctrl-C, or SIGTERM from a
process manager), it prints a summary instead of a traceback and exits 130; run again
with the same ledger, it sends only what is not settled. ``tests/test_docs.py`` runs it
against the sandbox and interrupts it both ways.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import signal
import sys
from typing import TYPE_CHECKING, Any

from invoicing_async import InvoicingClient, OutcomeStatus

if TYPE_CHECKING:
    from collections.abc import Iterator


def read_invoices(path: str) -> Iterator[dict[str, Any]]:
    """The invoices of a JSON Lines file, read lazily."""
    with open(path, encoding="utf-8") as lines:  # noqa: PTH123
        for line in lines:
            if line.strip():
                yield json.loads(line)


# region recipe
async def submit_all(
    path: str, ledger: str, counts: collections.Counter[OutcomeStatus]
) -> None:
    """Submit the file's invoices, counting outcomes as they settle."""
    main = asyncio.current_task()
    assert main is not None
    with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
        # SIGTERM stops the batch as Ctrl-C does: by cancelling it.
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
    async with InvoicingClient.from_env() as client:
        outcomes = client.submit_stream(read_invoices(path), ledger=ledger)
        async with contextlib.aclosing(outcomes):
            async for outcome in outcomes:
                counts[outcome.status] += 1
                print(outcome.key, outcome.status.value, flush=True)


def run(path: str, ledger: str) -> int:
    """Run the batch; on Ctrl-C or SIGTERM print where it stopped, not a traceback."""
    counts: collections.Counter[OutcomeStatus] = collections.Counter()
    try:
        asyncio.run(submit_all(path, ledger, counts))
    except (KeyboardInterrupt, asyncio.CancelledError):
        # The batch was cancelled: invoices in flight were recorded ``unknown`` in the
        # ledger, and the next run re-sends them (the provider answers 409 with the
        # record of those it holds). Invoices not started are sent by the next run.
        done = ", ".join(f"{n} {status.value}" for status, n in sorted(counts.items()))
        print(
            f"interrupted after {counts.total()} outcome(s) ({done or 'none'}); "
            f"run the same command again to resume from {ledger}",
            file=sys.stderr,
        )
        return 130
    held = counts[OutcomeStatus.ACCEPTED] + counts[OutcomeStatus.DUPLICATE]
    failed = counts.total() - held
    print(f"done: {counts.total()} invoice(s), {failed} not accepted", file=sys.stderr)
    return 1 if failed else 0


# endregion recipe


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2]))
