"""The transport seam: a transport whose answers come from a function, not a socket.

:class:`MockTransport` is the shape of httpx's: a handler gets each
:class:`~invoicing_async._core.protocol.Request` the client would send (the token
request too) and returns the :class:`~invoicing_async._core.protocol.Response`. A client
given one (``InvoicingClient(..., transport=MockTransport(handler))``) runs everything
else as in production: tokens, retries and their classification, the batch, the ledger.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from invoicing_async._core.errors import TransportError
from invoicing_async._core.protocol import JSON_CONTENT_TYPE, Request, Response

from .transport import Transport

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

__all__ = ["MockTransport", "respond", "token_response"]


class MockTransport(Transport):
    """A transport that asks ``handler`` for each answer; no socket is ever opened.

    :param handler: called with each :class:`~invoicing_async.testing.Request` (the
        token request to ``/oauth/token`` included), returns the
        :class:`~invoicing_async.testing.Response`; a plain function or an
        ``async def``. Raising :class:`~invoicing_async.TransportError` plays a network
        failure (``maybe_sent`` says whether the request may have been processed). Any
        other exception is the handler's bug and reaches the caller.

    A handler that awaits longer than the request's timeout (an attempt's, or what is
    left of a deadline) is cancelled, and the request ends as a read timeout does. Header
    names of a response are read in any case, as HTTP's are. The client's ``limit``,
    timeouts and ``ssl`` options do not apply; ``session`` cannot be given with it.

    .. versionadded:: 0.5.0
    """

    def __init__(self, handler: Callable[[Request], Response | Awaitable[Response]]) -> None:
        super().__init__()
        self._handler = handler

    def __repr__(self) -> str:
        return f"<MockTransport {getattr(self._handler, '__qualname__', self._handler)!r}>"

    async def __aenter__(self) -> MockTransport:
        self.ensure_usable()
        return self

    async def close(self) -> None:
        """Refuse further requests (a closed client), as the real transport does."""
        self._closed = True

    async def send(self, request: Request, *, timeout: float | None = None) -> Response:
        """The handler's answer to ``request``, within ``timeout`` seconds."""
        self.ensure_usable()
        answer = self._handler(request)
        if inspect.isawaitable(answer):
            try:
                answer = await asyncio.wait_for(answer, timeout)
            except asyncio.TimeoutError:
                raise TransportError(
                    "timed out waiting for the provider's response", maybe_sent=True, timed_out=True
                ) from None
        if not isinstance(answer, Response):
            raise TypeError(
                f"a MockTransport handler returns a Response, not {type(answer).__name__}"
            )
        return Response(answer.status, _Caseless(answer.headers), answer.body)


class _Caseless(Mapping[str, str]):
    """Response headers read in any case (``Retry-After`` is ``retry-after``)."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = {name.lower(): value for name, value in headers.items()}

    def __getitem__(self, name: str) -> str:
        return self._headers[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._headers)

    def __len__(self) -> int:
        return len(self._headers)


def respond(
    status: int = 200,
    json_body: Any = None,
    *,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A response of ``status``: ``json_body`` serialised as JSON, else ``body`` as given.

    ``respond(429, {"message": "slow down"}, headers={"Retry-After": "2"})``.

    .. versionadded:: 0.5.0
    """
    given = dict(headers or {})
    if json_body is not None:
        body = json.dumps(json_body).encode()
        given.setdefault("Content-Type", JSON_CONTENT_TYPE)
    return Response(status, given, body)


def token_response(
    access_token: str = "mock-access-token",  # noqa: S107  (a test value, not a secret)
    *,
    expires_in: int = 900,
    refresh_token: str | None = None,
) -> Response:
    """The token endpoint's ``200``: what a handler answers a request to ``/oauth/token``.

    ``if request.path == "/oauth/token": return token_response()``.

    .. versionadded:: 0.5.0
    """
    answer: dict[str, Any] = {
        "access_token": access_token,
        "token_type": "Bearer",
        "expires_in": expires_in,
    }
    if refresh_token is not None:
        answer["refresh_token"] = refresh_token
    return respond(200, answer)
