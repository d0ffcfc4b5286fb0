"""The outbox in PostgreSQL (asyncpg): one table, drained by any number of workers.

Claims take pending rows, and rows whose lease expired, with ``FOR UPDATE SKIP
LOCKED`` (workers never wait for each other); a claim writes a fresh lease id and an
expiry that the worker's heartbeat extends. Every later write of the worker checks the
lease id (fencing): once another worker has claimed a row, the first one can neither
mark it sending nor overwrite the newer outcome. :meth:`PostgresStore.setup` reads the
table's format first and runs DDL only to create or upgrade it (:mod:`._schema`), one
upgrader at a time and under a ``lock_timeout``: a worker starting beside an
application's open transaction on the outbox never waits behind it.

Claims are fair across issuers (:data:`_CLAIM`): a claim of ``n`` serves the ``n``
issuers whose oldest available entry is oldest, an equal share of ``n`` each (at
least one), each issuer's oldest entries taken with ``SKIP LOCKED`` so that
concurrent workers take the next ones. The issuers with pending entries are found by a
loose index scan (a recursive query that steps from one issuer to the next on the
``(issuer, available_at, id)`` index), never by reading every pending entry, and only
the entries claimed are locked. One issuer alone gets the whole claim, as before.

A worker writes several rows at once from concurrent tasks (marking requests sent,
settling outcomes, extending leases): every multi-row write locks its rows in the order
of their ids first, so two writes can never wait for each other in a circle; a deadlock
or serialization failure that happens anyway (40P01, 40001) is retried. A lost
connection, a database restarting or refusing connections is
:class:`~invoicing_async.LedgerError` with reason ``unavailable``: the worker waits for
the database and goes on (:mod:`invoicing_async._client.worker`).

Every statement runs in :meth:`PostgresStore.run`, on a connection of the pool held
for that operation alone, and a connection on which anything but an SQL error happened
(lost, cancelled mid-statement) is terminated, never used again. A restarting server
ends each idle session with a FATAL message: asyncpg's protocol then expects the end
of an operation that never began, and the next statement started on that connection
before the socket closes fails with ``InternalClientError: cannot switch to state …;
another operation (2) is in progress`` (2: consuming an error). That is the connection
lost, as :class:`~invoicing_async.LedgerError` ``unavailable`` like any other.

asyncpg is imported when an outbox is first used: the extra
``invoicing-async[postgres]`` installs it.
"""

from __future__ import annotations

import asyncio
import functools
import re
import urllib.parse
from typing import TYPE_CHECKING, Any, TypeVar

from invoicing_async._core.entries import PARKED, STATES, LedgerEntry
from invoicing_async._core.errors import LedgerError
from invoicing_async._core.outcomes import OutcomeStatus
from invoicing_async._core.retry import backoff
from invoicing_async._io.waits import within
from invoicing_async._send.journal import Ref

from ._identity import adopt_postgres, match, one_of
from ._schema import POSTGRES_VERSION, TABLE, postgres_version, upgrade_postgres
from .enqueue import UPSERT_SET
from .entry import entry_from_row
from .store import Claim, Settlement, make_claim

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

    from .enqueue import Ready

__all__ = ["TABLE", "PostgresStore", "described"]

T = TypeVar("T")

#: deadlock_detected, serialization_failure: the transaction was rolled back, run it again.
_RETRIED = frozenset({"40P01", "40001"})
_ATTEMPTS = 5
#: Operator intervention (a shutdown, a crash, starting up) and too many connections:
#: the database is there, or will be, but not now. Class 08 (connection exceptions) too.
_UNAVAILABLE = frozenset({"57P01", "57P02", "57P03", "53300"})

#: The database refuses the worker: its role or password (class 28), a permission
#: (insufficient_privilege), a database that does not exist (invalid_catalog_name).
_REFUSED = frozenset({"42501", "3D000"})

