"""Adversarial: SIGKILL a journaled batch at awkward moments, then resume it.

A subprocess (``tests/system/scripts/adv_submit.py``) submits invoices to a sandbox running in
this test's event loop, with a write-ahead journal. It is killed at random points, right
after the provider committed a document but before its ``settled`` line was written, and
with a journal line torn in half. Resuming must give: every invoice committed exactly
once, a complete journal (every document's last line is ``settled`` as ok), documents
settled before the crash not sent again, and nothing reported ``duplicate`` (every
commit was this batch's own).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from pathlib import Path

import pytest

from invoicing_async import Journal
from invoicing_async.sandbox import Fault, Sandbox

SCRIPT = Path(__file__).parent / "scripts" / "adv_submit.py"


async def start_submitter(sb, tmp_path, journal, count, concurrency=8):
    key_file = tmp_path / "provider.asc"
    if not key_file.exists():
        sb.write_public_key(key_file)
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPT),
        sb.base_url,
        sb.client_id,
        str(key_file),
        str(journal),
        str(count),
        str(concurrency),
        env={**os.environ, "INVOICING_API_KEY": sb.client_secret},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


def read_records(journal: Path) -> list[dict]:
    records = []
    if not journal.exists():
        return records
    for line in journal.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:  # noqa: PERF203  (a torn line, while the writer is killed)
            continue
    return records


def settled_ok(journal: Path) -> set[str]:
    return {
        r["key"]
        for r in read_records(journal)
        if r["event"] == "settled" and r["status"] in ("accepted", "duplicate")
    }


def in_flight(journal: Path) -> set[str]:
    """Keys whose last journal line is ``sending``."""
    last: dict[str, str] = {}
    for record in read_records(journal):
        last[record["key"]] = record["event"]
    return {key for key, event in last.items() if event == "sending"}


async def until(condition, timeout: float = 60.0) -> bool:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not condition():
        if loop.time() > end:
            return False
        await asyncio.sleep(0.005)
    return True


async def kill(process) -> None:
    process.send_signal(signal.SIGKILL)
    await process.communicate()
    assert process.returncode == -signal.SIGKILL


async def settle_sandbox(sb) -> None:
    """Let the killed run's requests finish inside the sandbox (commits complete)."""
    assert await until(lambda: not sb._inflight, 10)


async def resume_and_check(sb, tmp_path, journal, count, settled_before: set[str]) -> None:
    """Run the batch again from the journal and check every promise of resuming."""
    requests_before = len(sb.requests)
    process = await start_submitter(sb, tmp_path, journal, count)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()
    line = stdout.decode().strip()
    assert line.startswith(f"done {count} not-ok 0 "), (line, stderr.decode())
    statuses = json.loads(line.split("statuses ", 1)[1])
    assert "duplicate" not in statuses, statuses  # every commit was this batch's own

    # Exactly once, and complete.
    assert len(sb.committed) == count
    assert sb.commit_count == count
    assert all(c.commits == 1 for c in sb.committed.values())
    # Settled documents were not sent again.
    resent = {r.identity for r in sb.requests[requests_before:] if r.identity}
    assert not resent & settled_before, sorted(resent & settled_before)[:5]
    # The journal is complete: every line readable, every document's last line settled ok.
    lines = journal.read_text(encoding="utf-8").splitlines()
    records = [json.loads(text) for text in lines]  # no torn or merged line is left
    last: dict[str, dict] = {}
    for record in records:
        last[record["key"]] = record
    assert len(last) == count
    for key, record in last.items():
        assert record["event"] == "settled", (key, record)
        assert record["status"] == "accepted", (key, record)
        assert record["result"]["internalId"] == key.removeprefix("id:")
    # The library's own reader agrees.
    reader = Journal(journal)
    assert all(reader.get(key).settled for key in last)


def widen_windows(sb, seed, *, trickle: float = 0.02) -> None:
    """Slow every first attempt, before commit (latency) or after it (trickling answer,
    lost answer), so a kill lands with documents committed but not yet journaled.
    """
    sb.random_faults(
        rate=1.0,
        seed=seed,
        kinds=(
            Fault.latency(0.03),
            Fault.trickle(trickle, chunk_size=64),
            Fault.commit_then_drop(),
        ),
        max_per_document=1,
    )


def committed_not_settled(sb, journal: Path) -> set[str]:
    return set(sb.committed) & in_flight(journal)


