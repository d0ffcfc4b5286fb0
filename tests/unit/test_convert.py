"""Conversion of result records: tolerant where providers vary, strict where it matters."""

from __future__ import annotations

import datetime as dt

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing_async import DocumentResult, DocumentStatus
from invoicing_async._core.convert import (
    format_timestamp,
    parse_timestamp,
    result_from_json,
    result_to_json,
)

UTC = dt.timezone.utc


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22T09:15:30.123Z", dt.datetime(2026, 11, 22, 9, 15, 30, 123000, tzinfo=UTC)),
        ("2026-11-22T09:15:30Z", dt.datetime(2026, 11, 22, 9, 15, 30, tzinfo=UTC)),
        ("2026-11-22T09:15:30", dt.datetime(2026, 11, 22, 9, 15, 30, tzinfo=UTC)),
        ("2026-11-22T09:15", dt.datetime(2026, 11, 22, 9, 15, tzinfo=UTC)),
        ("2026-11-22T09:15:30.1234567Z", dt.datetime(2026, 11, 22, 9, 15, 30, 123456, tzinfo=UTC)),
        (
            "2026-11-22T11:15:30.5+02:00",
            dt.datetime(2026, 11, 22, 9, 15, 30, 500000, tzinfo=UTC),
        ),
        ("2026-11-22T04:15:30-0500", dt.datetime(2026, 11, 22, 9, 15, 30, tzinfo=UTC)),
    ],
)
def test_parse_timestamp_variants(text, expected):
    """Milliseconds, none, seven digits, Z, offsets with or without colon all parse."""
    parsed = parse_timestamp(text)
    assert parsed == expected
    assert parsed.tzinfo is not None


@pytest.mark.parametrize("text", ["22/11/2026", "", "2026-13-01T00:00:00Z", "tomorrow"])
def test_parse_timestamp_refuses_garbage(text):
    """Text that is not an ISO 8601 timestamp raises ValueError."""
    with pytest.raises(ValueError):
        parse_timestamp(text)


def test_format_timestamp_utc_millis_z():
    """Timestamps are written in UTC with exactly three fraction digits and Z."""
    value = dt.datetime(2026, 1, 2, 3, 4, 5, 6789, tzinfo=dt.timezone(dt.timedelta(hours=-1)))
    assert format_timestamp(value) == "2026-01-02T04:04:05.006Z"


