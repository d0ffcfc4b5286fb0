"""Helpers for the tests that drive a running sandbox with the real client.

A helper module, not a test module: a fake clock shared by the sandbox and a token
cache, a client bound to an environment, a sample invoice of the sandbox's issuer, a
raw request outside the client, a poll for sandbox state no event announces, and the
outcomes a till's drainer delivers.
"""

from __future__ import annotations

import asyncio
import os
import sys

import aiohttp

from invoicing_async import DeferredOutcome, InvoicingClient
from invoicing_sandbox import Sandbox, sample_invoice


class FakeClock:
    """A monotonic clock the test moves by hand, shared by sandbox and token cache."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def token_statuses(sb: Sandbox) -> list[int | None]:
    """The status of every ``/oauth/token`` request the sandbox answered, in order."""
    return [r.status for r in sb.requests if r.path == "/oauth/token"]


def client_for(sb: Sandbox, environment: str | None = None, **kwargs) -> InvoicingClient:
    """A client of ``environment``'s default issuer, with the sandbox's provider key."""
    env = sb.environment(environment)
    kwargs.setdefault("provider_key", sb.provider_key)
    return InvoicingClient(env.base_url, env.client_id, env.client_secret, **kwargs)


def command_env(sb: Sandbox, key_file=None) -> dict[str, str]:
    """The ``INVOICING_*`` variables that point the command at ``sb`` (its key file too)."""
    env = {
        "INVOICING_BASE_URL": sb.base_url,
        "INVOICING_CLIENT_ID": sb.client_id,
        "INVOICING_API_KEY": sb.client_secret,
    }
    if key_file is not None:
        env["INVOICING_PROVIDER_KEY"] = str(key_file)
    return env


async def run_command(sb: Sandbox, *args: str, timeout: float = 120) -> tuple[int, str, str]:
    """``invoicing-async ARGS`` against ``sb`` in a subprocess: exit status, stdout, stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "invoicing_async", *args,
        env={**env, **command_env(sb)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    return process.returncode or 0, stdout.decode(), stderr.decode()


def invoice(sb: Sandbox, number: int, **kwargs) -> dict:
    """Sample invoice ``number`` of the sandbox's default issuer (two lines)."""
    return sample_invoice(number, issuer_vat=sb.client_id, lines=2, **kwargs)


def requests_to(sb: Sandbox, path: str) -> list:
    """The requests the sandbox received for ``path`` (below the environment), in order."""
    return [r for r in sb.requests if r.path == path]


async def raw(method: str, url: str, **kwargs) -> tuple[int, dict]:
    """One request outside the client, to look at the wire answer itself."""
    async with aiohttp.ClientSession() as session, session.request(method, url, **kwargs) as r:
        return r.status, await r.json(content_type=None)


async def until(condition) -> None:
    """Wait for a condition of the sandbox's state that no event announces."""
    while not condition():  # noqa: ASYNC110  (polling the state under test is the point)
        await asyncio.sleep(0.01)


class Outcomes:
    """``on_outcome``: collects what the drainer delivers; waits for a number of them."""

    def __init__(self) -> None:
        self.items: list[DeferredOutcome] = []
        self._changed = asyncio.Event()

    def __call__(self, item: DeferredOutcome) -> None:
        self.items.append(item)
        self._changed.set()

    async def wait(self, count: int, timeout: float = 60.0) -> dict[str, DeferredOutcome]:
        async def enough() -> None:
            while len({item.key for item in self.items}) < count:
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(enough(), timeout)
        return {item.key: item for item in self.items}
