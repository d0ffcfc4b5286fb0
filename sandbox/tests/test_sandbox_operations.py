"""The sandbox's other operations as a provider: routes, fault queues, inspection, state.

Raw HTTP where the wire answer itself is the point; the client's behaviour on these
routes is in ``test_operations.py`` and ``test_operations_writes.py``.
"""

from __future__ import annotations

import re

import pytest
from sandboxtools import client_for, invoice, raw

from invoicing_sandbox import Fault, Sandbox
from invoicing_sandbox._operations import ROUTES
from invoicing_sandbox._pos import PosSigner, canonical, verify_pos_signature


@pytest.fixture
async def sb():
    async with Sandbox() as sandbox:
        yield sandbox


def route_url(sb, path):
    """The URL of a route of the table, its path parameters filled in (the client's TIN,
    page 1, the trailing slash)."""
    values = {"issuerTin": sb.client_id, "IssuerVatNumber": sb.client_id, "PageNumber": "1"}
    return sb.base_url + re.sub(
        r"\{(\w+)(?::[^}]*)?\}", lambda m: values.get(m.group(1), "/"), path
    )


@pytest.mark.parametrize(("method", "path", "name"), ROUTES)
async def test_each_operation_answers_405_to_another_method(sb, method, path, name):
    """Every operation route exists, and the wrong method is a 405 naming the right one
    (before any credentials are asked for)."""
    other = "POST" if method == "GET" else "GET"
    url = route_url(sb, path)
    async with client_for(sb):
        status, body = await raw(other, url)
    assert status == 405
    assert body["message"] == f"use {method}"


@pytest.mark.parametrize(("method", "path", "name"), ROUTES)
async def test_each_operation_needs_credentials(sb, method, path, name):
    """Without a bearer token every operation answers 401 and does nothing."""
    url = route_url(sb, path)
    status, body = await raw(method, url, headers={"APIKey": sb.client_secret})
    assert status == 401
    assert body["success"] is False


async def test_operation_faults_are_their_own_queue(sb):
    """Faults scripted for documents do not hit the operations, and the other way
    round: each queue is taken by its own requests, in order."""
    async with client_for(sb) as client:
        record = await client.submit_json(invoice(sb, 1))
        sb.script(Fault.status(409))
        sb.script_operation(Fault.status(503, retry_after=0))
        status = await client.get_last_b2g_status(record.mark)
    assert status.attempts == 2
    assert sb._faults.documents  # still queued for the next document
    assert [r.fault for r in sb.requests if r.path == "/B2GInvoice/GetLastStatus"] == [
        "status:503",
        None,
    ]


async def test_inspection_endpoints_list_what_the_operations_hold(sb):
    """/_sandbox/ lists the new endpoints; uploads, signatures and re-forwards are
    listed there (no content in the list; never a credential)."""
    async with client_for(sb) as client:
        doc = {**invoice(sb, 1), "OrderReference": "PO-1"}
        await client.submit_json(doc)
        await client.reseed_b2g_invoice({**doc, "ContractReference": "C-9"})
        await client.sign_pos_transaction({"issuerTin": sb.client_id, "amount": 1})
        await client.upload_media(b"logo", content_type="image/png", filename="logo.png")
    _, index = await raw("GET", f"{sb.inspect_url}/")
    for name in ("uploads", "uploads/{id}", "pos-signatures", "pos-keys/{issuerTin}", "reseeds"):
        assert f"/_sandbox/{name}" in index["endpoints"]
    _, uploads = await raw("GET", f"{sb.inspect_url}/uploads")
    [upload] = uploads["uploads"]
    assert (upload["filename"], upload["size"], upload["path"]) == ("logo.png", 4, "/media/upload")
    assert "content_base64" not in upload
    _, signatures = await raw("GET", f"{sb.inspect_url}/pos-signatures")
    assert signatures["signatures"][0]["issuer_tin"] == sb.client_id
    _, reseeds = await raw("GET", f"{sb.inspect_url}/reseeds")
    assert reseeds["reseeds"][0]["references"] == {
        "ContractReference": "C-9",
        "OrderReference": "PO-1",
    }
    status, _ = await raw("GET", f"{sb.inspect_url}/uploads/upload-9")
    assert status == 404
    everything = repr([index, uploads, signatures, reseeds])
    assert sb.client_secret not in everything


async def test_reset_forgets_the_operations_state_but_not_the_keys(sb):
    """reset() empties uploads, signatures and re-forwards; an issuer's POS key stays."""
    key = sb.pos_public_key(sb.client_id)
    async with client_for(sb) as client:
        await client.sign_pos_transaction({"issuerTin": sb.client_id})
        await client.upload_media(b"x", content_type="text/plain")
    sb.reset()
    assert (sb.uploads, sb.pos_signatures, sb.reseeds) == ([], [], [])
    assert sb.pos_public_key(sb.client_id) == key


def test_pos_keys_are_per_issuer_and_reproducible_from_the_seed():
    """The same salt derives the same key for an issuer, other issuers and salts other
    keys; signatures are deterministic and cover the canonical JSON (key order does not
    matter)."""
    one, same, other = PosSigner("seed:1"), PosSigner("seed:1"), PosSigner("seed:2")
    assert one.public_key("123456783") == same.public_key("123456783")
    assert one.public_key("123456783") != one.public_key("094019245")
    assert one.public_key("123456783") != other.public_key("123456783")
    payload = {"b": 2, "a": "ά"}
    signature = one.sign("123456783", payload)
    assert signature == same.sign("123456783", {"a": "ά", "b": 2})
    assert canonical(payload) == '{"a":"ά","b":2}'.encode()
    assert verify_pos_signature(one.public_key("123456783"), payload, signature)
    assert not verify_pos_signature(one.public_key("123456783"), payload, "not base64!")
    assert not verify_pos_signature(b"short", payload, signature)
