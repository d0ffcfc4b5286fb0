"""The formats of the ledger file and of the outbox table, as ordered upgrade steps.

Each backend's format is a list of steps: step ``n`` takes a store from format ``n`` to
``n + 1`` (format 0: nothing there yet). The format number is kept with the data
(SQLite: ``PRAGMA user_version``; PostgreSQL: the ``invoicing_outbox_schema`` table).
Opening reads it first, with a plain read that waits for nobody's lock, and runs DDL
only when the store is missing or older, so that a worker starting while an
application's transaction holds the outbox table (a long import that enqueued) starts
at once when the format is current. DDL takes locks that conflict with such a
transaction: PostgreSQL's runs under a ``lock_timeout`` and fails with a message that
says what holds the table (:mod:`._postgres_outbox`), rather than waiting behind it
while every worker restart hangs.

A later format appends a step (the next one adds the outbox's ``issuer`` column); a
store of any earlier format opens, is upgraded, and resumes with its entries. A newer
format than this version knows is refused (``LedgerError``, reason ``unreadable``).

Formats:

1. the ledger and outbox of 0.2 and 0.3 (never change these steps: they are history);
2. ``failures``: the rounds an outbox entry failed against its budget (0.4).
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

__all__ = [
    "POSTGRES_STEPS",
    "POSTGRES_VERSION",
    "SQLITE_STEPS",
    "SQLITE_VERSION",
    "TABLE",
    "VERSIONS",
    "postgres_version",
    "upgrade_postgres",
    "upgrade_sqlite",
]

#: A format's upgrade: statements run in order, in one transaction with the others.
Step = tuple[str, ...]

# --- SQLite: the ledger file (a batch's ledger, a machine's outbox) -----------------------

SQLITE_STEPS: tuple[Step, ...] = (
    (
        """CREATE TABLE IF NOT EXISTS entries (
            key TEXT PRIMARY KEY,
            state TEXT NOT NULL,
            status TEXT,
            final INTEGER NOT NULL DEFAULT 0,
            ambiguous INTEGER NOT NULL DEFAULT 0,
            sending INTEGER NOT NULL DEFAULT 0,
            fingerprint TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            claims INTEGER NOT NULL DEFAULT 0,
            outcome TEXT,
            document BLOB,
            encrypted INTEGER NOT NULL DEFAULT 1,
            doc_fingerprint TEXT,
            available_at REAL NOT NULL DEFAULT 0,
            lease TEXT,
            updated_at REAL NOT NULL
        )""",
        (
            "CREATE INDEX IF NOT EXISTS entries_open ON entries (state, available_at) "
            "WHERE state != 'done'"
        ),
    ),
    ("ALTER TABLE entries ADD COLUMN failures INTEGER NOT NULL DEFAULT 0",),
)
SQLITE_VERSION = len(SQLITE_STEPS)


def upgrade_sqlite(connection: sqlite3.Connection) -> None:
    """Bring a ledger file to :data:`SQLITE_VERSION` in one ``IMMEDIATE`` transaction.

    The format is read again under the write lock: another process may have upgraded
    the file since the caller looked.
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        found = connection.execute("PRAGMA user_version").fetchone()[0]
        for step in SQLITE_STEPS[found:]:
            for statement in step:
                connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {max(found, SQLITE_VERSION)}")
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise


# --- PostgreSQL: the outbox table -------------------------------------------------------

TABLE = "invoicing_outbox"
#: The table that records the format (one row per step run).
VERSIONS = f"{TABLE}_schema"

POSTGRES_STEPS: tuple[Step, ...] = (
    (
        f"""CREATE TABLE IF NOT EXISTS {TABLE} (
            id bigserial PRIMARY KEY,
            key text NOT NULL UNIQUE,
            state text NOT NULL DEFAULT 'pending',
            status text,
            final boolean NOT NULL DEFAULT false,
            ambiguous boolean NOT NULL DEFAULT false,
            sending boolean NOT NULL DEFAULT false,
            fingerprint text,
            attempts integer NOT NULL DEFAULT 0,
            claims integer NOT NULL DEFAULT 0,
            outcome text,
            document bytea NOT NULL,
            encrypted boolean NOT NULL DEFAULT true,
            doc_fingerprint text,
            available_at timestamptz NOT NULL DEFAULT now(),
            lease text,
            lease_until timestamptz,
            enqueued_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        )""",
        (
            f"CREATE INDEX IF NOT EXISTS {TABLE}_pending ON {TABLE} (available_at, id) "
            "WHERE state = 'pending'"
        ),
        (
            f"CREATE INDEX IF NOT EXISTS {TABLE}_leased ON {TABLE} (lease_until) "
            "WHERE state = 'in_flight'"
        ),
        f"CREATE INDEX IF NOT EXISTS {TABLE}_lease ON {TABLE} (lease) WHERE lease IS NOT NULL",
        f"CREATE TABLE IF NOT EXISTS {VERSIONS} (version integer NOT NULL)",
    ),
    (f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS failures integer NOT NULL DEFAULT 0",),
)
POSTGRES_VERSION = len(POSTGRES_STEPS)


async def postgres_version(connection: Any) -> int:
    """The outbox table's format (0: none yet), read without waiting for any lock.

    ``to_regclass`` looks the name up without locking anything, and reading the
    version table conflicts only with DDL on that table (which nothing but an upgrade
    runs), never with an application's writes to the outbox.
    """
    if await connection.fetchval("SELECT to_regclass($1) IS NULL", VERSIONS):
        return 0
    found = await connection.fetchval(f"SELECT max(version) FROM {VERSIONS}")  # noqa: S608
    return int(found or 0)


async def upgrade_postgres(connection: Any, *, lock_timeout: float) -> int:
    """Run the steps the table lacks, in the caller's transaction; the format found.

    One upgrader at a time (an advisory lock, released with the transaction); every
    lock is waited for ``lock_timeout`` seconds at most (PostgreSQL then raises
    ``lock_not_available``, 55P03, for the caller to explain).
    """
    await connection.execute(f"SET LOCAL lock_timeout = {max(1, round(lock_timeout * 1000))}")
    await connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))", TABLE)
    found = await postgres_version(connection)
    for number, step in enumerate(POSTGRES_STEPS[found:], start=found + 1):
        for statement in step:
            await connection.execute(statement)
        await connection.execute(
            f"INSERT INTO {VERSIONS} (version) VALUES ($1)",  # noqa: S608
            number,
        )
    return found
