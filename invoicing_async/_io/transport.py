"""The only module that talks to aiohttp.

It sends a :class:`~._protocol.Request` and returns a :class:`~._protocol.Response`, or
raises one of the library's own errors. aiohttp's exceptions never escape: they carry the
request's headers (the API key and the bearer token) in ``request_info``, so they are
classified here and dropped, not chained.

Classification answers the question bulk submission asks: could the provider have
processed the request? A refused connection or a connect timeout means no; a reset, a
disconnect or a read timeout after sending means maybe.
"""

from __future__ import annotations

import asyncio
import io
import logging
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import aiohttp
import attrs

from invoicing_async._core.calls import sending
from invoicing_async._core.errors import (
    ClientStateError,
    InvoicingError,
    MalformedResponseError,
    TransportError,
)
from invoicing_async._core.events import RequestEnded
from invoicing_async._core.log import transport as log
from invoicing_async._core.protocol import Request, Response, error_for_response

if TYPE_CHECKING:
    import ssl as _ssl
    from collections.abc import AsyncGenerator, Callable
    from types import TracebackType

    from invoicing_async._core.events import RequestObserver

__all__ = ["DEFAULT_MAX_RESPONSE_SIZE", "ClientSession", "Transport"]

#: The aiohttp session type a caller may bring (``InvoicingClient(session=...)``).
ClientSession = aiohttp.ClientSession
#: Bodies larger than this go to aiohttp as a file object: given bytes, aiohttp warns
#: (``ResourceWarning``) that writing them whole might hold up the event loop.
_LARGE_BODY = 1 << 20


def _payload(body: bytes | None) -> bytes | io.BytesIO | None:
    """The body as aiohttp takes it without a warning.

    A large one becomes a new file object each attempt, so a re-send reads it whole.
    """
    return io.BytesIO(body) if body is not None and len(body) > _LARGE_BODY else body


#: Largest response body read, in bytes. Result records are a few KB.
DEFAULT_MAX_RESPONSE_SIZE = 4 * 1024 * 1024
_CHUNK = 64 * 1024
_CONNECT_TIMEOUT = getattr(aiohttp, "ConnectionTimeoutError", None)


