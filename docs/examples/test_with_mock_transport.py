"""Unit-testing an application with no socket: the client on a MockTransport.

A function of the test (the handler) answers every request the client would send, the
token request included. Run with
``python -m pytest docs/examples/test_with_mock_transport.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from invoicing_async import InvoicingClient, ValidationError
from invoicing_async.blocking import BlockingClient
from invoicing_async.testing import (
    MockTransport,
    Request,
    Response,
    instant_retries,
    respond,
    token_response,
)

# Async tests need the marker in pytest-asyncio's default (strict) mode
# (the blocking test is a plain function: it is not marked).
asyncio = pytest.mark.asyncio

BASE_URL = "https://invoicing.example.com"
SALE = {"Issuer": {"Vat": "123456789"}, "Series": "A", "Number": 17}


# region code-under-test
async def checkout(client: InvoicingClient, invoice: dict[str, Any]) -> str:
    """The application's code under test: file a sale's invoice, say what to print."""
    try:
        result = await client.submit_json(invoice)
    except ValidationError as refused:
        return f"refused: {refused.body['message'] if refused.body else refused}"
    return f"mark {result.mark}"


# endregion code-under-test


# region handler
def provider(request: Request) -> Response:
    """The provider, as this test needs it: a token, then an accepted invoice."""
    if request.path == "/oauth/token":
        return token_response()
    return respond(200, {"mark": 400001000000017, "uid": "8F2C"})


@asyncio
async def test_the_sale_prints_its_mark() -> None:
    """The provider accepts the sale: its mark is printed."""
    transport = MockTransport(provider)
    async with InvoicingClient(
        BASE_URL, "123456789", "api-key", transport=transport
    ) as client:
        assert await checkout(client, SALE) == "mark 400001000000017"


# endregion handler


# region scripted
class Scripted:
    """A handler that answers documents from a list, and keeps what it was sent."""

    def __init__(self, *answers: Response) -> None:
        self.answers = list(answers)
        self.sent: list[Request] = []

    def __call__(self, request: Request) -> Response:
        """Answer a request: the token, else the next scripted answer."""
        if request.path == "/oauth/token":
            return token_response()
        self.sent.append(request)
        return self.answers.pop(0)


@asyncio
async def test_a_503_is_retried_and_a_refusal_is_shown() -> None:
    """A 503 is retried by the client; a 400 reaches the application as a refusal."""
    script = Scripted(
        respond(503, headers={"Retry-After": "1"}),
        respond(200, {"mark": 400001000000018}),
        respond(400, {"message": "Series: required"}),
    )
    client = InvoicingClient(
        BASE_URL, "123456789", "api-key", transport=MockTransport(script)
    )
    with instant_retries():  # the retry's wait is zero in tests
        async with client:
            assert await checkout(client, SALE) == "mark 400001000000018"
            assert await checkout(client, SALE) == "refused: Series: required"
    assert len(script.sent) == 3  # the 503, its retry, the refused one


# endregion scripted


# region blocking
def test_a_blocking_client_takes_the_same_transport() -> None:
    """Synchronous code (Django, Flask) tests the same way."""
    transport = MockTransport(provider)
    with BlockingClient(
        BASE_URL, "123456789", "api-key", transport=transport
    ) as client:
        assert client.submit_json(SALE).mark == 400001000000017


# endregion blocking
