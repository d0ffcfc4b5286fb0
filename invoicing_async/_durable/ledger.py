"""The embedded ledger: one SQLite file per job (or per machine, as an outbox).

A batch given ``ledger="batch.db"`` sends through the ledger's journal
(:func:`journal`, the hooks of :mod:`invoicing_async._send.journal`): documents are looked up
by identity a chunk at a time (an indexed query: nothing is loaded into memory),
``sending`` is recorded before each first request (waiting for its commit, shared with
the other documents of the same moment) and every outcome (queued, committed with the
next group). See :mod:`._sqlite_file` for the file, its lock and its writer thread.
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

from invoicing_async._core.entries import (
    STATES,
    LedgerEntry,
    Verdict,
    decide,
    is_final,
    needs_fingerprint,
)
from invoicing_async._core.errors import LedgerError
from invoicing_async._core.outcomes import OutcomeStatus
from invoicing_async._send.journal import Ref

from ._identity import adopt_sqlite, match, one_of, who
from ._sqlitefile import Insert, LedgerFile
from .entry import entry_from_row, outcome_json

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import AsyncIterator, Iterable, Sequence
    from types import TracebackType

    from invoicing_async._core.outcomes import Outcome
    from invoicing_async._doc.document import Prepared

__all__ = ["COLUMNS", "Ledger", "file_of", "hold", "ledger_journal", "let_go", "row_entry"]

#: The columns :func:`row_entry` reads, in order.
COLUMNS = (
    "key, state, status, final, ambiguous, sending, fingerprint, outcome, updated_at, "
    "failures, available_at, issuer"
)
_LOOKUP_CHUNK = 500  # keys per query (SQLite allows 32766 parameters)
_PAGE = 500
_SENDING = Insert(
    "INSERT INTO entries (key, issuer, state, sending, updated_at) VALUES ",
    "(?, ?, 'in_flight', 1, ?)",
    " ON CONFLICT (key, issuer) DO UPDATE SET state = 'in_flight', sending = 1, "
    "updated_at = excluded.updated_at",
)
# Only a record :meth:`Ledger._will_send` made, still as it made it.
_UNMARK = (
    "DELETE FROM entries WHERE key = ? AND issuer = ? AND state = 'in_flight' "
    "AND status IS NULL AND updated_at = ?"
)
_SETTLE = Insert(
    "INSERT INTO entries (key, issuer, state, status, final, ambiguous, fingerprint, "
    "attempts, outcome, updated_at) VALUES ",
    "(?, ?, 'done', ?, ?, ?, ?, ?, ?, ?)",
    " ON CONFLICT (key, issuer) DO UPDATE SET state = 'done', status = excluded.status, "
    "final = excluded.final, ambiguous = entries.ambiguous OR excluded.ambiguous, "
    "sending = 0, fingerprint = excluded.fingerprint, attempts = excluded.attempts, "
    "outcome = excluded.outcome, updated_at = excluded.updated_at",
)


def row_entry(row: Sequence[Any]) -> LedgerEntry:
    """A row of :data:`COLUMNS` as an entry."""
    key, state, status, final, ambiguous, sending, fingerprint, outcome, updated = row[:9]
    failures, available, issuer = row[9:12]
    return entry_from_row(
        key,
        state,
        status,
        final=bool(final),
        maybe_committed=bool(ambiguous or sending),
        fingerprint=fingerprint,
        outcome=outcome,
        updated_at=dt.datetime.fromtimestamp(updated, dt.timezone.utc),
        failures=int(failures),
        available_at=dt.datetime.fromtimestamp(available, dt.timezone.utc) if available else None,
        issuer=issuer,
    )


class Ledger:
    """A ledger file: what every document of a job became, by identity.

    Pass it (or just a path) as ``ledger=`` to
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
        self._file = LedgerFile(self.path, durable=durable, create=create)
        # Documents whose sending record will_send wrote: the commit, and its time.
        self._marked: dict[Ref, tuple[asyncio.Future[None], float]] = {}

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
        await self._file.open()

    async def close(self) -> None:
        """Commit what is queued and close; raises the write failure that stopped it."""
        await self._file.close()

    # --- reading and marking -------------------------------------------------------------

    async def get(self, key: str, *, issuer: str | None = None) -> LedgerEntry | None:
        """The entry of ``key`` (of ``issuer``'s document), or ``None``.

        Without ``issuer``: the entry of the document of that key that names no
        issuer, else the only entry of that key.

        :raises LedgerError: (reason ``ambiguous``) without ``issuer``, when documents
            of several issuers have that key: say whose.

        .. versionchanged:: 0.4.0 ``issuer``.
        """
        if issuer is not None:
            ref = Ref(issuer, key)
            found = await self._file.call(functools.partial(_lookup, refs=[ref], adopt=False))
            return row_entry(found[ref]) if found else None
        rows = await self._file.call(
            lambda c: c.execute(
                f"SELECT {COLUMNS} FROM entries WHERE key = ? ORDER BY issuer",  # noqa: S608
                (key,),
            ).fetchall()
        )
        return one_of(key, [row_entry(row) for row in rows])

    async def entries(
        self, status: OutcomeStatus | str | None = None
    ) -> AsyncIterator[LedgerEntry]:
        """Every entry (or those whose status is ``status``), by key, a page at a time."""
        wanted = status.value if isinstance(status, OutcomeStatus) else status
        after = ("", "")
        while True:
            rows = await self._file.call(functools.partial(_page, after=after, status=wanted))
            for row in rows:
                yield row_entry(row)
            if len(rows) < _PAGE:
                return
            after = (rows[-1][0], rows[-1][11])

    async def counts(self) -> dict[str, int]:
        """How many entries have each status (``pending``, ``in_flight``, outcomes)."""
        rows = await self._file.call(
            lambda c: c.execute(
                "SELECT CASE WHEN state = 'done' THEN status ELSE state END, count(*) "
                "FROM entries GROUP BY 1"
            ).fetchall()
        )
        return {str(name): int(count) for name, count in rows}

    async def retry(self, keys: Iterable[str], *, issuer: str | None = None) -> int:
        """Mark entries for sending again (even final ones); returns how many exist.

        The next batch (or outbox worker) sends them; one that may have been committed
        keeps that knowledge, so a ``409`` is still its own commit. A parked outbox entry
        is claimed again, with a fresh budget of rounds.

        :param issuer: only that issuer's documents (default: every issuer's).

        .. versionchanged:: 0.4.0 ``issuer``.
        """
        now = time.time()
        rows = _rows(keys, issuer, now=now)
        return await self._file.call(
            lambda c: _each(
                c,
                "UPDATE entries SET state = 'pending', final = 0, available_at = 0, "  # noqa: S608
                "failures = 0, claims = 0, lease = NULL, updated_at = :now WHERE "
                f"{_whose(issuer)} AND (state != 'in_flight' OR lease IS NULL)",
                rows,
            )
        )

    async def forget(self, keys: Iterable[str], *, issuer: str | None = None) -> int:
        """Delete entries; the next batch treats those documents as never seen.

        :param issuer: only that issuer's documents (default: every issuer's).

        .. versionchanged:: 0.4.0 ``issuer``.
        """
        rows = _rows(keys, issuer)
        return await self._file.call(
            lambda c: _each(c, f"DELETE FROM entries WHERE {_whose(issuer)}", rows)  # noqa: S608
        )

    # --- what a batch's journal calls -----------------------------------------------------

    async def _acquire(self) -> None:
        """Open if needed and take the lock of the one process that sends."""
        await self._file.open()
        self._file.acquire()

    def _release(self) -> None:
        """Give the sender's lock back."""
        self._file.release()

    async def _lookup(self, refs: Sequence[Ref]) -> dict[Ref, LedgerEntry]:
        """The entries of ``refs`` that exist (one indexed query per 500 documents).

        A document that names an issuer adopts the entry its key had before issuers
        were stored (:mod:`._identity`).
        """
        found: dict[Ref, LedgerEntry] = {}
        for start in range(0, len(refs), _LOOKUP_CHUNK):
            chunk = list(refs[start : start + _LOOKUP_CHUNK])
            rows = await self._file.call(functools.partial(_lookup, refs=chunk))
            for ref, row in rows.items():
                found[ref] = row_entry(row)
        return found

    def _will_send(self, refs: Sequence[Ref]) -> None:
        """Record ``sending`` now for documents about to be sent (never blocks).

        Called as new documents are read, so their records are committed together
        while they are prepared: :meth:`_sending` then finds them durable and does not
        wait. What is not sent after all is unrecorded by :meth:`_unmark` when the batch
        ends; after a crash such documents are ``in_flight`` like those really sent,
        which is why this is done only when ``resend_ambiguous`` lets them be re-sent
        (with ``False``, each is recorded right before its request, so that only
        documents really in flight end ``unknown``).
        """
        now = time.time()
        committed = self._file.write_durable(_SENDING, [(key, issuer, now) for issuer, key in refs])
        for ref in refs:
            self._marked[ref] = (committed, now)

    async def _sending(self, ref: Ref) -> None:
        """Record that a request for ``ref`` is about to leave; returns once durable.

        Every outcome recorded before is durable by then too (committed in the same
        transaction or an earlier one): after a crash, the documents whose answers are
        lost are at most those in flight, one per worker, never a backlog of outcomes
        that waited for company.
        """
        if self._marked.pop(ref, None) is None:
            committed = self._file.write_durable(_SENDING, [(ref.key, ref.issuer, time.time())])
            if not committed.done():
                await asyncio.shield(committed)
            committed.result()
        else:  # its record went ahead (see _will_send): what was queued since goes now
            await self._file.wait_durable()

    def _unmark(self) -> None:
        """Remove the records of documents marked by :meth:`_will_send` but never sent."""
        marked, self._marked = self._marked, {}
        for (issuer, key), (_committed, when) in marked.items():
            self._file.write(_UNMARK, (key, issuer, when))

    def _settled(self, outcome: Outcome, fingerprint: str | None) -> None:
        """Record an outcome: queued, committed with the next group (never blocks)."""
        ref = Ref.of_outcome(outcome)
        self._marked.pop(ref, None)
        final = is_final(outcome, fingerprint)
        self._file.write(
            _SETTLE,
            (
                ref.key,
                ref.issuer,
                outcome.status.value,
                int(final),
                int(outcome.status is OutcomeStatus.UNKNOWN),
                fingerprint if final else None,
                outcome.attempts,
                outcome_json(outcome),
                time.time(),
            ),
        )


