"""Smoke test of the benchmark harness: it runs and writes its table. No timing is checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_pgp_benchmark_exits_0_and_writes_a_table(tmp_path):
    """`python -m benchmarks --quick --only pgp` exits 0 and writes RESULTS.rst holding the
    PGP table (into a temporary directory, so the committed results stay untouched).
    """
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "pgp", "--output", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    results = (tmp_path / "RESULTS.rst").read_text(encoding="utf-8")
    assert "PGP stage" in results
    assert "library encrypt()" in results
    assert "+===" in results  # a grid table, not just a heading


def test_quick_ledger_benchmark_exits_0_and_checks_its_three_targets(tmp_path):
    """`python -m benchmarks --quick --only ledger` (small counts, one round) exits 0 and
    writes the ledger's table with its three targets: memory, throughput, resume.
    """
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "ledger", "--output",
         str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    results = (tmp_path / "RESULTS.rst").read_text(encoding="utf-8")
    assert "The SQLite ledger" in results
    assert "journaled peak growth" in results
    assert "journaled ÷ unjournaled throughput" in results
    assert "resume from 20,000 entries" in results


def test_compare_runs_two_trees_on_the_same_invoices():
    """`python -m benchmarks.compare A B` runs each tree and prints the medians (here the
    project against itself, a handful of invoices, one round)."""
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.compare", str(ROOT), str(ROOT), "--count", "40",
         "--rounds", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert completed.stdout.count("docs/s") == 3  # two runs and the medians
    assert "median:" in completed.stdout


def test_quick_single_call_benchmark_exits_0_and_checks_both_providers(tmp_path):
    """`python -m benchmarks --quick --only single` exits 0 and writes the single-call
    table, with its target checked against the instant and the 20 ms provider."""
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "single", "--output",
         str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    results = (tmp_path / "RESULTS.rst").read_text(encoding="utf-8")
    assert "A single call" in results
    assert "submit_secure p50 ÷ raw aiohttp (instant provider)" in results
    assert "submit_secure p50 ÷ raw aiohttp (20 ms provider)" in results