#: The table's format (:mod:`._schema`).
SCHEMA_VERSION = POSTGRES_VERSION
#: Seconds an upgrade of the table waits for a lock before it gives up and says why.
LOCK_TIMEOUT = 5.0
#: Seconds closing the pool waits for the database to see its connections closed.
CLOSE_TIMEOUT = 3.0
#: lock_not_available: a lock waited for longer than ``lock_timeout``.
_LOCK_NOT_AVAILABLE = "55P03"
_COLUMNS = (
    "key, state, status, final, ambiguous, sending, fingerprint, outcome, updated_at, "
    "failures, available_at, issuer"
)
_INSERT = (
    f"INSERT INTO {TABLE} (key, issuer, document, encrypted, doc_fingerprint) "  # noqa: S608
    "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key, issuer) DO UPDATE SET "
    + UPSERT_SET.format(t=TABLE, now="now()")
    + ", updated_at = now()"
)
#: Pending entries that may be sent now (the claim index's predicate, and its range).
_AVAILABLE = "state = 'pending' AND available_at <= now()"
_CLAIM = f"""
WITH RECURSIVE issuers AS (
    (SELECT issuer FROM {TABLE} WHERE state = 'pending' ORDER BY issuer LIMIT 1)
    UNION ALL
    SELECT (SELECT o.issuer FROM {TABLE} AS o WHERE o.state = 'pending' AND o.issuer > i.issuer
            ORDER BY o.issuer LIMIT 1)
    FROM issuers AS i WHERE i.issuer IS NOT NULL
), heads AS (
    SELECT i.issuer, h.available_at, h.id FROM issuers AS i, LATERAL (
        SELECT available_at, id FROM {TABLE} WHERE issuer = i.issuer AND {_AVAILABLE}
        ORDER BY available_at, id LIMIT 1
    ) AS h
    WHERE i.issuer IS NOT NULL  -- the recursion's end, never an issuer
        AND i.issuer <> ALL($4::text[])  -- issuers whose documents wait for an operator
), served AS MATERIALIZED (
    SELECT issuer FROM heads ORDER BY available_at, id LIMIT $1
), share AS (
    SELECT ceil($1::float8 / greatest(count(*), 1))::integer AS n FROM served
), fresh AS (
    SELECT f.id, f.available_at FROM served AS s, share, LATERAL (
        SELECT id, available_at FROM {TABLE} WHERE issuer = s.issuer AND {_AVAILABLE}
        ORDER BY available_at, id LIMIT share.n FOR UPDATE SKIP LOCKED
    ) AS f
), stale AS (
    SELECT id FROM {TABLE} WHERE state = 'in_flight' AND lease_until < now()
        AND issuer <> ALL($4::text[])
    ORDER BY lease_until LIMIT $1 FOR UPDATE SKIP LOCKED
), chosen AS (
    (SELECT id FROM fresh ORDER BY available_at, id LIMIT $1) UNION SELECT id FROM stale LIMIT $1
)
UPDATE {TABLE} AS o SET state = 'in_flight', lease = $2,
    lease_until = now() + make_interval(secs => $3), claims = o.claims + 1, updated_at = now()
FROM chosen WHERE o.id = chosen.id
RETURNING o.id, o.key, o.issuer, o.document, o.encrypted, o.status, o.ambiguous, o.sending,
    o.claims, o.outcome, o.failures, o.doc_fingerprint
"""  # noqa: S608


def _in_id_order(where: str, statement: str) -> str:
    """``statement``, which joins ``locked``: the rows ``where`` selects, locked by id.

    Locking in one order (ids, ascending) is what keeps concurrent writes out of a
    deadlock: none can hold a row another one waits for while it waits for one of its.
    """
    lock = f"SELECT id FROM {TABLE} WHERE {where} ORDER BY id FOR UPDATE"  # noqa: S608
    return f"WITH locked AS MATERIALIZED ({lock}) {statement}"


