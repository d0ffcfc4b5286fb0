"""7. The SQLite ledger: memory, throughput and resume of a journaled ``submit_stream``.

Every run is a fresh interpreter (a child of this module) against the instant provider
process (``_provider.py``); the child opens the client, fetches the token and streams
200 documents first (with a throwaway ledger when journaled, so ``sqlite3`` and the
writer thread are already there), records its resident size, then streams N small
documents from a generator through
``client.submit_stream(gen(), concurrency=64, encrypted=False, journal=…)``, discarding
each outcome. Each journaled run writes a new ledger file (default ``durable=True``:
``synchronous=FULL``, every group commit fsynced).

* **memory**: peak RSS growth (VmHWM after - VmRSS before) of journaled runs of 20k and
  2k documents, median of the rounds; target: 20k minus 2k <= 15 MB.
* **throughput**: journaled and unjournaled runs of the same 20k-document stream,
  alternating in every round (the order flips each round); the ratio of each round's
  pair, median over rounds; target >= 0.9x.
* **resume**: a ledger of 1M entries (1M accepted, 64 left ``in_flight`` by a "crash")
  is built directly with ``sqlite3`` in the library's format, records of realistic size;
  the child starts ``submit_stream`` on it with the 64 in-flight documents first and
  reports the time until the first outcome of a document actually sent (the clock starts
  before ``submit_stream`` opens the ledger; the token is fetched before). The floor is
  the same with a 1k-entry ledger, interleaved; target: 1M < 2 s. As information, the
  rate at which documents recorded final are skipped (replayed with ``attempts == 0``).

``python -m benchmarks.ledger --child stream N URL LEDGER|-`` and
``python -m benchmarks.ledger --child resume URL LEDGER ENTRIES SKIP`` are the children.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ._common import Chart, Section, Settings, fmt, median, peak_kib, run_child, small_documents
from ._provider import RECORD_BODY, ProviderProcess

NAME = "ledger"
CONCURRENCY = 64
IN_FLIGHT = 64  # documents the "crashed" run left in flight in the resume ledger
_WARM = 10**9  # document numbers of the warm-up (keys apart from the measured ones)


def _key(number: int) -> str:
    return f"id:094019245-M-{number}"


# --- the children ------------------------------------------------------------------------


async def _stream_child(
    count: int, url: str, ledger: str, *, encrypted: bool = False
) -> dict[str, float]:
    from .e2e import client  # noqa: PLC0415

    journal = None if ledger == "-" else Path(ledger)
    async with client(url) as c:
        await c.token()
        warm = None if journal is None else journal.with_name(journal.name + ".warm")
        async for _ in c.submit_stream(
            small_documents(200, _WARM), concurrency=CONCURRENCY, encrypted=encrypted, ledger=warm
        ):
            pass
        rss_before, _ = peak_kib()
        started, cpu = time.perf_counter(), time.process_time()
        accepted = 0
        async for outcome in c.submit_stream(
            small_documents(count), concurrency=CONCURRENCY, encrypted=encrypted, ledger=journal
        ):
            accepted += outcome.status.name == "ACCEPTED"
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu
        _, hwm_after = peak_kib()
    return {
        "count": count,
        "accepted": accepted,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "rss_before_kib": rss_before,
        "hwm_after_kib": hwm_after,
    }


async def _resume_child(url: str, ledger: str, entries: int, skip: int) -> dict[str, float]:
    """Time to the first sent outcome of a resumed stream; then the rate of replays."""
    from invoicing_async import Ledger  # noqa: PLC0415

    from .e2e import client  # noqa: PLC0415

    async with client(url) as c:
        await c.token()
        rss_before, _ = peak_kib()
        # The crashed run's documents in flight come first: they are sent again.
        started = time.perf_counter()
        first = float("nan")
        sent = 0
        async for outcome in c.submit_stream(
            small_documents(IN_FLIGHT, entries),
            concurrency=CONCURRENCY,
            encrypted=False,
            ledger=ledger,
        ):
            if outcome.attempts and sent == 0:
                first = time.perf_counter() - started
            sent += outcome.attempts > 0
        _, hwm_after = peak_kib()
        # Then documents recorded final are read again: each is replayed, none sent.
        replayed = 0
        began = time.perf_counter()
        async with Ledger(ledger) as opened:
            async for outcome in c.submit_stream(
                small_documents(skip), concurrency=CONCURRENCY, encrypted=False, ledger=opened
            ):
                replayed += outcome.replayed
        replay_seconds = time.perf_counter() - began
    return {
        "first_sent_seconds": first,
        "sent": sent,
        "replayed": replayed,
        "replay_seconds": replay_seconds,
        "rss_before_kib": rss_before,
        "hwm_after_kib": hwm_after,
    }


# --- the resume ledger ---------------------------------------------------------------------


def build_ledger(path: Path, entries: int) -> None:
    """A ledger of ``entries`` accepted documents and the crashed run's in-flight ones.

    Written with ``sqlite3`` in the library's format (its own ``connect`` makes the
    schema); each accepted entry holds the provider's record, as a real run writes it.
    """
    from invoicing_async._core.convert import result_from_json  # noqa: PLC0415
    from invoicing_async._core.outcomes import Outcome, OutcomeStatus  # noqa: PLC0415
    from invoicing_async._durable._sqlitefile import connect  # noqa: PLC0415
    from invoicing_async._durable.entry import outcome_json  # noqa: PLC0415

    record = result_from_json(json.loads(RECORD_BODY))
    template = outcome_json(
        Outcome(index=0, key="@KEY@", status=OutcomeStatus.ACCEPTED, result=record, attempts=1)
    )
    now = time.time()

    def row(n: int) -> tuple[str, str, float]:
        key = _key(n)
        return key, template.replace("@KEY@", key).replace('"index":0', f'"index":{n}'), now

    connection = connect(path, durable=False)
    try:
        connection.execute("BEGIN")
        connection.executemany(
            "INSERT INTO entries (key, issuer, state, status, final, attempts, outcome, "
            "updated_at) VALUES (?, '094019245', 'done', 'accepted', 1, 1, ?, ?)",
            (row(n) for n in range(entries)),
        )
        connection.executemany(
            "INSERT INTO entries (key, issuer, state, sending, updated_at) "
            "VALUES (?, '094019245', 'in_flight', 1, ?)",
            ((_key(n), now) for n in range(entries, entries + IN_FLIGHT)),
        )
        connection.execute("COMMIT")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()


# --- the benchmark -------------------------------------------------------------------------


def _growth_mb(result: dict[str, float]) -> float:
    return (result["hwm_after_kib"] - result["rss_before_kib"]) / 1024


def _pairs(
    url: str, work: Path, count: int, rounds: int, *, pgp: bool = False
) -> dict[str, list[dict[str, float]]]:
    """Journaled and unjournaled runs of one stream, alternating (order flipped each round)."""
    runs: dict[str, list[dict[str, float]]] = {"journaled": [], "plain": []}
    for round_ in range(rounds):
        order = ["journaled", "plain"] if round_ % 2 == 0 else ["plain", "journaled"]
        for name in order:
            ledger = "-" if name == "plain" else str(work / f"stream-{round_}.db")
            args = ["stream", str(count), url, ledger, *(["pgp"] if pgp else [])]
            result = run_child(NAME, *args)
            if result["accepted"] != count:
                raise AssertionError(f"only {result['accepted']} of {count} accepted ({name})")
            runs[name].append(result)
        for leftover in work.glob("*.db*"):
            leftover.unlink()
    return runs


def _ratios(runs: dict[str, list[dict[str, float]]]) -> tuple[list[float], float]:
    """Each round's throughput ratio, and the median ratio of CPU seconds per document."""
    pairs = list(zip(runs["journaled"], runs["plain"], strict=True))
    speed = [plain["seconds"] / journaled["seconds"] for journaled, plain in pairs]
    cpu = [plain["cpu_seconds"] / journaled["cpu_seconds"] for journaled, plain in pairs]
    return speed, median(cpu)


