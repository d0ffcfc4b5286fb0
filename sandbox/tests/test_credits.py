"""Credit generation, ``POST /Invoice/credit``, over loopback HTTP.

The provider's rules (https://developers.s1ecos.com/invoicecredit-14702653e0, the design
guide §12): ``relateCredit`` true is a 5.1, false a 5.2; an 11.1 is credited by 11.4s;
many 11.4s and 5.2s, one 5.1 per document; ``200`` with ``{}``. The credit is held like
any document (its own mark), found by what the request names.
"""

from __future__ import annotations

import pytest
from daytools import Caller

from invoicing_sandbox import sample_invoice


def credit_of(record, tin, internal_id, *, relate=True, **more):
    """The request crediting the document of ``record``."""
    return {
        "issuerTin": tin,
        "authenticationCode": record["authenticationCode"],
        "mark": record["mark"],
        "series": "CR",
        "number": internal_id,
        "internalId": internal_id,
        "relateCredit": relate,
        "preventDocumentMapping": False,
        **more,
    }


async def credit(caller, body):
    return await caller.call("POST", "/Invoice/credit", json=body)


def retail_receipt(tin, number):
    receipt = sample_invoice(number, issuer_vat=tin, lines=1)
    receipt["InvoiceTypeCode"] = "11.1"
    del receipt["CounterParty"]
    return receipt


async def test_a_correlated_credit_is_issued_once_then_uncorrelated_ones_many_times(sb, caller):
    """relateCredit true issues a 5.1 of the whole document (its lines and summaries,
    the original's mark in CorrelatedInvoices), held under its own mark and answered
    ``200 {}``; a second 5.1 of that document is refused 400 naming the first one; 5.2
    credits follow as many as wanted."""
    original = sample_invoice(1, issuer_vat=sb.client_id, lines=2)
    record = await caller.submit(original)
    answer = await credit(caller, credit_of(record, sb.client_id, "CR-1"))
    assert (answer.status, answer.json()) == (200, {})
    [issued] = sb.credits
    assert (issued.original_mark, issued.invoice_type, issued.original_type) == (
        record["mark"],
        "5.1",
        "1.1",
    )
    held = sb.committed[issued.identity]
    assert held.record.mark == issued.mark != record["mark"]
    assert held.document["InvoiceTypeCode"] == "5.1"
    assert held.document["CorrelatedInvoices"] == [record["mark"]]
    assert held.document["Summaries"] == original["Summaries"]
    assert held.document["Details"] == original["Details"]
    assert held.document["DistributionDetails"] == {"InternalDocumentId": "CR-1"}

    again = await credit(caller, credit_of(record, sb.client_id, "CR-2"))
    assert again.status == 400
    assert f"mark {issued.mark}" in again.json()["message"]
    for number in ("CR-3", "CR-4"):
        answer = await credit(caller, credit_of(record, sb.client_id, number, relate=False))
        assert answer.status == 200
    assert [c.invoice_type for c in sb.credits] == ["5.1", "5.2", "5.2"]
    assert len({c.mark for c in sb.credits}) == 3


async def test_the_same_credit_sent_again_is_answered_409_with_its_record(sb, caller):
    """A credit is known by its internalId, as documents are: the identical request sent
    again (after a lost answer) issues nothing, and is answered 409 with the credit's
    record."""
    record = await caller.submit_sample(1)
    body = credit_of(record, sb.client_id, "CR-1", relate=False)
    assert (await credit(caller, body)).status == 200
    commits = sb.commit_count
    again = await credit(caller, body)
    assert again.status == 409
    assert again.json()["mark"] == sb.credits[0].mark
    assert again.json()["internalId"] == "CR-1"
    assert sb.commit_count == commits
    assert len(sb.credits) == 1


async def test_a_retail_receipt_gets_11_4_credits_whatever_relate_credit_says(sb, caller):
    """An 11.1 is credited by 11.4 credit receipts, relateCredit ignored, as many times as
    wanted (two with relateCredit true: no 'once' rule)."""
    record = await caller.submit(retail_receipt(sb.client_id, 1))
    for number, relate in (("R-1", True), ("R-2", True), ("R-3", False)):
        answer = await credit(caller, credit_of(record, sb.client_id, number, relate=relate))
        assert answer.status == 200, answer.body
    assert [c.invoice_type for c in sb.credits] == ["11.4"] * 3
    assert all(c.original_type == "11.1" for c in sb.credits)


