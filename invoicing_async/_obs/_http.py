"""The metrics port's HTTP: one bounded request per connection, on a loop of its own.

The port answers whoever can reach it (the Kubernetes manifest binds it on every
interface), so what a connection may cost is bounded here, whatever the client does:

* **its own thread and event loop** (:class:`HttpPort`): the worker's loop never
  accepts, reads or times out a connection of this port, and no connection has a
  thread: a flood costs the worker none of its threads, and its loop only the probes'
  one call at a time (:mod:`._metrics_server`);
* **a hard cap on connections** (``max_connections``): a connection over the cap
  closes at once the one that has waited longest without sending a whole request
  (slots held by idle connections are given to newcomers: a probe gets in while the
  port is flooded with half-open connections); with every slot answering a request,
  the newcomer is closed at once, unanswered: nothing waits in a queue. Connections
  are accepted a few at a time (:data:`ACCEPTED_AT_ONCE`) from the kernel's listen
  queue (:data:`BACKLOG`, which costs no descriptor), so the port holds at most
  ``max_connections`` descriptors, and ``2 * ACCEPTED_AT_ONCE`` more for an instant;
* **a deadline for the request's head** (``request_timeout``, counted from the
  connection's start, however slowly bytes trickle in: slowloris): past it, ``408``
  and the connection closed; the same deadline again for the client to take the
  answer, then it is cut off;
* **a cap on the head's size** (``max_head``, the request line and every header
  together): beyond it ``431``, and nothing more is kept;
* **one request per connection**, answered ``Connection: close``, no keep-alive (a
  scrape every few seconds, a probe every few: a connection each is cheap, and an idle
  one kept open is one an attacker can hold), no request body read;
  anything that is not an HTTP/1.0 or HTTP/1.1 request line (an HTTP/0.9 ``GET /``, a
  TLS hello, HTTP/2's preface) is refused ``400`` as soon as its first line ends.

An answer is written, then the connection half-closed and what the client still sends
discarded until it closes (or the deadline): closing with unread bytes would reset the
connection, and the client could lose the answer (``431`` above all).

Why not aiohttp's server (a dependency already): it has no cap on connections, no
deadline of its own for a request's head (a silent connection waits for the keep-alive
timer, an hour by default, and not at all in older releases), caps header lines one by
one (128 of 8 KiB: a megabyte per connection), and runs a task for each connection's
whole life; the three bounds would need hooks into its private request handler. This port needs none
of what aiohttp adds (routing, keep-alive, bodies, chunked transfer, websockets): an
:class:`asyncio.Protocol` costs a half-open connection one descriptor, one small object
and one timer once its transport is made, and a task runs only to answer a whole
request.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import math
import re
import socket
import struct
import threading
from typing import TYPE_CHECKING, Any, NamedTuple, cast

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = [
    "ACCEPTED_AT_ONCE",
    "BACKLOG",
    "Answer",
    "HttpPort",
    "Request",
    "check_limits",
    "plain",
]

#: Connections the kernel keeps waiting to be accepted (they cost no descriptor).
BACKLOG = 128
#: Connections accepted at most each time the listening socket is ready.
ACCEPTED_AT_ONCE = 16
#: The smallest head cap taken: a request line and a few headers.
_SMALLEST_HEAD = 256
#: A request line of HTTP/1.0 or 1.1: a method (a token), a target, the version.
_REQUEST_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+) ([\x21-\x7e]+) HTTP/1\.[01]\r?\n")
_HEAD_END = re.compile(rb"\r?\n\r?\n")
#: What ``accept`` fails with while the process is short of descriptors or memory.
_SHORT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_REASONS = {
    200: "OK",
    400: "Bad Request",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
#: ``SO_LINGER`` on, zero seconds: a connection closed over the cap is reset, freeing
#: its kernel state at once.
_RESET = struct.pack("ii", 1, 0)


class Request(NamedTuple):
    """A request's head: its method, its target as sent, its headers (lower-case names)."""

    method: str
    target: str
    headers: dict[str, str]


