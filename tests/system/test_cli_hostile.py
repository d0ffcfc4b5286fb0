"""One bad document never stops the others: the command on hostile JSON Lines.

Three good documents, one hostile line, three good documents: a JSON number of a
million digits, an amount of 4,400 digits, objects nested 100,000 deep, a byte that is
not UTF-8, a document of a million bad lines. Each time ``submit`` (with ``--check`` or
without) sends the six good documents and writes one record per line, the hostile one
``rejected`` with what is wrong and where; ``outbox enqueue --check --skip-invalid``
enqueues the six and says which line it skipped (without ``--skip-invalid``: nothing,
naming the line). What is said stays a few lines long. ``tests/unit/
test_cli_input_hostile.py`` holds the readers to the same files.
"""

from __future__ import annotations

import json

import pytest
from sandboxtools import run_command

from invoicing_async.outbox import SqliteOutbox
from invoicing_sandbox import Sandbox, sample_invoice

#: Each hostile line (bytes) and what its refusal says, after the file's name.
HOSTILE = {
    "number": (b'{"Series": "B", "Number": ' + b"1" * 10**6 + b"}", "4: Number: is a number of 1,000,000 digits"),
    "amount": (None, "4: Details[0].NetTotal: is a number of 4,400 digits"),
    "deep": (b'{"a":' * 10**5 + b"1" + b"}" * 10**5, "4: the document is nested too deeply to be read"),
    "bytes": (b'{"Series": "\xff"}', "4:13: not UTF-8 text (byte 0xFF)"),
}  # fmt: skip


@pytest.fixture
async def sb():
    async with Sandbox(key_algorithm="cv25519") as sandbox:
        yield sandbox


async def run(sb: Sandbox, *args: str) -> tuple[int, str, str]:
    return await run_command(sb, *args, timeout=300)


def _hostile_file(sb: Sandbox, path, kind: str) -> str:
    """Documents 1-3, the hostile line, documents 4-6 (of the sandbox's issuer)."""
    good = [json.dumps(sample_invoice(n, issuer_vat=sb.client_id)).encode() for n in range(1, 7)]
    hostile = HOSTILE[kind][0] if kind in HOSTILE else b""
    if kind == "amount":  # a document whose NetTotal has 4,400 digits: its totals differ
        document = sample_invoice(7, issuer_vat=sb.client_id)
        text = json.dumps(document).encode()
        written = json.dumps(document["Details"][0]["NetTotal"]).encode()
        hostile = text.replace(b'"NetTotal": ' + written, b'"NetTotal": ' + b"9" * 4400, 1)
    elif kind == "lines":  # a million lines that are no objects: 3 MB
        document = sample_invoice(7, issuer_vat=sb.client_id)
        document["Details"] = [0] * 10**6
        hostile = json.dumps(document).encode()
    path.write_bytes(b"\n".join([*good[:3], hostile, *good[3:]]) + b"\n")
    return str(path)


def _by_line(out: str) -> dict[int, dict]:
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 7, records
    return {record["source"]["line"]: record for record in records}


@pytest.mark.parametrize("check", [True, False], ids=["check", "no-check"])
@pytest.mark.parametrize("kind", list(HOSTILE))
async def test_submit_sends_the_six_good_documents_around_a_hostile_line(sb, tmp_path, kind, check):
    """submit (with --check or without): exit 1, one record per line, the hostile line's
    rejected with what is wrong (its field, or its column) named in the record and on
    stderr, the six others accepted: six documents committed, no traceback."""
    name = _hostile_file(sb, tmp_path / "in.jsonl", kind)
    status, out, err = await run(sb, "submit", "--json", *(["--check"] if check else []), name)
    assert status == 1, err[-2000:]
    assert "Traceback" not in err
    records = _by_line(out)
    assert records[4]["status"] == "rejected"
    assert f"{name}:{HOSTILE[kind][1]}" in records[4]["error"]["message"]
    assert f"{name}:{HOSTILE[kind][1]}" in err
    assert [records[line]["status"] for line in (1, 2, 3, 5, 6, 7)] == ["accepted"] * 6
    assert sb.commit_count == 6
    assert len(err) < 4000


async def test_a_document_of_a_million_bad_lines_is_said_in_a_dozen_lines(sb, tmp_path):
    """submit --check of a document whose 1,000,000 lines are no objects: stderr names
    its first ten problems, then "and 999,990 more problems" (it printed 1,000,009
    lines, 80 MB); its record holds the first 100 and counts the others (it held a
    million); the six other documents are sent."""
    name = _hostile_file(sb, tmp_path / "in.jsonl", "lines")
    status, out, err = await run(sb, "submit", "--json", "--check", name)
    assert status == 1, err[-2000:]
    assert err.count(f"{name}:4: Details[") == 10
    assert f"{name}:4: and 999,990 more problems (999,990 errors, 0 warnings)" in err
    assert len(err) < 4000
    records = _by_line(out)
    error = records[4]["error"]
    assert (error["type"], len(error["problems"]), error["more_problems"]) == (
        "InvalidDocumentError", 100, 999_900,
    )  # fmt: skip
    assert error["message"].endswith("and 999995 more")
    assert len(out) < 100_000
    assert sb.commit_count == 6


@pytest.mark.parametrize("kind", list(HOSTILE))
async def test_outbox_enqueue_skips_a_hostile_line_or_refuses_naming_it(sb, tmp_path, kind):
    """outbox enqueue --check --skip-invalid: the six good documents enqueued, the hostile
    line said skipped with its file, line and why (exit 1); without --skip-invalid:
    nothing enqueued, the same line named (exit 2); never a traceback."""
    name = _hostile_file(sb, tmp_path / "in.jsonl", kind)
    ledger = str(tmp_path / "outbox.db")
    status, _, err = await run(sb, "outbox", "enqueue", "--check", name, "--ledger", ledger)
    assert status == 2, err[-2000:]
    assert f"{name}:{HOSTILE[kind][1]}" in err
    assert "nothing was enqueued" in err
    status, _, err = await run(
        sb, "outbox", "enqueue", "--check", "--skip-invalid", name, "--ledger", ledger
    )
    assert status == 1, err[-2000:]
    assert "Traceback" not in err
    assert f"{name}:{HOSTILE[kind][1]}" in err
    assert "enqueued 6 document(s), 1 skipped: not documents" in err
    async with SqliteOutbox(ledger) as outbox:
        assert sum((await outbox.counts()).values()) == 6