class _LedgerJournal:
    """A ledger as a batch's journal (:class:`invoicing_async._send.journal.Journal`)."""

    #: Its ``before_send`` waits for the writer's commit, never for a document.
    waits_on_others = False

    def __init__(self, ledger: Ledger, *, resend_ambiguous: bool) -> None:
        self._ledger = ledger
        self._resend_ambiguous = resend_ambiguous

    async def lookup(self, refs: Sequence[Ref]) -> list[Verdict]:
        entries = await self._ledger._lookup(refs)  # noqa: SLF001  (the ledger's own journal)
        verdicts = [
            decide(entries.get(ref), resend_ambiguous=self._resend_ambiguous) for ref in refs
        ]
        if self._resend_ambiguous:
            # Sending records of new documents committed while they are prepared (see
            # Ledger._will_send); never ahead when unknown ones are not to be re-sent.
            fresh = [ref for ref in refs if ref not in entries]
            if fresh:
                self._ledger._will_send(fresh)  # noqa: SLF001
        return verdicts

    async def before_send(self, ref: Ref) -> None:
        await self._ledger._sending(ref)  # noqa: SLF001

    def after_outcome(self, outcome: Outcome, prepared: Prepared | None) -> None:
        fingerprint = (
            prepared.digest if prepared is not None and needs_fingerprint(outcome) else None
        )
        self._ledger._settled(outcome, fingerprint)  # noqa: SLF001


