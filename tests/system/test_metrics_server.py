"""The metrics port's health probes: ``/healthz`` (the loop answers), ``/readyz`` (ready).

The server runs in this process, on loopback, on a port the system picks; the probes
are asked over HTTP from a thread, as an orchestrator asks them. A meter provider of the
test's own (``otel``, undone after each test) keeps the process's global one untouched.
"""

from __future__ import annotations

import asyncio
import threading
import urllib.error
import urllib.request

import pytest
from telemetrytools import otel

from invoicing_async._obs import server as _metrics_server
from invoicing_async.telemetry import serve_metrics


@pytest.fixture(autouse=True)
def _own_meter_provider():
    with otel():
        yield


def ask(url: str) -> tuple[int, str]:
    """The status and body of a GET of ``url``."""
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:  # noqa: S310  (loopback)
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


async def test_the_probes_answer_beside_the_metrics():
    """``/healthz`` and ``/readyz`` answer 200 while the loop answers and the check
    passes; ``/metrics`` still serves Prometheus text."""

    async def ready() -> str | None:
        return None

    server = serve_metrics(0, ready=ready)
    try:
        assert await asyncio.to_thread(ask, server.healthz) == (200, "ok\n")
        assert await asyncio.to_thread(ask, server.readyz) == (200, "ready\n")
        status, page = await asyncio.to_thread(ask, server.url)
        assert status == 200
        assert "# TYPE" in page
    finally:
        server.close()


async def test_readyz_says_why_it_is_not_ready_and_healthz_stays_alive():
    """The readiness check's reason is ``/readyz``'s 503 body, on one line; the loop
    still answers, so ``/healthz`` stays 200 (an orchestrator stops sending work, it
    does not restart the process); ready again, ``/readyz`` is 200 again. A check that
    raises is a 503 naming its exception's class."""
    why: list[str | None] = ["the outbox database is unreachable"]

    async def ready() -> str | None:
        if why[0] == "raise":
            raise ConnectionError("secret-looking detail")
        return why[0]

    server = serve_metrics(0, ready=ready)
    try:
        assert await asyncio.to_thread(ask, server.readyz) == (
            503,
            "the outbox database is unreachable\n",
        )
        assert await asyncio.to_thread(ask, server.healthz) == (200, "ok\n")
        why[0] = None
        assert await asyncio.to_thread(ask, server.readyz) == (200, "ready\n")
        why[0] = "raise"
        status, body = await asyncio.to_thread(ask, server.readyz)
        assert status == 503
        assert "ConnectionError" in body
        assert "secret-looking detail" not in body
    finally:
        server.close()


async def test_healthz_fails_while_the_event_loop_is_stuck(monkeypatch):
    """While the event loop does not run (blocked here by a join on the probing
    thread), ``/healthz`` answers 503 within its timeout; once it runs again, 200."""
    monkeypatch.setattr(_metrics_server, "LIVENESS_TIMEOUT", 0.2)
    server = serve_metrics(0)
    try:
        answers: list[tuple[int, str]] = []
        probe = threading.Thread(target=lambda: answers.append(ask(server.healthz)))
        probe.start()
        probe.join(60)  # the loop is blocked until the probe has its answer
        assert answers == [(503, "the event loop did not answer within 0.2 s\n")]
        assert await asyncio.to_thread(ask, server.healthz) == (200, "ok\n")
    finally:
        server.close()


def test_a_readiness_check_needs_a_running_loop():
    """``ready=`` outside a running event loop is refused (there is no loop to run the
    check on); without it, the probes answer as long as the server runs."""

    async def ready() -> str | None:
        return None

    with pytest.raises(ValueError, match="running event loop"):
        serve_metrics(0, ready=ready)
    server = serve_metrics(0)
    try:
        assert ask(server.healthz) == (200, "ok\n")
        assert ask(server.readyz) == (200, "ready\n")
    finally:
        server.close()
