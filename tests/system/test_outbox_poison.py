"""Poison documents: an outbox worker (and a till's drainer) gives up on them, boundedly.

The sandbox answers one document 500 and resets the connection of another on every
attempt (``Sandbox.poison``). Before issue 26 a worker with ``stop_when_empty`` sent
such documents for ever (1,788 requests in 120 s). Now each costs at most
``max_rounds * max_attempts`` requests (counted by the sandbox), is parked (shown by
the status commands) while every other document is accepted, the worker ends, and an
explicit retry sends it again. The wait between rounds is read from the stored rows
(``available_at``), the clock moved forward by writing them, never slept through.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys

import asyncpg
import pytest
from sandboxtools import client_for

from invoicing_async import Deferral, DeferredReceipt, InvoicingClient, OutcomeStatus, RetryPolicy
from invoicing_async.outbox import PARKED, PENDING, SqliteOutbox
from invoicing_async.testing import instant_retries
from invoicing_sandbox import Fault, Sandbox, sample_invoice, sample_invoices

#: Three requests a round, four rounds: a poison document costs at most 12 requests.
POLICY = RetryPolicy(max_attempts=3, max_rounds=4, attempt_timeout=10.0)


def url_of(outbox) -> str:
    return str(outbox.path) if isinstance(outbox, SqliteOutbox) else outbox._db._dsn


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}
    return subprocess.run(
        [sys.executable, "-m", "invoicing_async", *args],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip


def requests_for(sb: Sandbox, key: str) -> int:
    return sum(1 for r in sb.requests if r.identity == key)


async def drain(outbox, sb, policy=POLICY) -> dict[OutcomeStatus, int]:
    """One worker with ``stop_when_empty``, rounds back to back (instant retries)."""
    with instant_retries():
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client:
            return await asyncio.wait_for(
                outbox.run_worker(
                    client, concurrency=4, stop_when_empty=True, retry=policy, poll=0.02
                ),
                120,
            )


async def test_poison_documents_are_parked_and_the_worker_ends(outbox, caplog):
    """One document answered 500 every time, one whose connection is reset every time,
    ten good ones: the worker ends; the good ones are accepted; each poison document got
    at most max_rounds * max_attempts requests and is parked, counted and listed as such
    (Python API and `ledger show`), keeping its unknown outcome (maybe committed); an
    explicit retry (`ledger retry --status parked`) re-queues them with a fresh budget,
    and with the faults cured they are accepted, each committed once."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        keys = await outbox.enqueue(sample_invoices(12, issuer_vat=sb.client_id, lines=1))
        poison = {keys[3]: Fault.status(500), keys[8]: Fault.reset()}
        for key, fault in poison.items():
            sb.poison(key, fault)
        await drain(outbox, sb)
        assert await outbox.counts() == {"accepted": 10, PARKED: 2}
        for key in poison:
            assert 1 <= requests_for(sb, key) <= POLICY.max_rounds * POLICY.max_attempts
            entry = await outbox.status(key)
            assert entry.status == PARKED
            assert entry.failures == POLICY.max_rounds
            assert not entry.final
            assert entry.maybe_committed  # the unknown outcome's knowledge is kept
            assert entry.outcome.status is OutcomeStatus.UNKNOWN
        assert {e.key async for e in outbox.entries(PARKED)} == set(poison)
        assert "2 parked entries that need attention" in caplog.text

        shown = cli("ledger", "show", "--status", "parked", "--ledger", url_of(outbox))
        assert shown.returncode == 0, shown.stderr
        assert "12 entries: 2 parked, 10 accepted" in shown.stdout
        assert "ledger retry --status parked" in shown.stdout
        for key in poison:
            assert re.search(rf"{key}\s+parked .* 4 failed rounds", shown.stdout), shown.stdout

        # Parked entries stay parked: another worker sends nothing.
        before = len(sb.requests)
        assert await drain(outbox, sb) == {}
        assert len(sb.requests) == before

        retried = cli("ledger", "retry", "--status", "parked", "--ledger", url_of(outbox))
        assert retried.returncode == 0, retried.stderr
        for key in poison:
            assert (await outbox.status(key)).failures == 0
        for key in poison:
            sb.poison(key, None)
        assert await drain(outbox, sb) == {OutcomeStatus.ACCEPTED: 2}
    assert await outbox.counts() == {"accepted": 12}
    assert sb.commit_count == 12
    assert all(held.commits == 1 for held in sb.committed.values())


