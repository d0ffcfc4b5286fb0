"""The sandbox's records and the provider's document rules, as pure functions.

Everything here is synchronous and free of I/O: the checks the provider makes on a
document, its identity for duplicate detection, the tax authority's ``uid`` and the result
record. The records the sandbox exposes to tests (:class:`CommittedDocument`,
:class:`RequestRecord`, :class:`SandboxStats`, :class:`SandboxEnvironment`) live here too.
"""

from __future__ import annotations

import collections
import datetime as dt
import hashlib
import json
import math
import re
import uuid
from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._convert import parse_timestamp, result_to_json
from invoicing_async._documents import document_key
from invoicing_async._models import DocumentResult, DocumentStatus

from ._faults import Reply

if TYPE_CHECKING:
    import random

__all__ = [
    "CommittedDocument",
    "FieldError",
    "Reply",
    "RequestRecord",
    "SandboxEnvironment",
    "SandboxStats",
    "build_record",
    "check_document",
    "document_identity",
    "dumps",
    "error_reply",
    "invoice_uid",
    "oauth_error",
    "parse_document",
    "random_tin",
]

_DATE_RE = re.compile(r"\d{4}-\d\d-\d\d")
_STATUS_CODES = {
    400: "BadRequest",
    401: "Unauthorized",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    413: "PayloadTooLarge",
    415: "UnsupportedMediaType",
}
#: OAuth answers must not be cached (RFC 6749 section 5.1).
NO_STORE = (("Cache-Control", "no-store"), ("Pragma", "no-cache"))


@attrs.frozen
class SandboxEnvironment:
    """One environment of the sandbox (``test``, ``production`` …) and a client of it.

    .. versionadded:: 0.1.0
    """

    name: str
    #: ``http://127.0.0.1:PORT/{name}``: pass it as the client's ``base_url``.
    base_url: str
    #: The issuer's TIN (9 digits with a valid check digit).
    client_id: str
    #: The API key.
    client_secret: str = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class CommittedDocument:
    """A document the sandbox holds: the ground truth tests compare clients against.

    .. versionadded:: 0.1.0
    """

    #: The identity duplicates are detected by (``id:…``, ``doc:…`` or ``sha256:…``).
    identity: str
    environment: str
    client_id: str
    #: The result record answered with 201 (and sent unchanged with every 409).
    record: DocumentResult
    #: The document as parsed JSON.
    document: dict[str, Any] = attrs.field(eq=False, hash=False, repr=False)
    #: The document's bytes exactly as received (after decryption).
    body: bytes = attrs.field(repr=False)
    #: Whether it arrived encrypted (``/Invoice/secure``).
    encrypted: bool
    #: Times it was committed: always 1, the invariant a test of exactly-once checks.
    commits: int = 1
    #: Set once the document was cancelled (``/Invoice/cancelDeliveryNote``).
    cancellation_mark: int | None = None


@attrs.frozen(kw_only=True)
class RequestRecord:
    """One request the sandbox received, in the :attr:`Sandbox.journal`.

    .. versionadded:: 0.1.0
    """

    #: Arrival order, from 1.
    seq: int
    #: The environment named by the path, or ``None`` for an unknown one.
    environment: str | None
    method: str
    #: The path below the environment, e.g. ``/Invoice/secure``.
    path: str
    #: The status line sent, or ``None`` when the connection was dropped without one.
    status: int | None
    #: The injected fault's name (``status:503``, ``commit_then_drop`` …), or ``None``.
    fault: str | None = None
    #: The document's identity, when the request carried a readable document.
    identity: str | None = None
    #: The authenticated client, when known.
    client_id: str | None = None
    #: For documents: this request's attempt number for that identity (from 1).
    attempt: int | None = None
    #: Query parameters as received (``sendMethod``, ``timeStamp`` …).
    query: dict[str, str] = attrs.field(factory=dict, eq=False, hash=False)


