"""One outbox worker process of a fleet serving many issuers: drains, then exits.

Usage: pool_worker.py DSN BASE_URL CREDENTIALS_FILE KEY_FILE REDIS_URL
Sends through an ``IssuerPool`` whose tokens live in Redis (one token per issuer for the
whole fleet). Prints ``ready`` once set up, waits for a line on stdin (the fleet starts
together), then prints ``done {json counts}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from invoicing_async import IssuerPool, ProviderKey, RetryPolicy, TokenCache
from invoicing_async.outbox import PostgresOutbox
from invoicing_async.redis import RedisTokenStore


async def main(issuers: dict[str, str]) -> None:
    dsn, base_url, _, key_file, redis_url = sys.argv[1:6]
    policy = RetryPolicy(base_delay=0.005, max_delay=0.05, max_attempts=8, attempt_timeout=10)
    async with (
        RedisTokenStore(redis_url) as store,
        PostgresOutbox(dsn) as outbox,
        IssuerPool(
            base_url, issuers, provider_key=ProviderKey.from_file(key_file),
            token_cache=TokenCache(store),
        ) as pool,
    ):  # fmt: skip
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        counts = await outbox.run_worker(
            pool, concurrency=16, stop_when_empty=True, retry=policy, poll=0.05
        )
    print("done " + json.dumps({k.value: v for k, v in counts.items()}), flush=True)


asyncio.run(main(json.loads(Path(sys.argv[3]).read_text(encoding="utf-8"))))
