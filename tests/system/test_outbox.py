"""The outbox API on SQLite and on a real PostgreSQL server, through the sandbox.

PostgreSQL is started by the suite (tests/pgserver.py); the PostgreSQL tests skip only
where its binaries are missing (never in CI).
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from invoicing_async import InvoicingClient, OutcomeStatus, RetryPolicy, ValidationError
from invoicing_async.outbox import PENDING, PostgresOutbox, SqliteOutbox, open_outbox
from invoicing_async.testing import instant_retries
from invoicing_sandbox import Sandbox, sample_invoices


async def test_worker_drains_the_outbox_with_one_truthful_outcome_each(outbox):
    """Enqueued invoices are sent by a worker until the outbox is empty: each entry ends
    accepted with its record, a 400 ends rejected (final), and setup is idempotent."""
    await outbox.setup()
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(30, issuer_vat=sb.client_id, lines=1)
        gross = documents[7]["Summaries"]["TotalGrossValue"]
        documents[7]["Summaries"]["TotalGrossValue"] = -1
        keys = await outbox.enqueue(documents[:20])
        keys += await outbox.enqueue(documents[20:], encrypted=False)
        assert (await outbox.status(keys[0])).status == PENDING
        with instant_retries():
            async with InvoicingClient(
                sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
            ) as client:
                counts = await outbox.run_worker(
                    client, concurrency=8, stop_when_empty=True, poll=0.05
                )
        assert counts == {OutcomeStatus.ACCEPTED: 29, OutcomeStatus.REJECTED: 1}
        assert await outbox.counts() == {"accepted": 29, "rejected": 1}
        entry = await outbox.status(keys[0])
        assert entry.status is OutcomeStatus.ACCEPTED
        assert entry.final
        assert entry.outcome.result.internal_id == keys[0].removeprefix("id:")
        refused = await outbox.status(keys[7])
        assert refused.status is OutcomeStatus.REJECTED
        assert refused.final
        assert sb.commit_count == 29
        assert {r.path for r in sb.requests if r.identity} == {"/Invoice/secure", "/Invoice/json"}
        # The same refused content enqueued again stays refused; corrected, it is sent.
        await outbox.enqueue([documents[7]])
        assert (await outbox.status(keys[7])).status is OutcomeStatus.REJECTED
        documents[7]["Summaries"]["TotalGrossValue"] = gross
        await outbox.enqueue([documents[7]])
        assert (await outbox.status(keys[7])).status == PENDING
        with instant_retries():
            async with InvoicingClient(
                sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
            ) as client:
                await outbox.run_worker(client, stop_when_empty=True, poll=0.05)
        assert (await outbox.status(keys[7])).status is OutcomeStatus.ACCEPTED
        assert sb.commit_count == 30


async def test_refused_credentials_leave_entries_pending_not_final(outbox):
    """A worker with a wrong API key stops (stop_when_empty) without making anything
    final: the entries stay pending with their not_sent outcome, and a worker with the
    right key sends them."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(5, issuer_vat=sb.client_id, lines=1)
        keys = await outbox.enqueue(documents, encrypted=False)
        with instant_retries():
            async with InvoicingClient(sb.base_url, sb.client_id, "typo") as bad:
                await outbox.run_worker(bad, stop_when_empty=True, poll=0.05)
            entry = await outbox.status(keys[0])
            assert entry.status == PENDING
            assert not entry.final
            async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as good:
                await outbox.run_worker(good, stop_when_empty=True, poll=0.05)
        assert await outbox.counts() == {"accepted": 5}


async def drain_while(outbox, sb, key, during):
    """Run a worker until the outbox is empty; ``during()`` runs while ``key`` is in
    flight (the sandbox holds its request until ``during()`` is done)."""
    sb.hold()
    with instant_retries():
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            worker = asyncio.ensure_future(
                outbox.run_worker(client, concurrency=2, stop_when_empty=True, poll=0.02)
            )
            await sb.wait_held(1)
            await during()
            sb.release()
            await asyncio.wait_for(worker, 30)


