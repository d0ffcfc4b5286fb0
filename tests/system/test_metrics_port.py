"""The metrics port under attack: slow, never-ending, odd, huge and many requests.

:func:`~invoicing_async.telemetry.serve_metrics` runs in this process on loopback, on a
port the system picks; each test talks to it over raw sockets, as an attacker in the
cluster would, and reads what the server does: the answer it sends, and whether and
when it closes the connection. Deadlines are the server's keywords, set small where a
test waits for one to pass; every other wait is for the server's own act (an answer, a
closed connection), within :data:`SAFETY`, which no deadline of the server's reaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from telemetrytools import otel

from invoicing_async.telemetry import serve_metrics

#: A safety net for a server that never closes; well beyond the default deadline (5 s).
SAFETY = 30


@pytest.fixture(autouse=True)
def _own_meter_provider():
    with otel():
        yield


@contextlib.asynccontextmanager
async def serving(**kwargs):
    server = serve_metrics(0, **kwargs)
    try:
        yield server
    finally:
        server.close()


async def connect(server) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.port)


async def until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (a reset too)."""
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := await asyncio.wait_for(reader.read(65536), SAFETY):
            received += chunk
    return received


async def exchange(server, request: bytes) -> bytes:
    """Send ``request`` on a connection of its own; what came back until it closed.

    A connection the server closes at once may be reset before ``connect`` returns (the
    kernel's timing, not the server's answer): nothing came back."""
    try:
        reader, writer = await connect(server)
    except ConnectionResetError:
        return b""
    try:
        with contextlib.suppress(ConnectionError):  # closed at once, before it was sent
            writer.write(request)
            await writer.drain()
        return await until_closed(reader)
    finally:
        writer.close()


def status_of(answer: bytes) -> int:
    """The status code of an HTTP/1.x answer."""
    assert answer.startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")), answer[:80]
    return int(answer.split(b" ", 2)[1])


def descriptors_open() -> int:
    """The descriptors this process has open, as the kernel lists them."""
    return sum(1 for _ in Path("/proc/self/fd").iterdir())


def ask(url: str) -> tuple[int, str]:
    """The status and body of a GET of ``url`` (a thread: the probe of a blocked loop)."""
    try:
        with urllib.request.urlopen(url, timeout=SAFETY) as answer:  # noqa: S310  (loopback)
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


@pytest.mark.parametrize(
    "sent",
    [b"", b"GET /metrics HTTP/1.1\r\nHost: worker\r\n", b"GET /metr"],
    ids=["nothing", "headers that never end", "half a request line"],
)
async def test_a_request_whose_head_never_ends_is_closed_at_the_deadline(sent):
    """A client that connects and never ends its request's head (slowloris) is answered
    ``408`` and closed once ``request_timeout`` has passed since it connected (before:
    held open for good, a thread and a descriptor each)."""
    async with serving(request_timeout=0.5) as server:
        began = time.monotonic()  # before the server can have accepted it
        reader, writer = await connect(server)
        writer.write(sent)
        answer = await until_closed(reader)
        waited = time.monotonic() - began
        writer.close()
    assert status_of(answer) == 408
    assert b"Connection: close\r\n" in answer
    assert waited >= 0.45  # the deadline closed it, not a refusal


async def test_a_trickling_head_is_closed_at_the_deadline_however_it_trickles():
    """A client sending its head a byte at a time keeps no connection open past the
    deadline: ``request_timeout`` counts from the connection's start, not from the last
    byte."""
    async with serving(request_timeout=0.5) as server:
        reader, writer = await connect(server)
        began = time.monotonic()

        async def trickle() -> None:
            with contextlib.suppress(ConnectionError):
                for byte in b"GET /metrics HTTP/1.1\r\n" + b"X-Slow: " + b"a" * 10_000:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(0.02)  # the attacker's pace

        trickling = asyncio.ensure_future(trickle())
        try:
            answer = await until_closed(reader)
        finally:
            trickling.cancel()
            writer.close()
        assert time.monotonic() - began < SAFETY
    assert status_of(answer) == 408


