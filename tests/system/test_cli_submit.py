"""`invoicing-async submit` as a user meets it: the real command, against the sandbox.

Each test runs the installed command in a subprocess (``python -m invoicing_async``)
against a sandbox on loopback; terminal behaviour (progress, prompts) is tested on a
pseudo-terminal of a given width.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import threading
import time

import pytest
from helpers import module_with_ctrl_c
from sandboxtools import command_env

from invoicing_async import document_key
from invoicing_sandbox import Fault, Sandbox, sample_invoice, sample_invoices

#: A fault retried at once (Retry-After: 0): retries without backoff delays in a subprocess.
QUICK_503 = Fault.status(503, retry_after=0)

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "invoicing_async", *args]


def environ(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}
    env.pop("COLUMNS", None)
    return {**env, **extra}


async def run(*args: str, env: dict[str, str], stdin: bytes | None = None, timeout=120):
    process = await asyncio.create_subprocess_exec(
        *command(*args),
        env=environ(env),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(stdin), timeout)
    return process.returncode, stdout.decode(), stderr.decode()


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
async def sandbox(tmp_path):
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.env = command_env(sb, sb.write_public_key(tmp_path / "provider.asc"))
        yield sb


async def test_broken_json_file_names_file_line_and_column(sandbox, tmp_path):
    """A .json file that is not valid JSON: stderr and the record say what is wrong with
    file, line and column (not "a document must be a mapping … _Unreadable"); nothing of
    that file is sent, the other files are; exit 1."""
    broken = tmp_path / "broken.json"
    broken.write_text('[\n  {"Series": "A",\n   "Number" 7}\n]\n')
    good = tmp_path / "good.json"
    good.write_text(json.dumps(sample_invoice(1)))
    code, stdout, stderr = await run("submit", str(broken), str(good), env=sandbox.env)
    assert code == 1
    assert f"{broken}:3:13: invalid JSON (Expecting ':' delimiter)" in stderr
    assert "_Unreadable" not in stderr + stdout
    bad, ok = records(stdout)
    assert bad["status"] == "rejected"
    assert bad["source"] == {"file": str(broken), "line": 3}
    assert "Expecting ':' delimiter" in bad["error"]["message"]
    assert ok["status"] == "accepted"
    assert ok["source"] == {"file": str(good), "line": 1}
    assert sandbox.commit_count == 1


async def test_a_json_string_is_never_sent(sandbox, tmp_path):
    """A file holding a JSON string (or a number, or null) is refused locally, never sent
    raw to the provider."""
    for name, content in (("s.json", '"hello"'), ("n.jsonl", "3\nnull\n")):
        (tmp_path / name).write_text(content)
    code, stdout, stderr = await run(
        "submit", str(tmp_path / "s.json"), str(tmp_path / "n.jsonl"), env=sandbox.env
    )
    assert code == 1
    assert "a string, not a JSON object" in stderr
    assert "a number, not a JSON object" in stderr
    assert "null, not a JSON object" in stderr
    assert [r["status"] for r in records(stdout)] == ["rejected"] * 3
    assert [r["source"]["line"] for r in records(stdout)] == [1, 1, 2]
    assert not [r for r in sandbox.requests if r.path.startswith("/Invoice")]


async def test_an_array_of_numbers_is_one_refused_entry(sandbox, tmp_path):
    """`[1,2,3]` is not three documents: one refused entry naming the file."""
    numbers = tmp_path / "numbers.json"
    numbers.write_text("[1,2,3]")
    code, stdout, stderr = await run("submit", str(numbers), env=sandbox.env)
    assert code == 1
    assert f"{numbers}:1: an array of numbers, not of JSON objects" in stderr
    assert len(records(stdout)) == 1
    assert not sandbox.requests


@pytest.mark.parametrize("content", ["", "\n  \n"])
async def test_empty_input_exits_2_with_a_message(sandbox, tmp_path, content):
    """Empty input (a file, or stdin) exits 2 and says there is nothing to submit."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text(content)
    code, stdout, stderr = await run("submit", str(empty), env=sandbox.env)
    assert code == 2
    assert "no documents in" in stderr
    assert stdout == ""
    code, _, stderr = await run("submit", "-", env=sandbox.env, stdin=content.encode())
    assert code == 2
    assert "no documents in -" in stderr
    assert not sandbox.requests


