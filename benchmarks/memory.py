"""5. Peak memory streaming many documents through ``submit_stream``.

Each size runs in a fresh interpreter (``VmHWM``, the peak resident set size, only ever
grows): the child imports everything, opens the client, fetches the token and sends a few
documents, records its resident size, then streams N small documents from a generator
through ``client.submit_stream(gen(), concurrency=64, encrypted=False)`` against the
provider process, discarding each outcome, and reports its peak. Growth is peak minus
the resident size before streaming; the target compares the growth at 100k with the
growth at 10k (< 15 MB: memory follows the concurrency, not the input).

``python -m benchmarks.memory --child N URL`` is the child.
"""

from __future__ import annotations

import json
import sys

from ._common import Chart, Section, Settings, fmt, peak_kib, run_child, small_documents
from ._provider import ProviderProcess

NAME = "memory"


async def _child(count: int, url: str) -> dict[str, float]:
    import time  # noqa: PLC0415

    from .e2e import CONCURRENCY, client  # noqa: PLC0415

    async with client(url) as c:
        await c.token()
        async for _ in c.submit_stream(
            small_documents(200), concurrency=CONCURRENCY, encrypted=False
        ):
            pass
        rss_before, hwm_before = peak_kib()
        started = time.perf_counter()
        accepted = 0
        async for outcome in c.submit_stream(
            small_documents(count), concurrency=CONCURRENCY, encrypted=False
        ):
            accepted += outcome.status.name == "ACCEPTED"
        seconds = time.perf_counter() - started
        rss_after, hwm_after = peak_kib()
    return {
        "count": count,
        "accepted": accepted,
        "seconds": seconds,
        "rss_before_kib": rss_before,
        "hwm_before_kib": hwm_before,
        "rss_after_kib": rss_after,
        "hwm_after_kib": hwm_after,
    }


def run(settings: Settings) -> Section:
    section = Section(
        NAME,
        "Peak memory streaming documents (submit_stream, concurrency 64, /Invoice/json)",
        ["Documents", "RSS before", "peak RSS", "growth", "docs/s", "Target"],
    )
    sizes = [2_000, 10_000] if settings.quick else [10_000, 100_000, 1_000_000]
    results = {}
    with ProviderProcess() as provider:
        for size in sizes:
            results[size] = result = run_child(NAME, str(size), provider.url)
            if result["accepted"] != size:
                raise AssertionError(f"only {result['accepted']} of {size} accepted")
    growth = {
        size: (r["hwm_after_kib"] - r["rss_before_kib"]) / 1024 for size, r in results.items()
    }
    small, large = sizes[0], sizes[1]
    for size, result in results.items():
        target = ""
        if size == large:
            target = section.check(
                f"memory: peak growth {large:,} minus {small:,} docs",
                growth[large] - growth[small],
                15,
                higher=False,
                unit=" MB",
            )
        section.rows.append(
            [
                f"{size:,}",
                f"{result['rss_before_kib'] / 1024:.1f} MB",
                f"{result['hwm_after_kib'] / 1024:.1f} MB",
                f"{growth[size]:+.1f} MB",
                fmt(size / result["seconds"], 0),
                target,
            ]
        )
    section.notes += [
        (
            "Fresh interpreter per size; growth = VmHWM after streaming - VmRSS before it "
            "(client open, token fetched, 200 documents sent already)."
        ),
        (
            "Documents are small dicts made lazily by a generator; outcomes are discarded as "
            "they arrive."
        ),
    ]
    section.charts.append(
        Chart(
            "Peak RSS growth while streaming",
            "MB",
            [f"{size:,} docs" for size in sizes],
            {"peak growth": [growth[size] for size in sizes]},
        )
    )
    return section


def main() -> None:
    import asyncio  # noqa: PLC0415

    if len(sys.argv) != 4 or sys.argv[1] != "--child":
        sys.exit("usage: python -m benchmarks.memory --child COUNT URL")
    print(json.dumps(asyncio.run(_child(int(sys.argv[2]), sys.argv[3]))))


if __name__ == "__main__":
    main()
