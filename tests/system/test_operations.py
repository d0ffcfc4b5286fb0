"""Cancellations, the status read and ``request()`` over real HTTP to the sandbox.

Each operation is driven through the whole client (token cache, transport, the runner
of :mod:`invoicing_async._send.operations`) against the sandbox's routes, with the sandbox's
scripted faults. What the client reports is checked against the sandbox's ground truth
and its request log: a cancellation (at most once) is never sent a second time after a
failure that may have been processed; a read is repeated until it has the truth.
POS signatures, ReSeed and uploads are in ``test_operations_writes.py``.
"""

from __future__ import annotations

import pytest
from sandboxtools import client_for, invoice, requests_to, until

from invoicing_async import (
    AuthenticationError,
    DuplicateDocumentError,
    MalformedResponseError,
    OperationResult,
    RetryPolicy,
    Safety,
    ServerError,
    TransportError,
    UnexpectedStatusError,
    UnknownOutcomeError,
    ValidationError,
    document_key,
)
from invoicing_async.testing import instant_retries
from invoicing_sandbox import Fault, Sandbox

CANCELS = [
    ("cancel_delivery_note", "/Invoice/cancelDeliveryNote"),
    ("cancel_receiving_note", "/Invoice/cancelReceivingNote"),
]
STATUS = "/B2GInvoice/GetLastStatus"

#: Failures after which the provider may have acted (before or after its commit).
AMBIGUOUS_BEFORE = [Fault.status(500), Fault.status(408), Fault.reset()]
AMBIGUOUS_AFTER = [
    Fault.commit_then_drop(),
    Fault.commit_then_500(),
    Fault.truncated(),
    Fault.non_json(),
]
#: Failures that say the provider did not process the request.
NOT_PROCESSED = [Fault.status(503, retry_after=0), Fault.status(429, retry_after=0)]


@pytest.fixture
async def sb():
    async with Sandbox() as sandbox:
        yield sandbox


@pytest.fixture(autouse=True)
def _no_backoff():
    with instant_retries():
        yield


async def held(sb: Sandbox, client, number: int = 1):
    """Submit invoice ``number``; its record (the sandbox holds it)."""
    return await client.submit_json(invoice(sb, number))


# --- cancellations: at most once --------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), CANCELS)
async def test_cancel_once_then_409_with_the_original_cancellation_mark(sb, method, path):
    """A held document is cancelled once (200, its cancellation mark); a second request
    is refused with DuplicateDocumentError carrying the original cancellation mark, and
    the sandbox still holds that one."""
    doc = invoice(sb, 1)
    async with client_for(sb) as client:
        record = await client.submit_json(doc)
        result = await getattr(client, method)(record.mark)
        assert isinstance(result, OperationResult)
        assert (result.status, result.mark, result.attempts) == (200, record.mark, 1)
        assert result.cancellation_mark is not None
        assert result.operation == f"POST {path}"
        with pytest.raises(DuplicateDocumentError, match="already cancelled") as again:
            await getattr(client, method)(record.mark)
    assert again.value.result is not None
    assert again.value.result.cancellation_mark == result.cancellation_mark
    assert again.value.body["cancellationMark"] == result.cancellation_mark
    assert sb.committed[document_key(doc)].cancellation_mark == result.cancellation_mark
    assert [r.status for r in requests_to(sb, path)] == [200, 409]


@pytest.mark.parametrize(("method", "path"), CANCELS)
async def test_cancel_names_the_note_in_a_payload_or_params(sb, method, path):
    """The mark may go in a JSON payload or in params, as the provider's documentation
    asks; the sandbox reads either."""
    async with client_for(sb) as client:
        first, second = await held(sb, client, 1), await held(sb, client, 2)
        by_payload = await getattr(client, method)(payload={"mark": first.mark})
        by_params = await getattr(client, method)(params={"mark": str(second.mark)})
    assert (by_payload.mark, by_params.mark) == (first.mark, second.mark)
    assert [r.query for r in requests_to(sb, path)] == [{}, {"mark": str(second.mark)}]


