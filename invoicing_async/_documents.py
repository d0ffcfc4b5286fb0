"""A document's bytes and its identity.

The library imposes no schema: a document is any JSON-serialisable mapping, or the exact
bytes to send. Two questions are asked of it, and answered here only:

* :func:`serialize_document`: which bytes go on the wire (compact UTF-8 JSON, or the
  caller's own bytes unchanged);
* :func:`document_key`: which identity the provider detects duplicates by, so that a
  re-sent document is recognised and a resumed batch skips what it already settled.

:func:`dumps` is the one compact JSON encoder of the package (documents, request bodies,
the sandbox's replies).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ._errors import ValidationError

__all__ = ["Document", "document_key", "dumps", "serialize_document"]

#: What the library accepts as a document.
Document = Mapping[str, Any] | bytes | bytearray | memoryview | str


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, non-ASCII kept as is; ``NaN`` and infinities refused.

    :raises ValueError: for ``NaN``/infinities (not JSON); :raises TypeError: for values
        JSON cannot represent.
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
        "utf-8"
    )


def serialize_document(document: Document) -> bytes:
    """The exact bytes to send for ``document``.

    A mapping becomes compact UTF-8 JSON (non-ASCII kept as is); bytes are sent unchanged,
    so a caller that already serialised (or signed) the document controls every byte.
    Anything else, or a mapping that is not JSON-serialisable, raises
    :class:`~invoicing_async.ValidationError` with ``status=None``: nothing was sent.
    """
    if isinstance(document, (bytes, bytearray, memoryview)):
        return bytes(document)
    if isinstance(document, str):
        return document.encode("utf-8")
    if not isinstance(document, Mapping):
        raise ValidationError(
            f"a document must be a mapping or bytes, not {type(document).__name__}"
        )
    try:
        return dumps(document)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"the document cannot be serialised to JSON: {exc}") from None


def document_key(document: Document) -> str:
    """The identity the provider detects duplicates by.

    ``DistributionDetails.InternalDocumentId`` when present (``id:…``), else issuer VAT,
    series and number (``doc:…``), else a SHA-256 of the serialised document
    (``sha256:…``).
    """
    data: Any = document
    if isinstance(document, (bytes, bytearray, memoryview, str)):
        raw = document.encode() if isinstance(document, str) else bytes(document)
        try:
            data = json.loads(raw)
        except ValueError:
            return "sha256:" + hashlib.sha256(raw).hexdigest()
    if isinstance(data, Mapping):
        distribution = data.get("DistributionDetails")
        if isinstance(distribution, Mapping) and distribution.get("InternalDocumentId"):
            return f"id:{distribution['InternalDocumentId']}"
        issuer = data.get("Issuer")
        vat = issuer.get("Vat") if isinstance(issuer, Mapping) else None
        if vat and data.get("Series") is not None and data.get("Number") is not None:
            return f"doc:{vat}/{data['Series']}/{data['Number']}"
    try:
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        canonical = repr(data)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "replace")).hexdigest()
