"""The transactional outbox: invoices enqueued with your data, sent by any number of workers.

The body of :mod:`invoicing_async.outbox` (the guide to it is that face's docstring).
"""

from __future__ import annotations

import os
import typing
from pathlib import Path

from invoicing_async._core.entries import IN_FLIGHT, PARKED, PENDING, LedgerEntry
from invoicing_async._core.retry import RetryPolicy as _RetryPolicy
from invoicing_async._durable.deferrals import PostgresDeferrals as _PostgresDeferrals
from invoicing_async._durable.deferrals import SqliteDeferrals as _SqliteDeferrals
from invoicing_async._durable.enqueue import ready as _ready
from invoicing_async._durable.ledger import Ledger as _Ledger
from invoicing_async._durable.ledger import file_of as _file_of
from invoicing_async._durable.ledger import let_go as _let_go
from invoicing_async._durable.postgres import PostgresStore as _PostgresStore
from invoicing_async._durable.postgres import described as _described
from invoicing_async._durable.sqlite import SqliteStore as _SqliteStore
from invoicing_async._durable.sqlite import insert as _insert
from invoicing_async._durable.sqlite import worker_store as _worker_store

from .progress import Documents as _Documents
from .progress import WorkerProgress
from .surface import engine_of as _engine_of
from .worker import DEFAULT_GRACE as _DEFAULT_GRACE
from .worker import run_worker as _run_worker
from .worker import until_available as _until_available

if typing.TYPE_CHECKING:
    import asyncio
    import sqlite3
    from collections.abc import AsyncIterator, Callable, Iterable
    from types import TracebackType

    from invoicing_async._core.outcomes import OutcomeStatus
    from invoicing_async._core.retry import RetryPolicy
    from invoicing_async._durable.deferrals import Deferrals
    from invoicing_async._durable.store import Store

    from .client import InvoicingClient
    from .pool import IssuerPool

__all__ = [
    "IN_FLIGHT",
    "PARKED",
    "PENDING",
    "LedgerEntry",
    "PostgresOutbox",
    "SqliteOutbox",
    "WorkerProgress",
    "open_outbox",
]


