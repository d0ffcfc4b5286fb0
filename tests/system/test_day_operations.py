"""The rest of a day through the client's typed methods, over real HTTP to the sandbox.

Credits, delayed card payments, IRIS payments, the listing of issued documents and a
PDF: each operation's safety rule (a lost answer, a 5xx, a repeat the provider refuses)
with the sandbox's scripted faults, and a typed error for each refusal. The sandbox's
ground truth (``credits``, ``payment_updates``, ``iris_payments``, ``committed``) is
what the client's view is checked against.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io

import pytest
from aiohttp import web
from sandboxtools import FakeClock, client_for

from invoicing_async import (
    CardPayment,
    CreditRefusedError,
    DocumentNotFoundError,
    DuplicateDocumentError,
    InstantPaymentRequest,
    InvoicingClient,
    MalformedResponseError,
    PaymentConflictError,
    RetryPolicy,
    ServerError,
    UnexpectedStatusError,
    UnknownOutcomeError,
    ValidationError,
)
from invoicing_sandbox import Fault, Sandbox, sample_invoice

DAY = dt.date(2026, 11, 22)
FAST = RetryPolicy(base_delay=0, max_delay=0)


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
async def sb(clock):
    async with Sandbox(key_algorithm="cv25519", clock=clock, page_size=3) as sandbox:
        yield sandbox


@pytest.fixture
async def client(sb):
    async with client_for(sb, retry=FAST) as made:
        yield made


def receipt(sb, number):
    document = sample_invoice(number, issuer_vat=sb.client_id, lines=1, issued=DAY)
    document["InvoiceTypeCode"] = "11.1"
    del document["CounterParty"]
    return document


async def invoice(client, sb, number=1):
    return await client.submit_json(
        sample_invoice(number, issuer_vat=sb.client_id, lines=1, issued=DAY)
    )


# --- credits -----------------------------------------------------------------------------


async def test_a_return_is_credited_by_receipt_many_times(client, sb):
    """A retail receipt's credit is an 11.4, given as many times as asked; the result is
    typed and names the original; the sandbox holds each credit."""
    original = await client.submit_json(receipt(sb, 1))
    first = await client.credit(original, series="CR", number="1", internal_id="CR-1")
    second = await client.credit(original, series="CR", number="2", internal_id="CR-2")
    assert (first.original_mark, first.status, first.attempts) == (original.mark, 200, 1)
    assert second.internal_id == "CR-2"
    assert [c.invoice_type for c in sb.credits] == ["11.4", "11.4"]


async def test_an_uncorrelated_credit_after_a_lost_answer_is_resent_and_is_its_own(client, sb):
    """relate_credit=False is a deduplicated write: the credit is issued and its answer
    lost; the client sends it again, the provider answers 409 with the credit's record,
    and that is this call's result (one credit, its mark known)."""
    original = await invoice(client, sb)
    sb.script_operation(Fault.commit_then_drop())
    result = await client.credit(original, series="CR", number="1", internal_id="CR-1")
    assert (result.status, result.attempts) == (409, 2)
    [issued] = sb.credits
    assert result.mark == issued.mark


async def test_a_correlated_credit_after_a_lost_answer_is_not_resent(client, sb):
    """relate_credit=True (one 5.1 per document) is at most once: after a lost answer the
    outcome is unknown, nothing is sent again, and what it says to do is to list the
    day's documents."""
    original = await invoice(client, sb)
    sb.script_operation(Fault.commit_then_drop())
    with pytest.raises(UnknownOutcomeError) as caught:
        await client.credit(
            original, series="CR", number="1", internal_id="CR-1", relate_credit=True
        )
    assert "documents_issued" in str(caught.value)
    assert len(sb.credits) == 1
    assert len([r for r in sb.requests if r.path == "/Invoice/credit"]) == 1


