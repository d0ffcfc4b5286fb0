"""InvoicingClient against mocked HTTP (aioresponses): auth flow, retries, safety rules."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from urllib.parse import parse_qs

import aiohttp
import pytest
from aioresponses import CallbackResult, aioresponses
from helpers import once

from invoicing_async import (
    AuthenticationError,
    DuplicateDocumentError,
    InvoicingClient,
    MalformedResponseError,
    ProviderKey,
    ProviderKeyError,
    ServerError,
    TokenCache,
    TransportError,
)
from invoicing_async._doc.prepare import INLINE_MAX
from invoicing_async.testing import instant_retries
from invoicing_sandbox import generate_keypair
from invoicing_sandbox._pgp import Decryptor

BASE = "https://provider.example"
TOKEN_URL = f"{BASE}/oauth/token"
JSON_URL = f"{BASE}/Invoice/json"
SECURE_URL = f"{BASE}/Invoice/secure"
API_KEY = "APIKEY-SENTINEL-5f1e"
TIN = "123456789"
RECORD = {"success": True, "mark": 400001000000001, "uid": "AB12", "status": "UNKNOWN"}
INVOICE = {"Issuer": {"Vat": TIN}, "Series": "A", "Number": 1, "City": "Αθήνα"}


@pytest.fixture(scope="module")
def keypair():
    return generate_keypair("cv25519")


@pytest.fixture
def mock():
    with aioresponses() as m:
        yield m


def token_body(n: int, expires_in: int = 900, refresh: str | None = None) -> dict:
    return {
        "access_token": f"TOKEN-SENTINEL-{n}",
        "token_type": "bearer",
        "expires_in": expires_in,
        "refresh_token": refresh or f"REFRESH-SENTINEL-{n}",
    }


def calls(mock, method: str, url: str) -> list:
    from yarl import URL  # noqa: PLC0415

    return mock.requests.get((method, URL(url)), [])


def form_of(call) -> dict[str, list[str]]:
    data = call.kwargs["data"]
    return parse_qs(data.decode() if isinstance(data, bytes) else data)


@pytest.fixture(autouse=True)
def no_backoff():
    """Token retries sleep zero seconds in these tests (the public testing hook)."""
    with instant_retries():
        yield


def client(**kwargs) -> InvoicingClient:
    return InvoicingClient(BASE, TIN, API_KEY, **kwargs)


async def test_submit_json_happy_path(mock):
    """One token request, then the document with bearer token, APIKey and exact JSON."""
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(JSON_URL, status=201, payload=RECORD)
    async with client() as c:
        result = await c.submit_json(INVOICE)
    assert result.mark == 400001000000001
    token_call = calls(mock, "POST", TOKEN_URL)[0]
    assert form_of(token_call) == {
        "grant_type": ["client_credentials"],
        "client_id": [TIN],
        "client_secret": [API_KEY],
    }
    doc_call = calls(mock, "POST", JSON_URL)[0]
    headers = doc_call.kwargs["headers"]
    assert headers["Authorization"] == "Bearer TOKEN-SENTINEL-1"
    assert headers["APIKey"] == API_KEY
    assert headers["Content-Type"] == "application/json"
    assert json.loads(doc_call.kwargs["data"]) == INVOICE
    assert doc_call.kwargs["allow_redirects"] is False


async def test_submit_secure_body_decrypts_to_the_exact_json(mock, keypair):
    """/Invoice/secure gets an armored PGP message that decrypts to the exact JSON bytes."""
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(SECURE_URL + "?sendMethod=email", status=201, payload=RECORD)
    key = ProviderKey.from_armored(keypair.public_armored)
    async with client(provider_key=key) as c:
        await c.submit_secure(INVOICE, send_method="email")
    call = calls(mock, "POST", SECURE_URL + "?sendMethod=email")[0]
    assert call.kwargs["headers"]["Content-Type"] == "application/pgp-encrypted"
    body = call.kwargs["data"]
    assert body.startswith(b"-----BEGIN PGP MESSAGE-----")
    plain = Decryptor(keypair.private_armored).decrypt(body)
    assert plain == json.dumps(INVOICE, ensure_ascii=False, separators=(",", ":")).encode()


async def test_small_documents_are_encrypted_on_the_loop_large_ones_in_a_thread(mock, keypair):
    """A small document is encrypted on the loop's thread, by a single call and by a
    batch alike (a hand-over to a thread costs as much as the encryption, and adds no
    throughput under the GIL); a large document goes to a worker thread."""
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(SECURE_URL, status=201, payload=RECORD, repeat=True)
    key = ProviderKey.from_armored(keypair.public_armored)
    threads: list[int] = []
    real = ProviderKey.encrypt

    def spy(self, data):
        threads.append(threading.get_ident())
        return real(self, data)

    large = {**INVOICE, "Notes": "x" * (INLINE_MAX + 1)}
    loop_thread = threading.get_ident()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ProviderKey, "encrypt", spy)
        async with client(provider_key=key) as c:
            await c.submit_secure(INVOICE)
            assert threads == [loop_thread]
            await c.submit_secure(large)
            assert threads[1] != loop_thread
            await c.submit_many([INVOICE])
            assert threads[2] == loop_thread
            await c.submit_many([large])
            assert threads[3] != loop_thread


async def test_submit_secure_without_key_is_refused_locally(mock):
    """Without a provider key submit_secure fails before any request is made, with a
    ProviderKeyError (a configuration problem, not a fault of the document)."""
    async with client() as c:
        with pytest.raises(ProviderKeyError, match="provider_key") as info:
            await c.submit_secure(INVOICE)
    assert info.value.reason == "missing"
    assert not mock.requests


async def test_401_fetches_a_new_token_and_retries_once(mock):
    """A 401 drops the token, fetches one new token and retries the call once."""
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(TOKEN_URL, payload=token_body(2))
    mock.post(
        JSON_URL,
        status=401,
        payload={"message": "token expired"},
        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
    )
    mock.post(JSON_URL, status=201, payload=RECORD)
    async with client() as c:
        result = await c.submit_json(INVOICE)
    assert result.mark == RECORD["mark"]
    doc_calls = calls(mock, "POST", JSON_URL)
    assert [c.kwargs["headers"]["Authorization"] for c in doc_calls] == [
        "Bearer TOKEN-SENTINEL-1",
        "Bearer TOKEN-SENTINEL-2",
    ]


async def test_second_401_raises_without_looping(mock):
    """Two 401s in a row (the second to a token fetched because of the first, old enough
    to be known everywhere) raise AuthenticationError after exactly two attempts."""
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(TOKEN_URL, payload=token_body(2))
    mock.post(
        JSON_URL,
        status=401,
        payload={"message": "VAT does not match"},
        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        repeat=True,
    )
    async with client(token_cache=TokenCache(propagation_delay=0)) as c:
        with pytest.raises(AuthenticationError, match="VAT does not match") as info:
            await c.submit_json(INVOICE)
    assert info.value.status == 401
    assert len(calls(mock, "POST", JSON_URL)) == 2
    assert len(calls(mock, "POST", TOKEN_URL)) == 2


async def test_concurrent_401s_on_one_token_cause_one_token_request(mock):
    """Many calls failing with the same expired token trigger a single new token."""
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(TOKEN_URL, payload=token_body(2))
    seen: list[str] = []

    def answer(url, **kwargs):
        auth = kwargs["headers"]["Authorization"]
        seen.append(auth)
        if auth.endswith("-1"):
            return CallbackResult(
                status=401,
                payload={"message": "expired"},
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        return CallbackResult(status=201, payload=RECORD)

    mock.post(JSON_URL, callback=answer, repeat=True)
    async with client() as c:
        results = await asyncio.gather(*(c.submit_json(INVOICE) for _ in range(20)))
    assert len(results) == 20
    assert len(calls(mock, "POST", TOKEN_URL)) == 2


async def test_persistent_401s_cost_one_new_token_per_cooldown(mock):
    """Calls always answered 401 (an issuer VAT mismatch, not cured by a new token) cost
    one new token per cooldown, not one per call: the first 401 forces a new token, the
    later ones are the calls' answers."""
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(TOKEN_URL, payload=token_body(2))
    mock.post(JSON_URL, status=401, payload={"message": "VAT does not match"}, repeat=True)
    async with client(token_cache=TokenCache(propagation_delay=0)) as c:
        for _ in range(5):
            with pytest.raises(AuthenticationError, match="VAT"):
                await c.submit_json(INVOICE)
    assert len(calls(mock, "POST", TOKEN_URL)) == 2
    assert len(calls(mock, "POST", JSON_URL)) == 2 + 4


