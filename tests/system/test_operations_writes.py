"""POS signatures, ReSeed and uploads over real HTTP to the sandbox.

Signatures and ReSeed are deduplicated writes: after a lost answer they are sent again
and end with the sandbox's truth (one signature, one re-forward). Uploads are re-sent
only when certainly not processed: a lost answer is an unknown outcome after exactly one
request. The sandbox's POS signatures verify with the issuer's public key.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
from sandboxtools import client_for, invoice, raw, requests_to

from invoicing_async import (
    AuthenticationError,
    DocumentResult,
    DuplicateDocumentError,
    RetryPolicy,
    Safety,
    UnexpectedStatusError,
    UnknownOutcomeError,
    ValidationError,
)
from invoicing_async.testing import instant_retries
from invoicing_sandbox import Fault, Sandbox, verify_pos_signature

SIGNPOS = "/PosTransactions/signpos"
RESEED = "/B2GInvoice/ReSeedInvoice"
UPLOADS = [("upload_invoice_file", "/Invoice/File"), ("upload_media", "/media/upload")]
#: Failures after the sandbox acted, and before it did, that a re-send recovers from.
LOST = [Fault.commit_then_drop(), Fault.commit_then_500(), Fault.truncated()]
NOT_YET = [Fault.status(500), Fault.status(408), Fault.reset(), Fault.status(503)]


@pytest.fixture
async def sb():
    async with Sandbox() as sandbox:
        yield sandbox


@pytest.fixture(autouse=True)
def _no_backoff():
    with instant_retries():
        yield


def transaction(sb: Sandbox, **fields) -> dict:
    """A card payment to sign, in the fields the provider's POS flow names."""
    return {
        "issuerTin": sb.client_id,
        "issueDate": "2026-11-22T10:15:00",
        "branchCode": 0,
        "invoiceTypeCode": "11.1",
        "series": "POS",
        "identifier": "7",
        "amount": 12.4,
        "terminalId": "T-100",
        "signatureDurationType": 1,
        **fields,
    }


def b2g(sb: Sandbox, number: int = 1, **references) -> dict:
    """A B2G invoice: it carries a buyer reference (Peppol's rule)."""
    return {**invoice(sb, number), "BuyerReference": "DEPT-7", **references}


# --- POS signatures: deduplicated writes -----------------------------------------------------


async def test_sign_pos_transaction_signature_verifies_with_the_issuer_key(sb):
    """The answer carries the sandbox's Ed25519 signature of the transaction; it
    verifies with the issuer's public key (from the Sandbox and from /_sandbox), and
    not for changed data."""
    data = transaction(sb)
    async with client_for(sb) as client:
        result = await client.sign_pos_transaction(data)
    signature = result.body["signature"]
    assert (result.status, result.body["algorithm"]) == (200, "Ed25519")
    assert sb.verify_pos_signature(sb.client_id, data, signature)
    status, key = await raw("GET", f"{sb.inspect_url}/pos-keys/{sb.client_id}")
    assert status == 200
    assert base64.b64decode(key["publicKey"]) == sb.pos_public_key(sb.client_id)
    assert verify_pos_signature(key["publicKey"], data, signature)
    assert not verify_pos_signature(key["publicKey"], {**data, "amount": 12.5}, signature)
    assert not verify_pos_signature(sb.pos_public_key("094019245"), data, signature)
    [held] = sb.pos_signatures
    assert (held.signature, held.requests, held.operation) == (signature, 1, "signpos")


@pytest.mark.parametrize("fault", LOST + NOT_YET, ids=lambda f: f.name)
async def test_sign_pos_transaction_is_resent_and_ends_with_the_sandbox_truth(sb, fault):
    """After a lost answer (or a failure before signing) the request is sent again: the
    client gets the one signature the sandbox holds, signed once."""
    async with client_for(sb) as client:
        sb.script_operation(fault)
        result = await client.sign_pos_transaction(transaction(sb))
    [held] = sb.pos_signatures
    assert result.body["signature"] == held.signature
    assert result.attempts == 2
    assert held.requests == (1 if fault.before_commit else 2)
    assert len(requests_to(sb, SIGNPOS)) == 2


