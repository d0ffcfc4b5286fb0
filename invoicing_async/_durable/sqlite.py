"""The outbox on one machine: the SQLite ledger file holds the documents too.

One worker at a time (the file's lock); any process may enqueue. A worker starting
puts back what a dead predecessor held: with the lock, no one else is sending.

Claims are fair across issuers, as the PostgreSQL outbox's (:mod:`._postgres_outbox`):
each takes the oldest available entries of every issuer that has some, an equal share
of the claim each (at least one), found issuer by issuer on an index (a loose index
scan), never by reading every pending entry.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from invoicing_async._core.entries import PARKED

from ._identity import adopt_sqlite
from .enqueue import UPSERT_SET
from .ledger import file_of, hold
from .store import Claim, Settlement, make_claim

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

    from ._sqlitefile import LedgerFile
    from .enqueue import Ready
    from .ledger import Ledger

__all__ = ["SqliteStore", "insert", "worker_store"]

_INSERT = (
    "INSERT INTO entries (key, issuer, state, document, encrypted, doc_fingerprint, "  # noqa: S608
    "available_at, updated_at) VALUES (?, ?, 'pending', ?, ?, ?, 0, ?) "
    "ON CONFLICT (key, issuer) DO UPDATE SET "
    + UPSERT_SET.format(t="entries", now="excluded.available_at")
    + ", updated_at = excluded.updated_at"
)

# A final refusal of content replaced while in flight (enqueued again, changed) is not
# final for the new content, and a failed round is not charged to it: the entry goes
# back to be sent at once (see _postgres_outbox._SETTLE).
_STALE = "(:fingerprint IS NOT NULL AND doc_fingerprint IS NOT :fingerprint)"
_FRESH = f"({_STALE} OR (:state != 'done' AND doc_fingerprint IS NOT :content))"
_SETTLE = (
    f"UPDATE entries SET state = CASE WHEN {_FRESH} THEN 'pending' ELSE :state END, "  # noqa: S608
    f"status = :status, final = :final AND NOT {_STALE}, "
    "ambiguous = ambiguous OR :ambiguous, sending = 0, fingerprint = :fingerprint, "
    f"attempts = :attempts, outcome = :outcome, "
    f"failures = CASE WHEN {_FRESH} THEN 0 ELSE :failures END, "
    f"available_at = CASE WHEN {_FRESH} THEN :now ELSE :available_at END, lease = NULL, "
    "updated_at = :now WHERE key = :key AND issuer = :issuer AND lease = :lease "
    "AND state = 'in_flight'"
)
#: The columns of a claimed row, as :func:`_claimed` reads them.
_CLAIMED = (
    "key, issuer, document, encrypted, status, ambiguous, sending, claims, outcome, failures, "
    "doc_fingerprint"
)
#: The issuers to serve: of every issuer with entries pending (found one index step at
#: a time), as many as the second parameter says, those whose oldest entry that may be
#: sent by the first (a time) is oldest. Plain ``?``: Python 3.12 deprecates ``?1``.
_SERVED = """
WITH RECURSIVE issuers(issuer) AS (
    SELECT min(issuer) FROM entries WHERE state = 'pending'
    UNION ALL
    SELECT (SELECT min(issuer) FROM entries WHERE state = 'pending' AND issuer > issuers.issuer)
    FROM issuers WHERE issuer IS NOT NULL
), heads(issuer, head) AS (
    SELECT issuer, (SELECT available_at FROM entries AS e WHERE e.issuer = issuers.issuer
        AND state = 'pending' AND available_at <= ? AND document IS NOT NULL
        ORDER BY available_at LIMIT 1)
    FROM issuers WHERE issuer IS NOT NULL
)
SELECT issuer FROM heads WHERE head IS NOT NULL ORDER BY head LIMIT ?
"""
#: An issuer's oldest entries that may be sent now.
_OLDEST = (
    f"SELECT {_CLAIMED}, available_at FROM entries WHERE state = 'pending' AND issuer = ? "  # noqa: S608
    "AND available_at <= ? AND document IS NOT NULL ORDER BY available_at LIMIT ?"
)


def insert(connection: sqlite3.Connection, documents: Sequence[Ready]) -> None:
    """Insert (or re-enqueue) documents on ``connection``, in its transaction.

    A document finds the entry its key had before issuers were stored (adopted).
    """
    now = time.time()
    adopt_sqlite(connection, [d.ref for d in documents])
    connection.executemany(
        _INSERT,
        [(d.key, d.issuer, d.body, int(d.encrypted), d.fingerprint, now) for d in documents],
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

    async def claim(
        self,
        limit: int,
        lease: str,
        seconds: float,  # noqa: ARG002  (the file's lock keeps other workers out)
        skip: Sequence[str] = (),
    ) -> list[Claim]:
        def claim(c: sqlite3.Connection) -> list[Any]:
            now = time.time()
            rows = _fair(c, limit, now, skip)
            c.executemany(
                "UPDATE entries SET state = 'in_flight', lease = ?, claims = claims + 1, "
                "updated_at = ? WHERE key = ? AND issuer = ?",
                [(lease, now, row[0], row[1]) for row in rows],
            )
            return rows

        return [
            make_claim(
                (row[0], row[1]),
                lease,
                key=row[0],
                issuer=row[1],
                document=row[2],
                encrypted=bool(row[3]),
                status=row[4],
                maybe_committed=bool(row[5] or row[6]),
                claims=row[7] + 1,
                outcome=row[8],
                failures=row[9],
                content=row[10],
            )
            for row in await self._file.call(claim)
        ]

    async def extend(self, leases: Sequence[str], seconds: float) -> None:
        """Nothing to extend: the file's lock keeps other workers out."""

    async def mark_sending(
        self, items: Sequence[tuple[Any, str]], sending: bool = True
    ) -> set[Any]:
        now = time.time()

        def mark(c: sqlite3.Connection) -> set[Any]:
            done = set()
            for (key, issuer), lease in items:
                cursor = c.execute(
                    "UPDATE entries SET sending = ?, updated_at = ? WHERE key = ? AND "
                    "issuer = ? AND lease = ? AND state = 'in_flight'",
                    (int(sending), now, key, issuer, lease),
                )
                if cursor.rowcount:
                    done.add((key, issuer))
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
                        "failures": s.failures,
                        "content": s.content,
                        "available_at": now + s.delay,
                        "now": now,
                        "key": s.id[0],
                        "issuer": s.id[1],
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

    async def remaining(self, skip: Sequence[str] = ()) -> int:
        marks = ",".join("?" * len(skip))
        return await self._count(
            "state IN ('pending', 'in_flight') AND document IS NOT NULL "
            f"AND issuer NOT IN ({marks})",
            tuple(skip),
        )

    async def waiting(self, issuers: Sequence[str]) -> dict[str, int]:
        marks = ",".join("?" * len(issuers))
        rows = await self._file.call(
            lambda c: c.execute(
                f"SELECT issuer, count(*) FROM entries WHERE issuer IN ({marks}) "  # noqa: S608
                "AND state IN ('pending', 'in_flight') AND document IS NOT NULL GROUP BY issuer",
                tuple(issuers),
            ).fetchall()
        )
        return {str(issuer): int(count) for issuer, count in rows}

    async def parked(self) -> int:
        return await self._count(f"state = '{PARKED}'")

    async def ping(self) -> None:
        await self._file.call(lambda c: c.execute("SELECT 1").fetchone())

    async def _count(self, where: str, parameters: tuple[Any, ...] = ()) -> int:
        rows = await self._file.call(
            lambda c: c.execute(
                f"SELECT count(*) FROM entries WHERE {where}",  # noqa: S608  (marks only)
                parameters,
            ).fetchone()
        )
        return int(rows[0])