@contextlib.asynccontextmanager
async def ledger_journal(
    ledger: str | os.PathLike[str] | Ledger, *, resend_ambiguous: bool
) -> AsyncIterator[_LedgerJournal]:
    """A batch's journal in ``ledger``, held (locked) for the batch's life.

    A path is opened as a :class:`Ledger` and closed after; a :class:`Ledger` is opened
    if the caller did not, and stays open if the caller did. Everything recorded is
    committed before the batch ends normally; a write failure then raises.
    """
    if isinstance(ledger, (str, os.PathLike)):
        ledger = Ledger(ledger)
    file = ledger._file  # noqa: SLF001
    close = not file.is_open  # a ledger the caller opened stays open
    try:
        await ledger._acquire()  # noqa: SLF001
    except BaseException:
        if close:
            with contextlib.suppress(LedgerError):
                await ledger.close()
        raise
    try:
        yield _LedgerJournal(ledger, resend_ambiguous=resend_ambiguous)
        ledger._unmark()  # noqa: SLF001
        await file.flush()
    except BaseException:
        with contextlib.suppress(LedgerError):
            ledger._unmark()  # noqa: SLF001
        ledger._release()  # noqa: SLF001
        if close:
            with contextlib.suppress(LedgerError):  # the failure is already on its way
                await ledger.close()
        raise
    ledger._release()  # noqa: SLF001
    if close:
        await ledger.close()


