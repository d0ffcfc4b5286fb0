"""Deferred submission over real HTTP to the sandbox: a sale never waits on the provider.

Each test drives the sandbox's outage switch or scripted faults (never a sleep that
hopes), and checks the promises of :class:`~invoicing_async.Deferral`: within the budget
the provider's record; past it, or at once when the provider is certainly unreachable, a
receipt for a document already durable in the outbox; a definite refusal raised, never
deferred; the identity rule (only a document certainly not sent is stamped, one that
may have reached the provider is sent again byte-identical); every deferred sale
committed exactly once, its outcome delivered to the application at least once.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import subprocess
import sys
import time

import pytest
from sandboxtools import Outcomes, client_for

from invoicing_async import (
    CredentialsError,
    Deferral,
    DeferralReason,
    DeferredOutcome,
    DeferredReceipt,
    DocumentResult,
    DuplicateDocumentError,
    ForeignRecordError,
    InvalidDocumentError,
    InvoicingClient,
    OutcomeStatus,
    ProviderKeyError,
    RetryPolicy,
    ValidationError,
    document_key,
)
from invoicing_async._doc.document import serialize_document
from invoicing_async.outbox import SqliteOutbox
from invoicing_sandbox import Fault, Sandbox, sample_invoice

#: The drainer, fast: probes 20 ms apart at first, the outbox looked at every 0.1 s.
FAST = {
    "probe_delay": 0.02,
    "probe_max_delay": 0.1,
    "poll": 0.1,
    "retry": RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02, attempt_timeout=5.0),
}
#: A sale's own retries within its budget, fast.
SALE_RETRY = RetryPolicy(base_delay=0.01, max_delay=0.05)
#: Generous: a safety net, never a benchmark.
MARGIN = 1.5


def stamp(document: dict) -> dict:
    """Mark a document issued while the provider could not be reached."""
    return {**document, "TransmissionFailure": 1}


def stored_document(path, key: str) -> bytes:
    """The bytes the outbox holds for ``key`` (what the drainer sends)."""
    with sqlite3.connect(path) as connection:
        row = connection.execute("SELECT document FROM entries WHERE key = ?", (key,)).fetchone()
    connection.close()
    return bytes(row[0])


async def refused(sb: Sandbox, client, till: Deferral, number: int) -> DeferredReceipt:
    """Sell invoice ``number`` while the provider refuses connections (the client holding
    a token, as a running till does): a receipt, deferred at once."""
    await client.token()
    await sb.set_outage("refuse")
    receipt = await till.submit_or_defer(sample_invoice(number))
    assert isinstance(receipt, DeferredReceipt)
    return receipt


@pytest.fixture
async def sb():
    async with Sandbox() as sandbox:
        yield sandbox


async def test_within_the_budget_the_sale_gets_the_providers_record(sb, tmp_path):
    """A provider that answers: the record, as submit_secure gives it; nothing deferred."""
    outbox = tmp_path / "till.db"
    async with client_for(sb) as client, Deferral(client, outbox, **FAST) as till:
        answer = await till.submit_or_defer(sample_invoice(1))
        assert isinstance(answer, DocumentResult)
        assert sb.committed[document_key(sample_invoice(1))].record == answer
        assert till.provider_down is None
        assert (await till.refresh_backlog()).count == 0
    async with SqliteOutbox(outbox) as box:
        assert await box.status(document_key(sample_invoice(1))) is None


async def test_a_refused_connection_defers_at_once_stamped_and_durable(sb, tmp_path):
    """Connection refused: deferred without spending the budget, the stamp applied (the
    document certainly never left), durable in the outbox before the call returns; once
    the provider is back the stamped document is committed once and its outcome, with
    the provider's record, delivered."""
    path = tmp_path / "till.db"
    outcomes = Outcomes()
    doc = sample_invoice(2)
    key = document_key(doc)
    async with (
        client_for(sb, retry=SALE_RETRY) as client,
        Deferral(client, path, budget=30.0, stamp=stamp, on_outcome=outcomes, **FAST) as till,
    ):
        await client.token()
        await sb.set_outage("refuse")
        started = time.monotonic()
        receipt = await till.submit_or_defer(doc)
        assert time.monotonic() - started < 5.0  # far below the 30 s budget
        assert isinstance(receipt, DeferredReceipt)
        assert receipt.key == key
        assert receipt.reason is DeferralReason.UNREACHABLE
        assert (receipt.maybe_sent, receipt.stamped, receipt.attempts) == (False, True, 1)
        assert receipt.deferred_at.tzinfo is not None
        # Durable before the call returned: another connection to the file reads it.
        assert stored_document(path, key) == serialize_document(stamp(doc))
        assert till.provider_down is DeferralReason.UNREACHABLE
        assert till.backlog.count == 1
        await sb.set_outage(None)
        delivered = (await outcomes.wait(1))[key]
    assert delivered.outcome.status is OutcomeStatus.ACCEPTED
    assert delivered.receipt == receipt
    held = sb.committed[key]
    assert delivered.result == held.record
    assert held.document["TransmissionFailure"] == 1
    assert held.commits == 1


