"""A trivially fast provider in its own process, for the end-to-end benchmarks.

Run as ``python -m benchmarks._provider [--latency SECONDS] [--strict]``: it binds
127.0.0.1 on a random port, prints ``PORT <n>`` on stdout and serves until its stdin
closes (so it never outlives the benchmark that started it). It answers

* ``POST /oauth/token`` with a 15-minute token of the ``client_id`` asking (and counts
  these requests, in all and per client);
* ``POST /Invoice/secure`` and ``POST /Invoice/json`` with one fixed 201 record, without
  decrypting or parsing anything (the body is read, as any server must), counted in all
  and per client (the client whose token the request carries);
* ``GET /stats`` with the counters as JSON (``?clients=1``: with the per-client counts,
  ``{client_id: [token requests, documents]}``), ``POST /reset`` to zero them and end
  any control;
* ``POST /control`` with a JSON object, to misbehave for one client each:
  ``{"revoke": TIN, "revoke_after": N}`` refuses that client (its token requests ``401
  invalid_client``, its documents ``401``) once N documents were answered in all;
  ``{"throttle": TIN, "retry_after": S}`` answers its documents ``429`` with
  ``Retry-After: S`` (token requests are served).

Any ``client_id`` is a client. With ``--strict`` each must present its own API key,
:func:`api_key_of` its TIN, at the token endpoint and with every document, and a
document must carry a token issued to the client whose key it presents: a request sent
with another issuer's key or token is refused ``401``. Without it any credentials are
accepted (the single-issuer benchmarks' fixed key, and older trees' in ``compare``).

Everything constant is built once; ``access_log`` is off. With ``--latency`` every
document answer waits that long first (a provider that forwards to the tax authority).

:class:`ProviderProcess` starts and stops it from the benchmark process.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import subprocess
import sys
import threading
import urllib.request
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from collections.abc import Mapping

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
REFUSED_TOKEN_BODY = json.dumps(
    {"error": "invalid_client", "error_description": "unknown or revoked client"}
).encode()
UNAUTHORIZED_BODY = json.dumps({"message": "Unauthorized"}).encode()
THROTTLED_BODY = json.dumps({"message": "Too many requests"}).encode()
JSON = "application/json"


def api_key_of(tin: str) -> str:
    """The API key of issuer ``tin`` at this provider (``--strict``): derived from it."""
    return "bench-" + hashlib.sha256(f"bench-issuer:{tin}".encode()).hexdigest()[:32]


class _Clients:
    """What the provider knows of its clients: their tokens and counts, and its control."""

    def __init__(self, *, strict: bool) -> None:
        self.strict = strict
        self.totals = {"token": 0, "documents": 0, "refused": 0, "throttled": 0}
        #: client_id -> [token requests, documents answered 201]
        self.counts: dict[str, list[int]] = {}
        #: access token -> (client_id, API key it was issued with)
        self.tokens: dict[str, tuple[str, str]] = {}
        self.revoke: str | None = None
        self.revoke_after = 0
        self.throttle: str | None = None
        self.retry_after = "1"

    def reset(self) -> None:
        for name in self.totals:
            self.totals[name] = 0
        self.counts.clear()
        self.tokens.clear()
        self.revoke = self.throttle = None

    def revoked(self, client_id: str) -> bool:
        return client_id == self.revoke and self.totals["documents"] >= self.revoke_after

    def grant(self, form: dict[str, str]) -> bytes | None:
        """A token answer's body for ``form``, or ``None``: the credentials are refused."""
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        self.totals["token"] += 1
        counts = self.counts.setdefault(client_id, [0, 0])
        counts[0] += 1
        if (self.strict and secret != api_key_of(client_id)) or self.revoked(client_id):
            return None
        value = f"bench-token-{client_id}-{counts[0]}"
        self.tokens[value] = (client_id, secret)
        return json.dumps(
            {"access_token": value, "token_type": "Bearer", "expires_in": 900}
        ).encode()

    def sender(self, headers: Mapping[str, str]) -> str | None:
        """The client a document comes from, or ``None``: it is refused (strict only)."""
        token = headers.get("Authorization", "").removeprefix("Bearer ")
        issued = self.tokens.get(token)
        if issued is None:
            return None if self.strict else "?"
        client_id, secret = issued
        if self.strict and headers.get("APIKey") != secret:
            return None
        return None if self.revoked(client_id) else client_id


