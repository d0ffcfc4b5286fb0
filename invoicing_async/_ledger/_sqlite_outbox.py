"""The outbox on one machine: the SQLite ledger file holds the documents too.

One worker at a time (the file's lock); any process may enqueue. A worker starting
puts back what a dead predecessor held: with the lock, no one else is sending.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ._enqueue import UPSERT_SET
from ._store import Claim, Settlement, make_claim

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

    from ._enqueue import Ready
    from ._sqlite_file import LedgerFile
    from ._sqlite_ledger import Ledger

__all__ = ["SqliteStore", "insert", "worker_store"]

_INSERT = (
    "INSERT INTO entries (key, state, document, encrypted, doc_fingerprint, available_at, "  # noqa: S608
    "updated_at) VALUES (?, 'pending', ?, ?, ?, 0, ?) ON CONFLICT (key) DO UPDATE SET "
    + UPSERT_SET.format(t="entries")
    + ", available_at = 0, updated_at = excluded.updated_at"
)

# A final refusal of content replaced while in flight (enqueued again, changed) is not
# final for the new content: the entry goes back to be sent (see _postgres_outbox._SETTLE).
_STALE = "(:fingerprint IS NOT NULL AND doc_fingerprint IS NOT :fingerprint)"
_SETTLE = (
    f"UPDATE entries SET state = CASE WHEN {_STALE} THEN 'pending' ELSE :state END, "  # noqa: S608
    f"status = :status, final = :final AND NOT {_STALE}, "
    "ambiguous = ambiguous OR :ambiguous, sending = 0, fingerprint = :fingerprint, "
    "attempts = :attempts, outcome = :outcome, available_at = :available_at, lease = NULL, "
    "updated_at = :now WHERE key = :key AND lease = :lease AND state = 'in_flight'"
)


def insert(connection: sqlite3.Connection, documents: Sequence[Ready]) -> None:
    """Insert (or re-enqueue) documents on ``connection``, in its transaction."""
    now = time.time()
    connection.executemany(
        _INSERT,
        [(d.key, d.body, int(d.encrypted), d.fingerprint, now) for d in documents],
    )


class SqliteStore:
    """The worker's side of a SQLite outbox (see :class:`~._store.Store`)."""

    def __init__(self, file: LedgerFile) -> None:
        self._file = file

    async def recover(self) -> None:
        """Put back what a dead worker held (call with the lock held)."""
        await self._file.call(
            lambda c: c.execute(
                "UPDATE entries SET state = 'pending', lease = NULL WHERE state = 'in_flight' "
                "AND lease IS NOT NULL"
            )
        )

    async def claim(self, limit: int, lease: str, seconds: float) -> list[Claim]:  # noqa: ARG002
        def claim(c: sqlite3.Connection) -> list[Any]:
            now = time.time()
            rows = c.execute(
                "SELECT key, document, encrypted, status, ambiguous, sending, claims, outcome "
                "FROM entries WHERE state = 'pending' AND available_at <= ? AND document IS "
                "NOT NULL ORDER BY available_at LIMIT ?",
                (now, limit),
            ).fetchall()
            c.executemany(
                "UPDATE entries SET state = 'in_flight', lease = ?, claims = claims + 1, "
                "updated_at = ? WHERE key = ?",
                [(lease, now, row[0]) for row in rows],
            )
            return rows

        return [
            make_claim(
                key,
                lease,
                key=key,
                document=document,
                encrypted=bool(encrypted),
                status=status,
                maybe_committed=bool(ambiguous or sending),
                claims=claims + 1,
                outcome=outcome,
            )
            for key, document, encrypted, status, ambiguous, sending, claims, outcome in (
                await self._file.call(claim)
            )
        ]

    async def extend(self, leases: Sequence[str], seconds: float) -> None:
        """Nothing to extend: the file's lock keeps other workers out."""

    async def mark_sending(self, items: Sequence[tuple[Any, str]]) -> set[Any]:
        now = time.time()

        def mark(c: sqlite3.Connection) -> set[Any]:
            done = set()
            for key, lease in items:
                cursor = c.execute(
                    "UPDATE entries SET sending = 1, updated_at = ? WHERE key = ? AND "
                    "lease = ? AND state = 'in_flight'",
                    (now, key, lease),
                )
                if cursor.rowcount:
                    done.add(key)
            return done

        return await self._file.call(mark)

    async def settle(self, items: Sequence[Settlement]) -> set[Any]:
        now = time.time()

        def settle(c: sqlite3.Connection) -> set[Any]:
            done = set()
            for s in items:
                cursor = c.execute(
                    _SETTLE,
                    {
                        "state": s.state,
                        "status": s.status,
                        "final": int(s.final),
                        "ambiguous": int(s.ambiguous),
                        "fingerprint": s.fingerprint,
                        "attempts": s.attempts,
                        "outcome": s.outcome,
                        "available_at": now + s.delay,
                        "now": now,
                        "key": s.id,
                        "lease": s.lease,
                    },
                )
                if cursor.rowcount:
                    done.add(s.id)
            return done

        return await self._file.call(settle)

    async def release(self, leases: Sequence[str], delay: float) -> None:
        now = time.time()
        await self._file.call(
            lambda c: c.executemany(
                "UPDATE entries SET state = 'pending', lease = NULL, available_at = ?, "
                "updated_at = ? WHERE lease = ? AND state = 'in_flight'",
                [(now + delay, now, lease) for lease in leases],
            )
        )

    async def remaining(self) -> int:
        rows = await self._file.call(
            lambda c: c.execute(
                "SELECT count(*) FROM entries WHERE state != 'done' AND document IS NOT NULL"
            ).fetchone()
        )
        return int(rows[0])


async def worker_store(ledger: Ledger) -> SqliteStore:
    """The store of the one worker sending from ``ledger``'s file (its lock taken).

    The caller gives the lock back with the ledger's ``_release`` when the worker ends.
    """
    await ledger._acquire()  # noqa: SLF001  (the ledger package's own file)
    store = SqliteStore(ledger._file)  # noqa: SLF001
    await store.recover()
    return store