async def test_token_outage_means_not_sent(mock):
    """When no token can be had, the document call fails as certainly not sent."""
    mock.post(TOKEN_URL, status=503, repeat=True)
    async with client(token_attempts=2) as c:
        with pytest.raises(TransportError) as info:
            await c.submit_json(INVOICE)
    assert info.value.maybe_sent is False
    assert not calls(mock, "POST", JSON_URL)


async def test_token_400_is_authentication_error_not_retried(mock):
    """Wrong credentials (400 invalid_request) raise at once with the OAuth fields."""
    mock.post(
        TOKEN_URL,
        status=400,
        payload={"error": "invalid_request", "error_description": "Invalid credentials"},
    )
    async with client() as c:
        with pytest.raises(AuthenticationError) as info:
            await c.submit_json(INVOICE)
    assert info.value.error == "invalid_request"
    assert info.value.error_description == "Invalid credentials"
    assert len(calls(mock, "POST", TOKEN_URL)) == 1


async def test_token_5xx_and_connection_errors_are_retried(mock):
    """The token endpoint is idempotent: 5xx and connection errors are retried."""
    mock.post(TOKEN_URL, status=503)
    mock.post(TOKEN_URL, exception=aiohttp.ClientConnectionError("boom"))
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(JSON_URL, status=201, payload=RECORD)
    async with client() as c:
        await c.submit_json(INVOICE)
    assert len(calls(mock, "POST", TOKEN_URL)) == 3


