"""Secrets out of what the provider says: error messages, bodies and result records.

Providers sometimes echo what they were sent ("API key XYZ is not valid"), and a record
may carry it too. The library's own messages never contain secrets; these functions
keep the provider's text from leaking the API key, access tokens or refresh tokens into
errors, outcomes, logs and the journal.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

import attrs

from .errors import DuplicateDocumentError, ForeignRecordError, InvoicingError
from .models import DocumentResult

__all__ = ["found_in", "needles", "redact", "redact_error", "redact_record"]

_MARK = "[redacted]"
#: Record fields that hold provider text (the rest are numbers, dates, enums).
_TEXT_FIELDS = tuple(
    field.name
    for field in attrs.fields(DocumentResult)
    if field.name not in ("mark", "cancellation_mark", "date_issued", "status", "success")
)


def redact(text: str, secrets: Collection[str]) -> str:
    """Replace every occurrence of a secret (4 characters or more) in ``text``."""
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, _MARK)
    return text


def redact_json(value: Any, secrets: Collection[str]) -> Any:
    """A JSON value with every secret scrubbed from its strings (keys included)."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, Mapping):
        return {redact_json(k, secrets): redact_json(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v, secrets) for v in value]
    return value


def needles(secrets: Iterable[str]) -> tuple[bytes, ...]:
    """The secrets as :func:`found_in` looks for them: encoded, those long enough to tell."""
    return tuple(s.encode("utf-8") for s in secrets if len(s) >= 4)


def found_in(body: bytes, encoded: Iterable[bytes]) -> bool:
    """Whether the raw ``body`` may hold a secret (``encoded``: see :func:`needles`).

    A cheap test before a record's scan.
    A JSON escape (a backslash sequence) could hide a secret from a byte search, so any
    backslash in the body counts as "maybe".
    """
    return b"\\" in body or any(needle in body for needle in encoded)


def redact_record(record: DocumentResult, secrets: Collection[str]) -> DocumentResult:
    """``record`` itself when it holds no secret, else a copy with them scrubbed."""
    changes = {}
    for name in _TEXT_FIELDS:
        value = getattr(record, name)
        if value is None or isinstance(value, (int, float)):
            continue
        scrubbed = redact_json(value, secrets)
        if scrubbed != value:
            changes[name] = scrubbed
    return attrs.evolve(record, **changes) if changes else record


def redact_error(error: InvoicingError, secrets: Collection[str]) -> InvoicingError:
    """Scrub ``secrets`` from an error's message, body and record, in place; return it."""
    error.message = redact(error.message, secrets)
    error.args = (error.message,)
    if error.body is not None:
        error.body = redact_json(error.body, secrets)
    for name in ("error_description", "error"):
        value = getattr(error, name, None)
        if isinstance(value, str):
            setattr(error, name, redact(value, secrets))
    if isinstance(error, (DuplicateDocumentError, ForeignRecordError)) and error.result is not None:
        error.result = redact_record(error.result, secrets)
    return error