class _Outbox:
    """What both outboxes do the same way."""

    async def __aenter__(self) -> typing.Any:
        await self.setup()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def setup(self) -> None:
        """Create the outbox (table or file) if missing, upgrade an older one; idempotent."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close connections."""
        raise NotImplementedError

    async def _store(self) -> Store:
        raise NotImplementedError

    async def _unlock(self) -> None:
        """Give back what :meth:`_store` took for a worker."""

    async def _ready(
        self,
        stop: asyncio.Event | None,  # noqa: ARG002  (SQLite: a file, nothing to wait for)
        waiting: Callable[[str | None], object],  # noqa: ARG002
    ) -> bool:
        """Set up for a worker; ``False`` if stopped while waiting for the database.

        ``waiting`` is told why the worker waits for it, and then ``None``.
        """
        return True

    async def ping(self) -> None:
        """Return once the outbox's database answers a trivial query (a readiness probe).

        :raises LedgerError: it does not (``unavailable``: down or unreachable; another
            reason: it refuses the configuration).

        .. versionadded:: 0.5.0
        """
        await (await self._probe()).ping()

    async def _probe(self) -> Store:
        raise NotImplementedError

    async def run_worker(
        self,
        client: InvoicingClient | IssuerPool,
        *,
        concurrency: int = 32,
        stop_when_empty: bool = False,
        retry: RetryPolicy | None = None,
        lease: float = 30.0,
        poll: float = 1.0,
        grace: float = _DEFAULT_GRACE,
        stop: asyncio.Event | None = None,
        on_progress: Callable[[WorkerProgress], object] | None = None,
    ) -> dict[OutcomeStatus, int]:
        """Claim entries and submit them with ``client`` until stopped.

        ``client`` may be an :class:`~invoicing_async.IssuerPool`: each entry is sent
        with the credentials of the issuer stored with it, each issuer isolated (its
        breaker, limit, back-off) and served in turn, and claims take the oldest entries
        of every issuer that has some, so that a small issuer's documents are not stuck
        behind a large one's backlog.

        Entries whose outcome is not final (``not_sent``, a refused API key, ``unknown``
        when the policy allows ambiguous re-sends) go back to the outbox and are sent
        again after a backoff that grows round after round (``retry.round_delay``
        doubling up to ``retry.max_round_delay``; the entry's ``available_at``). An entry
        whose rounds failed ``unknown`` ``retry.max_rounds`` times (a poison document:
        the provider answers it 500, or resets its connection, every time) is parked
        (status :data:`PARKED`, a WARNING says so) until :meth:`retry` re-queues it.
        When the provider refuses the configuration (the batch's circuit breaker
        opens), the worker pauses (up to a minute) and tries again. With a pool, an
        issuer whose credentials the provider refuses (or that the pool has none for)
        waits alone: its entries are left to other workers, and it is tried again after
        the pool's ``recheck_refused`` (doubling while they stay refused) or as soon as
        the pool's credentials change (``reload_credentials()``, a credentials file
        replaced): the new key is used without a restart.

        A stop is graceful: set ``stop``, or cancel the worker (a second cancellation
        stops it at once): it claims nothing more and lets no request leave (one that
        waits for its access token stays unsent), lets the requests out end within
        ``grace`` seconds (at once when none is out), then puts back every entry it
        holds, fenced by its lease (those never sent untouched; those cut off knowing
        that they may have been committed: re-sent, answered ``409``). The database may
        be down when the worker starts, or go away while it runs: it waits for it (one
        WARNING, capped jittered backoff) and goes on; only a configuration failure
        (:class:`~invoicing_async.LedgerError` other than ``unavailable``: refused
        database credentials, a table of a newer format) ends it. Every look at the
        database while it waits watches ``stop``: one that accepts connections and
        never answers does not hold the stop for the driver's connect timeout.

        :param concurrency: requests in flight at once (at most the client's pool).
        :param stop_when_empty: return once no entry is pending or in flight (waiting
            for entries backing off, and for other workers' claims to end or expire),
            or when the provider refuses the configuration. Parked entries, and those of
            issuers whose credentials are refused, wait for an operator, not for the
            worker: a WARNING says how many remain, and whose.
        :param retry: the :class:`~invoicing_async.RetryPolicy` of every entry: within a
            round (``max_attempts`` …) and across rounds (``max_rounds``, ``round_delay``,
            ``max_round_delay``).
        :param lease: seconds a claim lasts without a heartbeat (a third of it apart).
        :param poll: seconds between looks at an empty outbox.
        :param grace: seconds the requests out may take to end once the worker is asked
            to stop; then they are cut off.
        :param stop: set it to stop the worker gracefully: it returns its counts.
        :param on_progress: called with a :class:`WorkerProgress` as it changes: after
            every outcome written, when the pending entries were counted again (at most
            every second), when the worker starts or stops waiting for its database.
        :returns: how many documents this worker settled in each status, each once by
            its latest outcome written to the outbox (a document sent back to the outbox
            and accepted in a later round counts once, accepted; an outcome lost with
            the database is counted when the entry is sent again; an entry on its way
            whose request never left, put back untouched as the worker stopped, counts
            ``not_sent``).

        .. versionchanged:: 0.4.0 poison documents are parked after ``max_rounds``
           failed rounds, with a growing wait between rounds; ``client`` may be an
           :class:`~invoicing_async.IssuerPool`; claims are fair across issuers.
        .. versionchanged:: 0.5.0 ``grace`` and ``stop``: a graceful stop; the
           database may be down at start; an issuer's refused credentials are resolved
           again; the counts are of documents, each once; ``on_progress``.
        """
        documents = _Documents(on_progress)
        store = await self._store()
        try:
            if not await self._ready(stop, documents.waiting):
                return {}
            documents.started()
            return await _run_worker(
                store,
                _engine_of(client),
                concurrency=concurrency,
                stop_when_empty=stop_when_empty,
                retry=retry or _RetryPolicy(),
                lease=lease,
                poll=poll,
                name=repr(self),
                grace=grace,
                stop=stop,
                documents=documents,
            )
        finally:
            await self._unlock()