async def test_token_retries_are_bounded(mock):
    """A token endpoint that keeps failing gives up after token_attempts tries."""
    mock.post(TOKEN_URL, status=500, repeat=True)
    async with client(token_attempts=3) as c:
        with pytest.raises(ServerError):
            await c.token()
    assert len(calls(mock, "POST", TOKEN_URL)) == 3


async def test_refresh_grant_rotation_and_fallback(mock):
    """Renewal uses the refresh token, stores the rotated one, and falls back when refused."""
    clock = [0.0]
    cache = TokenCache(clock=lambda: clock[0])
    mock.post(TOKEN_URL, payload=token_body(1, refresh="RT-A"))
    mock.post(TOKEN_URL, payload=token_body(2, refresh="RT-B"))
    mock.post(TOKEN_URL, status=400, payload={"error": "invalid_grant"})
    mock.post(TOKEN_URL, payload=token_body(3))
    async with client(token_cache=cache) as c:
        assert (await c.token()).value == "TOKEN-SENTINEL-1"
        clock[0] += 1000
        second = await c.token()
        assert second.value == "TOKEN-SENTINEL-2"
        assert second.refresh_token == "RT-B"
        clock[0] += 1000
        assert (await c.token()).value == "TOKEN-SENTINEL-3"
    forms = [form_of(call) for call in calls(mock, "POST", TOKEN_URL)]
    client_auth = {"client_id": [TIN], "client_secret": [API_KEY]}
    assert forms[1] == {"grant_type": ["refresh_token"], "refresh_token": ["RT-A"], **client_auth}
    assert forms[2] == {"grant_type": ["refresh_token"], "refresh_token": ["RT-B"], **client_auth}
    assert forms[3]["grant_type"] == ["client_credentials"]


async def test_shared_cache_shares_tokens_between_clients(mock):
    """Two clients with one cache and the same credentials make one token request."""
    mock.post(TOKEN_URL, payload=token_body(1), repeat=True)
    cache = TokenCache()
    async with client(token_cache=cache) as a, client(token_cache=cache) as b:
        tokens = await asyncio.gather(a.token(), b.token())
    assert tokens[0] is tokens[1]
    assert len(calls(mock, "POST", TOKEN_URL)) == 1


def test_client_built_outside_a_loop():
    """A client (and its cache) created at import time works inside asyncio.run."""
    c = client()

    async def main() -> int:
        with aioresponses() as m:
            m.post(TOKEN_URL, payload=token_body(1))
            m.post(JSON_URL, status=201, payload=RECORD)
            async with c:
                result = await c.submit_json(INVOICE)
        assert result.mark is not None
        return result.mark

    assert asyncio.run(main()) == RECORD["mark"]


async def test_user_session_is_not_closed(mock):
    """A session passed in by the caller stays open after the client closes."""
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(JSON_URL, status=201, payload=RECORD)
    async with aiohttp.ClientSession() as session:
        async with client(session=session) as c:
            await c.submit_json(INVOICE)
        assert not session.closed


async def test_redirect_on_post_is_refused(mock):
    """A 30x to a POST is not followed: MalformedResponseError, one request."""
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(JSON_URL, status=307, headers={"Location": "https://evil.example/x"})
    async with client() as c:
        with pytest.raises(MalformedResponseError, match="redirect refused") as info:
            await c.submit_json(INVOICE)
    assert info.value.status == 307


async def test_body_over_the_cap_is_refused(mock):
    """A response body larger than max_response_size raises MalformedResponseError."""
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(JSON_URL, status=201, body=b'{"message": "' + b"x" * 5000 + b'"}')
    async with client(max_response_size=1024) as c:
        with pytest.raises(MalformedResponseError, match="cap") as info:
            await once(c, INVOICE)
    assert info.value.status == 201


