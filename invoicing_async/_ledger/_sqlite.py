"""The embedded ledger: one SQLite file per job (or per machine, as an outbox).

A batch given ``journal="batch.db"`` looks documents up by identity a chunk at a time
(an indexed query: nothing is loaded into memory), records ``sending`` before each
first request (waiting for its commit, shared with the other documents of the same
moment) and every outcome (queued, committed with the next group). See
:mod:`._sqlfile` for the file, its lock and its writer thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invoicing_async._errors import LedgerError
from invoicing_async._outcomes import OutcomeStatus

from ._entry import IN_FLIGHT, PENDING, LedgerEntry, entry_from_row, outcome_json
from ._rules import is_final
from ._sqlfile import Insert, LedgerFile

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import AsyncIterator, Iterable, Sequence
    from types import TracebackType

    from invoicing_async._outcomes import Outcome

    from ._entry import Backend

__all__ = ["COLUMNS", "Ledger", "held", "row_entry"]

#: The columns :func:`row_entry` reads, in order.
COLUMNS = "key, state, status, final, ambiguous, sending, fingerprint, outcome, updated_at"
_LOOKUP_CHUNK = 500  # keys per query (SQLite allows 32766 parameters)
_PAGE = 500
_SENDING = Insert(
    "INSERT INTO entries (key, state, sending, updated_at) VALUES ",
    "(?, 'in_flight', 1, ?)",
    " ON CONFLICT (key) DO UPDATE SET state = 'in_flight', sending = 1, "
    "updated_at = excluded.updated_at",
)
# Only a record :meth:`Ledger.will_send` made, still as it made it.
_UNMARK = (
    "DELETE FROM entries WHERE key = ? AND state = 'in_flight' AND status IS NULL "
    "AND updated_at = ?"
)
_SETTLE = Insert(
    "INSERT INTO entries (key, state, status, final, ambiguous, fingerprint, attempts, "
    "outcome, updated_at) VALUES ",
    "(?, 'done', ?, ?, ?, ?, ?, ?, ?)",
    " ON CONFLICT (key) DO UPDATE SET state = 'done', status = excluded.status, "
    "final = excluded.final, ambiguous = entries.ambiguous OR excluded.ambiguous, "
    "sending = 0, fingerprint = excluded.fingerprint, attempts = excluded.attempts, "
    "outcome = excluded.outcome, updated_at = excluded.updated_at",
)


def row_entry(row: Sequence[Any]) -> LedgerEntry:
    """A row of :data:`COLUMNS` as an entry."""
    key, state, status, final, ambiguous, sending, fingerprint, outcome, updated = row
    return entry_from_row(
        key,
        state,
        status,
        final=bool(final),
        maybe_committed=bool(ambiguous or sending),
        fingerprint=fingerprint,
        outcome=outcome,
        updated_at=dt.datetime.fromtimestamp(updated, dt.timezone.utc),
    )


class Ledger:
    """A ledger file: what every document of a job became, by identity.

    Pass it (or just a path) as ``journal=`` to
    :meth:`~invoicing_async.InvoicingClient.submit_stream`: a batch that runs again with
    it skips what is final, re-sends what was in flight (a ``409`` then is its own
    commit) and what failed for reasons that are not the document's. One process at a
    time sends from a ledger: a second gets :class:`~invoicing_async.LedgerError` at
    once. Reading and marking entries works while a batch runs.

    The file (SQLite, WAL mode) is created readable by its owner only (0600).

    :param path: the ledger file; created if missing.
    :param durable: every commit survives a power loss (``synchronous=FULL``); with
        ``False`` commits survive a crash of the process but not of the machine.
    :param create: with ``False`` the file must exist and be a ledger: opening a
        mistyped path raises :class:`~invoicing_async.LedgerError` (reason ``missing``,
        or ``unreadable`` for a file that is not a ledger) instead of creating an empty
        ledger. For tools that read or mark an existing ledger.

    Use it as an async context manager (or :meth:`open` / :meth:`close`).

    .. versionadded:: 0.2.0
    .. versionchanged:: 0.3.0 ``create``; the ``.lock`` file beside the ledger is removed
       when the sending process lets go of it.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, durable: bool = True, create: bool = True
    ) -> None:
        self.path = Path(path)
        self.file = LedgerFile(self.path, durable=durable, create=create)
        # Documents whose sending record will_send wrote: the commit, and its time.
        self._marked: dict[str, tuple[asyncio.Future[None], float]] = {}

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    async def __aenter__(self) -> Ledger:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Open the file (creating it), off the event loop."""
        await self.file.open()

    async def close(self) -> None:
        """Commit what is queued and close; raises the write failure that stopped it."""
        await self.file.close()

    # --- reading and marking -------------------------------------------------------------

    async def get(self, key: str) -> LedgerEntry | None:
        """The entry of ``key``, or ``None``."""
        found = await self.lookup([key])
        return found.get(key)

    async def entries(
        self, status: OutcomeStatus | str | None = None
    ) -> AsyncIterator[LedgerEntry]:
        """Every entry (or those whose status is ``status``), by key, a page at a time."""
        wanted = status.value if isinstance(status, OutcomeStatus) else status
        after = ""
        while True:
            rows = await self.file.call(functools.partial(_page, after=after, status=wanted))
            for row in rows:
                yield row_entry(row)
            if len(rows) < _PAGE:
                return
            after = rows[-1][0]

    async def counts(self) -> dict[str, int]:
        """How many entries have each status (``pending``, ``in_flight``, outcomes)."""
        rows = await self.file.call(
            lambda c: c.execute(
                "SELECT CASE WHEN state = 'done' THEN status ELSE state END, count(*) "
                "FROM entries GROUP BY 1"
            ).fetchall()
        )
        return {str(name): int(count) for name, count in rows}

    async def retry(self, keys: Iterable[str]) -> int:
        """Mark entries for sending again (even final ones); returns how many exist.

        The next batch (or outbox worker) sends them; one that may have been committed
        keeps that knowledge, so a ``409`` is still its own commit.
        """
        keys = list(keys)
        now = time.time()
        return await self.file.call(
            lambda c: _each(
                c,
                "UPDATE entries SET state = 'pending', final = 0, available_at = 0, "
                "lease = NULL, updated_at = ? WHERE key = ? AND "
                "(state != 'in_flight' OR lease IS NULL)",
                [(now, key) for key in keys],
            )
        )

    async def forget(self, keys: Iterable[str]) -> int:
        """Delete entries; the next batch treats those documents as never seen."""
        keys = list(keys)
        return await self.file.call(
            lambda c: _each(c, "DELETE FROM entries WHERE key = ?", [(key,) for key in keys])
        )

    # --- what a batch calls --------------------------------------------------------------

    async def acquire(self) -> None:
        """Open if needed and take the lock of the one process that sends."""
        await self.file.open()
        self.file.acquire()

    def release(self) -> None:
        """Give the sender's lock back."""
        self.file.release()

    async def lookup(self, keys: Sequence[str]) -> dict[str, LedgerEntry]:
        """The entries of ``keys`` that exist (one indexed query per 500 keys)."""
        found: dict[str, LedgerEntry] = {}
        for start in range(0, len(keys), _LOOKUP_CHUNK):
            chunk = list(keys[start : start + _LOOKUP_CHUNK])
            rows = await self.file.call(functools.partial(_lookup, keys=chunk))
            for row in rows:
                found[row[0]] = row_entry(row)
        return found

    def will_send(self, keys: Sequence[str]) -> None:
        """Record ``sending`` now for documents about to be sent (never blocks).

        Called as new documents are read, so their records are committed together
        while they are prepared: :meth:`sending` then finds them durable and does not
        wait. What is not sent after all is unrecorded by :meth:`unmark` when the batch
        ends; after a crash such documents are ``in_flight`` like those really sent,
        which is why a batch calls this only when ``resend_ambiguous`` lets it re-send
        them (with ``False``, each is recorded right before its request, so that only
        documents really in flight end ``unknown``).
        """
        now = time.time()
        committed = self.file.write_durable(_SENDING, [(key, now) for key in keys])
        for key in keys:
            self._marked[key] = (committed, now)

    async def sending(self, key: str, index: int) -> None:  # noqa: ARG002
        """Record that a request for ``key`` is about to leave; returns once durable."""
        marked = self._marked.pop(key, None)
        if marked is None:
            committed = self.file.write_durable(_SENDING, [(key, time.time())])
        else:
            committed = marked[0]
        if not committed.done():
            await asyncio.shield(committed)
        committed.result()

    def unmark(self) -> None:
        """Remove the records of documents marked by :meth:`will_send` but never sent."""
        marked, self._marked = self._marked, {}
        for key, (_committed, when) in marked.items():
            self.file.write(_UNMARK, (key, when))

    def settled(self, outcome: Outcome, fingerprint: str | None) -> None:
        """Record an outcome: queued, committed with the next group (never blocks)."""
        self._marked.pop(outcome.key, None)
        final = is_final(outcome, fingerprint)
        self.file.write(
            _SETTLE,
            (
                outcome.key,
                outcome.status.value,
                int(final),
                int(outcome.status is OutcomeStatus.UNKNOWN),
                fingerprint if final else None,
                outcome.attempts,
                outcome_json(outcome),
                time.time(),
            ),
        )

    async def flush(self) -> None:
        """Wait until every record so far is committed."""
        await self.file.flush()