async def test_sigkill_right_after_commit_before_settled_line_then_resume(tmp_path):
    """Kill while a document is committed by the provider but its journal line is not
    written (its answer is still trickling in): resume re-sends it, the 409 makes it
    ACCEPTED, it is committed once, and settled documents are not re-sent.
    """
    count = 60
    journal = tmp_path / "journal.jsonl"
    async with Sandbox(key_algorithm="cv25519") as sb:
        widen_windows(sb, seed=7, trickle=0.05)
        process = await start_submitter(sb, tmp_path, journal, count)
        assert await until(
            lambda: len(settled_ok(journal)) >= 3 and committed_not_settled(sb, journal)
        )
        await kill(process)
        await settle_sandbox(sb)
        window = committed_not_settled(sb, journal)
        assert window, "the kill missed the window after a commit"
        settled_before = settled_ok(journal)
        assert 0 < len(settled_before) < count
        await resume_and_check(sb, tmp_path, journal, count, settled_before)
        # Those documents were re-sent once and answered 409 (their own earlier commit).
        again = [r for r in sb.requests if r.identity in window and r.status == 409]
        assert {r.identity for r in again} == window


def tear_settled_line(journal: Path, key: str, outcome_record: dict) -> None:
    """Append half of a ``settled`` line for ``key``: the process died mid-write."""
    line = json.dumps(
        {"v": 1, "event": "settled", **outcome_record, "key": key},
        ensure_ascii=False,
        separators=(",", ":"),
    )
    with journal.open("a", encoding="utf-8") as file:
        file.write(line[: len(line) // 2])


async def test_torn_settled_line_then_resume(tmp_path):
    """A ``settled`` line torn in half by the kill (a committed document whose outcome
    was being written): resume cuts the torn tail, re-sends that document (409, ACCEPTED,
    committed once), and the journal ends complete with no merged lines.
    """
    count = 40
    journal = tmp_path / "journal.jsonl"
    async with Sandbox(key_algorithm="cv25519") as sb:
        widen_windows(sb, seed=3, trickle=0.05)
        process = await start_submitter(sb, tmp_path, journal, count)
        assert await until(
            lambda: len(settled_ok(journal)) >= 2 and committed_not_settled(sb, journal)
        )
        await kill(process)
        await settle_sandbox(sb)
        victim = min(committed_not_settled(sb, journal))
        record = sb.committed[victim].record
        fake = {"index": 0, "status": "accepted", "attempts": 1, "error": None}
        fake["result"] = {"mark": record.mark, "internalId": record.internal_id}
        tear_settled_line(journal, victim, fake)
        assert not journal.read_bytes().endswith(b"\n")
        settled_before = settled_ok(journal)
        assert victim not in settled_before
        await resume_and_check(sb, tmp_path, journal, count, settled_before)
        assert [r.status for r in sb.requests if r.identity == victim][-1] == 409


async def kill_at_random_point(tmp_path, seed: int, count: int) -> None:
    rng = random.Random(seed)
    journal = tmp_path / f"journal-{seed}.jsonl"
    async with Sandbox(key_algorithm="cv25519") as sb:
        widen_windows(sb, seed=seed, trickle=rng.choice([0.005, 0.02, 0.05]))
        process = await start_submitter(sb, tmp_path, journal, count)
        how = rng.choice(["settled", "time", "window"])
        if how == "settled":
            target = rng.randrange(1, count // 2)
            assert await until(lambda: len(settled_ok(journal)) >= target)
        elif how == "time":
            await until(journal.exists)
            await asyncio.sleep(rng.uniform(0.0, 0.6))
        else:
            assert await until(lambda: committed_not_settled(sb, journal))
        tear = rng.random() < 0.5
        await kill(process)
        await settle_sandbox(sb)
        window = committed_not_settled(sb, journal)
        if tear and window:
            victim = min(window)
            record = sb.committed[victim].record
            fake = {"index": 0, "status": "accepted", "attempts": 1, "error": None}
            fake["result"] = {"mark": record.mark, "internalId": record.internal_id}
            tear_settled_line(journal, victim, fake)
        settled_before = settled_ok(journal)
        if len(settled_before) == count:
            pytest.skip("the run finished before the kill")
        await resume_and_check(sb, tmp_path, journal, count, settled_before)


@pytest.mark.parametrize("seed", [11])
async def test_sigkill_at_a_random_point_then_resume_quick(tmp_path, seed):
    """One seeded random kill point (settled count, elapsed time, or the window after a
    commit; sometimes with a torn line): resume gives exactly-once commits and a
    complete journal.
    """
    await kill_at_random_point(tmp_path, seed, 60)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 13))
async def test_sigkill_at_random_points_then_resume_soak(tmp_path, seed):
    """Twelve seeded kill points over a 150-invoice batch: every resume gives exactly-once
    commits, a complete journal, and no settled document re-sent.
    """
    await kill_at_random_point(tmp_path, seed, 150)