@pytest.mark.parametrize(
    "request_line", [b"GET /metrics\r\n", b"GET /healthz\n"], ids=["crlf", "lf"]
)
async def test_an_http_09_request_is_refused_and_closed_at_once(request_line):
    """An HTTP/0.9 request (a request line without a version, after which the client
    waits for the answer) is refused ``400`` and closed at once, not held until the
    deadline (before: held open for good)."""
    async with serving() as server:
        answer = await exchange(server, request_line)
    assert status_of(answer) == 400
    assert answer.endswith(b"HTTP/1.0 and HTTP/1.1 requests only\n")


@pytest.mark.parametrize(
    "request_line",
    [
        b"PRI * HTTP/2.0\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n",
        b"G\xc3\xa9T / HTTP/1.1\r\n",
    ],
    ids=["http2 preface", "tls hello", "non-ascii method"],
)
async def test_what_is_not_http_1_is_refused_at_once(request_line):
    """Bytes that are not an HTTP/1.x request line (HTTP/2's preface, a TLS hello, odd
    bytes) are refused ``400`` and closed at once."""
    async with serving() as server:
        answer = await exchange(server, request_line)
    assert status_of(answer) == 400


@pytest.mark.parametrize(
    "headers",
    [
        b"X-Filler: " + b"a" * 32_000 + b"\r\n",
        b"".join(b"X-%d: %s\r\n" % (n, b"b" * 300) for n in range(60)),
    ],
    ids=["one line of 32 KB", "60 lines of 300 bytes"],
)
async def test_a_huge_request_head_is_refused(headers):
    """A request head beyond ``max_head`` (8 KiB by default) is refused ``431`` and the
    connection closed, whether one header is huge or many add up (before: a 32 KB header,
    or 60 of 300 bytes, were read and answered)."""
    async with serving() as server:
        answer = await exchange(server, b"GET /metrics HTTP/1.1\r\n" + headers + b"\r\n")
    assert status_of(answer) == 431


async def test_a_request_line_without_end_beyond_the_cap_is_refused():
    """A request line that never ends (a megabyte with no newline) is refused ``431`` as
    soon as it passes the cap; the server does not buffer the rest."""
    async with serving() as server:
        answer = await exchange(server, b"GET /" + b"a" * 1_000_000)
    assert status_of(answer) == 431


async def test_a_probe_gets_in_while_the_port_is_full_of_idle_connections():
    """At ``max_connections``, a new connection makes room by closing the one that has
    waited longest without sending a whole request: a probe is answered while every
    slot is held by idle connections, the oldest is closed, the others kept."""
    async with serving(max_connections=2, request_timeout=SAFETY * 10) as server:
        oldest = await connect(server)
        kept = await connect(server)
        assert await exchange(server, b"GET /healthz HTTP/1.1\r\n\r\n") == (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Content-Length: 3\r\nConnection: close\r\n\r\nok\n"
        )
        assert await until_closed(oldest[0]) == b""
        kept[1].write(b"GET /healthz HTTP/1.0\r\n\r\n")
        assert status_of(await until_closed(kept[0])) == 200
        for _, writer in (oldest, kept):
            writer.close()


async def test_excess_connections_are_closed_at_once_not_queued():
    """When every slot holds a request being answered (a readiness check that takes its
    time), a new connection is closed at once, unanswered: it waits in no queue. The
    requests being answered are answered."""
    asked, release = asyncio.Event(), asyncio.Event()

    async def ready() -> str | None:
        asked.set()
        await release.wait()
        return None

    async with serving(ready=ready, max_connections=1, request_timeout=SAFETY * 10) as server:
        reader, writer = await connect(server)
        writer.write(b"GET /readyz HTTP/1.1\r\n\r\n")
        await asyncio.wait_for(asked.wait(), SAFETY)
        assert await exchange(server, b"GET /healthz HTTP/1.1\r\n\r\n") == b""
        release.set()
        answer = await until_closed(reader)
        writer.close()
    assert status_of(answer) == 200
    assert answer.endswith(b"\r\n\r\nready\n")