async def test_every_record_names_its_source(sandbox, tmp_path):
    """Each output record has `source` (file and line) and `index` (input position),
    for arrays, JSON Lines and stdin alike; identities follow the documents."""
    docs = sample_invoices(5, lines=1)
    array = tmp_path / "a.json"
    array.write_text("[\n" + ",\n".join(json.dumps(d) for d in docs[:2]) + "\n]\n")
    lines = tmp_path / "b.jsonl"
    lines.write_text("\n" + json.dumps(docs[2]) + "\n" + json.dumps(docs[3]) + "\n")
    code, stdout, stderr = await run(
        "submit", "--json", str(array), str(lines), "-",
        env=sandbox.env, stdin=json.dumps(docs[4]).encode(),
    )  # fmt: skip
    assert code == 0, stderr
    by_index = {r["index"]: r for r in records(stdout)}
    assert [by_index[i]["source"] for i in range(5)] == [
        {"file": str(array), "line": 2},
        {"file": str(array), "line": 3},
        {"file": str(lines), "line": 2},
        {"file": str(lines), "line": 3},
        {"file": "-", "line": 1},
    ]
    assert [by_index[i]["key"] for i in range(5)] == [document_key(d) for d in docs]


def _pty_run(args, env, columns, *, stdin_tty=False, timeout=120.0, stop=None):
    """Run the command with stderr (and optionally stdin) on a pseudo-terminal of
    ``columns``; returns (exit status, stdout, what the terminal received). ``stop``,
    looked at every 50 ms and after each output, says when to press Ctrl-C."""
    import subprocess  # noqa: PLC0415

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    process = subprocess.Popen(
        command(*args)
        if stop is None
        else module_with_ctrl_c("invoicing_async", "invoicing-async", *args),
        env=environ(env),
        stdin=slave if stdin_tty else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.05)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            screen += chunk
        if stop is not None and stop(screen):
            process.send_signal(signal.SIGINT)
            stop = None
    os.close(master)
    with process:
        stdout = process.stdout.read().decode() if process.stdout else ""
        process.wait(timeout=30)
    return process.returncode, stdout, ANSI.sub("", screen.decode(errors="replace"))


@pytest.mark.parametrize("columns", [50, 120])
async def test_progress_fits_the_terminal(sandbox, tmp_path, columns):
    """On a 50- and a 120-column terminal every redraw of the progress line fits in one
    line (no wrapped, stacked bars); it shows the count, an ETA and, when wide enough,
    the outcomes and the retry count."""
    sandbox.set_latency(0.03)
    sandbox.random_faults(rate=0.3, seed=3, kinds=[QUICK_503])
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in sample_invoices(120, lines=1)))
    args = ("submit", "--json", "--concurrency", "4", str(source), "--output", str(tmp_path / "o"))
    code, _, screen = await asyncio.to_thread(_pty_run, args, sandbox.env, columns)
    assert code == 0, screen
    redraws = [part for line in screen.split("\n") for part in line.split("\r") if part.strip()]
    progress = [part for part in redraws if "/120" in part]
    assert len(progress) >= 3, screen
    too_long = [part for part in progress if len(part) >= columns]
    assert not too_long
    assert any("ETA" in part for part in progress)
    assert any(part.startswith("[#") for part in progress)
    if columns >= 100:
        assert any("retries" in part and "| ok" in part for part in progress)
    assert "documents:   120" in screen


async def test_no_arguments_on_a_terminal_does_not_wait(sandbox):
    """`submit` without arguments, stdin a terminal: exits 2 at once saying what to give,
    instead of waiting silently for input."""
    started = time.monotonic()
    code, _, screen = await asyncio.to_thread(
        _pty_run, ("submit",), sandbox.env, 80, stdin_tty=True, timeout=60.0
    )
    assert code == 2
    assert "no documents given" in screen
    assert time.monotonic() - started < 30


