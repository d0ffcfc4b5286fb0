"""Smoke test of the benchmark harness: it runs and writes its table. No timing is checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