async def test_a_pass_that_counted_the_outbox_empty_does_not_undo_a_sale_finding_it_down(
    sb, tmp_path, monkeypatch, caplog
):
    """The drainer's pass counts the outbox empty; before it acts on that count, a sale
    finds the provider unreachable and is deferred. The pass must not then declare the
    provider up ("nothing is left to send"): it is down, and the next sale is deferred
    at once. The pass is held after its count, so the order is certain."""
    from invoicing_async._durable.sqlite import SqliteStore  # noqa: PLC0415
    from invoicing_async._pos import _drainer  # noqa: PLC0415

    counted: asyncio.Queue[tuple[int, asyncio.Event]] = asyncio.Queue()
    holding, working = [False], [False]
    count_outbox, run_worker = SqliteStore.remaining, _drainer.run_worker
    refresh_backlog, refreshed = _drainer.Drainer.refresh_backlog, asyncio.Event()

    async def remaining(store, skip=()):  # the pass's own count (not its worker's) waits
        count = await count_outbox(store, skip)
        if holding[0] and not working[0]:
            release = asyncio.Event()
            counted.put_nowait((count, release))
            await release.wait()
        return count

    async def worker(*args, **kwargs):
        working[0] = True
        try:
            return await run_worker(*args, **kwargs)
        finally:
            working[0] = False

    async def refreshing(drainer):  # a pass ends with it, after deciding up or down
        refreshed.set()
        await refresh_backlog(drainer)

    monkeypatch.setattr(SqliteStore, "remaining", remaining)
    monkeypatch.setattr(_drainer, "run_worker", worker)
    monkeypatch.setattr(_drainer.Drainer, "refresh_backlog", refreshing)
    caplog.set_level(logging.INFO, logger="invoicing_async")
    async with (
        client_for(sb, retry=SALE_RETRY) as client,
        Deferral(client, tmp_path / "till.db", budget=30.0, **FAST) as till,
    ):
        await client.token()
        await sb.set_outage("refuse")
        holding[0] = True
        count, release = await asyncio.wait_for(counted.get(), 30)
        assert count == 0
        holding[0] = False
        receipt = await till.submit_or_defer(sample_invoice(1))
        assert receipt.reason is DeferralReason.UNREACHABLE
        refreshed.clear()
        release.set()
        await asyncio.wait_for(refreshed.wait(), 30)
        assert till.provider_down is DeferralReason.UNREACHABLE
        assert not [r for r in caplog.records if "the provider answers again" in r.getMessage()]
        second = await till.submit_or_defer(sample_invoice(2))
        assert isinstance(second, DeferredReceipt)
        assert second.attempts == 0  # deferred at once, without a request


