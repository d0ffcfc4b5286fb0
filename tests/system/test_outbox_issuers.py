"""Outboxes, ledgers and tills of many issuers, over real HTTP to the sandbox.

A document's identity is its issuer and its key: two issuers' ``id:shared-1`` are two
documents in the SQLite ledger, the SQLite and PostgreSQL outboxes and a till's outbox,
each committed under its own issuer. A worker given an :class:`IssuerPool` sends each
entry with the credentials of the issuer stored with it, and its claims are fair: a
small issuer enqueued after a large one's backlog is not served after it. Orders and
counts, never timings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest
from sandboxtools import until

from invoicing_async import (
    Deferral,
    DeferredOutcome,
    DeferredReceipt,
    IssuerPool,
    Ledger,
    LedgerError,
    OutcomeStatus,
    qr,
)
from invoicing_async.outbox import PENDING, PostgresOutbox, SqliteOutbox
from invoicing_async.testing import instant_retries
from invoicing_sandbox import Sandbox, sample_invoice, sandbox_issuers

KEY = "id:shared-1"
PORTAL = "https://portal.invalid"


def shared(tin: str, number: int = 1) -> dict:
    """An invoice of ``tin`` whose internal id (its key) another issuer uses too."""
    document = sample_invoice(number, issuer_vat=tin, lines=1)
    document["DistributionDetails"]["InternalDocumentId"] = "shared-1"
    return document


def pool_of(sb: Sandbox, issuers: dict[str, str]) -> IssuerPool:
    return IssuerPool(sb.base_url, issuers, provider_key=sb.provider_key)


def held_record(sb: Sandbox, tin: str):
    """The record of the one document the sandbox holds for ``tin``."""
    (held,) = sb.committed_in(client_id=tin).values()
    return held.record


async def drain(outbox, pool, **options) -> dict[OutcomeStatus, int]:
    with instant_retries():
        return await asyncio.wait_for(
            outbox.run_worker(pool, stop_when_empty=True, poll=0.02, **options), 120
        )


async def test_two_issuers_documents_with_the_same_key_are_two_outbox_entries(outbox):
    """Two issuers' invoices with the same key enqueued (SQLite and PostgreSQL): two
    entries, each with its issuer; asked without an issuer, the outbox says the key is
    ambiguous and names both. A worker over a pool sends each with its own issuer's
    credentials: each issuer holds its own document once, and each entry's outcome is
    its own issuer's record. Enqueued again, they stay two entries, both done."""
    issuers = sandbox_issuers(2)
    a, b = issuers
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        assert await outbox.enqueue([shared(a), shared(b)]) == [KEY, KEY]
        assert await outbox.counts() == {PENDING: 2}
        with pytest.raises(LedgerError) as ambiguous:
            await outbox.status(KEY)
        assert ambiguous.value.reason == "ambiguous"
        assert a in str(ambiguous.value)
        assert b in str(ambiguous.value)
        async with pool_of(sb, issuers) as pool:
            assert await drain(outbox, pool, concurrency=4) == {OutcomeStatus.ACCEPTED: 2}
        for tin in (a, b):
            entry = await outbox.status(KEY, issuer=tin)
            assert (entry.issuer, entry.status) == (tin, OutcomeStatus.ACCEPTED)
            assert entry.outcome.issuer == tin
            assert entry.outcome.result == held_record(sb, tin)
            assert sb.issuer_stats(tin).commits == 1
        await outbox.enqueue([shared(a), shared(b)])
        assert await outbox.counts() == {"accepted": 2}
        assert {e.issuer async for e in outbox.entries()} == {a, b}


