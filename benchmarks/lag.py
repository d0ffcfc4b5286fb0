"""4. Event-loop lag while a batch runs.

A ticker task sleeps 1 ms in a loop and records how late it wakes (the overshoot beyond
1 ms), which is what every other coroutine of the application suffers. Measured while
1,500 4 KB invoices (RSA-3072) go through ``submit_many(concurrency=64)`` against the
instant provider process:

* library: what the library does by default (each document prepared on the loop by
  the worker that sends it, at most 2 ms of such work per turn of the loop);
* raw floor: raw aiohttp with the floor encryption on the loop, 64 workers (``e2e``);
* floor: the ticker alone on an idle loop;
* diagnostics: encryption in a thread pool passed as ``encrypt_executor`` (0.3's
  default); the same batch unencrypted (``/Invoice/json``); encrypting in a
  ``ProcessPoolExecutor``; the library at concurrency 16; the library against a
  provider that answers after 20 ms.

Target: library p99 <= the raw floor's p99.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import os
import time

from invoicing_sandbox._samples import sample_invoice

from ._common import Chart, Section, Settings, percentile, provider_key
from ._provider import ProviderProcess
from .e2e import CONCURRENCY, client, run_floor

NAME = "lag"
TICK = 0.001


async def _ticker(stop: asyncio.Event, lags: list[float]) -> None:
    clock = time.perf_counter
    while not stop.is_set():
        started = clock()
        await asyncio.sleep(TICK)
        lags.append(max(0.0, clock() - started - TICK))


async def _measure(
    url: str | None,
    docs: list,
    *,
    raw: bool = False,
    encrypted: bool = True,
    executor: concurrent.futures.Executor | None = None,
    idle: float = 0.0,
    concurrency: int = CONCURRENCY,
) -> list[float]:
    lags: list[float] = []
    stop = asyncio.Event()
    if url is None:
        ticker = asyncio.ensure_future(_ticker(stop, lags))
        await asyncio.sleep(idle)
    elif raw:
        ticker = asyncio.ensure_future(_ticker(stop, lags))
        await run_floor(url, docs, encrypted=encrypted)
    else:
        async with client(url, encrypt_executor=executor) as c:
            await c.token()
            await c.submit_many(docs[:100], concurrency=CONCURRENCY)  # connections, workers
            ticker = asyncio.ensure_future(_ticker(stop, lags))
            await c.submit_many(docs, concurrency=concurrency, encrypted=encrypted)
    stop.set()
    await ticker
    return lags


def run(settings: Settings) -> Section:
    section = Section(
        NAME,
        "Event-loop lag during a batch (1 ms ticker overshoot)",
        ["Encryption", "docs", "ticks", "p50 ms", "p99 ms", "max ms", "Target (p99 <= raw's)"],
    )
    count = settings.n(1500, 300)
    repeats = settings.n(3, 1)
    docs = [sample_invoice(n) for n in range(1, count + 1)]
    names = ["idle", "library", "raw", "threads", "json", "processes", "c16", "slow"]
    results: dict[str, list[float]] = {name: [] for name in names}
    workers = os.cpu_count() or 1
    context = multiprocessing.get_context("spawn")
    with (
        ProviderProcess() as provider,
        ProviderProcess(latency=0.02) as slow_provider,
        concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool,
        concurrent.futures.ThreadPoolExecutor(4) as threads,
    ):
        list(pool.map(provider_key("rsa3072").encrypt, [b"warm-up"] * 4 * workers))
        variants = {
            "idle": lambda: _measure(None, docs, idle=0.5),
            "library": lambda: _measure(provider.url, docs),
            "raw": lambda: _measure(provider.url, docs, raw=True),
            "threads": lambda: _measure(provider.url, docs, executor=threads),
            "json": lambda: _measure(provider.url, docs, encrypted=False),
            "processes": lambda: _measure(provider.url, docs, executor=pool),
            "c16": lambda: _measure(provider.url, docs, concurrency=16),
            "slow": lambda: _measure(slow_provider.url, docs),
        }
        for _ in range(repeats):
            for name in names:
                results[name] += asyncio.run(variants[name]())
    labels = {
        "idle": "none: idle loop (floor)",
        "library": "library (on the loop, paced)",
        "raw": "raw floor: aiohttp + floor encryption on the loop",
        "threads": "library, encrypt_executor=ThreadPoolExecutor(4)",
        "json": "none: /Invoice/json batch",
        "processes": f"ProcessPoolExecutor({workers})",
        "c16": "library, concurrency 16",
        "slow": "library, provider answering in 20 ms",
    }
    chart: dict[str, list[float]] = {"p50": [], "p99": []}
    raw_p99 = percentile(results["raw"], 99) * 1000
    for name, lags in results.items():
        p50, p99 = percentile(lags, 50) * 1000, percentile(lags, 99) * 1000
        chart["p50"].append(p50)
        chart["p99"].append(p99)
        target = ""
        if name == "library":
            target = section.add_check(
                "lag: library p99 ÷ raw floor's",
                f"{p99 / raw_p99:.2f}x",
                "<= 1x",
                p99 <= raw_p99,
            )
        section.rows.append(
            [
                labels[name],
                "" if name == "idle" else f"{count} x {repeats}",
                str(len(lags)),
                f"{p50:.2f}",
                f"{p99:.2f}",
                f"{max(lags) * 1000:.2f}",
                target,
            ]
        )
    section.notes += [
        (
            "Lag is how late a 1 ms asyncio.sleep wakes up. The idle floor shows the timer "
            "resolution and machine noise."
        ),
        (
            "Batches run against the instant provider process (the worst case for the loop: "
            "responses arrive as fast as the client can take them, so the client's CPU is "
            "saturated and 64 workers are ready at once)."
        ),
    ]
    section.charts.append(
        Chart("Event-loop lag during a batch", "ms", [labels[n] for n in results], chart)
    )
    return section