def _throughput(section: Section, url: str, work: Path, settings: Settings) -> dict:
    small, large = settings.n(2_000, 200), settings.n(20_000, 1_000)
    rounds = settings.n(7, 1)
    runs = _pairs(url, work, large, rounds)
    runs["small"] = []
    for round_ in range(rounds):
        ledger = str(work / f"s{round_}.db")
        runs["small"].append(run_child(NAME, "stream", str(small), url, ledger))
    rate = {name: median([r["count"] / r["seconds"] for r in rs]) for name, rs in runs.items()}
    growth = {name: median([_growth_mb(r) for r in rs]) for name, rs in runs.items()}
    cpu_us = {
        name: median([r["cpu_seconds"] / r["count"] * 1e6 for r in rs]) for name, rs in runs.items()
    }
    ratios, cpu_ratio = _ratios(runs)
    memory_target = section.check(
        f"ledger: journaled peak growth {large:,} minus {small:,} docs",
        growth["journaled"] - growth["small"],
        15,
        higher=False,
        unit=" MB",
    )
    speed_target = section.check(
        "ledger: journaled ÷ unjournaled throughput", median(ratios), 0.9, higher=True
    )
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}x over {rounds} rounds"
    pgp_count, pgp_rounds = settings.n(3_000, 200), settings.n(5, 1)
    pgp = _pairs(url, work, pgp_count, pgp_rounds, pgp=True)
    pgp_rate = {name: median([r["count"] / r["seconds"] for r in rs]) for name, rs in pgp.items()}
    pgp_ratios, pgp_cpu = _ratios(pgp)
    pgp_us = {
        name: median([r["cpu_seconds"] / r["count"] * 1e6 for r in rs]) for name, rs in pgp.items()
    }
    pgp_note = (
        f"÷ unjournaled {median(pgp_ratios):.2f}x ({min(pgp_ratios):.2f}-"
        f"{max(pgp_ratios):.2f}x); CPU per doc ratio {pgp_cpu:.2f}x"
    )
    section.rows += [
        ["JSON stream", f"{small:,} docs, journaled", fmt(rate["small"], 0) + " docs/s",
         f"{cpu_us['small']:.0f} µs", f"{growth['small']:+.1f} MB", ""],
        ["JSON stream", f"{large:,} docs, journaled", fmt(rate["journaled"], 0) + " docs/s",
         f"{cpu_us['journaled']:.0f} µs", f"{growth['journaled']:+.1f} MB",
         f"memory {memory_target}"],
        ["JSON stream", f"{large:,} docs, unjournaled", fmt(rate["plain"], 0) + " docs/s",
         f"{cpu_us['plain']:.0f} µs", f"{growth['plain']:+.1f} MB",
         f"speed {speed_target} ({spread}); CPU per doc ratio {cpu_ratio:.2f}x"],
        ["PGP stream", f"{pgp_count:,} docs, journaled", fmt(pgp_rate["journaled"], 0) + " docs/s",
         f"{pgp_us['journaled']:.0f} µs", "", pgp_note],
        ["PGP stream", f"{pgp_count:,} docs, unjournaled", fmt(pgp_rate["plain"], 0) + " docs/s",
         f"{pgp_us['plain']:.0f} µs", "", "(information: the library's default, RSA-3072)"],
    ]  # fmt: skip
    return {"rate": rate, "growth": growth, "ratios": ratios, "pgp": pgp_ratios}