# A final refusal of content that was replaced while in flight (enqueued again, changed)
# is not final for the new content, and a failed round is not charged to it: the entry
# goes back to be sent at once, with no failed rounds.
_STALE = "(t.fingerprint IS NOT NULL AND o.doc_fingerprint IS DISTINCT FROM t.fingerprint)"
_REPLACED = "(t.state != 'done' AND o.doc_fingerprint IS DISTINCT FROM t.content)"
_FRESH = f"({_STALE} OR {_REPLACED})"
_SETTLE = _in_id_order(
    "id = ANY($1::bigint[])",
    f"""UPDATE {TABLE} AS o SET
    state = CASE WHEN {_FRESH} THEN 'pending' ELSE t.state END, status = t.status,
    final = t.final AND NOT {_STALE},
    ambiguous = o.ambiguous OR t.ambiguous, sending = false, fingerprint = t.fingerprint,
    attempts = t.attempts, outcome = t.outcome,
    failures = CASE WHEN {_FRESH} THEN 0 ELSE t.failures END,
    available_at = now() + CASE WHEN {_FRESH} THEN interval '0' ELSE make_interval(secs => t.delay)
        END,
    lease = NULL, lease_until = NULL, updated_at = now()
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::boolean[], $6::boolean[],
    $7::text[], $8::integer[], $9::text[], $10::float8[], $11::integer[], $12::text[])
    AS t(id, lease, state, status, final, ambiguous, fingerprint, attempts, outcome, delay,
        failures, content),
    locked
WHERE o.id = t.id AND o.id = locked.id AND o.lease = t.lease AND o.state = 'in_flight'
RETURNING o.id""",  # noqa: S608
)
_MARK_SENDING = _in_id_order(
    "id = ANY($1::bigint[])",
    f"UPDATE {TABLE} AS o SET sending = $3, updated_at = now() "  # noqa: S608
    "FROM unnest($1::bigint[], $2::text[]) AS t(id, lease), locked "
    "WHERE o.id = t.id AND o.id = locked.id AND o.lease = t.lease AND o.state = 'in_flight' "
    "RETURNING o.id",
)
_LEASED = "lease = ANY($1::text[]) AND state = 'in_flight'"
_EXTEND = _in_id_order(
    _LEASED,
    f"UPDATE {TABLE} AS o SET lease_until = now() + make_interval(secs => $2) "  # noqa: S608
    "FROM locked WHERE o.id = locked.id RETURNING o.id",
)
_RELEASE = _in_id_order(
    _LEASED,
    f"UPDATE {TABLE} AS o SET state = 'pending', lease = NULL, lease_until = NULL, "  # noqa: S608
    "available_at = now() + make_interval(secs => $2), updated_at = now() "
    "FROM locked WHERE o.id = locked.id RETURNING o.id",
)
#: The rows of the keys ``$1`` of the issuer ``$2`` (its own, or the one of 0.3 it
#: adopts), or of every issuer when ``$2`` is null.
_WHOSE = (
    f"key = ANY($1::text[]) AND ($2::text IS NULL OR issuer = $2 OR (issuer = '' AND NOT "  # noqa: S608
    f"EXISTS (SELECT 1 FROM {TABLE} AS own WHERE own.key = {TABLE}.key AND own.issuer = $2)))"
)
_RETRY = _in_id_order(
    f"{_WHOSE} AND state != 'in_flight'",
    f"UPDATE {TABLE} AS o SET state = 'pending', final = false, available_at = now(), "  # noqa: S608
    "failures = 0, claims = 0, updated_at = now() FROM locked WHERE o.id = locked.id "
    "RETURNING o.id",
)
_FORGET = _in_id_order(
    _WHOSE,
    f"DELETE FROM {TABLE} AS o USING locked WHERE o.id = locked.id RETURNING o.id",  # noqa: S608
)


#: What of a key/value DSN names the database (never ``password`` nor ``passfile``).
_NAMING = ("host", "hostaddr", "port", "dbname", "user")
_KEY_VALUE = re.compile(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)")


def described(dsn: str) -> str:
    """Which database ``dsn`` names, without its password: user, host, port, database.

    A URL keeps its scheme, user, host, port and path (no password, no query: a query
    may hold ``password=`` or ``sslpassword=``); a ``key=value`` string keeps the keys of
    :data:`_NAMING`. What cannot be read is not shown.
    """
    if "://" in dsn:
        scheme = dsn.partition("://")[0]
        try:
            parts = urllib.parse.urlsplit(dsn)
            host, port = parts.hostname or "", parts.port
        except ValueError:  # a port that is no number, a bracket left open
            return f"{scheme}://..."
        user = f"{parts.username}@" if parts.username else ""
        host = f"[{host}]" if ":" in host else host
        return f"{scheme}://{user}{host}{f':{port}' if port else ''}{parts.path}"
    pairs = dict(_KEY_VALUE.findall(dsn))
    return " ".join(f"{key}={pairs[key]}" for key in _NAMING if key in pairs)


