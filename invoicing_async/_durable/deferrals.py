"""Deferred sales in an outbox: the document as an entry, the deferral beside it.

A sale deferred by :meth:`~invoicing_async.InvoicingClient.submit_or_defer` is an
ordinary outbox entry (the outbox's workers send it, the drainer among them) plus a row
in a table of its own: when and why it was deferred, whether its first attempt may have
reached the provider, whether it was stamped (and why the ``stamp`` hook's document is
not the one stored, if it failed), its offline QR url, and whether the application has
been told its final outcome. Both are written in one transaction, so a
sale is deferred whole or not at all.

The identity rule is kept here, where the document is stored: an entry that may have
been sent (in flight, or marked ambiguous) keeps its stored document, whatever a new
deferral brings; only a document certainly not sent is replaced.

SQLite (the outbox file, through its writer thread) and PostgreSQL (the outbox table's
database, in the same transaction as the entry) store the same columns. The table is
part of the outbox's format (:mod:`._schema`, from format 3): a deferral is keyed by
its document's identity, issuer and key, as the entry is (a till of many shops defers
two shops' ``A/1`` as two sales).

A parked entry (a poison document, :mod:`invoicing_async._client.worker`) is a sale not
transmitted: it counts in the backlog, and is counted apart as needing attention.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from invoicing_async._core.entries import IN_FLIGHT
from invoicing_async._send.journal import Ref

from ._identity import adopt_postgres, adopt_sqlite
from ._schema import DEFERRALS
from .ledger import COLUMNS, row_entry
from .postgres import _COLUMNS, TABLE, _entry
from .sqlite import insert

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

    from invoicing_async._core.entries import LedgerEntry

    from ._sqlitefile import LedgerFile
    from .enqueue import Ready
    from .postgres import PostgresStore

__all__ = ["DeferralRecord", "Deferrals", "PostgresDeferrals", "SqliteDeferrals", "Stored"]

_FIELDS = (
    "key, origin, deferred_at, reason, maybe_sent, stamped, attempts, offline_qr, detail, "
    "issuer, stamp_error"
)
_WIDTH = 11  # the fields of a deferral, in a row that goes on with its entry's
_ENTRY = ", ".join(f"e.{name.strip()}" for name in COLUMNS.split(","))
_DEFERRAL = ", ".join(f"d.{name.strip()}" for name in _FIELDS.split(","))


@attrs.frozen
class DeferralRecord:
    """What is stored of one deferral (see :class:`~invoicing_async.DeferredReceipt`)."""

    key: str
    origin: str
    deferred_at: float  # seconds since the epoch
    reason: str
    maybe_sent: bool
    stamped: bool
    attempts: int
    offline_qr: str | None = attrs.field(repr=False)
    detail: str
    #: The issuer whose sale it is (``""``: the document names none).
    issuer: str = ""
    #: Why the ``stamp`` hook's document is not the one stored (``None``: it did not fail).
    stamp_error: str | None = None

    @property
    def ref(self) -> Ref:
        """The deferred document's identity."""
        return Ref(self.issuer, self.key)

    def row(self) -> tuple[Any, ...]:
        return (
            self.key,
            self.origin,
            self.deferred_at,
            self.reason,
            self.maybe_sent,
            self.stamped,
            self.attempts,
            self.offline_qr,
            self.detail,
            self.issuer,
            self.stamp_error,
        )

    @classmethod
    def of(cls, row: Sequence[Any]) -> DeferralRecord:
        key, origin, at, reason, maybe_sent, stamped, attempts, offline_qr, detail = row[:9]
        return cls(
            key, origin, float(at), reason, bool(maybe_sent), bool(stamped), int(attempts),
            offline_qr, detail, row[9], row[10],
        )  # fmt: skip


@attrs.frozen
class Stored:
    """What :meth:`Deferrals.defer` did.

    ``deferral`` is the deferral in force: ``deferred``, or an earlier one of the same
    document still waiting (nothing written: its stored document stays). ``final`` is the
    entry when it is final (the provider holds the document, or refused this content):
    nothing is written then either. ``fresh``: this deferral was written.
    """

    deferral: DeferralRecord
    final: LedgerEntry | None = None
    fresh: bool = False