class PostgresOutbox(_Outbox):
    """The outbox as a table (``invoicing_outbox``) in your PostgreSQL database.

    :param dsn: a libpq connection string or URL (``postgresql://user@host/db``).
    :param pool_size: connections the outbox's own pool opens at most.

    Needs the ``postgres`` extra (asyncpg). Use it as an async context manager, or call
    :meth:`setup` and :meth:`close`.

    .. versionadded:: 0.2.0
    """

    def __init__(self, dsn: str, *, pool_size: int = 4) -> None:
        self._db = _PostgresStore(dsn, pool_size=pool_size)
        self._name = _described(dsn)

    def __repr__(self) -> str:
        """Which database: user, host, port and database; never the password.

        Also the outbox's name on its gauges (``invoicing.outbox``).
        """
        return f"PostgresOutbox({self._name!r})"

    async def setup(self) -> None:
        """Create (or migrate) the table and its indexes; every worker may call it."""
        await self._db.setup()

    async def close(self) -> None:
        """Close the outbox's connection pool."""
        await self._db.close()

    async def _store(self) -> Store:
        return self._db

    async def _probe(self) -> Store:
        return self._db

    async def _ready(
        self, stop: asyncio.Event | None, waiting: Callable[[str | None], object]
    ) -> bool:
        """Set the table up, waiting for a database that is not there yet."""
        return await _until_available(self._db.setup, stop, waiting=waiting)

    async def enqueue(
        self,
        documents: Iterable[typing.Any],
        *,
        encrypted: bool = True,
        connection: typing.Any | None = None,
        key: Callable[[typing.Any], str] | None = None,
        issuer: str | None = None,
        check: bool = False,
    ) -> list[str]:
        """Add documents to the outbox; returns their keys.

        :param connection: an asyncpg connection: the rows are written in its current
            transaction (commit or roll back with your own data). Without it the outbox
            commits them itself.
        :param encrypted: send to ``/Invoice/secure`` (default) or ``/Invoice/json``.
        :param key: the identity of a document (default: :func:`~invoicing_async.document_key`).
        :param issuer: the issuer (TIN) whose documents they are (default: each
            document's ``Issuer.Vat``). A document's identity is its issuer and its key:
            two issuers' documents with the same key are two entries, and a worker sends
            each with its issuer's credentials (through an
            :class:`~invoicing_async.IssuerPool`).

        Enqueuing a document again replaces the stored one and sends it again, unless
        the provider holds it or refused exactly this content. An entry in flight keeps
        its request: the same content is not sent twice; changed content (an invoice
        corrected after a refusal) is sent once the provider has refused the content
        in flight, and not at all if it accepted it (it holds the document then).

        :param check: check each document first (:func:`invoicing_async.documents.check`):
            if the provider would refuse one, nothing is enqueued.

        Documents may be dicts, typed documents (:mod:`invoicing_async.documents`) or the
        bytes to send.

        :raises InvalidDocumentError: ``check``: a document the provider would refuse,
            with its problems (nothing is enqueued).
        :raises ValidationError: a document cannot be serialised (nothing is enqueued).

        .. versionchanged:: 0.4.0 ``issuer``; entries are kept by issuer and key.
        .. versionchanged:: 0.5.0 ``check``; typed documents.
        """
        prepared = _ready(documents, encrypted=encrypted, key=key, issuer=issuer, check=check)
        await self._db.insert(prepared, connection)
        return [item.key for item in prepared]

    async def status(self, key: str, *, issuer: str | None = None) -> LedgerEntry | None:
        """The entry of ``key`` (``.status``: pending, in_flight, parked, or an outcome).

        :param issuer: whose document (see :meth:`Ledger.get
            <invoicing_async.Ledger.get>`: without it, the key's only entry).

        .. versionchanged:: 0.4.0 ``issuer``.
        """
        return await self._db.get(key, issuer)

    def entries(self, status: OutcomeStatus | str | None = None) -> AsyncIterator[LedgerEntry]:
        """Every entry (or those with ``status``), by key."""
        return self._db.entries(status)

    async def counts(self) -> dict[str, int]:
        """How many entries have each status (``parked``: the ones that need attention)."""
        return await self._db.counts()

    async def retry(self, keys: Iterable[str], *, issuer: str | None = None) -> int:
        """Mark entries to be sent again (final and parked ones too); returns how many.

        A parked entry is claimed at once, with a fresh budget of rounds; one that may
        have been committed keeps that knowledge: its stored document is sent again as
        it is, and a ``409`` is its own commit (``accepted``). ``issuer``: only that
        issuer's documents (default: every issuer's with those keys).
        """
        return await self._db.retry(list(keys), issuer)

    async def forget(self, keys: Iterable[str], *, issuer: str | None = None) -> int:
        """Delete entries (of ``issuer``'s documents, default every issuer's); how many."""
        return await self._db.forget(list(keys), issuer)