async def test_a_corrected_invoice_enqueued_while_in_flight_is_sent_after_the_refusal(outbox):
    """A user corrects an invoice and enqueues it again (same identity) while the
    refused version is still in flight: the 400 for the old content is recorded, and the
    corrected content is sent and accepted (a refusal is final for its content only)."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        [invoice] = sample_invoices(1, issuer_vat=sb.client_id, lines=1)
        gross = invoice["Summaries"]["TotalGrossValue"]
        invoice["Summaries"]["TotalGrossValue"] = -1
        [key] = await outbox.enqueue([invoice], encrypted=False)

        async def correct():
            invoice["Summaries"]["TotalGrossValue"] = gross
            await outbox.enqueue([invoice], encrypted=False)
            assert (await outbox.status(key)).status == "in_flight"

        await drain_while(outbox, sb, key, correct)
        entry = await outbox.status(key)
        assert entry.status is OutcomeStatus.ACCEPTED
        assert entry.final
        sent = [r.status for r in sb.requests if r.path == "/Invoice/json"]
        assert sent == [400, 201]
        assert sb.commit_count == 1


async def test_an_identical_invoice_enqueued_while_in_flight_is_not_sent_twice(outbox):
    """Enqueuing exactly the same invoice again while it is in flight (an application
    that enqueues on every save) changes nothing: one request, its outcome kept."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        invoices = sample_invoices(1, issuer_vat=sb.client_id, lines=1)
        [key] = await outbox.enqueue(invoices, encrypted=False)

        async def again():
            assert await outbox.enqueue(invoices, encrypted=False) == [key]
            assert (await outbox.status(key)).status == "in_flight"

        await drain_while(outbox, sb, key, again)
        assert (await outbox.status(key)).status is OutcomeStatus.ACCEPTED
        assert [r.status for r in sb.requests if r.path == "/Invoice/json"] == [201]
        assert sb.commit_count == 1


async def test_enqueue_refuses_a_document_that_cannot_be_serialised(outbox):
    """A document that is not JSON-serialisable raises ValidationError; nothing of that
    call is enqueued."""
    with pytest.raises(ValidationError, match="document 1"):
        await outbox.enqueue([{"a": 1}, {"b": object()}])
    assert await outbox.counts() == {}


async def test_sqlite_enqueue_joins_the_callers_transaction(tmp_path):
    """Enqueued on the caller's sqlite3 connection, entries exist only if the caller
    commits (the transactional outbox on one machine)."""
    path = tmp_path / "app.db"
    async with SqliteOutbox(path) as outbox:
        connection = sqlite3.connect(path)
        connection.execute("CREATE TABLE sales (id INTEGER)")
        connection.commit()
        connection.execute("INSERT INTO sales VALUES (1)")
        await outbox.enqueue([{"Series": "A", "Number": 1}], connection=connection)
        connection.rollback()
        assert await outbox.counts() == {}
        connection.execute("INSERT INTO sales VALUES (2)")
        await outbox.enqueue([{"Series": "A", "Number": 2}], connection=connection)
        connection.commit()
        connection.close()
        assert await outbox.counts() == {"pending": 1}


async def test_postgres_enqueue_joins_the_callers_transaction(postgres_dsn):
    """Enqueued on the caller's asyncpg connection, entries exist only if the caller's
    transaction commits."""
    import asyncpg  # noqa: PLC0415

    async with PostgresOutbox(postgres_dsn) as outbox:
        connection = await asyncpg.connect(postgres_dsn)
        try:
            await connection.execute("CREATE TABLE sales (id integer)")

            async def sale_that_fails():
                async with connection.transaction():
                    await connection.execute("INSERT INTO sales VALUES (1)")
                    await outbox.enqueue([{"Number": 1}], connection=connection)
                    raise RuntimeError("the sale failed")

            with pytest.raises(RuntimeError, match="the sale failed"):
                await sale_that_fails()
            async with connection.transaction():
                await connection.execute("INSERT INTO sales VALUES (2)")
                await outbox.enqueue([{"Number": 2}], connection=connection)
        finally:
            await connection.close()
        assert await outbox.counts() == {"pending": 1}
        assert repr(outbox).startswith("PostgresOutbox('postgresql://postgres@127.0.0.1:")


async def test_postgres_fencing_an_expired_claim_cannot_overwrite_its_successor(postgres_dsn):
    """A worker whose lease expired and was claimed again can neither mark the entry
    sending nor overwrite the successor's outcome; the successor knows a request may
    be out (maybe_committed)."""
    from invoicing_async._durable.store import Settlement  # noqa: PLC0415

    async with PostgresOutbox(postgres_dsn) as outbox:
        store = outbox._db
        await outbox.enqueue([{"Number": 1}])
        [old] = await store.claim(10, "lease-a", 0.0)  # expires at once
        assert await store.mark_sending([(old.id, "lease-a")]) == {old.id}
        [new] = await store.claim(10, "lease-b", 30.0)
        assert new.id == old.id
        assert new.entry.maybe_committed
        assert await store.mark_sending([(old.id, "lease-a")]) == set()

        def settlement(lease, status):
            return Settlement(old.id, lease, "done", status, True, False, None, 1, "{}", 0.0)

        assert await store.settle([settlement("lease-a", "rejected")]) == set()
        assert await store.settle([settlement("lease-b", "accepted")]) == {old.id}
        assert await store.settle([settlement("lease-a", "rejected")]) == set()
        assert (await outbox.status(new.entry.key)).status is OutcomeStatus.ACCEPTED