async def test_a_parked_entry_that_may_be_committed_is_its_own_409(outbox):
    """A document the provider commits but answers 500 every time ends parked with an
    unknown outcome; the retry sends the stored document again, and the provider's 409
    is its own commit: accepted, not duplicate, committed once."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        [key] = await outbox.enqueue([sample_invoice(1, issuer_vat=sb.client_id, lines=1)])
        sb.poison(key, Fault.commit_then_500())
        await drain(outbox, sb)
        parked = await outbox.status(key)
        assert parked.status == PARKED
        assert parked.maybe_committed
        assert sb.commit_count == 1  # held by the provider, the client cannot know
        assert await outbox.retry([key]) == 1
        sb.poison(key, None)
        await drain(outbox, sb)
        entry = await outbox.status(key)
        assert [r.status for r in sb.requests if r.identity == key][-1] == 409
    assert entry.status is OutcomeStatus.ACCEPTED
    assert entry.outcome.result == sb.committed[key].record
    assert sb.committed[key].commits == 1


async def test_enqueued_again_a_parked_document_stays_parked_unless_changed(outbox):
    """An application that enqueues on every save does not revive a poison document:
    the same content again stays parked (nothing sent); corrected content is a new
    document to the budget (pending, no failed rounds) and is sent."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        [document] = sample_invoices(1, issuer_vat=sb.client_id, lines=1)
        [key] = await outbox.enqueue([document])
        sb.poison(key, Fault.status(500))
        await drain(outbox, sb)
        assert (await outbox.status(key)).status == PARKED
        await outbox.enqueue([document])
        assert (await outbox.status(key)).status == PARKED
        sb.poison(key, None)
        document["AdditionalDetails"] = {"Remarks": "corrected"}  # changed content
        await outbox.enqueue([document])
        entry = await outbox.status(key)
        assert entry.status == PENDING
        assert entry.failures == 0
        assert await drain(outbox, sb) == {OutcomeStatus.ACCEPTED: 1}


class Rows:
    """The outbox's rows as a database tool sees them; moves an entry's clock forward."""

    def __init__(self, outbox) -> None:
        self.outbox = outbox

    async def read(self, key: str) -> tuple[str, int, int]:
        """``(state, claims, failures)``."""
        if isinstance(self.outbox, SqliteOutbox):
            with sqlite3.connect(self.outbox.path) as c:
                row = c.execute(
                    "SELECT state, claims, failures FROM entries WHERE key = ?", (key,)
                ).fetchone()
            c.close()
            return tuple(row)
        connection = await asyncpg.connect(self.outbox._db._dsn)
        try:
            row = await connection.fetchrow(
                "SELECT state, claims, failures FROM invoicing_outbox WHERE key = $1", key
            )
        finally:
            await connection.close()
        return tuple(row)

    async def due_now(self, key: str) -> None:
        """The wait is over (as if its time had come): the entry may be claimed."""
        if isinstance(self.outbox, SqliteOutbox):
            with sqlite3.connect(self.outbox.path, timeout=30) as c:
                c.execute("UPDATE entries SET available_at = 0 WHERE key = ?", (key,))
            c.close()
            return
        connection = await asyncpg.connect(self.outbox._db._dsn)
        try:
            await connection.execute(
                "UPDATE invoicing_outbox SET available_at = now() WHERE key = $1", key
            )
        finally:
            await connection.close()

    async def settled(
        self, key: str, claims: int, *, at_least: bool = False
    ) -> tuple[str, int, int]:
        """Until the entry's round number ``claims`` (or a later one) is written: a state
        no event announces."""
        while True:
            row = await self.read(key)
            done = row[1] >= claims if at_least else row[1] == claims
            if done and row[0] != "in_flight":
                return row
            await asyncio.sleep(0.01)


