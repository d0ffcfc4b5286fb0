"""The sandbox against the real InvoicingClient, over loopback HTTP: the façade end to end.

Every test goes through the whole stack: the client's token cache, PGP stage, aiohttp
transport and protocol parsing on one side; the sandbox's aiohttp application,
decryptor and provider state on the other. The sandbox's ground truth (``committed``,
``requests``, ``stats``) is what the client's view is checked against. Faults are in
``test_sandbox_faults.py``, the provider's rules without HTTP in
``test_sandbox_provider.py``, GnuPG and Sequoia in ``tests/system/test_interop.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time

import pytest
from helpers import send_body
from sandboxtools import FakeClock, client_for, invoice, raw, until

from invoicing_async import (
    AuthenticationError,
    DuplicateDocumentError,
    InvoicingClient,
    OutcomeStatus,
    ProviderKeyError,
    RetryPolicy,
    TokenCache,
    UnexpectedStatusError,
    ValidationError,
    document_key,
)
from invoicing_async._doc.document import serialize_document
from invoicing_async._doc.pgp import armor
from invoicing_sandbox import Fault, Sandbox, cached_keypair, sample_invoice


@pytest.fixture
async def sb():
    async with Sandbox() as sandbox:
        yield sandbox


# --- the pytest plugin and the happy paths ----------------------------------------------------


async def test_plugin_fixtures_submit_secure_round_trip(invoicing_sandbox, invoicing_client):
    """The plugin's fixtures give a running sandbox and a bound client; an encrypted
    document arrives byte-exact and the client's record equals the sandbox's.
    """
    sb = invoicing_sandbox
    doc = invoice(sb, 1)
    result = await invoicing_client.submit_secure(doc)
    committed = sb.committed[document_key(doc)]
    assert committed.body == serialize_document(doc)
    assert committed.document == doc
    assert committed.encrypted
    assert committed.record == result
    assert committed.commits == 1
    assert sb.commit_count == 1
    assert result.mark == 400001000000001
    assert result.success is True
    assert result.url == result.qr_code_string == f"{result.domain}/v/{result.signature}"
    assert [(r.path, r.status) for r in sb.requests] == [
        ("/oauth/token", 200),
        ("/Invoice/secure", 201),
    ]


async def test_submit_json_round_trip_records_query_parameters(sb):
    """/Invoice/json commits the exact bytes sent; sendMethod and timeStamp are journaled."""
    doc = invoice(sb, 2)
    async with client_for(sb) as client:
        result = await client.submit_json(
            doc, send_method="email", time_stamp="2026-11-22T09:15:30.123Z"
        )
    committed = sb.committed[document_key(doc)]
    assert committed.body == serialize_document(doc)
    assert not committed.encrypted
    assert committed.record == result
    assert sb.requests[-1].query == {"sendMethod": "email", "timeStamp": "2026-11-22T09:15:30.123Z"}


async def test_result_record_is_realistic(sb):
    """The record carries the authority's uid (SHA-1 of the six fields), echoed
    series/number as text, the issue date in UTC and the internal document id.
    """
    doc = invoice(sb, 17, branch=2)
    async with client_for(sb) as client:
        result = await client.submit_json(doc)
    expected_uid = hashlib.sha1(
        f"{sb.client_id}-2026-11-22-2-1.1-A-17".encode(), usedforsecurity=False
    ).hexdigest()
    assert result.uid == expected_uid.upper()
    assert (result.series, result.number) == ("A", "17")
    assert result.date_issued is not None
    assert result.date_issued.isoformat() == "2026-11-22T00:00:00+00:00"
    assert result.internal_id == f"{sb.client_id}-A-17"
    assert len(result.authentication_code or "") == 40
    assert result.cancellation_mark is None
    assert isinstance(result.authority_data_response, dict)


async def test_committed_keys_follow_the_documented_identity():
    """Identity is InternalDocumentId, else VAT/series/number, else a content hash:
    the same keys as the library's document_key, so tests can look documents up.

    Documents without those fields are odd on purpose: the sandbox is told to accept
    documents that lack required fields.
    """
    async with Sandbox(key_algorithm="cv25519", require_fields=False) as sb:
        with_id = invoice(sb, 3)
        by_number = {"Issuer": {"Vat": sb.client_id}, "Series": "B", "Number": 9}
        anonymous = {"Note": "no identity fields", "Amount": 1.5}
        async with client_for(sb) as client:
            for doc in (with_id, by_number, anonymous):
                await client.submit_json(doc)
            changed = {**by_number, "Extra": "different content, same number"}
            with pytest.raises(DuplicateDocumentError):
                await client.submit_json(changed)
        assert set(sb.committed) == {document_key(d) for d in (with_id, by_number, anonymous)}
        assert sb.commit_count == 3


# --- tokens ------------------------------------------------------------------------------


async def test_token_expiry_and_refresh_rotation():
    """A token near expiry is renewed with the refresh token; the refresh token rotates
    and the old one (or an access token) is refused with invalid_grant.
    """
    clock = FakeClock()
    async with Sandbox(clock=clock, expires_in=900) as sb:
        async with client_for(sb, token_cache=TokenCache(clock=clock)) as client:
            first = await client.token()
            assert first.expires_in == 900
            assert (await client.token()).value == first.value  # cached
            clock.now += 850  # inside the renewal window (after 840 s)
            second = await client.token()
            assert second.value != first.value
            assert second.refresh_token != first.refresh_token
            assert sb.stats.token_requests == 2
            assert sb.stats.refresh_requests == 1
            await client.submit_json(invoice(sb, 1))  # the new token is accepted
        token_url = f"{sb.base_url}/oauth/token"
        auth = {"client_id": sb.client_id, "client_secret": sb.client_secret}
        for presented in (first.refresh_token, second.value):
            status, body = await raw(
                "POST",
                token_url,
                data={"grant_type": "refresh_token", "refresh_token": presented, **auth},
            )
            assert (status, body["error"]) == (400, "invalid_grant")
        status, body = await raw(
            "POST",
            token_url,
            data={"grant_type": "refresh_token", "refresh_token": second.refresh_token},
        )
        assert (status, body["error"]) == (401, "invalid_client")  # RFC 6749 section 6
        status, body = await raw("POST", token_url, data={"grant_type": "password"})
        assert (status, body["error"]) == (400, "unsupported_grant_type")


async def test_expired_refresh_token_falls_back_to_client_credentials():
    """After the refresh token's lifetime the refresh grant fails and the client gets a
    token with its credentials instead: the submission still succeeds.
    """
    clock = FakeClock()
    sb = Sandbox(clock=clock, expires_in=60, refresh_expires_in=100)
    async with sb, client_for(sb, token_cache=TokenCache(clock=clock)) as client:
        await client.token()
        clock.now += 200
        await client.submit_json(invoice(sb, 1))
    token_statuses = [r.status for r in sb.requests if r.path == "/oauth/token"]
    assert token_statuses == [200, 400, 200]
    assert sb.stats.refresh_requests == 1


async def test_expire_tokens_causes_one_401_then_recovery(sb):
    """After expire_tokens() the next submission gets 401, the client fetches exactly
    one new token and the retried submission is committed.
    """
    async with client_for(sb) as client:
        await client.submit_json(invoice(sb, 1))
        sb.expire_tokens()
        await client.submit_json(invoice(sb, 2))
    assert sb.stats.token_requests == 2
    assert [(r.path, r.status) for r in sb.requests] == [
        ("/oauth/token", 200),
        ("/Invoice/json", 201),
        ("/Invoice/json", 401),
        ("/oauth/token", 200),
        ("/Invoice/json", 201),
    ]


async def test_revoked_refresh_tokens_are_refused():
    """revoke_refresh_tokens() makes the refresh grant fail; the client recovers with
    its credentials.
    """
    clock = FakeClock()
    sb = Sandbox(clock=clock)
    async with sb, client_for(sb, token_cache=TokenCache(clock=clock)) as client:
        await client.token()
        sb.revoke_refresh_tokens()
        clock.now += 899
        await client.token()
    assert [r.status for r in sb.requests] == [200, 400, 200]


async def test_credentials_of_another_environment_are_refused(sb):
    """Production credentials against the test environment fail exactly like wrong
    credentials: 400 invalid_request, raised as AuthenticationError.
    """
    prod = sb.environment("production")
    assert prod.client_id != sb.client_id
    assert prod.client_secret != sb.client_secret
    for client_id, secret in ((prod.client_id, prod.client_secret), (sb.client_id, "wrong")):
        async with InvoicingClient(sb.base_url, client_id, secret) as client:
            with pytest.raises(AuthenticationError) as caught:
                await client.token()
        assert caught.value.status == 400
        assert caught.value.error == "invalid_request"


async def test_token_of_another_environment_is_401(sb):
    """A production token sent to the test environment is refused with 401, as are a
    missing bearer token and a wrong API key.
    """
    prod = sb.environment("production")
    held = sample_invoice(1, series="P", issuer_vat=prod.client_id, lines=1)
    async with client_for(sb, "production") as client:
        token = await client.token()
        await client.submit_json(held)
    url = f"{sb.base_url}/Invoice/json"
    body = json.dumps({"Series": "A", "Number": 1})
    headers = {"Content-Type": "application/json", "APIKey": prod.client_secret}
    for extra in ({"Authorization": f"Bearer {token.value}"}, {}):
        status, answer = await raw("POST", url, data=body, headers={**headers, **extra})
        assert status == 401, answer
    own = sb.environment()
    async with client_for(sb) as client:
        own_token = await client.token()
    status, _ = await raw(
        "POST",
        url,
        data=body,
        headers={**headers, "Authorization": f"Bearer {own_token.value}", "APIKey": "nope"},
    )
    assert status == 401
    assert sb.committed[document_key(held)].environment == "production"
    assert own.client_id == sb.client_id


async def test_seeded_sandboxes_have_reproducible_valid_credentials():
    """With a seed the credentials are reproducible, and the TIN has a valid check digit."""
    first, second = Sandbox(seed=42), Sandbox(seed=42)
    assert (first.client_id, first.client_secret) == (second.client_id, second.client_secret)
    tin = [int(c) for c in first.client_id]
    assert len(tin) == 9
    assert sum(d << (8 - i) for i, d in enumerate(tin[:8])) % 11 % 10 == tin[8]


# --- errors ------------------------------------------------------------------------------


async def test_400_validation_error_carries_the_body_message(sb):
    """An invalid document is refused with 400; the error's message is the body's,
    and the body lists the offending fields.
    """
    doc = invoice(sb, 1)
    doc = {**doc, "Details": [], "Summaries": {**doc["Summaries"], "TotalGrossValue": -1}}
    async with client_for(sb) as client:
        with pytest.raises(ValidationError) as caught:
            await client.submit_json(doc)
        with pytest.raises(ValidationError, match="malformed JSON") as malformed:
            await send_body(client, b'{"Series": ', encrypted=False)
    body = caught.value.body
    assert body is not None
    assert caught.value.status == 400
    assert body["message"] in caught.value.message
    assert {e["field"] for e in body["errors"]} == {"Details", "Summaries.TotalGrossValue"}
    assert body["statusCode"] == "BadRequest"
    assert malformed.value.status == 400
    assert sb.commit_count == 0


async def test_issuer_vat_mismatch_is_401(sb):
    """A document of another issuer is refused with 401, as the real service does."""
    async with client_for(sb) as client:
        with pytest.raises(AuthenticationError, match="VAT number does not match"):
            await client.submit_json(sample_invoice(1, issuer_vat="094019245"))
    assert sb.commit_count == 0


async def test_duplicate_409_carries_the_original_record(sb):
    """Sending a committed document again gives 409 whose record equals the original,
    also across /Invoice/json and /Invoice/secure.
    """
    doc = invoice(sb, 1)
    async with client_for(sb) as client:
        original = await client.submit_secure(doc)
        for send in (client.submit_json, client.submit_secure):
            with pytest.raises(DuplicateDocumentError) as caught:
                await send(doc)
            assert caught.value.result == original
    assert sb.committed[document_key(doc)].commits == 1
    assert sb.stats.submissions == {201: 1, 409: 2}


async def test_concurrent_duplicates_commit_once(sb):
    """Twenty concurrent submissions of one document: one 201, nineteen 409s."""
    doc = invoice(sb, 1)
    async with client_for(sb) as client:
        outcomes = await asyncio.gather(
            *(client.submit_json(doc) for _ in range(20)), return_exceptions=True
        )
    duplicates = [o for o in outcomes if isinstance(o, DuplicateDocumentError)]
    assert len(duplicates) == 19
    assert sb.commit_count == 1
    assert all(d.result == sb.committed[document_key(doc)].record for d in duplicates)


# --- PGP -----------------------------------------------------------------------------------


async def test_pgp_refusals_are_400(sb):
    """Garbage and a message without integrity protection (an old SED packet) are
    refused with 400 and a clear message; the client reports a refusal that blames the
    message, not the document: ProviderKeyError (not_decryptable), never a
    ValidationError an application would ask the cashier to fix.
    """
    sed_packet = bytes((0xC0 | 9, 40)) + os.urandom(40)
    async with client_for(sb) as client:
        with pytest.raises(ProviderKeyError, match="cannot be decrypted") as garbage:
            await send_body(client, b"not a pgp message", encrypted=True)
        with pytest.raises(ProviderKeyError, match="not integrity protected") as old:
            await send_body(client, armor(sed_packet), encrypted=True)
    assert (garbage.value.status, old.value.status) == (400, 400)
    assert garbage.value.reason == old.value.reason == "not_decryptable"
    assert sb.commit_count == 0


async def test_key_file_and_cv25519(tmp_path):
    """A sandbox started from an armored secret key file serves that key's public half."""
    pair = cached_keypair("cv25519")
    key_file = tmp_path / "provider-secret.asc"
    key_file.write_text(pair.private_armored)
    async with Sandbox(key_file=key_file) as sb:
        assert sb.provider_key.algorithm == "Curve25519"
        assert sb.write_public_key(tmp_path / "pub.asc").read_text() == sb.public_key_armored
        async with client_for(sb) as client:
            await client.submit_secure(invoice(sb, 1))
    assert sb.commit_count == 1


