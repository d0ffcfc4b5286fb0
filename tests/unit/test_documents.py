"""A document's bytes (serialize_document, dumps) and its identity (document_key)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing_async import (
    DocumentTooLargeError,
    InvoicingClient,
    Outcome,
    OutcomeStatus,
    ValidationError,
    document_key,
    outcome_from_dict,
    outcome_to_dict,
)
from invoicing_async._doc.document import dumps, serialize_document


def test_serialize_mapping_is_compact_utf8():
    """A mapping becomes compact UTF-8 JSON with non-ASCII text kept as is."""
    body = serialize_document({"Issuer": {"City": "Αθήνα"}, "Total": 12.5})
    assert body == '{"Issuer":{"City":"Αθήνα"},"Total":12.5}'.encode()


def test_serialize_bytes_unchanged():
    """Bytes are sent exactly as given, so callers control every byte."""
    raw = b'{ "already":  "serialised" }'
    assert serialize_document(raw) == raw
    assert serialize_document(bytearray(raw)) == raw


@pytest.mark.parametrize("document", [{"when": dt.datetime.now()}, {"x": float("nan")}, [1, 2], 5])
def test_serialize_refuses_what_json_cannot_carry(document):
    """Non-serialisable documents raise ValidationError with no status: nothing was sent."""
    with pytest.raises(ValidationError) as info:
        serialize_document(document)
    assert info.value.status is None


def test_dumps_is_compact_and_refuses_nan():
    """The one JSON encoder: compact, UTF-8, and no NaN (which is not JSON)."""
    assert dumps({"a": [1, "ά"]}) == '{"a":[1,"ά"]}'.encode()
    with pytest.raises(ValueError, match="Out of range"):
        dumps({"x": float("inf")})


def test_identity_prefers_internal_document_id():
    """DistributionDetails.InternalDocumentId is the identity when present."""
    document = {
        "DistributionDetails": {"InternalDocumentId": "X-1"},
        "Issuer": {"Vat": "094019245"},
        "Series": "A",
        "Number": 1,
    }
    assert document_key(document) == "id:X-1"


def test_identity_from_issuer_series_number():
    """Without an internal id: issuer VAT, series and number."""
    assert document_key({"Issuer": {"Vat": "1"}, "Series": "A", "Number": 7}) == "doc:1/A/7"


def test_identity_is_the_same_for_a_mapping_and_its_bytes():
    """A document sent as bytes has the identity of the mapping it encodes."""
    document = {"Issuer": {"Vat": "1"}, "Series": "A", "Number": 7}
    assert document_key(serialize_document(document)) == document_key(document)


def test_identity_of_anything_else_is_a_content_hash_independent_of_key_order():
    """Otherwise a SHA-256 of the canonical JSON: key order does not change it."""
    assert document_key({"a": 1, "b": 2}) == document_key({"b": 2, "a": 1})
    assert document_key({"a": 1}).startswith("sha256:")
    assert document_key(b"not json").startswith("sha256:")


@pytest.mark.parametrize(
    "document",
    [
        {1: "one", "1": "uno"},
        {"Details": [{"x": {True: 1, "true": 2}}]},
        {"a": {None: 1, "null": 2}},
        {"n": {-1.5: 1, "-1.5": 2}},
        {"deep": [[{"k": {10**20: 1, str(10**20): 2}}]]},
    ],
)
def test_keys_that_collide_in_json_are_refused(document):
    """Keys that JSON writes the same way ({1: …, "1": …}, nested anywhere) would send
    an object with a repeated key: refused locally, nothing sent."""
    with pytest.raises(ValidationError, match="same JSON key") as info:
        serialize_document(document)
    assert info.value.status is None


_KEYS = st.one_of(
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)


def _written(key: Any) -> str:
    """The JSON key ``json`` writes for ``key``."""
    return json.loads(json.dumps({key: 0})).popitem()[0]


@given(
    st.lists(st.tuples(_KEYS, st.booleans()), max_size=5),
    st.sampled_from(["t1", "-", "x", "1"]),
    st.integers(0, 2),
)
def test_every_collision_is_found_however_deep(keys, other, depth):
    """Whatever the keys (and a string key written like one of them, or not), a document
    is refused exactly when two keys of one object become the same JSON key: the fast
    pre-check never lets one through."""
    mapping: dict[Any, Any] = {other: 0}
    for key, twin in keys:
        mapping[key] = 1
        if twin:
            mapping[_written(key)] = 2
    written = [_written(key) for key in mapping]
    document: dict[Any, Any] = mapping
    for _ in range(depth):
        document = {"Wrapper": [document]}
    if len(set(written)) < len(written):
        with pytest.raises(ValidationError, match="same JSON key"):
            serialize_document(document)
    else:
        assert json.loads(serialize_document(document)) == json.loads(json.dumps(document))


@pytest.mark.parametrize(
    "document",
    [
        {1: "one", 2: "two"},
        {"1": "a string key that looks like a number"},
        {"text": 'a value with "1": inside', "1": "x"},
        {"Line1": {"true": 1}, "null": None},
    ],
)
def test_keys_that_do_not_collide_are_sent(document):
    """Non-string keys that do not collide, and string keys that merely look like
    numbers, are serialised as JSON writes them."""
    body = serialize_document(document)
    assert json.loads(body) == json.loads(json.dumps(document))


# --- the size limit ------------------------------------------------------------------------


def test_a_mapping_over_the_limit_is_refused_with_its_size_and_the_limit():
    """A mapping whose compact JSON exceeds the limit is refused before it is sent:
    DocumentTooLargeError (a ValidationError, status None) with the size in bytes and
    the limit, in its message and as attributes. At the limit it is sent."""
    document = {"Notes": "x" * 100}
    size = len(serialize_document(document))
    assert serialize_document(document, size) == dumps(document)
    with pytest.raises(DocumentTooLargeError) as info:
        serialize_document(document, size - 1)
    error = info.value
    assert isinstance(error, ValidationError)
    assert (error.status, error.size, error.limit) == (None, size, size - 1)
    assert f"{size:,} bytes" in error.message
    assert f"{size - 1:,} bytes" in error.message


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview, str])
def test_bytes_are_measured_as_given(kind):
    """Bytes (and bytearray, memoryview) count as they are; text counts in UTF-8 bytes
    ("é" is 2); over the limit they are refused, at it they are sent unchanged."""
    text = '{"Notes": "' + "é" * 50 + '"}'
    raw = text.encode()
    document = text if kind is str else kind(raw)
    assert serialize_document(document, len(raw)) == raw
    with pytest.raises(DocumentTooLargeError) as info:
        serialize_document(document, len(raw) - 1)
    assert info.value.size == len(raw)


def test_too_large_survives_the_ledger_and_pickling():
    """A DocumentTooLargeError written to a ledger record (or pickled for a process
    pool) comes back as itself, with its size and limit."""
    import pickle  # noqa: PLC0415

    error = DocumentTooLargeError("too large", size=12, limit=10)
    outcome = Outcome(index=0, key="k", status=OutcomeStatus.REJECTED, error=error)
    for clone in (
        outcome_from_dict(json.loads(json.dumps(outcome_to_dict(outcome)))).error,
        pickle.loads(pickle.dumps(error)),  # noqa: S301
    ):
        assert type(clone) is DocumentTooLargeError
        assert (clone.size, clone.limit, clone.message) == (12, 10, "too large")


@pytest.mark.parametrize("limit", [0, -1, 1.5, "10M", True])
def test_the_client_refuses_a_limit_that_is_not_a_size(limit):
    """max_document_size must be a positive number of bytes."""
    with pytest.raises(ValueError, match="max_document_size"):
        InvoicingClient("http://127.0.0.1:1", "tin", "key", max_document_size=limit)


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"Details": [{"NetTotal": 1.5}, {"NetTotal": -(10**10**6)}]}, "Details[1].NetTotal"),
        ({"Series": "A", "Number": 10**4300}, "Number"),
    ],
)
def test_an_integer_python_does_not_write_is_refused_naming_its_field(document, field):
    """A dict holding an int of more digits than Python writes as text: a ValidationError
    naming the field and its digits (it said only "Exceeds the limit (4300 digits) for
    integer string conversion"), without the digits."""
    with pytest.raises(ValidationError) as caught:
        serialize_document(document)
    message = str(caught.value)
    assert f"{field} is an integer of " in message
    assert len(message) < 200
