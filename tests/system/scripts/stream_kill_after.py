"""Stream numbered sample invoices into a ledger; SIGKILL itself after N outcomes.

Usage: stream_kill_after.py BASE_URL CLIENT_ID KEY_FILE LEDGER COUNT CONCURRENCY KILL_AFTER
The API key is read from the INVOICING_API_KEY environment variable. With KILL_AFTER 0
the stream runs to its end and prints ``done N not-ok M``; otherwise the process kills
itself (no clean-up of any kind) as soon as it has received that many outcomes: a crash
at a moment the test chose, not one it hoped a timer would hit.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from invoicing_async import InvoicingClient, ProviderKey, RetryPolicy
from invoicing_sandbox import sample_invoices


async def main() -> None:
    base_url, client_id, key_file, ledger, count, concurrency, kill_after = sys.argv[1:8]
    key = ProviderKey.from_file(key_file)
    documents = sample_invoices(int(count), issuer_vat=client_id, lines=2)
    policy = RetryPolicy(base_delay=0.005, max_delay=0.02)
    seen = bad = 0
    async with InvoicingClient(
        base_url, client_id, os.environ["INVOICING_API_KEY"], provider_key=key
    ) as client:
        async for outcome in client.submit_stream(
            documents, concurrency=int(concurrency), ledger=ledger, retry=policy
        ):
            seen += 1
            bad += not outcome.ok
            if seen == int(kill_after):
                os.kill(os.getpid(), signal.SIGKILL)
    print(f"done {seen} not-ok {bad}", flush=True)


asyncio.run(main())