async def test_ctrl_c_says_how_to_resume_and_the_rerun_replays_the_ledger(sandbox, tmp_path):
    """Ctrl-C mid-run (its requests held past the ``--grace`` a stop gives them): exit
    130, a summary whose counts add up to the documents read (with an outcome, in flight
    ones included as the ledger recorded them, and not started), and how to resume; the
    same command again takes from the ledger exactly what the first run settled for
    good, and commits every invoice exactly once."""
    # Four requests pass, then the provider holds them: the batch is certainly still
    # running when Ctrl-C arrives (a latency only hoped it would be).
    sandbox.hold(after=4)
    docs = sample_invoices(40, lines=1)
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in docs))
    ledger, output = tmp_path / "run.db", tmp_path / "out.jsonl"
    args = ("submit", "--json", "--concurrency", "2", str(source), "--grace", "0.5",
            "--ledger", str(ledger), "--output", str(output))  # fmt: skip
    interrupt = threading.Event()

    async def press_ctrl_c_once_both_requests_wait() -> None:
        await sandbox.wait_held(2)
        interrupt.set()

    pressing = asyncio.ensure_future(press_ctrl_c_once_both_requests_wait())
    code, _, screen = await asyncio.to_thread(
        _pty_run, args, sandbox.env, 100, stop=lambda _screen: interrupt.is_set()
    )
    await pressing
    assert code == 130, screen
    assert "To resume, run the same command again" in screen
    assert str(ledger) in screen
    assert sandbox.commit_count == 4
    first = records(output.read_text())
    read = re.search(r"documents:\s+(\d+) read of 40 before the interruption: (\d+) with an "
                     r"outcome \((\d+) of them in flight\), (\d+) not started", screen)  # fmt: skip
    assert read, screen
    assert int(read[1]) == int(read[2]) + int(read[4])
    assert int(read[2]) == len(first)
    assert int(read[3]) == sum(1 for r in first if r["status"] in ("unknown", "not_sent"))
    assert f"{output} ({len(first)} records appended)" in screen
    # The two held requests were in flight: they got the outcome the ledger recorded.
    assert sum(1 for r in first if r["status"] in ("unknown", "not_sent")) >= 2, first
    final = sum(1 for r in first if r["status"] in ("accepted", "duplicate"))
    assert final == 4

    sandbox.release()  # the two held requests are processed now, their client gone
    code, _, stderr = await run(*args, env=sandbox.env)
    assert code == 0, stderr
    assert "from the ledger (settled by an earlier run)" in stderr
    assert re.search(rf"accepted:\s+\d+ \(\+{final} from the ledger\)", stderr), stderr
    assert len(records(output.read_text())) == len(first) + 40  # appended, as it says
    assert all(sandbox.committed[document_key(d)].commits == 1 for d in docs)


async def test_sigterm_reads_nothing_more_lets_what_was_read_end_and_exits_143(sandbox, tmp_path):
    """SIGTERM mid-run (submit as a batch job a service manager stops): nothing more is
    read, the documents read already (in flight, and the batch's read-ahead) end within
    ``--grace`` once the provider answers, and the command exits 143 with its summary
    (every document read has its outcome, none is left unsettled) and how to resume; the
    same command again sends exactly the rest, every invoice committed once (before:
    SIGTERM killed the command on the spot)."""
    count = 1200
    sandbox.hold(after=4)
    docs = sample_invoices(count, lines=1)
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in docs))
    ledger, output = tmp_path / "run.db", tmp_path / "out.jsonl"
    args = ("submit", "--json", "--concurrency", "2", str(source), "--grace", "60",
            "--ledger", str(ledger), "--output", str(output), "--no-progress")  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *command(*args), env=environ(sandbox.env),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await asyncio.wait_for(sandbox.wait_held(2), 60)
        process.send_signal(signal.SIGTERM)
        assert process.stderr is not None
        said = ""
        while "SIGTERM: stopping" not in said:
            line = await asyncio.wait_for(process.stderr.readline(), 60)
            assert line, said
            said += line.decode()
        sandbox.release()
        said += (await asyncio.wait_for(process.stderr.read(), 60)).decode()
        assert await asyncio.wait_for(process.wait(), 60) == 143, said
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    first = records(output.read_text())
    read = re.search(r"documents:\s+(\d+) read before the interruption: (\d+) with an "
                     r"outcome, 0 not started", said)  # fmt: skip
    assert read, said
    assert int(read[1]) == int(read[2]) == len(first) < count
    assert {r["status"] for r in first} == {"accepted"}
    assert sandbox.commit_count == len(first)
    assert "To resume, run the same command again" in said
    code, _, stderr = await run(*args, env=sandbox.env)
    assert code == 0, stderr
    assert all(sandbox.committed[document_key(d)].commits == 1 for d in docs)


