"""Adversarial: malformed answers to a document submission.

A tiny raw HTTP/1.1 provider on loopback (``asyncio.start_server``, so every byte and
header can be wrong) answers the first submission of each document with a scripted
malformed 2xx, after "committing" it, and any re-submission with 409 and the record,
like the real service. Whatever the bytes, the client raises a typed
:class:`~invoicing_async.InvoicingError` that says the document may be committed, keeps
its memory bounded by ``max_response_size`` (not by what the server sends), keeps its
connection pool usable, and bulk submission ends such a document UNKNOWN (no re-send) or
ACCEPTED after re-sending, never REJECTED.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import json
import socket
import tracemalloc

import pytest
from helpers import once

from invoicing_async import (
    InvoicingClient,
    InvoicingError,
    MalformedResponseError,
    OutcomeStatus,
    RetryPolicy,
    TransportError,
)
from invoicing_async._core.table import maybe_processed
from invoicing_sandbox import Fault, Sandbox, sample_invoice

TIN = "094019245"
TOKEN = json.dumps({"access_token": "t0k3n", "token_type": "Bearer", "expires_in": 900}).encode()


def head(status: int, headers: dict[str, str | int]) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def sized(status: int, body: bytes, content_type: str = "application/json", **extra) -> bytes:
    return head(status, {"Content-Type": content_type, "Content-Length": len(body), **extra}) + body


#: Malformed answers to a committed document: (id, raw bytes, close the connection after).
MALFORMED = [
    ("truncated-json", sized(201, b'{"success":true,"mark":4000010'), False),
    ("html-200", sized(200, b"<html><body>Bad Gateway</body></html>", "text/html"), False),
    ("empty-201", sized(201, b""), False),
    ("bad-utf8", sized(201, b'{"message":"\xff\xfe\xfd","mark":1}'), False),
    ("json-array", sized(201, b"[1,2,3]"), False),
    ("json-null", sized(201, b"null"), False),
    ("mark-not-a-number", sized(201, b'{"mark":"soon"}'), False),
    ("date-garbage", sized(201, b'{"mark":1,"dateIssued":"yesterday-ish"}'), False),
    (
        "content-length-too-long",
        head(201, {"Content-Type": "application/json", "Content-Length": 500}) + b'{"mark":1',
        True,
    ),
    (
        "content-length-too-short",
        head(201, {"Content-Type": "application/json", "Content-Length": 9})
        + b'{"mark":12345678,"uid":"ABC"}',
        False,
    ),
    (
        "bad-chunk-size",
        head(201, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        + b"zz\r\n{}\r\n0\r\n\r\n",
        True,
    ),
    (
        "bad-gzip",
        sized(201, b"\x1f\x8b\x08\x00garbage-not-gzip", **{"Content-Encoding": "gzip"}),
        False,
    ),
]

#: Answers whose framing is not valid HTTP (aiohttp's parser refuses them).
INVALID_HTTP = {"content-length-too-short", "bad-chunk-size"}


class RawProvider:
    """A raw HTTP/1.1 provider: tokens always, documents committed once, then 409."""

    def __init__(self) -> None:
        self.script: list[tuple[bytes, bool] | str] = []
        self.committed: dict[str, int] = {}
        self.requests: list[str] = []
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task] = set()

    async def __aenter__(self) -> RawProvider:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._handlers:
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            while True:
                try:
                    request = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = request.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {k.lower(): v for k, _, v in (x.partition(": ") for x in lines[1:] if x)}
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                self.requests.append(path)
                close = await self._answer(path, body, writer)
                await writer.drain()
                if close:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self._handlers.discard(task)

    async def _answer(self, path: str, body: bytes, writer: asyncio.StreamWriter) -> bool:
        if path.endswith("/oauth/token"):
            writer.write(sized(200, TOKEN))
            return False
        identity = hashlib.sha256(body).hexdigest()
        record = {"success": True, "mark": 400001000000000 + len(self.committed) + 1}
        if identity in self.committed:
            record["mark"] = self.committed[identity]
            writer.write(sized(409, json.dumps(record).encode()))
            return False
        self.committed[identity] = record["mark"]
        answer = self.script.pop(0) if self.script else None
        if answer is None:
            writer.write(sized(201, json.dumps(record).encode()))
            return False
        if answer == "chunked-50mb":
            await self._endless_chunks(writer, 50 * 1024 * 1024)
            return True
        if answer == "length-50mb":
            writer.write(
                head(201, {"Content-Type": "application/json", "Content-Length": 50 << 20})
            )
            writer.write(b"x" * 65536)
            return True
        raw, close = answer
        writer.write(raw)
        return close

    @staticmethod
    async def _endless_chunks(writer: asyncio.StreamWriter, total: int) -> None:
        writer.write(
            head(201, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        )
        chunk = b"x" * 65536
        framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        sent = 0
        while sent < total:
            writer.write(framed)
            await writer.drain()
            sent += len(chunk)
        writer.write(b"0\r\n\r\n")


def document(number: int) -> dict:
    return sample_invoice(number, issuer_vat=TIN, lines=1)


@pytest.mark.parametrize(("name", "raw", "close"), MALFORMED, ids=[m[0] for m in MALFORMED])
async def test_malformed_2xx_is_a_typed_error_that_may_be_committed(name, raw, close):
    """Each malformed 2xx raises MalformedResponseError carrying the 2xx status (or, when
    the framing is not HTTP, TransportError with maybe_sent), so maybe_processed() is
    true; and the next request on the pool succeeds.
    """
    async with RawProvider() as provider:
        provider.script.append((raw, close))
        async with InvoicingClient(provider.base_url, TIN, "key") as client:
            with pytest.raises(InvoicingError) as caught:
                await once(client, document(1))
            # The pool is not poisoned by whatever was left on the connection.
            result = await client.submit_json(document(2))
    error = caught.value
    if name in INVALID_HTTP:
        # Bytes that break HTTP framing itself: no usable exchange, but it was sent.
        assert isinstance(error, TransportError), repr(error)
        assert error.maybe_sent is True
    else:
        assert isinstance(error, MalformedResponseError), repr(error)
        assert error.status in (200, 201)
    assert maybe_processed(error)
    assert result.mark == 400001000000002


@pytest.mark.parametrize(("name", "raw", "close"), MALFORMED, ids=[m[0] for m in MALFORMED])
async def test_unreadable_2xx_in_a_batch_is_unknown_or_accepted_never_rejected(name, raw, close):
    """Bulk submission: an unreadable 2xx ends UNKNOWN without re-sending, and ACCEPTED
    with the original record after re-sending (the 409); never REJECTED.
    """
    async with RawProvider() as provider, InvoicingClient(provider.base_url, TIN, "key") as client:
        provider.script.append((raw, close))
        [unknown] = await client.submit_many(
            [document(1)],
            encrypted=False,
            retry=RetryPolicy(resend_ambiguous=False, base_delay=0),
        )
        provider.script.append((raw, close))
        [accepted] = await client.submit_many(
            [document(2)], encrypted=False, retry=RetryPolicy(base_delay=0, max_delay=0)
        )
    assert unknown.status is OutcomeStatus.UNKNOWN, unknown
    assert unknown.attempts == 1
    assert accepted.status is OutcomeStatus.ACCEPTED, accepted
    assert accepted.attempts == 2
    assert accepted.result is not None
    assert accepted.result.mark == 400001000000002


async def peak_memory_of(coro_factory) -> tuple[int, BaseException | None]:
    gc.collect()
    tracemalloc.start()
    error = None
    try:
        await coro_factory()
    except InvoicingError as exc:
        error = exc
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, error


@pytest.mark.parametrize("answer", ["chunked-50mb", "length-50mb"])
async def test_oversized_body_is_refused_with_bounded_memory(answer):
    """A 50 MB answer (chunked, or with a Content-Length) is refused as
    MalformedResponseError; memory traced during the request stays far below the body
    size (bounded by max_response_size = 1 MB), and the pool stays usable.
    """
    async with (
        RawProvider() as provider,
        InvoicingClient(provider.base_url, TIN, "key", max_response_size=1 << 20) as client,
    ):
        await client.token()
        provider.script.append(answer)
        peak, error = await peak_memory_of(lambda: once(client, document(1)))
        result = await client.submit_json(document(2))
    assert isinstance(error, MalformedResponseError), repr(error)
    assert "cap" in str(error)
    assert error.status == 201
    assert peak < 8 << 20, peak  # 50 MB were offered
    assert result.mark == 400001000000002


@pytest.mark.parametrize(
    "fault",
    [
        Fault.truncated(),
        Fault.non_json(),
        Fault.oversized(2_000_000),
        Fault.oversized(2_000_000, chunked=True),
    ],
    ids=lambda f: f.name,
)
async def test_sandbox_unreadable_2xx_is_unknown_or_accepted_never_rejected(fault):
    """The same promise against the sandbox's after-commit faults, encrypted: UNKNOWN
    without re-sending, ACCEPTED with the committed record after it.
    """
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = [sample_invoice(n, issuer_vat=sb.client_id, lines=1) for n in (1, 2)]
        async with InvoicingClient(
            sb.base_url,
            sb.client_id,
            sb.client_secret,
            provider_key=sb.provider_key,
            max_response_size=1_000_000,
        ) as client:
            sb.script(fault)
            [unknown] = await client.submit_many(
                documents[:1], retry=RetryPolicy(resend_ambiguous=False)
            )
            sb.script(fault)
            [accepted] = await client.submit_many(
                documents[1:], retry=RetryPolicy(base_delay=0, max_delay=0)
            )
        assert unknown.status is OutcomeStatus.UNKNOWN
        assert accepted.status is OutcomeStatus.ACCEPTED
        assert sb.commit_count == 2
        key = accepted.key
        assert accepted.result == sb.committed[key].record


async def test_connection_refused_is_not_sent():
    """A refused connection is a TransportError that certainly did not reach the provider."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with InvoicingClient(f"http://127.0.0.1:{port}", TIN, "key", token_attempts=1) as c:
        with pytest.raises(TransportError) as info:
            await c.token()
    assert info.value.maybe_sent is False
