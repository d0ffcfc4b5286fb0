"""``invoicing-async worker --metrics-port``: Prometheus scrapes a real worker.

The command runs in a subprocess against the sandbox on loopback, its endpoint on a
port the system picks (``--metrics-port 0``, printed on stderr); the test scrapes it
over HTTP with aiohttp while the worker runs. The sandbox's gate holds the worker's
requests, so the backlog is certainly there when the first scrape is taken; released,
the worker sends everything and the gauge falls to 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys

import aiohttp
import pytest

from invoicing_async.outbox import SqliteOutbox
from invoicing_sandbox import Sandbox, sample_invoices

PORT = re.compile(rb"metrics: (http://\S+/metrics)")


def _sample(text: str, name: str) -> float | None:
    """The value of the first sample of ``name`` in a Prometheus text page."""
    for line in text.splitlines():
        if line.startswith((name + " ", name + "{")):
            return float(line.rsplit(" ", 1)[1])
    return None


async def _scrape(session: aiohttp.ClientSession, url: str) -> str:
    async with session.get(url) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return await response.text()


async def _url_from(stderr: asyncio.StreamReader) -> str:
    while line := await stderr.readline():
        found = PORT.search(line)
        if found:
            return found.group(1).decode()
    raise AssertionError("the worker never said where its metrics are")


@pytest.fixture
async def sandbox(tmp_path):
    async with Sandbox(key_algorithm="cv25519") as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        env = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}
        sb.env = {
            **env,
            "INVOICING_BASE_URL": sb.base_url,
            "INVOICING_CLIENT_ID": sb.client_id,
            "INVOICING_API_KEY": sb.client_secret,
            "INVOICING_PROVIDER_KEY": str(key_file),
        }
        yield sb


async def test_a_workers_metrics_show_its_backlog_falling_to_zero(sandbox, tmp_path):
    """A worker started with ``--metrics-port 0`` serves Prometheus text: while the
    provider holds its requests the outbox's pending gauge shows the 12 entries; once
    released, scrapes show it fall to 0, with the documents counted accepted and the
    request durations in the ``http_client_request_duration_seconds`` histogram."""
    path = tmp_path / "outbox.db"
    async with SqliteOutbox(path) as outbox:
        await outbox.enqueue(sample_invoices(12, issuer_vat=sandbox.client_id, lines=1))
    sandbox.hold()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "invoicing_async", "worker", "--ledger", str(path),
        "--metrics-port", "0", "--concurrency", "4",
        env=sandbox.env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        url = await asyncio.wait_for(_url_from(process.stderr), 60)
        drain = asyncio.ensure_future(process.stderr.read())  # never a full pipe
        async with aiohttp.ClientSession() as session:
            await asyncio.wait_for(sandbox.wait_held(4), 60)
            page = await _scrape(session, url)
            assert _sample(page, "invoicing_outbox_pending") == 12
            sandbox.release()
            seen = [12.0]

            async def fallen() -> str:
                while True:
                    page = await _scrape(session, url)
                    pending = _sample(page, "invoicing_outbox_pending")
                    if pending is not None and pending != seen[-1]:
                        seen.append(pending)
                    if pending == 0:
                        return page
                    await asyncio.sleep(0.05)

            page = await asyncio.wait_for(fallen(), 60)
        assert seen == sorted(seen, reverse=True)  # it only falls
        assert _sample(page, "invoicing_documents_total") == 12
        assert 'invoicing_outcome="accepted"' in page
        assert _sample(page, "http_client_request_duration_seconds_count") is not None
        assert 'invoicing_outbox="SqliteOutbox(' in page
        assert sandbox.client_secret not in page
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(process.wait(), 60)
        finally:  # a worker that did not stop must not outlive the test (nor slow the rest)
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 0
    await drain
