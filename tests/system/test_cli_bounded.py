"""`invoicing-async submit` given inputs far larger than a document: bounded, on time.

The command reads a one-line gigabyte of JSON Lines, or a JSON array with a gigabyte
element among ordinary invoices, with memory that follows the largest document it takes
(``--max-document-size``), not the input: the huge document is one refused record
naming its size and the limit, and the others are accepted. Memory is the command's own
peak resident set (``VmHWM``, which it reports as it exits), a bound, not a timing.

The inputs are written to a temporary directory a megabyte at a time (the JSON Lines
one as a sparse file), never held by the test.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import pytest
from sandboxtools import command_env

from invoicing_sandbox import Sandbox, sample_invoices

MIB = 1024 * 1024
GIB = 1024 * MIB
#: The command's peak resident memory allowed: the interpreter, aiohttp, cryptography and
#: the library take about 70 MiB; the default limit (10 MiB) a few times over on top.
PEAK = 200 * MIB


@pytest.fixture
async def sandbox(tmp_path):
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.env = command_env(sb, sb.write_public_key(tmp_path / "provider.asc"))
        yield sb


#: Runs the command as ``python -m invoicing_async`` does, then prints the peak resident
#: memory of this process image (``VmHWM``) as its last stderr line.
LAUNCH = """
import atexit, runpy, sys

def peak():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                sys.stderr.write(f"peak-kib {line.split()[1]}\\n")

atexit.register(peak)
sys.argv[0] = "invoicing-async"
runpy.run_module("invoicing_async", run_name="__main__", alter_sys=True)
"""


async def run_measured(*args: str, env: dict[str, str], timeout: float = 300):
    """Run the command; its exit status, stdout, stderr and peak resident memory (bytes).

    The peak is the command's own (``VmHWM`` of the image it runs): a child's
    ``ru_maxrss`` also counts the test process it was forked from, as large as the
    documents earlier tests held.
    """
    base = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LAUNCH, *args,
        env={**base, **env},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    except BaseException:
        process.kill()
        await process.wait()
        raise
    text = stderr.decode()
    head, _, last = text.rstrip("\n").rpartition("\n")
    assert last.startswith("peak-kib "), text[-2000:]
    return process.returncode, stdout.decode(), head, int(last.split()[1]) * 1024


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def huge_line_jsonl(path, documents, size: int) -> int:
    """JSON Lines: the documents, with one line of ``size`` bytes in the middle (a sparse
    hole inside a string: never written, never held). The huge line's size in bytes."""
    head = b'{"Series": "Z", "Number": 1, "Notes": "'
    tail = b'"}'
    half = len(documents) // 2
    with path.open("wb") as out:
        for document in documents[:half]:
            out.write(json.dumps(document).encode() + b"\n")
        out.write(head)
        out.seek(size - len(head) - len(tail), os.SEEK_CUR)
        out.write(tail + b"\n")
        for document in documents[half:]:
            out.write(json.dumps(document).encode() + b"\n")
    return size


def huge_element_array(path, documents, size: int) -> int:
    """A JSON array: the documents, with one element of ``size`` bytes in the middle,
    written a megabyte at a time. The huge element's size in bytes."""
    head = b'{"Series": "Z", "Number": 1, "Notes": "'
    tail = b'"}'
    filler = b"x" * MIB
    half = len(documents) // 2
    with path.open("wb") as out:
        out.write(b"[\n")
        for document in documents[:half]:
            out.write(json.dumps(document).encode() + b",\n")
        out.write(head)
        left = size - len(head) - len(tail)
        while left > 0:
            out.write(filler[: min(left, MIB)])
            left -= MIB
        out.write(tail + b",\n")
        out.write(b",\n".join(json.dumps(d).encode() for d in documents[half:]) + b"\n]\n")
    return size


def check_outcome(stdout: str, stderr: str, path, *, size: int, limit: int, count: int) -> None:
    """The huge document refused with its size and the limit, the others accepted."""
    got = records(stdout)
    refused = [r for r in got if r["status"] == "rejected"]
    assert len(refused) == 1, stderr
    error = refused[0]["error"]
    assert error["type"] == "DocumentTooLargeError"
    assert (error["size"], error["limit"]) == (size, limit)
    assert f"{size:,} bytes" in error["message"]
    assert f"{limit:,} bytes" in error["message"]
    assert refused[0]["source"] == {
        "file": str(path),
        "line": count // 2 + (2 if path.suffix == ".json" else 1),
    }
    assert [r["status"] for r in got].count("accepted") == count
    assert "Traceback" not in stderr


