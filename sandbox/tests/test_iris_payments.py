"""IRIS instant payments through the provider: initiate, poll, settle, expire.

The provider's pages (https://developers.s1ecos.com/provider-iris-documentation-1819287m0):
``InitiatePayment`` starts a payment valid 1 to 3 minutes and answers its
``endToEndDiasId``, ``authorisationRequestId`` and QR; ``GetPaymentStatus`` answers
``Pending`` (keep polling) until ``Completed``, ``Expired`` or ``Failed``
(``isFinalStatus``). Nobody scans a sandbox's QR: the test settles the payment, or
moves the sandbox's clock past its validity (no waiting).
"""

from __future__ import annotations

import pytest
from daytools import Caller

from invoicing_sandbox import Sandbox, verify_pos_signature

INITIATE = "/paymentsapi/IrisPayments/InitiatePayment"
STATUS = "/paymentsapi/IrisPayments/GetPaymentStatus"


def request_of(tin, **more):
    """A request as the provider's page writes it (the issuer's TIN with EL)."""
    return {
        "issuerTin": f"EL{tin}",
        "payeeInfo": {"displayName": "Customer", "companyName": "Shop", "tin": "EL094019245"},
        "paymentAmount": 124,
        "validityPeriod": 3,
        "orderDescription": "Order 12345",
        "remittanceInformation": "INV-12345",
        "generateQrCodeImage": False,
        "qrCodeSize": 0,
        "issueDate": "2026-11-22T10:00:00.000Z",
        "branchCode": 0,
        "invoiceTypeCode": "1.1",
        "series": "INV",
        "identifier": "INV-12345",
        "mark": 0,
        "totalNetAmount": 100,
        "totalVatAmount": 24,
        "totalAmount": 124,
        "merchantId": "merchant-1",
        "tipAmount": 0,
        **more,
    }


async def initiate(caller, **more):
    answer = await caller.call("POST", INITIATE, json=request_of(caller.tin, **more))
    assert answer.status == 200, answer.body
    return answer.json()


async def status(caller, end_to_end_id):
    answer = await caller.call("GET", STATUS, params={"endToEndDiasId": end_to_end_id})
    assert answer.status == 200, answer.body
    return answer.json()


async def test_a_payment_is_pending_until_the_payer_completes_it(sb, caller):
    """InitiatePayment answers the ids, the QR and a signature by the issuer's POS key over
    signedDataInput; the status is Pending, not final, until the test settles it, then
    Completed with completedAt, final."""
    started = await initiate(caller)
    assert set(started) >= {
        "endToEndDiasId", "authorisationRequestId", "qrCode", "qrCodeImage", "createdAt",
        "expiresAt", "signedDataInput", "signature",
    }  # fmt: skip
    assert started["qrCodeImage"] is None
    assert started["endToEndDiasId"] in started["qrCode"]
    key = sb.pos_public_key(sb.client_id)
    signed = request_of(caller.tin)
    assert verify_pos_signature(key, signed, started["signature"])
    e2e = started["endToEndDiasId"]
    pending = await status(caller, e2e)
    assert (pending["paymentStatus"], pending["isFinalStatus"]) == ("Pending", False)
    assert pending["completedAt"] is None
    [payment] = sb.iris_payments
    assert (payment.end_to_end_id, payment.amount, payment.validity_minutes) == (e2e, 124, 3)
    assert payment.authorisation_request_id == started["authorisationRequestId"]
    sb.settle_iris_payment(e2e)
    done = await status(caller, e2e)
    assert (done["paymentStatus"], done["isFinalStatus"]) == ("Completed", True)
    assert done["completedAt"] is not None
    with pytest.raises(ValueError, match="ended already"):
        sb.settle_iris_payment(e2e, "Failed")


async def test_a_payment_expires_when_the_clock_passes_its_validity(sb, caller, clock):
    """validityPeriod minutes on the sandbox's clock: a second before, Pending; at the
    end, Expired and final (no sleeping: the test moves the fake clock)."""
    e2e = (await initiate(caller, validityPeriod=1))["endToEndDiasId"]
    clock.now += 59
    assert (await status(caller, e2e))["paymentStatus"] == "Pending"
    clock.now += 1
    expired = await status(caller, e2e)
    assert (expired["paymentStatus"], expired["isFinalStatus"]) == ("Expired", True)
    with pytest.raises(ValueError, match="ended already"):
        sb.settle_iris_payment(e2e)


async def test_a_failed_payment_is_final_and_a_new_one_starts_afresh(sb, caller):
    """Failed is final with its description; InitiatePayment again starts another
    payment with other ids (a payment is not deduplicated)."""
    first = await initiate(caller)
    sb.settle_iris_payment(first["endToEndDiasId"], "Failed", description="card declined")
    failed = await status(caller, first["endToEndDiasId"])
    assert (failed["paymentStatus"], failed["paymentStatusDescription"]) == (
        "Failed",
        "card declined",
    )
    second = await initiate(caller)
    assert second["endToEndDiasId"] != first["endToEndDiasId"]
    assert second["authorisationRequestId"] != first["authorisationRequestId"]