@attrs.define
class SandboxStats:
    """Counters since the sandbox started (or was last reset).

    .. versionadded:: 0.1.0
    """

    #: Requests to ``/oauth/token`` (both grants).
    token_requests: int = 0
    #: Of those, ``grant_type=refresh_token``.
    refresh_requests: int = 0
    #: Document submissions by outcome: the status line sent (201, 409, 400 …), or
    #: ``"reset"`` (connection reset before processing) / ``"drop"`` (closed without a
    #: status line after processing, or a hung request given up).
    submissions: collections.Counter[int | str] = attrs.field(factory=collections.Counter)


@attrs.frozen
class FieldError:
    """One problem with a document field, as the 400 body lists it."""

    field: str
    message: str


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, the way the sandbox writes every body."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


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


def random_tin(rng: random.Random) -> str:
    """A 9-digit TIN whose last digit is a valid check digit (the Greek AFM rule)."""
    digits = [rng.randrange(10) for _ in range(8)]
    total = sum(d << (8 - i) for i, d in enumerate(digits))
    return "".join(map(str, digits)) + str(total % 11 % 10)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_document(body: bytes) -> dict[str, Any] | Reply:
    """The JSON object in ``body``, or the 400 the service answers.

    ``NaN`` and ``Infinity`` are refused as the service's JSON parser refuses them
    (Python's would accept them).
    """
    try:
        document = json.loads(body, parse_constant=_reject_constant)
    except ValueError as exc:  # UnicodeDecodeError included
        return error_reply(400, f"malformed JSON: {str(exc)[:200]}")
    if not isinstance(document, dict):
        return error_reply(400, "malformed JSON: the document must be a JSON object")
    return document