# --- other operations ---------------------------------------------------------------------


async def test_cancel_delivery_note_at_most_once(sb):
    """A committed document is cancelled once (200 with a cancellation mark); the
    second request is a 409, an unknown mark a 404.
    """
    doc = invoice(sb, 1)
    async with client_for(sb) as client:
        result = await client.submit_json(doc)
        answer = await client.request(
            "POST", "/Invoice/cancelDeliveryNote", json={"mark": result.mark}
        )
        assert answer["success"] is True
        assert answer["cancellationMark"] > result.mark
        with pytest.raises(DuplicateDocumentError):
            await client.request("POST", "/Invoice/cancelDeliveryNote", json={"mark": result.mark})
        with pytest.raises(UnexpectedStatusError) as unknown:
            await client.request("POST", "/Invoice/cancelDeliveryNote", json={"mark": 1})
        assert unknown.value.status == 404
    assert sb.committed[document_key(doc)].cancellation_mark == answer["cancellationMark"]


async def test_unknown_paths_and_methods(sb):
    """Operations the sandbox does not implement answer 404 JSON; GET on a POST
    operation answers 405. The client says so with UnexpectedStatusError (a wrong path
    or base URL), not as a refusal of the request's content.
    """
    async with client_for(sb) as client:
        for path in ("/B2GInvoice/GetEverything", f"/PosSignatures/{sb.client_id}/all"):
            with pytest.raises(UnexpectedStatusError) as caught:
                await client.request("GET", path)
            assert caught.value.status == 404
            assert caught.value.body is not None
        for method, path in (("GET", "/Invoice/json"), ("POST", "/B2GInvoice/GetLastStatus")):
            with pytest.raises(UnexpectedStatusError) as wrong_method:
                await client.request(method, path)
            assert wrong_method.value.status == 405
    status, body = await raw("POST", f"{sb.url}/staging/oauth/token")
    assert (status, body["statusCode"]) == (404, "NotFound")


