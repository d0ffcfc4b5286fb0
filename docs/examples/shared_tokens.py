"""One token for a fleet: clients with their own caches share tokens through Redis.

Each "worker" below stands for one process of a fleet (its own TokenCache, its own Redis
connections). Run it with a Redis server at REDIS_URL (default: a local one):

    REDIS_URL=redis://127.0.0.1:6379/0 python docs/examples/shared_tokens.py
"""

from __future__ import annotations

import asyncio
import os

from invoicing_async import InvoicingClient, TokenCache
from invoicing_async.redis import RedisTokenStore
from invoicing_sandbox import Sandbox, sample_invoices


# region worker
async def worker(
    base_url: str, client_id: str, api_key: str, redis_url: str, invoices: list
) -> int:
    """One process of the fleet: its cache keeps tokens in the shared store."""
    # Every process of the fleet uses the same key; keep it with the other secrets.
    encryption_key = bytes.fromhex(os.environ["TOKEN_STORE_KEY"])
    async with RedisTokenStore(redis_url, encryption_key=encryption_key) as store:
        cache = TokenCache(store=store)
        async with InvoicingClient(
            base_url, client_id, api_key, token_cache=cache
        ) as client:
            outcomes = await client.submit_many(invoices, encrypted=False)
    return sum(outcome.ok for outcome in outcomes)


# endregion worker


async def main(redis_url: str) -> None:
    """Four workers start together on a cold store: one token request between them."""
    os.environ.setdefault("TOKEN_STORE_KEY", os.urandom(32).hex())
    async with Sandbox() as sandbox:
        invoices = sample_invoices(40, issuer_vat=sandbox.client_id)
        shares = [invoices[n::4] for n in range(4)]
        accepted = await asyncio.gather(
            *(
                worker(
                    sandbox.base_url,
                    sandbox.client_id,
                    sandbox.client_secret,
                    redis_url,
                    share,
                )
                for share in shares
            )
        )
        assert sum(accepted) == 40
        assert sandbox.stats.token_requests == 1
        print(f"{sum(accepted)} invoices, {sandbox.stats.token_requests} token request")


if __name__ == "__main__":
    asyncio.run(main(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")))
