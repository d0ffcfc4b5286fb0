"""9. Bulk: batch throughput and event-loop lag side by side with the raw floor.

One provider process (``_provider.py``, answering at once), the same 4 KB invoices
(RSA-3072), concurrency 64, and in every run a ticker task that sleeps 1 ms in a loop
and records how late it wakes (what every other coroutine of the application suffers).
Four runs per round, their order rotated every round (the machine is shared: drift
hits them all alike):

* **raw**: the floor of ``e2e`` (raw aiohttp, 64 workers over a shared iterator,
  ``json.dumps`` + the floor encryption on the loop + ``POST`` + ``json.loads``);
* **library**: ``client.submit_many(docs, concurrency=64)``, the default client;
* **stream** and **journaled**: ``client.submit_stream(docs, concurrency=64)``, each
  outcome discarded as it comes, without and with a fresh ledger file (default
  ``durable=True``: every commit fsynced).

Targets: library ÷ raw throughput >= 0.95x (median of the rounds' ratios); library lag
p99 ÷ raw lag p99 <= 1.0x (every tick of every round pooled); journaled ÷ unjournaled
stream >= 0.9x (median of the rounds' ratios).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invoicing_async import OutcomeStatus
from invoicing_sandbox._samples import sample_invoice

from ._common import Chart, Section, Settings, fmt, median, percentile
from ._provider import ProviderProcess
from .e2e import CONCURRENCY, client, run_floor
from .lag import TICK

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

NAME = "bulk"
VARIANTS = ["raw", "library", "stream", "journaled"]


async def _library(url: str, docs: list[Any], _work: Path) -> float:
    async with client(url) as c:
        await c.token()
        started = time.perf_counter()
        outcomes = await c.submit_many(docs, concurrency=CONCURRENCY)
        seconds = time.perf_counter() - started
    if any(o.status is not OutcomeStatus.ACCEPTED for o in outcomes):
        raise AssertionError("a document was not accepted")
    return len(docs) / seconds


async def _stream(url: str, docs: list[Any], ledger: Path | None) -> float:
    async with client(url) as c:
        await c.token()
        accepted = 0
        started = time.perf_counter()
        async for outcome in c.submit_stream(docs, concurrency=CONCURRENCY, ledger=ledger):
            accepted += outcome.status is OutcomeStatus.ACCEPTED
        seconds = time.perf_counter() - started
    if accepted != len(docs):
        raise AssertionError(f"only {accepted} of {len(docs)} accepted")
    return len(docs) / seconds


async def _ticking(run: Awaitable[float]) -> tuple[float, list[float], float]:
    """Docs/s of ``run``, the ticker's lags meanwhile, and CPU seconds of the process."""
    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        clock = time.perf_counter
        while not stop.is_set():
            started = clock()
            await asyncio.sleep(TICK)
            lags.append(max(0.0, clock() - started - TICK))

    ticking = asyncio.ensure_future(ticker())
    cpu = time.process_time()
    try:
        rate = await run
    finally:
        stop.set()
        await ticking
    return rate, lags, time.process_time() - cpu


def _runs(url: str, docs: list[Any], work: Path) -> dict[str, Callable[[int], Awaitable[float]]]:
    return {
        "raw": lambda _: run_floor(url, docs, encrypted=True),
        "library": lambda _: _library(url, docs, work),
        "stream": lambda _: _stream(url, docs, None),
        "journaled": lambda n: _stream(url, docs, work / f"bulk-{n}.db"),
    }


def measure(url: str, docs: list[Any], rounds: int, work: Path) -> dict[str, list[Any]]:
    """Every variant once per round, order rotated: (docs/s, lags, CPU s) per run."""
    runs = _runs(url, docs, work)
    results: dict[str, list[Any]] = {name: [] for name in VARIANTS}
    asyncio.run(_library(url, docs[:100], work))  # warm-up: imports, first connections
    for round_ in range(rounds):
        shift = round_ % len(VARIANTS)
        for name in VARIANTS[shift:] + VARIANTS[:shift]:
            results[name].append(asyncio.run(_ticking(runs[name](round_))))
        for leftover in work.glob("bulk-*.db*"):
            leftover.unlink()
    return results


def run(settings: Settings) -> Section:
    section = Section(
        NAME,
        f"Bulk: throughput and loop lag vs the raw floor (concurrency {CONCURRENCY}, "
        "4 KB invoices, RSA-3072)",
        ["Client", "docs x rounds", "docs/s (median)", "÷ raw", "CPU µs/doc",
         "lag p50 ms", "lag p99 ms", "Target"],
    )  # fmt: skip
    count, rounds = settings.n(3000, 200), settings.n(5, 1)
    docs = [sample_invoice(n) for n in range(1, count + 1)]
    work = Path(tempfile.mkdtemp(prefix="bench-bulk-"))
    try:
        with ProviderProcess() as provider:
            results = measure(provider.url, docs, rounds, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rate = {name: [r[0] for r in rs] for name, rs in results.items()}
    lags = {name: [lag for r in rs for lag in r[1]] for name, rs in results.items()}
    cpu = {name: median([r[2] / count * 1e6 for r in rs]) for name, rs in results.items()}
    p99 = {name: percentile(values, 99) * 1000 for name, values in lags.items()}
    speed = [lib / raw for lib, raw in zip(rate["library"], rate["raw"], strict=True)]
    journaled = [j / s for j, s in zip(rate["journaled"], rate["stream"], strict=True)]
    targets = {
        "library": section.check(
            "bulk: library ÷ raw floor throughput", median(speed), 0.95, higher=True
        ),
        "lag": section.add_check(
            "bulk: library lag p99 ÷ raw floor's",
            f"{p99['library'] / p99['raw']:.2f}x",
            "<= 1x",
            p99["library"] <= p99["raw"],
        ),
        "journaled": section.check(
            "bulk: journaled ÷ unjournaled stream", median(journaled), 0.9, higher=True
        ),
    }
    labels = {
        "raw": "raw floor (aiohttp + floor encryption on the loop)",
        "library": "library submit_many",
        "stream": "library submit_stream",
        "journaled": "library submit_stream, journaled",
    }
    for name in VARIANTS:
        relative = median(rate[name]) / median(rate["raw"])
        if name == "library":
            target = f"speed {targets['library']}; lag {targets['lag']}"
        elif name == "journaled":
            target = f"÷ stream {targets['journaled']}"
        else:
            target = ""
        section.rows.append(
            [
                labels[name],
                f"{count} x {rounds}",
                fmt(median(rate[name]), 0),
                f"{relative:.2f}x",
                f"{cpu[name]:.0f}",
                f"{percentile(lags[name], 50) * 1000:.2f}",
                f"{p99[name]:.2f}",
                target,
            ]
        )
    section.notes += [
        (
            "Ratios per round: library ÷ raw "
            + ", ".join(f"{r:.2f}" for r in speed)
            + "; journaled ÷ stream "
            + ", ".join(f"{r:.2f}" for r in journaled)
            + "."
        ),
        (
            "The provider answers at once from its own process, so the client's CPU is the "
            "bottleneck (the worst case for every per-document cost). 'CPU µs/doc' is the "
            "whole process (client, provider excluded, ticker included) per document: "
            "less sensitive to other load on the machine than docs/s."
        ),
        "Lag is how late a 1 ms asyncio.sleep wakes up, in the same loop as the batch.",
    ]
    section.charts.append(
        Chart(
            "Bulk vs raw floor",
            "docs/s",
            ["docs/s (median)"],
            {labels[name]: [median(rate[name])] for name in VARIANTS},
        )
    )
    return section