async def test_a_5xx_before_processing_is_retried_for_either_credit(client, sb):
    """A 503 says the request was not processed: both classes send it again."""
    original = await invoice(client, sb)
    sb.script_operation(Fault.status(503, retry_after=0), Fault.status(503, retry_after=0))
    await client.credit(original, series="CR", number="1", internal_id="CR-1")
    await client.credit(original, series="CR", number="2", internal_id="CR-2", relate_credit=True)
    assert [c.invoice_type for c in sb.credits] == ["5.2", "5.1"]


async def test_a_500_after_a_correlated_credit_is_unknown_not_resent(client, sb):
    """A 500 may have been processed: an at-most-once credit ends unknown."""
    original = await invoice(client, sb)
    sb.script_operation(Fault.commit_then_500())
    with pytest.raises(UnknownOutcomeError) as caught:
        await client.credit(
            original, series="CR", number="1", internal_id="CR-1", relate_credit=True
        )
    assert isinstance(caught.value.last_error, ServerError)
    assert len(sb.credits) == 1


async def test_each_refusal_of_a_credit_is_typed(client, sb):
    """A second 5.1 of one document: CreditRefusedError correlated_already; a credit of a
    credit: is_a_credit; an unknown original: DocumentNotFoundError; a credit number used
    before: DuplicateDocumentError."""
    original = await invoice(client, sb)
    await client.credit(original, series="CR", number="1", internal_id="CR-1", relate_credit=True)
    with pytest.raises(CreditRefusedError) as again:
        await client.credit(
            original, series="CR", number="2", internal_id="CR-2", relate_credit=True
        )
    assert (again.value.reason, again.value.status) == ("correlated_already", 400)
    credit_record = sb.committed[sb.credits[0].identity].record
    with pytest.raises(CreditRefusedError) as of_a_credit:
        await client.credit(credit_record, series="CR", number="3", internal_id="CR-3")
    assert of_a_credit.value.reason == "is_a_credit"
    with pytest.raises(DocumentNotFoundError):
        await client.credit(
            mark=original.mark,
            authentication_code="not-its-code",
            series="CR",
            number="4",
            internal_id="CR-4",
        )
    with pytest.raises(DuplicateDocumentError):
        await client.credit(original, series="CR", number="5", internal_id="CR-1")
    with pytest.raises(ValueError, match="name the original"):
        await client.credit(series="CR", number="6", internal_id="CR-6")


# --- delayed card payments ------------------------------------------------------------


async def signed_payment(client, sb, record, amount=5, transaction="TX-1"):
    signed = await client.sign_pos_transaction(
        {"issuerTin": sb.client_id, "mark": record.mark, "paymentAmount": amount}
    )
    return CardPayment(
        amount=amount,
        transaction_id=transaction,
        providers_signature=signed.body["signature"],
        pos_input=signed.body["signedDataInput"],
        terminal_id="T-1",
    )


async def test_a_card_payment_later_gets_its_payment_mark(client, sb):
    """The payment signed for the mark, sent typed: its payment mark is the sandbox's."""
    record = await invoice(client, sb)
    payment = await signed_payment(client, sb, record)
    result = await client.update_payment(record.mark, payment)
    [update] = sb.payment_updates
    assert (result.mark, result.payment_mark) == (record.mark, update.payment_mark)
    assert update.payment_methods[0]["terminalId"] == "T-1"


async def test_a_payment_whose_answer_is_lost_is_not_sent_again(client, sb):
    """At most once: a lost answer is an unknown outcome, one request, one payment."""
    record = await invoice(client, sb)
    payment = await signed_payment(client, sb, record)
    sb.script_operation(Fault.commit_then_drop())
    with pytest.raises(UnknownOutcomeError):
        await client.update_payment(record.mark, payment)
    assert [u.requests for u in sb.payment_updates] == [1]
    assert len([r for r in sb.requests if r.path == "/Invoice/updatePayment"]) == 1


