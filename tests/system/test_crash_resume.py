"""Adversarial: SIGKILL a batch with a ledger at awkward moments, then resume it.

A subprocess (``tests/system/scripts/adv_submit.py``) submits invoices to a sandbox running in
this test's event loop, with a SQLite ledger. It is killed at random points, among them
right after the provider committed a document but before its outcome was recorded.
Resuming must give: every invoice committed exactly once, a complete ledger (every
entry accepted, with its own record), documents settled before the crash not sent
again, and nothing reported ``duplicate`` (every commit was this batch's own).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from pathlib import Path

import ledgertools
import pytest

from invoicing_sandbox import Fault, Sandbox

SCRIPT = Path(__file__).parent / "scripts" / "adv_submit.py"


async def start_submitter(sb, tmp_path, journal, count, concurrency=8, *, script=SCRIPT, more=()):
    key_file = tmp_path / "provider.asc"
    if not key_file.exists():
        sb.write_public_key(key_file)
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        sb.base_url,
        sb.client_id,
        str(key_file),
        str(journal),
        str(count),
        str(concurrency),
        *more,
        env={**os.environ, "INVOICING_API_KEY": sb.client_secret},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


def settled_ok(journal: Path) -> set[str]:
    return ledgertools.settled_ok(journal)


def in_flight(journal: Path) -> set[str]:
    """Keys whose request may be out with no outcome recorded."""
    return ledgertools.in_flight(journal)


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
    # The ledger is complete: every entry accepted, with its own record.
    entries = ledgertools.rows(journal)
    assert len(entries) == count
    for key, row in entries.items():
        assert row["state"] == "done", (key, row)
        assert row["status"] == "accepted", (key, row)
        assert row["outcome"]["result"]["internalId"] == key.removeprefix("id:")


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
    """Kill while a document is committed by the provider but its outcome is not
    recorded (its answer is still trickling in): resume re-sends it, the 409 makes it
    ACCEPTED, it is committed once, and settled documents are not re-sent.
    """
    count = 60
    journal = tmp_path / "batch.db"
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


async def kill_at_random_point(tmp_path, seed: int, count: int) -> None:
    rng = random.Random(seed)
    journal = tmp_path / f"batch-{seed}.db"
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
        await kill(process)
        await settle_sandbox(sb)
        settled_before = settled_ok(journal)
        if len(settled_before) == count:
            pytest.skip("the run finished before the kill")
        await resume_and_check(sb, tmp_path, journal, count, settled_before)


@pytest.mark.parametrize("seed", [11])
async def test_sigkill_at_a_random_point_then_resume_quick(tmp_path, seed):
    """One seeded random kill point (settled count, elapsed time, or the window after a
    commit; sometimes with a torn line): resume gives exactly-once commits and a
    complete ledger.
    """
    await kill_at_random_point(tmp_path, seed, 60)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 13))
async def test_sigkill_at_random_points_then_resume_soak(tmp_path, seed):
    """Twelve seeded kill points over a 150-invoice batch: every resume gives exactly-once
    commits, a complete ledger, and no settled document re-sent.
    """
    await kill_at_random_point(tmp_path, seed, 150)


KILL_AFTER_SCRIPT = Path(__file__).parent / "scripts" / "stream_kill_after.py"


async def stream_kill_after(sb, tmp_path, ledger, count, *, concurrency, kill_after):
    """Run ``submit_stream`` into ``ledger`` in a child; it SIGKILLs itself after
    ``kill_after`` outcomes (0: it runs to the end). Returns (returncode, stdout, stderr).
    """
    process = await start_submitter(
        sb, tmp_path, ledger, count, concurrency, script=KILL_AFTER_SCRIPT, more=[str(kill_after)]
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode, stdout.decode(), stderr.decode()


@pytest.mark.parametrize("kill_after", [16, 40])
async def test_sigkill_after_outcomes_resume_resends_no_more_than_were_in_flight(
    tmp_path, kill_after
):
    """A journaled stream at concurrency 8 is SIGKILLed right after it received
    ``kill_after`` outcomes: resuming it re-sends at most 8 of the documents the provider
    had already answered (an outcome settled before the next request left is durable),
    and every document is committed once with a complete ledger.
    """
    count, concurrency = 80, 8
    ledger = tmp_path / "batch.db"
    async with Sandbox(key_algorithm="cv25519") as sb:
        # The first kill_after documents are answered; later requests wait at the gate
        # (not committed), so the kill lands with workers still busy, whatever the timing.
        sb.hold(after=kill_after)
        code, _, stderr = await stream_kill_after(
            sb, tmp_path, ledger, count, concurrency=concurrency, kill_after=kill_after
        )
        assert code == -signal.SIGKILL, stderr
        answered = set(sb.committed)
        assert len(answered) == kill_after
        sb.release()
        await settle_sandbox(sb)

        requests_before = len(sb.requests)
        code, stdout, stderr = await stream_kill_after(
            sb, tmp_path, ledger, count, concurrency=concurrency, kill_after=0
        )
        assert code == 0, stderr
        assert stdout.strip() == f"done {count} not-ok 0", (stdout, stderr)
        resent = {r.identity for r in sb.requests[requests_before:] if r.identity}
        resent_answered = resent & answered
        assert len(resent_answered) <= concurrency, sorted(resent_answered)
        # Every document committed once; the ledger complete.
        assert sb.commit_count == count
        assert all(c.commits == 1 for c in sb.committed.values())
        entries = ledgertools.rows(ledger)
        assert len(entries) == count
        assert all(row["status"] == "accepted" for row in entries.values())