# --- the seam of the outbox kept in a ledger's file (_sqlite_outbox, deferrals) -----------


def file_of(ledger: Ledger) -> LedgerFile:
    """The file of ``ledger``: the outbox and the deferrals kept in it write through it."""
    return ledger._file  # noqa: SLF001  (this module's own class)


async def hold(ledger: Ledger) -> None:
    """Open ``ledger`` if needed and take the lock of the one process that sends."""
    await ledger._acquire()  # noqa: SLF001


def let_go(ledger: Ledger) -> None:
    """Give back the lock :func:`hold` took."""
    ledger._release()  # noqa: SLF001


def _lookup(
    connection: sqlite3.Connection, refs: list[Ref], *, adopt: bool = True
) -> dict[Ref, Any]:
    """The rows of ``refs`` (their own, or the ones they adopt: see :mod:`._identity`).

    With ``adopt``, such rows are given the issuer of their document (a batch's lookup:
    its writes then name the row by its full identity), unless the batch will only
    replay them (:func:`_held`).
    """
    keys = list({ref.key for ref in refs})
    marks = ",".join("?" * len(keys))
    rows = connection.execute(
        f"SELECT {COLUMNS} FROM entries WHERE key IN ({marks})",  # noqa: S608  (only marks)
        keys,
    ).fetchall()
    found = match(rows, refs, identity=_identity)
    adopted = [ref for ref, row in found.items() if row[11] != ref.issuer and not _held(row)]
    if adopted and adopt:
        adopt_sqlite(connection, adopted)
        found.update({ref: (*found[ref][:11], ref.issuer) for ref in adopted})
    return found


def _held(row: Sequence[Any]) -> bool:
    """The provider holds the document (final): a batch replays it and writes nothing.

    Such a row of 0.3 is not adopted: a resumed ledger of a million of them costs no
    write, and each is found again by its key.
    """
    return bool(row[3]) and row[2] in ("accepted", "duplicate")


def _identity(row: Sequence[Any]) -> Ref:
    return Ref(row[11], row[0])


def _whose(issuer: str | None) -> str:
    """Which rows an operator's ``retry`` / ``forget`` of a key touches."""
    return "key = :key" if issuer is None else who()


def _rows(keys: Iterable[str], issuer: str | None, **more: Any) -> list[dict[str, Any]]:
    return [{"key": key, "issuer": issuer, **more} for key in keys]


def _page(connection: sqlite3.Connection, after: tuple[str, str], status: str | None) -> list[Any]:
    where = "(key, issuer) > (?, ?)"
    args: list[Any] = [*after]
    if status in STATES:
        where += " AND state = ?"
        args.append(status)
    elif status is not None:
        where += " AND state = 'done' AND status = ?"
        args.append(status)
    return connection.execute(
        f"SELECT {COLUMNS} FROM entries WHERE {where} ORDER BY key, issuer LIMIT {_PAGE}",  # noqa: S608
        args,
    ).fetchall()


def _each(connection: sqlite3.Connection, sql: str, rows: list[dict[str, Any]]) -> int:
    return sum(connection.execute(sql, row).rowcount for row in rows)