class Deferrals(Protocol):
    """Where deferred sales are kept: the outbox's own storage."""

    async def setup(self) -> None:
        """Create the deferrals table if missing (the outbox is set up)."""

    async def defer(self, ready: Ready, deferred: DeferralRecord) -> Stored:
        """Store a deferred sale (see :class:`Stored`)."""

    async def due(self, origin: str, limit: int) -> list[tuple[DeferralRecord, LedgerEntry]]:
        """Deferrals of ``origin`` whose entry is done and not yet told, oldest first."""

    async def acknowledge(self, refs: Sequence[Ref]) -> None:
        """The application has been told these outcomes."""

    async def backlog(self) -> tuple[int, float | None, int]:
        """Deferred sales not yet done: how many, when the oldest was deferred.

        ``(count, oldest epoch seconds, parked)``: parked ones count in ``count`` too.
        """

    async def get(self, ref: Ref) -> DeferralRecord | None:
        """The deferral of ``ref``, if the document was ever deferred."""

    async def rewind(self) -> None:
        """Make every deferred sale waiting to be sent due, in the order they were deferred.

        A failed attempt puts an entry back for later (its backoff): once the provider
        answers again, the backlog goes oldest first instead. An entry with failed
        rounds against its budget keeps its backoff: a poison document must not come
        back each time the provider answers another.
        """


# --- SQLite ------------------------------------------------------------------------------

#: A deferral's entry (both backends).
_JOIN = "e.key = d.key AND e.issuer = d.issuer"
#: Deferred sales not transmitted: how many, the oldest, how many parked (both backends).
_BACKLOG = (
    "SELECT count(*), min(d.deferred_at), sum(CASE WHEN e.state = 'parked' THEN 1 ELSE 0 END) "
    "FROM {deferrals} d JOIN {entries} e ON " + _JOIN + " WHERE e.state != 'done'"
)
_SQLITE_UPSERT = (
    f"INSERT INTO deferrals ({_FIELDS}, notified_at) "  # noqa: S608
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL) "
    "ON CONFLICT (key, issuer) DO UPDATE SET origin = excluded.origin, "
    "deferred_at = excluded.deferred_at, reason = excluded.reason, "
    "maybe_sent = excluded.maybe_sent, stamped = excluded.stamped, "
    "attempts = excluded.attempts, offline_qr = excluded.offline_qr, "
    "detail = excluded.detail, stamp_error = excluded.stamp_error, notified_at = NULL"
)


