"""Adversarial: TLS, plain http and redirects, against a real HTTPS server.

An aiohttp.web provider serves HTTPS on 127.0.0.1 with a certificate from a private CA
made by ``trustme``. The client must refuse it by default (the request certainly did not
reach the provider), accept it when given an ``ssl`` context trusting that CA, refuse a
certificate for another name even then, refuse plain http to anything but loopback when
constructed, and never follow a redirect of a POST: the redirect target receives nothing.
"""

from __future__ import annotations

import json
import ssl

import pytest
import trustme
from aiohttp import web

from invoicing_async import (
    AuthenticationError,
    InvoicingClient,
    InvoicingError,
    MalformedResponseError,
    RetryPolicy,
    TransportError,
)
from invoicing_async.testing import set_instant_retries

TIN = "094019245"
TOKEN = {"access_token": "t0k3n", "token_type": "Bearer", "expires_in": 900}
RECORD = {"success": True, "mark": 400001000000001, "uid": "AB"}


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


class HttpsProvider:
    """A provider on HTTPS; ``redirect`` makes its POST answers redirects elsewhere."""

    def __init__(self, ca: trustme.CA, *names: str) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(*(names or ("127.0.0.1", "localhost"))).configure_cert(self.context)
        self.hits: list[str] = []
        self.redirect: tuple[int, str] | None = None
        self.redirect_token = False
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def __aenter__(self) -> HttpsProvider:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.context)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.hits.append(f"{request.method} {request.path} {len(body)}")
        is_token = request.path.endswith("/oauth/token")
        if self.redirect is not None and (self.redirect_token or not is_token):
            status, location = self.redirect
            return web.Response(status=status, headers={"Location": location})
        if is_token:
            return web.json_response(TOKEN)
        return web.json_response(RECORD, status=201)


async def test_private_ca_is_refused_by_default_as_not_sent(ca):
    """Without a context trusting the private CA the handshake fails: TransportError with
    maybe_sent False, and the server never sees a request.
    """
    async with HttpsProvider(ca) as provider:  # noqa: SIM117  (the client needs its port)
        async with InvoicingClient(provider.base_url, TIN, "key", token_attempts=1) as client:
            with pytest.raises(TransportError) as caught:
                # One attempt: the error's kind is the subject, not the retries' backoff.
                await client.submit_json({"n": 1}, retry=RetryPolicy(max_attempts=1))
    assert caught.value.maybe_sent is False
    assert "certificate" in str(caught.value)
    assert provider.hits == []


async def test_private_ca_is_accepted_with_an_ssl_context_trusting_it(ca):
    """With ssl= a context trusting the CA (trustme's configure_trust) the submission
    succeeds over verified TLS.
    """
    async with (
        HttpsProvider(ca) as provider,
        InvoicingClient(provider.base_url, TIN, "key", ssl=client_context(ca)) as client,
    ):
        result = await client.submit_json({"n": 1})
    assert result.mark == RECORD["mark"]
    assert [hit.split(" ")[1] for hit in provider.hits] == ["/oauth/token", "/Invoice/json"]


async def test_certificate_for_another_name_is_refused_even_with_the_ca_trusted(ca):
    """A certificate from the trusted CA but for another host name is refused: hostname
    verification stays on.
    """
    async with (
        HttpsProvider(ca, "provider.example") as provider,
        InvoicingClient(
            provider.base_url, TIN, "key", ssl=client_context(ca), token_attempts=1
        ) as client,
    ):
        with pytest.raises(TransportError) as caught:
            await client.token()
    assert caught.value.maybe_sent is False
    assert provider.hits == []


@pytest.mark.parametrize(
    "url",
    [
        "http://provider.example",
        "http://10.0.0.1",
        "http://localhost.provider.example",
        "http://127.0.0.1.nip.io",
        "http://0.0.0.0:8080",
        "HTTP://provider.example",
        "http://provider.example#@127.0.0.1",
        "http://127.0.0.1@provider.example",
        "http://[::ffff:8.8.8.8]",
    ],
)
def test_plain_http_to_a_non_loopback_host_is_refused_at_construction(url):
    """Plain http is refused when the client is built unless the host is loopback, however
    the URL is dressed up; no request is ever attempted.
    """
    with pytest.raises(ValueError):
        InvoicingClient(url, TIN, "key")


@pytest.mark.parametrize("status", [307, 302, 301, 308, 303])
async def test_redirect_of_a_document_post_is_refused_and_the_target_gets_nothing(ca, status):
    """A real 30x from the HTTPS provider to another (trusted) HTTPS server is not followed:
    MalformedResponseError with the status, and the target receives no request (so it
    never sees the document, the API key or the token).
    """
    async with HttpsProvider(ca) as target, HttpsProvider(ca) as provider:
        provider.redirect = (status, f"{target.base_url}/steal")
        async with InvoicingClient(provider.base_url, TIN, "key", ssl=client_context(ca)) as client:
            with pytest.raises(MalformedResponseError) as caught:
                await client.submit_json({"n": 1})
    assert caught.value.status == status
    assert "redirect refused" in str(caught.value)
    assert target.hits == []


async def test_redirect_of_the_token_request_is_refused_and_the_target_gets_nothing(ca):
    """A redirect answering the token request (which carries the API key in its body) is
    not followed either: an InvoicingError, and the target receives nothing.
    """
    async with HttpsProvider(ca) as target, HttpsProvider(ca) as provider:
        provider.redirect = (307, f"{target.base_url}/steal")
        provider.redirect_token = True
        async with InvoicingClient(
            provider.base_url, TIN, "key", ssl=client_context(ca), token_attempts=2
        ) as client:
            set_instant_retries(True)  # token retries without waiting
            with pytest.raises(InvoicingError) as caught:
                await client.token()
    assert not isinstance(caught.value, AuthenticationError)
    assert caught.value.status == 307
    assert target.hits == []
    assert json.dumps(provider.hits)  # the provider saw the token requests, nothing else
    assert all("/oauth/token" in hit for hit in provider.hits)
