"""The rest of a day against hostile and failing requests: credentials, faults, bodies.

Every new route checks the credentials the other operations check (a bearer token and
the ``APIKey``; the PDF's public url none), takes the operations' scripted faults and
the issuer's throttle, and reads a body as the service reads hostile input: too large
(declared, or a body that never ends) a 413 at the sandbox's cap, deep, truncated, not
UTF-8 or not an object a 400. Never a 500.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from daytools import Caller

from invoicing_sandbox import Fault
from invoicing_sandbox._credits import ROUTES as CREDIT_ROUTES
from invoicing_sandbox._iris import ROUTES as IRIS_ROUTES
from invoicing_sandbox._listing import ROUTES as LISTING_ROUTES
from invoicing_sandbox._payments import ROUTES as PAYMENT_ROUTES

#: The sandbox's body cap here.
LIMIT = 64 * 1024
NEW_ROUTES = [*CREDIT_ROUTES, *PAYMENT_ROUTES, *IRIS_ROUTES, *LISTING_ROUTES]
POSTS = [path for method, path, _ in NEW_ROUTES if method == "POST"]
NOVEMBER = {"From": "20261101", "dateTo": "20261130"}


@pytest.fixture
def sandbox_options():
    return {"max_body_size": LIMIT}


def filled(path, tin):
    return path.replace("{IssuerVatNumber}", tin).replace("{PageNumber}{slash:/?}", "1/")


def credit_of(record, tin, internal_id="CR-1"):
    return {
        "issuerTin": tin,
        "authenticationCode": record["authenticationCode"],
        "mark": record["mark"],
        "series": "CR",
        "number": "1",
        "internalId": internal_id,
        "relateCredit": True,
        "preventDocumentMapping": False,
    }


@pytest.mark.parametrize(("method", "path", "name"), NEW_ROUTES)
async def test_each_new_route_checks_the_credentials(sb, caller, method, path, name):
    """No token, a wrong API key, a token of another environment: 401 each, nothing done;
    another method: 405 naming the right one."""
    url = filled(path, caller.tin)
    bearer = {"Authorization": f"Bearer {caller.token}"}
    answers = [
        await caller.call(method, url, authenticate=False, headers={"APIKey": caller.api_key}),
        await caller.call(method, url, authenticate=False, headers={**bearer, "APIKey": "x"}),
        await caller.call(method, url, authenticate=False, headers=bearer),
    ]
    async with Caller(sb, environment=sb.environments[1]) as elsewhere:
        answers.append(await caller.call(method, url, headers=elsewhere.headers()))
    assert [a.status for a in answers] == [401] * 4
    other = "GET" if method == "POST" else "POST"
    wrong = await caller.call(other, url)
    assert (wrong.status, wrong.headers["Allow"]) == (405, method)
    assert sb.credits == sb.payment_updates == sb.iris_payments == []


async def test_a_lost_answer_after_a_credit_then_the_credit_sent_again(sb, caller):
    """The answer is lost after the credit was issued: the credit is held; the same
    request sent again is a 409 with its record, and issues nothing more."""
    record = await caller.submit_sample(1)
    sb.script_operation(Fault.commit_then_drop())
    with pytest.raises(aiohttp.ClientError):
        await caller.call("POST", "/Invoice/credit", json=credit_of(record, caller.tin))
    [issued] = sb.credits
    again = await caller.call("POST", "/Invoice/credit", json=credit_of(record, caller.tin))
    assert (again.status, again.json()["mark"]) == (409, issued.mark)
    assert len(sb.credits) == 1


async def test_a_lost_answer_after_a_payment_then_the_payment_sent_again(sb, caller):
    """The answer of updatePayment is lost after it registered: the same payment sent
    again answers the same payment mark."""
    record = await caller.submit_sample(1)
    signed = await caller.sign_pos(record["mark"])
    method = {
        "paymentMethodTypeCode": 7,
        "amount": 10,
        "transactionId": "TX-1",
        "providersSignature": signed["signature"],
    }
    body = {"mark": record["mark"], "entityVatNumber": caller.tin, "paymentMethods": [method]}
    sb.script_operation(Fault.commit_then_drop())
    with pytest.raises(aiohttp.ClientError):
        await caller.call("POST", "/Invoice/updatePayment", json=body)
    [registered] = sb.payment_updates
    again = await caller.call("POST", "/Invoice/updatePayment", json=body)
    assert again.json()["message"] == str(registered.payment_mark)
    assert len(sb.payment_updates) == 1


@pytest.mark.parametrize(
    "fault", [Fault.status(503, retry_after=0), Fault.status(408), Fault.reset()]
)
async def test_a_fault_before_processing_does_nothing(sb, caller, fault):
    """A scripted 503, 408 or reset meets the request before anything is done: no credit
    is issued, and the request sent again is served."""
    record = await caller.submit_sample(1)
    sb.script_operation(fault)
    try:
        answer = await caller.call("POST", "/Invoice/credit", json=credit_of(record, caller.tin))
    except aiohttp.ClientError:
        pass
    else:
        assert answer.status == fault.code
    assert sb.credits == []
    answer = await caller.call("POST", "/Invoice/credit", json=credit_of(record, caller.tin))
    assert answer.status == 200


async def test_a_throttled_issuer_is_refused_before_anything_is_read(sb, caller):
    """A throttled issuer's requests to the new routes are 429 with Retry-After."""
    record = await caller.submit_sample(1)
    sb.throttle_issuer(caller.tin, retry_after=7)
    answer = await caller.call("POST", "/Invoice/credit", json=credit_of(record, caller.tin))
    assert (answer.status, answer.headers["Retry-After"]) == (429, "7")
    listing = await caller.call(
        "GET", f"/api/invoice/getdocuments/{caller.tin}/1/", params=NOVEMBER
    )
    assert listing.status == 429
    assert sb.credits == []


