"""One outbox worker process for the fleet soak: drains a PostgreSQL outbox, then exits.

Usage: outbox_worker.py DSN BASE_URL CLIENT_ID KEY_FILE LEASE
The API key is read from INVOICING_API_KEY. Prints ``ready`` once set up, then ``done {json counts}``; the ledger
area's log lines (INFO and up: outages of the outbox database) go to stderr.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys

from invoicing_async import InvoicingClient, ProviderKey, RetryPolicy
from invoicing_async.outbox import PostgresOutbox


async def main() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    ledger = logging.getLogger("invoicing_async.ledger")
    ledger.addHandler(handler)
    ledger.setLevel(logging.INFO)
    dsn, base_url, client_id, key_file, lease = sys.argv[1:6]
    policy = RetryPolicy(base_delay=0.005, max_delay=0.05, max_attempts=8, attempt_timeout=5)
    async with (
        PostgresOutbox(dsn) as outbox,
        InvoicingClient(
            base_url,
            client_id,
            os.environ["INVOICING_API_KEY"],
            provider_key=ProviderKey.from_file(key_file),
        ) as client,
    ):
        print("ready", flush=True)  # set up: the outbox table exists, the client too
        counts = await outbox.run_worker(
            client,
            concurrency=8,
            stop_when_empty=True,
            retry=policy,
            lease=float(lease),
            poll=0.05,
        )
    print("done " + json.dumps({k.value: v for k, v in counts.items()}), flush=True)


asyncio.run(main())
