"""Adversarial: fuzz the sans-I/O response parsers with hypothesis.

Random statuses, headers (``Retry-After`` garbage, HTTP dates at the ends of the
calendar) and bodies (random bytes, random JSON, JSON objects whose keys are the real
field names with random values) go through every parser of :mod:`._protocol`. Whatever
comes back, only :class:`~invoicing_async.InvoicingError` subclasses may escape: anything
else would escape the client's error handling and end a whole batch.

The escapes found here (non-ASCII digits in ``Retry-After`` and ``expires_in``, integers
beyond float range) have regression tests at the end.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json

import pytest
from aioresponses import aioresponses
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy

from invoicing_async import (
    AccessToken,
    DocumentResult,
    InvoicingClient,
    InvoicingError,
    OutcomeStatus,
    RetryPolicy,
)
from invoicing_async._core.protocol import (
    MAX_RETRY_AFTER,
    Response,
    error_for_response,
    parse_document_response,
    parse_json_response,
    parse_token_response,
    retry_after_seconds,
    token_error,
)

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FIELDS = [
    "success", "message", "statusCode", "integritySignature", "signature", "uid", "mark",
    "cancellationMark", "authenticationCode", "authorityDataResponse", "status", "series",
    "number", "dateIssued", "domain", "url", "qrCodeString", "erpQrCode", "uniqueId",
    "internalId", "access_token", "expires_in", "refresh_token", "token_type", "error",
    "error_description", "errors",
]  # fmt: skip

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**300, max_value=10**320)
    | st.floats()
    | st.text(max_size=30)
    | st.sampled_from(["UNKNOWN", "²", "٣", "2026-11-22T10:00:00Z", "yesterday", "0", "-1"])
    | st.datetimes().map(dt.datetime.isoformat)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
records = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=10)


def _headers(values: dict[str, str]) -> CIMultiDictProxy[str]:
    """Response headers as the transport hands them over (case-insensitive)."""
    return CIMultiDictProxy(CIMultiDict(values))


def dumps(value) -> bytes:
    return json.dumps(value).encode()


bodies = (
    st.binary(max_size=300)
    | json_values.map(dumps)
    | records.map(dumps)
    | st.tuples(records.map(dumps), st.integers(0, 200)).map(lambda t: t[0][: t[1]])
    | records.map(lambda r: dumps(r).replace(b'"', b"'"))
)
http_dates = st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)).map(
    email.utils.format_datetime
)
retry_after_values = (
    st.text(max_size=40)
    | st.integers(-(10**30), 10**30).map(str)
    | http_dates
    | st.sampled_from(
        [
            "",
            "²",
            " 5 ",
            "1e9",
            "-1",
            "inf",
            "NaN",
            "9" * 400,
            "Mon, 01 Jan 0001 00:00:00 +2359",
            "Fri, 31 Dec 9999 23:59:59 -2359",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ]
    )
)
headers = st.dictionaries(
    st.sampled_from(["Retry-After", "retry-after", "Content-Type", "Location", "X-Other"]),
    retry_after_values,
    max_size=3,
).map(lambda h: CIMultiDictProxy(CIMultiDict(h)))
statuses = st.sampled_from([200, 201, 204, 302, 307, 400, 401, 403, 404, 408, 409, 429]) | (
    st.integers(100, 599)
)
responses = st.builds(Response, statuses, headers, bodies)
token_responses = st.builds(Response, st.just(200) | statuses, headers, bodies)


@FUZZ
@given(responses)
def test_parse_document_response_raises_only_invoicing_errors(response):
    """parse_document_response returns a DocumentResult or raises an InvoicingError."""
    try:
        result = parse_document_response(response)
    except InvoicingError:
        return
    assert isinstance(result, DocumentResult)
    assert response.status in (200, 201)


@FUZZ
@given(token_responses, st.floats(0, 1e6), st.none() | st.text(min_size=1, max_size=10))
def test_parse_token_response_raises_only_invoicing_errors(response, obtained_at, refresh):
    """parse_token_response returns a usable AccessToken or raises an InvoicingError."""
    previous = None
    if refresh is not None:
        previous = AccessToken(
            value="old", token_type="Bearer", expires_in=1, obtained_at=0, refresh_token=refresh
        )
    try:
        token = parse_token_response(response, obtained_at=obtained_at, previous=previous)
    except InvoicingError:
        return
    assert isinstance(token, AccessToken)
    assert token.value
    assert token.expires_in > 0


@FUZZ
@given(responses)
def test_parse_json_response_raises_only_invoicing_errors(response):
    """parse_json_response returns decoded JSON (or None) or raises an InvoicingError."""
    try:
        parse_json_response(response, "POST /x")
    except InvoicingError:
        return
    assert 200 <= response.status < 300


@FUZZ
@given(responses)
def test_error_for_response_and_token_error_return_invoicing_errors(response):
    """error_for_response and token_error map any response to an InvoicingError (and
    never raise), with a retry_after that is absent or within [0, MAX_RETRY_AFTER].
    """
    for error in (error_for_response(response, "what"), token_error(response)):
        assert isinstance(error, InvoicingError)
        str(error), repr(error)
        retry_after = getattr(error, "retry_after", None)
        assert retry_after is None or 0 <= retry_after <= MAX_RETRY_AFTER


@FUZZ
@given(headers)
@example(_headers({"Retry-After": "Mon, 01 Jan 0001 00:00:00 +2359"}))
@example(_headers({"Retry-After": "Fri, 31 Dec 9999 23:59:59 -2359"}))
def test_retry_after_is_none_or_bounded(value):
    """retry_after_seconds gives None or seconds within [0, MAX_RETRY_AFTER]."""
    seconds = retry_after_seconds(value)
    assert seconds is None or 0 <= seconds <= MAX_RETRY_AFTER


# --- the escapes found (fixed) -------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_superscript_digit_is_an_invoicing_error(status):
    """A 429/503 with ``Retry-After: ²`` maps to its typed error (retry_after None)."""
    response = Response(status, _headers({"Retry-After": "²"}), b"")
    error = error_for_response(response, "what")
    assert isinstance(error, InvoicingError)


@pytest.mark.parametrize("expires_in", ["²", 10**400], ids=["superscript", "huge-int"])
def test_token_answer_with_odd_expires_in_is_an_invoicing_error(expires_in):
    """A token answer whose expires_in is a non-decimal digit string or an integer
    beyond float range is refused with an InvoicingError.
    """
    body = json.dumps({"access_token": "a", "expires_in": expires_in}).encode()
    with pytest.raises(InvoicingError):
        parse_token_response(Response(200, _headers({}), body), obtained_at=0)


async def test_a_503_with_odd_retry_after_ends_one_document_not_the_batch():
    """One 503 with ``Retry-After: ²`` costs its document a retry, not the whole batch."""
    base = "https://provider.example"
    token = {"access_token": "t", "token_type": "Bearer", "expires_in": 900}
    with aioresponses() as mock:
        mock.post(f"{base}/oauth/token", payload=token)
        mock.post(f"{base}/Invoice/json", status=503, headers={"Retry-After": "²"})
        mock.post(f"{base}/Invoice/json", status=201, payload={"mark": 1}, repeat=True)
        async with InvoicingClient(base, "094019245", "key") as client:
            outcomes = await client.submit_many(
                [{"n": 1}, {"n": 2}], encrypted=False, retry=RetryPolicy(base_delay=0)
            )
    assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED] * 2
