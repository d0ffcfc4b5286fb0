"""The delayed card payment, ``POST /Invoice/updatePayment``, over loopback HTTP.

The provider's flow (https://developers.s1ecos.com/delayed-pos-payment-950993m0): an
issued document's payment is signed by SignPos for its mark, the terminal runs, and the
payment is posted with the terminal's transaction id and SignPos's signature and input;
the answer is ``200 {"success": true, "message": "<payment mark>"}``.
"""

from __future__ import annotations

import pytest
from daytools import Caller


async def signed_payment(caller, *, amount=10, **method):
    """An issued document, SignPos for its mark, and the payment to post for it."""
    record = await caller.submit_sample(1)
    signed = await caller.sign_pos(record["mark"], paymentAmount=amount)
    payment = {
        "paymentMethodTypeCode": 7,
        "amount": amount,
        "transactionId": "TX-1",
        "providersSignature": signed["signature"],
        "posInput": signed["signedDataInput"],
        "terminalId": "T-1",
        "tipAmount": 0,
        **method,
    }
    body = {"mark": record["mark"], "entityVatNumber": caller.tin, "paymentMethods": [payment]}
    return record, body


async def update(caller, body):
    return await caller.call("POST", "/Invoice/updatePayment", json=body)


async def test_a_payment_signed_for_the_mark_gets_a_payment_mark(sb, caller):
    """The payment SignPos signed for the document's mark is registered: 200, success,
    and the payment's own mark as the message."""
    record, body = await signed_payment(caller)
    answer = await update(caller, body)
    assert answer.status == 200, answer.body
    [registered] = sb.payment_updates
    assert answer.json() == {"success": True, "message": str(registered.payment_mark)}
    assert registered.mark == record["mark"] != registered.payment_mark
    assert registered.transaction_ids == ("TX-1",)
    assert registered.payment_methods == body["paymentMethods"]


async def test_the_same_payment_sent_again_is_answered_with_the_same_payment_mark(sb, caller):
    """A lost answer sent again registers nothing new: the same payment mark, the
    request counted."""
    _, body = await signed_payment(caller)
    first = await update(caller, body)
    second = await update(caller, body)
    assert (second.status, second.json()) == (200, first.json())
    [registered] = sb.payment_updates
    assert registered.requests == 2


async def test_a_transaction_recorded_with_other_details_is_a_conflict(sb, caller):
    """The terminal's transaction id recorded for the mark with other details is a
    409 naming the payment mark recorded; nothing more is registered."""
    _, body = await signed_payment(caller)
    first = await update(caller, body)
    body["paymentMethods"][0]["tipAmount"] = 1.5
    answer = await update(caller, body)
    assert answer.status == 409
    assert str(answer.json()["paymentMark"]) == first.json()["message"]
    assert len(sb.payment_updates) == 1


async def test_a_payment_not_signed_for_this_mark_is_refused(sb, caller):
    """A signature SignPos gave for another sale (mark null), a made-up one, or none at
    all is a 400 naming the member; so are another posInput, another amount than the one
    signed, and a signed payment without its transaction id."""
    _, body = await signed_payment(caller)
    elsewhere = await caller.sign_pos(None)
    method = body["paymentMethods"][0]
    cases = {
        "providersSignature": {"providersSignature": elsewhere["signature"]},
        "posInput": {"posInput": elsewhere["signedDataInput"]},
        "amount": {"amount": 11},
        "transactionId": {"transactionId": None},
    }
    for name, change in cases.items():
        changed = {**body, "paymentMethods": [{**method, **change}]}
        answer = await update(caller, changed)
        assert answer.status == 400, (name, answer.body)
        assert [e["field"] for e in answer.json()["errors"]] == [f"paymentMethods[0].{name}"]
    unsigned = {"paymentMethodTypeCode": 3, "amount": 10}
    answer = await update(caller, {**body, "paymentMethods": [unsigned]})
    assert answer.status == 400
    assert [e["field"] for e in answer.json()["errors"]] == ["paymentMethods"]
    made_up = {**method, "providersSignature": "AAAA"}
    answer = await update(caller, {**body, "paymentMethods": [made_up]})
    assert answer.status == 400
    assert sb.payment_updates == []


async def test_another_issuers_signature_pays_nothing(sb, caller):
    """Another issuer may sign with SignPos naming my mark: its signature is its own,
    and pays none of my documents."""
    record, body = await signed_payment(caller)
    other_tin = "094019245"
    sb.add_client(sb.environments[0], other_tin, "another-api-key")
    async with Caller(sb, tin=other_tin) as other:
        theirs = await other.sign_pos(record["mark"])
    method = {**body["paymentMethods"][0], "providersSignature": theirs["signature"]}
    answer = await update(caller, {**body, "paymentMethods": [method]})
    assert answer.status == 400
    assert sb.payment_updates == []


async def test_the_document_must_be_the_issuers_and_not_cancelled(sb, caller):
    """An unknown mark is 404, another entityVatNumber 401 (the EL prefix is the same
    TIN), a cancelled document 400."""
    record, body = await signed_payment(caller)
    assert (await update(caller, {**body, "mark": record["mark"] + 99})).status == 404
    assert (await update(caller, {**body, "entityVatNumber": "094019245"})).status == 401
    answer = await caller.call(
        "POST", "/Invoice/cancelDeliveryNote", params={"mark": str(record["mark"])}
    )
    assert answer.status == 200
    answer = await update(caller, {**body, "entityVatNumber": f"EL{caller.tin}"})
    assert answer.status == 400
    assert "cancelled" in answer.json()["message"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"paymentMethods": {"amount": 1}}, "paymentMethods"),
        ({"paymentMethods": []}, "paymentMethods"),
        ({"paymentMethods": [1, 2]}, "paymentMethods"),
        ({"mark": "12ab"}, "mark"),
        ({"entityVatNumber": None}, "entityVatNumber"),
    ],
)
async def test_a_request_of_the_wrong_shape_names_the_member(sb, caller, change, field):
    """Members of the wrong type, absent or empty: a 400 naming them."""
    _, body = await signed_payment(caller)
    answer = await update(caller, {**body, **change})
    assert answer.status == 400, answer.body
    assert field in [e["field"] for e in answer.json()["errors"]]
    assert sb.payment_updates == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"paymentMethodTypeCode": "7"}, "paymentMethodTypeCode"),
        ({"paymentMethodTypeCode": 7.5}, "paymentMethodTypeCode"),
        ({"amount": -1}, "amount"),
        ({"amount": "10"}, "amount"),
        ({"tipAmount": 10**400}, "tipAmount"),
        ({"terminalId": 5}, "terminalId"),
    ],
)
async def test_a_payment_method_of_the_wrong_shape_names_the_member(sb, caller, change, field):
    """A payment method's member of the wrong type is a 400 naming it, with its index."""
    _, body = await signed_payment(caller)
    method = {**body["paymentMethods"][0], **change}
    answer = await update(caller, {**body, "paymentMethods": [method]})
    assert answer.status == 400, answer.body
    assert f"paymentMethods[0].{field}" in [e["field"] for e in answer.json()["errors"]]
