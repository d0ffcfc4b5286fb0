"""The transport seam: a client on a MockTransport runs as in production, with no socket."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qs

import pytest

from invoicing_async import (
    ClientStateError,
    InvoicingClient,
    IssuerPool,
    OutcomeStatus,
    ProviderKey,
    RateLimitError,
    RetryPolicy,
    TransportError,
    UnknownOutcomeError,
    ValidationError,
)
from invoicing_async.blocking import BlockingClient
from invoicing_async.testing import (
    MockTransport,
    Request,
    Response,
    instant_retries,
    respond,
    token_response,
)
from invoicing_sandbox import cached_keypair
from invoicing_sandbox._pgp import Decryptor

BASE = "https://provider.example"
TIN = "123456789"
API_KEY = "APIKEY-SENTINEL-77aa"
RECORD = {"success": True, "mark": 400001000000001, "uid": "AB12"}
INVOICE = {"Issuer": {"Vat": TIN}, "Series": "A", "Number": 1}


class Provider:
    """A handler that records what it is asked and answers from a script."""

    def __init__(self, *answers: Response | BaseException) -> None:
        self.requests: list[Request] = []
        self.answers = list(answers)

    def __call__(self, request: Request) -> Response:
        self.requests.append(request)
        if request.path == "/oauth/token":
            return token_response("TOKEN-1")
        answer = self.answers.pop(0) if self.answers else respond(200, RECORD)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    @property
    def documents(self) -> list[Request]:
        return [r for r in self.requests if r.path != "/oauth/token"]


def client(handler, **options) -> InvoicingClient:
    return InvoicingClient(BASE, TIN, API_KEY, transport=MockTransport(handler), **options)


async def test_the_handler_sees_the_token_request_then_the_document():
    """The token request goes through the seam too, then the document with its bearer
    token and API key; the answer is read as the provider's would be."""
    provider = Provider()
    async with client(provider) as c:
        result = await c.submit_json(INVOICE)
    token, document = provider.requests
    assert (token.method, token.path) == ("POST", "/oauth/token")
    assert parse_qs(token.body.decode())["client_id"] == [TIN]
    assert (document.method, document.url) == ("POST", f"{BASE}/Invoice/json")
    assert document.headers["Authorization"] == "Bearer TOKEN-1"
    assert document.headers["APIKey"] == API_KEY
    assert json.loads(document.body)["Series"] == "A"
    assert result.mark == 400001000000001


async def test_an_encrypted_document_reaches_the_handler_as_pgp():
    """submit_secure: the handler gets the armored message on /Invoice/secure (a mock
    can ignore it; this one decrypts it to show it is the document)."""
    keypair = cached_keypair("cv25519")
    provider = Provider()
    key = ProviderKey.from_armored(keypair.public_armored)
    async with client(provider, provider_key=key) as c:
        assert (await c.submit_secure(INVOICE)).mark == 400001000000001
    [document] = provider.documents
    assert document.path == "/Invoice/secure"
    assert document.headers["Content-Type"] == "application/pgp-encrypted"
    assert json.loads(Decryptor(keypair.private_armored).decrypt(document.body)) == INVOICE


async def test_an_async_handler_is_awaited():
    """An ``async def`` handler is awaited."""
    seen: list[str] = []

    async def provider(request: Request) -> Response:
        seen.append(request.path)
        await asyncio.sleep(0)
        return token_response() if request.path == "/oauth/token" else respond(201, RECORD)

    async with client(provider) as c:
        assert (await c.submit_json(INVOICE)).uid == "AB12"
    assert seen == ["/oauth/token", "/Invoice/json"]


async def test_retry_after_is_read_in_any_case_and_the_retry_goes_through_the_seam():
    """A 429 whose header is spelt ``retry-after`` is read as the real one is (the
    headers of a mock answer are case-insensitive), and retried through the handler."""
    slow_down = respond(429, {"message": "slow down"}, headers={"retry-after": "7"})
    provider = Provider(slow_down, slow_down)
    async with client(provider) as c:
        with pytest.raises(RateLimitError) as caught:
            await c.submit_json(INVOICE, retry=RetryPolicy(max_attempts=1))
        assert caught.value.retry_after == 7
        with instant_retries():
            assert (await c.submit_json(INVOICE)).mark == 400001000000001
    assert len(provider.documents) == 3


