"""`invoicing-async ledger` (formerly `journal`) as the docs show it: the real command.

Every test runs the installed command in a subprocess against a ledger file made with
the public :class:`~invoicing_async.Ledger` (or by `submit --ledger` against the sandbox).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys

import pytest
from ledgertools import rows

from invoicing_async import (
    Ledger,
    Outcome,
    OutcomeStatus,
    TransportError,
    UnknownOutcomeError,
    ValidationError,
)


def cli(*args: str, cwd=None, **kwargs) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}
    return subprocess.run(
        [sys.executable, "-m", "invoicing_async", *args],
        capture_output=True, text=True, timeout=120, check=False, env=env, cwd=cwd, **kwargs,
    )  # fmt: skip


async def make_ledger(path, *, rejected: int = 2, unknown: int = 1, not_sent: int = 0) -> None:
    """A ledger holding outcomes of each kind, recorded as a batch records them."""
    outcomes = [
        Outcome(
            index=n, key=f"id:rejected-{n}", status=OutcomeStatus.REJECTED, attempts=1,
            error=ValidationError("Summaries.TotalGrossValue: must be a non-negative number",
                                  status=400),
        )
        for n in range(rejected)
    ] + [
        Outcome(
            index=n, key=f"id:unknown-{n}", status=OutcomeStatus.UNKNOWN, attempts=6,
            error=UnknownOutcomeError("the answer was lost " + "and again " * 30,
                                      last_error=TransportError("reset", maybe_sent=True),
                                      attempts=6),
        )
        for n in range(unknown)
    ] + [
        Outcome(index=n, key=f"id:not-sent-{n}", status=OutcomeStatus.NOT_SENT)
        for n in range(not_sent)
    ]  # fmt: skip
    async with Ledger(path) as ledger:
        for outcome in outcomes:
            ledger._settled(outcome, "f" * 64 if outcome.status is OutcomeStatus.REJECTED else None)


@pytest.fixture
async def ledger_file(tmp_path):
    path = tmp_path / "batch.db"
    await make_ledger(path)
    return path


def test_show_summarises_by_status_then_one_line_per_entry(ledger_file):
    """`ledger show` starts with the count per status, then one compact line per entry:
    key, status, attempts, last change, a short one-line error. `--json` gives the full
    JSON lines (summary on stderr)."""
    shown = cli("ledger", "show", "--ledger", str(ledger_file))
    assert shown.returncode == 0, shown.stderr
    first, *entries = shown.stdout.splitlines()
    assert first == f"ledger {ledger_file}: 3 entries: 2 rejected, 1 unknown"
    assert len(entries) == 3
    assert re.fullmatch(
        r"id:rejected-0  rejected   1 attempt  \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ  "
        r"ValidationError: Summaries\.TotalGrossValue: must be a non-negative number \(HTTP 400\)",
        entries[0],
    ), entries[0]
    assert "6 attempts" in entries[2]
    assert entries[2].endswith("...")
    assert all(len(line) < 200 for line in entries)

    as_json = cli("ledger", "show", "--json", "--status", "unknown", "--ledger", str(ledger_file))
    assert as_json.returncode == 0
    [entry] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert entry["key"] == "id:unknown-0"
    assert entry["outcome"]["error"]["type"] == "UnknownOutcomeError"
    assert "3 entries: 2 rejected, 1 unknown; showing unknown" in as_json.stderr


@pytest.mark.parametrize("order", ["ledger-first", "keys-first"])
def test_retry_takes_keys_before_or_after_the_ledger_option(ledger_file, order):
    """`ledger retry --ledger FILE KEY` (as the bulk guide shows it) and
    `ledger retry KEY --ledger FILE` both mark the entry to be sent again."""
    args = (
        ["--ledger", str(ledger_file), "id:rejected-0"]
        if order == "ledger-first"
        else ["id:rejected-0", "--ledger", str(ledger_file)]
    )
    done = cli("ledger", "retry", *args)
    assert done.returncode == 0, done.stderr
    assert "retry: 1 of 1 entries marked to be sent again" in done.stderr
    assert rows(ledger_file)["id:rejected-0"]["state"] == "pending"
    assert rows(ledger_file)["id:rejected-1"]["state"] == "done"


def test_retry_and_forget_take_a_status(ledger_file):
    """`retry --status rejected` marks every rejected entry (no keys needed); `forget
    --status unknown` deletes every unknown one; keys and --status together, or
    neither, are a usage error."""
    done = cli("ledger", "retry", "--status", "rejected", "--ledger", str(ledger_file))
    assert done.returncode == 0, done.stderr
    assert "retry: 2 of 2 entries" in done.stderr
    assert {k: r["state"] for k, r in rows(ledger_file).items()} == {
        "id:rejected-0": "pending", "id:rejected-1": "pending", "id:unknown-0": "done",
    }  # fmt: skip
    done = cli("ledger", "forget", "--status", "unknown", "--ledger", str(ledger_file))
    assert done.returncode == 0, done.stderr
    assert set(rows(ledger_file)) == {"id:rejected-0", "id:rejected-1"}
    for extra in (["id:x", "--status", "rejected"], []):
        refused = cli("ledger", "retry", *extra, "--ledger", str(ledger_file))
        assert refused.returncode == 2
        assert "give the keys of the entries, or --status" in refused.stderr


@pytest.mark.parametrize("command", [["ledger", "show"], ["ledger", "retry", "id:1"],
                                     ["ledger", "forget", "id:1"], ["outbox", "status", "id:1"]])  # fmt: skip
def test_a_path_that_is_not_a_ledger_is_an_error(tmp_path, command):
    """A mistyped path is exit 2 and one line, and creates no file (it made an empty
    ledger and said nothing was there); a file that is not a ledger (text, or a SQLite
    database of something else) is exit 2 too, and left unchanged."""
    typo = tmp_path / "typo.db"
    done = cli(*command, "--ledger", str(typo), cwd=tmp_path)
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"invoicing-async: there is no ledger {typo} (no such file): check the path"
    )
    assert list(tmp_path.iterdir()) == []

    notes = tmp_path / "notes.txt"
    notes.write_text("not a ledger\n" * 200)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE t (x)")
    connection.close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for path in (notes, other):
        done = cli(*command, "--ledger", str(path), cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1
        assert "is not a ledger" in done.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.fixture
async def big_ledger(tmp_path):
    path = tmp_path / "big.db"
    await make_ledger(path, rejected=0, unknown=0, not_sent=3000)
    return path


def test_show_piped_to_head_ends_quietly(big_ledger):
    """`ledger show | head -n 3` prints three lines and ends without a BrokenPipeError
    traceback (exit 141, as a tool stopped by SIGPIPE)."""
    path = big_ledger
    process = subprocess.Popen(
        [sys.executable, "-m", "invoicing_async", "ledger", "show", "--ledger", str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    with process:
        assert process.stdout is not None
        head = [process.stdout.readline() for _ in range(3)]
        process.stdout.close()  # what head does after its lines
        stderr = process.stderr.read() if process.stderr else ""
        process.wait(timeout=60)
    assert head[0].startswith(f"ledger {path}: 3000 entries: 3000 not_sent")
    assert "Traceback" not in stderr
    assert "BrokenPipeError" not in stderr
    assert stderr == ""
    assert process.returncode == 141


def test_each_subcommand_has_its_own_help_and_a_description():
    """`ledger show --help` is show's (not `ledger --help`); `ledger`, `worker` and
    `outbox` explain what they are for, as the other commands do."""
    show = cli("ledger", "show", "--help").stdout
    assert show.startswith("usage: invoicing-async ledger show")
    assert "--json" in show
    retry = cli("ledger", "retry", "--help").stdout
    assert retry.startswith("usage: invoicing-async ledger retry")
    assert "--status" in retry
    for command in ("ledger", "worker", "outbox"):
        text = cli(command, "--help").stdout
        description = text.split("\n\n")[1]
        assert len(description.split()) > 15, (command, description)


def test_journal_is_a_hidden_deprecated_alias(ledger_file):
    """`journal show` still works, with a one-line deprecation note on stderr; the
    main help lists `ledger`, not `journal`."""
    done = cli("journal", "show", "--ledger", str(ledger_file))
    assert done.returncode == 0
    assert done.stdout.startswith(f"ledger {ledger_file}: 3 entries")
    assert done.stderr == "invoicing-async: 'journal' is deprecated: use 'invoicing-async ledger'\n"
    listing = cli("--help").stdout
    assert "ledger" in listing
    assert "journal" not in listing


async def test_show_never_prints_the_databases_password(postgres_dsn):
    """`ledger show` prints the outbox's URL (in its summary, and in the advice about
    parked entries, as `worker` does) with the password masked: a URL with
    ``user:password@`` (the suite's server trusts local users) shows ``user:***@``."""
    from invoicing_async.outbox import PostgresOutbox  # noqa: PLC0415

    url = postgres_dsn.replace("postgres@", "postgres:hunter2@", 1)
    async with PostgresOutbox(url) as outbox:
        await outbox.enqueue([{"Number": 1}])
    shown = cli("ledger", "show", "--ledger", url)
    assert shown.returncode == 0, shown.stderr
    assert "hunter2" not in shown.stdout + shown.stderr
    assert "postgres:***@" in shown.stdout