async def test_the_wait_between_rounds_grows_and_the_budget_survives_a_restart(outbox):
    """A document answered 500 every time, one request a round, waits stored with the
    entry: 30 to 60 s after its first failed round, 60 to 120 s after the second, 120 to 240 s
    after the third (read from ``available_at``; the clock is moved by writing it, never
    waited for). A worker stopped after two rounds and a new one started count on from
    the stored failures: the entry is parked after the fourth round in all."""
    policy = RetryPolicy(
        max_attempts=1, max_rounds=4, round_delay=60.0, max_round_delay=600.0,
        attempt_timeout=10.0,
    )  # fmt: skip
    rows = Rows(outbox)
    async with Sandbox(key_algorithm="cv25519") as sb:
        [key] = await outbox.enqueue([sample_invoice(1, issuer_vat=sb.client_id, lines=1)])
        sb.poison(key, Fault.status(500))
        waits = []
        async with client_for(sb) as client:
            for rounds in ((1, 2), (3, 4)):  # two workers: the second as after a restart
                worker = asyncio.ensure_future(
                    outbox.run_worker(client, stop_when_empty=True, retry=policy, poll=0.02)
                )
                for number in rounds:
                    state, _, failures = await asyncio.wait_for(rows.settled(key, number), 60)
                    assert failures == number
                    entry = await outbox.status(key)
                    if state == PARKED:
                        await asyncio.wait_for(worker, 60)  # only a parked entry is left
                        break
                    assert state == PENDING
                    waits.append((entry.available_at - entry.updated_at).total_seconds())
                    if number == rounds[-1]:  # stopped while the entry waits: it holds none
                        worker.cancel()
                        with pytest.raises(asyncio.CancelledError):
                            await worker
                    await rows.due_now(key)
        assert (await outbox.status(key)).status == PARKED
        assert requests_for(sb, key) == 4
    assert len(waits) == 3
    for number, wait in enumerate(waits, start=1):
        cap = 60.0 * 2 ** (number - 1)
        assert cap / 2 - 1 <= wait <= cap + 1, waits


async def test_an_outage_does_not_lengthen_the_wait_after_it(outbox):
    """Rounds that end ``not_sent`` (the provider refuses connections: an outage) say
    nothing against the document: each waits the first round's delay, 30 to 60 s here,
    however many rounds the outage lasts, so a till's backlog goes as soon as the
    provider answers again instead of minutes later (the clock moved by writing
    ``available_at``, never waited for)."""
    policy = RetryPolicy(
        max_attempts=1, max_rounds=2, round_delay=60.0, max_round_delay=600.0,
        attempt_timeout=5.0,
    )  # fmt: skip
    rows = Rows(outbox)
    async with Sandbox(key_algorithm="cv25519") as sb:
        [key] = await outbox.enqueue([sample_invoice(1, issuer_vat=sb.client_id, lines=1)])
        waits = []
        async with client_for(sb) as client:
            await client.token()
            async with sb.outage("refuse"):
                worker = asyncio.ensure_future(
                    outbox.run_worker(client, stop_when_empty=True, retry=policy, poll=0.02)
                )
                for number in range(1, 6):
                    state, _, failures = await asyncio.wait_for(rows.settled(key, number), 60)
                    assert (state, failures) == (PENDING, 0)
                    entry = await outbox.status(key)
                    waits.append((entry.available_at - entry.updated_at).total_seconds())
                    await rows.due_now(key)
                worker.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await worker
            counts = await outbox.run_worker(client, stop_when_empty=True, retry=policy, poll=0.02)
        assert counts == {OutcomeStatus.ACCEPTED: 1}
    assert len(waits) == 5
    assert all(30.0 - 1 <= wait <= 60.0 + 1 for wait in waits), waits


async def test_an_outage_never_parks_an_entry(outbox):
    """The provider refuses connections for many rounds (an outage): the entries fail
    ``not_sent`` round after round, back off, and are never parked (budget 2 rounds);
    once it answers, they are accepted."""
    policy = RetryPolicy(max_attempts=2, max_rounds=2, attempt_timeout=5.0)
    rows = Rows(outbox)
    async with Sandbox(key_algorithm="cv25519") as sb:
        keys = await outbox.enqueue(sample_invoices(3, issuer_vat=sb.client_id, lines=1))
        async with client_for(sb) as client:
            await client.token()
            with instant_retries():
                async with sb.outage("refuse"):
                    worker = asyncio.ensure_future(
                        outbox.run_worker(client, stop_when_empty=True, retry=policy, poll=0.02)
                    )
                    for key in keys:  # five rounds each, at least
                        await asyncio.wait_for(rows.settled(key, 5, at_least=True), 60)
                    worker.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await worker
                for key in keys:
                    entry = await outbox.status(key)
                    assert entry.status == PENDING
                    assert entry.failures == 0
                    assert entry.outcome.status is OutcomeStatus.NOT_SENT
                counts = await outbox.run_worker(
                    client, stop_when_empty=True, retry=policy, poll=0.02
                )
        assert counts == {OutcomeStatus.ACCEPTED: 3}