async def test_a_batch_ledger_keeps_two_issuers_documents_with_the_same_key_apart(tmp_path):
    """A pool's batch with a ledger: two issuers' invoices with the same key are two
    entries; run again, both are replayed from their own entries (no request), each with
    its own issuer's record."""
    issuers = sandbox_issuers(2)
    a, b = issuers
    path = tmp_path / "batch.db"
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        async with pool_of(sb, issuers) as pool:
            first = await pool.submit_many([shared(a), shared(b)], ledger=path)
            again = await pool.submit_many([shared(a), shared(b)], ledger=path)
        assert [o.status for o in first] == [OutcomeStatus.ACCEPTED] * 2
        assert [(o.issuer, o.replayed) for o in again] == [(a, True), (b, True)]
        assert [o.result for o in again] == [held_record(sb, a), held_record(sb, b)]
        assert sb.commit_count == 2
    async with Ledger(path, create=False) as ledger:
        assert {e.issuer async for e in ledger.entries()} == {a, b}
        entry = await ledger.get(KEY, issuer=b)
        assert entry.outcome.result == again[1].result


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_small_issuer_enqueued_after_a_large_backlog_is_not_served_after_it(
    kind, tmp_path, request
):
    """5,000 invoices of one issuer enqueued first, 10 of another after: a worker over
    a pool (SQLite and PostgreSQL) commits all 10 of the small issuer before the 500th of
    the large one (the order of the sandbox's commits). Before, claims took the oldest
    entries whatever their issuer: the 10 came after the 5,000."""
    issuers = sandbox_issuers(2)
    large, small = issuers
    if kind == "sqlite":
        outbox = SqliteOutbox(tmp_path / "outbox.db")
    else:
        outbox = PostgresOutbox(request.getfixturevalue("postgres_dsn"))
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb, outbox:
        await outbox.enqueue(
            [sample_invoice(n, issuer_vat=large, lines=1) for n in range(5000)], encrypted=False
        )
        await outbox.enqueue(
            [sample_invoice(n, issuer_vat=small, lines=1) for n in range(10)], encrypted=False
        )
        async with pool_of(sb, issuers) as pool:
            worker = asyncio.ensure_future(outbox.run_worker(pool, concurrency=8, poll=0.02))
            try:
                await asyncio.wait_for(_until(lambda: sb.issuer_stats(small).commits == 10), 120)
            finally:
                worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker
        commits = [r.issuer for r in sb.requests if r.path == "/Invoice/json" and r.status == 201]
        last_small = max(n for n, issuer in enumerate(commits) if issuer == small)
        assert commits[: last_small + 1].count(large) < 500, commits[: last_small + 1].count(large)


class DrainerHold:
    """Holds a till's drainer: the SQLite outbox's one-worker lock, taken by another
    worker object before the till opens, makes the drainer wait ("another worker sends
    from it"); once let go, its next pass sends what waits."""

    def __init__(self, path) -> None:
        self._other = SqliteOutbox(path)
        self._held = False

    async def __aenter__(self) -> DrainerHold:
        await self._other._store()  # the lock of the one worker that sends
        self._held = True
        return self

    async def let_go(self) -> None:
        if self._held:
            self._held = False
            await self._other._unlock()
            await self._other.close()

    async def __aexit__(self, *exc_info) -> None:
        await self.let_go()


async def test_a_till_of_many_shops_defers_each_shops_sale_under_its_own_identity(tmp_path):
    """A Deferral over a pool, the provider refusing connections: two shops sell an
    invoice with the same key; both are deferred, each receipt names its shop and
    carries an offline QR signed with that shop's API key; the outbox holds two
    entries, pending (the test holds the drainer meanwhile: its probes cannot claim one
    before they are counted). Once the provider is back and the drainer let go, the one
    drainer sends both, and each deferred outcome is its own shop's record."""
    issuers = sandbox_issuers(2)
    a, b = issuers
    delivered: dict[str, DeferredOutcome] = {}
    both = asyncio.Event()

    def on_outcome(item: DeferredOutcome) -> None:
        delivered[item.issuer] = item
        if len(delivered) == 2:
            both.set()

    async with (
        Sandbox(key_algorithm="cv25519", issuers=issuers) as sb,
        pool_of(sb, issuers) as pool,
    ):
        path = tmp_path / "till.db"
        outbox = SqliteOutbox(path)  # the till's (closed by the test: the till does not)
        till = Deferral(
            pool, outbox, budget=5.0, portal_url=PORTAL, on_outcome=on_outcome,
            probe_delay=0.02, probe_max_delay=0.05, poll=0.05,
        )  # fmt: skip
        async with outbox, DrainerHold(path) as hold, till:
            await sb.set_outage("refuse")
            receipts = [await till.submit_or_defer(shared(tin)) for tin in (a, b)]
            assert all(isinstance(r, DeferredReceipt) for r in receipts)
            assert [(r.key, r.issuer) for r in receipts] == [(KEY, a), (KEY, b)]
            for receipt, tin in zip(receipts, (a, b), strict=True):
                expected = qr.offline_qr_url(shared(tin), portal_url=PORTAL, api_key=issuers[tin])
                assert receipt.offline_qr_url == expected
            assert await outbox.counts() == {PENDING: 2}
            await sb.set_outage(None)
            await hold.let_go()
            await asyncio.wait_for(both.wait(), 60)
        for tin in (a, b):
            assert delivered[tin].outcome.status is OutcomeStatus.ACCEPTED
            assert delivered[tin].result == held_record(sb, tin)
        assert sb.commit_count == 2