async def test_sign_pos_transaction_refusals(sb):
    """Not a JSON object, or no issuerTin: 400; another issuer's TIN: 401. Each is sent
    once (a definite answer) and signs nothing."""
    async with client_for(sb) as client:
        with pytest.raises(ValidationError) as not_object:
            await client.sign_pos_transaction(b"[1, 2]")
        with pytest.raises(ValidationError, match="issuerTin") as no_issuer:
            await client.sign_pos_transaction({"amount": 1})
        with pytest.raises(AuthenticationError) as other_issuer:
            await client.sign_pos_transaction(transaction(sb, issuerTin="094019245"))
    assert (not_object.value.status, no_issuer.value.status) == (400, 400)
    assert other_issuer.value.status == 401
    assert sb.pos_signatures == []


async def test_sign_pos_tightened_by_the_policy_is_not_resent(sb):
    """RetryPolicy(resend_ambiguous=False) (or safety=AT_MOST_ONCE_WRITE) makes a lost
    answer an unknown outcome after one request; the sandbox did sign."""
    async with client_for(sb) as client:
        sb.script_operation(Fault.commit_then_drop())
        with pytest.raises(UnknownOutcomeError, match="resend_ambiguous=False"):
            await client.sign_pos_transaction(
                transaction(sb), retry=RetryPolicy(resend_ambiguous=False)
            )
        sb.script_operation(Fault.commit_then_drop())
        with pytest.raises(UnknownOutcomeError):
            await client.sign_pos_transaction(
                transaction(sb, identifier="8"), safety=Safety.AT_MOST_ONCE_WRITE
            )
        with pytest.raises(ValueError, match="loosen"):
            await client.sign_pos_transaction(transaction(sb), safety=Safety.READ)
    assert len(requests_to(sb, SIGNPOS)) == 2
    assert len(sb.pos_signatures) == 2


async def test_request_pos_signature_signs_for_the_issuer_in_the_path(sb):
    """/PosSignatures/{issuerTin}: the payload signed for the issuer; the same data
    again is the same signature (nothing new); another issuer's TIN in the path is 401;
    a lost answer is re-sent."""
    data = {"uid": "9C7C84CB", "amount": 96.72}
    async with client_for(sb) as client:
        first = await client.request_pos_signature(sb.client_id, data)
        sb.script_operation(Fault.commit_then_drop())
        again = await client.request_pos_signature(sb.client_id, data)
        with pytest.raises(AuthenticationError):
            await client.request_pos_signature("094019245", data)
        with pytest.raises(ValueError, match="issuerTin"):
            await client.request_pos_signature("", data)
    assert first.body["signature"] == again.body["signature"]
    assert sb.verify_pos_signature(sb.client_id, data, first.body["signature"])
    [held] = sb.pos_signatures
    assert (held.operation, held.issuer_tin, held.requests) == (
        "PosSignatures",
        sb.client_id,
        3,
    )
    assert len(requests_to(sb, f"/PosSignatures/{sb.client_id}")) == 3
    # 401 requests: the session tries a new token before a 401 is the answer.
    assert {r.status for r in requests_to(sb, "/PosSignatures/094019245")} == {401}


# --- ReSeed: a deduplicated write answered with the record -----------------------------------


async def test_reseed_forwards_the_held_document_again_without_a_new_mark(sb):
    """The record comes back (a DocumentResult, the same mark); the sandbox records one
    re-forward with the new references; the status read says reseeded."""
    doc = b2g(sb)
    async with client_for(sb) as client:
        record = await client.submit_json(doc)
        changed = {**doc, "BuyerReference": "DEPT-8", "OrderReference": "PO-1"}
        result = await client.reseed_b2g_invoice(changed)
        status = await client.get_last_b2g_status(record.mark)
    assert isinstance(result, DocumentResult)
    assert result == record
    [reseeded] = sb.reseeds
    assert reseeded.mark == record.mark
    assert reseeded.references == {"BuyerReference": "DEPT-8", "OrderReference": "PO-1"}
    assert (status.body["lastStatus"], status.body["reseeds"]) == ("reseeded", 1)