@pytest.mark.parametrize(("method", "path"), CANCELS)
async def test_cancel_refusals_are_typed_and_final(sb, method, path):
    """An unknown mark is a 404 (UnexpectedStatusError), a mark that is not a number a
    400 (ValidationError); each is sent once and cancels nothing."""
    async with client_for(sb) as client:
        record = await held(sb, client)
        with pytest.raises(UnexpectedStatusError) as unknown:
            await getattr(client, method)(1)
        with pytest.raises(ValidationError) as malformed:
            await getattr(client, method)(payload={"mark": "soon"})
    assert (unknown.value.status, malformed.value.status) == (404, 400)
    assert len(requests_to(sb, path)) == 2
    assert sb.committed_in()[document_key(invoice(sb, 1))].cancellation_mark is None
    assert record.mark is not None


@pytest.mark.parametrize(("method", "path"), CANCELS)
async def test_cancel_whose_answer_is_lost_is_sent_exactly_once(sb, method, path):
    """The sandbox cancels and the answer is lost: the client sends no second request
    and raises UnknownOutcomeError saying to read the status; the status read shows
    the sandbox's truth (cancelled)."""
    async with client_for(sb) as client:
        record = await held(sb, client)
        sb.script_operation(Fault.commit_then_drop())
        with pytest.raises(UnknownOutcomeError, match="status") as caught:
            await getattr(client, method)(record.mark)
        assert caught.value.attempts == 1
        assert isinstance(caught.value.last_error, TransportError)
        assert len(requests_to(sb, path)) == 1
        status = await client.get_last_b2g_status(record.mark)
    truth = sb.committed[document_key(invoice(sb, 1))].cancellation_mark
    assert truth is not None
    assert status.cancellation_mark == truth
    assert status.body["lastStatus"] == "cancelled"


@pytest.mark.parametrize("fault", AMBIGUOUS_BEFORE + AMBIGUOUS_AFTER, ids=lambda f: f.name)
async def test_cancel_is_never_resent_after_a_failure_that_may_have_been_processed(sb, fault):
    """500, 408, a reset, a lost, cut or unreadable answer: one request, then
    UnknownOutcomeError. Whether the sandbox cancelled depends on where the fault hit
    (before or after its commit); the status read tells the truth either way, and a
    document that was not cancelled can then be cancelled."""
    doc = invoice(sb, 1)
    async with client_for(sb) as client:
        record = await client.submit_json(doc)
        sb.script_operation(fault)
        with pytest.raises(UnknownOutcomeError):
            await client.cancel_delivery_note(record.mark)
        assert len(requests_to(sb, "/Invoice/cancelDeliveryNote")) == 1
        status = await client.get_last_b2g_status(record.mark)
        truth = sb.committed[document_key(doc)].cancellation_mark
        assert status.cancellation_mark == truth
        assert (truth is None) is fault.before_commit
        if truth is None:
            assert (await client.cancel_delivery_note(record.mark)).cancellation_mark


async def test_cancel_that_timed_out_after_sending_is_unknown(sb):
    """A request that hangs past the attempt timeout may have been processed: unknown,
    one request, never a second."""
    async with client_for(sb, retry=RetryPolicy(attempt_timeout=0.3)) as client:
        record = await held(sb, client)
        sb.script_operation(Fault.hang())
        with pytest.raises(UnknownOutcomeError, match=r"timed out|timeout"):
            await client.cancel_delivery_note(record.mark)
    await until(lambda: requests_to(sb, "/Invoice/cancelDeliveryNote"))  # the hang ends as we leave
    assert len(requests_to(sb, "/Invoice/cancelDeliveryNote")) == 1


@pytest.mark.parametrize("fault", NOT_PROCESSED, ids=lambda f: f.name)
async def test_cancel_is_resent_when_certainly_not_processed(sb, fault):
    """503 and 429 say the provider did not handle the request: it is sent again, and
    the document is cancelled once."""
    doc = invoice(sb, 1)
    async with client_for(sb) as client:
        record = await client.submit_json(doc)
        sb.script_operation(fault)
        result = await client.cancel_delivery_note(record.mark)
    assert result.attempts == 2
    assert [r.status for r in requests_to(sb, "/Invoice/cancelDeliveryNote")] == [fault.code, 200]
    assert sb.committed[document_key(doc)].cancellation_mark == result.cancellation_mark


