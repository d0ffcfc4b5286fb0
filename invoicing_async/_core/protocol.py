"""The provider's protocol without I/O.

Functions here build requests (method, URL, headers, body bytes) and read responses
(status, headers, body bytes) into records or typed errors. Nothing awaits and nothing
touches a socket, so every rule of the protocol is tested with plain synchronous tests;
:mod:`._transport` moves the bytes and :mod:`._client` strings the steps together.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import ipaddress
import json
import math
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import attrs

from .convert import format_timestamp, result_from_json
from .errors import (
    AuthenticationError,
    CredentialsError,
    DocumentTooLargeError,
    DuplicateDocumentError,
    InvoicingError,
    MalformedResponseError,
    ProviderKeyError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    UnexpectedStatusError,
    ValidationError,
)
from .models import AccessToken, DocumentResult

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "MAX_API_KEY",
    "Request",
    "Response",
    "build_call_request",
    "build_document_request",
    "build_token_request",
    "check_api_key",
    "check_base_url",
    "check_path",
    "error_for_response",
    "parse_document_response",
    "parse_json_response",
    "parse_token_response",
    "retry_after_seconds",
]

PGP_CONTENT_TYPE = "application/pgp-encrypted"
JSON_CONTENT_TYPE = "application/json"
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
SECURE_PATH = "/Invoice/secure"
JSON_PATH = "/Invoice/json"
TOKEN_PATH = "/oauth/token"  # noqa: S105  (a path, not a password)
#: 4xx statuses that refuse the request's content (besides 400): too large, unprocessable.
_DOCUMENT_REFUSALS = frozenset({413, 422})
#: Longest ``Retry-After`` honoured, in seconds; a provider asking for an hour is capped.
MAX_RETRY_AFTER = 120.0


@attrs.frozen
class Request:
    """An HTTP request ready to send. ``headers`` may hold secrets: never log them."""

    method: str
    url: str
    headers: Mapping[str, str] = attrs.field(repr=False)
    body: bytes | None = attrs.field(default=None, repr=False)

    @property
    def path(self) -> str:
        """The URL's path without its query: ``/Invoice/json`` (after a base URL's own)."""
        return urlsplit(self.url).path


@attrs.frozen
class Response:
    """An HTTP response as received: status, headers (case-insensitive keys), body bytes."""

    status: int
    headers: Mapping[str, str] = attrs.field(repr=False)
    body: bytes = attrs.field(repr=False)

    @property
    def ok(self) -> bool:
        """A 2xx: the request was done."""
        return 200 <= self.status < 300

    @property
    def unauthorized(self) -> bool:
        """A 401: the token (or the API key) was refused."""
        return self.status == 401


def check_base_url(base_url: str) -> str:
    """Validate the provider's base URL and return it without a trailing slash.

    ``https`` is required; ``http`` is allowed only to a loopback host (the sandbox), so
    an API key is never sent in clear text over a network.
    """
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
    if parts.query or parts.fragment:
        raise ValueError("base_url must not carry a query or fragment")
    if parts.username or parts.password:
        raise ValueError("base_url must not carry credentials")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ValueError(
            f"refusing plain http to {parts.hostname}: use https (http only for loopback)"
        )
    return base_url.rstrip("/")


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_token_request(
    base_url: str, client_id: str, client_secret: str, refresh_token: str | None = None
) -> Request:
    """``POST /oauth/token``: a client-credentials grant, or a refresh grant when given one.

    The refresh grant carries ``client_id`` and ``client_secret`` too: a confidential
    client authenticates on every grant (RFC 6749 section 6), and a standard server
    answers a refresh without them ``401 invalid_client``.
    """
    if refresh_token is not None:
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
    else:
        form = {"grant_type": "client_credentials"}
    form["client_id"] = client_id
    form["client_secret"] = client_secret
    return Request(
        "POST",
        base_url + TOKEN_PATH,
        {"Content-Type": FORM_CONTENT_TYPE, "Accept": JSON_CONTENT_TYPE},
        urlencode(form).encode("ascii"),
    )


def build_document_request(
    base_url: str,
    *,
    token: AccessToken,
    api_key: str,
    body: bytes,
    encrypted: bool,
    send_method: str | None = None,
    time_stamp: dt.datetime | str | None = None,
) -> Request:
    """``POST /Invoice/secure`` (armored PGP body) or ``POST /Invoice/json``.

    Query parameters appear only when given.
    """
    query: dict[str, str] = {}
    if send_method is not None:
        query["sendMethod"] = send_method
    if time_stamp is not None:
        query["timeStamp"] = (
            time_stamp if isinstance(time_stamp, str) else format_timestamp(time_stamp)
        )
    url = base_url + (SECURE_PATH if encrypted else JSON_PATH)
    if query:
        url += "?" + urlencode(query)
    content_type = PGP_CONTENT_TYPE if encrypted else JSON_CONTENT_TYPE
    return Request("POST", url, _headers(token, api_key, content_type), body)


def build_call_request(
    base_url: str,
    method: str,
    path: str,
    *,
    token: AccessToken,
    api_key: str,
    body: bytes | None = None,
    params: Mapping[str, str] | None = None,
    content_type: str | None = None,
) -> Request:
    """Any other operation (``/Invoice/cancelDeliveryNote``, ``/PosSignatures/…``).

    Authenticated like the document calls; a body is sent as ``content_type`` (JSON
    unless given, such as ``multipart/form-data; boundary=…`` for a file).
    """
    url = base_url + check_path(path)
    if params:
        url += "?" + urlencode(dict(params))
    if content_type is None and body is not None:
        content_type = JSON_CONTENT_TYPE
    return Request(method.upper(), url, _headers(token, api_key, content_type), body)


def check_path(path: str) -> str:
    """``path`` if it is a path on the provider (``/Invoice/json``), else ``ValueError``."""
    if not path.startswith("/") or "://" in path:
        raise ValueError("path must be a path on the provider, such as '/Invoice/json'")
    return path


#: The longest API key sent, in characters: far beyond any provider's keys (tens of
#: characters), and an ``APIKey`` header line well within the 8 KiB common servers take
#: for one header (nginx: 8 KiB a line; aiohttp: 8,190 bytes a value; ASP.NET's Kestrel
#: 32 KiB for all of them), with the bearer token and the rest beside it.
MAX_API_KEY = 4096


def check_api_key(api_key: str) -> str | None:
    """Why ``api_key`` cannot be sent as the ``APIKey`` header, or ``None``.

    In words that do not include it: too long for a header (:data:`MAX_API_KEY`), or
    holding what a header value cannot carry as it is. Only printable ASCII goes: a
    newline or another control character would end the header (or be refused), spaces
    around it are dropped by the server, and bytes beyond ASCII are refused or read as
    other characters (ASP.NET's Kestrel, for one, refuses them unless told otherwise).
    """
    if not api_key:
        return "it is empty"
    if len(api_key) > MAX_API_KEY:
        return (
            f"it has {len(api_key):,} characters, more than the {MAX_API_KEY:,} an APIKey "
            "header may carry"
        )
    if api_key != api_key.strip(" \t"):
        return "it has spaces around it, which a header value drops"
    if not (api_key.isascii() and api_key.isprintable()):
        return (
            "it holds a character a header value cannot carry (a newline, another control "
            "character, or one beyond ASCII)"
        )
    return None


def _headers(token: AccessToken, api_key: str, content_type: str | None) -> dict[str, str]:
    """Bearer token and ``APIKey``: the specification leaves open which one is checked."""
    headers = {
        "Authorization": f"{_token_type(token)} {token.value}",
        "APIKey": api_key,
        "Accept": JSON_CONTENT_TYPE,
    }
    if content_type is not None:
        headers["Content-Type"] = content_type
    return headers


def _token_type(token: AccessToken) -> str:
    # RFC 6750 spells it "Bearer"; providers sometimes answer "bearer".
    return "Bearer" if token.token_type.lower() == "bearer" else token.token_type


def parse_token_response(
    response: Response, *, obtained_at: float, previous: AccessToken | None = None
) -> AccessToken:
    """Read the token endpoint's answer; ``obtained_at`` is the clock read before sending.

    ``previous`` is the token whose refresh token was used: a refresh answer without a new
    refresh token keeps that one (rotation is optional). Secrets are passed inside
    :class:`AccessToken` objects (whose repr hides them), never as bare strings, and are
    out of every local variable when an error is raised: tracebacks formatted with
    locals must not show them.
    """
    if response.status != 200:
        raise token_error(response)
    data = _json_object(response)
    expires_in = _lifetime(data.get("expires_in", 900))
    if (
        expires_in is None
        or not isinstance(data.get("access_token"), str)
        or not data["access_token"]
    ):
        del data
        raise MalformedResponseError(
            "the token endpoint answered without a usable access_token/expires_in",
            status=response.status,
        )
    rotated = data.get("refresh_token")
    return AccessToken(
        value=data["access_token"],
        token_type=str(data.get("token_type") or "Bearer"),
        expires_in=expires_in,
        obtained_at=obtained_at,
        refresh_token=rotated
        if isinstance(rotated, str) and rotated
        else (previous.refresh_token if previous is not None else None),
    )


def _lifetime(value: Any) -> float | None:
    """``expires_in`` as positive finite seconds, or None (an int, float or digit string)."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def token_error(response: Response) -> InvoicingError:
    """The error for a non-200 token answer: 400/401 refuse the credentials."""
    if response.status in (400, 401, 403):
        body = _json_or_none(response.body)
        error = _text(body, "error")
        description = _text(body, "error_description")
        message = "the token endpoint refused the credentials"
        if error:
            message += f": {error}"
        if description:
            message += f" ({description})"
        return CredentialsError(
            message,
            status=response.status,
            body=body,
            error=error,
            error_description=description,
        )
    return error_for_response(response, "POST /oauth/token")


def parse_document_response(response: Response, *, encrypted: bool = False) -> DocumentResult:
    """Read a 200/201 answer of a document submission, or raise the typed error.

    A 409 raises :class:`DuplicateDocumentError` carrying the original record when the
    body holds one. A 413, or a 400 that says the message or document is too large,
    refuses this document for its size: :class:`DocumentTooLargeError`, never a key
    problem, even when the text also names decryption ("cannot be decrypted: message
    exceeds size limit"). Any other 400 to an encrypted document that blames decryption
    refuses the key the message was encrypted to, not the document:
    :class:`ProviderKeyError` (``reason="not_decryptable"``).
    """
    if response.status in (200, 201):
        return _record(_json_object(response), response.status)
    error = error_for_response(response, "document submission")
    if error.status == 400 and _OVERSIZE.search(_detail(error.body) or ""):
        raise DocumentTooLargeError(error.message, status=400, body=error.body)
    if encrypted and error.status == 400 and _UNDECRYPTABLE.search(error.message):
        raise ProviderKeyError(
            f"{error.message}: the provider cannot read the message, not the document in "
            "it; most likely the provider key given is not the provider's current one "
            "(a rotated key): ask the provider for it and check its fingerprint",
            reason="not_decryptable",
            status=400,
            body=error.body,
        )
    raise error


#: Provider text that blames the OpenPGP message rather than the document in it.
_UNDECRYPTABLE = re.compile(r"decrypt|\bpgp\b|openpgp|integrity protect|session key", re.IGNORECASE)
#: Provider text that refuses a request for its size ("request body too large", "message
#: exceeds size limit", "maximum request body size exceeded"): the message, body or
#: document must be what is too large, so "TotalGrossValue: too large" is not one.
_OVERSIZE = re.compile(
    r"\b(?:message|body|request|document|payload|entity|file|content)s?\b(?:\W+\w+){0,3}?\W+"
    r"(?:too (?:large|big)|exceed\w*(?: the)?(?: \w+)? size)"
    r"|\bmaximum (?:(?:request|body|message|document|payload|file) )+size",
    re.IGNORECASE,
)


def parse_json_response(response: Response, what: str) -> Any:
    """Read a 2xx answer of any other operation as JSON (``None`` for an empty body)."""
    if 200 <= response.status < 300:
        if not response.body.strip():
            return None
        try:
            return json.loads(response.body)
        except (UnicodeDecodeError, ValueError):
            raise MalformedResponseError(
                f"{what}: the response body is not JSON", status=response.status
            ) from None
    raise error_for_response(response, what)


def _record(data: dict[str, Any], status: int) -> DocumentResult:
    try:
        return result_from_json(data)
    except Exception as exc:  # noqa: BLE001  (cattrs raises exception groups of many kinds)
        raise MalformedResponseError(
            f"the result record cannot be read: {_first_cause(exc)}", status=status
        ) from None


def _first_cause(exc: BaseException) -> str:
    # cattrs raises exception groups (a backport on 3.10): report the innermost cause.
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return str(exc)[:200]


#: What a 404 from an endpoint every environment has means.
WRONG_BASE_URL = (
    "check that the base URL includes the environment's path (such as "
    "https://provider.example/test, not https://provider.example)"
)
#: Endpoints every environment has: a 404 from them means a wrong base URL.
_FIXED_ENDPOINTS = ("POST /oauth/token", "document submission")


def error_for_response(response: Response, what: str) -> InvoicingError:  # noqa: C901
    """Map a non-success response to its typed error (see :mod:`._errors`)."""
    status = response.status
    body = _json_or_none(response.body)
    reason = f"{what}: " + (_detail(body) or f"HTTP {status}")
    if status == 400:
        return ValidationError(reason, status=status, body=body)
    if status in (401, 403):
        return AuthenticationError(
            reason,
            status=status,
            body=body,
            error=_text(body, "error"),
            error_description=_text(body, "error_description"),
        )
    if status == 408:
        return ProviderTimeoutError(reason, status=status, body=body)
    if status == 409:
        record = None
        if body is not None:
            try:
                record = result_from_json(dict(body))
            except Exception:  # noqa: BLE001
                record = None
        # The body of a 409 is the original record: its "message" describes the first
        # submission, not this refusal, so it is not used for the error's message.
        return DuplicateDocumentError(
            f"{what}: the document was already transmitted",
            status=status,
            body=body,
            result=record,
        )
    if status == 429:
        return RateLimitError(
            reason, status=status, body=body, retry_after=retry_after_seconds(response.headers)
        )
    if 500 <= status < 600:
        return ServerError(
            reason, status=status, body=body, retry_after=retry_after_seconds(response.headers)
        )
    if 300 <= status < 400:
        return MalformedResponseError(
            f"{what}: redirect refused (HTTP {status} to {response.headers.get('Location', '?')})",
            status=status,
        )
    if status in _DOCUMENT_REFUSALS:  # 413: what a web server answers, before the API
        refusal = DocumentTooLargeError if status == 413 else ValidationError
        return refusal(reason, status=status, body=body)
    if 400 <= status < 500:
        # 404, 405, 415 …: the request went somewhere that does not take it (a wrong
        # base URL or path); the provider neither processed nor refused the document.
        if status == 404 and what in _FIXED_ENDPOINTS:
            reason += f"; {WRONG_BASE_URL}"
        return UnexpectedStatusError(reason, status=status, body=body)
    return MalformedResponseError(f"{what}: unexpected HTTP {status}", status=status)


def retry_after_seconds(
    headers: Mapping[str, str], *, now: dt.datetime | None = None
) -> float | None:
    """``Retry-After`` in seconds (delta or HTTP date), capped at :data:`MAX_RETRY_AFTER`."""
    value = headers.get("Retry-After")
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # "²".isdigit() is true, float("²") fails
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    delta = (when - (now or dt.datetime.now(dt.timezone.utc))).total_seconds()
    return min(max(delta, 0.0), MAX_RETRY_AFTER)


def _json_object(response: Response) -> dict[str, Any]:
    try:
        data = json.loads(response.body)
    except (UnicodeDecodeError, ValueError):
        raise MalformedResponseError(
            "the response body is not JSON" if response.body else "the response body is empty",
            status=response.status,
        ) from None
    if not isinstance(data, dict):
        kind = type(data).__name__
        del data  # it may hold secrets: out of the traceback's locals
        raise MalformedResponseError(f"expected a JSON object, got {kind}", status=response.status)
    return data


def _json_or_none(body: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _detail(body: Mapping[str, Any] | None) -> str | None:
    """The provider's own words in an error body."""
    return _text(body, "message") or _text(body, "error_description") or _text(body, "error")


def _text(body: Mapping[str, Any] | None, key: str) -> str | None:
    if body is None:
        return None
    value = body.get(key)
    return value[:500] if isinstance(value, str) and value else None
