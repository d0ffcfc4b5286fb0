"""The provider's rules about documents, as pure functions.

What the service checks in a document (the fields it requires and their shapes, its
amounts; the issuer's VAT number against the API key), what it derives from one (the tax
authority's ``uid``, the result record), how a cancellation names its document, and the
shape of an issuer's TIN.

The service reads a document as ASP.NET binds JSON (names in any case, the issuer's VAT
number with or without ``EL``), and the rules of a document's fields are the client's
own (``invoicing_async.documents.check``): both are the client's, through its seam, so
that the sandbox refuses exactly what ``check`` reports as an error, naming the same
field, but for a member written twice (an error of ``check``: the client's own refusal).

A member written twice (``"Series": "A"`` beside ``"series": "B"``, or one name twice in
the text) is bound as System.Text.Json binds it by default, ASP.NET Core's reader
(``JsonSerializerOptions.AllowDuplicateProperties`` is true unless a service turns it
off, and ``PropertyNameCaseInsensitive`` is on in its web defaults): the last value read
is kept, and the document is committed with it (:func:`parse_document`). Not refused:
a service that does is configured so, and one that does not commits what the client did
not mean, which is the hazard a client must be tested against (the client refuses such
a document before sending it: ``AmbiguousDocumentError``).

A document's identity for duplicate detection is the library's own rule,
:func:`invoicing_async.document_key`, so that ``sandbox.committed[document_key(doc)]``
finds what a client sent.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import uuid
from typing import TYPE_CHECKING, Any

from invoicing_async import DocumentResult, result_from_dict
from invoicing_async._for_sandbox import (
    REQUIRED_FIELDS,
    Problem,
    bound,
    check_digit,
    errors_of,
    field,
    first,
    path,
    tin,
)
from invoicing_async._for_sandbox import check_document as rules_of

from ._replies import Reply, error_reply
from ._wire import dumps, format_timestamp, parse_timestamp

if TYPE_CHECKING:
    import random

__all__ = [
    "MAX_DEPTH",
    "REQUIRED_FIELDS",
    "build_record",
    "cancellation_mark",
    "check_document",
    "invoice_type",
    "invoice_uid",
    "issuer_vat",
    "mark_of",
    "parse_document",
    "random_tin",
    "with_check_digit",
]

_DATE_RE = re.compile(r"\d{4}-\d\d-\d\d")


def random_tin(rng: random.Random) -> str:
    """A 9-digit TIN whose last digit is a valid check digit (the Greek AFM rule)."""
    return with_check_digit("".join(str(rng.randrange(10)) for _ in range(8)))


def with_check_digit(digits: str) -> str:
    """8 digits and their check digit (the Greek AFM rule): a valid 9-digit TIN."""
    return digits + check_digit(digits)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


#: The service's JSON reader: ``NaN`` and infinities refused, a member written twice
#: bound as the service binds it (names ignoring case, the last value read kept).
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=bound)


#: Deepest nesting of arrays and objects a document may have: the default ``MaxDepth``
#: of the JSON readers such services run on (System.Text.Json, Json.NET). An invoice
#: is four or five levels deep.
MAX_DEPTH = 64
#: A ``\\u`` escape of a UTF-16 surrogate: the text may hold one without its pair.
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def parse_document(body: bytes) -> dict[str, Any] | Reply:
    r"""The JSON object in ``body``, or the 400 the service answers.

    ``NaN`` and ``Infinity`` are refused as the service's JSON parser refuses them
    (Python's would accept them), and so is what such a parser cannot represent or a
    hostile client sends to exhaust it: text that is not UTF-8, nesting deeper than
    :data:`MAX_DEPTH` levels, a ``\u`` escape of half a surrogate pair. A member written
    twice, in two spellings or one, is bound as the service binds it: once, with the
    last value read (under the first spelling), as the document committed holds it.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return error_reply(400, f"malformed JSON: not UTF-8 (byte {exc.start})")
    try:
        document = _DECODER.decode(text)
    except RecursionError:
        return _too_deep()
    except ValueError as exc:
        return error_reply(400, f"malformed JSON: {str(exc)[:200]}")
    if not isinstance(document, dict):
        return error_reply(400, "malformed JSON: the document must be a JSON object")
    if _deeper_than(document, MAX_DEPTH):
        return _too_deep()
    if _SURROGATE.search(text):
        try:
            dumps(document)
        except UnicodeEncodeError:
            return error_reply(400, "malformed JSON: a \\u escape of half a surrogate pair")
    return document


def _too_deep() -> Reply:
    return error_reply(400, f"malformed JSON: nested more than {MAX_DEPTH} levels deep")


def _deeper_than(document: Any, limit: int) -> bool:
    """Whether ``document`` nests arrays and objects more than ``limit`` levels deep.

    Level by level, containers only, without recursion.
    """
    level, depth = [document], 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for container in level:
            items = container.values() if isinstance(container, dict) else container
            below.extend([item for item in items if isinstance(item, (dict, list))])
        level = below
    return False


def check_document(document: dict[str, Any], *, require: bool = True) -> list[Problem]:
    """The provider's validation: the problems it refuses a document for (400).

    The client's rules (its ``documents.check``), errors only: a warning is never a
    refusal. With ``require=False`` (a lenient sandbox) a field is checked only when
    present. The issuer's VAT number is compared with the API key separately
    (:func:`issuer_vat`), because the service answers a mismatch with 401, not 400: its
    TIN is not checked again here.
    """
    return errors_of(rules_of(document, require=require, issuer_known=True))


def issuer_vat(document: dict[str, Any]) -> str | None:
    """The TIN ``Issuer.Vat`` names (any case; ``EL`` dropped), when present."""
    vat = tin(path(document, "Issuer", "Vat"))
    return None if vat is None else vat.strip()


def _issue_datetime(text: str) -> dt.datetime:
    text = text.strip()
    if _DATE_RE.fullmatch(text):
        return dt.datetime.combine(dt.date.fromisoformat(text), dt.time(), dt.timezone.utc)
    return parse_timestamp(text)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def invoice_type(document: dict[str, Any]) -> str:
    """The document's type code (``InvoiceTypeCode``, else ``InvoiceType``); ``""`` if none."""
    return _text(first(document, ("InvoiceTypeCode", "InvoiceType")))


def invoice_uid(document: dict[str, Any]) -> str:
    """The tax authority's uid: upper-case SHA-1 hex of six fields joined by ``-``.

    ``{vat}-{yyyy-MM-dd}-{branch}-{type}-{series}-{number}``, as the authority documents
    it (``999999999-2020-10-22-0-1.1-A-2``); a missing field counts as empty, a missing
    branch as 0. The type is the code (``InvoiceTypeCode``, else ``InvoiceType``), the
    branch ``BranchCode`` (else ``Branch``).
    """
    issuer = field(document, "Issuer")
    branch = first(issuer, ("BranchCode", "Branch")) if isinstance(issuer, dict) else 0
    date = ""
    issued = field(document, "DateIssued")
    if isinstance(issued, str):
        try:
            date = _issue_datetime(issued).date().isoformat()
        except ValueError:
            date = issued
    parts = (
        issuer_vat(document) or "",
        date,
        _text(0 if branch is None else branch),
        invoice_type(document),
        _text(field(document, "Series")),
        _text(field(document, "Number")),
    )
    return hashlib.sha1("-".join(parts).encode("utf-8"), usedforsecurity=False).hexdigest().upper()


def build_record(
    document: dict[str, Any],
    *,
    identity: str,
    scope: tuple[str, str],
    mark: int,
    domain: str,
    salt: str,
    now: dt.datetime,
) -> tuple[DocumentResult, bytes]:
    """The 201 result record for a newly committed document, and its JSON bytes.

    Values that are random on the real service (signatures, codes, the unique id) are
    derived from ``salt``, the ``scope`` (environment and issuer) and the identity, so a
    seeded sandbox answers the same document with the same record whatever the order of
    arrival, and two issuers' documents of one internal id get two signatures (the
    public url names one document); only the ``mark`` follows the order of commits, as
    on the real service.
    """
    environment, client_id = scope
    scoped = f"{salt}\x00{environment}\x00{client_id}\x00{identity}"
    seed = hashlib.sha256(scoped.encode()).digest()

    def derived(label: bytes) -> bytes:
        return hashlib.sha256(seed + label).digest()

    uid = invoice_uid(document)
    signature = derived(b"signature")[:20].hex().upper()
    authentication_code = derived(b"authentication")[:20].hex().upper()
    unique_id = str(uuid.UUID(bytes=derived(b"uuid")[:16], version=4))
    issued = field(document, "DateIssued")
    date_issued = now
    if isinstance(issued, str):
        try:
            date_issued = _issue_datetime(issued)
        except ValueError:  # pragma: no cover - validated before
            date_issued = now
    # The record carries milliseconds only: what a client parses back must compare equal.
    date_issued = date_issued.replace(microsecond=date_issued.microsecond // 1000 * 1000)
    internal = path(document, "DistributionDetails", "InternalDocumentId")
    internal_id = str(internal) if internal else identity
    url = f"{domain}/v/{signature}"
    series, number = field(document, "Series"), field(document, "Number")
    # The record as the service writes it (its own writer, not the client's reader).
    wire: dict[str, Any] = {
        "success": True,
        "message": "Document accepted",
        "statusCode": "Success",
        "integritySignature": derived(b"integrity").hex(),
        "signature": signature,
        "uid": uid,
        "mark": mark,
        "cancellationMark": None,
        "authenticationCode": authentication_code,
        "authorityDataResponse": {
            "statusCode": "Success",
            "index": 1,
            "invoiceUid": uid,
            "invoiceMark": mark,
            "authenticationCode": authentication_code,
        },
        "status": "Unknown",
        "series": None if series is None else str(series),
        "number": None if number is None else str(number),
        "dateIssued": format_timestamp(date_issued),
        "domain": domain,
        "url": url,
        "qrCodeString": url,
        "erpQrCode": f"{domain}/erp/{unique_id}",
        "uniqueId": unique_id,
        "internalId": internal_id,
    }
    return result_from_dict(wire), dumps(wire)


#: Digits a mark may have, and the limit it is below (a 64-bit integer, a .NET ``long``).
_MARK_DIGITS = 19
_MARK_LIMIT = 2**63


def mark_of(value: Any) -> int | None:
    """A mark: a 64-bit integer, as JSON or as its ASCII digits; ``None`` for anything else."""
    if isinstance(value, str):
        text = value.strip()
        # ASCII digits only ("²".isdigit() is true), and no more than a mark has: int()
        # of thousands of digits raises.
        if not (text.isascii() and text.isdigit() and len(text) <= _MARK_DIGITS):
            return None
        value = int(text)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MARK_LIMIT:
        return value
    return None


def cancellation_mark(query: str | None, body: bytes) -> int | Reply:
    """The mark to cancel, from the JSON body (``{"mark": …}``) or the query string."""
    mark: Any = query
    if body.strip():
        data = parse_document(body)
        if isinstance(data, Reply):
            return data
        mark = data.get("mark", mark)
    found = mark_of(mark)
    if found is not None:
        return found
    message = "an integer is required"
    return error_reply(400, f"mark: {message}", errors=[{"field": "mark", "message": message}])
