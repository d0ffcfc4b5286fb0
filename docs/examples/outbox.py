"""The transactional outbox: enqueue with your own data, drain with workers.

Run as a script it uses a SQLite outbox (one machine); ``main(dsn)`` runs the same code
on PostgreSQL, the fleet's outbox (tests/test_docs.py runs both).
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from pathlib import Path

from invoicing_async import InvoicingClient, OutcomeStatus, document_key
from invoicing_async.outbox import PARKED, PostgresOutbox, SqliteOutbox
from invoicing_sandbox import Sandbox, sample_invoices


async def enqueue_sqlite(path: Path, invoices: list[dict]) -> None:
    """Record sales and enqueue their invoices in one SQLite transaction."""
    # region enqueue-sqlite
    outbox = SqliteOutbox(path)
    await outbox.setup()
    connection = sqlite3.connect(path)  # the application's own database
    with connection:  # one transaction: the sales and their invoices, or neither
        connection.execute("CREATE TABLE IF NOT EXISTS sales (number INTEGER)")
        for invoice in invoices:
            connection.execute("INSERT INTO sales VALUES (?)", (invoice["Number"],))
        await outbox.enqueue(invoices, connection=connection)
    connection.close()
    # endregion enqueue-sqlite
    await outbox.close()  # its writer thread ends (the worker opens the file again)


async def enqueue_postgres(dsn: str, invoices: list[dict]) -> None:
    """Record sales and enqueue their invoices in one PostgreSQL transaction."""
    import asyncpg  # noqa: PLC0415  (the postgres extra)

    # region enqueue-postgres
    outbox = PostgresOutbox(dsn)
    await outbox.setup()  # idempotent: every worker may call it at start
    connection = await asyncpg.connect(dsn)
    async with connection.transaction():  # the sales and their invoices, or neither
        await connection.execute("CREATE TABLE IF NOT EXISTS sales (number integer)")
        for invoice in invoices:
            await connection.execute("INSERT INTO sales VALUES ($1)", invoice["Number"])
        await outbox.enqueue(invoices, connection=connection)
    await connection.close()
    # endregion enqueue-postgres
    await outbox.close()


async def retry_parked(outbox: PostgresOutbox | SqliteOutbox) -> None:
    """Look at the poison documents a worker gave up on, and send them again."""
    # region parked
    parked = [entry async for entry in outbox.entries(PARKED)]
    for entry in parked:  # each keeps its last outcome and its count of failed rounds
        print(entry.key, entry.failures, entry.outcome and entry.outcome.error)
    # Once the cause is fixed: claimed again at once, with a fresh budget of rounds.
    await outbox.retry(entry.key for entry in parked)
    # endregion parked


async def main(dsn: str | None = None) -> None:
    """Enqueue invoices (SQLite, or PostgreSQL at ``dsn``), then drain them."""
    async with Sandbox() as sandbox:
        invoices = sample_invoices(40, issuer_vat=sandbox.client_id)
        with tempfile.TemporaryDirectory() as tmp:
            if dsn is None:
                await enqueue_sqlite(Path(tmp, "app.db"), invoices)
                outbox = SqliteOutbox(Path(tmp, "app.db"))
            else:
                await enqueue_postgres(dsn, invoices)
                outbox = PostgresOutbox(dsn)
            # region worker
            async with (
                outbox,
                InvoicingClient(
                    sandbox.base_url,
                    sandbox.client_id,
                    sandbox.client_secret,
                    provider_key=sandbox.provider_key,
                ) as client,
            ):
                # A service runs this forever (stop_when_empty=False), in as many
                # processes and on as many machines as it likes.
                counts = await outbox.run_worker(
                    client, concurrency=16, stop_when_empty=True
                )
                key = document_key(invoices[0])  # "id:<InternalDocumentId>"
                entry = await outbox.status(key)
                assert entry is not None
                assert entry.outcome is not None
                assert entry.outcome.result is not None
                print(entry.status, entry.outcome.result.mark)  # accepted, its mark
                await retry_parked(outbox)  # poison documents, if any (none here)
            # endregion worker
        assert counts == {OutcomeStatus.ACCEPTED: 40}
        assert sandbox.commit_count == 40


if __name__ == "__main__":
    asyncio.run(main())