async def test_a_hanging_provider_defers_at_the_budget_unstamped(sb, tmp_path):
    """A provider that accepts and never answers: the sale returns at its budget with a
    receipt (timed out, may have been sent: stored unchanged, never stamped), and the
    next sale is deferred at once, without a request."""
    stamped: list[dict] = []

    def spy(document: dict) -> dict:
        stamped.append(document)
        return stamp(document)

    async with (
        client_for(sb, retry=SALE_RETRY) as client,
        Deferral(client, tmp_path / "till.db", budget=0.5, stamp=spy, **FAST) as till,
    ):
        await client.token()
        await sb.set_outage("hang")
        started = time.monotonic()
        first = await till.submit_or_defer(sample_invoice(3))
        elapsed = time.monotonic() - started
        assert 0.5 <= elapsed < 0.5 + MARGIN
        assert isinstance(first, DeferredReceipt)
        assert first.reason is DeferralReason.TIMED_OUT
        assert (first.maybe_sent, first.stamped) == (True, False)
        assert stored_document(tmp_path / "till.db", first.key) == serialize_document(
            sample_invoice(3)
        )
        hits = sb.outage_hits
        second = await till.submit_or_defer(sample_invoice(4))
        assert isinstance(second, DeferredReceipt)
        assert (second.reason, second.attempts, second.stamped) == (
            DeferralReason.TIMED_OUT,
            0,
            True,
        )
        assert sb.outage_hits <= hits + 1  # at most the drainer's probe, never the sale
        assert stamped == [sample_invoice(4)]


@pytest.mark.parametrize(
    ("fault", "reason", "maybe_sent"),
    [
        (Fault.status(500), DeferralReason.SERVER_ERROR, True),
        (Fault.status(503), DeferralReason.SERVER_ERROR, False),
        (Fault.status(408), DeferralReason.PROVIDER_TIMEOUT, True),
        (Fault.status(429, retry_after=60), DeferralReason.RATE_LIMITED, False),
    ],
)
async def test_each_failure_defers_with_its_reason(sb, tmp_path, fault, reason, maybe_sent):
    """A 5xx and a 408 may have been processed (stored unchanged); a 503 and a 429
    certainly were not (RFC 9110; the safety table's rule): stamped. The token is
    fetched first: the sale's short budget is for the document's answer (on a loaded
    machine a token request inside it timed out, and the sale was deferred for that)."""
    sb.script(*[fault] * 20)
    async with (
        client_for(sb, retry=SALE_RETRY) as client,
        Deferral(client, tmp_path / "till.db", budget=0.3, stamp=stamp, **FAST) as till,
    ):
        await client.token()
        receipt = await till.submit_or_defer(sample_invoice(5))
    assert isinstance(receipt, DeferredReceipt)
    assert (receipt.reason, receipt.maybe_sent, receipt.stamped) == (
        reason,
        maybe_sent,
        not maybe_sent,
    )


async def test_the_ambiguous_case_is_sent_again_unchanged_and_committed_once(sb, tmp_path):
    """The first attempt reaches the sandbox (committed) but its answer is lost, and the
    provider then hangs until the budget ends: the document may be held, so the stamp
    hook is never called and the outbox holds it byte-identical; the drainer sends it
    again, the provider's 409 makes it this sale's own acceptance, committed once."""
    path = tmp_path / "till.db"
    calls: list[dict] = []
    outcomes = Outcomes()
    doc = sample_invoice(6)
    key = document_key(doc)
    sb.script(Fault.commit_then_drop(), Fault.hang())
    async with (
        client_for(sb, retry=SALE_RETRY) as client,
        Deferral(
            client, path, budget=1.0, stamp=lambda d: calls.append(d) or stamp(d),
            on_outcome=outcomes, **FAST,
        ) as till,
    ):  # fmt: skip
        receipt = await till.submit_or_defer(doc)
        assert isinstance(receipt, DeferredReceipt)
        assert (receipt.maybe_sent, receipt.stamped) == (True, False)
        assert stored_document(path, key) == serialize_document(doc)
        delivered = (await outcomes.wait(1))[key]
    assert calls == []
    assert delivered.outcome.status is OutcomeStatus.ACCEPTED  # its own commit, not a duplicate
    held = sb.committed[key]
    assert held.commits == 1
    assert held.body == serialize_document(doc)
    assert delivered.result == held.record
    await asyncio.wait_for(_until(lambda: not sb._inflight), 30)  # the held request ended
    faults = [r.fault for r in sb.requests if r.path.endswith("/Invoice/secure")]
    assert faults[:2] == ["commit_then_drop", "hang"]  # then the drainer's 409


