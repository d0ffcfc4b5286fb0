"""A worker's HTTP port for its operators: Prometheus metrics and the health probes.

:func:`serve_metrics` serves, from a thread of its own:

* ``/metrics``: the process's metrics in Prometheus' text format (``prometheus_client``
  reading the OpenTelemetry SDK's meter provider, which :mod:`._telemetry` configures);
* ``/healthz``: liveness: ``200`` while the event loop it was started from answers (a
  call scheduled on the loop runs within :data:`LIVENESS_TIMEOUT`), ``503`` when it is
  stuck or closed: an orchestrator then restarts the process;
* ``/readyz``: readiness: ``200`` when the loop answers and the ``ready`` check says
  nothing is missing (for the command's worker: the outbox's database answers, the
  provider key is loaded and valid, the worker is not stopping), else ``503`` with the
  reason on one line: a load balancer or Kubernetes sends it no work meanwhile.

Every other path is the metrics page, as ``prometheus_client``'s own server serves it.
Nothing secret is served: the reasons are the checks' own words (an outbox is named
without its password). This is the only module that imports ``prometheus_client``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import socketserver
import threading
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from . import _telemetry

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    Ready = Callable[[], Awaitable[str | None]]
    StartResponse = Callable[[str, list[tuple[str, str]]], object]

__all__ = ["LIVENESS_TIMEOUT", "READINESS_TIMEOUT", "MetricsServer", "serve_metrics"]

#: Seconds the event loop may take to run a call from the liveness probe.
LIVENESS_TIMEOUT = 5.0
#: Seconds the readiness check may take (it looks at the database).
READINESS_TIMEOUT = 5.0


class MetricsServer:
    """A Prometheus endpoint and health probes (see :func:`serve_metrics`).

    .. versionchanged:: 0.5.0 ``/healthz`` and ``/readyz`` beside the metrics.
    """

    def __init__(self, server: Any, thread: Any) -> None:
        self._server: WSGIServer = server
        self._thread: threading.Thread = thread

    def __repr__(self) -> str:
        return f"<MetricsServer {self.url}>"

    @property
    def port(self) -> int:
        """The port it listens on (the one chosen when ``0`` was asked)."""
        port: int = self._server.server_port
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
        host = str(self._server.server_address[0])
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def serve_metrics(
    port: int,
    host: str = "127.0.0.1",
    *,
    ready: Callable[[], Awaitable[str | None]] | None = None,
) -> MetricsServer:
    """Serve the process's metrics for Prometheus on ``host:port`` (``0``: any free port).

    Without a meter provider configured, one is set up (the OpenTelemetry SDK's, read by
    its Prometheus exporter); with one, the endpoint serves what its Prometheus reader
    (if any) registered.

    Beside ``/metrics``: ``/healthz`` answers ``200`` while the event loop this was
    called from answers (always, called outside one), and ``/readyz`` answers ``200``
    when, besides, ``ready`` (a coroutine function run on that loop) returns ``None``;
    ``503`` with the reason it returned (or the loop's silence) otherwise.

    :param ready: what readiness needs (a database reachable, a key loaded…): returns
        ``None`` when ready, else why not, in a few words (no secret).
    :raises ImportError: the ``prometheus`` extra is not installed (the message says so).
    :raises ValueError: ``ready`` given outside a running event loop.

    .. versionchanged:: 0.5.0 ``/healthz``, ``/readyz`` and ``ready``.
    """
    try:
        import prometheus_client  # noqa: PLC0415  (the prometheus extra)
    except ImportError as exc:
        raise ImportError(_telemetry.PROMETHEUS_MISSING.format(exc.name)) from None
    _telemetry.export_for_prometheus()
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
        if ready is not None:
            raise ValueError("serve_metrics(ready=...) needs a running event loop") from None
    probes = _Probes(loop, ready)
    metrics = prometheus_client.make_wsgi_app()

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/readyz"):
            problem = probes.alive() if path == "/healthz" else probes.ready()
            status = "200 OK" if problem is None else "503 Service Unavailable"
            body = (problem or ("ok" if path == "/healthz" else "ready")).encode() + b"\n"
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
            return [body]
        answer: Iterable[bytes] = metrics(environ, start_response)
        return answer

    family, address = _family(host, port)
    server_class = type("_Server", (_ThreadingServer,), {"address_family": family})
    server: WSGIServer = make_server(address, port, app, server_class, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
    thread.start()
    return MetricsServer(server, thread)


class _Probes:
    """The answers of ``/healthz`` and ``/readyz``, asked from the server's threads."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None, ready: Ready | None) -> None:
        self._loop = loop
        self._ready = ready

    def alive(self) -> str | None:
        """``None`` when the event loop answers, else why not."""
        loop = self._loop
        if loop is None:
            return None
        answered = threading.Event()
        try:
            loop.call_soon_threadsafe(answered.set)
        except RuntimeError:
            return "the event loop is closed"
        if not answered.wait(LIVENESS_TIMEOUT):
            return f"the event loop did not answer within {LIVENESS_TIMEOUT:g} s"
        return None

    def ready(self) -> str | None:
        """``None`` when alive and the readiness check passes, else why not."""
        problem = self.alive()
        if problem is not None or self._ready is None or self._loop is None:
            return problem
        try:
            future = asyncio.run_coroutine_threadsafe(_asked(self._ready), self._loop)
        except RuntimeError:
            return "the event loop is closed"
        try:
            return future.result(READINESS_TIMEOUT)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return f"the readiness check did not answer within {READINESS_TIMEOUT:g} s"
        except Exception as exc:  # noqa: BLE001  (a failed check is an answer: not ready)
            return f"the readiness check failed: {type(exc).__name__}"


async def _asked(ready: Ready) -> str | None:
    return await ready()


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    """One thread per request (a slow probe never holds a scrape back)."""

    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    """No access log on stderr (a probe every few seconds would fill it)."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base's name)
        """Log nothing."""


def _family(host: str, port: int) -> tuple[socket.AddressFamily, str]:
    """The address family and address to bind ``host`` with (IPv6 hosts too)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = infos[0]
    return family, str(address[0])
