"""The sandbox on the wire: aiohttp routes, request reading, faults, replies written.

One server holds every environment as a path prefix (``/test``, ``/production``), like
the real service's separate hosts, and the read-only endpoints under ``/_sandbox``
(:mod:`._inspect`). Handlers hand what a request carries to the provider state
(:mod:`._provider`), which decides every answer synchronously; this module adds what
needs the network: reading bodies, decrypting off the loop (a small thread pool:
``cryptography`` releases the GIL for RSA), TLS, the request log line, and writing
replies, straight or mangled as a fault says (a reset, a lost answer, half a body, a
trickle, an oversized body, a hang). The only module of the sandbox importing aiohttp.

Requests are read as a web service reads hostile input: a body over the limit is a 413
from its declared length, before it is read or decrypted; a form or multipart body that
cannot be read is a 400; header bytes that are not text never match a credential; a
request that is not valid HTTP is one log line. Each is the request's one log line,
never a 500 or a traceback.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import functools
import logging
import os
import socket
import struct
import time
from typing import TYPE_CHECKING, Any

from aiohttp import BodyPartReader, http_exceptions, web

from ._bodies import OperationCall, UploadedFile
from ._faults import Fault
from ._gate import Gate
from ._inspect import PREFIX
from ._operations import PUBLIC_ROUTES
from ._operations import ROUTES as OPERATION_ROUTES
from ._outage import OutageSwitch
from ._pgp import OpenPGPError
from ._replies import (
    METHOD_NOT_ALLOWED,
    Reply,
    error_reply,
    fault_reply,
    mangled,
    oauth_error,
    undecryptable,
)

if TYPE_CHECKING:
    import ssl
    from collections.abc import Awaitable, Callable

    from ._faults import FaultPlan
    from ._inspect import Inspector
    from ._operations import Operations
    from ._pgp import Decryptor
    from ._provider import Exchange, Provider, Route, Submission

    _Handler = Callable[[web.Request, str, Exchange], Awaitable[web.StreamResponse]]
    _AiohttpHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]

__all__ = ["Server"]

log = logging.getLogger("invoicing_async.sandbox")  # under the library's tree: -v shows it

_JSON_TYPES = frozenset({"application/json", "text/json"})
_PGP_TYPES = frozenset({"application/pgp-encrypted", "application/octet-stream"})
_CHUNK = 64 * 1024
#: The longest request line and header value read, in bytes: a real server's limit
#: (aiohttp's default, written out; nginx takes 8 KiB a header line), so a client that
#: sends a header too long for the provider meets the 400 it would meet there.
MAX_HEADER_FIELD = 8190


class Server:
    """The aiohttp side of one running sandbox: listen, route, write (see the module)."""

    def __init__(
        self,
        provider: Provider,
        faults: FaultPlan,
        decryptor: Decryptor,
        *,
        max_body_size: int,
        max_in_flight: int | None = None,
        inspector: Inspector | None = None,
        operations: Operations | None = None,
        gate: Gate | None = None,
        token_gate: Gate | None = None,
    ) -> None:
        self._provider = provider
        self._operations = operations
        self._gate = gate or Gate()
        self._token_gate = token_gate or Gate()
        self._inspector = inspector
        self._max_in_flight = max_in_flight
        self._documents_in_flight = 0
        self._faults = faults
        self._decryptor = decryptor
        self._max_body_size = max_body_size
        self._runner: web.AppRunner | None = None
        self._sites: list[web.BaseSite] = []
        self._tls: ssl.SSLContext | None = None
        #: Sockets bound, not listening, while an outage refuses connections: the port
        #: stays this sandbox's, and every connection is refused.
        self._reserved: list[socket.socket] = []
        self.outage = OutageSwitch(self._refuse, self._accept)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._stopping = asyncio.Event()  # set by close(): ends hangs, latency, trickles
        #: Handler tasks: aiohttp forgets the task of a connection the client closed.
        self.inflight: set[asyncio.Task[Any]] = set()

    async def start(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> int:
        """Listen on ``host:port`` (0: any free port), over TLS with ``tls``; the port."""
        app = web.Application(client_max_size=self._max_body_size)
        app.router.add_route("*", PREFIX + "{tail:(/.*)?}", self._inspect)
        secure, plain = (functools.partial(self._document, encrypted=e) for e in (True, False))
        routes: tuple[tuple[str, _Handler, Route], ...] = (
            ("/{env}/oauth/token", self._token, "token"),
            ("/{env}/Invoice/secure", secure, "document"),
            ("/{env}/Invoice/json", plain, "document"),
            *(
                (f"/{{env}}{path}", functools.partial(self._operation, name=name), "operation")
                for _, path, name in (OPERATION_ROUTES if self._operations is not None else ())
            ),
            *(
                (
                    f"/{{env}}{path}",
                    functools.partial(self._operation, name=name, public=True),
                    "operation",
                )
                for _, path, name in (PUBLIC_ROUTES if self._operations is not None else ())
            ),
            ("/{tail:.*}", self._not_found, "other"),
        )
        for path, handler, route in routes:
            app.router.add_route("*", path, self._route(handler, route))
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=min(8, os.cpu_count() or 2), thread_name_prefix="invoicing-sandbox"
        )
        # handler_cancellation=False, explicit although it is aiohttp's default: a client
        # that disconnects must not cancel the commit of a document it already sent.
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=2.0,
            handler_cancellation=False, logger=_ProtocolLog(log),
            max_line_size=MAX_HEADER_FIELD, max_field_size=MAX_HEADER_FIELD,
        )  # fmt: skip
        await runner.setup()
        site = web.TCPSite(runner, host, port, ssl_context=tls)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            self._executor.shutdown()
            raise
        self._runner, self._sites, self._tls = runner, [site], tls
        return int(runner.addresses[0][1])

    async def close(self) -> None:
        """Stop listening; end hangs, delays and trickles; wait for requests in flight.

        A request whose client already left still completes its commit.
        """
        self._stopping.set()
        await self.outage.close()
        for sock in self._reserved:
            sock.close()
        self._reserved = []
        if self._runner is not None:
            await self._runner.cleanup()
        if self.inflight:
            _, pending = await asyncio.wait(set(self.inflight), timeout=5.0)
            for task in pending:  # pragma: no cover - a handler stuck despite _stopping
                task.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    def _route(self, handler: _Handler, route: Route) -> _AiohttpHandler:
        """Wrap ``handler`` with what every request gets: the log, counters, task tracking."""

        async def serve(request: web.Request) -> web.StreamResponse:
            environment = request.match_info.get("env")
            exchange = self._provider.begin(
                environment, route, request.method, request.path, dict(request.query)
            )
            task, started = asyncio.current_task(), time.perf_counter()
            if task is not None:
                self.inflight.add(task)
            try:
                if exchange.environment is None:
                    return await self._send(request, _unknown(request), None, exchange)
                if self.outage.mode is not None:
                    return await self._during_outage(request, exchange)
                return await handler(request, exchange.environment, exchange)
            except _Unreadable as exc:
                # Hostile or broken input: a 4xx, and this request's one log line.
                return await self._send(request, exc.reply(route), None, exchange)
            except ConnectionError:
                # The client went away (killed, timed out): not the sandbox's failure, and
                # no traceback; the request's log line (-v) says so.
                exchange.dropped = "client gone"
                return web.Response()
            finally:
                self._provider.finish(exchange)
                if task is not None:
                    self.inflight.discard(task)
                if log.isEnabledFor(logging.INFO):
                    log.info("%s", exchange.log_line(time.perf_counter() - started))

        return serve

    async def _inspect(self, request: web.Request) -> web.StreamResponse:
        """The read-only endpoints (:mod:`._inspect`): not logged, not counted."""
        if self._inspector is None:
            return _response(_unknown(request))
        tail = request.match_info.get("tail", "")
        if tail.strip("/") == "outage":
            reply, switch = self.outage.answer(request.method, request.query)
            response = _response(reply)
            if switch is not None:  # answered first: refusing closes this connection too
                await response.prepare(request)
                await response.write_eof()
                await self.outage.set(switch[0], seconds=switch[1])
            return response
        return _response(self._inspector.answer(request.method, tail, request.query))

    # --- outages (:mod:`._outage`) -------------------------------------------------------

    async def _during_outage(self, request: web.Request, exchange: Exchange) -> web.StreamResponse:
        """A request the outage meets: answered 503, held until it ends, or dropped."""
        self._provider.attribute(exchange, request.headers.get("Authorization", ""))
        outage = self.outage
        exchange.fault = f"outage:{outage.mode}"
        if outage.mode == "503":
            reply = outage.unavailable()
            exchange.status = reply.status
            return _response(reply)
        if outage.mode == "hang":
            outage.hits += 1
            changed = asyncio.ensure_future(outage.changed())
            try:
                await _hang(request, self._stopping, until=changed)
            finally:
                changed.cancel()
        else:  # refuse: a connection opened just before the switch
            _abort(request, rst=True)
        exchange.dropped = "outage"
        return web.Response(status=204)  # never reaches the client: the connection is gone

    async def _refuse(self) -> None:
        """Stop listening, keep the port bound (refused, not free), drop open connections."""
        runner = self._runner
        if runner is None:
            raise RuntimeError("the sandbox is not running")
        addresses = list(runner.addresses)
        for site in self._sites:
            await site.stop()
        self._sites = []
        if runner.server is not None:
            for handler in runner.server.connections:
                if handler.transport is not None:
                    handler.transport.close()  # written answers are flushed first
            # Return once they are closed, and a client in this event loop has seen it
            # (one more turn of the loop): its next request opens a connection, refused.
            for _ in range(1000):
                if not runner.server.connections:
                    break
                await asyncio.sleep(0)
            await asyncio.sleep(0)
        for address in addresses:
            family = socket.AF_INET6 if len(address) == 4 else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            self._reserved.append(sock)

    async def _accept(self) -> None:
        """Listen again on the reserved sockets."""
        runner = self._runner
        if runner is None:
            raise RuntimeError("the sandbox is not running")
        reserved, self._reserved = self._reserved, []
        for sock in reserved:
            site = web.SockSite(runner, sock, ssl_context=self._tls)
            await site.start()
            self._sites.append(site)

    async def _before(
        self, request: web.Request, fault: Fault | None, exchange: Exchange
    ) -> web.StreamResponse | None:
        """Apply a before-commit fault; a response means: stop here and send it."""
        if fault is None:
            return None
        exchange.fault = fault.name
        if not fault.before_commit:
            return None
        if fault.kind == "latency":
            await _sleep_unless(fault.seconds, self._stopping)
            return None
        if fault.kind == "status":
            reply = fault_reply(fault)
            exchange.status = reply.status
            return _response(reply)
        if fault.kind == "reset":
            _abort(request, rst=True)
            exchange.dropped = "reset"
        else:  # hang
            await _hang(request, self._stopping)
        return web.Response(status=204)  # never reaches the client: the connection is gone

    async def _send(
        self, request: web.Request, reply: Reply, fault: Fault | None, exchange: Exchange
    ) -> web.StreamResponse:
        response, exchange.status = await _write_reply(request, reply, fault, self._stopping)
        return response

    async def _not_found(
        self, request: web.Request, _environment: str, exchange: Exchange
    ) -> web.StreamResponse:
        return await self._send(request, _unknown(request), None, exchange)

    async def _token(
        self, request: web.Request, environment: str, exchange: Exchange
    ) -> web.StreamResponse:
        form = None
        if request.method == "POST":  # the first value of each text field, as aiohttp's get()
            fields = await _read_form(request, self._max_body_size)
            form = {k: v for k, v in reversed(fields) if isinstance(v, str)}
        # A refresh grant takes a scripted refresh fault first, then any token fault.
        self._provider.name_issuer(exchange, form)  # for the issuer's own scripted faults
        fault, issuer = None, exchange.issuer_key
        if form is not None and form.get("grant_type") == "refresh_token":
            _, fault = self._faults.next("refresh", issuer)
        if fault is None:
            _, fault = self._faults.next("tokens", issuer)
        await self._token_gate.enter(self._stopping)  # a test may hold it here: none granted
        early = await self._before(request, fault, exchange)
        if early is not None:
            return early
        grant = self._provider.grant
        reply = METHOD_NOT_ALLOWED if form is None else grant(form, environment, exchange)
        return await self._send(request, reply, fault, exchange)

    async def _document(
        self, request: web.Request, environment: str, exchange: Exchange, *, encrypted: bool
    ) -> web.StreamResponse:
        """One submission: throttle, capacity, scripted fault, checks, random fault, commit."""
        throttled = self._throttled(request, exchange)
        if throttled is not None:
            return await self._send(request, throttled, None, exchange)
        if self._max_in_flight is not None and self._documents_in_flight >= self._max_in_flight:
            # Over capacity: refused before anything is read or processed.
            overload = fault_reply(Fault.status(429, retry_after=0))
            return await self._send(request, overload, None, exchange)
        self._documents_in_flight += 1
        try:
            if exchange.issuer_key is not None:  # a test may hold this issuer's requests
                await self._gate.enter(self._stopping, exchange.issuer_key)
            return await self._process_document(request, environment, exchange, encrypted=encrypted)
        finally:
            self._documents_in_flight -= 1

    async def _process_document(
        self, request: web.Request, environment: str, exchange: Exchange, *, encrypted: bool
    ) -> web.StreamResponse:
        if latency := self._faults.base_latency():  # the service's --latency
            await _sleep_unless(latency, self._stopping)
        scripted, fault = self._faults.take(self._faults.documents)
        body = await _read_body(request, self._max_body_size)
        await self._gate.enter(self._stopping)  # received: a test may hold it here
        early = await self._before(request, fault, exchange)
        if early is not None:
            return early
        admitted = await self._admit(request, environment, body, exchange, encrypted=encrypted)
        if isinstance(admitted, Reply):
            return await self._send(request, admitted, fault, exchange)
        if not scripted:  # its issuer's scripted fault, else a random one
            scripted, fault = self._faults.own("documents", exchange.issuer_key)
            if not scripted:
                fault = self._faults.random_fault(admitted.key[2], exchange.attempt or 1)
            early = await self._before(request, fault, exchange)
            if early is not None:
                return early
        reply = self._provider.commit(admitted, dt.datetime.now(dt.timezone.utc))
        return await self._send(request, reply, fault, exchange)

    async def _admit(
        self,
        request: web.Request,
        environment: str,
        body: bytes,
        exchange: Exchange,
        *,
        encrypted: bool,
    ) -> Submission | Reply:
        """Authenticate, check the media type, decrypt, then let the provider check."""
        if request.method != "POST":
            return METHOD_NOT_ALLOWED
        refusal = self._authenticate(request, environment, exchange)
        if refusal is not None:
            return refusal
        media = request.content_type
        if encrypted and media not in _PGP_TYPES:
            return error_reply(415, "Content-Type must be application/pgp-encrypted")
        if not encrypted and media not in _JSON_TYPES and not media.endswith("+json"):
            return error_reply(415, "Content-Type must be application/json")
        if encrypted:
            # The decrypted document is bounded as the body is: a larger one is a 413.
            decrypt = functools.partial(self._decryptor.decrypt, max_size=self._max_body_size)
            try:
                body = await asyncio.get_running_loop().run_in_executor(
                    self._executor, decrypt, body
                )
            except OpenPGPError as exc:
                return undecryptable(exc)
        return self._provider.admit(exchange, body, encrypted=encrypted)

    async def _operation(
        self,
        request: web.Request,
        environment: str,
        exchange: Exchange,
        *,
        name: str,
        public: bool = False,
    ) -> web.StreamResponse:
        """Another operation (:mod:`._operations`): scripted fault, checks, state, reply.

        A ``public`` one (a document's public url) takes no credentials.
        """
        operations = self._operations
        assert operations is not None  # noqa: S101  (routed only with operations)
        throttled = self._throttled(request, exchange)
        if throttled is not None:
            return await self._send(request, throttled, None, exchange)
        _, fault = self._faults.next("operations", exchange.issuer_key)
        early = await self._before(request, fault, exchange)
        if early is not None:
            return early
        method = operations.method_of(name)
        reply: Reply | None = None
        if request.method != method:
            reply = error_reply(405, f"use {method}", headers=(("Allow", method),))
        elif not public:
            reply = self._authenticate(request, environment, exchange)
        if reply is None:
            call = await _operation_call(request, self._max_body_size)
            reply = operations.handle(name, exchange, call)
        return await self._send(request, reply, fault, exchange)

    def _throttled(self, request: web.Request, exchange: Exchange) -> Reply | None:
        """Note the issuer of a bearer request; the 429 of a throttled one, or ``None``.

        Before anything is read or processed, as a per-account rate limiter in front of
        the service.
        """
        self._provider.attribute(exchange, request.headers.get("Authorization", ""))
        return self._provider.throttled(exchange)

    def _authenticate(
        self, request: web.Request, environment: str, exchange: Exchange
    ) -> Reply | None:
        headers = request.headers
        authorization = _header(headers.get("Authorization", ""))
        api_key = _header(headers.get("APIKey", ""))
        return self._provider.authenticate(environment, authorization, api_key, exchange)


class _ProtocolLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server log, where a request that is not valid HTTP is one line.

    aiohttp answers such a request 400 itself (bad header bytes, a broken request line)
    and logs it with a traceback: hostile input, not a failure of the sandbox, so it
    gets one line like the request log's. Anything else (a handler that failed) keeps
    its traceback.
    """

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        error = kwargs.get("exc_info")
        if isinstance(error, http_exceptions.HttpProcessingError):
            first = str(error.message).strip().splitlines()[0] if error.message else ""
            remote, status = (args[0] if args else "?"), error.code or 400
            line = "malformed HTTP request from %s -> %d: %s"
            self.logger.info(line, remote, status, first[:200])
            return
        super().log(level, msg, *args, **kwargs)


class _Unreadable(Exception):  # noqa: N818  (a reply, not an error of the sandbox)
    """A request whose body cannot be read: what to answer (see :func:`_read_body`)."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status
        self.why = why

    def reply(self, route: Route) -> Reply:
        """The 4xx, in the token endpoint's OAuth shape or the API's."""
        if route == "token" and self.status == 400:
            return oauth_error("invalid_request", self.why)
        return error_reply(self.status, self.why)


def _too_large(size: int | None, limit: int) -> _Unreadable:
    actual = f" of {size} bytes" if size is not None else ""
    return _Unreadable(413, f"the request body{actual} is too large: the limit is {limit} bytes")


async def _read_body(request: web.Request, limit: int) -> bytes:
    """The body, refused with a 413 before it is read when its declared length is too large.

    A body sent without a length is read up to the limit (aiohttp's ``client_max_size``).
    """
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(request.content_length, limit)
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise _too_large(None, limit) from None


async def _read_form(request: web.Request, limit: int) -> list[tuple[str, str | UploadedFile]]:
    """The fields of a form (URL-encoded or multipart), in order; files read whole.

    Text that is not UTF-8, a broken multipart body, a part with bad headers: the
    client's mistake or a hostile one, a 400 saying so.
    """
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(request.content_length, limit)
    try:
        if request.content_type == "multipart/form-data":
            return await _multipart(request, limit)
        form = await request.post()
    except web.HTTPRequestEntityTooLarge:
        raise _too_large(None, limit) from None
    except UnicodeDecodeError:
        raise _Unreadable(400, "the form is not UTF-8 text") from None
    except LookupError:
        raise _Unreadable(400, "the form names a charset that does not exist") from None
    except (ValueError, http_exceptions.HttpProcessingError, Warning):
        # Warning: aiohttp warns of a bad part header (an exception where warnings are
        # errors, as in a test suite) and reads on.
        raise _Unreadable(400, "the form cannot be read: a malformed body") from None
    return [(name, value) for name, value in form.items() if isinstance(value, str)]


async def _multipart(request: web.Request, limit: int) -> list[tuple[str, str | UploadedFile]]:
    """A ``multipart/form-data`` body's parts, in memory and within ``limit`` bytes.

    Read here rather than by aiohttp's ``post()``, which spools file parts to temporary
    files that a body broken further on leaves open, and bounds the bytes received but
    not what a compressed part inflates to.
    """
    fields: list[tuple[str, str | UploadedFile]] = []
    reader = await request.multipart()
    room = limit
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader) or part.name is None:
            raise _Unreadable(400, "the form cannot be read: a part without a name")
        data = bytearray()
        while chunk := await part.read_chunk():
            async for decoded in part.decode_iter(chunk):
                room -= len(decoded)
                if room < 0:
                    raise _too_large(None, limit)
                data += decoded
        # Part headers: bytes that are not UTF-8 arrive escaped.
        name = _header(part.name)
        if part.filename:  # as aiohttp reads a form: a file part has a file name
            media = _header(part.headers.get("Content-Type", "application/octet-stream"))
            fields.append((name, UploadedFile(name, _header(part.filename), media, bytes(data))))
        else:
            fields.append((name, bytes(data).decode(part.get_charset("utf-8"))))
    return fields


def _header(value: str) -> str:
    """A header as text; bytes that were not UTF-8 become U+FFFD (a value that never matches)."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


async def _operation_call(request: web.Request, limit: int) -> OperationCall:
    """What an operation request carries: its body, or its form's fields and files."""
    fields: dict[str, str] = {}
    files: list[UploadedFile] = []
    body = b""
    if request.content_type == "multipart/form-data":
        for name, value in await _read_form(request, limit):
            if isinstance(value, UploadedFile):
                files.append(value)
            else:
                fields[name] = value
    else:
        body = await _read_body(request, limit)
    return OperationCall(
        method=request.method,
        query=dict(request.query),
        path_params={k: v for k, v in request.match_info.items() if k != "env"},
        content_type=request.content_type,
        body=body,
        fields=fields,
        files=tuple(files),
    )


def _unknown(request: web.Request) -> Reply:
    return error_reply(404, f"no such operation: {request.method} {request.path}"[:300])


def _response(reply: Reply) -> web.Response:
    """``reply`` as a plain aiohttp response."""
    response = web.Response(status=reply.status, body=reply.body, content_type=reply.content_type)
    if reply.content_type == "application/json":
        response.charset = "utf-8"
    for name, value in reply.headers:
        response.headers[name] = value
    return response


def _abort(request: web.BaseRequest, *, rst: bool = False) -> None:
    """Close the client's connection at once, discarding anything unsent.

    With ``rst`` the socket lingers zero seconds, so the peer sees a TCP reset
    ("connection reset by peer") rather than an orderly close.
    """
    transport = request.transport
    if transport is None or transport.is_closing():
        return
    if rst:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _connection_gone(request: web.BaseRequest) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


async def _sleep_unless(seconds: float | None, stop: asyncio.Event) -> bool:
    """Sleep ``seconds`` (``None``: forever) or until ``stop`` is set; True if stopped."""
    if stop.is_set():
        return True
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except asyncio.TimeoutError:
        return False
    return True


async def _hang(
    request: web.BaseRequest, stop: asyncio.Event, *, until: asyncio.Future[None] | None = None
) -> None:
    """Hold the request until the client goes away (or ``stop``, or ``until``), then drop it.

    The handler is not cancelled when the client leaves (aiohttp's default): poll.
    """
    while not _connection_gone(request) and (until is None or not until.done()):
        if await _sleep_unless(0.05, stop):
            break
    _abort(request)


async def _write_reply(
    request: web.BaseRequest, reply: Reply, fault: Fault | None, stop: asyncio.Event
) -> tuple[web.StreamResponse, int | None]:
    """Send ``reply`` as ``fault`` (an after-commit fault, or ``None``) dictates.

    Returns the response for aiohttp and the status line actually written (``None`` when
    the connection was dropped without one). Once the connection is closed, aiohttp's
    attempt to finish the response fails with a ``ConnectionError`` it handles quietly.
    """
    kind = fault.kind if fault is not None and not fault.before_commit else None
    if kind is None and reply.stream:
        response = web.StreamResponse(status=reply.status, headers=dict(reply.headers))
        response.content_type = reply.content_type
        response.content_length = len(reply.body)
        with contextlib.suppress(ConnectionError):
            await response.prepare(request)
            for start in range(0, len(reply.body), _CHUNK):
                await response.write(reply.body[start : start + _CHUNK])
        return response, reply.status
    if kind is None:
        return _response(reply), reply.status
    if kind == "commit_then_drop":
        _abort(request)
        return web.Response(status=reply.status), None
    instead = mangled(reply, kind, request.headers)
    if instead is not None:  # another whole reply
        return _response(instead), instead.status
    assert fault is not None  # noqa: S101  (kind is not None only with a fault)
    response = web.StreamResponse(status=reply.status)
    response.content_type = reply.content_type
    with contextlib.suppress(ConnectionError):
        if kind == "truncated":
            await _truncated(request, response, reply.body)
        elif kind == "trickle":
            await _trickle(request, response, reply.body, fault, stop)
        else:
            await _oversized(request, response, reply.body, fault, stop)
    return response, reply.status


async def _truncated(request: web.BaseRequest, response: web.StreamResponse, body: bytes) -> None:
    response.content_length = len(body) + 64
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    # close(), not abort(): the half body already written must reach the client first.
    transport = request.transport
    if transport is not None:
        transport.close()


async def _trickle(
    request: web.BaseRequest,
    response: web.StreamResponse,
    body: bytes,
    fault: Fault,
    stop: asyncio.Event,
) -> None:
    response.content_length = len(body)
    await response.prepare(request)
    step = max(1, fault.size)
    for start in range(0, len(body), step):
        if _connection_gone(request):
            return
        await response.write(body[start : start + step])
        if start + step < len(body) and await _sleep_unless(fault.seconds, stop):
            _abort(request)
            return


async def _oversized(
    request: web.BaseRequest,
    response: web.StreamResponse,
    body: bytes,
    fault: Fault,
    stop: asyncio.Event,
) -> None:
    # The record, with a padding member in front: valid JSON of exactly ``size`` bytes
    # when the size allows, so only the size is wrong with it.
    head = b'{"padding":"'
    tail = b'",' + body[1:] if body.startswith(b"{") and len(body) > 2 else b'"}'
    padding = max(0, fault.size - len(head) - len(tail))
    if fault.chunked:
        response.enable_chunked_encoding()
    else:
        response.content_length = len(head) + padding + len(tail)
    await response.prepare(request)
    await response.write(head)
    filler = b"x" * _CHUNK
    while padding > 0:
        if _connection_gone(request) or stop.is_set():
            _abort(request)
            return
        n = min(padding, _CHUNK)
        await response.write(filler[:n])
        padding -= n
    await response.write(tail)