@given(st.datetimes(timezones=st.just(UTC)))
def test_timestamp_round_trip_to_the_millisecond(value):
    """format then parse gives back the instant, truncated to the millisecond."""
    parsed = parse_timestamp(format_timestamp(value))
    assert parsed == value.replace(microsecond=value.microsecond // 1000 * 1000)


def test_every_field_may_be_missing_or_null():
    """An empty record and a record of nulls both convert, every field None."""
    assert result_from_json({}) == DocumentResult()
    nulls = {
        "success": None, "mark": None, "dateIssued": None, "status": None, "uid": None,
    }  # fmt: skip
    assert result_from_json(nulls) == DocumentResult()


def test_unknown_status_kept_as_text():
    """A status the library does not know reads as UNKNOWN with its text kept."""
    result = result_from_json({"status": "TRANSMITTED"})
    assert result.status is DocumentStatus.UNKNOWN
    assert result.raw_status == "TRANSMITTED"
    assert result_to_json(result)["status"] == "TRANSMITTED"


def test_known_status_keeps_its_raw_text():
    """UNKNOWN, the specification's only value, is read as DocumentStatus.UNKNOWN and
    its text is kept as sent, like any other status."""
    result = result_from_json({"status": "UNKNOWN"})
    assert result.status is DocumentStatus.UNKNOWN
    assert result.raw_status == "UNKNOWN"
    assert result_to_json(result)["status"] == "UNKNOWN"


def test_numbers_as_strings_and_strings_as_numbers():
    """mark may come as a digit string; series/number as ints become strings."""
    result = result_from_json({"mark": "400001000000001", "number": 17, "series": 5})
    assert result.mark == 400001000000001
    assert result.number == "17"
    assert result.series == "5"


@pytest.mark.parametrize(
    "record", [{"mark": True}, {"mark": "12a"}, {"success": "yes"}, {"dateIssued": 5}]
)
def test_wrong_types_are_errors(record):
    """Values of the wrong type raise instead of being coerced (True is not a mark)."""
    with pytest.raises(Exception):  # noqa: B017  (cattrs raises an exception group)
        result_from_json(record)


def test_false_string_is_false():
    """success "false" is False, not the truthy string."""
    assert result_from_json({"success": "false"}).success is False


def test_authority_response_under_platform_name():
    """The authority's answer is read from the platform-named ...Response key."""
    result = result_from_json({"myDataResponse": {"index": 1}, "otherKey": 2})
    assert result.authority_data_response == {"index": 1}
    assert result.extra == {"otherKey": 2}
    assert result_from_json({"authorityDataResponse": "x", "aadeResponse": "y"}).extra == {
        "aadeResponse": "y"
    }


def test_case_insensitive_keys():
    """A provider writing PascalCase keys still fills the fields."""
    result = result_from_json(
        {"Mark": 7, "QrCodeString": "q", "DateIssued": "2026-01-01T00:00:00Z"}
    )
    assert result.mark == 7
    assert result.qr_code_string == "q"
    assert result.date_issued == dt.datetime(2026, 1, 1, tzinfo=UTC)


def test_round_trip_to_provider_json():
    """result_to_json writes camelCase keys back, extras included, nulls left out."""
    record = {
        "success": True,
        "mark": 400001000000001,
        "cancellationMark": None,
        "dateIssued": "2026-11-22T09:15:30.123Z",
        "qrCodeString": "https://d/v/s",
        "erpQrCode": "e",
        "status": "UNKNOWN",
        "authorityDataResponse": {"a": 1},
        "vendorField": [1, 2],
    }
    out = result_to_json(result_from_json(record))
    expected = dict(record)
    del expected["cancellationMark"]
    assert out == expected


def test_a_record_with_every_field_set_keeps_every_field():
    """Each of the provider's fields is written back under its wire name: none dropped
    (a field added to DocumentResult is converted too)."""
    values = {"bool": True, "int": 7, "datetime": dt.datetime(2026, 1, 1, tzinfo=UTC)}
    fields = {
        field.name: values.get(str(field.type).split(" ")[0].split(".")[-1], f"v-{field.name}")
        for field in attrs.fields(DocumentResult)
        if field.name not in ("status", "raw_status", "extra")
    }
    fields["authority_data_response"] = {"nested": [1, {"deep": None}]}
    result = DocumentResult(**fields, raw_status="X")
    out = result_to_json(result)
    assert len(out) == len(fields) + 1  # and status
    assert result_from_json(out) == result


def test_results_are_frozen_and_hashable():
    """Records are immutable and can be used in sets (extra does not take part in hash)."""
    result = result_from_json({"mark": 1, "foo": {"bar": 1}})
    with pytest.raises(AttributeError):
        result.mark = 2  # type: ignore[misc]
    assert len({result, result_from_json({"mark": 1, "foo": {"bar": 1}})}) == 1


# --- the public dict functions ---------------------------------------------------------


def test_outcome_dict_round_trip_keeps_error_types_and_data():
    """outcome_to_dict gives plain JSON; outcome_from_dict gives back an equal outcome
    with the error as its own type and data (maybe_sent, attempts, the last error)."""
    import json  # noqa: PLC0415

    from invoicing_async import (  # noqa: PLC0415
        Outcome,
        OutcomeStatus,
        TransportError,
        UnknownOutcomeError,
        outcome_from_dict,
        outcome_to_dict,
    )

    record = result_from_json({"mark": 400001000000001, "status": "UNKNOWN", "extraKey": [1]})
    last = TransportError("the connection was reset", maybe_sent=True)
    outcome = Outcome(
        index=3,
        key="id:1",
        status=OutcomeStatus.UNKNOWN,
        error=UnknownOutcomeError("retries ran out", last_error=last, attempts=4),
        attempts=4,
    )
    data = json.loads(json.dumps(outcome_to_dict(outcome)))
    back = outcome_from_dict(data)
    assert (back.index, back.key, back.status, back.attempts) == (3, "id:1", outcome.status, 4)
    assert isinstance(back.error, UnknownOutcomeError)
    assert back.error.attempts == 4
    assert isinstance(back.error.last_error, TransportError)
    assert back.error.last_error.maybe_sent is True
    accepted = Outcome(index=0, key="id:2", status=OutcomeStatus.ACCEPTED, result=record)
    assert outcome_from_dict(json.loads(json.dumps(outcome_to_dict(accepted)))) == accepted


def test_result_dict_round_trip_and_refusal():
    """result_to_dict is the provider's record; result_from_dict reads it back equal and
    refuses a value of the wrong type with ValueError."""
    from invoicing_async import result_from_dict, result_to_dict  # noqa: PLC0415

    record = result_from_json(
        {"mark": 1, "dateIssued": "2026-11-22T09:15:30.123Z", "status": "X", "foo": {"a": 1}}
    )
    data = result_to_dict(record)
    assert data["dateIssued"] == "2026-11-22T09:15:30.123Z"
    assert result_from_dict(data) == record
    with pytest.raises(ValueError, match="not a result record"):
        result_from_dict({"mark": True})


@given(
    status=st.sampled_from([None, DocumentStatus.UNKNOWN]),
    raw_status=st.one_of(st.none(), st.sampled_from(["UNKNOWN", "Pending", ""]), st.text()),
)
def test_every_record_converts_to_the_providers_form_and_back_unchanged(status, raw_status):
    """A record built by hand with only one of status / raw_status (a test double, a
    record a user stores) reads back from result_to_dict's form equal: the two fields
    are one status, so a record given one gets the other."""
    from invoicing_async import result_from_dict, result_to_dict  # noqa: PLC0415

    record = DocumentResult(mark=1, status=status, raw_status=raw_status)
    assert result_from_dict(result_to_dict(record)) == record
    if raw_status is None and status is None:
        assert record.status is None
    else:
        assert record.raw_status is not None
        assert record.status is not None


def test_outcome_from_dict_refuses_what_is_not_an_outcome():
    """A dict without key, index or a known status is a ValueError, not a wrong outcome."""
    from invoicing_async import outcome_from_dict  # noqa: PLC0415

    for data in ({}, {"key": "k", "index": 0, "status": "maybe"}, {"key": 1, "index": 0,
                 "status": "accepted"}):  # fmt: skip
        with pytest.raises(ValueError, match="not an outcome"):
            outcome_from_dict(data)


# --- one converter per format -------------------------------------------------------------


def test_each_format_has_one_converter_whose_hooks_are_its_functions():
    """The provider's JSON and the stored dicts each have a converter (cattrs' preconf
    shape: make_converter), registered per type: it writes and reads what the format's
    functions do, an error by its own class."""
    from invoicing_async import (  # noqa: PLC0415
        DuplicateDocumentError,
        Outcome,
        OutcomeStatus,
        TransportError,
    )
    from invoicing_async._core.convert import (  # noqa: PLC0415
        JSON,
        STORED,
        error_from_dict,
        error_to_dict,
        make_converter,
        make_stored_converter,
        outcome_to_dict,
        result_to_dict,
    )

    sent = {"mark": "400001000000001", "Status": "ACCEPTED", "dateIssued": "2026-11-22T09:15:30Z"}
    record = result_from_json(sent)
    for provider in (JSON, make_converter()):
        assert provider.structure(sent, DocumentResult) == record
        assert provider.unstructure(record) == result_to_json(record)
    error = DuplicateDocumentError("a repeat", status=409, result=record)
    outcome = Outcome(index=1, key="id:9", status=OutcomeStatus.DUPLICATE, error=error)
    for stored in (STORED, make_stored_converter()):
        assert stored.unstructure(record) == result_to_dict(record)
        assert stored.unstructure(outcome) == outcome_to_dict(outcome)
        back_outcome = stored.structure(outcome_to_dict(outcome), Outcome)
        assert outcome_to_dict(back_outcome) == outcome_to_dict(outcome)  # errors: no ==
        written = stored.unstructure(TransportError("reset", maybe_sent=False))
        assert written == error_to_dict(TransportError("reset", maybe_sent=False))
        back = stored.structure(written, TransportError)
        assert type(back) is TransportError
        assert back.maybe_sent is False
        assert type(error_from_dict(stored.unstructure(error))) is DuplicateDocumentError