@pytest.mark.parametrize("fault", LOST, ids=lambda f: f.name)
async def test_reseed_whose_answer_is_lost_gets_the_record_from_the_409(sb, fault):
    """The sandbox forwards and the answer is lost: the re-send is answered 409 (already
    forwarded as it is), which after this call's own attempt is its success. One
    re-forward, the record returned."""
    doc = b2g(sb)
    async with client_for(sb) as client:
        record = await client.submit_json(doc)
        sb.script_operation(fault)
        result = await client.reseed_b2g_invoice(doc)
    assert result == record
    assert len(sb.reseeds) == 1
    assert [r.status for r in requests_to(sb, RESEED)][-1] == 409


@pytest.mark.parametrize("fault", NOT_YET, ids=lambda f: f.name)
async def test_reseed_failing_before_the_forward_is_resent(sb, fault):
    """A failure before the sandbox forwarded: the re-send forwards it (200)."""
    async with client_for(sb) as client:
        record = await client.submit_json(b2g(sb))
        sb.script_operation(fault)
        result = await client.reseed_b2g_invoice(b2g(sb))
    assert result.mark == record.mark
    assert len(sb.reseeds) == 1
    assert [r.status for r in requests_to(sb, RESEED)][-1] == 200


async def test_reseed_repeated_by_the_caller_is_a_duplicate(sb):
    """A second call with what was forwarded last: DuplicateDocumentError carrying the
    record (it was done before this call), and no second re-forward."""
    async with client_for(sb) as client:
        record = await client.submit_json(b2g(sb))
        await client.reseed_b2g_invoice(b2g(sb))
        with pytest.raises(DuplicateDocumentError) as again:
            await client.reseed_b2g_invoice(b2g(sb))
    assert again.value.result is not None
    assert again.value.result.mark == record.mark
    assert len(sb.reseeds) == 1


async def test_reseed_refusals(sb):
    """Only references may change (400 naming the field); a document without a buyer or
    order reference is not B2G (400); one not held is 404; a cancelled one 400."""
    async with client_for(sb) as client:
        record = await client.submit_json(b2g(sb))
        await client.submit_json(invoice(sb, 2))
        with pytest.raises(ValidationError, match="Series") as changed:
            await client.reseed_b2g_invoice({**b2g(sb), "Series": "B"})
        with pytest.raises(ValidationError, match="not a B2G"):
            await client.reseed_b2g_invoice(invoice(sb, 2))
        with pytest.raises(UnexpectedStatusError) as missing:
            await client.reseed_b2g_invoice(b2g(sb, 3))
        await client.cancel_delivery_note(record.mark)
        with pytest.raises(ValidationError, match="cancelled"):
            await client.reseed_b2g_invoice(b2g(sb))
    assert changed.value.body["errors"][0]["field"] == "Series"
    assert missing.value.status == 404
    assert sb.reseeds == []


# --- uploads: re-sent only when certainly not processed -------------------------------------


