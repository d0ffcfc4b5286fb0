"""Secrets out of what the provider says: errors, bodies and result records."""

from __future__ import annotations

import json

from invoicing_async import AuthenticationError, DocumentResult, DuplicateDocumentError
from invoicing_async._core.redact import found_in, needles, redact_error, redact_record

KEY = "KEY-12345"


def test_an_error_echoing_a_secret_is_scrubbed_everywhere():
    """A provider that echoes the API key back does not leak it through our error."""
    error = AuthenticationError(
        f"document submission: API key {KEY} is not valid",
        status=401,
        body={"message": f"API key {KEY} is not valid", "detail": [KEY], KEY: 1},
        error_description=f"bad {KEY}",
    )
    redact_error(error, [KEY])
    for text in (str(error), repr(error), json.dumps(error.body), error.error_description):
        assert KEY not in text


def test_a_record_echoing_a_secret_is_scrubbed_and_a_clean_one_kept_as_is():
    """Text fields and extra members are scrubbed; numbers stay; a clean record is the
    same object (no copy on the hot path)."""
    record = DocumentResult(
        mark=400001000000001,
        message=f"accepted with key {KEY}",
        qr_code_string="https://x/v/abc",
        extra={"echo": {"apiKey": KEY}},
    )
    scrubbed = redact_record(record, [KEY])
    assert scrubbed.mark == record.mark
    assert scrubbed.message == "accepted with key [redacted]"
    assert scrubbed.extra == {"echo": {"apiKey": "[redacted]"}}
    clean = DocumentResult(mark=1, message="accepted")
    assert redact_record(clean, [KEY]) is clean


def test_the_record_of_a_duplicate_is_scrubbed_with_its_error():
    """A 409's original record is scrubbed along with the error that carries it."""
    error = DuplicateDocumentError("dup", result=DocumentResult(message=f"key {KEY}"))
    redact_error(error, [KEY])
    assert KEY not in repr(error.result)


def test_the_byte_precheck_never_misses_an_escaped_secret():
    """The pre-check on the raw body answers "maybe" for a secret, and for any escape
    that could hide one; a short secret (under 4 characters) is not searched for."""
    assert found_in(f'{{"m":"{KEY}"}}'.encode(), needles([KEY]))
    assert found_in(b'{"m":"KEY\\u002d12345"}', needles([KEY]))
    assert not found_in(b'{"m":"nothing here"}', needles([KEY, "ab"]))