async def test_open_outbox_picks_the_backend_from_the_url(tmp_path):
    """postgresql:// URLs are PostgreSQL, anything else a SQLite file."""
    assert isinstance(open_outbox("postgresql://u@h/db"), PostgresOutbox)
    assert isinstance(open_outbox(tmp_path / "o.db"), SqliteOutbox)
    assert open_outbox(f"sqlite:///{tmp_path}/o.db").path == tmp_path / "o.db"
    assert RetryPolicy().resend_ambiguous  # the outbox relies on duplicate detection


async def test_a_cancelled_worker_puts_back_what_it_holds_after_its_grace(outbox):
    """A worker cancelled (a stop signal, a deferral closing) while the provider holds
    two of its requests lets them end for ``grace`` seconds; held longer, they are cut
    off and it puts back every entry it claimed at once, rather than leaving them in
    flight until its leases expire; the two whose requests were out keep that knowledge
    (maybe committed), and the next worker sends all of them, each committed once."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        keys = await outbox.enqueue(sample_invoices(6, issuer_vat=sb.client_id, lines=1))
        sb.hold()
        with instant_retries():
            async with InvoicingClient(
                sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
            ) as client:
                worker = asyncio.ensure_future(
                    outbox.run_worker(
                        client, concurrency=2, stop_when_empty=True, poll=0.02, grace=0.2
                    )
                )
                await sb.wait_held(2)
                worker.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await worker
                assert await outbox.counts() == {PENDING: 6}
                out = [key for key in keys if (await outbox.status(key)).maybe_committed]
                assert len(out) == 2
                sb.release()
                counts = await outbox.run_worker(client, stop_when_empty=True, poll=0.02)
        assert counts == {OutcomeStatus.ACCEPTED: 6}
        assert sb.commit_count == 6
        assert all(held.commits == 1 for held in sb.committed.values())


async def test_a_worker_asked_to_stop_lets_its_requests_end_and_puts_back_the_rest(outbox):
    """``stop`` set while the provider holds two of the worker's requests: it claims
    nothing more and starts no other request; the two, let go, end and are written
    ``accepted``; the worker returns their counts, and the four it held without
    sending are back ``pending`` as they were (not maybe committed, no failed round):
    nothing in flight, nothing lost, the next worker sends exactly those four."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        keys = await outbox.enqueue(sample_invoices(6, issuer_vat=sb.client_id, lines=1))
        sb.hold()
        stop = asyncio.Event()
        with instant_retries():
            async with InvoicingClient(
                sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
            ) as client:
                worker = asyncio.ensure_future(
                    outbox.run_worker(client, concurrency=2, poll=0.02, grace=60, stop=stop)
                )
                await sb.wait_held(2)
                stop.set()
                sb.release()
                counts = await asyncio.wait_for(worker, 60)
                assert counts == {OutcomeStatus.ACCEPTED: 2}
                assert await outbox.counts() == {"accepted": 2, PENDING: 4}
                for key in keys:
                    entry = await outbox.status(key)
                    if entry.status == PENDING:
                        assert (entry.maybe_committed, entry.failures) == (False, 0)
                assert sb.commit_count == 2
                assert len([r for r in sb.requests if r.path == "/Invoice/secure"]) == 2
                counts = await outbox.run_worker(client, stop_when_empty=True, poll=0.02)
        assert counts == {OutcomeStatus.ACCEPTED: 4}
        assert sb.commit_count == 6
        assert all(held.commits == 1 for held in sb.committed.values())


async def test_a_worker_cancelled_twice_stops_at_once(tmp_path):
    """Cancelled while the provider holds its requests, a worker with a long grace
    waits for them; cancelled again, it cuts them off at once (well within the grace)
    and puts back what it holds. Asked to stop (``stop``) and cancelled at once, too."""
    async with Sandbox(key_algorithm="cv25519") as sb, SqliteOutbox(tmp_path / "o.db") as outbox:
        await outbox.enqueue(sample_invoices(4, issuer_vat=sb.client_id, lines=1))
        sb.hold()
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client:
            worker = asyncio.ensure_future(
                outbox.run_worker(client, concurrency=2, poll=0.02, grace=3600)
            )
            await sb.wait_held(2)
            worker.cancel()
            await asyncio.sleep(0)
            assert not worker.done()  # graceful: waiting for the held requests
            worker.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(worker, 60)
            assert await outbox.counts() == {PENDING: 4}
            # Asked by ``stop``, then cancelled before the worker saw the first: at once.
            stop = asyncio.Event()
            worker = asyncio.ensure_future(
                outbox.run_worker(client, concurrency=2, poll=0.02, grace=3600, stop=stop)
            )
            await sb.wait_held(4)
            stop.set()
            worker.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(worker, 60)
            assert await outbox.counts() == {PENDING: 4}