@pytest.mark.parametrize(("method", "path"), UPLOADS)
async def test_upload_is_stored_byte_exact(sb, method, path, tmp_path):
    """Bytes that look like multipart framing and a name with quotes and Greek letters
    arrive exactly; a path is read and named by its file name; the inspection endpoint
    gives the content back."""
    data = b"%PDF-1.7\r\n--invoicing-async-boundary\r\n\x00\xff" + bytes(range(256))
    file = tmp_path / "τιμολόγιο.pdf"
    file.write_bytes(data)
    async with client_for(sb) as client:
        given = await getattr(client, method)(
            data,
            content_type="application/pdf",
            filename='a "quoted" τιμολόγιο.pdf',
            fields={"description": "σύνοψη"},
        )
        by_path = await getattr(client, method)(file, content_type="application/pdf")
    first, second = sb.uploads
    assert (first.data, second.data) == (data, data)
    assert (first.filename, second.filename) == ("a %22quoted%22 τιμολόγιο.pdf", file.name)
    assert first.fields == {"description": "σύνοψη"}
    assert (first.path, first.content_type) == (path, "application/pdf")
    assert given.status == 201
    assert given.body["sha256"] == hashlib.sha256(data).hexdigest()
    assert by_path.body["id"] == second.id
    status, stored = await raw("GET", f"{sb.inspect_url}/uploads/{first.id}")
    assert status == 200
    assert base64.b64decode(stored["content_base64"]) == data


@pytest.mark.parametrize(("method", "path"), UPLOADS)
async def test_upload_whose_answer_is_lost_is_sent_exactly_once(sb, method, path):
    """The sandbox stores the file and the answer is lost: UnknownOutcomeError, one
    request, one stored copy."""
    async with client_for(sb) as client:
        sb.script_operation(Fault.commit_then_drop())
        with pytest.raises(UnknownOutcomeError, match="second copy"):
            await getattr(client, method)(b"logo", content_type="image/png")
    assert len(requests_to(sb, path)) == 1
    assert len(sb.uploads) == 1


@pytest.mark.parametrize("fault", [Fault.status(500), Fault.status(408), Fault.reset()])
async def test_upload_failing_before_processing_is_still_unknown(sb, fault):
    """500, 408 or a reset may have come after the provider stored it, as far as the
    client can tell: one request, unknown; here nothing was stored."""
    async with client_for(sb) as client:
        sb.script_operation(fault)
        with pytest.raises(UnknownOutcomeError):
            await client.upload_media(b"logo", content_type="image/png")
    assert len(requests_to(sb, "/media/upload")) == 1
    assert sb.uploads == []


@pytest.mark.parametrize("fault", [Fault.status(503), Fault.status(429, retry_after=0)])
async def test_upload_is_resent_when_certainly_not_processed(sb, fault):
    """503 and 429 say it was not handled: sent again, stored once."""
    async with client_for(sb) as client:
        sb.script_operation(fault)
        result = await client.upload_invoice_file(b"%PDF", content_type="application/pdf")
    assert result.attempts == 2
    assert len(sb.uploads) == 1


async def test_upload_refusals(sb, tmp_path):
    """A file that cannot be read: ValidationError (status None), nothing sent. An empty
    file: 400. A mark the sandbox does not hold: 404. Not multipart: 415. Too large: 413."""
    async with client_for(sb) as client:
        with pytest.raises(ValidationError, match="cannot read") as unreadable:
            await client.upload_media(tmp_path / "missing.png", content_type="image/png")
        with pytest.raises(ValidationError) as empty:
            await client.upload_media(b"", content_type="image/png")
        with pytest.raises(UnexpectedStatusError) as unknown_mark:
            await client.upload_invoice_file(
                b"%PDF", content_type="application/pdf", params={"mark": "1"}
            )
        with pytest.raises(UnexpectedStatusError) as not_multipart:
            await client.request("POST", "/media/upload", json={"file": "x"}, safety=Safety.UPLOAD)
        with pytest.raises(ValueError, match="one line"):
            await client.upload_media(b"x", content_type="image/png\r\nX-Evil: 1")
    assert unreadable.value.status is None
    assert (empty.value.status, unknown_mark.value.status) == (400, 404)
    assert not_multipart.value.status == 415
    assert sb.uploads == []
    async with Sandbox(max_body_size=1024) as small, client_for(small) as client:
        with pytest.raises(ValidationError) as too_large:
            await client.upload_media(b"x" * 4096, content_type="application/octet-stream")
    assert too_large.value.status == 413
