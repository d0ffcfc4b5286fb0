"""A trivially fast provider in its own process, for the end-to-end benchmarks.

Run as ``python -m benchmarks._provider [--latency SECONDS]``: it binds 127.0.0.1 on a
random port, prints ``PORT <n>`` on stdout and serves until its stdin closes (so it never
outlives the benchmark that started it). It answers

* ``POST /oauth/token`` with a 15-minute token (and counts these requests);
* ``POST /Invoice/secure`` and ``POST /Invoice/json`` with one fixed 201 record, without
  decrypting or parsing anything (the body is read, as any server must);
* ``GET /stats`` with the counters as JSON, ``POST /reset`` to zero them.

Everything constant is built once; ``access_log`` is off. With ``--latency`` every
document answer waits that long first (a provider that forwards to the tax authority).

:class:`ProviderProcess` starts and stops it from the benchmark process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import urllib.request

from aiohttp import web

TOKEN_BODY = json.dumps(
    {"access_token": "bench-access-token", "token_type": "Bearer", "expires_in": 900}
).encode()
RECORD_BODY = json.dumps(
    {
        "success": True,
        "statusCode": "Success",
        "uid": "C1B1C5A0E6A5C3A54B0A3D1B7E32E2C6F0D1A2B3",
        "mark": 400001234567890,
        "authenticationCode": "A1B2C3D4E5F6",
        "qrCodeString": "https://provider.invalid/v/AbCdEf",
    }
).encode()
JSON = "application/json"


def make_app(latency: float) -> web.Application:
    counts = {"token": 0, "documents": 0}

    async def token(request: web.Request) -> web.Response:
        counts["token"] += 1
        await request.read()
        return web.Response(body=TOKEN_BODY, content_type=JSON)

    async def document(request: web.Request) -> web.Response:
        counts["documents"] += 1
        await request.read()
        if latency:
            await asyncio.sleep(latency)
        return web.Response(body=RECORD_BODY, status=201, content_type=JSON)

    async def stats(_request: web.Request) -> web.Response:
        return web.Response(body=json.dumps(counts).encode(), content_type=JSON)

    async def reset(_request: web.Request) -> web.Response:
        for name in counts:
            counts[name] = 0
        return web.Response(body=b"{}", content_type=JSON)

    app = web.Application()
    app.router.add_post("/oauth/token", token)
    app.router.add_post("/Invoice/secure", document)
    app.router.add_post("/Invoice/json", document)
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    return app


async def serve(latency: float) -> None:
    runner = web.AppRunner(make_app(latency), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    server = site._server  # noqa: SLF001  (the only way to learn the bound port)
    port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"PORT {port}", flush=True)
    stdin_closed = asyncio.get_running_loop().create_future()

    def watch_stdin() -> None:
        sys.stdin.buffer.read()
        stdin_closed.get_loop().call_soon_threadsafe(stdin_closed.set_result, None)

    threading.Thread(target=watch_stdin, daemon=True).start()
    await stdin_closed
    await runner.cleanup()


class ProviderProcess:
    """The provider in a child process: ``with ProviderProcess() as p: p.url``."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ProviderProcess:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._provider", "--latency", str(self.latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        line = self._process.stdout.readline().decode()  # type: ignore[union-attr]
        if not line.startswith("PORT "):
            self._process.kill()
            raise RuntimeError(f"the provider did not start (said {line!r})")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        return self

    def __exit__(self, *exc_info: object) -> None:
        process = self._process
        if process is None:
            return
        process.stdin.close()  # type: ignore[union-attr]
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def stats(self) -> dict[str, int]:
        """The provider's counters (token requests, documents)."""
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as answer:  # noqa: S310
            return dict(json.loads(answer.read()))

    def reset(self) -> None:
        """Zero the provider's counters."""
        request = urllib.request.Request(self.url + "/reset", data=b"", method="POST")  # noqa: S310
        with urllib.request.urlopen(request, timeout=10):  # noqa: S310
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--latency", type=float, default=0.0)
    asyncio.run(serve(parser.parse_args().latency))


if __name__ == "__main__":
    main()