async def test_a_transport_error_from_the_handler_plays_a_network_failure():
    """Raising TransportError is a failure of the wire: a request never sent is retried."""
    provider = Provider(TransportError("refused", maybe_sent=False))
    with instant_retries():
        async with client(provider) as c:
            assert (await c.submit_json(INVOICE)).mark == 400001000000001
    assert len(provider.documents) == 2


async def test_a_handler_slower_than_the_timeout_ends_as_a_read_timeout():
    """A handler that never answers is cut off at the attempt's timeout, as a read
    timeout after sending: the document may have been taken."""
    never = asyncio.Event()

    async def provider(request: Request) -> Response:
        if request.path == "/oauth/token":
            return token_response()
        await never.wait()
        raise AssertionError("unreachable")

    async with client(provider) as c:
        with pytest.raises(UnknownOutcomeError, match="timed out waiting for the provider"):
            await c.submit_json(INVOICE, retry=RetryPolicy(max_attempts=1), timeout=0.05)


async def test_a_refusal_is_a_typed_error():
    """A 400 from the handler is the provider's refusal: ValidationError."""
    provider = Provider(respond(400, {"message": "Series: required"}))
    async with client(provider) as c:
        with pytest.raises(ValidationError):
            await c.submit_json(INVOICE)


async def test_a_batch_runs_on_the_seam():
    """submit_many: one token for all, each document answered by the handler."""
    provider = Provider(respond(500, {"message": "oops"}))
    with instant_retries():
        async with client(provider) as c:
            outcomes = await c.submit_many(
                [{**INVOICE, "Number": n} for n in range(5)], encrypted=False
            )
    assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED] * 5
    assert sum(r.path == "/oauth/token" for r in provider.requests) == 1


async def test_a_handler_returning_something_else_is_a_type_error():
    """A handler's mistake is named, not read as a provider's answer."""
    async with client(lambda request: {"status": 200}) as c:  # noqa: ARG005
        with pytest.raises(TypeError, match="returns a Response, not dict"):
            await c.token()


async def test_a_closed_client_refuses_as_with_the_real_transport():
    """Closing the client closes its mock transport: the same ClientStateError."""
    c = client(Provider())
    await c.close()
    with pytest.raises(ClientStateError, match="closed"):
        await c.submit_json(INVOICE)


async def test_a_pool_sends_each_issuer_through_the_seam_with_its_own_token():
    """IssuerPool takes the same keyword: each issuer's token request and documents."""
    provider = Provider()
    keys = {"094019245": "KEY-A", "800000001": "KEY-B"}
    async with IssuerPool(BASE, keys, transport=MockTransport(provider)) as pool:
        for tin in keys:
            await pool.submit_json({**INVOICE, "Issuer": {"Vat": tin}})
    grants = [parse_qs(r.body.decode())["client_id"] for r in provider.requests[::2]]
    assert grants == [["094019245"], ["800000001"]]
    assert [r.headers["APIKey"] for r in provider.documents] == ["KEY-A", "KEY-B"]


def test_a_transport_and_a_session_together_are_refused():
    """Both would say where requests go: a TypeError names the conflict."""
    with pytest.raises(TypeError, match="transport or a session"):
        InvoicingClient(BASE, TIN, API_KEY, transport=MockTransport(Provider()), session=object())


def test_the_blocking_client_stands_on_the_seam_too():
    """BlockingClient passes the transport to its client, on its own loop's thread."""
    provider = Provider()
    with BlockingClient(BASE, TIN, API_KEY, transport=MockTransport(provider)) as c:
        assert c.submit_json(INVOICE).mark == 400001000000001
    assert [r.path for r in provider.requests] == ["/oauth/token", "/Invoice/json"]


def test_respond_and_token_response_build_what_the_provider_sends():
    """respond(): JSON with its content type, or bytes as given; token_response(): a
    grant the client reads."""
    answer = respond(409, {"message": "duplicate"}, headers={"X-Id": "1"})
    assert answer.status == 409
    assert answer.headers == {"X-Id": "1", "Content-Type": "application/json"}
    assert json.loads(answer.body) == {"message": "duplicate"}
    assert respond(204).body == b""
    assert respond(200, body=b"raw").body == b"raw"
    grant = json.loads(token_response("T", expires_in=60, refresh_token="R").body)
    assert grant == {"access_token": "T", "token_type": "Bearer", "expires_in": 60,
                     "refresh_token": "R"}  # fmt: skip


def test_a_request_says_its_path_without_the_query():
    """Request.path: what a handler dispatches on."""
    request = Request("POST", f"{BASE}/Invoice/json?sendMethod=2", {})
    assert request.path == "/Invoice/json"