def _resume(section: Section, url: str, work: Path, settings: Settings) -> dict:
    big, small = settings.n(1_000_000, 20_000), 1_000
    skip = settings.n(100_000, 2_000)
    rounds = settings.n(3, 1)
    built = time.perf_counter()
    for entries in (big, small):
        build_ledger(work / f"resume-{entries}.db", entries)
    build_seconds = time.perf_counter() - built
    size_mb = (work / f"resume-{big}.db").stat().st_size / 1e6
    results: dict[int, list[dict[str, float]]] = {big: [], small: []}
    for round_ in range(rounds):
        for entries in (big, small) if round_ % 2 == 0 else (small, big):
            # A copy per run: a resume changes the ledger (the in-flight entries settle).
            source = work / f"resume-{entries}.db"
            copy = work / "run.db"
            shutil.copyfile(source, copy)
            skipped = str(min(skip, entries))
            result = run_child(NAME, "resume", url, str(copy), str(entries), skipped)
            if result["sent"] != IN_FLIGHT:
                raise AssertionError(f"resume sent {result['sent']} of {IN_FLIGHT}")
            results[entries].append(result)
            for leftover in work.glob("run.db*"):
                leftover.unlink()
    first = {n: median([r["first_sent_seconds"] for r in rs]) for n, rs in results.items()}
    growth = {n: median([_growth_mb(r) for r in rs]) for n, rs in results.items()}
    replay = {
        n: median([r["replayed"] / r["replay_seconds"] for r in rs]) for n, rs in results.items()
    }
    target = section.check(
        f"ledger: resume from {big:,} entries, first document sent (s)",
        first[big],
        2,
        higher=False,
        unit=" s",
    )
    for n in (small, big):
        section.rows.append(
            [
                "resume",
                f"{n:,}-entry ledger" + (" (floor)" if n == small else f" ({size_mb:,.0f} MB)"),
                f"first sent after {first[n] * 1000:,.0f} ms",
                "",
                f"{growth[n]:+.1f} MB",
                target if n == big else f"÷ this = {first[big] / first[small]:.2f}x",
            ]
        )
    for n in (small, big):
        section.rows.append(
            [
                "replay",
                f"{min(skip, n):,} final entries of the {n:,}-entry ledger read again",
                fmt(replay[n], 0) + " docs/s",
                "",
                "",
                "(information: replayed, not sent)",
            ]
        )
    section.notes.append(
        f"The {big:,}-entry ledger ({size_mb:,.0f} MB) was built in {build_seconds:.0f} s with "
        "sqlite3 and is in the page cache: a cold cache adds the disk's latency for the "
        "few pages a lookup reads (an indexed lookup, not a scan)."
    )
    return {"first": first, "growth": growth}