async def test_definite_refusals_raise_and_are_never_deferred(sb, tmp_path):
    """400, a foreign record, a 409 of a document held before, refused credentials and
    a missing provider key raise as they do today: nothing is stored."""
    path = tmp_path / "till.db"
    async with (
        client_for(sb, retry=SALE_RETRY) as client,
        Deferral(client, path, budget=5.0, **FAST) as till,
    ):
        sb.script(Fault.status(400))  # a refusal of the provider's that no rule foresaw
        with pytest.raises(ValidationError) as refused_400:
            await till.submit_or_defer(sample_invoice(7))
        assert refused_400.value.status == 400
        sb.script(Fault.foreign_record(), *[Fault.foreign_record()] * 5)
        with pytest.raises(ForeignRecordError):
            await till.submit_or_defer(sample_invoice(8))
        await client.submit_secure(sample_invoice(9))
        with pytest.raises(DuplicateDocumentError) as held:
            await till.submit_or_defer(sample_invoice(9))
        assert held.value.result == sb.committed[document_key(sample_invoice(9))].record
        assert till.provider_down is None
    async with (
        client_for(sb, provider_key=None) as keyless,
        Deferral(keyless, path, **FAST) as till,
    ):
        with pytest.raises(ProviderKeyError):
            await till.submit_or_defer(sample_invoice(10))
    env = sb.environment()
    async with (
        InvoicingClient(
            env.base_url, env.client_id, "wrong-key", provider_key=sb.provider_key
        ) as wrong,
        Deferral(wrong, path, **FAST) as till,
    ):
        with pytest.raises(CredentialsError):
            await till.submit_or_defer(sample_invoice(11))
    async with SqliteOutbox(path) as box:
        assert await box.counts() == {}


def _would_be_refused(number: int) -> dict:
    """A sale whose first line's VAT is not its net at 24 % (a POS rounding bug)."""
    sale = sample_invoice(number, lines=2)
    sale["Details"][0]["VATTotal"] += 0.05
    return sale


async def test_a_sale_the_provider_would_refuse_is_refused_at_the_till_through_an_outage(
    sb, tmp_path
):
    """The provider refuses connections: a valid sale is deferred as before (a receipt
    with the offline QR, durable, then committed once the provider is back), but a sale
    the provider would refuse raises InvalidDocumentError at once, naming the field:
    before any receipt, never queued, no request made for it. When the provider
    answers again, such a sale still raises before any request."""
    path = tmp_path / "till.db"
    outcomes = Outcomes()
    async with (
        client_for(sb) as client,
        Deferral(
            client, path, portal_url="https://portal.invalid", on_outcome=outcomes, **FAST
        ) as till,
    ):
        receipt = await refused(sb, client, till, 31)  # deferred as before
        assert receipt.offline_qr_url is not None
        sent = len(sb.requests)
        with pytest.raises(InvalidDocumentError) as caught:
            await till.submit_or_defer(_would_be_refused(32))
        assert caught.value.status is None
        assert caught.value.problems[0].field == "Details[0].VATTotal"
        assert (await till.refresh_backlog()).count == 1  # only the valid sale waits
        async with SqliteOutbox(path) as box:
            assert await box.status(document_key(_would_be_refused(32))) is None
        await sb.set_outage(None)
        assert (await outcomes.wait(1))[receipt.key].outcome.status is OutcomeStatus.ACCEPTED
        with pytest.raises(InvalidDocumentError):
            await till.submit_or_defer(_would_be_refused(33))
    bad = {document_key(_would_be_refused(n)) for n in (32, 33)}
    assert not {r.identity for r in sb.requests[sent:]} & bad  # never sent
    assert sb.commit_count == 1