@pytest.mark.parametrize("build", [huge_line_jsonl, huge_element_array], ids=["jsonl", "array"])
async def test_a_64_mib_document_with_a_1_mib_limit(sandbox, tmp_path, build):
    """A 64 MiB line (or array element) with --max-document-size 1M: one rejected record
    naming its size and the limit, the documents around it accepted, and the command's
    memory far below the document's size."""
    documents = sample_invoices(6, issuer_vat=sandbox.client_id, lines=1)
    path = tmp_path / ("in.jsonl" if build is huge_line_jsonl else "in.json")
    size = build(path, documents, 64 * MIB)
    code, stdout, stderr, peak = await run_measured(
        "submit", "--json", "--max-document-size", "1M", str(path),
        env=sandbox.env,
    )  # fmt: skip
    assert code == 1, stderr
    check_outcome(stdout, stderr, path, size=size, limit=MIB, count=len(documents))
    assert peak < 150 * MIB, f"peak {peak / MIB:.0f} MiB"


@pytest.mark.parametrize("build", [huge_line_jsonl, huge_element_array], ids=["jsonl", "array"])
async def test_a_gigabyte_document_among_invoices(sandbox, tmp_path, build):
    """A one-line gigabyte of JSON Lines, and a JSON array with a gigabyte element among
    200 invoices, with the default limit (10 MiB): the huge one refused, the others
    accepted, and the command's peak memory under 200 MiB (the issue saw 4.1 GB and
    6.8 GB)."""
    documents = sample_invoices(200, issuer_vat=sandbox.client_id, lines=1)
    path = tmp_path / ("in.jsonl" if build is huge_line_jsonl else "in.json")
    size = build(path, documents, GIB)
    code, stdout, stderr, peak = await run_measured("submit", "--json", str(path), env=sandbox.env)
    assert code == 1, stderr
    check_outcome(stdout, stderr, path, size=size, limit=10 * MIB, count=len(documents))
    assert peak < PEAK, f"peak {peak / MIB:.0f} MiB"


async def test_the_deadline_holds_while_a_gigabyte_is_read(sandbox, tmp_path):
    """With --deadline, reading a gigabyte array stops when it passes: the command ends
    within the deadline and a margin (the issue's run had not ended at 150 s), every
    entry has a record, and what the deadline cut is not_sent, never lost."""
    documents = sample_invoices(200, issuer_vat=sandbox.client_id, lines=1)
    path = tmp_path / "in.json"
    huge_element_array(path, documents, GIB)
    deadline, margin = 0.5, 30.0
    started = time.monotonic()
    code, stdout, stderr, peak = await run_measured(
        "submit", "--json", "--deadline", str(deadline), str(path),
        env=sandbox.env, timeout=deadline + margin,
    )  # fmt: skip
    assert time.monotonic() - started < deadline + margin
    assert code == 1, stderr
    got = records(stdout)
    statuses = {r["status"] for r in got}
    assert statuses <= {"accepted", "rejected", "not_sent"}, statuses
    unread = [r for r in got if r["key"].startswith("unread:")]
    settled = [r for r in got if not r["key"].startswith("unread:")]
    # Each document has one record, or lies in the part the deadline left unread.
    keys = [r["key"] for r in settled if r["status"] != "rejected"]
    assert len(keys) == len(set(keys))
    assert len(unread) <= 1
    if unread:
        assert unread[0]["status"] == "not_sent"
        assert "deadline" in unread[0]["error"]["message"]
    else:
        assert len(settled) == len(documents) + 1
    assert peak < PEAK, f"peak {peak / MIB:.0f} MiB"


async def test_a_deadline_already_passed_reads_nothing(sandbox, tmp_path):
    """--deadline 0: nothing is read or sent; each source is one not_sent record
    saying the deadline passed before it was read; exit 1."""
    documents = sample_invoices(3, issuer_vat=sandbox.client_id, lines=1)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.json"
    first.write_text("\n".join(json.dumps(d) for d in documents) + "\n")
    second.write_text(json.dumps(documents))
    code, stdout, stderr, _ = await run_measured(
        "submit", "--json", "--deadline", "0", str(first), str(second),
        env=sandbox.env,
    )  # fmt: skip
    assert code == 1, stderr
    got = records(stdout)
    assert [(r["status"], r["source"]["file"]) for r in got] == [
        ("not_sent", str(first)),
        ("not_sent", str(second)),
    ]
    assert not sandbox.requests
