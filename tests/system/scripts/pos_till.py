"""A POS till process: sells what it is told, deferring through outages; tests kill it.

Usage: pos_till.py OUTBOX BASE_URL CLIENT_ID KEY_FILE BUDGET
The API key is read from INVOICING_API_KEY. Commands on stdin, one a line:

* ``sell FIRST END``: sells sample invoices FIRST..END-1 one after the other, printing
  ``{"sale": n, "key", "kind": "record"|"deferred", "elapsed", "mark", "reason",
  "maybe_sent"}`` for each, then ``{"sold": END}``;
* ``quit``: closes the deferral (the drainer stops) and the client, prints
  ``{"quit": true}``.

Every final outcome the drainer delivers is printed as ``{"outcome": key, "status",
"mark"}`` (once the line is flushed the outcome counts as delivered).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from invoicing_async import (
    Deferral,
    DeferredOutcome,
    DeferredReceipt,
    InvoicingClient,
    ProviderKey,
    RetryPolicy,
    document_key,
)
from invoicing_sandbox import sample_invoice


def say(line: dict) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def delivered(item: DeferredOutcome) -> None:
    mark = item.result.mark if item.result is not None else None
    say({"outcome": item.key, "status": item.outcome.status.value, "mark": mark})


async def main() -> None:
    outbox, base_url, client_id, key_file, budget = sys.argv[1:6]
    key = ProviderKey.from_file(key_file)
    lines = asyncio.Queue[str]()
    loop = asyncio.get_running_loop()
    loop.add_reader(sys.stdin.fileno(), lambda: lines.put_nowait(sys.stdin.readline()))
    async with (
        InvoicingClient(
            base_url, client_id, os.environ["INVOICING_API_KEY"], provider_key=key,
            retry=RetryPolicy(base_delay=0.01, max_delay=0.05),
        ) as client,
        Deferral(
            client, outbox, budget=float(budget), on_outcome=delivered,
            probe_delay=0.02, probe_max_delay=0.2, poll=0.2,
            retry=RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02,
                              attempt_timeout=5.0),
        ) as till,
    ):  # fmt: skip
        while True:
            command = (await lines.get()).split()
            if not command or command[0] == "quit":
                break
            first, end = int(command[1]), int(command[2])
            for number in range(first, end):
                invoice = sample_invoice(number, issuer_vat=client_id, lines=2)
                started = time.monotonic()
                answer = await till.submit_or_defer(invoice)
                elapsed = time.monotonic() - started
                if isinstance(answer, DeferredReceipt):
                    say({
                        "sale": number, "key": answer.key, "kind": "deferred",
                        "elapsed": elapsed, "reason": answer.reason.value,
                        "maybe_sent": answer.maybe_sent, "mark": None,
                    })  # fmt: skip
                else:
                    say({
                        "sale": number, "key": document_key(invoice), "kind": "record",
                        "elapsed": elapsed, "mark": answer.mark,
                    })  # fmt: skip
            say({"sold": end})
    loop.remove_reader(sys.stdin.fileno())
    say({"quit": True})


asyncio.run(main())