class Answer(NamedTuple):
    """What a request is answered: a status, headers, a body (``Content-Length`` added)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


def plain(status: int, text: str) -> Answer:
    """A one-line plain-text answer."""
    return Answer(status, [("Content-Type", "text/plain; charset=utf-8")], f"{text}\n".encode())


def check_limits(max_connections: int, request_timeout: float, max_head: int) -> None:
    """Refuse limits that cannot work, naming the keyword.

    :raises ValueError: a cap of no connection, a deadline that is not a positive
        number of seconds, a head cap below :data:`_SMALLEST_HEAD` bytes.
    """
    if max_connections < 1:
        raise ValueError(f"max_connections must be 1 or more, not {max_connections}")
    if not (request_timeout > 0 and math.isfinite(request_timeout)):
        raise ValueError(
            f"request_timeout must be a positive number of seconds, not {request_timeout}"
        )
    if max_head < _SMALLEST_HEAD:
        raise ValueError(f"max_head must be {_SMALLEST_HEAD} bytes or more, not {max_head}")


class HttpPort:
    """Answers ``respond`` on ``listening``, from a thread and an event loop of its own.

    :param respond: a coroutine function run on the port's loop for each whole request.
    """

    def __init__(
        self,
        listening: socket.socket,
        respond: Callable[[Request], Awaitable[Answer]],
        *,
        max_connections: int,
        request_timeout: float,
        max_head: int,
    ) -> None:
        self.socket = listening
        self.respond = respond
        self.max_connections = max_connections
        self.timeout = request_timeout
        self.max_head = max_head
        # A selector loop on every platform: it watches the listening socket itself.
        self.loop = asyncio.SelectorEventLoop()
        #: Connections that may be closed to make room, oldest first (a dict keeps order).
        self.idle: dict[_Connection, None] = {}
        #: Every connection held: accepted (its descriptor open), not yet lost.
        self._connections: set[_Connection] = set()
        self._thread = threading.Thread(target=self._serve, name="metrics", daemon=True)
        self._started = threading.Event()

    def start(self) -> None:
        """Serve from now on (returns once it does)."""
        self.socket.settimeout(0)  # non-blocking
        self._thread.start()
        self._started.wait()

    def close(self) -> None:
        """Stop serving: no new connection, the open ones cut off, the thread ended."""
        with contextlib.suppress(RuntimeError):  # the loop ended already
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()

    def _serve(self) -> None:
        loop = self.loop
        loop.add_reader(self.socket.fileno(), self._accept)
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.remove_reader(self.socket.fileno())
            self.socket.close()
            for connection in list(self._connections):
                connection.cut()
            loop.run_until_complete(_cancelled(asyncio.all_tasks(loop)))
            loop.close()

    def _accept(self) -> None:
        for _ in range(ACCEPTED_AT_ONCE):
            try:
                sock, _ = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _SHORT_OF_RESOURCES:  # accept again in a while, as asyncio does
                    self.loop.remove_reader(self.socket.fileno())
                    self.loop.call_later(
                        1.0, self.loop.add_reader, self.socket.fileno(), self._accept
                    )
                    return
                continue  # that connection is gone already
            if len(self._connections) >= self.max_connections:
                if not self.idle:
                    _reset(sock)
                    continue
                next(iter(self.idle)).cut()
            sock.settimeout(0)
            connection = _Connection(self, sock)
            self._connections.add(connection)
            self.idle[connection] = None
            self.loop.create_task(self._connect(connection, sock))

    async def _connect(self, connection: _Connection, sock: socket.socket) -> None:
        try:
            await self.loop.connect_accepted_socket(lambda: connection, sock)
        except BaseException as exc:  # gone before its transport was made, or stopping
            self.lost(connection)
            sock.close()
            if not isinstance(exc, OSError):
                raise

    def lost(self, connection: _Connection) -> None:
        """``connection`` holds no descriptor any more (or is about to)."""
        self._connections.discard(connection)
        self.idle.pop(connection, None)


async def _cancelled(tasks: set[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until they end (and the connections cut are lost)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class _Connection(asyncio.Protocol):
    """One connection: its head read within the deadline and the cap, then one answer."""

    def __init__(self, port: HttpPort, sock: socket.socket) -> None:
        self._port = port
        self._socket = sock
        self._gone = False  # cut, or lost
        self._head = bytearray()
        self._line_read = False
        self._reading = True  # False once the head is whole or refused: bytes discarded
        self._ended = False  # the client sent all it will send
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._answering: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport = cast("asyncio.Transport", transport)
        if self._gone:  # cut before it was made
            transport.abort()
            return
        self._timer = self._port.loop.call_later(self._port.timeout, self._late)

    def data_received(self, data: bytes) -> None:
        if not self._reading or self._gone:
            return
        searched = max(0, len(self._head) - 3)
        self._head += data[: self._port.max_head + 4 - len(self._head)]
        if not self._line_read:
            line_end = self._head.find(b"\n")
            if line_end >= 0:
                if not _REQUEST_LINE.fullmatch(self._head, 0, line_end + 1):
                    self._send(plain(400, "HTTP/1.0 and HTTP/1.1 requests only"))
                    return
                self._line_read = True
        end = _HEAD_END.search(self._head, searched)
        if end is None or end.end() > self._port.max_head:
            if end is not None or len(self._head) > self._port.max_head:
                self._send(plain(431, f"a request head of {self._port.max_head} bytes at most"))
            return
        request = _request(bytes(self._head[: end.start()]))
        if request is None:
            self._send(plain(400, "a header line without a name and a colon"))
            return
        self._reading = False
        self._port.idle.pop(self, None)
        if self._timer is not None:
            self._timer.cancel()
        self._answering = self._port.loop.create_task(self._answer(request))

    def eof_received(self) -> bool:
        # The client sent all it will: keep the connection only to write the answer.
        self._ended = True
        return self._answering is not None and not self._answering.done()

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002  (asyncio's)
        self._gone = True
        self._port.lost(self)
        if self._timer is not None:
            self._timer.cancel()
        if self._answering is not None:
            self._answering.cancel()

    def cut(self) -> None:
        """Close at once, unanswered (the port is full, or stops)."""
        self._gone = True
        self._port.lost(self)
        with contextlib.suppress(OSError):
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
        if self._transport is not None:  # else aborted as soon as it is made
            self._transport.abort()

    async def _answer(self, request: Request) -> None:
        try:
            answer = await self._port.respond(request)
        except Exception:  # noqa: BLE001  (a failed answer is an answer: 500)
            answer = plain(500, "the answer failed")
        self._send(answer, body=request.method != "HEAD")

    def _send(self, answer: Answer, *, body: bool = True) -> None:
        """Write ``answer``, half-close, discard what comes until the client closes."""
        transport = self._transport
        self._reading = False
        if self._gone or transport is None:
            return
        head = [f"HTTP/1.1 {answer.status} {_REASONS.get(answer.status, 'Unknown')}"]
        head += [f"{name}: {value}" for name, value in answer.headers]
        head += [f"Content-Length: {len(answer.body)}", "Connection: close", "", ""]
        transport.write("\r\n".join(head).encode("latin-1") + (answer.body if body else b""))
        # Taken, or cut off after the deadline; meanwhile it may make room for another.
        self._port.idle[self] = None
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._port.loop.call_later(self._port.timeout, transport.abort)
        if self._ended or not transport.can_write_eof():
            transport.close()
        else:
            transport.write_eof()

    def _late(self) -> None:
        if self._reading:
            self._send(plain(408, "the request did not arrive in time"))


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with a reset: its descriptor and its kernel state freed at once."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    sock.close()


def _request(head: bytes) -> Request | None:
    """The request of a whole head (its request line checked).

    ``None`` if a header line is malformed: no name and colon, or folded (RFC 9112
    §5.2 lets a server refuse an obsolete line folding).
    """
    line, *fields = (text.removesuffix("\r") for text in head.decode("latin-1").split("\n"))
    method, target, _ = line.split(" ")
    headers = {}
    for field in fields:
        name, colon, value = field.partition(":")
        if not colon or not name or name != name.strip():
            return None
        headers[name.lower()] = value.strip()
    return Request(method, target, headers)