async def test_cancel_with_a_refused_connection_is_not_sent():
    """Nothing listening: every attempt certainly failed to arrive (it is tried again
    as the policy allows); the call ends with the TransportError (maybe_sent False),
    not an unknown outcome."""
    async with Sandbox() as sb:
        client = client_for(sb, retry=RetryPolicy(max_attempts=2))
    async with client:
        with pytest.raises(TransportError) as caught:
            await client.cancel_delivery_note(1)
    assert caught.value.maybe_sent is False


async def test_cancel_refused_credentials_is_authentication_error(sb):
    """401 to the cancellation after a new token: AuthenticationError, nothing
    cancelled (the refusal came before the provider acted)."""
    doc = invoice(sb, 1)
    async with client_for(sb) as client:
        record = await client.submit_json(doc)
        # The session tries a new token (and waits for a young one) before a 401 is the
        # request's answer: more 401s than it has tries.
        sb.script_operation(*[Fault.status(401)] * 4)
        with pytest.raises(AuthenticationError) as caught:
            await client.cancel_delivery_note(record.mark)
    assert caught.value.status == 401
    assert sb.committed[document_key(doc)].cancellation_mark is None


async def test_cancel_safety_cannot_be_loosened(sb):
    """Asking for a looser class than AT_MOST_ONCE_WRITE raises ValueError before
    anything is sent; asking for the same class is allowed."""
    async with client_for(sb) as client:
        record = await held(sb, client)
        for looser in (Safety.READ, Safety.DEDUPLICATED_WRITE, Safety.UPLOAD):
            with pytest.raises(ValueError, match="loosen"):
                await client.cancel_delivery_note(record.mark, safety=looser)
        assert requests_to(sb, "/Invoice/cancelDeliveryNote") == []
        done = await client.cancel_delivery_note(record.mark, safety=Safety.AT_MOST_ONCE_WRITE)
    assert done.cancellation_mark is not None


# --- the status read: repeated freely --------------------------------------------------


async def test_status_reflects_what_the_sandbox_holds(sb):
    """committed, then cancelled; uid and internal id from the record; a mark the
    sandbox does not hold is 404, none at all 400."""
    async with client_for(sb) as client:
        record = await held(sb, client)
        before = await client.get_last_b2g_status(record.mark)
        await client.cancel_delivery_note(record.mark)
        after = await client.get_last_b2g_status(str(record.mark))
        with pytest.raises(UnexpectedStatusError) as unknown:
            await client.get_last_b2g_status(1)
        with pytest.raises(ValidationError) as missing:
            await client.get_last_b2g_status()
    assert before.body["lastStatus"] == "committed"
    assert before.cancellation_mark is None
    assert (before.body["uid"], before.body["internalId"]) == (record.uid, record.internal_id)
    assert after.body["lastStatus"] == "cancelled"
    assert after.cancellation_mark == sb.committed[document_key(invoice(sb, 1))].cancellation_mark
    assert (unknown.value.status, missing.value.status) == (404, 400)


@pytest.mark.parametrize(
    "fault",
    [*AMBIGUOUS_BEFORE, *AMBIGUOUS_AFTER, *NOT_PROCESSED, Fault.wrong_content_type()],
    ids=lambda f: f.name,
)
async def test_status_read_is_repeated_until_it_has_the_truth(sb, fault):
    """Any failure that may pass is followed by another read; the answer is the
    sandbox's truth (the content type of a readable body does not matter)."""
    async with client_for(sb) as client:
        record = await held(sb, client)
        sb.script_operation(fault)
        status = await client.get_last_b2g_status(record.mark)
    assert status.body["lastStatus"] == "committed"
    assert status.mark == record.mark
    expected = 1 if fault.kind == "wrong_content_type" else 2
    assert (status.attempts, len(requests_to(sb, STATUS))) == (expected, expected)


