"""The sans-I/O protocol: request building and response reading, no event loop needed."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from invoicing_async import (
    AccessToken,
    AuthenticationError,
    DocumentStatus,
    DocumentTooLargeError,
    DuplicateDocumentError,
    MalformedResponseError,
    ProviderKeyError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    UnexpectedStatusError,
    ValidationError,
)
from invoicing_async._core import protocol as proto

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
TOKEN = AccessToken(value="tok-SECRET", token_type="bearer", expires_in=900, obtained_at=0.0)


def response(status: int, body: bytes | dict | str = b"", **headers: str) -> proto.Response:
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    return proto.Response(status, headers, body)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.provider.example",
        "https://api.provider.example/v1/",
        "http://127.0.0.1:8080",
        "http://localhost:1",
        "http://[::1]:9000/x",
    ],
)
def test_base_url_accepted(url):
    """https anywhere and plain http to loopback are accepted; a trailing slash is dropped."""
    assert proto.check_base_url(url) == url.rstrip("/")


@pytest.mark.parametrize(
    "url",
    [
        "http://api.provider.example",
        "http://10.0.0.5",
        "ftp://api.provider.example",
        "api.provider.example",
        "https://user:pw@api.provider.example",
        "https://api.provider.example/?q=1",
    ],
)
def test_base_url_refused(url):
    """Plain http to a non-loopback host, other schemes and embedded credentials are refused."""
    with pytest.raises(ValueError, match=r"http|URL|credentials|query"):
        proto.check_base_url(url)


def test_token_request_client_credentials():
    """The token request is a form-encoded client-credentials grant with TIN and API key."""
    request = proto.build_token_request("https://p.example", "123456789", "api-key")
    assert request.method == "POST"
    assert request.url == "https://p.example/oauth/token"
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert parse_qs(request.body.decode()) == {
        "grant_type": ["client_credentials"],
        "client_id": ["123456789"],
        "client_secret": ["api-key"],
    }


def test_token_request_refresh_authenticates_the_client():
    """The refresh grant carries client_id and client_secret too (RFC 6749 section 6: a
    confidential client authenticates on refresh; standard servers answer 401
    invalid_client without them)."""
    request = proto.build_token_request("https://p.example", "123", "api-key", "rt-1")
    form = parse_qs(request.body.decode())
    assert form == {
        "grant_type": ["refresh_token"],
        "refresh_token": ["rt-1"],
        "client_id": ["123"],
        "client_secret": ["api-key"],
    }


def test_requests_hide_secrets_in_repr():
    """A request's repr leaves out headers and body (they hold the API key and token)."""
    request = proto.build_document_request(
        "https://p.example", token=TOKEN, api_key="KEY-SECRET", body=b"{}", encrypted=False
    )
    assert "SECRET" not in repr(request)


