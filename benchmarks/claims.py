"""13. Outbox claims across issuers, and the upgrade of a ledger file to format 3.

* **claim**: the time of one claim of 32 from 100,000 pending entries (quick: 10,000),
  median of 20, on SQLite (and on PostgreSQL when ``INVOICING_BENCH_POSTGRES`` names a
  database the benchmark may fill: ``EXPLAIN ANALYZE``'s execution time, rolled back).
  The fair claim over 1,000 issuers and over one issuer, against a floor: the claim of
  format 2 (the oldest 32 pending entries on one index, whatever their issuer) on the
  same entries. Target: one issuer's fair claim no slower than 2x the floor (a 1-issuer
  outbox must not get slower); 1,000 issuers as information (the loose index scan visits
  every issuer with pending entries: 2 index steps each).
* **upgrade**: a format-2 ledger file of 1,000,000 accepted entries (quick: 100,000),
  records of realistic size, upgraded to format 3 (the tables rebuilt in one
  transaction); the floor is a copy of the same table and its indexes (format 2's) in
  one transaction. Target: the upgrade within 3x the floor.

``python -m benchmarks --only claims``.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import tempfile
import time
from pathlib import Path

from ._common import Section, Settings, fmt, median

NAME = "claims"
LIMIT = 32
ROUNDS = 20
_OUTCOME = (
    '{"index": 0, "key": "k", "issuer": "094019245", "status": "accepted", "ok": true, '
    '"attempts": 1, "result": {"mark": "400001", "uid": '
    '"ABCDEF0123456789ABCDEF0123456789ABCDEF01", "qrCodeString": "https://x.invalid/v/abc"}, '
    '"error": null}'
)
#: Format 2's claim (0.4 before issuers): the oldest pending entries, any issuer.
_SQLITE_FLOOR = (
    "SELECT key, document, encrypted, status, ambiguous, sending, claims, outcome, failures, "
    "doc_fingerprint FROM entries WHERE state = 'pending' AND available_at <= ? AND "
    "document IS NOT NULL ORDER BY available_at LIMIT ?"
)
_POSTGRES_FLOOR = """
WITH fresh AS (
    SELECT id FROM invoicing_outbox WHERE state = 'pending' AND available_at <= now()
    ORDER BY available_at, id LIMIT $1 FOR UPDATE SKIP LOCKED
), stale AS (
    SELECT id FROM invoicing_outbox WHERE state = 'in_flight' AND lease_until < now()
    ORDER BY lease_until LIMIT $1 FOR UPDATE SKIP LOCKED
), chosen AS (
    SELECT id FROM fresh UNION SELECT id FROM stale LIMIT $1
)
UPDATE invoicing_outbox AS o SET state = 'in_flight', lease = $2,
    lease_until = now() + make_interval(secs => $3), claims = o.claims + 1, updated_at = now()
FROM chosen WHERE o.id = chosen.id
RETURNING o.id
"""


def _sqlite_file(path: Path, *, version: int) -> sqlite3.Connection:
    from invoicing_async._durable import _schema  # noqa: PLC0415

    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("BEGIN")
    for step in _schema.SQLITE_STEPS[:version]:
        for statement in step:
            connection.execute(statement)
    connection.execute(f"PRAGMA user_version = {version}")
    connection.execute("COMMIT")
    return connection


def _sqlite_claims(folder: Path, entries: int, issuers: int) -> tuple[float, float]:
    """Median ms of the fair claim (format 3) and of format 2's claim, same entries."""
    from invoicing_async._durable.sqlite import _fair  # noqa: PLC0415

    times: dict[int, float] = {}
    for version in (3, 2):
        path = folder / f"claims-{issuers}-{version}.db"
        connection = _sqlite_file(path, version=version)
        rows = ((f"id:{n}", f"9{n % issuers:08d}", 1000.0 + n / 1000) for n in range(entries))
        columns = "key, issuer" if version == 3 else "key"
        marks = "?, ?" if version == 3 else "?"
        connection.execute("BEGIN")
        connection.executemany(
            f"INSERT INTO entries ({columns}, state, document, available_at, updated_at) "  # noqa: S608
            f"VALUES ({marks}, 'pending', x'7b7d', ?, 0)",
            (row if version == 3 else (row[0], row[2]) for row in rows),
        )
        connection.execute("COMMIT")
        connection.execute("ANALYZE")
        now = time.time()
        samples = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            if version == 3:
                _fair(connection, LIMIT, now)
            else:
                connection.execute(_SQLITE_FLOOR, (now, LIMIT)).fetchall()
            samples.append((time.perf_counter() - started) * 1000)
        times[version] = median(samples)
        connection.close()
    return times[3], times[2]


