"""Injected failures: what they are, which request gets one, and how each is written.

A :class:`Fault` is a frozen description. Which request receives one is decided by a
:class:`FaultPlan`: scripted faults are taken in arrival order; random faults are decided
from ``(seed, document identity, attempt number)`` alone, so a concurrent client sees the
same faults per document however its requests interleave, and a retrying client always
gets through after ``max_per_document`` faulted attempts.

Faults act at one of two points, mirroring where real failures happen:

* *before the commit* (``latency``, ``status``, ``reset``, ``hang``): the provider never
  processes the request (except ``latency``, which only delays it);
* *after the commit* (everything else): the document is committed (or recognised as a
  duplicate) and then the *response* goes wrong, the case where a client cannot know
  whether it succeeded and must re-send to find out.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import socket
import struct
from typing import TYPE_CHECKING, Literal

import attrs
from aiohttp import web

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["Fault", "FaultPlan", "Reply", "abort", "sleep_unless", "write_reply"]

FaultKind = Literal[
    "latency",
    "status",
    "reset",
    "hang",
    "commit_then_drop",
    "commit_then_500",
    "truncated",
    "non_json",
    "wrong_content_type",
    "trickle",
    "oversized",
]

#: Kinds applied before the request is processed; the others mangle the response.
BEFORE_COMMIT: frozenset[str] = frozenset({"latency", "status", "reset", "hang"})

_STATUS_TEXT = {
    408: ("RequestTimeout", "the tax authority's service did not respond in time"),
    429: ("TooManyRequests", "too many requests: slow down"),
    500: ("InternalServerError", "internal server error"),
    502: ("BadGateway", "bad gateway"),
    503: ("ServiceUnavailable", "the service is temporarily unavailable"),
    504: ("GatewayTimeout", "gateway timeout"),
}

_HTML = (
    b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>Bad Gateway</h1><p>The upstream server is unavailable.</p></body></html>"
)
_CHUNK = 64 * 1024


@attrs.frozen(kw_only=True)
class Fault:
    """A failure injected into one request. Build it with the class methods.

    .. versionadded:: 0.1.0
    """

    kind: FaultKind
    #: Seconds: the delay of ``latency``, the interval between chunks of ``trickle``.
    seconds: float = 0.0
    #: The HTTP status of a ``status`` fault.
    code: int | None = None
    #: ``Retry-After`` sent with a ``status`` fault (delta seconds or an HTTP date).
    retry_after: int | str | None = None
    #: Body size of ``oversized``; chunk size of ``trickle``.
    size: int = 0
    #: ``oversized``: chunked transfer encoding instead of a ``Content-Length``.
    chunked: bool = False

    @classmethod
    def latency(cls, seconds: float) -> Fault:
        """Wait ``seconds`` before processing the request normally."""
        if seconds < 0:
            raise ValueError("latency must not be negative")
        return cls(kind="latency", seconds=seconds)

    @classmethod
    def status(cls, status: int, *, retry_after: int | str | None = None) -> Fault:
        """Answer ``status`` (408, 429, 5xx …) without processing: nothing is committed."""
        if not 400 <= status < 600:
            raise ValueError("a status fault needs a 4xx or 5xx status")
        return cls(kind="status", code=status, retry_after=retry_after)

    @classmethod
    def reset(cls) -> Fault:
        """Reset the TCP connection before processing: nothing is committed."""
        return cls(kind="reset")

    @classmethod
    def hang(cls) -> Fault:
        """Never answer (until the client gives up or the sandbox stops); nothing committed."""
        return cls(kind="hang")

    @classmethod
    def commit_then_drop(cls) -> Fault:
        """Commit, then close the connection without a response (a lost answer)."""
        return cls(kind="commit_then_drop")

    @classmethod
    def commit_then_500(cls) -> Fault:
        """Commit, then answer 500: the error lies, the document is held."""
        return cls(kind="commit_then_500")

    @classmethod
    def truncated(cls) -> Fault:
        """Commit, then send part of the body under a longer ``Content-Length`` and close."""
        return cls(kind="truncated")

    @classmethod
    def non_json(cls) -> Fault:
        """Commit, then answer with the right status but an HTML body (a proxy's page)."""
        return cls(kind="non_json")

    @classmethod
    def wrong_content_type(cls) -> Fault:
        """Commit, then send the real record labelled ``Content-Type: text/html``."""
        return cls(kind="wrong_content_type")

    @classmethod
    def trickle(cls, seconds: float, *, chunk_size: int = 1) -> Fault:
        """Commit, then write the body ``chunk_size`` bytes at a time, ``seconds`` apart."""
        if seconds < 0 or chunk_size < 1:
            raise ValueError("trickle needs seconds >= 0 and chunk_size >= 1")
        return cls(kind="trickle", seconds=seconds, size=chunk_size)

    @classmethod
    def oversized(cls, size: int, *, chunked: bool = False) -> Fault:
        """Commit, then send a ``size``-byte body (``Content-Length``, or chunked)."""
        if size < 0:
            raise ValueError("size must not be negative")
        return cls(kind="oversized", size=size, chunked=chunked)

    @property
    def name(self) -> str:
        """A short label for the journal: ``status:503``, ``latency:0.2``, ``reset``."""
        if self.kind == "status":
            return f"status:{self.code}"
        if self.kind in ("latency", "trickle"):
            return f"{self.kind}:{self.seconds:g}"
        if self.kind == "oversized":
            return f"oversized:{self.size}{':chunked' if self.chunked else ''}"
        return self.kind

    @property
    def before_commit(self) -> bool:
        """Whether the fault acts before the request is processed."""
        return self.kind in BEFORE_COMMIT


#: Random faults drawn by default: every kind a retrying client must survive on its own
#: (``hang``, ``trickle`` and ``oversized`` need client timeouts or caps set for them).
DEFAULT_RANDOM_KINDS: tuple[Fault, ...] = (
    Fault.status(408),
    Fault.status(429, retry_after=0),
    Fault.status(500),
    Fault.status(503, retry_after=0),
    Fault.reset(),
    Fault.commit_then_drop(),
    Fault.commit_then_500(),
    Fault.truncated(),
    Fault.non_json(),
)


@attrs.frozen
class _RandomFaults:
    rate: float
    seed: int | str
    kinds: tuple[Fault, ...]
    max_per_document: int

    def decide(self, identity: str, attempt: int) -> Fault | None:
        if attempt > self.max_per_document or not self.kinds:
            return None
        # A fresh generator per (seed, identity, attempt): independent of arrival order.
        rng = random.Random(f"{self.seed}:{identity}:{attempt}")
        if rng.random() >= self.rate:
            return None
        return self.kinds[rng.randrange(len(self.kinds))]


class FaultPlan:
    """Scripted queues (documents, token requests) and the optional random faults."""

    def __init__(self) -> None:
        self.documents: collections.deque[Fault | None] = collections.deque()
        self.tokens: collections.deque[Fault | None] = collections.deque()
        self.random: _RandomFaults | None = None

    def clear(self) -> None:
        """Forget scripted and random faults."""
        self.documents.clear()
        self.tokens.clear()
        self.random = None

    def set_random(
        self, rate: float, seed: int | str, kinds: Iterable[Fault], max_per_document: int
    ) -> None:
        """Enable (``rate > 0``) or disable (``rate == 0``) seeded random faults."""
        if not 0.0 <= rate <= 1.0:
            raise ValueError("rate must be between 0 and 1")
        if max_per_document < 0:
            raise ValueError("max_per_document must not be negative")
        kinds = tuple(kinds)
        if not all(isinstance(kind, Fault) for kind in kinds):
            raise TypeError("kinds must be Fault instances")
        self.random = _RandomFaults(rate, seed, kinds, max_per_document) if rate > 0 else None

    @staticmethod
    def take(queue: collections.deque[Fault | None]) -> tuple[bool, Fault | None]:
        """The next scripted entry: ``(True, fault_or_None)``, or ``(False, None)`` if empty."""
        if queue:
            return True, queue.popleft()
        return False, None

    def random_fault(self, identity: str, attempt: int) -> Fault | None:
        """The random fault for this attempt of this document, if any."""
        return self.random.decide(identity, attempt) if self.random is not None else None


@attrs.frozen
class Reply:
    """A response the sandbox means to send, before any fault mangles it."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()

    def response(self, *, content_type: str | None = None) -> web.Response:
        """The plain aiohttp response."""
        response = web.Response(
            status=self.status, body=self.body, content_type=content_type or self.content_type
        )
        if self.content_type == "application/json" and content_type is None:
            response.charset = "utf-8"
        for name, value in self.headers:
            response.headers[name] = value
        return response


def status_reply(fault: Fault, body: bytes | None = None) -> Reply:
    """The answer of a ``status`` fault (or of ``commit_then_500``)."""
    status = fault.code or 500
    code, message = _STATUS_TEXT.get(status, ("Error", f"HTTP {status}"))
    if body is None:
        body = f'{{"success":false,"message":"{message}","statusCode":"{code}"}}'.encode("ascii")
    headers: tuple[tuple[str, str], ...] = ()
    if fault.retry_after is not None:
        headers = (("Retry-After", str(fault.retry_after)),)
    return Reply(status, body, headers=headers)


def abort(request: web.BaseRequest, *, rst: bool = False) -> None:
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


def connection_gone(request: web.BaseRequest) -> bool:
    """Whether the client's connection is closed (or closing)."""
    transport = request.transport
    return transport is None or transport.is_closing()


async def sleep_unless(seconds: float | None, stop: asyncio.Event) -> bool:
    """Sleep ``seconds`` (``None``: forever) or until ``stop`` is set; True if stopped."""
    if stop.is_set():
        return True
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except asyncio.TimeoutError:
        return False
    return True


async def hang(request: web.BaseRequest, stop: asyncio.Event) -> None:
    """Hold the request until the client goes away or the sandbox stops, then drop it.

    The handler is not cancelled when the client disconnects (aiohttp's default), so the
    connection is polled; a fraction of a second of delay in noticing costs nothing.
    """
    while not connection_gone(request):
        if await sleep_unless(0.05, stop):
            break
    abort(request)


async def write_reply(
    request: web.BaseRequest, reply: Reply, fault: Fault | None, stop: asyncio.Event
) -> tuple[web.StreamResponse, int | None]:
    """Send ``reply`` as ``fault`` (an after-commit fault, or ``None``) dictates.

    Returns the response for aiohttp and the status line actually written (``None`` when
    the connection was dropped without one). Once the connection is closed, aiohttp's
    attempt to finish the response fails with a ``ConnectionError`` it handles quietly.
    """
    kind = fault.kind if fault is not None and not fault.before_commit else None
    if kind is None:
        return reply.response(), reply.status
    if kind == "commit_then_drop":
        abort(request)
        return web.Response(status=reply.status), None
    if kind == "commit_then_500":
        return status_reply(Fault.status(500)).response(), 500
    if kind == "non_json":
        return web.Response(status=reply.status, body=_HTML, content_type="text/html"), (
            reply.status
        )
    if kind == "wrong_content_type":
        return reply.response(content_type="text/html"), reply.status
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
        if connection_gone(request):
            return
        await response.write(body[start : start + step])
        if start + step < len(body) and await sleep_unless(fault.seconds, stop):
            abort(request)
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
        if connection_gone(request) or stop.is_set():
            abort(request)
            return
        n = min(padding, _CHUNK)
        await response.write(filler[:n])
        padding -= n
    await response.write(tail)