async def test_while_the_provider_is_down_a_bad_document_still_raises(sb, tmp_path):
    """Deferred at once or not, a document that cannot be serialised, or encrypted
    without a provider key, raises: nothing the till can correct is deferred."""
    path = tmp_path / "till.db"
    async with (
        client_for(sb) as client,
        Deferral(client, path, **FAST) as till,
    ):
        await refused(sb, client, till, 23)
        assert till.provider_down is DeferralReason.UNREACHABLE
        with pytest.raises(ValidationError):
            await till.submit_or_defer({"Summaries": {"TotalGrossValue": float("nan")}})
    async with SqliteOutbox(path) as box:
        counts = await box.counts()
    # Only the refused sale: pending, or in flight if the drainer was probing with it
    # when the deferral closed (the next start sends it again).
    assert sum(counts.values()) == 1
    assert set(counts) <= {"pending", "in_flight"}


async def test_a_stamp_that_changes_the_identity_is_not_what_is_stored(sb, tmp_path):
    """The hook may mark a document, never change what identifies it: the sale is
    stored under its own identity as it was given (stamped by the library), and the
    receipt says why the hook's document was not used."""
    path = tmp_path / "till.db"
    doc = sample_invoice(12)

    def renumber(document: dict) -> dict:
        return {**document, "DistributionDetails": {"InternalDocumentId": "other"}}

    async with (
        client_for(sb) as client,
        Deferral(client, path, stamp=renumber, **FAST) as till,
    ):
        receipt = await refused(sb, client, till, 12)
    assert receipt.key == document_key(doc)
    assert "another identity" in (receipt.stamp_error or "")
    assert stored_document(path, receipt.key) == serialize_document(stamp(doc))


async def test_the_same_sale_deferred_twice_keeps_its_first_deferral(sb, tmp_path):
    """A till that re-submits a sale still waiting gets its first receipt back; once
    the provider holds it, re-submitting answers its record from the outbox."""
    path = tmp_path / "till.db"
    outcomes = Outcomes()
    async with (
        client_for(sb) as client,
        Deferral(client, path, stamp=stamp, on_outcome=outcomes, **FAST) as till,
    ):
        first = await refused(sb, client, till, 13)
        again = await till.submit_or_defer(sample_invoice(13))
        assert again == first
        assert till.backlog.count == 1
        await sb.set_outage(None)
        await outcomes.wait(1)
        await sb.set_outage("refuse")
        await till.submit_or_defer(sample_invoice(14))  # the provider is known down again
        record = await till.submit_or_defer(sample_invoice(13))
    assert record == sb.committed[document_key(sample_invoice(13))].record


async def test_receipts_carry_the_offline_qr_signed_with_the_clients_key(sb, tmp_path, caplog):
    """With portal_url, a receipt has the provider's offline QR url of the stored
    document, signed with the client's API key; the key is in no url, repr, log line
    (DEBUG included) or file the deferral writes."""
    from invoicing_async import qr  # noqa: PLC0415

    caplog.set_level(logging.DEBUG, logger="invoicing_async")

    async with (
        client_for(sb) as client,
        Deferral(client, tmp_path / "till.db", portal_url="https://portal.invalid", **FAST) as till,
    ):
        receipt = await refused(sb, client, till, 15)
        token = (await client.token()).value
    assert isinstance(receipt, DeferredReceipt)
    expected = qr.offline_qr_url(
        sample_invoice(15), portal_url="https://portal.invalid", api_key=sb.client_secret
    )
    assert receipt.offline_qr_url == expected
    assert sb.client_secret not in repr(receipt)
    assert sb.client_secret not in expected
    assert sb.client_secret not in caplog.text
    assert token not in caplog.text
    for path in tmp_path.iterdir():
        assert sb.client_secret.encode() not in path.read_bytes()
        assert token.encode() not in path.read_bytes()