class SqliteDeferrals:
    """Deferrals in the outbox's SQLite file, written by its writer thread."""

    def __init__(self, file: LedgerFile) -> None:
        self._file = file

    async def setup(self) -> None:
        """Nothing to create: the file's format has the table (:mod:`._schema`)."""

    async def defer(self, ready: Ready, deferred: DeferralRecord) -> Stored:
        def defer(c: sqlite3.Connection) -> Stored:
            adopt_sqlite(c, [ready.ref])
            found = c.execute(
                f"SELECT {COLUMNS} FROM entries WHERE key = ? AND issuer = ?",  # noqa: S608
                ready.ref[::-1],
            ).fetchone()
            entry = row_entry(found) if found is not None else None
            earlier = c.execute(
                f"SELECT {_FIELDS}, notified_at FROM deferrals WHERE key = ? AND issuer = ?",  # noqa: S608
                ready.ref[::-1],
            ).fetchone()
            verdict = _verdict(entry, earlier, deferred)
            if isinstance(verdict, Stored):
                return verdict
            if verdict is _STORE:
                insert(c, [ready])
            if deferred.maybe_sent or verdict is _KEEP:
                c.execute(
                    "UPDATE entries SET ambiguous = 1 WHERE key = ? AND issuer = ?",
                    ready.ref[::-1],
                )
            kept = _kept(deferred, verdict)
            c.execute(_SQLITE_UPSERT, kept.row())
            return Stored(kept, fresh=True)

        return await self._file.call(defer)

    async def due(self, origin: str, limit: int) -> list[tuple[DeferralRecord, LedgerEntry]]:
        rows = await self._file.call(
            lambda c: c.execute(
                f"SELECT {_DEFERRAL}, {_ENTRY} FROM deferrals d "  # noqa: S608
                f"JOIN entries e ON {_JOIN} WHERE d.notified_at IS NULL AND "
                "d.origin = ? AND e.state = 'done' ORDER BY d.deferred_at LIMIT ?",
                (origin, limit),
            ).fetchall()
        )
        return [(DeferralRecord.of(row), row_entry(row[_WIDTH:])) for row in rows]

    async def acknowledge(self, refs: Sequence[Ref]) -> None:
        now = time.time()
        await self._file.call(
            lambda c: c.executemany(
                "UPDATE deferrals SET notified_at = ? WHERE key = ? AND issuer = ?",
                [(now, key, issuer) for issuer, key in refs],
            )
        )

    async def backlog(self) -> tuple[int, float | None, int]:
        sql = _BACKLOG.format(deferrals="deferrals", entries="entries")
        count, oldest, parked = await self._file.call(lambda c: c.execute(sql).fetchone())
        return int(count), oldest, int(parked or 0)

    async def get(self, ref: Ref) -> DeferralRecord | None:
        row = await self._file.call(
            lambda c: c.execute(
                f"SELECT {_FIELDS} FROM deferrals WHERE key = ? AND issuer = ?",  # noqa: S608
                ref[::-1],
            ).fetchone()
        )
        return DeferralRecord.of(row) if row is not None else None

    async def rewind(self) -> None:
        await self._file.call(
            lambda c: c.execute(
                "UPDATE entries SET available_at = (SELECT d.deferred_at FROM deferrals d "
                "WHERE d.key = entries.key AND d.issuer = entries.issuer) WHERE state = 'pending' "
                "AND failures = 0 AND (key, issuer) IN "
                "(SELECT key, issuer FROM deferrals WHERE notified_at IS NULL)"
            )
        )


# --- what both backends decide the same way ------------------------------------------------

#: Store the new document (never sent, or nothing stored yet).
_STORE = "store"
#: Keep the stored document: a request for it may be out (the identity rule).
_KEEP = "keep"


def _verdict(
    entry: LedgerEntry | None, earlier: Sequence[Any] | None, deferred: DeferralRecord
) -> str | Stored:
    """What a new deferral does to what is stored (see :meth:`Deferrals.defer`).

    A :class:`Stored` to return without writing: the entry is final, or the same
    document is already deferred and waiting. Else :data:`_KEEP` or :data:`_STORE`.
    """
    if entry is not None and entry.final:
        return Stored(deferred, final=entry)
    if entry is not None and earlier is not None and earlier[_WIDTH] is None:
        return Stored(DeferralRecord.of(earlier))
    if entry is not None and (entry.maybe_committed or entry.status == IN_FLIGHT):
        return _KEEP
    return _STORE


def _kept(deferred: DeferralRecord, verdict: str) -> DeferralRecord:
    """The deferral to store: a kept document may have been sent, and is not stamped."""
    if verdict is _KEEP:
        return attrs.evolve(deferred, maybe_sent=True, stamped=False, stamp_error=None)
    return deferred


# --- PostgreSQL ----------------------------------------------------------------------------

_PG_TABLE = DEFERRALS
_PG_UPSERT = (
    f"INSERT INTO {_PG_TABLE} ({_FIELDS}, notified_at) "  # noqa: S608
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL) "
    "ON CONFLICT (key, issuer) DO UPDATE SET "
    "origin = excluded.origin, deferred_at = excluded.deferred_at, reason = excluded.reason, "
    "maybe_sent = excluded.maybe_sent, stamped = excluded.stamped, "
    "attempts = excluded.attempts, offline_qr = excluded.offline_qr, "
    "detail = excluded.detail, stamp_error = excluded.stamp_error, notified_at = NULL"
)


