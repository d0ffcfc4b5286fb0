"""A SQLite ledger file: created 0600, locked for one sender, written from one thread.

Every statement runs in the file's own thread, so the event loop never waits on the
disk. The loop gathers what it writes and hands it over as one item (one queue put, one
wake-up of the thread, however many documents): at the next turn of the loop when
someone waits for it (``call``, ``write_durable``: a lookup, a ``sending`` record),
else with the next such hand-over, after 256 rows or after 0.1 s. The thread runs
whatever was handed over meanwhile in one transaction (group commit), consecutive rows
of one :class:`Insert` as a few multi-row statements (each statement releases the GIL
once, where ``executemany`` would once per row), and wakes the loop once per commit.
Waiting callers are woken when the commit that holds their work is done; the others
(``write``, ``post``) learn of a failure at their next call. After a failed write (disk
full, I/O error) the file refuses everything with :class:`~invoicing_async.LedgerError`:
what was committed before stays, and nothing later is claimed to be durable.

Another connection holding the write lock for longer than the busy timeout (an
application's transaction that enqueues into an outbox, a backup) is not a failure:
nothing was written yet, so the writer waits for the lock with capped backoff (one
WARNING while it waits, one INFO when it has it) and goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import queue
import sqlite3
import threading
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from invoicing_async._core.errors import LedgerError
from invoicing_async._core.log import ledger as log
from invoicing_async._core.retry import Backoff

from ._lockfile import LockFile
from ._schema import SQLITE_VERSION, upgrade_sqlite

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

__all__ = ["SCHEMA_VERSION", "Insert", "LedgerFile", "connect"]


T = TypeVar("T")

#: The file's format (``PRAGMA user_version``); its upgrade steps are in :mod:`._schema`.
SCHEMA_VERSION = SQLITE_VERSION
_GROUP = 64  # hand-overs per transaction at most
_ROWS = 256  # statements nobody waits for, gathered before a hand-over
_DELAY = 0.1  # seconds such statements wait for company at most
_ROWS_PER_INSERT = 64  # rows per multi-row statement at most (64 x 8 < 999 parameters)
_STOP = object()
#: Seconds a statement waits for another connection's lock before SQLite says "busy".
BUSY_TIMEOUT = 30.0
_SQLITE_BUSY = 5  # sqlite3.SQLITE_BUSY from Python 3.11 on
_SQLITE_IOERR, _SQLITE_FULL = 10, 13
#: The longest pause between two tries for the lock after that.
_BUSY_BACKOFF = 1.0


def connect(
    path: Path, *, durable: bool, timeout: float | None = None, create: bool = True
) -> sqlite3.Connection:
    """Open (creating 0600 if missing) and check a ledger file; the schema is created.

    With ``create=False`` the file must exist and be a ledger already: nothing is
    created by opening it (``LedgerError``, reason ``missing`` or ``unreadable``,
    otherwise); a ledger of an older format is upgraded.
    """
    try:
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o600)
    except FileNotFoundError:
        raise LedgerError(
            f"there is no ledger {path} (no such file): check the path", reason="missing"
        ) from None
    except OSError as exc:
        raise LedgerError(
            f"cannot open the ledger {path}: {exc.strerror}", reason="unreadable"
        ) from None
    os.close(fd)
    connection: sqlite3.Connection | None = None
    try:
        connection = sqlite3.connect(
            path,
            timeout=BUSY_TIMEOUT if timeout is None else timeout,
            isolation_level=None,
            check_same_thread=False,
            # Every multi-row size of the two INSERTs a batch writes (see _insert).
            cached_statements=4 * _ROWS_PER_INSERT,
        )
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            connection.close()
            raise LedgerError(
                f"the ledger {path} was written by a newer version (format {version})",
                reason="unreadable",
            )
        if not create and version == 0:
            connection.close()
            raise LedgerError(f"{path} is not a ledger", reason="unreadable")
        if create:
            connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        if version < SCHEMA_VERSION:  # created, or written by an older version: upgraded
            upgrade_sqlite(connection)
    except sqlite3.DatabaseError as exc:
        if connection is not None:  # a file refused here is not held open
            connection.close()
        if _disk_failure(exc):  # a new ledger on a full disk is a ledger it cannot write
            raise LedgerError(
                f"cannot write the ledger {path}: {exc}", reason="write_failed"
            ) from None
        raise LedgerError(
            f"{path} is not a ledger ({exc}); an old JSON Lines journal cannot be resumed "
            "by this version: give the batch a new file",
            reason="unreadable",
        ) from None
    return connection


class LedgerFile:
    """One ledger file and its writer thread.

    :param durable: ``synchronous=FULL`` (every commit survives power loss) rather than
        ``NORMAL`` (survives a crash of the process).
    :param create: create the file if missing; with ``False`` it must be a ledger already.
    """

    def __init__(self, path: Path, *, durable: bool = True, create: bool = True) -> None:
        self.path = path
        self._durable = durable
        self._create = create
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = LockFile(path)
        self._failure: LedgerError | None = None
        self._closing = threading.Event()  # ends a wait for another connection's lock
        self._loop: asyncio.AbstractEventLoop | None = None
        # What the event loop gathered since the last hand-over: (sql, parameters) rows
        # and (operation, future) calls, in order. Handed to the thread as one item once
        # per turn of the loop: one queue put and one wake-up for many documents.
        self._gathered: list[tuple[Any, Any]] = []
        self._handing_over = False
        self._timer: asyncio.TimerHandle | None = None
        # Resolved when the commit holding what ``write_durable`` gathered is done.
        self._committed: asyncio.Future[None] | None = None
        # Resolved when the commit of the latest hand-over is done (commits are in order:
        # everything handed over before it is committed then too).
        self._in_transit: asyncio.Future[None] | None = None
        #: Callers of :meth:`wait_durable`, by the commit they wait for.
        self._waiters: dict[asyncio.Future[None], list[asyncio.Future[None]]] = {}
        self._deferred = False  # a hand-over waits for the commit in transit

    @property
    def is_open(self) -> bool:
        return self._thread is not None

    def acquire(self) -> None:
        """Take the sender's lock (a batch, an outbox worker); reading does not need it."""
        self._lock.acquire(self.path)

    def release(self) -> None:
        """Give the sender's lock back."""
        self._lock.release()

    async def open(self) -> None:
        """Open and check the file (created 0600), start the writer thread."""
        if self._thread is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._failure = None
        self._closing.clear()
        ready: asyncio.Future[None] = self._loop.create_future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name=f"ledger {self.path.name}", daemon=True
        )
        self._thread.start()
        try:
            await ready
        except BaseException:
            self._thread.join()
            self._thread = None
            raise

    def check(self) -> None:
        """Raise the failure that stopped the writer, if any."""
        if self._failure is not None:
            raise self._failure
        if self._thread is None:
            raise LedgerError(f"the ledger {self.path} is not open", reason="closed")

    def write(self, sql: str | Insert, parameters: tuple[Any, ...]) -> None:
        """Queue one statement; it is committed with a later group. Never blocks.

        Nobody waits for it: it goes with the next hand-over that someone waits for, or
        after :data:`_DELAY` seconds at most. Consecutive statements with the same
        ``sql`` run as one ``executemany``.
        """
        self.check()
        self._gathered.append((sql, parameters))
        if len(self._gathered) >= _ROWS:
            self._hand_over_soon()
        elif not self._handing_over and self._timer is None:
            assert self._loop is not None  # noqa: S101
            self._timer = self._loop.call_later(_DELAY, self._hand_over)

    def write_durable(
        self, sql: str | Insert, rows: Iterable[tuple[Any, ...]]
    ) -> asyncio.Future[None]:
        """Queue rows of one statement for the next commit; the future says it is done.

        Many callers share the future: await it shielded (a cancelled waiter must not
        cancel it for the others).
        """
        self.check()
        self._gathered.extend((sql, row) for row in rows)
        return self._commit_soon()

    def durable(self) -> asyncio.Future[None] | None:
        """A future resolved once everything queued so far is committed, or ``None`` if it is.

        What is still gathered goes with the next hand-over; what was handed over is
        committed in order, so the latest hand-over's commit covers it all. Await it
        shielded, as :meth:`write_durable`'s.
        """
        self.check()
        if self._gathered:
            return self._commit_soon()
        in_transit = self._in_transit
        return None if in_transit is None or in_transit.done() else in_transit

    async def wait_durable(self) -> None:
        """Return once everything queued so far is committed (at once if it is).

        Each caller waits on a future of its own, resolved with the others' in one pass
        when the commit is done: no shield per caller, and a caller cancelled cancels
        nobody else's wait.
        """
        committed = self.durable()
        if committed is None:
            return
        waiters = self._waiters.get(committed)
        if waiters is None:
            waiters = self._waiters[committed] = []
            committed.add_done_callback(self._wake)
        waiter: asyncio.Future[None] = committed.get_loop().create_future()
        waiters.append(waiter)
        await waiter

    def _wake(self, committed: asyncio.Future[None]) -> None:
        error = None if committed.cancelled() else committed.exception()
        for waiter in self._waiters.pop(committed, ()):
            _settle(waiter, None, error)

    def post(self, operation: Callable[[sqlite3.Connection], object]) -> None:
        """Queue a write; it is committed with the next group. Never blocks."""
        self.check()
        self._gathered.append((operation, None))
        self._hand_over_soon()

    async def call(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``operation`` in the writer thread; return once its group is committed."""
        self.check()
        assert self._loop is not None  # noqa: S101
        future: asyncio.Future[T] = self._loop.create_future()
        self._gathered.append((operation, future))
        self._hand_over_soon()
        return await future

    async def flush(self) -> None:
        """Wait until everything queued so far is committed."""
        if self._thread is not None:
            await self.call(_nothing)

    async def close(self) -> None:
        """Commit what is queued, stop the thread, release the lock; raise a failure."""
        thread = self._thread
        if thread is None:
            return
        try:
            with contextlib.suppress(LedgerError):
                await self.flush()
        finally:
            self._hand_over(now=True)
            self._closing.set()
            self._queue.put(_STOP)
            await asyncio.get_running_loop().run_in_executor(None, thread.join)
            self._thread = None
        if self._failure is not None:
            raise self._failure

    def _commit_soon(self) -> asyncio.Future[None]:
        """Hand over at the next turn of the loop; the future of that commit."""
        assert self._loop is not None  # noqa: S101
        if self._committed is None:
            self._committed = self._loop.create_future()
        self._hand_over_soon()
        return self._committed

    def _hand_over_soon(self) -> None:
        if not self._handing_over:
            self._handing_over = True
            assert self._loop is not None  # noqa: S101
            self._loop.call_soon(self._hand_over)

    def _hand_over(self, *, now: bool = False) -> None:
        """Hand what was gathered to the writer thread: one queue put, one transaction.

        One commit at a time: while one is under way, what gathers meanwhile waits and
        goes as the next, as soon as that one is done (unless ``now``). A transaction
        then holds everything that arrived during the one before, sized by the disk's
        own pace, and the thread wakes once per commit however busy the loop is.
        """
        self._handing_over = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._gathered:
            return
        in_transit = self._in_transit
        if not now and in_transit is not None and not in_transit.done():
            self._deferred = True
            return
        self._deferred = False
        committed, self._committed = self._committed, None
        if committed is None:
            assert self._loop is not None  # noqa: S101
            committed = self._loop.create_future()
        # Nobody may wait for it: a failure is the writer's, raised by check().
        committed.add_done_callback(self._after_commit)
        self._gathered.append((_nothing, committed))
        self._in_transit = committed
        gathered, self._gathered = self._gathered, []
        self._queue.put(gathered)

    def _after_commit(self, committed: asyncio.Future[None]) -> None:
        if not committed.cancelled():
            committed.exception()  # retrieved: asyncio logs no "exception was never retrieved"
        if self._deferred:
            self._hand_over()

    # --- the writer thread ---------------------------------------------------------------

    def _run(self, ready: asyncio.Future[None]) -> None:
        loop = ready.get_loop()
        try:
            connection = connect(self.path, durable=self._durable, create=self._create)
        except LedgerError as exc:
            error = exc
            loop.call_soon_threadsafe(_settle, ready, None, error)
            return
        loop.call_soon_threadsafe(_settle, ready, None, None)
        try:
            self._serve(connection, loop)
        finally:
            connection.close()

    def _serve(self, connection: sqlite3.Connection, loop: asyncio.AbstractEventLoop) -> None:
        stopping = False
        while not stopping:
            # Whatever the loop handed over meanwhile goes into one transaction.
            handed = [self._queue.get()]
            while len(handed) < _GROUP:
                try:
                    handed.append(self._queue.get_nowait())
                except queue.Empty:  # noqa: PERF203  (the end of what is queued)
                    break
            stopping = any(item is _STOP for item in handed)
            work = [entry for item in handed if item is not _STOP for entry in item]
            waiting = [
                future
                for head, future in work
                if future is not None and not isinstance(head, (str, Insert))
            ]
            results: list[tuple[asyncio.Future[Any], Any]] = []
            if work and self._failure is None:
                try:
                    results = self._commit(connection, work)
                except Exception as exc:  # noqa: BLE001  (any failure stops the writer, typed)
                    with contextlib.suppress(sqlite3.Error):
                        connection.execute("ROLLBACK")
                    self._failure = LedgerError(
                        f"cannot write the ledger {self.path}: {exc}; the batch stops "
                        "(nothing is lost: documents not recorded as settled are re-sent "
                        "by the next run)",
                        reason="write_failed",
                    )
                    log.error("%s", self._failure)
            failure = self._failure
            if failure is not None:
                results = [(future, None) for future in waiting]
            if results:
                with contextlib.suppress(RuntimeError):  # the loop is closed: no one waits
                    loop.call_soon_threadsafe(_settle_all, results, failure)

    def _commit(
        self, connection: sqlite3.Connection, work: list[tuple[Any, Any]]
    ) -> list[tuple[asyncio.Future[Any], Any]]:
        """Run ``work`` in one transaction and commit it.

        One statement alone (the common case: the outcomes of a moment, one multi-row
        ``INSERT``) is its own transaction. Every statement lets go of the GIL while
        SQLite works and must take it back, which a busy event loop hands over only
        after the switch interval (5 ms): ``BEGIN`` and ``COMMIT`` around it would
        triple the time a sender waits for its commit.
        """
        if _alone(work):
            try:
                return _apply(connection, work)
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
                # Another connection holds the lock and nothing was written: wait for
                # it as a transaction does.
        self._begin(connection)
        results = _apply(connection, work)
        connection.execute("COMMIT")
        return results

    def _begin(self, connection: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``, waiting as long as another connection holds the lock.

        Nothing is written before the lock is ours, so waiting is always safe; only
        closing the file ends the wait (with the "busy" error).
        """
        waits, waited = Backoff(0.05, _BUSY_BACKOFF, jitter="none"), False
        while True:
            try:
                connection.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:  # noqa: PERF203  (a wait, not a hot loop)
                if not _busy(exc) or self._closing.is_set():
                    raise
                if not waited:
                    log.warning(
                        "the ledger %s is locked by another connection (%s): waiting for it",
                        self.path,
                        exc,
                    )
                    waited = True
                self._closing.wait(waits.next())
            else:
                if waited:
                    log.info("the ledger %s is no longer locked: writing again", self.path)
                return


def _disk_failure(error: sqlite3.DatabaseError) -> bool:
    """SQLite's "database or disk is full" or "disk I/O error": the disk, not the file."""
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return (code & 0xFF) in (_SQLITE_IOERR, _SQLITE_FULL)
    text = str(error)
    return "disk is full" in text or "disk I/O error" in text


def _busy(error: sqlite3.OperationalError) -> bool:
    """SQLite's "database is locked" / "database is busy": another connection's lock."""
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return bool(code & 0xFF == _SQLITE_BUSY)
    text = str(error)
    return "database is locked" in text or "database is busy" in text


@attrs.frozen
class Insert:
    """An ``INSERT`` whose rows of one group are written by one multi-row statement.

    ``executemany`` steps the statement once per row, and each step releases and takes
    back the GIL: with a busy event loop, every take waits for the loop to let go, and
    a group of a few hundred rows takes that long. One statement of many ``VALUES``
    rows is one step.
    """

    head: str  # "INSERT INTO t (a, b) VALUES "
    row: str  # "(?, ?)"
    tail: str = ""  # " ON CONFLICT …"
    width: int = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "width", self.row.count("?"))

    def sql(self, rows: int) -> str:
        return _statement(self, rows)