async def test_add_client_is_another_issuer(sb):
    """add_client registers another issuer; its documents are scoped to it."""
    sb.add_client("test", "094019245", "second-api-key")
    second = sb.environment("test", client_id="094019245")
    doc = sample_invoice(1, issuer_vat="094019245")
    async with InvoicingClient(second.base_url, second.client_id, second.client_secret) as client:
        await client.submit_json(doc)
    assert sb.committed[document_key(doc)].client_id == "094019245"
    assert list(sb.committed_in("test", "094019245")) == [document_key(doc)]
    assert sb.committed_in() == {}


async def test_close_is_quick_with_requests_in_flight():
    """Closing with a hung request and a slow trickle in flight takes moments (not the
    trickle's minutes, nor the 5 s it waits for a stuck handler) and leaves no task
    behind.
    """
    sb = Sandbox()
    await sb.start()
    sb.script(Fault.hang(), Fault.trickle(1.0))
    client = client_for(sb)
    # One attempt each: their retries against the closed sandbox are not the subject.
    once = RetryPolicy(max_attempts=1)
    pending = [
        asyncio.ensure_future(client.submit_json(invoice(sb, n), retry=once)) for n in range(2)
    ]
    await until(lambda: len(sb._inflight) == 2)
    started = time.perf_counter()
    await sb.close()
    assert time.perf_counter() - started < 3.0
    await asyncio.gather(*pending, return_exceptions=True)
    await client.close()
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_run_forever_serves_until_stopped():
    """run_forever() starts the sandbox, serves until the event is set, then closes it."""
    sb = Sandbox(environments=("demo",))
    stop = asyncio.Event()
    task = asyncio.ensure_future(sb.run_forever(stop))
    await until(lambda: sb._server is not None)
    async with client_for(sb) as client:
        await client.submit_json(invoice(sb, 1))
    stop.set()
    await task
    assert sb.commit_count == 1
    with pytest.raises(RuntimeError, match="not running"):
        _ = sb.base_url


