"""15. Credentials that change: a key rotated mid-batch; SIGHUPs over a large file.

**Rotation**: seconds from the credentials file's rename to the new key's first use.

The worker and the sandbox run as services (``invoicing-async worker --credentials`` and
``invoicing-async sandbox``, each its own process; the sandbox answers every document
after ``--latency`` 0.05 s, a provider's processing time, so the worker's batch holds as
many documents as it may). One shop's key is rotated at the provider before the worker
starts: its documents wait. The outbox holds N documents of three other shops and 20 of
that shop; 3 s after the shop's documents started waiting, its new key is written to the
credentials file by an atomic rename, and the delay is the time until the sandbox
commits the shop's first document (its counters polled every 20 ms). Median of the
rounds. The floor: the same rotation with no other shop's documents (N = 0: nothing else
to send). Target: the new key used within a second of the rename, whatever the backlog
(the look at the file, every 0.25 s, and its settle interval, 0.25 s, are part of it).

**SIGHUPs**: an idle worker (``--metrics-port``) whose credentials file has 100,000
issuers (quick: 10,000) gets 100 SIGHUPs in a second, while ``/healthz`` is asked every
50 ms for 4 s; the longest answer says how long the event loop stalled (the probe
answers 503 past 5 s: a liveness failure). The floor: the same probes without SIGHUPs.
Target: no answer slower than half a second.

``python -m benchmarks --only rotation``; run it in an older checkout for the figures
before (the script drives the command line only).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp

from ._common import Section, Settings, median

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

NAME = "rotation"
SHOP_DOCUMENTS = 20
LATENCY = "0.05"
#: Seconds a shop's documents wait before its new key is written.
WAITED = 3.0
#: Generous: a safety net for a stuck process, never a measure.
LONG = 300.0


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}


@contextlib.asynccontextmanager
async def _service(*args: str, env: dict[str, str]) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "invoicing_async", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()


async def _line(process: asyncio.subprocess.Process, pattern: str) -> re.Match[str]:
    """Read the process's output until a line matches ``pattern``; the match.

    The rest of its output is read on (and dropped), so that it never waits for room.
    """
    output = process.stdout
    assert output is not None  # noqa: S101  (piped above)
    while line := await asyncio.wait_for(output.readline(), LONG):
        found = re.search(pattern, line.decode(errors="replace"))
        if found is not None:
            _draining.add(asyncio.ensure_future(output.read()))
            return found
    raise RuntimeError(f"the process ended without saying {pattern!r}")


_draining: set[asyncio.Future[bytes]] = set()


async def _commits(session: aiohttp.ClientSession, root: str, tin: str) -> int:
    """The sandbox's count of ``tin``'s commits (its read-only inspection endpoint)."""
    async with session.get(f"{root}/_sandbox/issuers/{tin}") as answer:
        return int((await answer.json())["counts"]["commits"])


async def _round(folder: Path, others: int) -> float:
    """One rotation with ``others`` documents of the other shops: the delay, in seconds."""
    from invoicing_async.outbox import SqliteOutbox  # noqa: PLC0415
    from invoicing_sandbox import sample_invoice, sandbox_issuers  # noqa: PLC0415

    issuers = sandbox_issuers(4)
    shop, *rest = issuers
    rotated = {**issuers, shop: "the-shops-new-key"}
    served = folder / "served.json"
    served.write_text(json.dumps(rotated), encoding="utf-8")
    served.chmod(0o600)
    credentials = folder / "keys.json"
    credentials.write_text(json.dumps(issuers), encoding="utf-8")
    credentials.chmod(0o600)
    ledger = folder / "outbox.db"
    ledger.unlink(missing_ok=True)
    async with SqliteOutbox(ledger) as outbox:
        documents = [sample_invoice(n, issuer_vat=rest[n % 3], lines=1) for n in range(others)]
        documents += [sample_invoice(others + n, issuer_vat=shop, lines=1) for n in range(20)]
        await outbox.enqueue(documents)
    env = _environment()
    sandbox = (
        "sandbox", "--port", "0", "--out", str(folder / "sandbox"), "--issuers", str(served),
        "--key-algorithm", "cv25519", "--latency", LATENCY,
    )  # fmt: skip
    async with _service(*sandbox, env=env) as provider:
        url = (await _line(provider, r"export INVOICING_BASE_URL=(\S+)")).group(1)
        env.update(
            INVOICING_BASE_URL=url,
            INVOICING_PROVIDER_KEY=str(folder / "sandbox" / "provider.asc"),
        )
        root = url.rsplit("/", 1)[0]
        worker = ("worker", "--ledger", str(ledger), "--credentials", str(credentials))
        async with _service(*worker, env=env) as running, aiohttp.ClientSession() as session:
            await _line(running, rf"issuer {shop}'s documents wait")
            await asyncio.sleep(WAITED)
            fresh = folder / "keys.new"
            fresh.write_text(json.dumps(rotated), encoding="utf-8")
            fresh.chmod(0o600)
            fresh.replace(credentials)
            renamed = time.perf_counter()
            while not await _commits(session, root, shop):  # noqa: ASYNC110  (the measure)
                await asyncio.sleep(0.02)
            return time.perf_counter() - renamed


async def _probes(url: str, process: asyncio.subprocess.Process | None) -> tuple[float, int]:
    """The longest ``/healthz`` answer in 4 s and the failed probes; 100 SIGHUPs sent."""
    longest, failed = 0.0, 0

    async def hang_ups() -> None:
        for _ in range(100):
            if process is not None:
                process.send_signal(signal.SIGHUP)
            await asyncio.sleep(0.01)

    sending = asyncio.ensure_future(hang_ups())
    timeout = aiohttp.ClientTimeout(total=LONG)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        ends = time.perf_counter() + 4.0
        while time.perf_counter() < ends:
            began = time.perf_counter()
            async with session.get(url) as answer:
                await answer.read()
                failed += answer.status != 200
            longest = max(longest, time.perf_counter() - began)
            await asyncio.sleep(0.05)
    await sending
    return longest, failed


async def _hangups(folder: Path, issuers: int, *, signals: bool) -> tuple[float, int]:
    """An idle worker over ``issuers`` issuers: the longest probe answer (see the doc)."""
    from invoicing_async.outbox import SqliteOutbox  # noqa: PLC0415
    from invoicing_sandbox import generate_keypair  # noqa: PLC0415

    credentials = folder / "many.csv"
    lines = "".join(f"{800_000_000 + n},key-of-issuer-{n}\n" for n in range(issuers))
    credentials.write_text(lines, encoding="utf-8")
    credentials.chmod(0o600)
    key = folder / "provider.asc"
    key.write_text(generate_keypair("cv25519").public_armored, encoding="utf-8")
    ledger = folder / "idle.db"
    ledger.unlink(missing_ok=True)
    async with SqliteOutbox(ledger):
        pass
    env = {
        **_environment(),
        "INVOICING_BASE_URL": "http://127.0.0.1:9/test",
        "INVOICING_PROVIDER_KEY": str(key),
    }
    worker = (
        "worker", "--ledger", str(ledger), "--credentials", str(credentials),
        "--metrics-port", "0",
    )  # fmt: skip
    async with _service(*worker, env=env) as running:
        url = (await _line(running, r"probes: (\S+/healthz)")).group(1)
        return await _probes(url, running if signals else None)


def _hangup_rows(section: Section, folder: Path, issuers: int) -> None:
    floor, _ = asyncio.run(_hangups(folder, issuers, signals=False))
    longest, failed = asyncio.run(_hangups(folder, issuers, signals=True))
    what = f"100 SIGHUPs, {issuers:,} issuers: the longest /healthz answer"
    section.rows.append(
        [
            what,
            "1",
            f"{longest:.2f} s" + (f" ({failed} probes 503)" if failed else ""),
            f"floor {floor:.2f} s",
            section.check(f"credentials: {what}", longest, 0.5, higher=False, unit=" s"),
        ]
    )


def run(settings: Settings) -> Section:
    section = Section(
        NAME,
        "Credentials that change: a key rotated mid-batch, SIGHUPs over a large file",
        [
            "Rotation: other shops' documents",
            "Rounds",
            "Delay (median)",
            "Rounds' delays",
            "Target",
        ],
    )
    rounds = settings.n(3, 1)
    sizes = [0, *([300] if settings.quick else [2000, 6000])]
    with tempfile.TemporaryDirectory(prefix="invoicing-rotation-") as work:
        for others in sizes:
            delays = [asyncio.run(_round(Path(work), others)) for _ in range(rounds)]
            delay = median(delays)
            target = (
                "floor"
                if not others
                else section.check(
                    f"rotation: first use of the new key, {others:,} documents",
                    delay,
                    1.0,
                    higher=False,
                    unit=" s",
                )
            )
            row = [f"{others:,}", str(rounds), f"{delay:.2f} s"]
            section.rows.append([*row, ", ".join(f"{d:.2f}" for d in delays), target])
        _hangup_rows(section, Path(work), settings.n(100_000, 10_000))
    section.notes.append(
        f"Sandbox latency {LATENCY} s a document, the worker's default concurrency; the new "
        f"key is written {WAITED:g} s after the shop's documents began to wait."
    )
    return section
