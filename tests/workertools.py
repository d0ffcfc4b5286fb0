"""Helpers for the tests that run ``invoicing-async worker`` in subprocesses.

A helper module, not a test module: a command in a subprocess whose stderr is kept as it
comes (a test waits for what it says, never for time to pass), and the environment that
points it at a running sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from invoicing_sandbox import Sandbox

#: Generous: a safety net for a stuck process, never a measure.
LONG = 120


class Worker:
    """A command in a subprocess; what it writes on stderr is kept as it comes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.said = ""
        self._changed = asyncio.Event()
        self._reading = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, env: dict[str, str], *args: str) -> Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "invoicing_async", "worker", *args,
            env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(process)

    async def _read(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.said += line.decode(errors="replace")
            self._changed.set()
        self._changed.set()

    async def saying(self, pattern: str) -> re.Match[str]:
        """Wait until stderr matches ``pattern`` (a regular expression); the match."""

        async def found() -> re.Match[str]:
            while (match := re.search(pattern, self.said)) is None:
                if self._reading.done():
                    raise AssertionError(f"it ended without saying {pattern!r}:\n{self.said}")
                self._changed.clear()
                await self._changed.wait()
            return match

        return await asyncio.wait_for(found(), LONG)

    def signal(self, number: int) -> None:
        self.process.send_signal(number)

    async def stopped(self) -> tuple[int, float]:
        """SIGTERM it: its exit status, and the seconds it took to end after the signal."""
        stopped_at = time.monotonic()
        self.signal(signal.SIGTERM)
        status = await self.ended()
        return status, time.monotonic() - stopped_at

    async def ended(self) -> int:
        """Its exit status, once it ends (and everything it said)."""
        await asyncio.wait_for(self.process.wait(), LONG)
        await asyncio.wait_for(self._reading, LONG)
        return int(self.process.returncode or 0)

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        await self.process.wait()
        await self._reading


@contextlib.asynccontextmanager
async def running(env: dict[str, str], *args: str):
    """A worker, killed if the test leaves it running (a failure)."""
    worker = await Worker.start(env, *args)
    try:
        yield worker
    finally:
        if worker.process.returncode is None:
            await worker.kill()


def environment(sb: Sandbox, key_file, **variables: str) -> dict[str, str]:
    """The command's environment: the sandbox's URL and provider key, and ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}
    env.update(INVOICING_BASE_URL=sb.base_url, INVOICING_PROVIDER_KEY=str(key_file))
    env.update(variables)
    return env


def own_env(sb: Sandbox, key_file) -> dict[str, str]:
    """The environment of a worker for the sandbox's default issuer."""
    return environment(
        sb, key_file, INVOICING_CLIENT_ID=sb.client_id, INVOICING_API_KEY=sb.client_secret
    )


def secure_requests(sb: Sandbox) -> int:
    return sum(1 for r in sb.requests if r.path == "/Invoice/secure")
