"""One process of a fleet sharing tokens through Redis; the fleet tests start eight.

Usage: fleet_worker.py MODE BASE_URL CLIENT_ID REDIS_URL WORKER [SECONDS]
The API key is read from INVOICING_API_KEY; FLEET_LOCK_TTL and FLEET_REDIS_TIMEOUT set the
store's lock TTL (1 s) and Redis timeout (0.5 s), short to make outages quick to test. The worker prints ``ready`` once its client
exists, waits for a line on stdin (the start signal, so the fleet starts together), runs,
and prints one JSON line with what it saw.

Modes:
  cold   500 coroutines ask for a token at once.
  soak   for SECONDS, submit numbered invoices one after another (4 at a time).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import sys
import time

from invoicing_async import AuthenticationError, InvoicingClient, RetryPolicy, TokenCache
from invoicing_async.redis import RedisTokenStore
from invoicing_sandbox import sample_invoice


class Counter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def cold(client: InvoicingClient) -> dict:
    started = time.monotonic()
    tokens = await asyncio.gather(*(client.token() for _ in range(500)))
    return {
        "distinct": len({t.value for t in tokens}),
        "seconds": time.monotonic() - started,
        "done_at": time.time(),  # wall clock: compared with the parent's, same host
    }


async def soak(client: InvoicingClient, worker: int, seconds: float) -> dict:
    deadline = time.monotonic() + seconds
    counts: collections.Counter[str] = collections.Counter()
    policy = RetryPolicy(base_delay=0.01, max_delay=0.1, attempt_timeout=10)
    numbers = iter(range(worker * 1_000_000, (worker + 1) * 1_000_000))

    async def loop() -> None:
        while time.monotonic() < deadline:
            document = sample_invoice(next(numbers), issuer_vat=client_id, lines=1)
            try:
                await client.submit_json(document, retry=policy)
            except AuthenticationError as exc:
                counts[f"auth:{exc.status}"] += 1
            except Exception as exc:  # every failure is counted
                counts[type(exc).__name__] += 1
            else:
                counts["ok"] += 1
            await asyncio.sleep(0.02)

    await asyncio.gather(*(loop() for _ in range(4)))
    return dict(counts)


async def main() -> None:
    mode, base_url, _, redis_url, worker = sys.argv[1:6]
    seconds = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    warnings = Counter()
    logging.getLogger("invoicing_async").addHandler(warnings)
    store = RedisTokenStore(
        redis_url,
        lock_ttl=float(os.environ.get("FLEET_LOCK_TTL", "1.0")),
        timeout=float(os.environ.get("FLEET_REDIS_TIMEOUT", "0.5")),
        retry_after=0.5,
    )
    async with (
        store,
        InvoicingClient(
            base_url,
            client_id,
            os.environ["INVOICING_API_KEY"],
            token_cache=TokenCache(store),
            timeout=10,
        ) as client,
    ):
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        if mode == "cold":
            result = await cold(client)
        else:
            result = await soak(client, int(worker), seconds)
    result["warnings"] = warnings.messages
    result["requests"] = client.token_cache.requests(client._channel.tokens.key)
    print(json.dumps(result), flush=True)


client_id = sys.argv[3]
asyncio.run(main())