def _fair(
    connection: sqlite3.Connection, limit: int, now: float, skip: Sequence[str] = ()
) -> list[Any]:
    """The oldest entries that may be sent, at most ``limit``, shared among the issuers.

    The ``limit`` issuers whose oldest entry is oldest (:data:`_SERVED`), but those in
    ``skip``; of each, its oldest, an equal share of ``limit`` (at least one); of those
    the oldest ``limit``. One issuer alone gets the whole claim, as before issuers.
    """
    skipped = set(skip)
    served = connection.execute(_SERVED, (now, limit + len(skipped)))
    issuers = [row[0] for row in served if row[0] not in skipped][:limit]
    share = max(1, -(-limit // max(1, len(issuers))))
    rows = [
        row
        for issuer in issuers
        for row in connection.execute(_OLDEST, (issuer, now, share)).fetchall()
    ]
    rows.sort(key=lambda row: row[-1])
    return [row[:-1] for row in rows[:limit]]


async def worker_store(ledger: Ledger) -> SqliteStore:
    """The store of the one worker sending from ``ledger``'s file (its lock taken).

    The caller gives the lock back with :func:`~._sqlite_ledger.let_go` when the worker
    ends.
    """
    await hold(ledger)
    store = SqliteStore(file_of(ledger))
    await store.recover()
    return store
