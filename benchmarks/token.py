"""3. Token cache: single flight on a cold cache, and the cost of a warm lookup.

* 10,000 coroutines call ``client.token()`` at once on a cold cache; the provider process
  counts the ``POST /oauth/token`` it receives. Target: exactly 1.
* A warm ``await client.token()`` is timed in a loop (ns per call, median of several
  repeats) against the floor of awaiting a bare coroutine that returns a value without
  suspending (the least any ``async`` API can cost).
"""

from __future__ import annotations

import asyncio
import time

from invoicing_async import CredentialsKey

from ._common import Section, Settings, fmt, median
from ._provider import ProviderProcess
from .e2e import API_KEY, TIN, client

NAME = "token"


async def _cold(url: str, callers: int) -> tuple[int, float, set[str]]:
    async with client(url) as c:
        started = time.perf_counter()
        tokens = await asyncio.gather(*(c.token() for _ in range(callers)))
        seconds = time.perf_counter() - started
        key = CredentialsKey.of(c.base_url, TIN, API_KEY)
        return c.token_cache.requests(key), seconds, {t.value for t in tokens}


async def _warm(url: str, loops: int, repeats: int) -> tuple[list[float], list[float]]:
    async with client(url) as c:
        token = await c.token()

        async def bare() -> object:
            return token

        lookup: list[float] = []
        floor: list[float] = []
        clock = time.perf_counter_ns
        for _ in range(repeats):
            started = clock()
            for _ in range(loops):
                await c.token()
            lookup.append((clock() - started) / loops)
            started = clock()
            for _ in range(loops):
                await bare()
            floor.append((clock() - started) / loops)
        return lookup, floor


def run(settings: Settings) -> Section:
    section = Section(
        NAME,
        "Token cache",
        ["Measure", "Library", "Floor", "Ratio", "Target"],
    )
    callers = 10_000
    loops = settings.n(20_000, 2_000)
    repeats = settings.n(15, 3)
    with ProviderProcess() as provider:
        provider.reset()
        cache_requests, seconds, values = asyncio.run(_cold(provider.url, callers))
        seen = provider.stats()["token"]
        target = section.add_check(
            f"token: POST /oauth/token for {callers:,} cold callers", str(seen), "== 1", seen == 1
        )
        section.rows.append(
            [
                f"POST /oauth/token seen by the provider, {callers:,} cold callers",
                str(seen),
                "1",
                "",
                target,
            ]
        )
        section.rows.append(
            [
                "fetches started by the cache / distinct tokens returned",
                f"{cache_requests} / {len(values)}",
                "1 / 1",
                "",
                "",
            ]
        )
        section.rows.append(
            [f"time for all {callers:,} cold callers", f"{seconds * 1000:.1f} ms", "", "", ""]
        )
        lookup, floor = asyncio.run(_warm(provider.url, loops, repeats))
    lib_ns, floor_ns = median(lookup), median(floor)
    section.rows.append(
        [
            "warm await client.token(), ns per call (median of repeats)",
            fmt(lib_ns, 0),
            fmt(floor_ns, 0),
            f"{lib_ns / floor_ns:.1f}x",
            "",
        ]
    )
    section.notes += [
        (
            "The floor is `await bare()` where `async def bare(): return token`: a coroutine "
            "call that never suspends."
        ),
        f"{repeats} repeats of {loops:,} calls each, interleaved with the floor.",
    ]
    return section
