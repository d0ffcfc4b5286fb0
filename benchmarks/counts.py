"""15. Counts per document the machine's load does not move: Python calls, collections.

A batch of 1,500 25-line invoices goes through ``submit_many(concurrency=64)`` against
the instant provider process, JSON and PGP, sent by the library (``benchmarks.compare``'s
child, on this tree) and by the raw aiohttp floor (``e2e.floor_sender``), every run a
fresh interpreter on the same invoices (``_counts.py`` says how each count is taken):

* Python function calls per document: one run of each, the token fetched and 100
  documents sent first, then the batch with ``sys.setprofile`` counting;
* the collector's young (generation 0) and generation 1 collections per 1,500
  documents (median and range of the rounds), its full collections in all the rounds
  and the longest one, in unprofiled runs, the client and the floor interleaved.

No target: the figures are what a change to the path every document walks is held to
(``python -m benchmarks.compare OLD NEW`` prints the library's for two trees).

``python -m benchmarks.counts --child URL MODE INVOICES [--calls]`` is one run of the
floor.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._common import Section, Settings, run_child
from ._counts import PER, WARM_UP, Calls, full, measure, read_counts, young
from ._provider import ProviderProcess
from .compare import run_tree, write_invoices
from .e2e import floor_sender

NAME = "counts"
ROOT = Path(__file__).resolve().parents[1]
LINES = 25
MODES = {"json": "JSON", "pgp": "PGP"}
CLIENTS = ("library", "floor")


async def _floor_child(url: str, mode: str, documents: list[Any], *, calls: bool) -> None:
    counter = Calls() if calls else None  # before the session: its threads are hooked too
    async with floor_sender(url, encrypted=mode == "pgp") as send:
        result, _ = await measure(send, documents, counter)
    print(json.dumps(result))


def _one(client: str, url: str, mode: str, invoices: Path, *, calls: bool) -> dict[str, Any]:
    """One run of ``client`` (the library or the floor) in a fresh interpreter."""
    if client == "library":
        return run_tree(ROOT, url, mode, invoices, calls=calls)
    return run_child(NAME, url, mode, str(invoices), *(["--calls"] if calls else []))


def run(settings: Settings) -> Section:
    count = settings.n(PER, 150)
    rounds = settings.n(3, 1)
    section = Section(
        NAME,
        f"Counts per document: Python calls and collections ({count:,} {LINES}-line "
        "invoices, submit_many, concurrency 64)",
        [
            "Client", "Body", "docs x runs", "Python calls/doc", "÷ floor",
            f"gen-0 per {PER:,} docs (range)", "÷ floor", f"gen-1 per {PER:,}",
            "full GCs (longest)",
        ],
    )  # fmt: skip
    found: dict[tuple[str, str], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as work, ProviderProcess() as provider:
        invoices = write_invoices(Path(work), count, LINES)
        for mode in MODES:
            runs: dict[str, list[dict[str, Any]]] = {client: [] for client in CLIENTS}
            for round_ in range(rounds):
                for client in CLIENTS if round_ % 2 == 0 else CLIENTS[::-1]:
                    runs[client].append(_one(client, provider.url, mode, invoices, calls=False))
            for client in CLIENTS:
                calls = _one(client, provider.url, mode, invoices, calls=True)["calls"]
                found[client, mode] = {**read_counts(runs[client]), "calls": calls}
    for mode, body in MODES.items():
        floor = found["floor", mode]
        for client in CLIENTS:
            counts = found[client, mode]
            section.rows.append([
                "library submit_many" if client == "library" else "raw floor (aiohttp)",
                body,
                f"{count} x {rounds}",
                f"{counts['calls']:.1f}",
                f"{counts['calls'] / floor['calls']:.2f}x",
                young(counts),
                f"{counts['gen0'] / floor['gen0']:.2f}x" if floor["gen0"] else "-",
                f"{counts['gen1']:.0f}",
                full(counts),
            ])  # fmt: skip
    section.notes += [
        (
            f"Python calls/doc: sys.setprofile's 'call' events (a Python function starting or "
            f"a coroutine resuming; calls into builtins not counted) while the batch is sent, "
            f"after the token and a {WARM_UP}-document warm-up, divided by the documents: the "
            "interpreter's work per document. It moves by a percent or two between runs, "
            "where docs/s moves by ±7 % on this machine."
        ),
        (
            "gen-0: the collector's young collections, one each time its counter of tracked "
            "objects (dicts, lists, coroutines, futures ...) allocated minus freed passes 700: "
            "they follow what a document allocates and holds a while (copies, requests across "
            "an await, tasks in flight) and what the batch keeps. A full collection walks "
            "every object of the process: its duration is a stall of the event loop (the "
            "p99 lag while a batch runs). Both from gc.callbacks, in unprofiled runs started "
            "with a gc.collect()."
        ),
    ]
    return section


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"] and sys.argv[5:] in ([], ["--calls"]) and len(sys.argv) >= 5:
        url, mode, invoices = sys.argv[2:5]
        documents = json.loads(Path(invoices).read_text(encoding="utf-8"))
        asyncio.run(_floor_child(url, mode, documents, calls=sys.argv[5:] == ["--calls"]))
    else:
        sys.exit(f"usage: python -m {__spec__.name} --child URL MODE INVOICES [--calls]")