async def test_a_payment_refused_before_processing_is_sent_again(client, sb):
    """A 503 was not processed: sent again, registered once."""
    record = await invoice(client, sb)
    payment = await signed_payment(client, sb, record)
    sb.script_operation(Fault.status(503, retry_after=0))
    result = await client.update_payment(record.mark, [payment])
    assert result.attempts == 2
    assert len(sb.payment_updates) == 1


async def test_each_refusal_of_a_payment_is_typed(client, sb):
    """The transaction recorded with another amount: PaymentConflictError with the
    payment mark; an unknown mark: DocumentNotFoundError; a signature SignPos did not
    give: ValidationError."""
    record = await invoice(client, sb)
    payment = await signed_payment(client, sb, record)
    first = await client.update_payment(record.mark, payment)
    other = await signed_payment(client, sb, record, amount=7)
    with pytest.raises(PaymentConflictError) as conflict:
        await client.update_payment(record.mark, other)
    assert conflict.value.payment_mark == first.payment_mark
    with pytest.raises(DocumentNotFoundError):
        await client.update_payment(record.mark + 1000, payment)
    forged = CardPayment(amount=5, transaction_id="TX-2", providers_signature="forged")
    with pytest.raises(ValidationError, match="providersSignature"):
        await client.update_payment(record.mark, forged)
    with pytest.raises(ValueError, match="at least one payment"):
        await client.update_payment(record.mark, [])


# --- IRIS -------------------------------------------------------------------------------


async def test_an_instant_payment_is_polled_until_completed_on_a_fake_clock(client, sb, clock):
    """Initiate (typed: ids, QR, validity), then wait: the sandbox says Pending twice,
    then Completed; the waits are the fake sleep's, no real time passes."""
    started = await client.initiate_instant_payment(
        InstantPaymentRequest(amount=12.5, validity_minutes=2, mark=0)
    )
    assert started.qr_code
    assert started.authorisation_request_id
    assert started.expires_at - started.created_at == dt.timedelta(minutes=2)
    sb.auto_settle_iris_payments("Completed", after=3)
    slept = []

    async def sleep(seconds):
        slept.append(seconds)
        clock.now += seconds

    status = await client.wait_for_instant_payment(started, interval=5, clock=clock, sleep=sleep)
    assert (status.status, status.final, status.completed) == ("Completed", True, True)
    assert slept == [5, 5]


async def test_an_unpaid_instant_payment_expires_within_its_validity(client, sb, clock):
    """Nobody pays: once the clock passes the validity the sandbox says Expired, and the
    helper returns it (final, not completed) without waiting past its time."""
    started = await client.initiate_instant_payment(InstantPaymentRequest(amount=3))

    async def sleep(seconds):
        clock.now += seconds

    status = await client.wait_for_instant_payment(started, interval=60, clock=clock, sleep=sleep)
    assert (status.status, status.final, status.completed) == ("Expired", True, False)


async def test_the_wait_ends_pending_when_its_time_is_over(client, sb, clock):
    """A wait shorter than the validity ends with the last status read, Pending."""
    started = await client.initiate_instant_payment(InstantPaymentRequest(amount=3))
    slept = []

    async def sleep(seconds):
        slept.append(seconds)
        clock.now += seconds

    status = await client.wait_for_instant_payment(
        started.end_to_end_id, within=10, interval=4, clock=clock, sleep=sleep
    )
    assert (status.status, status.final) == ("Pending", False)
    assert slept == [4, 4, 2]  # no sleep outlasts the time left


