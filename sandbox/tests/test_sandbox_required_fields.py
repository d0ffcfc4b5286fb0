"""The sandbox refuses documents the provider would refuse: required fields, over HTTP.

Each test talks to a running sandbox over real loopback HTTP, with the real client or a
raw request (to read the provider's 400 body itself). The provider reads names in any
case (its samples write ``Issuer`` and ``issuer``), so a lower-case name is the field,
not a missing one: the VAT check applies to it all the same.
"""

from __future__ import annotations

import copy

import pytest
from providersamples import camel
from sandboxtools import client_for, invoice, raw

from invoicing_async import AuthenticationError, document_key
from invoicing_sandbox import Sandbox, sample_invoice

#: Every field the sandbox requires, as the docs list them.
REQUIRED = (
    "Issuer",
    "Issuer.Vat",
    "Series",
    "Number",
    "DateIssued",
    "InvoiceTypeCode",
    "Details",
    "Summaries",
    "Summaries.TotalNetAmount",
    "Summaries.TotalVATAmount",
    "Summaries.TotalGrossValue",
)


async def _post_json(sb: Sandbox, document: object) -> tuple[int, dict]:
    """POST ``document`` to /Invoice/json with a valid token; the status and the body."""
    async with client_for(sb) as client:
        token = await client.token()
    headers = {"Authorization": f"Bearer {token.value}", "APIKey": sb.client_secret}
    return await raw("POST", f"{sb.base_url}/Invoice/json", json=document, headers=headers)


def _without(document: dict, path: str) -> dict:
    document = copy.deepcopy(document)
    parent, _, name = path.rpartition(".")
    (document[parent] if parent else document).pop(name)
    return document


async def test_a_document_that_is_not_an_invoice_is_refused():
    """`{"hello": "world"}` gets the provider's 400 listing each missing top-level field
    (it was 201 and a mark); nothing is committed."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        status, body = await _post_json(sb, {"hello": "world"})
        assert status == 400
        assert body["success"] is False
        assert body["statusCode"] == "BadRequest"
        fields = [error["field"] for error in body["errors"]]
        assert fields == [f for f in REQUIRED if "." not in f]
        assert all(error["message"] == "is required" for error in body["errors"])
        assert "Series: is required" in body["message"]
        assert sb.commit_count == 0


async def test_lower_case_names_are_read_and_cannot_skip_the_vat_check():
    """An invoice with ``issuer`` instead of ``Issuer`` is read as the provider reads it
    (it was refused: "field names are case-sensitive"): of another issuer's VAT number it
    is a 401, not accepted with the VAT-vs-API-key check skipped; of the client's own, it
    is committed, and so is one written in camelCase throughout."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        document = sample_invoice(1, issuer_vat="094019245")
        document["issuer"] = document.pop("Issuer")
        async with client_for(sb) as client:
            with pytest.raises(AuthenticationError) as caught:
                await client.submit_json(document)
            assert caught.value.status == 401
            assert sb.commit_count == 0
            own = invoice(sb, 1)
            own["issuer"] = own.pop("Issuer")
            assert (await client.submit_json(own)).mark is not None
            assert (await client.submit_json(camel(invoice(sb, 2)))).mark is not None
        assert sb.commit_count == 2


async def test_each_required_field_is_required():
    """Removing any one required field from a valid invoice gets a 400 naming that
    field; the complete invoice is accepted."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        complete = invoice(sb, 1)
        for path in REQUIRED:
            status, body = await _post_json(sb, _without(complete, path))
            assert status == 400, path
            assert body["errors"][0] == {"field": path, "message": "is required"}, path
        status, body = await _post_json(sb, complete)
        assert status == 201, body
        assert sb.commit_count == 1


async def test_fields_must_have_their_shape():
    """Present but wrong: empty lines, a total that is not a number, a VAT number that is
    empty are each a 400 naming the field."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        cases = {
            "Details": ("Details", [], "must be a non-empty list"),
            "Summaries.TotalVATAmount": ("Summaries", "TotalVATAmount", "must be a number"),
            "Issuer.Vat": ("Issuer", "Vat", "must be a non-empty string or an integer"),
        }
        for path, (parent, member, message) in cases.items():
            document = invoice(sb, 2)
            if parent == "Details":
                document["Details"] = member
            else:
                document[parent][member] = "" if member == "Vat" else "12,00"
            status, body = await _post_json(sb, document)
            assert status == 400, path
            assert {"field": path, "message": message} in body["errors"], body


async def test_require_fields_false_accepts_odd_documents_but_still_checks_vat():
    """`Sandbox(require_fields=False)` is the explicit way to send odd documents: a bare
    document is accepted; a present field is still checked (a VAT number of another
    issuer is still a 401)."""
    async with Sandbox(key_algorithm="cv25519", require_fields=False) as sb:
        status, body = await _post_json(sb, {"hello": "world"})
        assert status == 201, body
        status, _ = await _post_json(sb, {"Issuer": {"Vat": "094019245"}})
        assert status == 401
        status, body = await _post_json(sb, {"Details": []})
        assert status == 400
        assert body["errors"] == [{"field": "Details", "message": "must be a non-empty list"}]


async def test_samples_pass_the_checks():
    """The sample invoices (any number of lines, any issuer the sandbox knows) satisfy
    every requirement."""
    async with Sandbox(key_algorithm="cv25519") as sb, client_for(sb) as client:
        for lines in (1, 10):
            document = sample_invoice(lines + 100, lines=lines)
            result = await client.submit_secure(document)
            assert sb.committed[document_key(document)].record == result


def test_docs_list_every_required_field():
    """The sandbox reference and the testing guide name every required field."""
    from pathlib import Path  # noqa: PLC0415

    from invoicing_sandbox._rules import REQUIRED_FIELDS  # noqa: PLC0415

    assert REQUIRED_FIELDS == REQUIRED
    docs = Path(__file__).resolve().parents[2] / "docs"
    for page in ("reference/sandbox.rst", "guides/testing.rst"):
        text = (docs / page).read_text(encoding="utf-8")
        for path in REQUIRED:
            assert f"``{path}``" in text, (page, path)