async def test_status_read_gives_up_with_the_last_error_never_unknown(sb):
    """A read that fails on every attempt ends with its last error: a read has no
    effect, so its outcome is never "unknown"."""
    async with client_for(sb, retry=RetryPolicy(max_attempts=2)) as client:
        record = await held(sb, client)
        sb.script_operation(Fault.status(500), Fault.non_json())
        with pytest.raises(MalformedResponseError) as caught:
            await client.get_last_b2g_status(record.mark)
        sb.script_operation(Fault.status(500), Fault.status(502))
        with pytest.raises(ServerError):
            await client.get_last_b2g_status(record.mark)
    assert caught.value.status == 200
    assert len(requests_to(sb, STATUS)) == 4


async def test_status_answer_echoing_secrets_is_scrubbed(sb):
    """A provider answer that repeats the API key and the token: neither reaches the
    result's body."""
    async with client_for(sb) as client:
        record = await held(sb, client)
        token = (await client.token()).value
        sb.script_operation(Fault.echo_secrets())
        status = await client.get_last_b2g_status(record.mark)
    text = repr(status.body)
    assert sb.client_secret not in text
    assert token not in text
    assert "[redacted]" in text


# --- request(): anything else, with a class ------------------------------------------------


async def test_request_runs_a_known_operation_under_its_declared_class(sb):
    """request() for POST /Invoice/cancelDeliveryNote is the at-most-once write the
    table declares: a lost answer raises UnknownOutcomeError after one request."""
    async with client_for(sb) as client:
        record = await held(sb, client)
        sb.script_operation(Fault.commit_then_drop())
        with pytest.raises(UnknownOutcomeError):
            await client.request(
                "POST", "/Invoice/cancelDeliveryNote", params={"mark": str(record.mark)}
            )
    assert len(requests_to(sb, "/Invoice/cancelDeliveryNote")) == 1


async def test_request_get_is_a_read_and_returns_the_json_body(sb):
    """GET defaults to READ: a lost answer is read again; the decoded JSON comes back."""
    async with client_for(sb) as client:
        record = await held(sb, client)
        sb.script_operation(Fault.commit_then_drop())
        body = await client.request("GET", STATUS, params={"mark": str(record.mark)})
    assert body["lastStatus"] == "committed"
    assert len(requests_to(sb, STATUS)) == 2


async def test_request_refuses_to_loosen_a_known_operation(sb):
    """A looser class than the table's is a ValueError, and nothing is sent; a stricter
    one is taken (a GET read as at most once is not read again after a lost answer)."""
    async with client_for(sb) as client:
        record = await held(sb, client)
        with pytest.raises(ValueError, match="loosen"):
            await client.request(
                "POST", "/Invoice/cancelDeliveryNote", json={}, safety=Safety.DEDUPLICATED_WRITE
            )
        sb.script_operation(Fault.commit_then_drop())
        with pytest.raises(UnknownOutcomeError):
            await client.request(
                "GET",
                STATUS,
                params={"mark": str(record.mark)},
                safety=Safety.AT_MOST_ONCE_WRITE,
            )
    assert requests_to(sb, "/Invoice/cancelDeliveryNote") == []
    assert len(requests_to(sb, STATUS)) == 1


async def test_request_to_an_unknown_operation_defaults_to_the_safest_class(sb):
    """An operation the table does not know: a POST is at most once by default, and
    the caller may declare another class for it. 404 is a definite answer either way."""
    async with client_for(sb) as client:
        with pytest.raises(UnexpectedStatusError):
            await client.request("POST", "/Invoice/somethingNew", json={"a": 1})
        with pytest.raises(UnexpectedStatusError):
            await client.request("POST", "/Invoice/somethingNew", json={"a": 1}, safety=Safety.READ)
    assert len(requests_to(sb, "/test/Invoice/somethingNew")) == 2  # logged outside the API


async def test_request_body_that_is_not_json_is_refused_before_sending(sb):
    """A value JSON cannot carry (NaN) is a ValidationError with status None."""
    async with client_for(sb) as client:
        with pytest.raises(ValidationError) as caught:
            await client.request("POST", "/Invoice/cancelDeliveryNote", json={"mark": float("nan")})
    assert caught.value.status is None
    assert requests_to(sb, "/Invoice/cancelDeliveryNote") == []
