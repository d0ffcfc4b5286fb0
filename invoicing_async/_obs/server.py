"""A worker's HTTP port for its operators: Prometheus metrics and the health probes.

:func:`serve_metrics` serves, from a thread and an event loop of its own
(:mod:`._metrics_http`: a cap on connections, a deadline and a size cap for a request's
head, one request per connection, so that a flood of the port costs the worker none of
its descriptors, threads or sending):

* ``/metrics``: the process's metrics in Prometheus' text format (``prometheus_client``
  reading the OpenTelemetry SDK's meter provider, which :mod:`.metrics` configures);
* ``/healthz``: liveness, whether the worker can still do its job: ``200`` while the
  event loop it was started from answers (a call scheduled on the loop runs within
  :data:`LIVENESS_TIMEOUT`) and the process has descriptors to spare (at least
  :data:`DESCRIPTORS_SPARE` under its ``RLIMIT_NOFILE``: without them no connection to
  the provider or the database opens, "Too many open files"); ``503`` saying which
  fails otherwise: an orchestrator then restarts the process;
* ``/readyz``: readiness: ``200`` when alive and the ``ready`` check says nothing is
  missing (for the command's worker: the outbox's database answers, the provider key is
  loaded and valid, the worker is not stopping), else ``503`` with the reason on one
  line: a load balancer or Kubernetes sends it no work meanwhile.

Every other path is the metrics page, as ``prometheus_client``'s own server serves it.

Liveness is what a restart cures, and only that: a stuck loop, a process out of
descriptors (a leak). Sending that stalls because the provider or the database is slow
or down is not: a fleet restarted in a loop through a provider's outage sends nothing
sooner, so that is readiness' and the metrics' to say (``invoicing_outbox_pending``
that does not fall), never ``/healthz``'s. Both checks are cheap: one call scheduled
on the loop, one listing of the process's descriptors.

What the probes and the page cost the worker is bounded however many ask: one liveness
call and one readiness check at a time on the worker's loop (a probe that comes while
one runs shares its answer), and the page is made on a thread of its own (never on
the worker's loop, nor on the port's, whose deadlines and probes a slow collector would
hold up), one page at a time for each kind asked. Nothing secret is served: the reasons
are the checks' own words (an outbox is named without its password). This is the only
module that imports ``prometheus_client``.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import errno
import os
import queue
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import hooks as _hooks
from . import metrics as _metrics
from ._http import BACKLOG, Answer, HttpPort, Request, check_limits, plain

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Hashable

    Ready = Callable[[], Awaitable[str | None]]
    WsgiApp = Callable[[dict[str, Any], Callable[..., object]], Any]

__all__ = [
    "DESCRIPTORS_SPARE",
    "LIVENESS_TIMEOUT",
    "PAGE_TIMEOUT",
    "READINESS_TIMEOUT",
    "MetricsServer",
    "serve_metrics",
]

#: Seconds a metrics page is given again before it is made anew.
FRESH = 1.0
#: Pages kept at most (see :class:`_Shared`).
_KEPT = 8
#: Seconds the event loop may take to run a call from the liveness probe.
LIVENESS_TIMEOUT = 5.0
#: Seconds the readiness check may take (it looks at the database).
READINESS_TIMEOUT = 5.0
#: Seconds the metrics page may take to be made.
PAGE_TIMEOUT = 10.0
#: File descriptors that must be free under the process's limit for ``/healthz``.
DESCRIPTORS_SPARE = 32
_PROBES = frozenset({"/healthz", "/readyz"})
#: The headers the metrics page depends on (its kind, its compression).
_PAGE_HEADERS = ("accept", "accept-encoding")
#: Where the process's open descriptors are listed (Linux; macOS and the BSDs).
_LISTINGS = (Path("/proc/self/fd"), Path("/dev/fd"))


class MetricsServer:
    """A Prometheus endpoint and health probes (see :func:`serve_metrics`).

    .. versionchanged:: 0.5.0 ``/healthz`` and ``/readyz`` beside the metrics.
    """

    def __init__(self, port: HttpPort, pages: _Pages) -> None:
        self._port = port
        self._pages = pages

    def __repr__(self) -> str:
        return f"<MetricsServer {self.url}>"

    @property
    def port(self) -> int:
        """The port it listens on (the one chosen when ``0`` was asked)."""
        port: int = self._port.socket.getsockname()[1]
        return port

    @property
    def url(self) -> str:
        """Where Prometheus scrapes it."""
        return f"{self._base}/metrics"

    @property
    def healthz(self) -> str:
        """The liveness probe's URL.

        .. versionadded:: 0.5.0
        """
        return f"{self._base}/healthz"

    @property
    def readyz(self) -> str:
        """The readiness probe's URL.

        .. versionadded:: 0.5.0
        """
        return f"{self._base}/readyz"

    @property
    def _base(self) -> str:
        host = str(self._port.socket.getsockname()[0])
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        """Stop serving (the connections open are cut off)."""
        self._port.close()
        self._pages.close()


def serve_metrics(
    port: int,
    host: str = "127.0.0.1",
    *,
    ready: Callable[[], Awaitable[str | None]] | None = None,
    max_connections: int = 32,
    request_timeout: float = 5.0,
    max_head: int = 8192,
) -> MetricsServer:
    """Serve the process's metrics for Prometheus on ``host:port`` (``0``: any free port).

    Without a meter provider configured, one is set up (the OpenTelemetry SDK's, read by
    its Prometheus exporter); with one, the endpoint serves what its Prometheus reader
    (if any) registered.

    Beside ``/metrics``: ``/healthz`` answers ``200`` while the event loop this was
    called from answers (always, called outside one) and the process has file
    descriptors to spare, and ``/readyz`` answers ``200`` when, besides, ``ready`` (a
    coroutine function run on that loop) returns ``None``; ``503`` with the reason it
    returned (or the loop's silence, or the descriptors left) otherwise.

    The port serves from a thread and an event loop of its own, one request per
    connection, and bounds what anyone who reaches it may hold: at most
    ``max_connections`` at once (over it, the connection that has waited longest without
    sending a whole request is closed; if every one is being answered, the new one is),
    ``request_timeout`` seconds from a connection's start for its request's head to
    arrive (then ``408``), and as long again to take the answer; a head of ``max_head``
    bytes at most (then ``431``); anything but HTTP/1.0 and 1.1 is refused ``400``.

    :param ready: what readiness needs (a database reachable, a key loaded…): returns
        ``None`` when ready, else why not, in a few words (no secret).
    :param max_connections: connections held at once.
    :param request_timeout: seconds a client has to send its request's head.
    :param max_head: bytes a request's head (its line and headers) may have.
    :raises ImportError: the ``prometheus`` extra is not installed (the message says so).
    :raises ValueError: ``ready`` given outside a running event loop; a limit that
        cannot work (no connection, a deadline that is not a positive number of
        seconds, a head cap under 256 bytes).
    :raises OSError: ``host:port`` cannot be listened on.

    .. versionchanged:: 0.5.0 ``/healthz``, ``/readyz`` and ``ready``;
       ``max_connections``, ``request_timeout`` and ``max_head``, from a server of its
       own (before: a thread per connection, none of these bounds).
    """
    check_limits(max_connections, request_timeout, max_head)
    try:
        import prometheus_client  # noqa: PLC0415  (the prometheus extra)
    except ImportError as exc:
        raise ImportError(_metrics.PROMETHEUS_MISSING.format(exc.name)) from None
    _metrics.export_for_prometheus()
    _hooks.install()  # the library's calls are measured from now on
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
        if ready is not None:
            raise ValueError("serve_metrics(ready=...) needs a running event loop") from None
    listening = _listen(host, port)
    pages = _Pages(prometheus_client.make_wsgi_app())
    shared = _Shared()
    probes = _Probes(loop, ready, shared)

    async def respond(request: Request) -> Answer:
        path = request.target.partition("?")[0]
        if path not in _PROBES:
            asked = request.method, request.target, *map(request.headers.get, _PAGE_HEADERS)
            page: Answer = await shared(("page", *asked), lambda: pages.make(request), keep=True)
            return page
        if request.method not in ("GET", "HEAD"):
            return Answer(405, [("Allow", "GET, HEAD")], b"")
        problem = await (probes.alive() if path == "/healthz" else probes.ready())
        if problem is not None:
            return plain(503, problem)
        return plain(200, "ok" if path == "/healthz" else "ready")

    server = HttpPort(
        listening,
        respond,
        max_connections=max_connections,
        request_timeout=request_timeout,
        max_head=max_head,
    )
    server.start()
    return MetricsServer(server, pages)


class _Shared:
    """Slow answers made once at a time each, and kept a moment, on the port's loop.

    A flood of complete ``/metrics`` requests then costs the port a parse and a reply
    each, not a page made each: a page made less than :data:`FRESH` seconds ago is given
    again (Prometheus scrapes every few seconds). A probe's answer is shared while it is
    made, never kept: it says what is true now (a readiness that just failed). At most
    :data:`_KEPT` answers are kept (the page's key holds the request's headers: a
    flood varying them evicts its own answers, never grows the memory).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._running: dict[Hashable, asyncio.Future[Any]] = {}
        self._made: collections.OrderedDict[Hashable, tuple[float, Any]] = collections.OrderedDict()
        self._clock = clock

    async def __call__(
        self, key: Hashable, make: Callable[[], Awaitable[Any]], *, keep: bool = False
    ) -> Any:
        """What ``make`` answers, one ``make`` of each key at a time.

        Whoever asks while one runs shares its answer; one who stops waiting (a
        connection lost) stops it for no one. ``keep``: the answer is given again for
        :data:`FRESH` seconds.
        """
        made = self._made.get(key)
        if made is not None and self._clock() - made[0] < FRESH:
            return made[1]
        running = self._running.get(key)
        if running is None:
            running = self._running[key] = asyncio.ensure_future(make())
            running.add_done_callback(lambda done: self._settled(key, done, keep=keep))
        return await asyncio.shield(running)

    def _settled(self, key: Hashable, done: asyncio.Future[Any], *, keep: bool) -> None:
        self._running.pop(key, None)
        if keep and not done.cancelled() and done.exception() is None:
            self._made[key] = (self._clock(), done.result())
            self._made.move_to_end(key)
            while len(self._made) > _KEPT:
                self._made.popitem(last=False)


class _Probes:
    """The answers of ``/healthz`` and ``/readyz``, asked on the port's loop."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop | None, ready: Ready | None, shared: _Shared
    ) -> None:
        self._loop = loop
        self._ready = ready
        self._shared = shared

    async def alive(self) -> str | None:
        """``None`` when the process has descriptors to spare and the loop answers."""
        problem = _descriptors_short()
        if problem is not None:
            return problem
        answer: str | None = await self._shared("alive", self._loop_answers)
        return answer

    async def ready(self) -> str | None:
        """``None`` when alive and the readiness check passes, else why not."""
        problem = await self.alive()
        if problem is not None or self._ready is None:
            return problem
        answer: str | None = await self._shared("ready", self._check)
        return answer

    async def _loop_answers(self) -> str | None:
        if self._loop is None:
            return None
        here = asyncio.get_running_loop()
        answered: asyncio.Future[None] = here.create_future()

        def answer() -> None:  # on the worker's loop
            with contextlib.suppress(RuntimeError):  # the port closed meanwhile
                here.call_soon_threadsafe(_settle, answered)

        try:
            self._loop.call_soon_threadsafe(answer)
        except RuntimeError:
            return "the event loop is closed"
        try:
            await asyncio.wait_for(answered, LIVENESS_TIMEOUT)
        except asyncio.TimeoutError:
            return f"the event loop did not answer within {LIVENESS_TIMEOUT:g} s"
        return None

    async def _check(self) -> str | None:
        loop, ready = self._loop, self._ready
        if loop is None or ready is None:  # serve_metrics refuses a check without a loop
            return None
        try:
            future = asyncio.run_coroutine_threadsafe(_asked(ready), loop)
        except RuntimeError:
            return "the event loop is closed"
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), READINESS_TIMEOUT)
        except asyncio.TimeoutError:  # the check is cancelled on the worker's loop
            return f"the readiness check did not answer within {READINESS_TIMEOUT:g} s"
        except Exception as exc:  # noqa: BLE001  (a failed check is an answer: not ready)
            return f"the readiness check failed: {type(exc).__name__}"


def _settle(answered: asyncio.Future[None]) -> None:
    if not answered.done():
        answered.set_result(None)


async def _asked(ready: Ready) -> str | None:
    return await ready()


def _descriptors_short() -> str | None:
    """Why the process is short of file descriptors, or ``None`` (or unknown here)."""
    try:
        import resource  # noqa: PLC0415  (POSIX only)
    except ImportError:
        return None
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if limit == resource.RLIM_INFINITY:
        return None
    try:
        used = _descriptors_used()
    except OSError as exc:
        if exc.errno not in (errno.EMFILE, errno.ENFILE):
            return None
        used = limit  # not one left to list them
    if used is None or (free := limit - used) >= DESCRIPTORS_SPARE:
        return None
    return (
        f"only {max(free, 0)} of {limit} file descriptors are free: no connection to the "
        "provider or the database can be opened"
    )


def _descriptors_used() -> int | None:
    """How many file descriptors the process has open (``None``: no listing here)."""
    listing = next((listing for listing in _LISTINGS if listing.is_dir()), None)
    return None if listing is None else sum(1 for _ in listing.iterdir())


class _Pages:
    """The metrics page, made on a thread of its own by ``prometheus_client``'s app."""

    def __init__(self, app: WsgiApp) -> None:
        self._app = app
        self._jobs: queue.SimpleQueue[tuple[Request, concurrent.futures.Future[Answer]] | None]
        self._jobs = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="metrics-page", daemon=True)
        self._thread.start()

    async def make(self, request: Request) -> Answer:
        """The page ``request`` asks for (its kind, compression, names), or a ``503``."""
        made: concurrent.futures.Future[Answer] = concurrent.futures.Future()
        self._jobs.put((request, made))
        try:
            return await asyncio.wait_for(asyncio.wrap_future(made), PAGE_TIMEOUT)
        except asyncio.TimeoutError:
            return plain(503, f"the metrics page was not made within {PAGE_TIMEOUT:g} s")

    def close(self) -> None:
        self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            request, made = job
            if made.set_running_or_notify_cancel():
                try:
                    made.set_result(self._page(request))
                except Exception as exc:  # noqa: BLE001  (handed to who waits)
                    made.set_exception(exc)

    def _page(self, request: Request) -> Answer:
        path, _, query = request.target.partition("?")
        environ = {
            "REQUEST_METHOD": request.method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "HTTP_ACCEPT": request.headers.get(_PAGE_HEADERS[0], ""),
            "HTTP_ACCEPT_ENCODING": request.headers.get(_PAGE_HEADERS[1], ""),
        }
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]]) -> None:
            started[:] = [int(status.split(" ", 1)[0]), headers]

        body = b"".join(self._app(environ, start_response))
        return Answer(started[0], started[1], body)


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (IPv6 hosts too)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, protocol, _, address = infos[0]
    listening = socket.socket(family, kind, protocol)
    try:
        if os.name == "posix":  # a restarted worker binds its port again at once
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(address)
        listening.listen(BACKLOG)
    except BaseException:
        listening.close()
        raise
    return listening