async def test_an_outage_answers_the_public_pdf_too(sb, caller):
    """While the provider answers 503, a document's PDF is 503 too; then it is served."""
    record = await caller.submit_sample(1)
    url = record["url"] + "/pdf"
    async with sb.outage("503"):
        down = await caller.call("GET", "", url=url, authenticate=False)
    assert down.status == 503
    assert (await caller.call("GET", "", url=url, authenticate=False)).status == 200


@pytest.mark.parametrize("path", POSTS)
@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"[" * 10_000 + b"]" * 10_000, 400),  # deep: more than the reader's 64 levels
        (b'{"mark": 4000010000', 400),  # truncated
        (b'{"mark": "\xff\xfe"}', 400),  # not UTF-8
        (b"[1, 2, 3]", 400),  # not an object
        (b'{"paymentAmount": NaN}', 400),  # not JSON (NaN)
        (b'{"mark": "\\ud800"}', 400),  # half a surrogate pair
        (b"", 400),  # nothing at all
        (b" " * (LIMIT + 1), 413),  # over the cap, declared
    ],
)
async def test_a_hostile_body_is_a_4xx(sb, caller, path, body, status):
    """Deep, truncated, non-UTF-8, not an object, NaN, half a surrogate, empty, too
    large: each a 4xx in the service's body, nothing done."""
    answer = await caller.call(
        "POST", path, data=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status == status, answer.body
    assert answer.json()["success"] is False
    assert sb.credits == sb.payment_updates == sb.iris_payments == []


@pytest.mark.parametrize("path", POSTS)
async def test_a_body_that_never_ends_is_cut_at_the_cap(sb, caller, path):
    """A chunked body that would go on for ever is answered 413 once it passes the cap;
    the sandbox serves the next request."""
    reader, writer = await asyncio.open_connection("127.0.0.1", sb.port)
    head = (
        f"POST /{sb.environments[0]}{path} HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {caller.token}\r\nAPIKey: {caller.api_key}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    block = b"[" * 4096
    chunk = b"%x\r\n%s\r\n" % (len(block), block)

    async def feed() -> None:
        writer.write(head.encode())
        try:  # bounded for the test's sake: a thousand times the cap
            for _ in range(1000 * LIMIT // len(block)):
                writer.write(chunk)
                await writer.drain()
        except ConnectionError:
            pass

    feeding = asyncio.ensure_future(feed())
    try:
        status_line = await asyncio.wait_for(reader.readline(), 30)
    finally:
        feeding.cancel()
        writer.close()
    assert status_line.split()[1] == b"413"
    listing = await caller.call(
        "GET", f"/api/invoice/getdocuments/{caller.tin}/1/", params=NOVEMBER
    )
    assert listing.status == 200


async def test_members_in_two_spellings_are_read_one_way(sb, caller):
    """One member in two spellings with two values (issuerTin and IssuerTin): bound as
    the provider's reader binds them (System.Text.Json: names in any case, the last
    value read kept), the sandbox's one binding for documents and operations alike."""
    record = await caller.submit_sample(1)
    body = {**credit_of(record, caller.tin), "IssuerTin": "094019245"}
    answer = await caller.call("POST", "/Invoice/credit", json=body)
    assert answer.status == 401
    swapped = {**credit_of(record, "094019245", "CR-2"), "IssuerTin": caller.tin}
    answer = await caller.call("POST", "/Invoice/credit", json=swapped)
    assert answer.status == 200