# --- the façade's own promises -----------------------------------------------------------------


async def test_without_duplicate_detection_a_resent_document_is_committed_again():
    """duplicate_detection=False answers a re-sent document 201 with a new mark and
    counts the commits, like a provider without duplicate detection.
    """
    async with Sandbox(duplicate_detection=False) as sb:
        doc = invoice(sb, 1)
        async with client_for(sb) as client:
            first = await client.submit_json(doc)
            second = await client.submit_json(doc)
        committed = sb.committed[document_key(doc)]
        assert second.mark == first.mark + 1
        assert committed.commits == 2
        assert committed.record == second
        assert sb.commit_count == 2
        assert sb.stats.submissions == {201: 2}


@pytest.mark.parametrize("resend", [True, False], ids=["resend", "no-resend"])
async def test_a_lost_answer_without_duplicate_detection(resend):
    """After a lost answer, re-sending to a provider without duplicate detection commits
    the document twice; RetryPolicy(resend_ambiguous=False) leaves it committed once and
    reports it unknown.
    """
    async with Sandbox(duplicate_detection=False) as sb:
        doc = invoice(sb, 1)
        sb.script(Fault.commit_then_drop())
        retry = RetryPolicy(base_delay=0, max_delay=0, resend_ambiguous=resend)
        async with client_for(sb) as client:
            [outcome] = await client.submit_many([doc], encrypted=False, retry=retry)
        assert sb.committed[document_key(doc)].commits == (2 if resend else 1)
        expected = OutcomeStatus.ACCEPTED if resend else OutcomeStatus.UNKNOWN
        assert outcome.status is expected