async def test_instant_payment_safety_rules_and_refusals(client, sb):
    """InitiatePayment is at most once (a lost answer: unknown, one payment started);
    the status read is repeated after a 500; an unknown id is DocumentNotFoundError;
    validity outside 1 to 3 minutes is refused before sending."""
    sb.script_operation(Fault.commit_then_drop())
    with pytest.raises(UnknownOutcomeError):
        await client.initiate_instant_payment(InstantPaymentRequest(amount=3))
    [started] = sb.iris_payments
    sb.script_operation(Fault.status(500))
    status = await client.instant_payment_status(started.end_to_end_id)
    assert status.status == "Pending"
    with pytest.raises(DocumentNotFoundError):
        await client.instant_payment_status("F" * 32)
    with pytest.raises(ValueError, match="validity_minutes"):
        InstantPaymentRequest(amount=3, validity_minutes=5)


# --- the listing and a PDF -----------------------------------------------------------------


async def test_the_listing_follows_next_page_over_every_page(client, sb):
    """Seven documents at three a page: every one once, in mark order, the credit (issued
    today) too."""
    records = [await invoice(client, sb, n) for n in range(1, 7)]
    await client.credit(records[0], series="CR", number="1", internal_id="CR-1")
    today = dt.datetime.now(dt.timezone.utc).date()
    listed = [record async for record in client.documents_issued(None, DAY, max(DAY, today))]
    assert [r.mark for r in listed] == [*(r.mark for r in records), sb.credits[0].mark]
    assert listed[-1].extra["invoiceTypeCode"] == "5.2"
    only_the_day = [r.mark async for r in client.documents_issued(None, DAY)]
    assert only_the_day == [r.mark for r in records]


async def test_a_page_that_fails_once_is_read_again(client, sb):
    """A page is a read: a 500 on page 2 is read again and the listing goes on."""
    records = [await invoice(client, sb, n) for n in range(1, 5)]
    listed = client.documents_issued(None, DAY)
    first = await anext(listed)
    sb.script_operation(Fault.status(500))
    rest = [record async for record in listed]
    assert [first.mark, *(r.mark for r in rest)] == [r.mark for r in records]


@pytest.fixture
async def hostile():
    """A provider on loopback whose listing pages say what the test sets: page ``n``'s
    ``NextPage`` header is ``hostile.next[n]`` (absent when not set)."""
    app = web.Application()
    state = {"next": {}, "url": ""}

    async def token(request):
        return web.json_response({"access_token": "t", "token_type": "Bearer", "expires_in": 900})

    async def page(request):
        number = int(request.match_info["page"])
        headers = {}
        if number in state["next"]:
            headers["NextPage"] = state["next"][number]
        return web.json_response([{"mark": 100 + number}], headers=headers)

    async def pdf(request):
        if request.match_info["name"] == "moved":
            raise web.HTTPFound("https://elsewhere.example/v/x/pdf")
        return web.Response(text="<html>a login page</html>", content_type="text/html")

    app.router.add_get("/v/{name}/pdf", pdf)
    app.router.add_post("/oauth/token", token)
    app.router.add_get("/api/invoice/getdocuments/{tin}/{page}/", page)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    state["url"] = f"http://127.0.0.1:{port}"
    yield state
    await runner.cleanup()


@pytest.mark.parametrize(
    ("pages", "words"),
    [
        ({1: "2", 2: "1"}, "does not lead on"),
        ({1: "2", 2: "2"}, "does not lead on"),
        ({1: "x"}, "not a page number"),
        ({1: "9" * 40}, "not a page number"),
    ],
)
async def test_a_next_page_that_loops_back_is_a_typed_error(hostile, pages, words):
    """A NextPage header that loops back, stands still or is no page number would never
    end: MalformedResponseError naming it, after the documents of the pages before."""
    hostile["next"].update(pages)
    seen = []

    async def drain(client):
        async for record in client.documents_issued(None, DAY):
            seen.append(record.mark)  # noqa: PERF401  (what came before the error)

    async with InvoicingClient(hostile["url"], "094019245", "key", retry=FAST) as client:
        with pytest.raises(MalformedResponseError, match=words):
            await drain(client)
    assert seen == [100 + n for n in range(1, len(seen) + 1)]


