"""The provider's side of the wire, written independently of the client.

The sandbox is the oracle client tests are checked against, so it reads and writes the
API's shapes on its own: its JSON encoder, its reading of ISO 8601 timestamps, and the
document identity duplicates are detected by. A client that misread the provider's
record or its identity rule would then disagree with the sandbox in tests, instead of
sharing the misreading.

The identity rule is the one the API documents and :func:`invoicing_async.document_key`
implements too: ``DistributionDetails.InternalDocumentId`` (``id:…``), else issuer VAT,
series and number (``doc:…``), else a SHA-256 of the document's canonical JSON
(``sha256:…``). Tests find what a client sent with
``sandbox.committed[document_key(document)]``. The fields themselves are read as the
service binds them (names in any case, the VAT number's ``EL`` prefix dropped), with the
one reader of documents the client's seam gives: how the provider reads a field is a
fact about the provider, written once; which fields make the identity is written here.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from typing import Any

from invoicing_async._for_sandbox import field, path, tin

__all__ = ["document_identity", "dumps", "format_timestamp", "parse_timestamp"]

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, as the service writes it."""
    return _ENCODER.encode(value).encode("utf-8")


_ISO = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d)(?::(\d\d)(?:[.,](\d{1,9}))?)?"
    r"\s*(Z|z|[+-]\d\d(?::?\d\d)?)?"
)


def parse_timestamp(text: str) -> dt.datetime:
    """An ISO 8601 date-time as the service reads it (no offset: UTC).

    :raises ValueError: not such a timestamp.
    """
    match = _ISO.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not an ISO 8601 date-time: {text[:40]!r}")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    zone = dt.timezone.utc
    if offset and offset not in ("Z", "z"):
        digits = offset[1:].replace(":", "")
        delta = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        zone = dt.timezone(delta if offset[0] == "+" else -delta)
    return dt.datetime(
        int(year),
        int(month),
        int(day),
        int(hour),
        int(minute),
        int(second or 0),
        int((fraction or "0")[:6].ljust(6, "0")),
        zone,
    )


def format_timestamp(value: dt.datetime) -> str:
    """An aware datetime as the service writes it: UTC, milliseconds, ``Z``."""
    utc = value.astimezone(dt.timezone.utc)
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:"
        f"{utc.second:02d}.{utc.microsecond // 1000:03d}Z"
    )


def document_identity(document: Any) -> str:
    """The identity the service detects duplicates by (see the module docstring)."""
    if isinstance(document, dict):
        internal = path(document, "DistributionDetails", "InternalDocumentId")
        if internal:
            return f"id:{internal}"
        vat = tin(path(document, "Issuer", "Vat"))
        series, number = field(document, "Series"), field(document, "Number")
        if vat and series is not None and number is not None:
            return f"doc:{vat}/{series}/{number}"
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
