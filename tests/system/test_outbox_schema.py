"""The outbox's format: read before any DDL, upgraded step by step, never in the way.

A worker starting beside an application's open transaction on the outbox table (a long
import that enqueued) sends what is committed at once: its start-up reads the table's
format and runs no DDL on a current table (before: ``CREATE … IF NOT EXISTS`` waited
for the transaction's lock, 0 of 20 documents sent in 120 s). An outbox of 0.3
(format 1, made here with 0.3's own DDL) is upgraded and resumed with its entries;
an upgrade that an open transaction blocks gives up after ``lock_timeout`` and says
which session holds the table.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3

import asyncpg
import pytest

from invoicing_async import (
    Deferral,
    DeferredOutcome,
    InvoicingClient,
    IssuerPool,
    Ledger,
    LedgerError,
    Outcome,
    OutcomeStatus,
    document_key,
    outcome_to_dict,
)
from invoicing_async._doc.document import serialize_document
from invoicing_async._durable import postgres as _postgres_outbox
from invoicing_async._durable._schema import POSTGRES_VERSION, SQLITE_STEPS, SQLITE_VERSION
from invoicing_async.outbox import PENDING, PostgresOutbox, SqliteOutbox
from invoicing_async.testing import instant_retries
from invoicing_sandbox import Sandbox, sample_invoices

#: The outbox table exactly as 0.2 and 0.3 created it (format 1).
POSTGRES_0_3 = """
CREATE TABLE IF NOT EXISTS invoicing_outbox (
    id bigserial PRIMARY KEY,
    key text NOT NULL UNIQUE,
    state text NOT NULL DEFAULT 'pending',
    status text,
    final boolean NOT NULL DEFAULT false,
    ambiguous boolean NOT NULL DEFAULT false,
    sending boolean NOT NULL DEFAULT false,
    fingerprint text,
    attempts integer NOT NULL DEFAULT 0,
    claims integer NOT NULL DEFAULT 0,
    outcome text,
    document bytea NOT NULL,
    encrypted boolean NOT NULL DEFAULT true,
    doc_fingerprint text,
    available_at timestamptz NOT NULL DEFAULT now(),
    lease text,
    lease_until timestamptz,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS invoicing_outbox_pending ON invoicing_outbox (available_at, id)
    WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS invoicing_outbox_leased ON invoicing_outbox (lease_until)
    WHERE state = 'in_flight';
CREATE INDEX IF NOT EXISTS invoicing_outbox_lease ON invoicing_outbox (lease)
    WHERE lease IS NOT NULL;
CREATE TABLE IF NOT EXISTS invoicing_outbox_schema (version integer NOT NULL);
INSERT INTO invoicing_outbox_schema (version) VALUES (1);
"""
#: The ledger file exactly as 0.2 and 0.3 created it (format 1).
SQLITE_0_3 = """
CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    status TEXT,
    final INTEGER NOT NULL DEFAULT 0,
    ambiguous INTEGER NOT NULL DEFAULT 0,
    sending INTEGER NOT NULL DEFAULT 0,
    fingerprint TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    claims INTEGER NOT NULL DEFAULT 0,
    outcome TEXT,
    document BLOB,
    encrypted INTEGER NOT NULL DEFAULT 1,
    doc_fingerprint TEXT,
    available_at REAL NOT NULL DEFAULT 0,
    lease TEXT,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_open ON entries (state, available_at) WHERE state != 'done';
PRAGMA user_version=1;
"""


def client_of(sb: Sandbox) -> InvoicingClient:
    return InvoicingClient(
        sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
    )


async def drain(outbox, sb) -> dict[OutcomeStatus, int]:
    with instant_retries():
        async with client_of(sb) as client:
            return await asyncio.wait_for(
                outbox.run_worker(client, concurrency=4, stop_when_empty=True, poll=0.02), 60
            )


async def test_a_worker_starts_beside_an_open_transaction_that_enqueued(postgres_dsn):
    """20 invoices committed long ago; an application's transaction enqueues one more and
    stays open (a long import): a worker started now (its outbox set up again, as every
    worker does) sends the 20 at once without waiting for that transaction, and the
    21st once it commits."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(21, issuer_vat=sb.client_id, lines=1)
        async with PostgresOutbox(postgres_dsn) as outbox:
            await outbox.enqueue(documents[:20])
        application = await asyncpg.connect(postgres_dsn)
        try:
            transaction = application.transaction()
            await transaction.start()
            async with PostgresOutbox(postgres_dsn) as outbox:
                await outbox.enqueue(documents[20:], connection=application)
            worker_outbox = PostgresOutbox(postgres_dsn)
            try:
                await asyncio.wait_for(worker_outbox.setup(), 30)  # as every worker starts
                assert await drain(worker_outbox, sb) == {OutcomeStatus.ACCEPTED: 20}
            finally:
                await worker_outbox.close()
            assert sb.commit_count == 20
            await transaction.commit()
        finally:
            await application.close()
        async with PostgresOutbox(postgres_dsn) as outbox:
            assert await drain(outbox, sb) == {OutcomeStatus.ACCEPTED: 1}
            assert await outbox.counts() == {"accepted": 21}


async def make_0_3_outbox(dsn: str, sb: Sandbox, documents) -> list[str]:
    """A format 1 outbox as 0.3 left it: pending entries, one in flight whose worker died
    after its request was committed, one accepted."""
    keys = []
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(POSTGRES_0_3)
        for document in documents:
            body = serialize_document(document)
            keys.append(
                await connection.fetchval(
                    "INSERT INTO invoicing_outbox (key, document, doc_fingerprint) "
                    "VALUES ($1, $2, 'f') RETURNING key",
                    "id:" + document["DistributionDetails"]["InternalDocumentId"],
                    body,
                )
            )
        await connection.execute(
            "UPDATE invoicing_outbox SET state = 'in_flight', sending = true, lease = 'dead', "
            "lease_until = now() - interval '1 minute', claims = 1 WHERE key = $1",
            keys[1],
        )
        await connection.execute(
            "UPDATE invoicing_outbox SET state = 'done', status = 'accepted', final = true "
            "WHERE key = $1",
            keys[2],
        )
    finally:
        await connection.close()
    return keys


async def dead_workers_0_3_outbox(dsn: str, sb: Sandbox) -> tuple[list, list[str]]:
    """Six invoices in a 0.3 outbox (see :func:`make_0_3_outbox`), the one in flight
    committed by its dead worker's request; the invoices and their keys."""
    documents = sample_invoices(6, issuer_vat=sb.client_id, lines=1)
    async with client_of(sb) as client:
        await client.submit_secure(documents[1])  # the dead worker's request
    return documents, await make_0_3_outbox(dsn, sb, documents)


async def test_a_0_3_outbox_is_upgraded_and_resumed(postgres_dsn):
    """An outbox made by 0.3 (format 1): opening it upgrades the table (format 4), keeps
    every entry, and a worker resumes them: the pending ones are sent, the one in flight
    when its worker died (its request committed) is re-sent and its 409 recorded as its
    own commit, the accepted one is left alone."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        _documents, keys = await dead_workers_0_3_outbox(postgres_dsn, sb)
        async with PostgresOutbox(postgres_dsn) as outbox:
            connection = await asyncpg.connect(postgres_dsn)
            try:
                versions = await connection.fetch("SELECT version FROM invoicing_outbox_schema")
            finally:
                await connection.close()
            assert max(v["version"] for v in versions) == POSTGRES_VERSION == 4
            assert await outbox.counts() == {PENDING: 4, "in_flight": 1, "accepted": 1}
            assert (await outbox.status(keys[0])).failures == 0
            assert await drain(outbox, sb) == {OutcomeStatus.ACCEPTED: 5}
            assert await outbox.counts() == {"accepted": 6}
            assert (await outbox.status(keys[1])).status is OutcomeStatus.ACCEPTED
        assert sb.commit_count == 5  # the accepted one was not sent again
        assert all(held.commits == 1 for held in sb.committed.values())


async def test_an_upgrade_an_open_transaction_blocks_says_what_holds_the_table(
    postgres_dsn, monkeypatch
):
    """A 0.3 outbox and an application's transaction that enqueued into it and stays
    open: the upgrade waits ``lock_timeout`` at most, then LedgerError (``locked``)
    names the session (its pid, its state) and what to do, without its statements;
    nothing was changed. Once the transaction commits, the upgrade runs."""
    monkeypatch.setattr(_postgres_outbox, "LOCK_TIMEOUT", 0.2)
    async with Sandbox(key_algorithm="cv25519") as sb:
        await make_0_3_outbox(postgres_dsn, sb, sample_invoices(3, issuer_vat=sb.client_id))
    application = await asyncpg.connect(postgres_dsn)
    try:
        pid = await application.fetchval("SELECT pg_backend_pid()")
        transaction = application.transaction()
        await transaction.start()
        await application.execute(
            "INSERT INTO invoicing_outbox (key, document) VALUES ('id:secret-import', 'x')"
        )
        outbox = PostgresOutbox(postgres_dsn)
        try:
            with pytest.raises(LedgerError) as blocked:
                await outbox.setup()
        finally:
            await outbox.close()
        await transaction.commit()
    finally:
        await application.close()
    message = str(blocked.value)
    assert blocked.value.reason == "locked"
    assert "upgrade the outbox table invoicing_outbox from format 1 to 4" in message
    assert f"pid {pid}" in message
    assert "idle in transaction" in message
    assert "secret-import" not in message  # the session's statements are not shown
    async with PostgresOutbox(postgres_dsn) as outbox:
        assert await outbox.counts() == {PENDING: 2, "in_flight": 1, "accepted": 1}


def make_0_3_ledger(path, documents) -> list[str]:
    """A SQLite outbox as 0.3 left it: format 1, pending entries."""
    keys = []
    with sqlite3.connect(path) as connection:
        connection.executescript(SQLITE_0_3)
        for document in documents:
            key = "id:" + document["DistributionDetails"]["InternalDocumentId"]
            connection.execute(
                "INSERT INTO entries (key, state, document, encrypted, doc_fingerprint, "
                "updated_at) VALUES (?, 'pending', ?, 1, 'f', 0)",
                (key, serialize_document(document)),
            )
            keys.append(key)
    connection.close()
    return keys


async def test_a_0_3_sqlite_outbox_is_upgraded_and_resumed(tmp_path):
    """A SQLite outbox made by 0.3 (format 1) is upgraded when opened (format 4), keeps
    its entries, and a worker sends them; a 0.3 batch ledger opened by a reading tool
    (``Ledger(create=False)``, as `ledger show` opens it) is upgraded too."""
    path = tmp_path / "outbox.db"
    async with Sandbox(key_algorithm="cv25519") as sb:
        keys = make_0_3_ledger(path, sample_invoices(5, issuer_vat=sb.client_id, lines=1))
        async with SqliteOutbox(path) as outbox:
            assert await outbox.counts() == {PENDING: 5}
            assert await drain(outbox, sb) == {OutcomeStatus.ACCEPTED: 5}
            assert (await outbox.status(keys[0])).status is OutcomeStatus.ACCEPTED
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SQLITE_VERSION == 4
    connection.close()
    other = tmp_path / "batch.db"
    make_0_3_ledger(other, sample_invoices(2, lines=1))
    async with Ledger(other, create=False) as ledger:
        assert await ledger.counts() == {PENDING: 2}


def issuers_of(sb: Sandbox) -> dict[str, str]:
    """The sandbox's own client as a pool's one issuer."""
    return {sb.client_id: sb.client_secret}


async def test_a_0_3_batch_ledger_resumes_under_a_pool_each_document_once(tmp_path):
    """A batch ledger of 0.3 (format 1, no issuers): one invoice accepted, one in flight
    when the batch died (its request committed). A pool's batch over the same invoices
    and two new ones opens it (upgraded to format 4): the accepted one is replayed
    without a request, the one in flight is re-sent once and its 409 is its own commit
    (accepted), the new ones are sent; the ledger holds one entry per invoice, each
    naming its issuer but the accepted one, replayed without a write."""
    path = tmp_path / "batch.db"
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(4, issuer_vat=sb.client_id, lines=1)
        async with client_of(sb) as client:
            record = await client.submit_secure(documents[0])
            await client.submit_secure(documents[1])  # the dead batch's request
        keys = make_0_3_ledger(path, documents[:2])
        accepted = Outcome(index=0, key=keys[0], status=OutcomeStatus.ACCEPTED, result=record)
        with sqlite3.connect(path) as connection:
            connection.execute(
                "UPDATE entries SET state = 'done', status = 'accepted', final = 1, "
                "document = NULL, outcome = ? WHERE key = ?",
                (json.dumps(outcome_to_dict(accepted)), keys[0]),
            )
            connection.execute(
                "UPDATE entries SET state = 'in_flight', sending = 1, document = NULL "
                "WHERE key = ?",
                (keys[1],),
            )
        connection.close()
        async with IssuerPool(sb.base_url, issuers_of(sb), provider_key=sb.provider_key) as pool:
            outcomes = await pool.submit_many(documents, ledger=path)
        assert [(o.status, o.replayed) for o in outcomes] == [
            (OutcomeStatus.ACCEPTED, True),
            (OutcomeStatus.ACCEPTED, False),
            (OutcomeStatus.ACCEPTED, False),
            (OutcomeStatus.ACCEPTED, False),
        ]
        assert outcomes[0].result == record
        assert sb.commit_count == 4
        assert all(held.commits == 1 for held in sb.committed.values())
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 4
        rows = connection.execute("SELECT key, issuer FROM entries ORDER BY key").fetchall()
    connection.close()
    assert len(rows) == 4
    # The one replayed keeps its entry as it was (no write); the others name their issuer.
    assert dict(rows) == {key: "" if key == keys[0] else sb.client_id for key, _ in rows}


async def test_enqueueing_a_document_of_a_0_3_outbox_finds_its_entry(postgres_dsn):
    """A 0.3 outbox (format 1: its entries name no issuer): the application enqueues
    again a pending invoice and the accepted one, naming their issuer (``Issuer.Vat``).
    Each finds its entry (no second one): the counts are unchanged, the entries now
    name their issuer, and a worker over a pool sends every waiting invoice once."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents, keys = await dead_workers_0_3_outbox(postgres_dsn, sb)
        async with PostgresOutbox(postgres_dsn) as outbox:
            await outbox.enqueue([documents[0], documents[2]])
            assert await outbox.counts() == {PENDING: 4, "in_flight": 1, "accepted": 1}
            assert (await outbox.status(keys[0])).issuer == sb.client_id
            assert (await outbox.status(keys[3], issuer=sb.client_id)).issuer is None
            async with IssuerPool(
                sb.base_url, issuers_of(sb), provider_key=sb.provider_key
            ) as pool:
                with instant_retries():
                    done = await asyncio.wait_for(
                        outbox.run_worker(pool, concurrency=4, stop_when_empty=True, poll=0.02),
                        60,
                    )
            assert done == {OutcomeStatus.ACCEPTED: 5}
            assert await outbox.counts() == {"accepted": 6}
        assert sb.commit_count == 5
        assert all(held.commits == 1 for held in sb.committed.values())


#: The deferrals table as 0.3 created it beside its outbox, on first use.
SQLITE_DEFERRALS_0_3 = """
CREATE TABLE deferrals (key TEXT PRIMARY KEY, origin TEXT NOT NULL,
    deferred_at REAL NOT NULL, reason TEXT NOT NULL, maybe_sent INTEGER NOT NULL,
    stamped INTEGER NOT NULL, attempts INTEGER NOT NULL, offline_qr TEXT,
    detail TEXT NOT NULL, notified_at REAL);
"""


async def test_a_0_3_till_resumes_its_deferred_sales(tmp_path):
    """A till's outbox of 0.3 (format 1, with its deferrals table): two deferred sales
    waiting. A Deferral over a pool opens it (format 4), its drainer sends both once,
    and both deferred outcomes reach the application with their records."""
    path = tmp_path / "till.db"
    delivered: list[DeferredOutcome] = []
    both = asyncio.Event()

    def on_outcome(item: DeferredOutcome) -> None:
        delivered.append(item)
        if len(delivered) == 2:
            both.set()

    async with Sandbox(key_algorithm="cv25519") as sb:
        keys = make_0_3_ledger(path, sample_invoices(2, issuer_vat=sb.client_id, lines=1))
        with sqlite3.connect(path) as connection:
            connection.executescript(SQLITE_DEFERRALS_0_3)
            connection.executemany(
                "INSERT INTO deferrals VALUES (?, 'till-1', 1.0, 'unreachable', 0, 0, 0, "
                "NULL, 'refused', NULL)",
                [(key,) for key in keys],
            )
        connection.close()
        async with IssuerPool(sb.base_url, issuers_of(sb), provider_key=sb.provider_key) as pool:
            till = Deferral(pool, path, origin="till-1", on_outcome=on_outcome, poll=0.05)
            async with till:
                await asyncio.wait_for(both.wait(), 60)
        assert sorted(item.key for item in delivered) == sorted(keys)
        assert all(item.outcome.status is OutcomeStatus.ACCEPTED for item in delivered)
        assert all(item.result == sb.committed[item.key].record for item in delivered)
        assert all(item.receipt.stamp_error is None for item in delivered)
        assert sb.commit_count == 2


async def test_a_sale_deferred_in_a_format_3_outbox_is_sent_after_the_upgrade(tmp_path):
    """A till's outbox of format 3 (0.4) holding a deferred sale not yet sent: opened by
    this version, it is upgraded (format 4), the sale is sent once and its outcome
    delivered, its receipt saying no stamp hook failed."""
    path = tmp_path / "till.db"
    delivered: list[DeferredOutcome] = []
    arrived = asyncio.Event()

    def on_outcome(item: DeferredOutcome) -> None:
        delivered.append(item)
        arrived.set()

    async with Sandbox(key_algorithm="cv25519") as sb:
        [sale] = sample_invoices(1, issuer_vat=sb.client_id, lines=1)
        key = document_key(sale)
        with sqlite3.connect(path) as connection:
            for step in SQLITE_STEPS[:3]:
                for statement in step:
                    connection.execute(statement)
            connection.execute("PRAGMA user_version = 3")
            connection.execute(
                "INSERT INTO entries (key, issuer, state, document, encrypted, "
                "doc_fingerprint, updated_at) VALUES (?, ?, 'pending', ?, 1, 'f', 0)",
                (key, sb.client_id, serialize_document(sale)),
            )
            connection.execute(
                "INSERT INTO deferrals (key, issuer, origin, deferred_at, reason, maybe_sent, "
                "stamped, attempts, offline_qr, detail) "
                "VALUES (?, ?, 'till-1', 1.0, 'unreachable', 0, 1, 1, NULL, 'refused')",
                (key, sb.client_id),
            )
        connection.close()
        async with (
            client_of(sb) as client,
            Deferral(client, path, on_outcome=on_outcome, origin="till-1", poll=0.05),
        ):
            await asyncio.wait_for(arrived.wait(), 60)
        [item] = delivered
        assert (item.key, item.outcome.status) == (key, OutcomeStatus.ACCEPTED)
        assert (item.receipt.stamped, item.receipt.stamp_error) == (True, None)
        assert sb.committed[key].commits == 1
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 4
    connection.close()