async def test_outcomes_are_delivered_at_least_once(sb, tmp_path):
    """An outcome counts as delivered when the callback returns (one that raised comes
    again), or when the loop of outcomes() asks for the next: one the application
    stopped at is delivered again by the next deferral on the same outbox."""
    path = tmp_path / "till.db"
    seen: list[str] = []

    def flaky(item: DeferredOutcome) -> None:
        seen.append(item.key)
        if len(seen) == 1:
            raise RuntimeError("the till's database is busy")

    async with (
        client_for(sb) as client,
        Deferral(client, path, on_outcome=flaky, **FAST) as till,
    ):
        receipt = await refused(sb, client, till, 16)
        await sb.set_outage(None)
        await asyncio.wait_for(_until(lambda: len(seen) >= 2), 60)
    assert seen[:2] == [receipt.key, receipt.key]

    async with client_for(sb) as client:
        async with Deferral(client, path, **FAST) as till:
            other = await refused(sb, client, till, 17)
            await sb.set_outage(None)
            async for item in till.outcomes():
                assert item.key == other.key
                break  # stopped before asking for the next: not yet told
        async with Deferral(client, path, **FAST) as till:
            item = await asyncio.wait_for(anext(aiter(till.outcomes())), 60)
            assert item.key == other.key
            assert item.result == sb.committed[other.key].record


async def test_the_outbox_worker_drains_a_deferrals_outbox(sb, tmp_path):
    """The drainer is the outbox worker: run_worker (and `invoicing-async worker`) drains
    the same file, and the deferral, opened again, delivers what it settled."""
    path = tmp_path / "till.db"
    async with client_for(sb) as client:
        async with Deferral(client, path, **FAST) as till:
            receipt = await refused(sb, client, till, 18)
        await sb.set_outage(None)
        async with SqliteOutbox(path) as box:
            counts = await box.run_worker(client, stop_when_empty=True, poll=0.05)
            assert counts == {OutcomeStatus.ACCEPTED: 1}
        outcomes = Outcomes()
        async with Deferral(client, path, on_outcome=outcomes, **FAST):
            delivered = (await outcomes.wait(1))[receipt.key]
    assert delivered.result == sb.committed[receipt.key].record


async def test_the_backlog_counts_warns_and_is_shown_by_the_command(sb, tmp_path, caplog):
    """Count and age of the oldest deferred sale: a property, a WARNING past
    warn_after, `invoicing-async backlog` (exit 1 with --warn-after past it)."""
    path = tmp_path / "till.db"
    caplog.set_level(logging.WARNING, logger="invoicing_async.deferral")
    async with (
        client_for(sb) as client,
        Deferral(client, path, warn_after=0.0, **FAST) as till,
    ):
        await client.token()
        await sb.set_outage("refuse")
        for number in (19, 20, 21):
            await till.submit_or_defer(sample_invoice(number))
        backlog = await till.refresh_backlog()
        assert backlog.count == 3
        assert backlog.oldest is not None
        assert backlog.age >= 0
        assert any("not yet transmitted" in r.getMessage() for r in caplog.records)
        shown = _cli("backlog", "--outbox", str(path), "--json")
        assert shown.returncode == 0, shown.stderr
        assert '"count": 3' in shown.stdout
        late = _cli("backlog", "--outbox", str(path), "--warn-after", "0")
        assert late.returncode == 1
        assert "3 deferred sale(s)" in late.stdout
        code = _cli(
            "qr", "--key", receipt_key(19), "--outbox", str(path), "--png", str(tmp_path / "q.png")
        )
        assert code.returncode == 2  # no portal_url: no offline QR to print
        await sb.set_outage(None)
    assert sb.client_secret not in caplog.text