@functools.cache
def _statement(insert: Insert, rows: int) -> str:
    return insert.head + ",".join([insert.row] * rows) + insert.tail


def _apply(
    connection: sqlite3.Connection, work: list[tuple[Any, Any]]
) -> list[tuple[asyncio.Future[Any], Any]]:
    """Run the gathered work in order, each run of one statement at once."""
    results: list[tuple[asyncio.Future[Any], Any]] = []
    start = 0
    while start < len(work):
        head, future = work[start]
        if isinstance(head, (str, Insert)):
            end = start + 1
            while end < len(work) and work[end][0] is head:
                end += 1
            rows = [parameters for _sql, parameters in work[start:end]]
            if isinstance(head, str):
                connection.executemany(head, rows)
            else:
                _insert(connection, head, rows)
            start = end
            continue
        value = head(connection)
        if future is not None:
            results.append((future, value))
        start += 1
    return results


def _alone(work: list[tuple[Any, Any]]) -> bool:
    """Whether ``work`` is one statement (and waiters): one step, its own transaction."""
    heads = {id(head): head for head, _ in work if head is not _nothing}
    if len(heads) != 1:
        return False
    [head] = heads.values()
    rows = len(work) - sum(head is _nothing for head, _ in work)
    if isinstance(head, Insert):
        return rows <= _ROWS_PER_INSERT
    return isinstance(head, str) and rows == 1


def _insert(connection: sqlite3.Connection, insert: Insert, rows: list[tuple[Any, ...]]) -> None:
    # As many rows per statement as there are, up to _ROWS_PER_INSERT: one statement
    # for the rows of a moment, each size prepared once and then found in the
    # connection's statement cache (sized for it).
    for start in range(0, len(rows), _ROWS_PER_INSERT):
        part = rows[start : start + _ROWS_PER_INSERT]
        connection.execute(insert.sql(len(part)), [value for row in part for value in row])


def _nothing(_connection: sqlite3.Connection) -> None:
    return None


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _settle_all(
    results: list[tuple[asyncio.Future[Any], Any]], error: BaseException | None
) -> None:
    for future, value in results:
        _settle(future, value, error)
