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

A later format appends a step; a store of any earlier format opens, is upgraded, and
resumes with its entries. A newer format than this version knows is refused
(``LedgerError``, reason ``unreadable``).

Formats:

1. the ledger and outbox of 0.2 and 0.3 (never change these steps: they are history);
2. ``failures``: the rounds an outbox entry failed against its budget (0.4);
3. ``issuer``: a document's identity is its issuer and its key (0.4). Entries and
   deferrals are unique by ``(key, issuer)`` (in that order: a key alone, as
   ``ledger show KEY`` asks, is a prefix of the index), ``issuer`` is ``''`` for a
   document that names none, and the fair claim across issuers has its index. Rows
   written before get ``''``, which matches a document of *any* issuer (a 0.3 store
   served one issuer): the first document that names an issuer adopts such a row
   (:mod:`._identity`). The deferrals table, created on first use until now, is part
   of the format from here on: created in its 0.3 form if missing, then upgraded, so
   every store of format 3 has it. SQLite cannot change a primary key: the tables are
   rebuilt, in the one transaction of the upgrade, the identity being a unique index
   built after the copy (about 3x the time of a plain copy of the table).
4. ``stamp_error``: why a deferred sale's ``stamp`` hook failed, its document stored
   without the hook's changes (0.5). ``NULL`` in the rows written before (no hook
   failed).
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

__all__ = [
    "DEFERRALS",
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

#: The columns format 2 had: copied as they are when format 3 rebuilds the tables.
_ENTRY_COLUMNS = (
    "key, state, status, final, ambiguous, sending, fingerprint, attempts, claims, outcome, "
    "document, encrypted, doc_fingerprint, available_at, lease, updated_at, failures"
)
_DEFERRAL_COLUMNS = (
    "key, origin, deferred_at, reason, maybe_sent, stamped, attempts, offline_qr, detail, "
    "notified_at"
)

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
    (
        # The deferrals of 0.3, as 0.3 created them on first use (then upgraded below).
        (
            "CREATE TABLE IF NOT EXISTS deferrals (key TEXT PRIMARY KEY, origin TEXT NOT NULL, "
            "deferred_at REAL NOT NULL, reason TEXT NOT NULL, maybe_sent INTEGER NOT NULL, "
            "stamped INTEGER NOT NULL, attempts INTEGER NOT NULL, offline_qr TEXT, "
            "detail TEXT NOT NULL, notified_at REAL)"
        ),
        """CREATE TABLE entries_3 (
            key TEXT NOT NULL,
            issuer TEXT NOT NULL DEFAULT '',
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
            updated_at REAL NOT NULL,
            failures INTEGER NOT NULL DEFAULT 0
        )""",
        f"INSERT INTO entries_3 ({_ENTRY_COLUMNS}) SELECT {_ENTRY_COLUMNS} FROM entries",  # noqa: S608
        "DROP TABLE entries",
        "ALTER TABLE entries_3 RENAME TO entries",
        # The identity's index built once the rows are in (sorted once, not row by row).
        "CREATE UNIQUE INDEX entries_identity ON entries (key, issuer)",
        "CREATE INDEX entries_open ON entries (state, available_at) WHERE state != 'done'",
        "CREATE INDEX entries_claim ON entries (issuer, available_at) WHERE state = 'pending'",
        (
            "CREATE TABLE deferrals_3 (key TEXT NOT NULL, issuer TEXT NOT NULL DEFAULT '', "
            "origin TEXT NOT NULL, deferred_at REAL NOT NULL, reason TEXT NOT NULL, "
            "maybe_sent INTEGER NOT NULL, stamped INTEGER NOT NULL, attempts INTEGER NOT NULL, "
            "offline_qr TEXT, detail TEXT NOT NULL, notified_at REAL, PRIMARY KEY (key, issuer))"
        ),
        (
            f"INSERT INTO deferrals_3 ({_DEFERRAL_COLUMNS}) SELECT {_DEFERRAL_COLUMNS} "  # noqa: S608
            "FROM deferrals"
        ),
        "DROP TABLE deferrals",
        "ALTER TABLE deferrals_3 RENAME TO deferrals",
        "CREATE INDEX deferrals_due ON deferrals (origin, deferred_at) WHERE notified_at IS NULL",
    ),
    ("ALTER TABLE deferrals ADD COLUMN stamp_error TEXT",),
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
#: The deferred sales of tills beside the outbox (part of the format from 3 on).
DEFERRALS = f"{TABLE}_deferrals"

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
    (
        # The deferrals of 0.3, as 0.3 created them on first use (then upgraded below).
        f"""CREATE TABLE IF NOT EXISTS {DEFERRALS} (
            key text PRIMARY KEY, origin text NOT NULL, deferred_at double precision NOT NULL,
            reason text NOT NULL, maybe_sent boolean NOT NULL, stamped boolean NOT NULL,
            attempts integer NOT NULL, offline_qr text, detail text NOT NULL,
            notified_at double precision
        )""",
        f"""CREATE INDEX IF NOT EXISTS {DEFERRALS}_due ON {DEFERRALS} (origin, deferred_at)
            WHERE notified_at IS NULL""",
        f"ALTER TABLE {TABLE} ADD COLUMN issuer text NOT NULL DEFAULT ''",
        f"ALTER TABLE {TABLE} DROP CONSTRAINT {TABLE}_key_key",
        f"ALTER TABLE {TABLE} ADD CONSTRAINT {TABLE}_identity UNIQUE (key, issuer)",
        # The fair claim's loose index scan: the next issuer with pending entries, and
        # each issuer's oldest available ones.
        (
            f"CREATE INDEX {TABLE}_claim ON {TABLE} (issuer, available_at, id) "
            "WHERE state = 'pending'"
        ),
        f"ALTER TABLE {DEFERRALS} ADD COLUMN issuer text NOT NULL DEFAULT ''",
        f"ALTER TABLE {DEFERRALS} DROP CONSTRAINT {DEFERRALS}_pkey",
        f"ALTER TABLE {DEFERRALS} ADD PRIMARY KEY (key, issuer)",
    ),
    (f"ALTER TABLE {DEFERRALS} ADD COLUMN stamp_error text",),
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