async def test_the_qr_command_prints_a_receipt_from_the_outbox(sb, tmp_path):
    """`invoicing-async qr --key K --outbox F`: the offline QR while the sale waits, the
    provider's qrCodeString once transmitted."""
    from qrtools import ZBARIMG, decode  # noqa: PLC0415

    if ZBARIMG is None:
        pytest.skip("zbarimg (zbar-tools) not installed")
    path = tmp_path / "till.db"
    outcomes = Outcomes()
    async with (
        client_for(sb) as client,
        Deferral(
            client, path, portal_url="https://portal.invalid", on_outcome=outcomes, **FAST
        ) as till,
    ):
        receipt = await refused(sb, client, till, 22)
        image = tmp_path / "offline.png"
        offline = _cli("qr", "--key", receipt.key, "--outbox", str(path), "--png", str(image))
        assert offline.returncode == 0, offline.stderr
        assert decode(image) == receipt.offline_qr_url
        await sb.set_outage(None)
        await outcomes.wait(1)
    online = _cli("qr", "--key", receipt.key, "--outbox", str(path), "--png", str(image))
    assert online.returncode == 0, online.stderr
    assert decode(image) == sb.committed[receipt.key].record.qr_code_string


def receipt_key(number: int) -> str:
    return document_key(sample_invoice(number))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoicing_async", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


async def _until(condition) -> None:
    while not condition():  # noqa: ASYNC110  (the callback announces nothing else)
        await asyncio.sleep(0.01)


async def test_a_fleet_of_tills_shares_a_postgres_outbox(sb, postgres_dsn):
    """Two tills defer into one PostgreSQL outbox during an outage; after it, every
    sale is committed once and each till is told the outcomes of its own sales only."""
    from invoicing_async.outbox import PostgresOutbox  # noqa: PLC0415

    got = {"till-1": Outcomes(), "till-2": Outcomes()}
    async with (
        PostgresOutbox(postgres_dsn) as outbox,
        client_for(sb) as one,
        client_for(sb) as two,
        Deferral(one, outbox, origin="till-1", on_outcome=got["till-1"], **FAST) as first,
        Deferral(two, outbox, origin="till-2", on_outcome=got["till-2"], **FAST) as second,
    ):
        await one.token()
        await two.token()
        await sb.set_outage("refuse")
        mine = {"till-1": set(), "till-2": set()}
        for number in range(30, 40):
            till, name = (first, "till-1") if number % 2 else (second, "till-2")
            receipt = await till.submit_or_defer(sample_invoice(number))
            assert isinstance(receipt, DeferredReceipt)
            mine[name].add(receipt.key)
        assert (await first.refresh_backlog()).count == 10
        await sb.set_outage(None)
        for name, outcomes in got.items():
            delivered = await outcomes.wait(len(mine[name]))
            assert set(delivered) == mine[name]
            for key, item in delivered.items():
                assert item.result == sb.committed[key].record
    assert sb.commit_count == 10
    assert all(held.commits == 1 for held in sb.committed.values())


async def test_a_closing_deferral_lets_its_drainers_request_end(sb, tmp_path):
    """A till closes (its application stops) while its drainer's request for a deferred
    sale is out: closing waits for it, as a graceful stop of the outbox worker does
    (the drainer is one), instead of cutting it off; answered, the sale is recorded
    ``accepted``, not put back as a request that may have been committed (to be sent
    again, answered 409, by the next start)."""
    path = tmp_path / "till.db"
    async with client_for(sb) as client:
        till = Deferral(client, path, **FAST)
        await till.start()
        receipt = await refused(sb, client, till, 1)
        sb.hold()
        await sb.set_outage(None)
        await sb.wait_held(1)  # the drainer's probe, out
        closing = asyncio.ensure_future(till.close())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not closing.done()  # it waits for the request out
        sb.release()
        await asyncio.wait_for(closing, 60)
    async with SqliteOutbox(path) as outbox:
        entry = await outbox.status(receipt.key)
    assert entry.status is OutcomeStatus.ACCEPTED
    assert sb.commit_count == 1