async def _until(condition) -> None:
    while not condition():  # noqa: ASYNC110  (the sandbox announces no commit)
        await asyncio.sleep(0.01)


async def test_200_shops_sales_through_an_outage_each_resolve_to_their_own_record(tmp_path):
    """One till (a Deferral over a pool, one drainer) sells for 200 shops: 50 sales
    while the provider answers, 100 while it refuses connections, 50 once it is back.
    Every sale is committed once, under its own shop; each deferred sale's receipt
    carries an offline QR signed with its own shop's API key, and its deferred outcome
    is its own shop's record (the sandbox's commit under that issuer)."""
    issuers = sandbox_issuers(200)
    tins = list(issuers)
    delivered: dict[str, DeferredOutcome] = {}
    deferred: dict[str, DeferredReceipt] = {}
    direct: dict[str, object] = {}
    all_in = asyncio.Event()

    def on_outcome(item: DeferredOutcome) -> None:
        delivered[item.issuer] = item
        if len(direct) + len(deferred) == 200 and set(deferred) <= set(delivered):
            all_in.set()

    def sale(tin: str) -> dict:
        return sample_invoice(1, issuer_vat=tin, lines=1)

    async with (
        Sandbox(key_algorithm="cv25519", issuers=issuers) as sb,
        pool_of(sb, issuers) as pool,
    ):
        till = Deferral(
            pool, tmp_path / "till.db", budget=5.0, portal_url=PORTAL, on_outcome=on_outcome,
            probe_delay=0.02, probe_max_delay=0.05, poll=0.05, concurrency=16,
        )  # fmt: skip
        async with till:

            async def sell(shops: list[str]) -> None:
                for tin in shops:
                    answer = await till.submit_or_defer(sale(tin))
                    if isinstance(answer, DeferredReceipt):
                        deferred[tin] = answer
                    else:
                        direct[tin] = answer

            await sell(tins[:50])
            await sb.set_outage("refuse")
            await sell(tins[50:150])
            await sb.set_outage(None)
            await sell(tins[150:])
            if set(deferred) <= set(delivered):
                all_in.set()
            await asyncio.wait_for(all_in.wait(), 120)
            assert (await till.refresh_backlog()).count == 0
        assert len(deferred) >= 100
        assert sb.commit_count == 200
        for tin in tins:
            assert sb.issuer_stats(tin).commits == 1
        for tin, receipt in deferred.items():
            assert receipt.issuer == tin
            expected = qr.offline_qr_url(sale(tin), portal_url=PORTAL, api_key=issuers[tin])
            assert receipt.offline_qr_url == expected
            outcome = delivered[tin]
            assert outcome.receipt == receipt
            assert outcome.outcome.status is OutcomeStatus.ACCEPTED
            assert outcome.result == held_record(sb, tin)
        for tin, record in direct.items():
            assert record == held_record(sb, tin)


async def test_a_pool_worker_stopping_when_empty_leaves_what_it_has_no_key_for(outbox, caplog):
    """A worker over a pool that has no credentials for one issuer, with an entry whose
    document names no issuer: it sends every other entry and then stops (before: it
    claimed and put back those entries every round, and never stopped), leaving them
    pending for an operator; one WARNING names the issuer, one the documents naming
    none, and when it stops, how many of each wait."""
    issuers = sandbox_issuers(3)
    a, b, stranger = issuers
    nameless = sample_invoice(9, issuer_vat=a, lines=1)
    del nameless["Issuer"]["Vat"]
    caplog.set_level(logging.WARNING, logger="invoicing_async.ledger")
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        for tin in issuers:
            await outbox.enqueue([sample_invoice(n, issuer_vat=tin, lines=1) for n in range(2)])
        await outbox.enqueue([nameless])
        async with pool_of(sb, {a: issuers[a], b: issuers[b]}) as pool:
            counts = await drain(outbox, pool)
    assert counts == {OutcomeStatus.ACCEPTED: 4, OutcomeStatus.NOT_SENT: 3}
    assert await outbox.counts() == {"accepted": 4, PENDING: 3}
    said = [r.getMessage() for r in caplog.records if r.name == "invoicing_async.ledger"]
    assert sum(f"issuer {stranger}'s documents wait" in line for line in said) == 1, said
    assert sum("documents that name no issuer wait" in line for line in said) == 1, said
    assert any(f"2 entries of issuer {stranger} wait" in line for line in said), said
    assert any("1 entry of no issuer wait" in line for line in said), said


