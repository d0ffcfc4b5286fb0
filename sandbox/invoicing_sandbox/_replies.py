"""What the sandbox answers, as plain values: a status, a JSON body, headers.

The provider's state machine (:mod:`._provider`) decides a :class:`Reply`; the aiohttp
application (:mod:`._app`) writes it, or mangles it as a fault says. Bodies are written
with the sandbox's own compact JSON encoder, :func:`._wire.dumps`,
in the shapes the real service uses: ``success``, ``message``, ``statusCode`` (and
``errors``) for the API; RFC 6749's ``error`` and ``error_description`` for the token
endpoint.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs

from ._faults import Fault
from ._pgp import MessageTooLargeError, NotIntegrityProtectedError, OpenPGPError
from ._wire import dumps

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "METHOD_NOT_ALLOWED",
    "NO_STORE",
    "Reply",
    "error_reply",
    "fault_reply",
    "mangled",
    "oauth_error",
    "undecryptable",
]

_STATUS_CODES = {
    400: "BadRequest",
    401: "Unauthorized",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    413: "PayloadTooLarge",
    415: "UnsupportedMediaType",
}
_FAULT_STATUS_TEXT = {
    408: ("RequestTimeout", "the tax authority's service did not respond in time"),
    429: ("TooManyRequests", "too many requests: slow down"),
    500: ("InternalServerError", "internal server error"),
    502: ("BadGateway", "bad gateway"),
    503: ("ServiceUnavailable", "the service is temporarily unavailable"),
    504: ("GatewayTimeout", "gateway timeout"),
}
#: OAuth answers must not be cached (RFC 6749 section 5.1).
NO_STORE = (("Cache-Control", "no-store"), ("Pragma", "no-cache"))


@attrs.frozen
class Reply:
    """A response the sandbox means to send, before any fault mangles it."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    #: Written as a stream of chunks (a file, such as a PDF), not in one piece.
    stream: bool = False


def error_reply(
    status: int,
    message: str,
    *,
    errors: list[dict[str, str]] | None = None,
    headers: tuple[tuple[str, str], ...] = (),
) -> Reply:
    """The service's error body: ``success``, ``message``, ``statusCode`` (and ``errors``)."""
    body: dict[str, Any] = {
        "success": False,
        "message": message,
        "statusCode": _STATUS_CODES.get(status, "Error"),
    }
    if errors is not None:
        body["errors"] = errors
    return Reply(status, dumps(body), headers=headers)


def oauth_error(error: str, description: str) -> Reply:
    """A token endpoint refusal: 400 with RFC 6749's ``error`` and ``error_description``."""
    return Reply(400, dumps({"error": error, "error_description": description}), headers=NO_STORE)


def fault_reply(fault: Fault) -> Reply:
    """The answer of a ``status`` fault (or of ``commit_then_500``): nothing processed."""
    status = fault.code or 500
    code, message = _FAULT_STATUS_TEXT.get(status, ("Error", f"HTTP {status}"))
    body = dumps({"success": False, "message": message, "statusCode": code})
    headers: tuple[tuple[str, str], ...] = ()
    if fault.retry_after is not None:
        headers = (("Retry-After", str(fault.retry_after)),)
    return Reply(status, body, headers=headers)


def undecryptable(error: OpenPGPError) -> Reply:
    """The 400 for a message that cannot be decrypted (the error's text is safe to echo).

    A message whose data is larger than the sandbox takes is not a decryption problem:
    413, as for a body that is too large.
    """
    if isinstance(error, MessageTooLargeError):
        return error_reply(413, f"the document is too large: {error}")
    if isinstance(error, NotIntegrityProtectedError):
        return error_reply(400, "message is not integrity protected")
    return error_reply(400, f"the message cannot be decrypted: {error}")


METHOD_NOT_ALLOWED = error_reply(405, "use POST", headers=(("Allow", "POST"),))


_HTML = (
    b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>Bad Gateway</h1><p>The upstream server is unavailable.</p></body></html>"
)


def mangled(reply: Reply, kind: str, headers: Mapping[str, str]) -> Reply | None:
    """The whole reply an after-commit fault ``kind`` sends instead of ``reply``.

    ``None`` for the kinds that break the stream or the connection instead (the
    application writes those).
    """
    if kind == "commit_then_500":
        return fault_reply(Fault.status(500))
    if kind == "non_json":  # a proxy's error page with the right status
        return Reply(reply.status, _HTML, content_type="text/html")
    if kind == "wrong_content_type":  # the real record, mislabelled
        return attrs.evolve(reply, content_type="text/html")
    if kind == "foreign_record":
        return _foreign(reply)
    if kind == "echo_secrets":
        return _echoing(reply, headers.get("APIKey", ""), headers.get("Authorization", ""))
    return None


def _foreign(reply: Reply) -> Reply:
    """``reply`` carrying another document's record: its number and internal id changed."""

    def change(record: dict[str, Any]) -> None:
        record["number"] = f"{record.get('number') or 0}-other"
        record["internalId"] = f"{record.get('internalId') or 'document'}-other"

    return _edit_record(reply, change)


def _echoing(reply: Reply, api_key: str, authorization: str) -> Reply:
    """``reply`` whose record repeats the request's credentials, as careless ones do.

    They go into the message and into an extra member.
    """

    def change(record: dict[str, Any]) -> None:
        token = authorization.partition(" ")[2]
        record["message"] = f"{record.get('message') or ''} (API key {api_key}, token {token})"
        record["requestEcho"] = {"apiKey": api_key, "authorization": authorization}

    return _edit_record(reply, change)


def _edit_record(reply: Reply, change: Callable[[dict[str, Any]], None]) -> Reply:
    """``reply`` with its JSON record changed; a body that is not a record is kept as is."""
    try:
        record = json.loads(reply.body)
    except ValueError:
        return reply
    if not isinstance(record, dict):
        return reply
    change(record)
    return attrs.evolve(reply, body=dumps(record))