class PostgresDeferrals:
    """Deferrals in the outbox table's database, beside ``invoicing_outbox``.

    Every statement runs through the store's :meth:`~._postgres_outbox.PostgresStore.run`:
    a connection of its own, failures typed (``LedgerError``, ``unavailable`` while the
    database restarts).
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def setup(self) -> None:
        """The outbox's format has the table (:mod:`._schema`): set the outbox up."""
        await self._store.setup()

    async def defer(self, ready: Ready, deferred: DeferralRecord) -> Stored:
        async def defer(connection: Any) -> Stored:
            await adopt_postgres(connection, [ready.ref])
            found = await connection.fetchrow(
                f"SELECT {_COLUMNS} FROM {TABLE} WHERE key = $1 AND issuer = $2 FOR UPDATE",  # noqa: S608
                *ready.ref[::-1],
            )
            entry = _entry(found) if found is not None else None
            earlier = await connection.fetchrow(
                f"SELECT {_FIELDS}, notified_at FROM {_PG_TABLE} WHERE key = $1 AND issuer = $2",  # noqa: S608
                *ready.ref[::-1],
            )
            verdict = _verdict(entry, earlier, deferred)
            if isinstance(verdict, Stored):
                return verdict
            if verdict is _STORE:
                await self._store.insert([ready], connection)
            if deferred.maybe_sent or verdict is _KEEP:
                await connection.execute(
                    f"UPDATE {TABLE} SET ambiguous = true WHERE key = $1 AND issuer = $2",  # noqa: S608
                    *ready.ref[::-1],
                )
            kept = _kept(deferred, verdict)
            await connection.execute(_PG_UPSERT, *kept.row())
            return Stored(kept, fresh=True)

        await self._store.setup()  # before the transaction: a format check of its own
        return await self._store.run(defer, transaction=True)

    async def due(self, origin: str, limit: int) -> list[tuple[DeferralRecord, LedgerEntry]]:
        entry = ", ".join(f"e.{name.strip()}" for name in _COLUMNS.split(","))
        rows = await self._store.run(
            lambda c: c.fetch(
                f"SELECT {_DEFERRAL}, {entry} FROM {_PG_TABLE} d "  # noqa: S608
                f"JOIN {TABLE} e ON {_JOIN} WHERE d.notified_at IS NULL AND "
                "d.origin = $1 AND e.state = 'done' ORDER BY d.deferred_at LIMIT $2",
                origin,
                limit,
            )
        )
        return [(DeferralRecord.of(tuple(row)), _entry(tuple(row)[_WIDTH:])) for row in rows]

    async def acknowledge(self, refs: Sequence[Ref]) -> None:
        await self._store.run(
            lambda c: c.execute(
                f"UPDATE {_PG_TABLE} AS d SET notified_at = $3 "  # noqa: S608
                "FROM unnest($1::text[], $2::text[]) AS t(key, issuer) "
                "WHERE d.key = t.key AND d.issuer = t.issuer",
                [ref.key for ref in refs],
                [ref.issuer for ref in refs],
                time.time(),
            )
        )

    async def backlog(self) -> tuple[int, float | None, int]:
        sql = _BACKLOG.format(deferrals=_PG_TABLE, entries=TABLE)
        row = await self._store.run(lambda c: c.fetchrow(sql))
        return int(row[0]), row[1], int(row[2] or 0)

    async def get(self, ref: Ref) -> DeferralRecord | None:
        row = await self._store.run(
            lambda c: c.fetchrow(
                f"SELECT {_FIELDS} FROM {_PG_TABLE} WHERE key = $1 AND issuer = $2",  # noqa: S608
                *ref[::-1],
            )
        )
        return DeferralRecord.of(tuple(row)) if row is not None else None

    async def rewind(self) -> None:
        await self._store.run(
            lambda c: c.execute(
                f"UPDATE {TABLE} AS o SET available_at = to_timestamp(d.deferred_at) "  # noqa: S608
                f"FROM {_PG_TABLE} d WHERE d.key = o.key AND d.issuer = o.issuer "
                "AND o.state = 'pending' "
                "AND o.failures = 0 AND d.notified_at IS NULL"
            )
        )
