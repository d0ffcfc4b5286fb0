"""User code type-checks: ``mypy --strict`` accepts what the documentation shows."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

SNIPPET = """
from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

from invoicing_async import InvoicingClient, Outcome, outcome_to_dict


async def first_failures(client: InvoicingClient, invoices: list[dict[str, object]]) -> int:
    failures = 0
    async with contextlib.aclosing(client.submit_stream(invoices, concurrency=8)) as outcomes:
        async for outcome in outcomes:
            if not outcome.ok:
                failures += 1
                print(outcome_to_dict(outcome)["status"])
            if failures > 3:
                break  # closing the generator stops the batch
    return failures


def stream_type(client: InvoicingClient) -> AsyncGenerator[Outcome, None]:
    return client.submit_stream([])
"""


def test_mypy_strict_accepts_aclosing_submit_stream(tmp_path):
    """``async with contextlib.aclosing(client.submit_stream(...))`` passes mypy --strict
    (submit_stream is typed as the async generator it is)."""
    if shutil.which("mypy") is None and not _has_module("mypy"):
        pytest.skip("mypy is not installed (the typing extra; CI installs it)")
    snippet = tmp_path / "user_code.py"
    snippet.write_text(SNIPPET)
    completed = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--python-version", "3.10", str(snippet)],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr


def _has_module(name: str) -> bool:
    import importlib.util  # noqa: PLC0415

    return importlib.util.find_spec(name) is not None