async def test_concurrent_readiness_probes_run_one_check_at_a_time():
    """Twenty ``/readyz`` at once while the check is slow share one check: the worker's
    loop runs at most one readiness check at a time, however many probes ask (before:
    one check per request, each on the worker's loop)."""
    running, most = [0], [0]
    release = asyncio.Event()

    async def ready() -> str | None:
        running[0] += 1
        most[0] = max(most[0], running[0])
        try:
            await release.wait()
        finally:
            running[0] -= 1
        return None

    async with serving(ready=ready) as server:
        connections = [await connect(server) for _ in range(20)]
        for _, writer in connections:
            writer.write(b"GET /readyz HTTP/1.1\r\n\r\n")
            await writer.drain()
        # Answered beside the waiting ones: they were all read before it.
        assert status_of(await exchange(server, b"GET /healthz HTTP/1.1\r\n\r\n")) == 200
        release.set()
        answers = [await until_closed(reader) for reader, _ in connections]
        for _, writer in connections:
            writer.close()
    assert [status_of(answer) for answer in answers] == [200] * 20
    assert most == [1]


@pytest.mark.parametrize(
    ("request_", "status"),
    [
        (b"POST /healthz HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 405),
        (b"GET /healthz HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\n folded\r\n\r\n", 400),
        (b"HEAD /healthz HTTP/1.1\r\n\r\n", 200),
    ],
    ids=["post", "header without colon", "folded header", "head"],
)
async def test_odd_requests_get_a_precise_answer(request_, status):
    """A method the probes do not take is ``405``, a malformed header line ``400``; a
    ``HEAD`` gets the headers of the ``GET`` and no body."""
    async with serving() as server:
        answer = await exchange(server, request_)
    assert status_of(answer) == status
    if request_.startswith(b"HEAD"):
        assert answer.endswith(b"Content-Length: 3\r\nConnection: close\r\n\r\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_healthz_fails_when_the_process_has_no_descriptors_to_spare():
    """``/healthz`` says whether the worker can still do its job: with fewer than 32
    file descriptors left under its limit (it could open no connection to the provider)
    it answers 503 saying so, and ``/readyz`` too; with descriptors to spare again, 200
    (before: 200 "ok" while every connection failed with "Too many open files")."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    async with serving() as server:
        used = descriptors_open()
        resource.setrlimit(resource.RLIMIT_NOFILE, (used + 16, hard))
        try:
            status, said = await asyncio.to_thread(ask, server.healthz)
            ready = await asyncio.to_thread(ask, server.readyz)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert status == 503
        assert said.startswith("only ")
        assert f"of {used + 16} file descriptors are free" in said
        assert ready[0] == 503
        assert "file descriptors are free" in ready[1]
        assert await asyncio.to_thread(ask, server.healthz) == (200, "ok\n")


async def test_the_metrics_page_is_made_while_the_event_loop_is_stuck():
    """The metrics page is made off the worker's event loop: with the loop blocked, a
    scrape is still answered with the page (only ``/healthz`` says the loop is stuck)."""
    async with serving() as server:
        answers: list[tuple[int, str]] = []
        scrape = threading.Thread(target=lambda: answers.append(ask(server.url)))
        scrape.start()
        scrape.join(SAFETY)  # the loop is blocked until the scrape has its answer
        assert answers[0][0] == 200
        assert "# TYPE" in answers[0][1]


@pytest.mark.parametrize(
    "keyword",
    [
        {"max_connections": 0},
        {"request_timeout": 0},
        {"request_timeout": float("nan")},
        {"max_head": 10},
    ],
)
def test_limits_that_cannot_work_are_refused(keyword):
    """A cap of no connection, a deadline that is not a positive number of seconds, a
    head cap below a request line's size: ``ValueError`` naming the keyword."""
    with pytest.raises(ValueError, match=next(iter(keyword))):
        serve_metrics(0, **keyword)
