"""One set of rules: each common mistake is a typed error from ``check`` naming the field,
and the same document a 400 from the sandbox naming the same field (over real HTTP).

The mistakes are those the issue names: a missing issuer, a line whose VAT is not its
net at the category's rate, summaries that are not the totals of the lines, a float
summed to 12.400000000000002 (and more: a date that is no date, a line list that is
empty). A document with warnings only is accepted: a warning never refuses.
"""

from __future__ import annotations

import copy

import pytest
from providersamples import SAMPLE_TIN, retail_receipt
from sandboxtools import raw

from invoicing_async import (
    InvalidDocumentError,
    InvoicingClient,
    IssuerPool,
    OutcomeStatus,
    document_key,
)
from invoicing_async.documents import Severity, check
from invoicing_sandbox import Sandbox

API_KEY = "api-key-of-the-samples-issuer"


def client_of(sb: Sandbox) -> InvoicingClient:
    return InvoicingClient(sb.base_url, SAMPLE_TIN, API_KEY, provider_key=sb.provider_key)


def pool_of(sb: Sandbox) -> IssuerPool:
    return IssuerPool(sb.base_url, {SAMPLE_TIN: API_KEY}, provider_key=sb.provider_key)


def _two_lines() -> dict:
    """A receipt of two lines whose totals, summed as floats, are 12.400000000000002."""
    document = retail_receipt()
    line = document["Details"][0]
    document["Details"] = [
        {**line, "LineNo": 1, "NetTotal": 3.38, "VATTotal": 0.81, "Total": 4.19},
        {**line, "LineNo": 2, "NetTotal": 6.62, "VATTotal": 1.59, "Total": 8.21},
    ]
    lines = document["Details"]
    document["Summaries"] = {
        "TotalNetAmount": round(sum(d["NetTotal"] for d in lines), 2),
        "TotalVATAmount": 2.4,
        "TotalGrossValue": sum(d["Total"] for d in lines),  # 4.19 + 8.21 in floats
    }
    document["PaymentDetails"]["PaymentMethods"][0]["Amount"] = 12.4
    return document


def _without_issuer(document: dict) -> None:
    del document["Issuer"]


def _vat_not_at_the_rate(document: dict) -> None:
    line = document["Details"][0]
    line["VATTotal"] = 24.0  # 24 % of 197.03 is 47.29: the rate typed as the amount
    line["Total"] = 221.03
    document["Summaries"].update(TotalVATAmount=24.0, TotalGrossValue=221.03)


def _summaries_not_the_totals(document: dict) -> None:
    document["Summaries"]["TotalNetAmount"] = 100.0  # the lines' total is 197.03


def _a_float_summed(document: dict) -> None:
    document.clear()
    document.update(_two_lines())


def _a_date_that_is_no_date(document: dict) -> None:
    document["DateIssued"] = "08/10/2024"


def _no_lines(document: dict) -> None:
    document["Details"] = []


#: Each mistake, and the field check and the sandbox both name.
MISTAKES = {
    "a missing issuer": (_without_issuer, "Issuer"),
    "a line's VAT not at its category's rate": (_vat_not_at_the_rate, "Details[0].VATTotal"),
    "summaries that are not the lines' totals": (
        _summaries_not_the_totals,
        "Summaries.TotalNetAmount",
    ),
    "a float summed to 12.400000000000002": (_a_float_summed, "Summaries.TotalGrossValue"),
    "a date that is no date": (_a_date_that_is_no_date, "DateIssued"),
    "no lines": (_no_lines, "Details"),
}


@pytest.fixture
async def sb():
    async with Sandbox(key_algorithm="cv25519") as sandbox:
        sandbox.add_client(sandbox.environment().name, SAMPLE_TIN, API_KEY)
        yield sandbox


async def _post(sb: Sandbox, document: dict) -> tuple[int, dict]:
    env = sb.environment(client_id=SAMPLE_TIN)
    async with InvoicingClient(env.base_url, SAMPLE_TIN, API_KEY) as client:
        token = await client.token()
    headers = {"Authorization": f"Bearer {token.value}", "APIKey": API_KEY}
    return await raw("POST", f"{env.base_url}/Invoice/json", json=document, headers=headers)


def test_the_valid_sample_has_no_problem():
    """The provider-shaped receipt the mistakes are made in is fine as it is."""
    assert check(retail_receipt()) == []


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
async def test_each_mistake_is_an_error_of_check_and_a_400_naming_the_same_field(sb, mistake):
    """``check`` returns an error naming the field (with the rule's source); the sandbox
    refuses the same document with 400, its errors naming the same field, and commits
    nothing."""
    make, name = MISTAKES[mistake]
    document = copy.deepcopy(retail_receipt())
    make(document)
    errors = [p for p in check(document) if p.severity is Severity.ERROR]
    assert name in {p.field for p in errors}, errors
    assert all(p.source for p in errors)
    status, body = await _post(sb, document)
    assert status == 400, body
    assert name in {error["field"] for error in body["errors"]}, body
    assert {error["field"] for error in body["errors"]} == {p.field for p in errors}
    assert sb.commit_count == 0


async def test_warnings_never_refuse(sb):
    """A document whose problems are warnings only (myDATA's older names, a customer's
    TIN with a wrong check digit, a payment that does not add up) is accepted."""
    document = retail_receipt()
    summaries = document["Summaries"]
    summaries["TotalNetValue"] = summaries.pop("TotalNetAmount")
    document["CounterParty"]["Vat"] = "EL123456789"
    document["PaymentDetails"]["PaymentMethods"][0]["Amount"] = 200
    problems = check(document)
    assert {p.severity for p in problems} == {Severity.WARNING}
    assert {p.field for p in problems} == {
        "Summaries.TotalNetAmount",
        "CounterParty.Vat",
        "PaymentDetails.PaymentMethods",
    }
    status, body = await _post(sb, document)
    assert status == 201, body


@pytest.mark.parametrize("make", [client_of, pool_of])
async def test_a_batch_with_check_sends_none_the_provider_would_refuse(make):
    """``submit_many(..., check=True)`` (a client's and a pool's: one definition) ends a
    document the provider would refuse ``rejected`` with the check's typed error, before
    any request, and sends the others; without ``check`` the same document reaches the
    provider and comes back refused."""
    good, bad = retail_receipt(), retail_receipt()
    bad["Series"] = "B"
    _vat_not_at_the_rate(bad)
    async with (
        Sandbox(issuers={SAMPLE_TIN: API_KEY}, key_algorithm="cv25519") as sb,
        make(sb) as sender,
    ):
        checked = await sender.submit_many([good, bad], encrypted=False, check=True)
        assert [o.status for o in checked] == [OutcomeStatus.ACCEPTED, OutcomeStatus.REJECTED]
        assert isinstance(checked[1].error, InvalidDocumentError)
        assert checked[1].attempts == 0
        assert {r.identity for r in sb.requests if r.identity} == {document_key(good)}
        [unchecked] = await sender.submit_many([bad], encrypted=False)
    assert unchecked.status is OutcomeStatus.REJECTED
    assert unchecked.error is not None
    assert unchecked.error.status == 400
