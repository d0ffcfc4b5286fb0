"""An outbox worker is a daemon: it rides out what a database does to it.

PostgreSQL: a deadlock (SQLSTATE 40P01) costs a retry, not the worker. SQLite: another
connection holding the write lock longer than the busy timeout (an application's long
transaction) makes the worker wait, not fail. The restart of PostgreSQL under three
worker processes is in tests/system/test_fleet.py.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading

import asyncpg
import pytest

from invoicing_async import InvoicingClient, Ledger, LedgerError, OutcomeStatus
from invoicing_async._durable import _sqlitefile as _sqlite_file
from invoicing_async._durable.store import Settlement
from invoicing_async.outbox import PostgresOutbox, SqliteOutbox
from invoicing_async.testing import instant_retries
from invoicing_sandbox import Sandbox, sample_invoices


def settlement(claim) -> Settlement:
    return Settlement(
        claim.id, claim.lease, "done", "accepted", True, False, None, 1, "{}", 0.0
    )  # fmt: skip


async def test_postgres_write_that_loses_a_deadlock_is_retried(postgres_dsn):
    """A worker's settle waits for a row another transaction holds, and that transaction
    then waits for a row the settle holds: PostgreSQL breaks the circle by failing the
    settle (deadlock detected, 40P01). The store runs it again and it succeeds (before:
    ``LedgerError: cannot write the outbox: deadlock detected`` ended the worker)."""
    async with PostgresOutbox(postgres_dsn) as outbox:
        await outbox.enqueue(sample_invoices(2, lines=1))
        store = outbox._db
        claims = sorted(await store.claim(2, "lease-1", 30.0), key=lambda c: c.id)
        first, second = claims
        other = await asyncpg.connect(postgres_dsn)
        watcher = await asyncpg.connect(postgres_dsn)
        try:
            # The other transaction detects no deadlock itself: the settle is the victim.
            await other.execute("SET deadlock_timeout = '20s'")
            transaction = other.transaction()
            await transaction.start()
            await other.execute(
                "SELECT 1 FROM invoicing_outbox WHERE id = $1 FOR UPDATE", second.id
            )
            settling = asyncio.ensure_future(store.settle([settlement(c) for c in claims]))
            # Until the settle holds the first row and waits for the second.
            while not await watcher.fetchval(  # noqa: ASYNC110  (the server's state, polled)
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            ):
                await asyncio.sleep(0.01)
            await other.execute(
                "SELECT 1 FROM invoicing_outbox WHERE id = $1 FOR UPDATE", first.id
            )  # a circle: PostgreSQL fails the settle after its deadlock_timeout (1 s)
            await transaction.commit()
            assert await asyncio.wait_for(settling, 30) == {first.id, second.id}
        finally:
            await other.close()
            await watcher.close()
        assert await outbox.counts() == {"accepted": 2}


async def test_a_statement_on_a_session_the_server_ended_is_the_database_unavailable(
    postgres_server, postgres_dsn
):
    """The server ends an idle pooled session (a restart does so to every session: a FATAL
    message, then the socket closes). A statement started on that connection in between
    fails as the database unavailable (LedgerError ``unavailable``: a worker waits and
    goes on), never with asyncpg's ``InternalClientError: cannot switch to state 12;
    another operation (2) is in progress`` that killed a worker (issue 26); the next
    statement gets a new connection. The server's message is let in by blocking the
    event loop while it is sent, then by 0 to 3 turns of the loop."""
    async with PostgresOutbox(postgres_dsn, pool_size=1) as outbox:
        await outbox.enqueue(sample_invoices(3, lines=1))
        store = outbox._db
        seen = []
        for turns in range(4):
            pid = await store.run(lambda c: c.fetchval("SELECT pg_backend_pid()"))
            # Blocks the loop until the session ended: its message waits in the socket.
            postgres_server.sql(f"SELECT pg_terminate_backend({pid}, 10000)")
            for _ in range(turns):
                await asyncio.sleep(0)
            try:
                await store.remaining()
            except LedgerError as exc:
                seen.append(exc.reason)
            assert await store.remaining() == 3
        assert seen  # the window was met
        assert set(seen) == {"unavailable"}, seen


class Told(logging.Handler):
    """Collects the ledger area's lines; ``waiting`` is set by the first WARNING."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[int, str]] = []
        self.waiting = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, record.getMessage()))
        if record.levelno >= logging.WARNING:
            self.waiting.set()


async def test_sqlite_worker_waits_out_a_write_lock_held_by_another_connection(
    tmp_path, monkeypatch
):
    """An application holds the outbox file's write lock (a long transaction) for longer
    than the busy timeout while a worker runs: the worker says so once (WARNING), waits,
    says once that it writes again (INFO), and sends every invoice once (before: the
    worker ended with ``LedgerError: cannot write the ledger: database is locked``)."""
    monkeypatch.setattr(_sqlite_file, "BUSY_TIMEOUT", 0.1, raising=False)
    path = tmp_path / "outbox.db"
    told = Told()
    logger = logging.getLogger("invoicing_async.ledger")
    logger.addHandler(told)
    monkeypatch.setattr(logger, "level", logging.INFO)
    try:
        async with Sandbox(key_algorithm="cv25519") as sb, SqliteOutbox(path) as outbox:
            await outbox.enqueue(sample_invoices(40, issuer_vat=sb.client_id, lines=1))
            application = sqlite3.connect(path, isolation_level=None)
            application.execute("BEGIN IMMEDIATE")  # the application's long transaction
            with instant_retries():
                async with InvoicingClient(
                    sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
                ) as client:
                    worker = asyncio.ensure_future(
                        outbox.run_worker(client, concurrency=4, stop_when_empty=True, poll=0.02)
                    )
                    assert await asyncio.to_thread(told.waiting.wait, 30)  # it waits
                    assert not worker.done()
                    application.execute("COMMIT")
                    application.close()
                    counts = await asyncio.wait_for(worker, 60)
            assert counts == {OutcomeStatus.ACCEPTED: 40}
            assert await outbox.counts() == {"accepted": 40}
            assert sb.commit_count == 40
    finally:
        logger.removeHandler(told)
    warnings = [m for level, m in told.lines if level >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "is locked by another connection" in warnings[0]
    assert sum("is no longer locked" in m for _, m in told.lines) == 1


async def test_two_batches_of_one_process_on_one_ledger_are_told_apart(tmp_path):
    """Two concurrent batches of one process on one ledger file: the second is refused
    with a message that says so (not "in use by another process" with its own pid)."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.hold()  # the first batch is certainly still running
        ledger = Ledger(tmp_path / "shift.db")
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client:
            first = asyncio.ensure_future(
                client.submit_many(sample_invoices(3, issuer_vat=sb.client_id), ledger=ledger)
            )
            await sb.wait_held(1)
            with pytest.raises(LedgerError) as refused:
                await client.submit_many(
                    sample_invoices(3, issuer_vat=sb.client_id), ledger=tmp_path / "shift.db"
                )
            sb.release()
            assert all(o.ok for o in await first)
    message = str(refused.value)
    assert refused.value.reason == "locked"
    assert "another batch of this process" in message, message
    assert "another process" not in message
