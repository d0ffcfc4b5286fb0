"""The sandbox against hostile input: every request gets a 4xx (or an answer), never a 500.

A client's mistake or an attacker's body (a form that is not UTF-8, JSON nested a
hundred thousand levels deep, a broken multipart body, headers with bytes that are not
text, a body larger than the limit) is answered as a web service answers it: a 4xx
saying what is wrong, and the request's one log line. Never a 500, a traceback on the
console, or an error logged by aiohttp for the handler.

The sandbox runs in its own thread and event loop; requests go through ``http.client``
(the standard library's), which sends any bytes and headers the test gives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import threading
import urllib.parse

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from invoicing_sandbox import Sandbox, sample_invoice

LOGGER = "invoicing_async.sandbox"
#: The sandbox's body limit here: room for JSON nested 100,000 levels deep.
LIMIT = 1024 * 1024
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


class _Records(logging.Handler):
    """Every log record of the process while a test runs (the sandbox's and aiohttp's)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._guard:
            self.records.append(record)

    def take(self) -> list[logging.LogRecord]:
        with self._guard:
            taken, self.records = self.records, []
        return taken


class _Running:
    """A sandbox served from a thread, with a valid token and API key to reach handlers."""

    def __init__(self, **options) -> None:
        self.loop = asyncio.new_event_loop()
        self.sandbox = Sandbox(key_algorithm="cv25519", **options)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> _Running:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.sandbox.start(), self.loop).result(60)
        sb = self.sandbox
        self.host, self.port = "127.0.0.1", sb.port
        self.prefix = "/" + sb.environment().name
        form = urllib.parse.urlencode({
            "grant_type": "client_credentials",
            "client_id": sb.client_id,
            "client_secret": sb.client_secret,
        }).encode()  # fmt: skip
        status, body = self.send("POST", "/oauth/token", form, {
            "Content-Type": "application/x-www-form-urlencoded",
        })  # fmt: skip
        assert status == 200, body
        self.token = json.loads(body)["access_token"]
        return self

    def __exit__(self, *exc_info: object) -> None:
        asyncio.run_coroutine_threadsafe(self.sandbox.close(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def send(
        self, method: str, path: str, body: bytes, headers: dict[str, str | bytes]
    ) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            connection.putrequest(method, self.prefix + path, skip_accept_encoding=True)
            for name, value in headers.items():
                connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()


@pytest.fixture(scope="module")
def running():
    with _Running(max_body_size=LIMIT) as served:
        yield served


@pytest.fixture
def records():
    handler = _Records()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    sandbox_logger = logging.getLogger(LOGGER)
    sandbox_level = sandbox_logger.level
    sandbox_logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
        sandbox_logger.setLevel(sandbox_level)


def _check(running: _Running, records: _Records, method, path, *, body, headers) -> int:
    """Send one request; assert a 4xx or an answer, one log line, no error logged."""
    records.take()
    status, answer = running.send(method, path, body, headers)
    taken = records.take()
    assert status < 500, (status, answer[:300])
    problems = [
        r
        for r in taken
        if r.levelno >= logging.ERROR or r.exc_info or "Traceback" in r.getMessage()
    ]
    assert not problems, [r.getMessage() for r in problems]
    lines = [r.getMessage() for r in taken if r.name == LOGGER]
    assert len(lines) == 1, lines
    assert f"-> {status}" in lines[0]
    return status


# --- the requests the issue names ---------------------------------------------------------


def _nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


HOSTILE = {
    "garbage token form": ("/oauth/token", "application/x-www-form-urlencoded", b"%%\xff=&=%zz"),
    "token form not UTF-8": ("/oauth/token", "application/x-www-form-urlencoded", b"a=\xff\xfe"),
    "broken multipart token": ("/oauth/token", "multipart/form-data; boundary=x", b"--x\r\nbad"),
    "token form, unknown charset": (
        "/oauth/token",
        "application/x-www-form-urlencoded; charset=no-such-charset",
        b"grant_type=client_credentials",
    ),
    "deeply nested json": ("/Invoice/json", "application/json", _nested(100_000)),
    "deeply nested array": ("/Invoice/json", "application/json", b"[" * 100_000),
    "json not UTF-8": ("/Invoice/json", "application/json", b'{"Series": "\xff"}'),
    "half a surrogate pair": (
        "/Invoice/json",
        "application/json",
        json.dumps(sample_invoice(1)).replace('"Series": "', '"Series": "\\ud800', 1).encode(),
    ),
    "nested cancellation": ("/Invoice/cancelDeliveryNote", "application/json", _nested(50_000)),
    "nested pos signature": ("/PosTransactions/signpos", "application/json", _nested(50_000)),
    "broken upload": ("/Invoice/File", "multipart/form-data; boundary=zz", b"--zz\r\n\xff\xfe"),
    "secure garbage": ("/Invoice/secure", "application/pgp-encrypted", b"\xff\xfe\x00garbage"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_bodies_get_a_4xx_and_one_log_line(running, records, name):
    """Each body the issue names (a garbage token form, JSON nested 100,000 deep, a body
    that is not UTF-8 …) is answered 400 with the request's one log line: no 500, no
    traceback, no error logged by aiohttp."""
    path, content_type, body = HOSTILE[name]
    headers = {"Content-Type": content_type, "Authorization": f"Bearer {running.token}"}
    headers["APIKey"] = running.sandbox.client_secret
    assert _check(running, records, "POST", path, body=body, headers=headers) == 400


def test_oversized_body_is_413_before_it_is_decrypted(running, records):
    """A body over the sandbox's limit is answered 413, as a web server answers it, with
    the size and the limit: never the 400 "cannot be decrypted" that reads as a key
    problem."""
    headers = {
        "Content-Type": "application/pgp-encrypted",
        "Authorization": f"Bearer {running.token}",
        "APIKey": running.sandbox.client_secret,
    }
    body = b"-----BEGIN PGP MESSAGE-----\n\n" + b"A" * (2 * LIMIT)
    records.take()
    status, answer = running.send("POST", "/Invoice/secure", body, headers)
    assert status == 413
    message = json.loads(answer)["message"]
    assert str(len(body)) in message
    assert str(LIMIT) in message
    assert "decrypt" not in message


def test_headers_that_are_not_text_are_refused(running, records):
    """An API key or a token whose bytes are not UTF-8 is refused 401, not a 500."""
    body = json.dumps(sample_invoice(1)).encode()
    for credentials in (
        {"Authorization": b"Bearer \xff\xfe", "APIKey": running.sandbox.client_secret},
        {"Authorization": f"Bearer {running.token}", "APIKey": b"\xff\xfe\xc3"},
    ):
        headers = {**credentials, "Content-Type": "application/json"}
        assert _check(running, records, "POST", "/Invoice/json", body=body, headers=headers) == 401


# --- anything else: hypothesis over endpoints, methods, media types, bodies, headers -------

_PATHS = [
    "/oauth/token",
    "/Invoice/secure",
    "/Invoice/json",
    "/Invoice/cancelDeliveryNote",
    "/Invoice/cancelReceivingNote",
    "/PosSignatures/123456783",
    "/PosTransactions/signpos",
    "/B2GInvoice/ReSeedInvoice",
    "/B2GInvoice/GetLastStatus?mark=1",
    "/B2GInvoice/GetLastStatus?mark=%ff",
    "/B2GInvoice/GetLastStatus?mark=%C2%B2",
    "/Invoice/cancelDeliveryNote?mark=" + "9" * 5000,
    "/Invoice/File",
    "/media/upload",
]
_MEDIA = [
    "application/json",
    "application/json; charset=latin-1",
    "application/x-www-form-urlencoded",
    "application/x-www-form-urlencoded; charset=utf-16",
    "application/x-www-form-urlencoded; charset=nope",
    "multipart/form-data; boundary=B",
    "multipart/form-data",
    "application/pgp-encrypted",
    "text/plain",
    "",
    "\x7f/\x01",
]
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_fields = st.dictionaries(
    st.sampled_from(["grant_type", "client_id", "client_secret", "refresh_token", "mark", "x"]),
    st.sampled_from(["client_credentials", "refresh_token", ""]) | st.text(max_size=20),
    max_size=5,
)


@st.composite
def _multipart(draw) -> bytes:
    """A multipart body with boundary ``B``: parts well-formed, broken or random."""
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.text(max_size=8)).encode("utf-8", "surrogatepass")
        disposition = b'Content-Disposition: form-data; name="' + name + b'"'
        if draw(st.booleans()):
            disposition += b'; filename="' + draw(st.binary(max_size=8)) + b'"'
        headers = [disposition]
        if draw(st.booleans()):
            headers.append(b"Content-Type: " + draw(st.binary(max_size=12)))
        if draw(st.booleans()):
            headers.append(draw(st.binary(max_size=20)))
        parts.append(
            b"--B\r\n" + b"\r\n".join(headers) + b"\r\n\r\n" + draw(st.binary(max_size=40))
        )
    tail = draw(st.sampled_from([b"\r\n--B--\r\n", b"", b"\r\n--B", b"--"]))
    return b"\r\n".join(parts) + tail


_text_or_json = (
    st.text(max_size=12) | _json | st.sampled_from(["²", "1" * 5000, "-1", " 7 ", "1e3"])
)


@st.composite
def _shaped(draw) -> bytes:
    """A body shaped like the real thing (an invoice, a POS payload, a mark), with the
    values of a few of its fields replaced by anything JSON holds."""
    base = draw(st.sampled_from(["invoice", "signpos", "mark"]))
    if base == "invoice":
        value = sample_invoice(draw(st.integers(1, 3)), issuer_vat="123456783")
    elif base == "signpos":
        value = {"issuerTin": "123456783", "amount": 1.5, "terminalId": "T1"}
    else:
        value = {"mark": 400001000000001}
    for _ in range(draw(st.integers(1, 3))):
        target = value
        where = draw(st.sampled_from(["", "Issuer", "Summaries", "DistributionDetails"]))
        if where and isinstance(value.get(where), dict):
            target = value[where]
        name = draw(st.sampled_from([*target, "Vat", "InternalDocumentId", "Branch", "x"]))
        target[name] = draw(_text_or_json)
    return json.dumps(value).encode()


_bodies = st.one_of(
    _shaped(),
    st.binary(max_size=200),
    _json.map(lambda value: json.dumps(value).encode()),
    st.dictionaries(st.text(max_size=10), _json, max_size=5).map(lambda d: json.dumps(d).encode()),
    _fields.map(lambda form: urllib.parse.urlencode(form).encode()),
    st.binary(max_size=60).map(
        lambda raw: b"grant_type=" + urllib.parse.quote_from_bytes(raw).encode()
    ),
    _multipart(),
    st.integers(1, 5000).map(lambda depth: b"[" * depth + b"]" * depth),
    st.just(json.dumps(sample_invoice(1)).encode()),
)


@FUZZ
@given(
    method=st.sampled_from(["POST", "POST", "GET", "PUT", "DELETE"]),
    path=st.sampled_from(_PATHS),
    media=st.sampled_from(_MEDIA),
    body=_bodies,
    authenticated=st.booleans(),
    extra=st.dictionaries(
        st.sampled_from(["Content-Encoding", "Accept", "X-Other", "Authorization", "APIKey"]),
        st.binary(max_size=20).filter(lambda b: b"\r" not in b and b"\n" not in b),
        max_size=2,
    ),
)
@example(
    method="POST", path="/oauth/token", media="application/x-www-form-urlencoded",
    body=b"grant_type=%ff", authenticated=False, extra={},
)  # fmt: skip
def test_any_request_gets_an_answer_never_a_500(  # noqa: PLR0917  (fixtures and draws)
    running, records, method, path, media, body, authenticated, extra
):
    """Whatever arrives (any endpoint, method, media type, body, header bytes), the
    sandbox answers it with a status below 500 and one log line, and logs no error."""
    headers: dict[str, str | bytes] = {}
    if media:
        headers["Content-Type"] = media
    if authenticated:
        headers["Authorization"] = f"Bearer {running.token}"
        headers["APIKey"] = running.sandbox.client_secret
    headers.update(extra)
    with contextlib.suppress(http.client.RemoteDisconnected):
        _check(running, records, method, path, body=body, headers=headers)


def test_a_header_longer_than_a_real_servers_limit_is_refused_400(running, records):
    """An ``APIKey`` header value of 8,191 bytes is answered 400 by the HTTP server
    itself, as a real server refuses a header past its limit (aiohttp's 8,190 bytes,
    nginx's 8 KiB a line); one of 8,190 bytes is read (and refused 401: a wrong key)."""
    body = json.dumps(sample_invoice(1)).encode()
    for size, status in ((8191, 400), (8190, 401)):
        headers = {"Authorization": f"Bearer {running.token}", "APIKey": "k" * size}
        headers["Content-Type"] = "application/json"
        assert _check(running, records, "POST", "/Invoice/json", body=body, headers=headers) == (
            status
        )
