"""Compare two checkouts of the library on the same invoices: ``submit_many`` throughput.

``python -m benchmarks.compare OLD NEW [--mode MODE,...|all] [--rounds 4] [--count 3000]
[--lines 10] [--latency 0] [--calls-only] [--results benchmarks/RESULTS.rst]`` runs each
job (mode) once per round and tree, the trees interleaved (the machine is shared: drift
hits both alike), each run a fresh interpreter with ``PYTHONPATH=<tree>``, against one
provider process (``_provider.py``):

- ``json``, ``pgp``: ``submit_many(concurrency=64)``;
- ``ledger``: the same, JSON, journaled in a fresh ledger file;
- ``single-json``, ``single-pgp``: one ``submit_json``/``submit_secure`` call after
  another, as a POS awaits one per sale (docs/s is then calls/s).

Every run sends the same invoices, written once to a JSON file: trees whose
``sample_invoice`` differ would otherwise not compare the library alone. It prints
docs/s and client CPU per document for each run, the medians and each round's paired
ratio; ``--results`` writes the table into a results file as its own section
(``python -m benchmarks`` keeps that section when it rewrites the file).

Beside the throughput it prints two counts per tree and mode that the machine's load
does not move (``_counts.py``), so that two trees a few per cent apart can be told apart:

- Python function calls per document, from one more run of each tree (the profiling hook
  makes a run two or three times slower: never a timed one): the client's token fetched and
  ``_counts.WARM_UP`` (100) documents sent first, then every invoice with the hook counting;
- the garbage collector's young (generation 0) collections per 1,500 documents and its
  full collections (how many in all the rounds, the longest), counted in the timed runs
  (after one ``gc.collect()`` before the clock, so that each run starts alike).

``--calls-only`` skips the timed rounds: the calls alone, about a minute for all five
modes. Issue 39 compared 0.3 with main on 5-line invoices: ``--mode json,ledger,single-json
--lines 5 --calls-only``; its collections were counted for 1,500 25-line invoices:
``--mode json --count 1500 --lines 25`` (``python -m benchmarks --only counts`` puts them
beside the raw aiohttp floor's).

For example, against the first release in a worktree::

    git worktree add /tmp/v010 v0.1.0-commit
    python -m benchmarks.compare /tmp/v010 . --mode pgp

``python -m benchmarks.compare --child TREE URL MODE INVOICES [--calls]`` is one run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._counts import PER, Calls, describe, full, measure, read_counts, young

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

CONCURRENCY = 64


async def _child(
    url: str, mode: str, documents: list[Any], armored_key: str, *, calls: bool
) -> None:
    """One run of ``mode``: timed, or ``calls``: the Python calls per document.

    A timed run counts the collector's runs too; a ``calls`` run has no clock (the hook
    slows it down). See :func:`_counts.measure`.
    """
    # Only the tree's own library and the standard library (all ``_counts`` imports): the
    # old tree may lack what the benchmarks' other helpers import.
    from invoicing_async import InvoicingClient, ProviderKey  # noqa: PLC0415

    counter = Calls() if calls else None  # before the client: its threads are hooked too
    key = ProviderKey.from_armored(armored_key)
    async with InvoicingClient(url, "094019245", "bench-api-key", provider_key=key) as client:
        await client.token()
        with tempfile.TemporaryDirectory() as work:
            send = _sender(client, mode, Path(work))
            result, outcomes = await measure(send, documents, counter)
    if not all(outcome.ok for outcome in outcomes):
        raise AssertionError("not every invoice was accepted")
    print(json.dumps(result))


def _sender(client: Any, mode: str, work: Path) -> Callable[[list[Any]], Awaitable[list[Any]]]:
    """How ``mode`` sends documents with ``client``; the sender returns their outcomes.

    Single calls return none (a call that fails raises). Each journaled batch is written
    to a ledger file of its own.
    """
    if mode.startswith("single-"):
        call = client.submit_secure if mode == "single-pgp" else client.submit_json

        async def one_by_one(documents: list[Any]) -> list[Any]:
            for document in documents:
                await call(document)
            return []

        return one_by_one
    # 0.3 renamed journal= to ledger= (the old name is a deprecated alias).
    name = "ledger" if "ledger" in _parameters(client.submit_many) else "journal"
    ledgers = itertools.count()

    async def batch(documents: list[Any]) -> list[Any]:
        journal = {name: work / f"bench-{next(ledgers)}.ledger"} if mode == "ledger" else {}
        return await client.submit_many(
            documents, concurrency=CONCURRENCY, encrypted=mode == "pgp", **journal
        )

    return batch


def _parameters(function: Callable[..., object]) -> set[str]:
    import inspect  # noqa: PLC0415

    return set(inspect.signature(function).parameters)


def run_tree(
    tree: Path, url: str, mode: str, invoices: Path, *, calls: bool = False
) -> dict[str, Any]:
    """One child run of ``tree`` (``calls``: the counting run); its JSON result."""
    here = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.compare", "--child", str(tree), url, mode,
         str(invoices), *(["--calls"] if calls else [])],
        capture_output=True, text=True, check=False, timeout=600, cwd=here,
        env={**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{here}"},
    )  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"run of {tree} failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


MODES = ("json", "pgp", "ledger", "single-json", "single-pgp")
#: Where ``--results`` puts its section in a results file (``python -m benchmarks`` keeps it).
BEGIN, END = ".. compare: begin", ".. compare: end"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare")
    parser.add_argument("trees", nargs=2, type=Path, help="two checkouts: old, new")
    parser.add_argument(
        "--mode",
        default="json",
        help=f"one or more of {', '.join(MODES)}, comma-separated, or 'all'",
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--lines", type=int, default=10, help="lines per invoice")
    parser.add_argument("--latency", type=float, default=0.0, help="provider latency (s)")
    parser.add_argument(
        "--calls-only",
        action="store_true",
        help="no timed rounds: only the Python calls per document of each tree and mode",
    )
    parser.add_argument(
        "--results",
        type=Path,
        help="also write the table into this file (benchmarks/RESULTS.rst): its section "
        "replaced, the rest kept",
    )
    args = parser.parse_args(argv)
    modes = list(MODES) if args.mode == "all" else [m.strip() for m in args.mode.split(",")]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    if args.calls_only and args.results:
        parser.error("--results writes the timed table: not with --calls-only")
    from ._provider import ProviderProcess  # noqa: PLC0415  (the parent only: see _child)

    rows = []
    with tempfile.TemporaryDirectory() as work, ProviderProcess(args.latency) as provider:
        invoices = write_invoices(Path(work), args.count, args.lines)
        for mode in modes:
            if len(modes) > 1:
                print(f"--- {mode}", flush=True)
            rounds = 0 if args.calls_only else args.rounds
            rows.append(_compare(args.trees, provider.url, mode, invoices, rounds))
    if args.results:
        _write(args, rows)
    return 0


def write_invoices(work: Path, count: int, lines: int) -> Path:
    """Write the invoices every run sends into ``work``; return the JSON file's path.

    The provider's public key is written beside it (``provider.asc``).
    """
    from invoicing_sandbox import sample_invoice  # noqa: PLC0415

    from ._common import keypair  # noqa: PLC0415  (the parent only: see _child)

    invoices = work / "invoices.json"
    invoices.with_name("provider.asc").write_text(keypair("rsa3072").public_armored, "ascii")
    invoices.write_text(
        json.dumps([sample_invoice(n, lines=lines) for n in range(count)]), encoding="utf-8"
    )
    return invoices


def _compare(trees: list[Path], url: str, mode: str, invoices: Path, rounds: int) -> list[str]:
    """Count ``mode``'s calls on both trees, then time it on both, interleaved.

    Print the runs and the medians; return a row of the table (only the calls when
    ``rounds`` is 0: no timed runs).
    """
    calls = [run_tree(tree.resolve(), url, mode, invoices, calls=True)["calls"] for tree in trees]
    for tree, count in zip(trees, calls, strict=True):
        print(f"{tree}: {count:.1f} Python calls/doc (a counting run)")
    calls_cell = f"{calls[0]:.1f} -> {calls[1]:.1f} ({calls[1] / calls[0]:.3f}x)"
    if not rounds:
        print(f"calls: {calls_cell}")
        return [mode, calls_cell]
    results: dict[Path, list[dict[str, Any]]] = {tree: [] for tree in trees}
    for round_ in range(rounds):
        order = trees if round_ % 2 == 0 else trees[::-1]
        for tree in order:
            result = run_tree(tree.resolve(), url, mode, invoices)
            results[tree].append(result)
            print(
                f"{tree}: {result['rate']:,.0f} docs/s, {result['cpu_us']:.1f} µs CPU/doc, "
                f"{describe(read_counts([result]))}"
            )
    old, new = (results[tree] for tree in trees)
    rate = [statistics.median(r["rate"] for r in runs) for runs in (old, new)]
    cpu = [statistics.median(r["cpu_us"] for r in runs) for runs in (old, new)]
    print(
        f"median: {rate[0]:,.0f} -> {rate[1]:,.0f} docs/s ({rate[1] / rate[0]:.3f}x), "
        f"{cpu[0]:.1f} -> {cpu[1]:.1f} µs CPU/doc ({cpu[1] - cpu[0]:+.1f})"
    )
    counts = [read_counts(runs) for runs in (old, new)]
    print(f"calls: {calls_cell}; collections: {describe(counts[0])} -> {describe(counts[1])}")
    # Each round runs both trees back to back: its ratio is measured under one load, and
    # the median of the rounds' ratios is less moved by a machine that gets busier.
    paired = [b["rate"] / a["rate"] for a, b in zip(old, new, strict=True)]
    ratio = statistics.median(paired)
    print(f"paired: {', '.join(f'{r:.3f}' for r in paired)}; median {ratio:.3f}x")
    return [
        mode,
        f"{rate[0]:,.0f} -> {rate[1]:,.0f}",
        f"{cpu[0]:.0f} -> {cpu[1]:.0f}",
        calls_cell,
        " -> ".join(young(c) for c in counts),
        " -> ".join(full(c) for c in counts),
        " / ".join(f"{r:.2f}" for r in paired),
        f"{ratio:.3f}x",  # as printed: 0.996x is not rounded up to a pass
        "PASS" if ratio >= 1.0 else "MISS",
    ]


def _write(args: argparse.Namespace, rows: list[list[str]]) -> None:
    """Put the table into ``args.results`` between BEGIN and END (replacing one there)."""
    from .__main__ import _underline, grid  # noqa: PLC0415

    old, new = (_describe(tree) for tree in args.trees)
    title = "Against an older checkout: ``python -m benchmarks.compare``"
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    about = (
        f"``{old}`` (old) and ``{new}`` (new), {args.rounds} interleaved rounds of "
        f"{args.count:,} invoices of {args.lines} lines each, concurrency {CONCURRENCY}, "
        f"one provider process, {when}. Wanted: the new tree at 1.0x the old one's "
        "throughput or more (the median of the rounds' paired ratios). Beside it, two "
        "counts the machine's load does not move: Python function calls per document "
        "(a run of its own, after a warm-up) and, in the timed runs, the garbage "
        f"collector's young (generation 0) collections per {PER:,} documents (median of "
        "the rounds, and their range) and its full collections in all the rounds, with "
        "the longest one."
    )
    section = "\n\n".join([
        BEGIN,
        _underline(title, "-"),
        about,
        grid(
            [
                "Mode", "docs/s (median)", "µs CPU/doc", "Python calls/doc",
                f"gen-0 per {PER:,} docs", "full GCs (longest)", "paired ratios", "median",
                "Verdict",
            ],
            rows,
        ),
        END,
    ])  # fmt: skip
    text = args.results.read_text(encoding="utf-8") if args.results.exists() else ""
    kept = keep(text) if text else ""
    text = text.replace(kept, "").rstrip("\n") if kept else text.rstrip("\n")
    args.results.write_text(f"{text}\n\n{section}\n".lstrip("\n"), encoding="utf-8")
    print(f"written to {args.results}")


def keep(text: str) -> str:
    """The compare section of a results file's text ("" when it has none)."""
    start, end = text.find(BEGIN), text.find(END)
    return text[start : end + len(END)] if 0 <= start < end else ""


def _describe(tree: Path) -> str:
    """A tree as its commit (and ``+changes`` when its work tree differs)."""
    git = ["git", "-C", str(tree)]
    head = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    return f"{tree.name or tree.resolve().name} {head or '?'}{' +changes' if dirty else ''}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"] and sys.argv[6:] in ([], ["--calls"]) and len(sys.argv) >= 6:
        tree, url, mode, invoices = sys.argv[2:6]
        sys.path.insert(0, tree)
        documents = json.loads(Path(invoices).read_text(encoding="utf-8"))
        armored = Path(invoices).with_name("provider.asc").read_text(encoding="ascii")
        asyncio.run(_child(url, mode, documents, armored, calls=sys.argv[6:] == ["--calls"]))
    else:
        sys.exit(main())