def _driver() -> Any:
    try:
        import asyncpg  # noqa: PLC0415  (optional: only an outbox in PostgreSQL needs it)
    except ImportError:
        raise LedgerError(
            "an outbox in PostgreSQL needs asyncpg: pip install 'invoicing-async[postgres]'",
            reason="unreadable",
        ) from None
    return asyncpg


def _entry(row: Any) -> LedgerEntry:
    key, state, status, final, ambiguous, sending, fingerprint, outcome, updated = row[:9]
    failures, available, issuer = row[9:12]
    return entry_from_row(
        key,
        state,
        status,
        final=final,
        maybe_committed=ambiguous or sending,
        fingerprint=fingerprint,
        outcome=outcome,
        updated_at=updated,
        failures=failures,
        available_at=available,
        issuer=issuer,
    )


class PostgresStore:
    """The outbox table over an asyncpg pool (see :class:`~._store.Store`)."""

    def __init__(self, dsn: str, *, pool_size: int = 4) -> None:
        self._dsn = dsn
        self._pool_size = pool_size
        self._pool: Any = None
        self._current = False  # the table is known to be of the current format

    async def pool(self) -> Any:
        """The connection pool, created on first use."""
        if self._pool is None:
            asyncpg = _driver()
            try:
                # No floor of idle connections: none is kept open (and re-opened in the
                # background while the database is down) for nothing.
                self._pool = await asyncpg.create_pool(
                    self._dsn, min_size=0, max_size=self._pool_size
                )
            except Exception as exc:  # noqa: BLE001  (asyncpg's errors, OSError, timeouts: typed)
                raise _failure(
                    asyncpg, exc, "cannot connect to the outbox database", otherwise="unreadable"
                ) from None
        return self._pool

    async def run(
        self, operation: Callable[[Any], Awaitable[T]], *, transaction: bool = False
    ) -> T:
        """``operation(connection)`` on a pooled connection, in a transaction if asked.

        One statement needs none: it is a transaction of its own. The connection is this
        operation's alone until it returns; if anything but an SQL error happens on it
        (the connection lost, the operation cancelled mid-statement, asyncpg's protocol
        out of step after the server ended the session), it is terminated, never used
        again.

        A deadlock or serialization failure runs it again (a few times, after a short
        random pause); a lost or refused connection is ``LedgerError("unavailable")``,
        a lock waited for too long ``LedgerError("locked")``.
        """
        asyncpg = _driver()
        attempt = 0
        while True:
            attempt += 1
            pool = await self.pool()
            try:
                async with pool.acquire() as connection:
                    try:
                        if not transaction:
                            return await operation(connection)
                        async with connection.transaction():
                            return await operation(connection)
                    except asyncpg.PostgresError:
                        raise  # the server's answer to a statement: the session goes on
                    except BaseException:
                        connection.terminate()
                        raise
            except asyncpg.PostgresError as exc:
                if exc.sqlstate in _RETRIED and attempt < _ATTEMPTS:
                    await asyncio.sleep(backoff(attempt, base=0.02, cap=0.02 * _ATTEMPTS))
                    continue
                raise _failure(asyncpg, exc, "cannot use the outbox") from None
            except (
                OSError,
                asyncio.TimeoutError,
                asyncpg.InterfaceError,
                asyncpg.InternalClientError,
            ) as exc:
                raise _failure(asyncpg, exc, "cannot use the outbox") from None

    async def close(self) -> None:
        """Close the pool; a database that does not answer within a few seconds is cut off."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # Cut off (asyncpg: "use wait_for to set a timeout"), its close terminates them all.
        closed = await within(pool.close(), CLOSE_TIMEOUT)
        if closed is not None:
            closed.result()

    async def setup(self) -> None:
        """Create or upgrade the table if it is missing or older; safe from every worker.

        The format is read first (a plain read, waiting for nobody's lock): a current
        table is left alone, however long an application's transaction holds it.
        """
        if self._current:
            return
        found = await self.run(postgres_version)
        if found < POSTGRES_VERSION:
            try:
                found = await self._upgrade()  # the format found under the upgrade's lock
            except LedgerError as exc:
                if exc.reason != "locked":
                    raise
                raise await self._blocked(found) from None
        if found > POSTGRES_VERSION:
            raise LedgerError(
                f"the outbox table was made by a newer version (format {found})",
                reason="unreadable",
            )
        self._current = True

    async def _upgrade(self) -> int:
        upgrade = functools.partial(upgrade_postgres, lock_timeout=LOCK_TIMEOUT)
        return await self.run(upgrade, transaction=True)

    async def _blocked(self, found: int | None, table: str = TABLE) -> LedgerError:
        """The error of a table change that waited too long: who holds the table.

        The sessions holding a lock on it are named by process id, state and the start
        of their transaction, never by their statements (an application's statement may
        hold anything).
        """
        what = (
            f"create the table {table}"
            if not found
            else f"upgrade the outbox table {table} from format {found} to {POSTGRES_VERSION}"
        )
        holders = ""
        try:
            rows = await self.run(lambda c: _rows(c.fetch(_HOLDERS, table)))
        except LedgerError:
            rows = []
        if rows:
            holders = " (held by " + "; ".join(_holder(row) for row in rows) + ")"
        return LedgerError(
            f"cannot {what}: another transaction holds a lock on it{holders} for longer "
            f"than {LOCK_TIMEOUT:g} s. An application's transaction that enqueued and is "
            "still open, or a long query, blocks the change: commit or end it, then try "
            "again (nothing was changed)",
            reason="locked",
        )

    async def insert(self, documents: Sequence[Ready], connection: Any = None) -> None:
        """Enqueue ``documents``; each finds the entry its key had before issuers were stored."""
        rows = [(d.key, d.issuer, d.body, d.encrypted, d.fingerprint) for d in documents]
        refs = [d.ref for d in documents]

        async def insert(connection: Any) -> None:
            await adopt_postgres(connection, refs)
            await connection.executemany(_INSERT, rows)

        await self.setup()  # once: the table of this version's format
        if connection is not None:  # the caller's transaction
            await insert(connection)
            return
        await self.run(insert, transaction=True)

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        return await self.run(lambda connection: _rows(connection.fetch(sql, *args)))

    # --- the worker's side ----------------------------------------------------------------

    async def claim(
        self, limit: int, lease: str, seconds: float, skip: Sequence[str] = ()
    ) -> list[Claim]:
        rows = await self._fetch(_CLAIM, limit, lease, float(seconds), list(skip))
        return [
            make_claim(
                row["id"],
                lease,
                key=row["key"],
                issuer=row["issuer"],
                document=row["document"],
                encrypted=row["encrypted"],
                status=row["status"],
                maybe_committed=row["ambiguous"] or row["sending"],
                claims=row["claims"],
                outcome=row["outcome"],
                failures=row["failures"],
                content=row["doc_fingerprint"],
            )
            for row in rows
        ]

    async def extend(self, leases: Sequence[str], seconds: float) -> None:
        await self._fetch(_EXTEND, list(leases), float(seconds))

    async def mark_sending(
        self, items: Sequence[tuple[Any, str]], sending: bool = True
    ) -> set[Any]:
        rows = await self._fetch(
            _MARK_SENDING, [row_id for row_id, _ in items], [lease for _, lease in items], sending
        )
        return {row["id"] for row in rows}

    async def settle(self, items: Sequence[Settlement]) -> set[Any]:
        columns = [
            [getattr(s, name) for s in items]
            for name in (
                "id", "lease", "state", "status", "final", "ambiguous", "fingerprint",
                "attempts", "outcome", "delay", "failures", "content",
            )
        ]  # fmt: skip
        rows = await self._fetch(_SETTLE, *columns)
        return {row["id"] for row in rows}

    async def release(self, leases: Sequence[str], delay: float) -> None:
        await self._fetch(_RELEASE, list(leases), float(delay))

    async def remaining(self, skip: Sequence[str] = ()) -> int:
        rows = await self._fetch(
            f"SELECT count(*) FROM {TABLE} WHERE state IN ('pending', 'in_flight') "  # noqa: S608
            "AND issuer <> ALL($1::text[])",
            list(skip),
        )
        return int(rows[0][0])

    async def waiting(self, issuers: Sequence[str]) -> dict[str, int]:
        rows = await self._fetch(
            f"SELECT issuer, count(*) FROM {TABLE} WHERE issuer = ANY($1::text[]) "  # noqa: S608
            "AND state IN ('pending', 'in_flight') GROUP BY issuer",
            list(issuers),
        )
        return {str(row[0]): int(row[1]) for row in rows}

    async def ping(self) -> None:
        await self.run(lambda connection: connection.fetchval("SELECT 1"))

    async def parked(self) -> int:
        rows = await self._fetch(f"SELECT count(*) FROM {TABLE} WHERE state = $1", PARKED)  # noqa: S608
        return int(rows[0][0])

    # --- reading and marking --------------------------------------------------------------

    async def get(self, key: str, issuer: str | None = None) -> LedgerEntry | None:
        """See :meth:`~._sqlite_ledger.Ledger.get`."""
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM {TABLE} WHERE key = $1 ORDER BY issuer",  # noqa: S608
            key,
        )
        if issuer is not None:
            found = match(rows, [Ref(issuer, key)], identity=lambda row: Ref(row[11], row[0]))
            return _entry(found[Ref(issuer, key)]) if found else None
        return one_of(key, [_entry(row) for row in rows])

    async def entries(self, status: OutcomeStatus | str | None) -> AsyncIterator[LedgerEntry]:
        wanted = status.value if isinstance(status, OutcomeStatus) else status
        where, args = "(key, issuer) > ($1, $2)", []
        if wanted in STATES:
            where, args = "(key, issuer) > ($1, $2) AND state = $3", [wanted]
        elif wanted is not None:
            where, args = "(key, issuer) > ($1, $2) AND state = 'done' AND status = $3", [wanted]
        after = ("", "")
        while True:
            rows = await self._fetch(
                f"SELECT {_COLUMNS} FROM {TABLE} WHERE {where} "  # noqa: S608
                "ORDER BY key, issuer LIMIT 500",
                *after,
                *args,
            )
            for row in rows:
                yield _entry(row)
            if len(rows) < 500:
                return
            after = (rows[-1]["key"], rows[-1]["issuer"])

    async def counts(self) -> dict[str, int]:
        rows = await self._fetch(
            f"SELECT CASE WHEN state = 'done' THEN status ELSE state END AS s, count(*) "  # noqa: S608
            f"FROM {TABLE} GROUP BY 1"
        )
        return {str(row[0]): int(row[1]) for row in rows}

    async def retry(self, keys: Sequence[str], issuer: str | None = None) -> int:
        return len(await self._fetch(_RETRY, list(keys), issuer))

    async def forget(self, keys: Sequence[str], issuer: str | None = None) -> int:
        return len(await self._fetch(_FORGET, list(keys), issuer))


async def _rows(fetching: Awaitable[Any]) -> list[Any]:
    return list(await fetching)


#: The sessions (other than ours) holding a lock on a table.
_HOLDERS = """
SELECT DISTINCT a.pid, a.state, a.xact_start, a.application_name
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.relation = to_regclass($1) AND l.granted AND a.pid <> pg_backend_pid()
ORDER BY a.pid
"""


def _holder(row: Any) -> str:
    pid, state, started, application = row
    words = [f"pid {pid}"]
    if application:
        words.append(repr(application))
    if state:
        words.append(str(state))
    if started is not None:
        words.append(f"in a transaction since {started.isoformat(timespec='seconds')}")
    return ", ".join(words)


def _failure(
    asyncpg: Any, error: BaseException, what: str, *, otherwise: str = "write_failed"
) -> LedgerError:
    """The ``LedgerError`` for a failure of the database: ``unavailable`` if it may pass."""
    sqlstate = getattr(error, "sqlstate", None) or ""
    transient = (
        isinstance(
            error,
            (OSError, asyncio.TimeoutError, asyncpg.InterfaceError, asyncpg.InternalClientError),
        )
        or sqlstate.startswith("08")
        or sqlstate in _UNAVAILABLE
        or sqlstate in _RETRIED
    )
    reason = "unavailable" if transient else otherwise
    if sqlstate == _LOCK_NOT_AVAILABLE:
        reason = "locked"
    elif sqlstate.startswith("28") or sqlstate in _REFUSED:
        reason = "refused"
    if isinstance(error, asyncpg.InternalClientError):  # see the module docstring
        return LedgerError(
            f"{what}: the connection was lost (the server ended the session; asyncpg: {error})",
            reason=reason,
        )
    return LedgerError(f"{what}: {type(error).__name__}: {error}", reason=reason)