async def _postgres_claims(dsn: str, entries: int, issuers: int) -> tuple[float, float]:
    """Median execution ms (EXPLAIN ANALYZE, rolled back) of the fair claim and the floor."""
    import asyncpg  # noqa: PLC0415

    from invoicing_async._durable import _schema  # noqa: PLC0415
    from invoicing_async._durable import postgres as _postgres_outbox  # noqa: PLC0415

    connection = await asyncpg.connect(dsn)
    try:
        table = _schema.TABLE
        await connection.execute(
            f"DROP TABLE IF EXISTS {table}, {_schema.VERSIONS}, {_schema.DEFERRALS}"
        )
        async with connection.transaction():
            await _schema.upgrade_postgres(connection, lock_timeout=5)
        await connection.execute(
            f"INSERT INTO {table} (key, issuer, document, available_at) SELECT 'id:' || n, "  # noqa: S608
            f"'9' || lpad((n % {issuers})::text, 8, '0'), '\\x7b7d'::bytea, "
            "now() - interval '1 hour' + n * interval '1 ms' "
            f"FROM generate_series(1, {entries}) n"
        )
        await connection.execute(f"VACUUM ANALYZE {table}")
        times = []
        for sql in (_postgres_outbox._CLAIM, _POSTGRES_FLOOR):  # noqa: SLF001
            explain = "EXPLAIN (ANALYZE) " + sql.replace("$1", str(LIMIT)).replace(
                "$2", "'bench'"
            ).replace("$3", "30").replace("$4::text[]", "'{}'::text[]")
            samples = []
            for _ in range(ROUNDS):
                transaction = connection.transaction()
                await transaction.start()
                plan = "\n".join(row[0] for row in await connection.fetch(explain))
                await transaction.rollback()
                found = re.search(r"Execution Time: ([\d.]+) ms", plan)
                samples.append(float(found.group(1)) if found else float("nan"))
            times.append(median(samples))
        await connection.execute(
            f"DROP TABLE IF EXISTS {table}, {_schema.VERSIONS}, {_schema.DEFERRALS}"
        )
    finally:
        await connection.close()
    return times[0], times[1]


def _upgrade(folder: Path, entries: int) -> tuple[float, float, float]:
    """Seconds to upgrade a format-2 file of ``entries`` to 3; the floor; its size (MB)."""
    from invoicing_async._durable._schema import upgrade_sqlite  # noqa: PLC0415

    path = folder / "upgrade.db"
    connection = _sqlite_file(path, version=2)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("BEGIN")
    connection.executemany(
        "INSERT INTO entries (key, state, status, final, outcome, updated_at) "
        "VALUES (?, 'done', 'accepted', 1, ?, 1.0)",
        ((f"id:094019245-A-{n}", _OUTCOME) for n in range(entries)),
    )
    connection.execute("COMMIT")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size / 1e6
    started = time.perf_counter()
    connection.execute("BEGIN")
    connection.execute("CREATE TABLE copy AS SELECT * FROM entries")
    connection.execute("CREATE UNIQUE INDEX copy_key ON copy (key)")
    connection.execute("CREATE INDEX copy_open ON copy (state, available_at) WHERE state != 'done'")
    connection.execute("COMMIT")
    floor = time.perf_counter() - started
    connection.execute("DROP TABLE copy")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    started = time.perf_counter()
    upgrade_sqlite(connection)
    seconds = time.perf_counter() - started
    connection.close()
    return seconds, floor, size


def _claim_row(
    section: Section, backend: str, entries: int, issuers: int, times: tuple[float, float]
) -> None:
    """One claim's row: the fair claim against format 2's; one issuer's is a target."""
    fair, floor = times
    ratio = fair / floor if floor else float("nan")
    target = "(information)"
    if issuers == 1:
        what = f"claims: {backend}, 1 issuer ÷ format 2's claim"
        target = section.check(what, ratio, 2, higher=False)
    section.rows.append(
        [
            f"{backend} claim of {LIMIT}, {entries:,} pending, {issuers:,} issuer(s)",
            f"{fmt(fair, 2)} ms",
            f"{fmt(floor, 2)} ms",
            f"{ratio:.2f}x",
            target,
        ]
    )


def run(settings: Settings) -> Section:
    section = Section(
        NAME,
        "Outbox claims across issuers; the ledger file's format 3 upgrade",
        ["Measure", "Library", "Floor", "Ratio", "Target"],
    )
    entries = settings.n(100_000, 10_000)
    dsn = os.environ.get("INVOICING_BENCH_POSTGRES")
    with tempfile.TemporaryDirectory(prefix="invoicing-claims-") as work:
        folder = Path(work)
        for issuers in (1, 1000):
            _claim_row(
                section, "SQLite", entries, issuers, _sqlite_claims(folder, entries, issuers)
            )
        for issuers in (1, 1000) if dsn else ():
            times = asyncio.run(_postgres_claims(str(dsn), entries, issuers))
            _claim_row(section, "PostgreSQL", entries, issuers, times)
        if not dsn:
            section.notes.append(
                "PostgreSQL claims: set INVOICING_BENCH_POSTGRES to a database the benchmark "
                "may fill (its invoicing_outbox tables are dropped and made again)."
            )
        upgraded = settings.n(1_000_000, 100_000)
        seconds, floor, size = _upgrade(folder, upgraded)
    section.rows.append(
        [
            f"upgrade to format 3, {upgraded:,} entries ({size:.0f} MB)",
            f"{seconds:.2f} s",
            f"{floor:.2f} s",
            f"{seconds / floor:.2f}x",
            section.check(
                "claims: format 3 upgrade ÷ a copy of the table", seconds / floor, 3, higher=False
            ),
        ]
    )
    section.notes.append(
        "Claim floor: format 2's claim (the oldest pending entries on one index, whatever "
        "their issuer) over the same entries. Upgrade floor: a copy of the entries table "
        "and its indexes, committed in one transaction."
    )
    return section
