"""Submit numbered sample invoices with a journal; used by the crash/resume tests.

Usage: submit_journaled.py BASE_URL CLIENT_ID KEY_FILE JOURNAL COUNT CONCURRENCY
The API key is read from the INVOICING_API_KEY environment variable.
"""

from __future__ import annotations

import asyncio
import os
import sys

from invoicing_async import InvoicingClient, ProviderKey, RetryPolicy
from invoicing_sandbox import sample_invoices


async def main() -> None:
    base_url, client_id, key_file, journal, count, concurrency = sys.argv[1:7]
    key = ProviderKey.from_file(key_file)
    documents = sample_invoices(int(count), issuer_vat=client_id, lines=2)
    policy = RetryPolicy(base_delay=0.01, max_delay=0.05)
    async with InvoicingClient(
        base_url, client_id, os.environ["INVOICING_API_KEY"], provider_key=key
    ) as client:
        outcomes = await client.submit_many(
            documents, concurrency=int(concurrency), ledger=journal, retry=policy
        )
    bad = [o for o in outcomes if not o.ok]
    print(f"done {len(outcomes)} not-ok {len(bad)}", flush=True)


asyncio.run(main())