@contextlib.asynccontextmanager
async def held(
    journal: str | os.PathLike[str] | Ledger | Backend | None,
) -> AsyncIterator[Backend | None]:
    """The ledger a batch sends from, for the batch's life.

    A path is opened as a :class:`Ledger` and closed after; a :class:`Ledger` is opened
    if the caller did not, and locked while the batch runs. Everything recorded is
    committed before the batch ends normally; a write failure then raises.
    """
    if isinstance(journal, (str, os.PathLike)):
        journal = Ledger(journal)
    if not isinstance(journal, Ledger):  # no ledger, or an outbox worker's claims
        yield journal
        if journal is not None:
            await journal.flush()
        return
    close = not journal.file.is_open  # a ledger the caller opened stays open
    try:
        await journal.acquire()
    except BaseException:
        if close:
            with contextlib.suppress(LedgerError):
                await journal.close()
        raise
    try:
        yield journal
        journal.unmark()
        await journal.flush()
    except BaseException:
        with contextlib.suppress(LedgerError):
            journal.unmark()
        journal.release()
        if close:
            with contextlib.suppress(LedgerError):  # the failure is already on its way
                await journal.close()
        raise
    journal.release()
    if close:
        await journal.close()


def _lookup(connection: sqlite3.Connection, keys: list[str]) -> list[Any]:
    marks = ",".join("?" * len(keys))
    return connection.execute(
        f"SELECT {COLUMNS} FROM entries WHERE key IN ({marks})",  # noqa: S608  (only marks)
        keys,
    ).fetchall()


def _page(connection: sqlite3.Connection, after: str, status: str | None) -> list[Any]:
    where = "key > ?"
    args: list[Any] = [after]
    if status in (PENDING, IN_FLIGHT):
        where += " AND state = ?"
        args.append(status)
    elif status is not None:
        where += " AND state = 'done' AND status = ?"
        args.append(status)
    return connection.execute(
        f"SELECT {COLUMNS} FROM entries WHERE {where} ORDER BY key LIMIT {_PAGE}",  # noqa: S608
        args,
    ).fetchall()


def _each(connection: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> int:
    return sum(connection.execute(sql, row).rowcount for row in rows)