async def test_rate_only_when_something_was_sent(sandbox, tmp_path):
    """A run whose documents all come from the ledger says nothing was sent (no
    "0.00 s (243 documents/s sent)"); a run that sends shows a rate."""
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in sample_invoices(5, lines=1)))
    args = ("submit", "--json", str(source), "--ledger", str(tmp_path / "l.db"),
            "--output", str(tmp_path / "out.jsonl"))  # fmt: skip
    code, _, stderr = await run(*args, env=sandbox.env)
    assert code == 0, stderr
    assert re.search(r"elapsed:\s+\d+\.\d\d s \(\d+ documents/s sent\)", stderr), stderr
    code, _, stderr = await run(*args, env=sandbox.env)
    assert code == 0, stderr
    assert re.search(r"elapsed:\s+\d+\.\d\d s \(nothing sent\)$", stderr, re.MULTILINE), stderr
    assert "documents/s" not in stderr


async def test_journal_option_is_a_deprecated_alias(sandbox, tmp_path):
    """`submit --journal FILE` still works as `--ledger FILE`, with a one-line note;
    --help offers --ledger only and says that --output appends."""
    source = tmp_path / "one.json"
    source.write_text(json.dumps(sample_invoice(1)))
    ledger = tmp_path / "old.db"
    code, stdout, stderr = await run(
        "submit", "--json", str(source), "--journal", str(ledger), env=sandbox.env
    )
    assert code == 0, stderr
    assert stderr.splitlines()[0] == "invoicing-async: --journal is deprecated: use --ledger"
    assert ledger.exists()
    code, stdout, _ = await run("submit", "--help", env={})
    assert "--ledger FILE" in stdout
    assert "--journal" not in stdout
    assert "appended" in " ".join(stdout.split())


async def test_verbose_logs_and_secrets_stay_out(sandbox, tmp_path):
    """-v shows the library's INFO lines (named loggers) on stderr; the API key appears
    nowhere in the output."""
    sandbox.script(QUICK_503)
    source = tmp_path / "one.json"
    source.write_text(json.dumps(sample_invoice(1)))
    code, stdout, stderr = await run("submit", "-v", "--json", str(source), env=sandbox.env)
    assert code == 0, stderr
    assert "INFO invoicing_async.delivery:" in stderr
    assert sandbox.client_secret not in stdout + stderr


async def test_ca_file_reaches_a_tls_sandbox(tmp_path):
    """`--ca-file` (or INVOICING_CA_FILE) makes the command trust a TLS sandbox's CA;
    without it the certificate is refused."""
    async with Sandbox(tls=True, key_algorithm="cv25519") as sb:
        ca = sb.write_ca_certificate(tmp_path / "ca.pem")
        env = {
            "INVOICING_BASE_URL": sb.base_url,
            "INVOICING_CLIENT_ID": sb.client_id,
            "INVOICING_API_KEY": sb.client_secret,
        }
        code, _, _ = await run("token", "--ca-file", str(ca), env=env)
        assert code == 0
        assert sb.base_url.startswith("https://")
        code, _, stderr = await run("token", env=env)
        assert code == 1
        assert "certificate" in stderr