async def test_payments_settle_on_their_own_at_a_status_read_when_asked(sb, caller):
    """auto_settle_iris_payments("Completed", after=2): Pending once, then Completed, as a
    till polling would see."""
    sb.auto_settle_iris_payments("Completed", after=2)
    e2e = (await initiate(caller))["endToEndDiasId"]
    assert (await status(caller, e2e))["paymentStatus"] == "Pending"
    assert (await status(caller, e2e))["paymentStatus"] == "Completed"
    sb.reset()  # turns it off (and forgets the tokens)
    async with Caller(sb) as again:
        e2e = (await initiate(again))["endToEndDiasId"]
        assert [(await status(again, e2e))["paymentStatus"] for _ in range(3)] == ["Pending"] * 3


async def test_a_payment_is_settled_over_http_too(sb, caller):
    """POST /_sandbox/iris-payments/{id}/complete settles it for a test in another
    process; GET lists them; a settled one is a 409 to settle again, an unknown one 404."""
    e2e = (await initiate(caller))["endToEndDiasId"]
    url = f"{sb.inspect_url}/iris-payments/{e2e}"
    answer = await caller.call("POST", "", url=f"{url}/complete", authenticate=False)
    assert (answer.status, answer.json()["status"]) == (200, "Completed")
    assert (await status(caller, e2e))["paymentStatus"] == "Completed"
    again = await caller.call("POST", "", url=f"{url}/fail", authenticate=False)
    assert again.status == 409
    unknown = f"{sb.inspect_url}/iris-payments/nope/complete"
    assert (await caller.call("POST", "", url=unknown, authenticate=False)).status == 404
    wrong = await caller.call("POST", "", url=f"{url}/pay", authenticate=False)
    assert wrong.status == 404
    put = await caller.call("PUT", "", url=f"{url}/complete", authenticate=False)
    assert put.status == 405
    listed = await caller.call("GET", "", url=f"{sb.inspect_url}/iris-payments", authenticate=False)
    [shown] = listed.json()["iris_payments"]
    assert (shown["end_to_end_id"], shown["status"], shown["final"]) == (e2e, "Completed", True)


async def test_a_status_is_the_issuers_own(sb, caller):
    """Another issuer's endToEndDiasId, an unknown one, and none: 404, 404, 400."""
    e2e = (await initiate(caller))["endToEndDiasId"]
    sb.add_client(sb.environments[0], "094019245", "another-api-key")
    async with Caller(sb, tin="094019245") as other:
        theirs = await other.call("GET", STATUS, params={"endToEndDiasId": e2e})
    assert theirs.status == 404
    unknown = await caller.call("GET", STATUS, params={"endToEndDiasId": "0" * 32})
    assert unknown.status == 404
    none = await caller.call("GET", STATUS)
    assert none.status == 400
    assert none.json()["errors"][0]["field"] == "endToEndDiasId"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"validityPeriod": 4}, "validityPeriod"),
        ({"validityPeriod": 0}, "validityPeriod"),
        ({"validityPeriod": "3"}, "validityPeriod"),
        ({"paymentAmount": 0}, "paymentAmount"),
        ({"paymentAmount": -5}, "paymentAmount"),
        ({"paymentAmount": None}, "paymentAmount"),
        ({"payeeInfo": "Customer"}, "payeeInfo"),
        ({"mark": "x"}, "mark"),
        ({"totalAmount": "124"}, "totalAmount"),
    ],
)
async def test_a_request_of_the_wrong_shape_names_the_member(sb, caller, change, field):
    """validityPeriod from 1 to 3, paymentAmount above 0, the other members of their
    types: a 400 naming the member; no payment is started."""
    answer = await caller.call("POST", INITIATE, json=request_of(caller.tin, **change))
    assert answer.status == 400, answer.body
    assert [e["field"] for e in answer.json()["errors"]] == [field]
    assert sb.iris_payments == []


async def test_the_issuer_and_a_named_mark_are_the_clients(sb, caller):
    """Another issuerTin is 401; a mark other than 0 must be one of the issuer's
    documents (404 otherwise); a payment of an issued document keeps its mark."""
    answer = await caller.call("POST", INITIATE, json=request_of("094019245"))
    assert answer.status == 401
    answer = await caller.call("POST", INITIATE, json=request_of(caller.tin, mark=12345))
    assert answer.status == 404
    record = await caller.submit_sample(1)
    await initiate(caller, mark=record["mark"])
    assert sb.iris_payments[0].mark == record["mark"]


async def test_seeded_sandboxes_hand_out_the_same_ids():
    """The ids derive from the seed: two sandboxes of one seed start the same payments."""
    ids = []
    for _ in range(2):
        async with Sandbox(key_algorithm="cv25519", seed=3) as sb, Caller(sb) as caller:
            ids.append((await initiate(caller))["endToEndDiasId"])
    assert ids[0] == ids[1]