def test_secure_request_headers_and_query():
    """/Invoice/secure carries bearer token, APIKey, the PGP content type and given params."""
    stamp = dt.datetime(2026, 11, 22, 9, 15, 30, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    request = proto.build_document_request(
        "https://p.example",
        token=TOKEN,
        api_key="KEY",
        body=b"-----BEGIN PGP MESSAGE-----",
        encrypted=True,
        send_method="email",
        time_stamp=stamp,
    )
    parts = urlsplit(request.url)
    assert parts.path == "/Invoice/secure"
    assert parse_qs(parts.query) == {
        "sendMethod": ["email"],
        "timeStamp": ["2026-11-22T07:15:30.123Z"],
    }
    assert request.headers["Authorization"] == "Bearer tok-SECRET"
    assert request.headers["APIKey"] == "KEY"
    assert request.headers["Content-Type"] == "application/pgp-encrypted"


def test_json_request_has_no_query_when_not_given():
    """/Invoice/json has no query string unless sendMethod or timeStamp is given."""
    request = proto.build_document_request(
        "https://p.example", token=TOKEN, api_key="K", body=b"{}", encrypted=False
    )
    assert request.url == "https://p.example/Invoice/json"
    assert request.headers["Content-Type"] == "application/json"


def test_naive_timestamp_refused():
    """A naive datetime is refused rather than silently read as UTC."""
    with pytest.raises(ValueError, match="timezone-aware"):
        proto.build_document_request(
            "https://p.example",
            token=TOKEN,
            api_key="K",
            body=b"{}",
            encrypted=False,
            time_stamp=dt.datetime(2026, 1, 1),
        )


def test_parse_token_response():
    """expires_in counts from the clock read before sending; the refresh token is kept."""
    body = (SAMPLES / "token_200.json").read_bytes()
    token = proto.parse_token_response(response(200, body), obtained_at=100.0)
    assert token.value == "at-1f0c9e"
    assert token.refresh_token == "rt-77aa01"
    assert token.expires_at == 1000.0
    # 900 s: renewal from 5 minutes ahead, blocking in the last minute, retries every 30 s.
    assert token.renew_at == 700.0
    assert token.unusable_at == 940.0
    assert token.retry_interval == 30.0
    assert "at-1f0c9e" not in repr(token)
    assert "rt-77aa01" not in repr(token)


def test_refresh_without_rotation_keeps_old_refresh_token():
    """A refresh answer without a new refresh token keeps the one that was used."""
    previous = AccessToken(
        value="x", token_type="Bearer", expires_in=1, obtained_at=0, refresh_token="old"
    )
    token = proto.parse_token_response(
        response(200, {"access_token": "a", "expires_in": 60}), obtained_at=0, previous=previous
    )
    assert token.refresh_token == "old"


@pytest.mark.parametrize(
    "body",
    [
        {"token_type": "bearer"},
        {"access_token": "", "expires_in": 5},
        {"access_token": "a", "expires_in": -1},
    ],
)
def test_unusable_token_answer(body):
    """A 200 without a usable token or lifetime is a MalformedResponseError."""
    with pytest.raises(MalformedResponseError):
        proto.parse_token_response(response(200, body), obtained_at=0)


def test_token_400_is_authentication_error_with_oauth_fields():
    """400 invalid_request from the token endpoint carries error and error_description."""
    body = (SAMPLES / "token_400.json").read_bytes()
    with pytest.raises(AuthenticationError) as info:
        proto.parse_token_response(response(400, body), obtained_at=0)
    assert info.value.error == "invalid_request"
    assert info.value.error_description == "Invalid client credentials"
    assert info.value.status == 400


def test_parse_result_record_sample():
    """A recorded 201 record becomes a DocumentResult with every field converted."""
    body = (SAMPLES / "result_201.json").read_bytes()
    result = proto.parse_document_response(response(201, body))
    assert result.success is True
    assert result.mark == 400001000000017
    assert result.cancellation_mark is None
    assert result.status is DocumentStatus.UNKNOWN
    assert result.raw_status == "UNKNOWN"
    assert result.date_issued == dt.datetime(
        2026, 11, 22, 9, 15, 30, 123000, tzinfo=dt.timezone.utc
    )
    assert result.authority_data_response == {"statusCode": "Success", "index": 1}
    assert result.qr_code_string == result.url == "https://provider.example/v/A1B2C3D4E5F6"
    assert result.internal_id == "POS1-2026-000017"
    assert result.extra == {"providerTrace": "x-17"}


@pytest.mark.parametrize(
    ("status", "body", "error_type"),
    [
        (400, {"message": "Series is required"}, ValidationError),
        (401, {"message": "VAT does not match"}, AuthenticationError),
        (403, {}, AuthenticationError),
        (404, {}, UnexpectedStatusError),
        (405, {}, UnexpectedStatusError),
        (415, {}, UnexpectedStatusError),
        (413, {}, DocumentTooLargeError),
        (408, {"message": "authority down"}, ProviderTimeoutError),
        (409, {"mark": 1}, DuplicateDocumentError),
        (429, {}, RateLimitError),
        (500, {}, ServerError),
        (503, b"<html>", ServerError),
        (302, b"", MalformedResponseError),
        (200, b"<html>", MalformedResponseError),
        (201, b"", MalformedResponseError),
        (201, b"[1]", MalformedResponseError),
        (201, b"\xff\xfe", MalformedResponseError),
        (201, {"mark": "not a number"}, MalformedResponseError),
    ],
)
def test_status_maps_to_typed_error(status, body, error_type):
    """Each status and unreadable body gives its own InvoicingError subclass and status."""
    with pytest.raises(error_type) as info:
        proto.parse_document_response(response(status, body))
    assert info.value.status == status


def test_400_message_comes_from_provider():
    """A 400's message quotes the provider's explanation and keeps its parsed body."""
    body = {"success": False, "message": "Series is required", "errors": [{"field": "Series"}]}
    with pytest.raises(ValidationError) as info:
        proto.parse_document_response(response(400, body))
    assert "Series is required" in str(info.value)
    assert info.value.body == body


@pytest.mark.parametrize(
    "message",
    [
        "the message cannot be decrypted: message exceeds size limit",
        "the message cannot be decrypted: decompressed message exceeds size limit",
        "Maximum request body size 1048576 exceeded",
        "Request Entity Too Large",
    ],
)
def test_a_400_that_says_too_large_refuses_the_document_not_the_key(message):
    """A 400 saying the message is too large refuses this document for its size
    (DocumentTooLargeError, a ValidationError: rejected, never retried), even when it
    also names decryption: never ProviderKeyError (not_decryptable), which stops a
    batch and reads as the wrong provider key."""
    with pytest.raises(DocumentTooLargeError) as info:
        proto.parse_document_response(response(400, {"message": message}), encrypted=True)
    assert isinstance(info.value, ValidationError)
    assert info.value.status == 400
    assert message in info.value.message


@pytest.mark.parametrize(
    "message",
    ["TotalGrossValue: too large", "Number exceeds the maximum length", "Details: too long"],
)
def test_a_field_too_large_is_not_a_document_too_large(message):
    """A 400 about a field's value (a number too large, a string too long) stays a plain
    ValidationError: only the message, body or document being too large is a size
    refusal."""
    with pytest.raises(ValidationError) as info:
        proto.parse_document_response(response(400, {"message": message}), encrypted=True)
    assert type(info.value) is ValidationError


def test_a_400_blaming_decryption_alone_is_still_the_key():
    """A 400 that blames decryption without a size is still the key's problem."""
    body = {"message": "the message cannot be decrypted: no session key for our keys"}
    with pytest.raises(ProviderKeyError) as info:
        proto.parse_document_response(response(400, body), encrypted=True)
    assert info.value.reason == "not_decryptable"


def test_409_carries_original_record():
    """A 409 whose body is the original record exposes it as .result."""
    body = json.loads((SAMPLES / "result_201.json").read_text())
    with pytest.raises(DuplicateDocumentError) as info:
        proto.parse_document_response(response(409, body))
    assert info.value.result is not None
    assert info.value.result.mark == 400001000000017
    assert "already transmitted" in str(info.value)


def test_409_without_record():
    """A 409 with a body that is not a record still raises, with result None."""
    with pytest.raises(DuplicateDocumentError) as info:
        proto.parse_document_response(response(409, "duplicate"))
    assert info.value.result is None


def test_retry_after_seconds_and_date():
    """Retry-After is read as seconds or as an HTTP date, and capped."""
    now = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.timezone.utc)
    assert proto.retry_after_seconds({"Retry-After": "7"}) == 7.0
    assert proto.retry_after_seconds({"Retry-After": "99999"}) == proto.MAX_RETRY_AFTER
    date = "Sun, 22 Nov 2026 12:00:30 GMT"
    assert proto.retry_after_seconds({"Retry-After": date}, now=now) == 30.0
    assert proto.retry_after_seconds({"Retry-After": "soon"}) is None
    assert proto.retry_after_seconds({}) is None


def test_429_and_503_carry_retry_after():
    """429 and 503 errors carry the provider's Retry-After in seconds."""
    with pytest.raises(RateLimitError) as info:
        proto.parse_document_response(response(429, b"", **{"Retry-After": "3"}))
    assert info.value.retry_after == 3.0


def test_generic_json_response():
    """Other operations return decoded JSON, None for an empty body, typed errors otherwise."""
    assert proto.parse_json_response(response(200, {"a": 1}), "op") == {"a": 1}
    assert proto.parse_json_response(response(204, b""), "op") is None
    with pytest.raises(MalformedResponseError):
        proto.parse_json_response(response(200, b"<html>"), "op")
    with pytest.raises(ServerError):
        proto.parse_json_response(response(502, b""), "op")
