"""A till through a whole outage: 200 sales, every one committed exactly once.

The provider refuses connections, then hangs, then answers 503, then recovers (the
sandbox's outage switch, over real HTTP). Every sale returns within its budget plus a
generous margin (checked loosely: a safety net, never a benchmark), every sale is
committed exactly once by the sandbox, and every deferred receipt resolves to the
sandbox's record, delivered to the application. The second test does it in a till
process that is SIGKILLed mid-outage, while its drainer's request hangs in the
sandbox, and started again on the same outbox.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

from sandboxtools import client_for, invoice

from invoicing_async import (
    Deferral,
    DeferredOutcome,
    DeferredReceipt,
    DocumentResult,
    OutcomeStatus,
    RetryPolicy,
    document_key,
)
from invoicing_sandbox import Sandbox

SCRIPT = Path(__file__).parent / "scripts" / "pos_till.py"
BUDGET = 0.5
#: Generous, on a shared machine: the budget's own grace, the outbox's durable write,
#: a scheduler's hiccup. A check that the call is bounded, not how fast it is.
MARGIN = 2.5
PHASES = (None, "refuse", "hang", "503", None)
SALES = 200


def _phase(number: int) -> str | None:
    return PHASES[min(number * len(PHASES) // SALES, len(PHASES) - 1)]


async def test_200_sales_across_an_outage_are_each_committed_once(tmp_path):
    """Refused, hanging, 503, recovered: four tills sell 200 invoices; each call ends
    within its budget (plus margin), each sale is committed once, and every deferred
    one's outcome carries the sandbox's record."""
    delivered: dict[str, DeferredOutcome] = {}
    all_in = asyncio.Event()
    deferred: dict[str, DeferredReceipt] = {}
    direct: dict[str, DocumentResult] = {}
    elapsed: list[float] = []

    def on_outcome(item: DeferredOutcome) -> None:
        delivered[item.key] = item
        if set(deferred) <= set(delivered) and len(deferred) + len(direct) == SALES:
            all_in.set()

    async with Sandbox() as sb, client_for(sb, retry=RetryPolicy(base_delay=0.01)) as client:
        till = Deferral(
            client, tmp_path / "till.db", budget=BUDGET, on_outcome=on_outcome,
            probe_delay=0.02, probe_max_delay=0.2, poll=0.2,
            retry=RetryPolicy(max_attempts=2, base_delay=0.01, attempt_timeout=5.0),
        )  # fmt: skip
        async with till:
            hits = 0
            for first in range(0, SALES, 4):
                phase = _phase(first)
                if sb.outage_mode != phase:
                    if sb.outage_mode in ("hang", "503"):
                        # The drainer met this outage too (a probe held, or answered 503)
                        # before it changes: no phase passes unseen by either side.
                        await asyncio.wait_for(_until(lambda: sb.outage_hits > hits), 60)
                    hits = sb.outage_hits
                    await sb.set_outage(phase)  # type: ignore[arg-type]

                async def sell(number: int) -> None:
                    started = time.monotonic()
                    answer = await till.submit_or_defer(invoice(sb, number))
                    elapsed.append(time.monotonic() - started)
                    if isinstance(answer, DeferredReceipt):
                        deferred[answer.key] = answer
                    else:
                        direct[document_key(invoice(sb, number))] = answer

                await asyncio.gather(*(sell(n) for n in range(first, first + 4)))
            if set(deferred) <= set(delivered):
                all_in.set()
            await asyncio.wait_for(all_in.wait(), 120)
            assert (await till.refresh_backlog()).count == 0
    assert max(elapsed) < BUDGET + MARGIN, max(elapsed)
    assert len(deferred) + len(direct) == SALES
    assert {r.reason.value for r in deferred.values()} >= {"unreachable"}
    assert sb.commit_count == SALES
    assert all(held.commits == 1 for held in sb.committed.values())
    for key, receipt in deferred.items():
        outcome = delivered[key]
        assert outcome.receipt == receipt
        assert outcome.outcome.status is OutcomeStatus.ACCEPTED
        assert outcome.result == sb.committed[key].record
    for key, record in direct.items():
        assert record == sb.committed[key].record


class Till:
    """The till process and the lines it prints."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[dict] = []
        self._changed = asyncio.Event()
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, sb: Sandbox, outbox: Path, key_file: Path) -> Till:
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(SCRIPT), str(outbox), sb.base_url, sb.client_id,
            str(key_file), str(BUDGET),
            env={**os.environ, "INVOICING_API_KEY": sb.client_secret},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(process)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            self.lines.append(json.loads(raw))
            self._changed.set()

    async def until(self, condition, timeout: float = 120.0) -> None:
        async def wait() -> None:
            while not condition(self.lines):
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(wait(), timeout)

    async def sell(self, first: int, end: int) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"sell {first} {end}\n".encode())
        await self.process.stdin.drain()
        await self.until(lambda lines: {"sold": end} in lines)

    async def quit(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"quit\n")
        await self.process.stdin.drain()
        await asyncio.wait_for(self.process.wait(), 60)
        await self._reader
        assert self.process.returncode == 0

    async def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()
        await self._reader
        assert self.process.returncode == -signal.SIGKILL

    @property
    def sales(self) -> list[dict]:
        return [line for line in self.lines if "sale" in line]

    @property
    def outcomes(self) -> dict[str, dict]:
        return {line["outcome"]: line for line in self.lines if "outcome" in line}


async def test_a_till_killed_mid_outage_loses_and_doubles_nothing(tmp_path):
    """SIGKILL a till while sales wait in its outbox and its drainer's request hangs in
    the sandbox; a new till process on the same outbox sends them all once the provider
    is back: 200 sales, each committed once, each deferred one's outcome delivered with
    the sandbox's record, every call within its budget (plus margin)."""
    outbox, key_file = tmp_path / "till.db", tmp_path / "provider.asc"
    async with Sandbox() as sb:
        sb.write_public_key(key_file)
        first = await Till.start(sb, outbox, key_file)
        await first.sell(0, 20)
        await sb.set_outage("refuse")
        await first.sell(20, 70)
        await sb.set_outage("hang")
        hits = sb.outage_hits
        await first.sell(70, 110)
        # The drainer probes the provider: kill the till while that request hangs.
        await asyncio.wait_for(_until(lambda: sb.outage_hits > hits), 60)
        await first.kill()
        second = await Till.start(sb, outbox, key_file)
        await sb.set_outage("503")
        await second.sell(110, 150)
        await sb.set_outage(None)
        await second.sell(150, SALES)
        sales = first.sales + second.sales
        deferred = {sale["key"] for sale in sales if sale["kind"] == "deferred"}
        await second.until(lambda _lines: deferred <= set(first.outcomes) | set(second.outcomes))
        await second.quit()
    assert [sale["sale"] for sale in sales] == list(range(SALES))
    assert max(sale["elapsed"] for sale in sales) < BUDGET + MARGIN
    assert len(deferred) >= 90  # the refused, hanging and 503 phases at least
    assert sb.commit_count == SALES
    assert all(held.commits == 1 for held in sb.committed.values())
    outcomes = {**first.outcomes, **second.outcomes}
    for sale in sales:
        held = sb.committed[sale["key"]]
        mark = sale["mark"] if sale["kind"] == "record" else outcomes[sale["key"]]["mark"]
        assert mark == held.record.mark
    assert all(outcomes[key]["status"] == "accepted" for key in deferred)


async def _until(condition) -> None:
    while not condition():  # noqa: ASYNC110  (no event announces a held request)
        await asyncio.sleep(0.01)
