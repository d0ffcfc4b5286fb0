"""Smoke test of the benchmark harness: it runs and writes its table. No timing is checked."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> str:
    """``python -m <args>`` from the project root: its stdout, once it exited 0."""
    completed = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    return completed.stdout


def _quick(only: str, output: Path) -> str:
    """``python -m benchmarks --quick --only <only>``: the RESULTS.rst it wrote in ``output``
    (a temporary directory, so the committed results stay untouched)."""
    _run("benchmarks", "--quick", "--only", only, "--output", str(output))
    return (output / "RESULTS.rst").read_text(encoding="utf-8")


def test_quick_pgp_benchmark_exits_0_and_writes_a_table(tmp_path):
    """`python -m benchmarks --quick --only pgp` exits 0 and writes RESULTS.rst holding the
    PGP table.
    """
    results = _quick("pgp", tmp_path)
    assert "PGP stage" in results
    assert "library encrypt()" in results
    assert "+===" in results  # a grid table, not just a heading


def test_quick_ledger_benchmark_exits_0_and_checks_its_three_targets(tmp_path):
    """`python -m benchmarks --quick --only ledger` (small counts, one round) exits 0 and
    writes the ledger's table with its three targets: memory, throughput, resume.
    """
    results = _quick("ledger", tmp_path)
    assert "The SQLite ledger" in results
    assert "journaled peak growth" in results
    assert "journaled ÷ unjournaled throughput" in results
    assert "resume from 20,000 entries" in results


def test_quick_claims_benchmark_exits_0_and_checks_its_targets(tmp_path):
    """`python -m benchmarks --quick --only claims` exits 0 and writes the table of the
    claims (SQLite over 1 and 1,000 issuers, with the 1-issuer target) and of the
    format 3 upgrade, with its target.
    """
    results = _quick("claims", tmp_path)
    assert "Outbox claims across issuers" in results
    assert "SQLite claim of 32, 10,000 pending, 1,000 issuer(s)" in results
    assert "claims: SQLite, 1 issuer ÷ format 2's claim" in results
    assert "claims: format 3 upgrade ÷ a copy of the table" in results


def _calls(stdout: str) -> list[float]:
    """The Python calls per document a compare run printed, one per tree."""
    found = re.findall(r"^\S+: ([\d.]+) Python calls/doc", stdout, re.MULTILINE)
    return [float(n) for n in found]


@pytest.mark.parametrize("mode", ["json", "ledger", "single-pgp"])
def test_compare_runs_two_trees_on_the_same_invoices(mode):
    """`python -m benchmarks.compare A B --mode M` runs each tree and prints the medians
    (here the project against itself, a handful of invoices, one round): a batch, a
    journaled batch, single calls. Beside them, each tree's Python calls per document
    (counted in a run of its own) and its collections."""
    stdout = _run(
        "benchmarks.compare", str(ROOT), str(ROOT), "--mode", mode, "--count", "40", "--rounds", "1"
    )
    print(stdout)
    assert stdout.count("docs/s") == 3  # two runs and the medians
    assert "median:" in stdout
    calls = _calls(stdout)
    assert len(calls) == 2
    # Sending a document is hundreds of Python calls: a hook that counts nothing (or
    # counts every event) cannot pass.
    assert all(100 < n < 2000 for n in calls), calls
    medians = r"^calls: [\d.]+ -> [\d.]+ \([\d.]+x\); collections: gen-0 \d+"
    assert re.search(medians, stdout, re.MULTILINE)
    assert stdout.count(" per 1,500 docs, full ") == 4  # two runs, the medians of both


def test_compare_calls_only_counts_every_mode_without_timing():
    """`benchmarks.compare A B --mode json,single-json --calls-only` prints each tree's
    Python calls per document for each mode, and no throughput (no timed runs)."""
    stdout = _run(
        "benchmarks.compare", str(ROOT), str(ROOT), "--mode", "json,single-json", "--count",
        "30", "--calls-only",
    )  # fmt: skip
    print(stdout)
    assert "docs/s" not in stdout
    calls = _calls(stdout)
    assert len(calls) == 4
    assert all(n > 100 for n in calls), calls
    assert stdout.count("\ncalls: ") == 2


def test_compare_writes_its_table_into_the_results_and_a_later_run_keeps_it(tmp_path):
    """`benchmarks.compare --mode json,single-json --results FILE` adds one section with a
    row per mode and its verdict, keeping the file's other text and replacing its own
    section when run again; `python -m benchmarks` rewriting the file keeps it too."""
    results = tmp_path / "RESULTS.rst"
    results.write_text("Benchmark results\n=================\n\nearlier text\n", encoding="utf-8")
    compare = ("benchmarks.compare", str(ROOT), str(ROOT), "--count", "30", "--rounds", "1")
    for _ in range(2):
        _run(*compare, "--mode", "json,single-json", "--results", str(results))
    text = results.read_text(encoding="utf-8")
    assert "earlier text" in text
    assert text.count("Against an older checkout") == 1
    section = text[text.index("Against an older checkout") :]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in row.split("|")[1:-1]] for row in rows]
    assert [row[0] for row in cells] == ["Mode", "json", "single-json"]
    assert cells[0][3:6] == ["Python calls/doc", "gen-0 per 1,500 docs", "full GCs (longest)"]
    assert all(re.fullmatch(r"[\d.]+ -> [\d.]+ \([\d.]+x\)", row[3]) for row in cells[1:])
    assert all(row[-1] in {"PASS", "MISS"} for row in cells[1:])

    rewritten = _quick("pgp", tmp_path)
    assert "PGP stage" in rewritten
    assert "earlier text" not in rewritten
    assert rewritten.count("Against an older checkout") == 1


def test_quick_single_call_benchmark_exits_0_and_checks_both_providers(tmp_path):
    """`python -m benchmarks --quick --only single` exits 0 and writes the single-call
    table, with its target checked against the instant and the 20 ms provider."""
    results = _quick("single", tmp_path)
    assert "A single call" in results
    assert "submit_secure p50 ÷ raw aiohttp (instant provider)" in results
    assert "submit_secure p50 ÷ raw aiohttp (20 ms provider)" in results


def test_quick_bulk_benchmark_exits_0_and_checks_throughput_lag_and_ledger(tmp_path):
    """`python -m benchmarks --quick --only bulk` exits 0 and writes the bulk table: the
    library beside the raw floor, with its three targets (throughput and lag against the
    raw floor, journaled ÷ unjournaled stream)."""
    results = _quick("bulk", tmp_path)
    assert "raw floor (aiohttp + floor encryption on the loop)" in results
    assert "bulk: library ÷ raw floor throughput" in results
    assert "bulk: library lag p99 ÷ raw floor's" in results
    assert "bulk: journaled ÷ unjournaled stream" in results


def test_quick_documents_benchmark_exits_0_and_checks_its_two_targets(tmp_path):
    """`python -m benchmarks --quick --only documents` exits 0 (the typed receipt and its
    hand-built JSON are the same valid document) and writes both targets: the typed
    document and its check against the JSON by hand, a checked batch against one
    unchecked.
    """
    results = _quick("documents", tmp_path)
    assert "typed + check - dict, 25 lines" in results
    assert "checked ÷ unchecked batch" in results
    assert "to_json() of the typed document" in results


def test_quick_counts_benchmark_exits_0_and_counts_library_and_floor(tmp_path):
    """`python -m benchmarks --quick --only counts` exits 0 and writes the counts table:
    Python calls per document and young collections of the library and of the raw
    aiohttp floor, JSON and PGP, the library's calls more than the floor's (it does
    more than post: outcomes, retries, bookkeeping)."""
    results = _quick("counts", tmp_path)
    section = results[results.index("Counts per document") :]
    print(section)
    rows = [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| Client")
    ]
    assert [(row[0], row[1]) for row in rows] == [
        ("library submit_many", "JSON"),
        ("raw floor (aiohttp)", "JSON"),
        ("library submit_many", "PGP"),
        ("raw floor (aiohttp)", "PGP"),
    ]
    calls = [float(row[3]) for row in rows]
    assert all(n > 100 for n in calls), calls
    assert calls[0] > calls[1]
    assert calls[2] > calls[3]
    assert all(re.fullmatch(r"\d+( \(\d+-\d+\))?", row[5]) for row in rows)


def test_quick_rotation_benchmark_exits_0_and_checks_both_measures(tmp_path):
    """`python -m benchmarks --quick --only rotation` exits 0 (a sandbox and a worker run
    as services, a key is rotated, a worker gets 100 SIGHUPs) and writes both targets:
    the new key's first use after the rename, the loop's longest stall."""
    results = _quick("rotation", tmp_path)
    assert "rotation: first use of the new key, 300 documents" in results
    assert "credentials: 100 SIGHUPs, 10,000 issuers: the longest /healthz answer" in results