class Transport:
    """An aiohttp session with the library's timeouts, caps and error classification.

    :param session: a session owned by the caller (not closed here); by default one is
        created inside the running loop on first use. aiohttp re-sends a ``GET``,
        ``PUT`` or ``DELETE`` once on a dropped keep-alive connection; the session made
        here never does, a caller's session keeps its own settings.
    :param limit: connection pool size of the session created here.
    :param connect_timeout: seconds to establish a connection (``sock_connect``: the wait
        for a free pool slot does not count).
    :param read_timeout: seconds without receiving a byte (``sock_read``).
    :param total_timeout: seconds for one whole request, body included, or ``None``.
    :param max_response_size: bodies larger than this raise
        :class:`~invoicing_async.MalformedResponseError`.
    :param ssl: an :class:`ssl.SSLContext` (for a private CA), or ``None`` for the
        system's verified defaults. Verification cannot be switched off.
    """

    def __init__(
        self,
        *,
        session: aiohttp.ClientSession | None = None,
        limit: int = 100,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        total_timeout: float | None = 120.0,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        ssl: _ssl.SSLContext | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._session = session
        self._owns_session = session is None
        self._limit = limit
        self._timeout = aiohttp.ClientTimeout(
            total=total_timeout, sock_connect=connect_timeout, sock_read=read_timeout
        )
        self._max_response_size = max_response_size
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._ssl: _ssl.SSLContext | bool = ssl if ssl is not None else True
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # Closes the session this transport made when its event loop shuts down.
        self._guard: AsyncGenerator[None, None] | None = None

    @property
    def limit(self) -> int:
        """Connection pool size (the session's own limit when the caller supplied one)."""
        if self._session is not None and not self._owns_session:
            return self._session.connector.limit if self._session.connector else self._limit
        return self._limit

    async def __aenter__(self) -> Transport:
        self._ensure_session()
        await self._guard_session()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def ensure_usable(self) -> None:
        """Raise :class:`~invoicing_async.ClientStateError` if no request can be sent.

        A closed client cannot send, and neither can one whose session was made in
        another event loop (an earlier ``asyncio.run``): aiohttp sessions belong to one
        loop, and using one from another fails in obscure ways or hangs.
        """
        if self._closed:
            raise ClientStateError("the client is closed")
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise ClientStateError(
                "the client belongs to another event loop (an earlier asyncio.run, say): "
                "create the client inside the asyncio.run that uses it and keep it for "
                "every call there. From synchronous code (Django, Flask, a script), use "
                "invoicing_async.blocking.BlockingClient: one client on one event loop "
                "for every thread"
            )

    def _ensure_session(self) -> aiohttp.ClientSession:
        self.ensure_usable()
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._limit, limit_per_host=0, ssl=self._ssl)
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                raise_for_status=False,
            )
            # aiohttp re-sends a GET, PUT or DELETE once when a kept-alive connection
            # drops, after the request may have been processed; one send here must be
            # one request (an at-most-once call is never repeated behind its back). No
            # public switch exists (aio-libs/aiohttp#10790); its own tests use this one.
            if hasattr(self._session, "_retry_connection"):
                self._session._retry_connection = False  # noqa: SLF001
        return self._session

    async def _guard_session(self) -> None:
        """Have the event loop close the session made here when it shuts down.

        A client used without ``async with`` (``asyncio.run(client.submit_json(...))``)
        would otherwise leave its session open when ``asyncio.run`` ends, and aiohttp
        warns "Unclosed client session" when it is collected. ``asyncio.run`` (and any
        loop owner calling ``shutdown_asyncgens``) closes the async generators still
        suspended: this one's ``finally`` closes the session. The client then still
        belongs to the ended loop, and says so if used from another.
        """
        if self._guard is None and self._owns_session:
            self._guard = self._session_guard()
            await anext(self._guard)

    async def _session_guard(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await self._close_session()

    async def _close_session(self) -> None:
        if self._owns_session and self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def close(self) -> None:
        """Close the session if this transport created it."""
        self._closed = True
        await self._close_session()

    async def send(  # noqa: C901  (every request's path in one frame: no await added to it)
        self, request: Request, *, timeout: float | None = None
    ) -> Response:
        """Send ``request`` once; never follows redirects and never retries.

        :param timeout: a shorter total timeout for this request (an attempt timeout or
            what is left of a deadline); it never extends the transport's own.
        """
        session = self._ensure_session()
        if self._guard is None:
            await self._guard_session()
        client_timeout = self._timeout
        if timeout is not None and (self._timeout.total is None or timeout < self._timeout.total):
            client_timeout = self._timeout_for(timeout)
        started = time.perf_counter()
        path = request.url.split("?", 1)[0]
        # Its call counts its requests; an observer, if anyone listens (a span, a duration).
        resends, watched = sending(request.method, request.url)
        error: InvoicingError
        try:
            async with session.request(
                request.method,
                request.url,
                # Never a local of its own: a traceback formatted with its frames'
                # locals would print the request's credentials (a Request hides them).
                headers=request.headers if watched is None else watched.headers(request.headers),
                data=_payload(request.body),
                allow_redirects=False,
                timeout=client_timeout,
                ssl=self._ssl,
            ) as response:
                status = response.status
                headers = response.headers  # case-insensitive, immutable
                try:
                    body = await self._read_body(response, status)
                except MalformedResponseError:
                    if 200 <= status < 300:
                        raise
                    # A refusal's status is its answer (409: the provider holds the
                    # document); an unreadable error body only loses the details.
                    log.debug("unreadable body of a %d answer, read as empty", status)
                    body = b""
        except InvoicingError as exc:
            error, cause = exc, type(exc).__name__
        except asyncio.CancelledError:
            if watched is not None:
                watched.ended(RequestEnded(None, "cancelled"))
            raise
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            error = _classify(exc)  # then dropped, not chained: it holds the request headers
            cause = type(exc).__name__
        else:
            if watched is not None:
                watched.ended(RequestEnded(status, None))
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "%s %s -> %d (%d bytes, %.1f ms)",
                    request.method,
                    path,
                    status,
                    len(body),
                    (time.perf_counter() - started) * 1000,
                    extra=_fields(request.method, path, resends, status=status),
                )
            return Response(status, headers, body)
        if watched is not None:
            watched.ended(RequestEnded(None, cause))
        log.debug(
            "%s %s failed: %s",
            request.method,
            path,
            error,
            extra=_fields(request.method, path, resends, error=cause),
        )
        raise error  # outside the except block: no __context__ pointing at aiohttp

    async def download(
        self,
        url: str,
        write: Callable[[bytes], object],
        *,
        limit: int,
        timeout: float | None = None,
    ) -> tuple[int, str | None]:
        """``GET url`` without credentials, its body handed to ``write`` a chunk at a time.

        For a public url (a document's PDF): no header of the client's is sent, no
        redirect is followed, and no more than ``limit`` bytes are handed on. Returns the
        bytes written and the answer's content type.

        :raises MalformedResponseError: the body is over ``limit`` (declared or as it
            arrives), was cut short, or the answer redirects.
        :raises TransportError: no usable exchange.
        :raises UnexpectedStatusError: (and the other typed errors of a status) the
            answer is not a 2xx.
        """
        session = self._ensure_session()
        if self._guard is None:
            await self._guard_session()
        client_timeout = self._timeout if timeout is None else self._timeout_for(timeout)
        _, watched = sending("GET", url)  # a request of the current call, if anyone listens
        try:
            async with session.get(
                url, allow_redirects=False, timeout=client_timeout, ssl=self._ssl
            ) as response:
                answer = Response(response.status, response.headers, b"")
                if not answer.ok:  # the core says what a status means
                    body = await self._read_body(response, response.status)
                    refused = attrs.evolve(answer, body=body)
                else:
                    refused = None
                    size = await self._stream(response, write, limit)
        except InvoicingError as exc:
            _told(watched, type(exc).__name__)
            raise
        except asyncio.CancelledError:
            _told(watched, "cancelled")
            raise
        except aiohttp.ClientPayloadError:
            _told(watched, "ClientPayloadError")
            raise MalformedResponseError("the file was cut short") from None
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            _told(watched, type(exc).__name__)
            raise _classify(exc) from None
        if watched is not None:
            watched.ended(RequestEnded(response.status, None))
        if refused is not None:
            raise error_for_response(refused, f"GET {urlsplit(url).path}")
        return size, response.content_type

    async def _stream(
        self, response: aiohttp.ClientResponse, write: Callable[[bytes], object], limit: int
    ) -> int:
        """Hand ``response``'s body to ``write``, a chunk at a time, up to ``limit`` bytes."""
        declared = response.content_length
        if declared is not None and declared > limit:
            raise MalformedResponseError(
                f"the file ({declared} bytes) is over the {limit}-byte cap",
                status=response.status,
            )
        size = 0
        while chunk := await response.content.read(_CHUNK):
            size += len(chunk)
            if size > limit:
                raise MalformedResponseError(
                    f"the file is over the {limit}-byte cap", status=response.status
                )
            write(chunk)
        return size

    def _timeout_for(self, total: float) -> aiohttp.ClientTimeout:
        """The session's timeouts with another total; one object per distinct total."""
        cached = self._timeouts.get(total)
        if cached is None:
            if len(self._timeouts) > 64:  # deadlines make many distinct totals
                self._timeouts.clear()
            cached = self._timeouts[total] = aiohttp.ClientTimeout(
                total=total,
                sock_connect=self._timeout.sock_connect,
                sock_read=self._timeout.sock_read,
            )
        return cached

    async def _read_body(self, response: aiohttp.ClientResponse, status: int) -> bytes:
        declared = response.content_length
        if declared is not None and declared > self._max_response_size:
            raise MalformedResponseError(
                f"the response body ({declared} bytes) is over the "
                f"{self._max_response_size}-byte cap",
                status=status,
            )
        if declared is not None:  # known and under the cap: one read
            try:
                return await response.read()
            except aiohttp.ClientPayloadError:
                raise MalformedResponseError(
                    "the response body was cut short or is not valid for its encoding",
                    status=status,
                ) from None
        chunks: list[bytes] = []
        size = 0
        problem = None
        try:
            while chunk := await response.content.read(_CHUNK):
                size += len(chunk)
                if size > self._max_response_size:
                    problem = f"the response body is over the {self._max_response_size}-byte cap"
                    break
                chunks.append(chunk)
        except aiohttp.ClientPayloadError:
            problem = "the response body was cut short or is not valid for its encoding"
        if problem is not None:
            # The body may be a token answer: keep it out of the traceback's locals.
            chunks.clear()
            chunk = b""
            raise MalformedResponseError(problem, status=status)
        return b"".join(chunks)