async def test_a_page_that_is_not_json_or_too_large_is_a_typed_error(sb):
    """Hostile pages: an HTML page (after retries), a page over the client's
    max_response_size: MalformedResponseError, nothing half-read."""
    async with client_for(sb, retry=RetryPolicy(max_attempts=1)) as client:
        await invoice(client, sb)
        sb.script_operation(Fault.non_json())
        with pytest.raises(MalformedResponseError, match="not JSON"):
            [r async for r in client.documents_issued(None, DAY)]
    async with client_for(sb, retry=RetryPolicy(max_attempts=1), max_response_size=500) as small:
        with pytest.raises(MalformedResponseError, match="cap"):
            [r async for r in small.documents_issued(None, DAY)]


async def test_a_pdf_streams_to_a_path_and_to_a_file(client, sb, tmp_path):
    """The record's PDF is written whole to a path (no temporary file left) and to a file
    object; over the size cap it is a typed error and the path is not written."""
    record = await invoice(client, sb)
    target = tmp_path / "receipt.pdf"
    size = await client.document_pdf(record, target)
    data = target.read_bytes()
    assert data.startswith(b"%PDF-")
    assert size == len(data)
    buffer = io.BytesIO()
    assert await client.document_pdf(record.url, buffer) == size
    assert buffer.getvalue() == data
    with pytest.raises(MalformedResponseError, match="cap"):
        await client.document_pdf(record, tmp_path / "small.pdf", max_size=100)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["receipt.pdf"]


async def test_a_pdf_that_fails_once_is_read_again_and_an_unknown_one_is_typed(
    client, sb, tmp_path
):
    """To a path the PDF is a read: a 500 is read again; an unknown url's 404 is typed."""
    record = await invoice(client, sb)
    sb.script_operation(Fault.status(500))
    assert await client.document_pdf(record, tmp_path / "r.pdf") > 0
    with pytest.raises(UnexpectedStatusError) as caught:
        await client.document_pdf(record.url + "x", tmp_path / "none.pdf")
    assert caught.value.status == 404


async def test_a_blocking_client_credits_and_pays_from_a_thread(sb, tmp_path):
    """The blocking twins: a credit, a payment later, an IRIS status and a PDF from a
    thread of a synchronous application, the same typed results."""
    from invoicing_async.blocking import BlockingClient  # noqa: PLC0415

    async with client_for(sb) as client:
        original = await invoice(client, sb)
        payment = await signed_payment(client, sb, original)
        started = await client.initiate_instant_payment(InstantPaymentRequest(amount=1))
    blocking = BlockingClient(sb.base_url, sb.client_id, sb.client_secret, retry=FAST)

    def day():
        with blocking:
            credit = blocking.credit(original, series="CR", number="1", internal_id="CR-1")
            paid = blocking.update_payment(original.mark, payment)
            status = blocking.instant_payment_status(started)
            size = blocking.document_pdf(original, tmp_path / "r.pdf")
            return credit, paid, status, size

    credit, paid, status, size = await asyncio.to_thread(day)
    assert (credit.original_mark, paid.payment_mark) == (
        original.mark,
        sb.payment_updates[0].payment_mark,
    )
    assert (status.status, size) == ("Pending", (tmp_path / "r.pdf").stat().st_size)


@pytest.mark.parametrize(
    ("name", "words"), [("login", "came as 'text/html'"), ("moved", "redirect")]
)
async def test_a_pdf_url_that_answers_no_pdf_is_a_typed_error(hostile, tmp_path, name, words):
    """A page that is not a PDF (a proxy's login page), or a redirect (not followed: the
    url is the record's own): MalformedResponseError, and nothing written."""
    async with InvoicingClient(hostile["url"], "094019245", "key", retry=FAST) as client:
        with pytest.raises(MalformedResponseError, match=words):
            await client.document_pdf(f"{hostile['url']}/v/{name}", tmp_path / "r.pdf")
    assert list(tmp_path.iterdir()) == []