async def test_generic_request(mock):
    """request() calls other operations with the same auth and returns decoded JSON."""
    mock.post(TOKEN_URL, payload=token_body(1))
    url = f"{BASE}/Invoice/cancelDeliveryNote?mark=400001000000001"
    mock.post(url, status=200, payload={"cancellationMark": 7})
    async with client() as c:
        data = await c.request(
            "POST", "/Invoice/cancelDeliveryNote", params={"mark": "400001000000001"}, json={}
        )
    assert data == {"cancellationMark": 7}
    call = calls(mock, "POST", url)[0]
    assert call.kwargs["headers"]["APIKey"] == API_KEY


async def test_request_refuses_absolute_urls():
    """request() takes a path on the provider, never another host."""
    async with client() as c:
        with pytest.raises(ValueError, match="path"):
            await c.request("GET", "https://evil.example/x")


@pytest.mark.parametrize("status", [201, 409])
async def test_secrets_echoed_into_a_record_are_scrubbed(mock, status):
    """A provider that echoes the API key or the token inside a result record (201, or
    the original record of a 409) never gets them into the record the caller sees."""
    mock.post(TOKEN_URL, payload=token_body(1))
    echo = f"accepted for key {API_KEY} with token TOKEN-SENTINEL-1"
    record = {"mark": 400001000000001, "message": echo, "extraInfo": {"seen": [API_KEY]}}
    mock.post(JSON_URL, status=status, payload=record)
    async with client() as c:
        if status == 201:
            result = await c.submit_json(INVOICE)
        else:
            with pytest.raises(DuplicateDocumentError) as info:
                await c.submit_json(INVOICE)
            result = info.value.result
    assert result.mark == 400001000000001
    assert "SENTINEL" not in repr(result)
    assert "[redacted]" in result.message
    assert result.extra == {"extraInfo": {"seen": ["[redacted]"]}}


async def test_a_record_echoing_a_token_fetched_since_the_last_record_is_scrubbed(mock):
    """The secrets a record is searched for follow the token: after a 401 made the
    client fetch a new token, a record echoing that new token is scrubbed too."""
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(TOKEN_URL, payload=token_body(2))
    mock.post(JSON_URL, status=201, payload={"mark": 400001000000001, "message": "clean"})
    mock.post(
        JSON_URL,
        status=401,
        payload={"message": "token revoked"},
        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
    )
    echo = {"mark": 400001000000002, "message": "accepted with token TOKEN-SENTINEL-2"}
    mock.post(JSON_URL, status=201, payload=echo)
    async with client() as c:
        first = await c.submit_json(INVOICE)
        second = await c.submit_json({**INVOICE, "Number": "2"})
    assert first.message == "clean"
    assert second.mark == 400001000000002
    assert "SENTINEL" not in repr(second)
    assert len(calls(mock, "POST", TOKEN_URL)) == 2


async def test_secrets_never_in_errors_reprs_or_logs(mock, caplog):
    """API key and tokens appear in no repr, error message or DEBUG log line."""
    caplog.set_level(logging.DEBUG, logger="invoicing_async")
    mock.post(TOKEN_URL, payload=token_body(1))
    mock.post(TOKEN_URL, payload=token_body(2))
    mock.post(
        JSON_URL,
        status=401,
        payload={"message": f"key {API_KEY} / token TOKEN-SENTINEL-1 refused"},
        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        repeat=True,
    )
    c = client()
    async with c:
        token = await c.token()
        with pytest.raises(AuthenticationError) as info:
            await c.submit_json(INVOICE)
    error = info.value
    texts = [
        repr(c),
        repr(token),
        repr(c.token_cache),
        str(error),
        repr(error),
        json.dumps(error.body),
        caplog.text,
    ]
    for text in texts:
        assert "SENTINEL" not in text, text


@pytest.mark.parametrize(
    ("secret", "said"),
    [
        ("k" * 10_000, "it has 10,000 characters"),
        ("two\nlines", "a character a header value cannot carry"),
        ("κλειδί", "a character a header value cannot carry"),
    ],
)
def test_an_api_key_that_cannot_be_sent_is_refused_when_the_client_is_made(secret, said):
    """A client given an API key the ``APIKey`` header cannot carry (too long for a
    server's header limit, a newline, characters beyond ASCII) is refused when it is
    made, saying why without the key: never a request the provider answers 400, with
    the documents recorded as refused."""
    with pytest.raises(ValueError, match="client_secret \\(the API key\\) cannot be sent") as e:
        InvoicingClient(BASE, TIN, secret)
    assert said in str(e.value)
    assert secret not in str(e.value)