def _fields(
    method: str,
    path: str,
    resends: int,
    *,
    status: int | None = None,
    error: str | None = None,
) -> dict[str, object]:
    """What a request's log record carries: the HTTP conventions' names, no URL query."""
    fields: dict[str, object] = {"http.request.method": method, "url.path": urlsplit(path).path}
    if status is not None:
        fields["http.response.status_code"] = status
    if error is not None:
        fields["error.type"] = error
    if resends:
        fields["http.request.resend_count"] = resends
    return fields


def _classify(exc: BaseException) -> TransportError:
    """Turn an aiohttp/OS failure into a :class:`TransportError` saying if it was sent."""
    name = type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return TransportError(
            "TLS certificate verification failed for the provider", maybe_sent=False
        )
    if isinstance(exc, aiohttp.ClientConnectorError):
        return TransportError(f"cannot connect to the provider ({exc.os_error})", maybe_sent=False)
    if _CONNECT_TIMEOUT is not None and isinstance(exc, _CONNECT_TIMEOUT):
        return TransportError(
            "timed out connecting to the provider", maybe_sent=False, timed_out=True
        )
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return TransportError(
            "timed out waiting for the provider's response", maybe_sent=True, timed_out=True
        )
    if isinstance(exc, asyncio.TimeoutError):
        return TransportError("the request timed out", maybe_sent=True, timed_out=True)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return TransportError(
            "the provider closed the connection before answering", maybe_sent=True
        )
    if isinstance(exc, aiohttp.ClientResponseError):
        # Malformed HTTP from the server; str(exc) would include the URL only, but the
        # object carries request headers, so only its status and message are kept.
        return TransportError(
            f"the provider's response is not valid HTTP ({exc.message[:100]})", maybe_sent=True
        )
    if isinstance(exc, (aiohttp.ClientOSError, ConnectionError, OSError)):
        return TransportError(f"the connection failed ({name}: {exc})"[:200], maybe_sent=True)
    return TransportError(f"HTTP client error ({name})", maybe_sent=True)


def _told(watched: RequestObserver | None, cause: str) -> None:
    """A request that left no answer, told its observer (if anyone listens)."""
    if watched is not None:
        watched.ended(RequestEnded(None, cause))
