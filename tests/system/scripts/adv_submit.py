"""Submit numbered sample invoices with a journal; the adversarial crash tests kill it.

Usage: adv_submit.py BASE_URL CLIENT_ID KEY_FILE JOURNAL COUNT CONCURRENCY [ATTEMPT_TIMEOUT]
The API key is read from the INVOICING_API_KEY environment variable. Prints one line:
``done N not-ok M statuses {...}``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import sys

from invoicing_async import InvoicingClient, ProviderKey, RetryPolicy
from invoicing_sandbox import sample_invoices


async def main() -> None:
    base_url, client_id, key_file, journal, count, concurrency = sys.argv[1:7]
    attempt_timeout = float(sys.argv[7]) if len(sys.argv) > 7 else 10.0
    key = ProviderKey.from_file(key_file)
    documents = sample_invoices(int(count), issuer_vat=client_id, lines=2)
    policy = RetryPolicy(
        base_delay=0.005, max_delay=0.02, max_attempts=8, attempt_timeout=attempt_timeout
    )
    async with InvoicingClient(
        base_url, client_id, os.environ["INVOICING_API_KEY"], provider_key=key
    ) as client:
        outcomes = await client.submit_many(
            documents, concurrency=int(concurrency), ledger=journal, retry=policy
        )
    bad = [o for o in outcomes if not o.ok]
    statuses = collections.Counter(o.status.value for o in outcomes)
    print(f"done {len(outcomes)} not-ok {len(bad)} statuses {json.dumps(statuses)}", flush=True)


asyncio.run(main())