def _number_like(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_date(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be an ISO 8601 date or date-time string"
    try:
        _issue_datetime(value)
    except ValueError:
        return "must be an ISO 8601 date or date-time"
    return None


def _check_key(value: Any) -> str | None:
    if (isinstance(value, str) and value.strip()) or (
        isinstance(value, int) and not isinstance(value, bool)
    ):
        return None
    return "must be a non-empty string or an integer"


def _check_type(value: Any) -> str | None:
    return None if isinstance(value, str) else "must be a string"


def _check_details(value: Any) -> str | None:
    return None if isinstance(value, list) and value else "must be a non-empty list"


def _check_object(value: Any) -> str | None:
    return None if isinstance(value, dict) else "must be an object"


def _check_gross(value: Any) -> str | None:
    if _number_like(value) and math.isfinite(value) and value >= 0:
        return None
    return "must be a non-negative number"


_CHECKS: tuple[tuple[str, Any], ...] = (
    ("Issuer", _check_object),
    ("Series", _check_key),
    ("Number", _check_key),
    ("DateIssued", _check_date),
    ("InvoiceType", _check_type),
    ("Details", _check_details),
    ("Summaries", _check_object),
)


def check_document(document: dict[str, Any]) -> list[FieldError]:
    """The provider's minimal validation: each field is checked only when present.

    The issuer's VAT number is checked separately (:func:`issuer_vat`), because the
    service answers a mismatch with 401, not 400.
    """
    errors = [
        FieldError(name, problem)
        for name, check in _CHECKS
        if name in document and (problem := check(document[name]))
    ]
    summaries = document.get("Summaries")
    if isinstance(summaries, dict) and "TotalGrossValue" in summaries:
        problem = _check_gross(summaries["TotalGrossValue"])
        if problem:
            errors.append(FieldError("Summaries.TotalGrossValue", problem))
    return errors


def issuer_vat(document: dict[str, Any]) -> str | None:
    """``Issuer.Vat`` as text, when present."""
    issuer = document.get("Issuer")
    if isinstance(issuer, dict):
        vat = issuer.get("Vat")
        if vat is not None and vat != "":
            return str(vat).strip()
    return None


def document_identity(document: dict[str, Any]) -> str:
    """What duplicates are detected by: the rule of :func:`invoicing_async.document_key`.

    ``DistributionDetails.InternalDocumentId`` when present, else issuer VAT, series and
    number, else a SHA-256 of the canonical JSON. One definition, so that
    ``sandbox.committed[document_key(doc)]`` finds what the client sent.
    """
    return document_key(document)


def _issue_datetime(text: str) -> dt.datetime:
    text = text.strip()
    if _DATE_RE.fullmatch(text):
        return dt.datetime.combine(dt.date.fromisoformat(text), dt.time(), dt.timezone.utc)
    return parse_timestamp(text)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def invoice_uid(document: dict[str, Any]) -> str:
    """The tax authority's uid: upper-case SHA-1 hex of six fields joined by ``-``.

    ``{vat}-{yyyy-MM-dd}-{branch}-{type}-{series}-{number}``, as the authority documents
    it (``999999999-2020-10-22-0-1.1-A-2``); a missing field counts as empty, a missing
    branch as 0.
    """
    issuer = document.get("Issuer")
    branch = issuer.get("Branch", 0) if isinstance(issuer, dict) else 0
    date = ""
    issued = document.get("DateIssued")
    if isinstance(issued, str):
        try:
            date = _issue_datetime(issued).date().isoformat()
        except ValueError:
            date = issued
    parts = (
        issuer_vat(document) or "",
        date,
        _text(0 if branch is None else branch),
        _text(document.get("InvoiceType")),
        _text(document.get("Series")),
        _text(document.get("Number")),
    )
    return hashlib.sha1("-".join(parts).encode("utf-8"), usedforsecurity=False).hexdigest().upper()


def build_record(
    document: dict[str, Any],
    *,
    identity: str,
    mark: int,
    domain: str,
    salt: str,
    now: dt.datetime,
) -> tuple[DocumentResult, bytes]:
    """The 201 result record for a newly committed document, and its JSON bytes.

    Values that are random on the real service (signatures, codes, the unique id) are
    derived from ``salt`` and the identity, so a seeded sandbox answers the same document
    with the same record whatever the order of arrival; only the ``mark`` follows the
    order of commits, as on the real service.
    """
    seed = hashlib.sha256(f"{salt}\x00{identity}".encode()).digest()

    def derived(label: bytes) -> bytes:
        return hashlib.sha256(seed + label).digest()

    uid = invoice_uid(document)
    signature = derived(b"signature")[:20].hex().upper()
    authentication_code = derived(b"authentication")[:20].hex().upper()
    unique_id = str(uuid.UUID(bytes=derived(b"uuid")[:16], version=4))
    issued = document.get("DateIssued")
    date_issued = now
    if isinstance(issued, str):
        try:
            date_issued = _issue_datetime(issued)
        except ValueError:  # pragma: no cover - validated before
            date_issued = now
    # The record carries milliseconds only: what a client parses back must compare equal.
    date_issued = date_issued.replace(microsecond=date_issued.microsecond // 1000 * 1000)
    distribution = document.get("DistributionDetails")
    internal_id = (
        str(distribution["InternalDocumentId"])
        if isinstance(distribution, dict) and distribution.get("InternalDocumentId")
        else identity
    )
    url = f"{domain}/v/{signature}"
    series, number = document.get("Series"), document.get("Number")
    record = DocumentResult(
        success=True,
        message="Document accepted",
        status_code="Success",
        integrity_signature=derived(b"integrity").hex(),
        signature=signature,
        uid=uid,
        mark=mark,
        cancellation_mark=None,
        authentication_code=authentication_code,
        authority_data_response={
            "statusCode": "Success",
            "index": 1,
            "invoiceUid": uid,
            "invoiceMark": mark,
            "authenticationCode": authentication_code,
        },
        status=DocumentStatus.UNKNOWN,
        series=None if series is None else str(series),
        number=None if number is None else str(number),
        date_issued=date_issued,
        domain=domain,
        url=url,
        qr_code_string=url,
        erp_qr_code=f"{domain}/erp/{unique_id}",
        unique_id=unique_id,
        internal_id=internal_id,
    )
    data = result_to_json(record)
    # result_to_json leaves out None fields; the service writes cancellationMark: null.
    data["cancellationMark"] = None
    return record, dumps(data)