def make_app(latency: float, *, strict: bool = False) -> web.Application:
    clients = _Clients(strict=strict)
    totals = clients.totals

    async def token(request: web.Request) -> web.Response:
        body = clients.grant(dict(await request.post()))  # type: ignore[arg-type]
        if body is None:
            return web.Response(body=REFUSED_TOKEN_BODY, status=401, content_type=JSON)
        return web.Response(body=body, content_type=JSON)

    async def document(request: web.Request) -> web.Response:
        await request.read()
        client_id = clients.sender(request.headers)
        if client_id is None:
            totals["refused"] += 1
            return web.Response(body=UNAUTHORIZED_BODY, status=401, content_type=JSON)
        if client_id == clients.throttle:
            totals["throttled"] += 1
            headers = {"Retry-After": clients.retry_after}
            return web.Response(body=THROTTLED_BODY, status=429, content_type=JSON, headers=headers)
        totals["documents"] += 1
        clients.counts.setdefault(client_id, [0, 0])[1] += 1
        if latency:
            await asyncio.sleep(latency)
        return web.Response(body=RECORD_BODY, status=201, content_type=JSON)

    async def stats(request: web.Request) -> web.Response:
        answer: dict[str, object] = dict(totals)
        if request.query.get("clients"):
            answer["clients"] = clients.counts
        return web.Response(body=json.dumps(answer).encode(), content_type=JSON)

    async def reset(_request: web.Request) -> web.Response:
        clients.reset()
        return web.Response(body=b"{}", content_type=JSON)

    async def control(request: web.Request) -> web.Response:
        told = await request.json()
        if "revoke" in told:
            clients.revoke = str(told["revoke"])
            clients.revoke_after = int(told.get("revoke_after", 0))
        if "throttle" in told:
            clients.throttle = str(told["throttle"])
            clients.retry_after = str(told.get("retry_after", 1))
        return web.Response(body=b"{}", content_type=JSON)

    app = web.Application()
    app.router.add_post("/oauth/token", token)
    app.router.add_post("/Invoice/secure", document)
    app.router.add_post("/Invoice/json", document)
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    app.router.add_post("/control", control)
    return app


async def serve(latency: float, *, strict: bool) -> None:
    runner = web.AppRunner(make_app(latency, strict=strict), access_log=None, handle_signals=False)
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


def _call(url: str, path: str, told: dict[str, Any] | None = None) -> dict[str, Any]:
    """The provider's JSON answer to ``GET path`` (``told``: ``POST`` it as JSON)."""
    data = None if told is None else json.dumps(told).encode()
    method = "GET" if data is None else "POST"
    request = urllib.request.Request(url + path, data=data, method=method)  # noqa: S310
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
        return dict(json.loads(answer.read()))


def stats(url: str, *, clients: bool = False) -> dict[str, Any]:
    """The counters of the provider at ``url`` (``clients``: with the per-client counts)."""
    return _call(url, "/stats?clients=1" if clients else "/stats")


def reset(url: str) -> None:
    """Zero the counters of the provider at ``url`` and end any control."""
    _call(url, "/reset", {})


def control(url: str, **told: Any) -> None:
    """Make the provider at ``url`` revoke or throttle a client (see the module docstring)."""
    _call(url, "/control", told)


class ProviderProcess:
    """The provider in a child process: ``with ProviderProcess() as p: p.url``.

    :param strict: each client must present its own API key (:func:`api_key_of`).
    """

    def __init__(self, latency: float = 0.0, *, strict: bool = False) -> None:
        self.latency = latency
        self.strict = strict
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ProviderProcess:
        command = [sys.executable, "-m", "benchmarks._provider", "--latency", str(self.latency)]
        self._process = subprocess.Popen(
            command + (["--strict"] if self.strict else []),
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

    def stats(self) -> dict[str, Any]:
        """The provider's counters (token requests, documents)."""
        return stats(self.url)

    def reset(self) -> None:
        """Zero the provider's counters."""
        reset(self.url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--strict", action="store_true", help="each client its own API key")
    args = parser.parse_args()
    asyncio.run(serve(args.latency, strict=args.strict))


if __name__ == "__main__":
    main()