class SqliteOutbox(_Outbox):
    """The outbox in one SQLite file (the ledger's format): a single machine's default.

    One worker at a time (a second gets :class:`~invoicing_async.LedgerError`); any
    process may enqueue, on its own or on your ``sqlite3`` connection.

    .. versionadded:: 0.2.0
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool = True) -> None:
        self.path = Path(path)
        self.ledger = _Ledger(self.path, durable=durable)

    def __repr__(self) -> str:
        return f"SqliteOutbox({str(self.path)!r})"

    async def setup(self) -> None:
        """Create the file (0600) if missing."""
        await self.ledger.open()

    async def close(self) -> None:
        """Commit and close the file."""
        await self.ledger.close()

    async def _store(self) -> Store:
        return await _worker_store(self.ledger)

    async def _unlock(self) -> None:
        _let_go(self.ledger)  # the lock _worker_store took

    async def _probe(self) -> Store:
        await self.ledger.open()
        return _SqliteStore(_file_of(self.ledger))

    async def enqueue(
        self,
        documents: Iterable[typing.Any],
        *,
        encrypted: bool = True,
        connection: sqlite3.Connection | None = None,
        key: Callable[[typing.Any], str] | None = None,
        issuer: str | None = None,
        check: bool = False,
    ) -> list[str]:
        """Add documents to the outbox; returns their keys (see :meth:`PostgresOutbox.enqueue`).

        :param connection: a ``sqlite3`` connection to the same file: the rows are
            written in its current transaction, which you commit.

        .. versionchanged:: 0.4.0 ``issuer``.
        .. versionchanged:: 0.5.0 ``check``.
        """
        prepared = _ready(documents, encrypted=encrypted, key=key, issuer=issuer, check=check)
        if connection is not None:
            _insert(connection, prepared)
        else:
            await self.ledger.open()
            await _file_of(self.ledger).call(lambda c: _insert(c, prepared))
        return [item.key for item in prepared]

    async def status(self, key: str, *, issuer: str | None = None) -> LedgerEntry | None:
        """The entry of ``key`` (see :meth:`PostgresOutbox.status`)."""
        await self.ledger.open()
        return await self.ledger.get(key, issuer=issuer)

    async def entries(
        self, status: OutcomeStatus | str | None = None
    ) -> AsyncIterator[LedgerEntry]:
        """Every entry (or those with ``status``), by key."""
        await self.ledger.open()
        async for entry in self.ledger.entries(status):
            yield entry

    async def counts(self) -> dict[str, int]:
        """How many entries have each status (``parked``: the ones that need attention)."""
        await self.ledger.open()
        return await self.ledger.counts()

    async def retry(self, keys: Iterable[str], *, issuer: str | None = None) -> int:
        """Mark entries to be sent again (final and parked ones too); returns how many.

        A parked entry is claimed at once, with a fresh budget of rounds; one that may
        have been committed keeps that knowledge: its stored document is sent again as
        it is, and a ``409`` is its own commit (``accepted``). ``issuer``: only that
        issuer's documents (default: every issuer's with those keys).
        """
        await self.ledger.open()
        return await self.ledger.retry(keys, issuer=issuer)

    async def forget(self, keys: Iterable[str], *, issuer: str | None = None) -> int:
        """Delete entries (of ``issuer``'s documents, default every issuer's); how many."""
        await self.ledger.open()
        return await self.ledger.forget(keys, issuer=issuer)


class Till:
    """An outbox as a till uses it: the deferrals beside its entries, and its worker.

    What a :class:`~invoicing_async.Deferral` and its drainer need of an outbox (a
    :class:`SqliteOutbox`, a :class:`PostgresOutbox`, or a SQLite file path): this
    module alone knows its classes' storage. Made by :func:`_till`.
    """

    def __init__(self, outbox: SqliteOutbox | PostgresOutbox, *, owned: bool) -> None:
        self._outbox = outbox
        self._owned = owned
        self._ready = False
        self.deferrals: Deferrals = (
            _SqliteDeferrals(_file_of(outbox.ledger))
            if isinstance(outbox, SqliteOutbox)
            else _PostgresDeferrals(outbox._db)  # noqa: SLF001  (this module's class)
        )

    def __repr__(self) -> str:
        return repr(self._outbox)

    async def open(self) -> None:
        """Open the outbox and create the deferrals table (once)."""
        if not self._ready:
            await self._outbox.setup()
            await self.deferrals.setup()
            self._ready = True

    async def close(self) -> None:
        """Close the outbox if the till opened it (from a path)."""
        self._ready = False
        if self._owned:
            await self._outbox.close()

    async def worker(self) -> Store:
        """The worker's store, its lock taken (SQLite: one worker at a time)."""
        outbox = self._outbox
        try:
            return await outbox._store()  # noqa: SLF001  (this module's class)
        except BaseException:  # cancelled while recovering: the lock is given back too
            await outbox._unlock()  # noqa: SLF001
            raise

    async def worker_done(self) -> None:
        """Give back what :meth:`worker` took."""
        await self._outbox._unlock()  # noqa: SLF001  (this module's class)


def _till(outbox: SqliteOutbox | PostgresOutbox | str | os.PathLike[str]) -> Till:
    """The till's view of ``outbox`` (an outbox object, or a SQLite file path).

    :raises TypeError: ``outbox`` is none of these.
    """
    if isinstance(outbox, (str, os.PathLike)):
        return Till(SqliteOutbox(outbox), owned=True)
    if isinstance(outbox, (SqliteOutbox, PostgresOutbox)):
        return Till(outbox, owned=False)
    raise TypeError(
        f"outbox must be a SqliteOutbox, a PostgresOutbox or a file path, not {outbox!r}"
    )


def open_outbox(url: str | os.PathLike[str]) -> PostgresOutbox | SqliteOutbox:
    """The outbox at ``url``: ``postgresql://…`` (or ``postgres://``), else a SQLite path.

    .. versionadded:: 0.2.0
    """
    text = os.fspath(url)
    if text.startswith(("postgresql://", "postgres://")):
        return PostgresOutbox(text)
    return SqliteOutbox(text.removeprefix("sqlite:///") if text.startswith("sqlite:///") else text)