def run(settings: Settings) -> Section:
    section = Section(
        NAME,
        f"The SQLite ledger: journaled submit_stream (concurrency {CONCURRENCY})",
        ["Run", "What", "Speed", "CPU per doc", "peak RSS growth", "Target"],
    )
    work = Path(tempfile.mkdtemp(prefix="bench-ledger-"))
    try:
        with ProviderProcess() as provider:
            stream = _throughput(section, provider.url, work, settings)
            _resume(section, provider.url, work, settings)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratios = ", ".join(f"{r:.2f}" for r in stream["ratios"])
    section.notes += [
        (
            "Fresh interpreter per run; growth = VmHWM after streaming - VmRSS before it "
            "(client open, token fetched, 200 documents sent already, with a throwaway "
            "ledger when journaled)."
        ),
        (
            "Throughput: each round runs the journaled and the unjournaled stream back to "
            f"back (order flipped every round); per-round ratios: {ratios}. The provider "
            "answers at once, so the client's CPU is the bottleneck: the worst case for "
            "the ledger's share. 'CPU per doc' is the client process's CPU time (every "
            "thread) per document, median of the rounds; its ratio, unjournaled ÷ "
            "journaled, is far less sensitive to other load on the machine than wall time."
        ),
        (
            "PGP stream: the same small documents encrypted (RSA-3072, the library's "
            "default endpoint), fewer documents and rounds: information, not a target."
        ),
        f"Ledger files in {tempfile.gettempdir()} (default durable=True, WAL).",
    ]
    section.charts.append(
        Chart(
            "Journaled vs unjournaled stream",
            "docs/s",
            ["docs/s (median)"],
            {
                "unjournaled": [stream["rate"]["plain"]],
                "journaled": [stream["rate"]["journaled"]],
            },
        )
    )
    return section


def main() -> None:
    import asyncio  # noqa: PLC0415

    args = sys.argv[1:]
    if len(args) in (5, 6) and args[:2] == ["--child", "stream"]:
        pgp = args[5:] == ["pgp"]
        result = asyncio.run(_stream_child(int(args[2]), args[3], args[4], encrypted=pgp))
    elif len(args) == 6 and args[:2] == ["--child", "resume"]:
        result = asyncio.run(_resume_child(args[2], args[3], int(args[4]), int(args[5])))
    else:
        sys.exit(
            "usage: python -m benchmarks.ledger --child stream COUNT URL LEDGER|- [pgp] "
            "| --child resume URL LEDGER ENTRIES SKIP"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