def test_the_round_backoff_grows_is_capped_and_jittered_on_its_upper_half():
    """RetryPolicy.delay_after_round: uniform in [cap/2, cap], cap doubling from
    round_delay up to max_round_delay; zero with instant retries."""
    import random  # noqa: PLC0415

    policy = RetryPolicy(round_delay=2.0, max_round_delay=300.0)
    rng = random.Random(7)
    for rounds, cap in ((1, 2.0), (2, 4.0), (5, 32.0), (9, 300.0), (30, 300.0)):
        draws = [policy.delay_after_round(rounds, rng=rng) for _ in range(200)]
        assert cap / 2 <= min(draws) <= max(draws) <= cap
    with instant_retries():
        assert policy.delay_after_round(5) == 0.0
    with pytest.raises(ValueError, match="max_rounds"):
        RetryPolicy(max_rounds=0)
    assert RetryPolicy().max_rounds == 10
    assert RetryPolicy(max_rounds=None).max_rounds is None


async def test_a_tills_drainer_parks_poison_sales_and_sends_the_rest(tmp_path):
    """Six sales deferred during an outage, two of them poison (500, reset): once the
    provider is back the drainer sends the four, parks the two after their budget of
    requests; the backlog (Deferral.refresh_backlog,
    `invoicing-async backlog`) shows them as parked; `ledger retry` sends them again and,
    cured, they are accepted and delivered."""
    path = tmp_path / "till.db"
    delivered: dict[str, object] = {}
    policy = RetryPolicy(max_attempts=2, max_rounds=3, attempt_timeout=5.0)
    async with Sandbox() as sb, client_for(sb) as client:
        till = Deferral(
            client, path, on_outcome=lambda item: delivered.__setitem__(item.key, item),
            probe_delay=0.02, probe_max_delay=0.1, poll=0.05, retry=policy,
        )  # fmt: skip
        async with till:
            await client.token()
            await sb.set_outage("refuse")
            keys = []
            for number in range(6):
                receipt = await till.submit_or_defer(sample_invoice(number))
                assert isinstance(receipt, DeferredReceipt)
                keys.append(receipt.key)
            poison = {keys[1]: Fault.status(500), keys[4]: Fault.reset()}
            for key, fault in poison.items():
                sb.poison(key, fault)
            with instant_retries():
                await sb.set_outage(None)
                await asyncio.wait_for(_until(lambda: len(delivered) == 4), 60)
                backlog = await asyncio.wait_for(_parked(till, 2), 60)
            assert backlog.count == 2
            for key in poison:
                assert requests_for(sb, key) <= policy.max_rounds * policy.max_attempts
            shown = cli("backlog", "--outbox", str(path), "--json")
            assert json.loads(shown.stdout)["parked"] == 2, shown
            assert "2 of them parked" in cli("backlog", "--outbox", str(path)).stdout
            for key in poison:
                sb.poison(key, None)
            retried = cli("ledger", "retry", "--status", "parked", "--ledger", str(path))
            assert retried.returncode == 0, retried.stderr
            await asyncio.wait_for(_until(lambda: len(delivered) == 6), 60)
            assert (await till.refresh_backlog()).count == 0
    assert sb.commit_count == 6
    assert all(held.commits == 1 for held in sb.committed.values())
    assert set(delivered) == set(keys)


async def _parked(till: Deferral, count: int):
    while True:
        backlog = await till.refresh_backlog()
        if backlog.parked == count:
            return backlog
        await asyncio.sleep(0.01)


async def _until(condition) -> None:
    while not condition():  # noqa: ASYNC110  (the state under test announces nothing)
        await asyncio.sleep(0.01)