async def test_a_pools_second_drain_does_not_tell_again_of_an_issuer_already_waiting(
    tmp_path, caplog
):
    """Two drains over one pool (a till's drainer runs a pass at a time), the first on a
    pool that has not used any issuer yet: the issuer it has no key for is told once,
    and the second pass leaves its entries alone (the pool keeps what waits)."""
    issuers = sandbox_issuers(2)
    a, stranger = issuers
    caplog.set_level(logging.WARNING, logger="invoicing_async.ledger")
    async with (
        Sandbox(key_algorithm="cv25519", issuers=issuers) as sb,
        SqliteOutbox(tmp_path / "outbox.db") as box,
    ):
        await box.enqueue([sample_invoice(n, issuer_vat=stranger, lines=1) for n in range(2)])
        async with pool_of(sb, {a: issuers[a]}) as pool:
            first = await drain(box, pool)
            await box.enqueue([sample_invoice(5, issuer_vat=a, lines=1)])
            second = await drain(box, pool)
        assert await box.counts() == {"accepted": 1, PENDING: 2}
    assert first == {OutcomeStatus.NOT_SENT: 2}
    assert second == {OutcomeStatus.ACCEPTED: 1}
    said = [r.getMessage() for r in caplog.records if r.name == "invoicing_async.ledger"]
    assert sum(f"issuer {stranger}'s documents wait" in line for line in said) == 1, said


async def test_a_key_rotated_mid_batch_takes_effect_in_the_batch_that_runs(tmp_path, caplog):
    """A shop's key is refused (rotated at the provider): its documents wait, while
    another shop's requests are held at the provider, so the batch cannot end. The
    shop's new key is given to the pool (``reload_credentials()``): the worker, whose
    next pause between claims is an hour, is woken, sends the shop's documents with the
    new key in the batch that runs, and says at INFO that the new credentials took
    effect (before: the batch ended first, every document it held sent, then a new
    batch tried the shop: 10 s and more after the rotation with 2,000 documents)."""
    issuers = sandbox_issuers(2)
    shop, other = issuers
    keys = dict(issuers)  # the pool's resolver: the test gives it the new key
    caplog.set_level(logging.INFO, logger="invoicing_async.ledger")

    def said(text: str) -> list[str]:
        return [r.getMessage() for r in caplog.records if text in r.getMessage()]

    async with (
        Sandbox(key_algorithm="cv25519", issuers=issuers) as sb,
        SqliteOutbox(tmp_path / "outbox.db") as box,
        pool_of(sb, keys) as pool,
    ):
        await box.enqueue([sample_invoice(n, issuer_vat=other, lines=1) for n in range(2)])
        await box.enqueue([sample_invoice(10 + n, issuer_vat=shop, lines=1) for n in range(3)])
        sb.rotate_issuer(shop, "the-shops-new-key")
        sb.hold(issuer=other)
        stop = asyncio.Event()
        with instant_retries():
            work = asyncio.ensure_future(box.run_worker(pool, concurrency=8, poll=3600, stop=stop))
            try:
                await asyncio.wait_for(sb.wait_held(2, issuer=other), 60)
                await asyncio.wait_for(until(lambda: said(f"issuer {shop}'s documents wait")), 60)
                keys[shop] = "the-shops-new-key"
                pool.reload_credentials()
                await asyncio.wait_for(until(lambda: sb.issuer_stats(shop).commits == 3), 60)
                assert sb.held_of(other) == 2  # the batch still runs: mid-batch
                assert not work.done()
            finally:
                sb.release()
                stop.set()
                counts = await asyncio.wait_for(work, 60)
    assert counts[OutcomeStatus.ACCEPTED] == 5
    assert len(said(f"issuer {shop}'s new credentials took effect")) == 1
    assert not any("the-shops-new-key" in r.getMessage() for r in caplog.records)