async def test_the_original_is_found_by_its_mark_and_authentication_code_only(sb, caller):
    """A wrong authenticationCode, an unknown mark and another issuer's document are one
    answer, 404; another issuer's TIN in issuerTin is 401; the EL prefix is the same TIN.
    Nothing is issued by the refusals."""
    record = await caller.submit_sample(1)
    other_tin = "094019245"
    sb.add_client(sb.environments[0], other_tin, "another-api-key")
    async with Caller(sb, tin=other_tin) as other:
        theirs = await other.submit_sample(1)
    wrong_code = credit_of(record, sb.client_id, "X-1", authenticationCode="0" * 40)
    unknown = credit_of(record, sb.client_id, "X-2", mark=record["mark"] + 1000)
    not_mine = credit_of(theirs, sb.client_id, "X-3")
    for body in (wrong_code, unknown, not_mine):
        answer = await credit(caller, body)
        assert answer.status == 404, answer.body
        assert answer.json()["success"] is False
    answer = await credit(caller, credit_of(record, other_tin, "X-4"))
    assert answer.status == 401
    assert sb.credits == []
    answer = await credit(caller, credit_of(record, f"EL{sb.client_id}", "X-5"))
    assert answer.status == 200


async def test_a_credit_and_a_cancelled_document_are_not_credited(sb, caller):
    """A credit (5.1, 5.2, 11.4) is not credited again, and a cancelled document is not
    credited: 400 each, saying why."""
    record = await caller.submit_sample(1)
    assert (await credit(caller, credit_of(record, sb.client_id, "CR-1"))).status == 200
    held = sb.committed[sb.credits[0].identity].record
    credit_record = {"mark": held.mark, "authenticationCode": held.authentication_code}
    answer = await credit(caller, credit_of(credit_record, sb.client_id, "CR-2"))
    assert answer.status == 400
    assert "5.1" in answer.json()["message"]
    cancelled = await caller.submit_sample(2)
    answer = await caller.call(
        "POST", "/Invoice/cancelDeliveryNote", params={"mark": str(cancelled["mark"])}
    )
    assert answer.status == 200
    answer = await credit(caller, credit_of(cancelled, sb.client_id, "CR-3"))
    assert answer.status == 400
    assert "cancelled" in answer.json()["message"]
    assert len(sb.credits) == 1


async def test_members_are_read_in_any_case(sb, caller):
    """The service binds names in any case: a PascalCase request is the same request."""
    record = await caller.submit_sample(1)
    body = {
        key[0].upper() + key[1:]: value
        for key, value in credit_of(record, sb.client_id, "CR-1").items()
    }
    answer = await credit(caller, body)
    assert answer.status == 200, answer.body
    assert sb.credits[0].internal_id == "CR-1"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"mark": "four"}, "mark"),
        ({"mark": True}, "mark"),
        ({"relateCredit": "yes"}, "relateCredit"),
        ({"preventDocumentMapping": None}, "preventDocumentMapping"),
        ({"series": ""}, "series"),
        ({"internalId": ["CR-1"]}, "internalId"),
        ({"authenticationCode": 7}, "authenticationCode"),
        ({"issuerTin": {"vat": "x"}}, "issuerTin"),
        ({"mark": 10**30}, "mark"),
    ],
)
async def test_a_member_of_the_wrong_type_is_named(sb, caller, change, field):
    """Each member of the wrong type (or empty) is a 400 naming it; nothing is issued."""
    record = await caller.submit_sample(1)
    answer = await credit(caller, {**credit_of(record, sb.client_id, "CR-1"), **change})
    assert answer.status == 400, answer.body
    assert [e["field"] for e in answer.json()["errors"]] == [field]
    assert sb.credits == []


async def test_an_empty_object_names_every_required_member(sb, caller):
    """Every member is required (the provider's page): ``{}`` is one 400 naming all eight."""
    answer = await credit(caller, {})
    assert answer.status == 400
    assert [e["field"] for e in answer.json()["errors"]] == [
        "issuerTin",
        "authenticationCode",
        "mark",
        "series",
        "number",
        "internalId",
        "relateCredit",
        "preventDocumentMapping",
    ]
