"""The provider's state and rules without HTTP: plain synchronous calls, no event loop.

Tokens (grants, rotation, expiry), authentication, document checks, duplicate detection
(with and without), cancellations, the request log and counters, exactly as the aiohttp
application drives them (``begin`` → handler methods → ``finish``).
"""

from __future__ import annotations

import datetime as dt
import json
import random

import pytest

from invoicing_async._core.models import DocumentResult
from invoicing_sandbox._provider import Exchange, Provider, Submission
from invoicing_sandbox._replies import NO_STORE

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def make(seed: str = "p", **kwargs) -> tuple[Provider, Clock]:
    clock = Clock()
    options = {
        "environments": ("test", "production"),
        "rng": random.Random(seed),
        "seeded": True,
        "salt": f"seed:{seed}",
        "clock": clock,
        "expires_in": 900,
        "refresh_expires_in": 3600,
        "domain": "https://sandbox.invalid/",
        **kwargs,
    }
    return Provider(**options), clock


def begin(provider: Provider, route="document", environment="test", path="/Invoice/json"):
    return provider.begin(environment, route, "POST", f"/{environment}{path}", {})


def credentials(provider: Provider, environment="test") -> dict[str, str]:
    env = provider.environment(environment)
    return {
        "grant_type": "client_credentials",
        "client_id": env.default_client,
        "client_secret": env.clients[env.default_client],
    }


def grant(provider: Provider, form: dict[str, str], environment="test") -> tuple[int, dict]:
    exchange = begin(provider, "token", environment, "/oauth/token")
    reply = provider.grant(form, environment, exchange)
    provider.finish(exchange)
    return reply.status, json.loads(reply.body)


def signed_in(provider: Provider, environment="test") -> Exchange:
    """A document request's exchange, authenticated with a fresh token."""
    _, tokens = grant(provider, credentials(provider, environment), environment)
    exchange = begin(provider, "document", environment)
    env = provider.environment(environment)
    api_key = env.clients[env.default_client]
    bearer = f"Bearer {tokens['access_token']}"
    assert provider.authenticate(environment, bearer, api_key, exchange) is None
    return exchange


def document(provider: Provider, number: int = 1, **fields) -> bytes:
    """A document with every field the provider requires; its identity is
    ``doc:{vat}/A/{number}`` (no internal document id)."""
    issuer = {"Vat": provider.environment().default_client}
    doc = {
        "Issuer": issuer, "Series": "A", "Number": number, "DateIssued": "2026-11-22",
        "InvoiceType": "1.1", "Details": [{"LineNumber": 1, "NetValue": 10.0}],
        "Summaries": {"TotalNetValue": 10.0, "TotalVatAmount": 2.4, "TotalGrossValue": 12.4},
    }  # fmt: skip
    return json.dumps({**doc, **fields}).encode()


def submit(provider: Provider, body: bytes):
    """Admit and commit one document as the application would; the reply and exchange."""
    exchange = signed_in(provider)
    submission = provider.admit(exchange, body, encrypted=False)
    reply = provider.commit(submission, NOW) if isinstance(submission, Submission) else submission
    exchange.status = reply.status
    provider.finish(exchange)
    return reply, exchange


# --- environments and credentials -------------------------------------------------------------


def test_each_environment_has_its_own_reproducible_client():
    """One client per environment, with a 9-digit TIN whose check digit is valid; the same
    seed gives the same credentials, another seed others.
    """
    provider, _ = make("a")
    same, _ = make("a")
    other, _ = make("b")
    tins = [env.default_client for env in provider.environments.values()]
    assert len(set(tins)) == 2
    for tin in tins:
        digits = [int(c) for c in tin]
        assert len(digits) == 9
        assert sum(d << (8 - i) for i, d in enumerate(digits[:8])) % 11 % 10 == digits[8]
    assert credentials(provider) == credentials(same) != credentials(other)
    assert provider.environment().name == "test"


@pytest.mark.parametrize(
    "options",
    [
        {"environments": ()},
        {"environments": ("test", "test")},
        {"environments": ("a/b",)},
        {"expires_in": 0},
        {"refresh_expires_in": -1},
    ],
    ids=["none", "twice", "slash", "expires_in", "refresh_expires_in"],
)
def test_impossible_settings_are_refused(options):
    """No environment, a repeated or non-path-segment name, or a non-positive token
    lifetime is a ValueError.
    """
    with pytest.raises(ValueError):
        make(**options)


def test_add_client_refuses_a_different_key_for_a_known_client():
    """A second issuer can be added; re-adding it with another API key is refused."""
    provider, _ = make()
    provider.add_client("test", "094019245", "key-1")
    provider.add_client("test", "094019245", "key-1")
    with pytest.raises(ValueError, match="another API key"):
        provider.add_client("test", "094019245", "key-2")
    with pytest.raises(KeyError, match="no environment"):
        provider.add_client("staging", "094019245", "key-1")


# --- tokens -----------------------------------------------------------------------------------


def test_client_credentials_grant():
    """The grant answers 200 with a bearer token, its lifetime and a refresh token, not
    to be cached; the token request is counted.
    """
    provider, _ = make()
    exchange = begin(provider, "token", "test", "/oauth/token")
    reply = provider.grant(credentials(provider), "test", exchange)
    body = json.loads(reply.body)
    assert reply.status == 200
    assert reply.headers == NO_STORE
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 900
    assert isinstance(body["expires_in"], int)
    assert body["access_token"] != body["refresh_token"]
    assert exchange.client_id == credentials(provider)["client_id"]
    assert provider.stats.token_requests == 1


def refresh_form(provider: Provider, refresh_token: str, environment="test") -> dict[str, str]:
    """A standard refresh grant: the client authenticates too (RFC 6749 section 6)."""
    auth = credentials(provider, environment)
    return {**auth, "grant_type": "refresh_token", "refresh_token": refresh_token}


def test_refresh_rotates_and_each_refresh_token_is_good_once():
    """A refresh issues new tokens; the old refresh token, or an access token presented
    as one, is invalid_grant afterwards.
    """
    provider, _ = make()
    _, first = grant(provider, credentials(provider))
    status, second = grant(provider, refresh_form(provider, first["refresh_token"]))
    assert status == 200
    assert second["refresh_token"] != first["refresh_token"]
    for presented in (first["refresh_token"], second["access_token"]):
        status, body = grant(provider, refresh_form(provider, presented))
        assert (status, body["error"]) == (400, "invalid_grant")
    assert provider.stats.refresh_requests == 3


def test_refresh_requires_client_authentication():
    """Like a standards-compliant server (oauthlib), the refresh grant refuses a client
    that does not authenticate, or authenticates wrongly, with 401 invalid_client, and a
    refresh token of another client with invalid_grant."""
    provider, _ = make()
    _, tokens = grant(provider, credentials(provider))
    bare = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    status, body = grant(provider, bare)
    assert (status, body["error"]) == (401, "invalid_client")
    status, body = grant(
        provider, {**refresh_form(provider, tokens["refresh_token"]), "client_secret": "wrong"}
    )
    assert (status, body["error"]) == (401, "invalid_client")
    provider.add_client("test", "111111111", "other-secret")
    other = {"client_id": "111111111", "client_secret": "other-secret"}
    status, body = grant(provider, {**bare, **other})
    assert (status, body["error"]) == (400, "invalid_grant")
    status, _ = grant(provider, refresh_form(provider, tokens["refresh_token"]))
    assert status == 200


def test_refresh_tokens_expire_are_revoked_and_stay_in_their_environment():
    """A refresh token is refused after its lifetime, after revoke_refresh_tokens(), and
    in another environment (whose clients are others: invalid_client there).
    """
    provider, clock = make()
    _, tokens = grant(provider, credentials(provider))
    production = {**refresh_form(provider, tokens["refresh_token"], "production")}
    status, body = grant(provider, production, "production")
    assert (status, body["error"]) == (400, "invalid_grant")
    status, body = grant(provider, refresh_form(provider, tokens["refresh_token"]), "production")
    assert (status, body["error"]) == (401, "invalid_client")
    clock.now += 3600
    status, body = grant(provider, refresh_form(provider, tokens["refresh_token"]))
    assert (status, body["error"]) == (400, "invalid_grant")
    _, tokens = grant(provider, credentials(provider))
    provider.revoke_refresh_tokens()
    status, body = grant(provider, refresh_form(provider, tokens["refresh_token"]))
    assert (status, body["error"]) == (400, "invalid_grant")


@pytest.mark.parametrize(
    ("form", "error"),
    [
        ({}, "invalid_request"),
        ({"grant_type": "client_credentials"}, "invalid_request"),
        (
            {"grant_type": "client_credentials", "client_id": "1", "client_secret": "x"},
            "invalid_request",
        ),
        ({"grant_type": "password"}, "unsupported_grant_type"),
    ],
    ids=["no-grant", "no-credentials", "wrong-credentials", "password-grant"],
)
def test_grant_refusals(form, error):
    """Malformed or wrong token requests are 400 with RFC 6749's error code."""
    provider, _ = make()
    status, body = grant(provider, form)
    assert (status, body["error"]) == (400, error)
    assert body["error_description"]


def test_authentication_refusals():
    """No bearer token, an unknown one, one of another environment, an expired one or a
    wrong API key: each is a 401; a good pair names the client.
    """
    provider, clock = make()
    env = provider.environment()
    api_key = env.clients[env.default_client]
    _, tokens = grant(provider, credentials(provider))
    _, other = grant(provider, credentials(provider, "production"), "production")
    bearer = f"Bearer {tokens['access_token']}"
    cases = [
        ("", api_key, "missing bearer token"),
        ("Bearer unknown", api_key, "not valid"),
        (f"Bearer {other['access_token']}", api_key, "not valid"),
        (bearer, "wrong", "API key"),
    ]
    for authorization, key, message in cases:
        reply = provider.authenticate("test", authorization, key, begin(provider))
        assert reply is not None
        assert reply.status == 401
        assert message in json.loads(reply.body)["message"]
    exchange = begin(provider)
    assert provider.authenticate("test", bearer, api_key, exchange) is None
    assert exchange.client_id == env.default_client
    clock.now += 900
    reply = provider.authenticate("test", bearer, api_key, begin(provider))
    assert reply is not None
    assert "expired" in json.loads(reply.body)["message"]
    clock.now -= 900
    provider.expire_tokens()
    assert provider.authenticate("test", bearer, api_key, begin(provider)) is not None


# --- documents --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b'{"Series": ', 400, "malformed JSON"),
        (b'{"Amount": NaN}', 400, "malformed JSON"),
        (b"[1, 2]", 400, "must be a JSON object"),
        (b'{"Issuer": {"Vat": "094019245"}}', 401, "VAT number"),
        (b'{"Details": [], "Summaries": {"TotalGrossValue": -1}}', 400, "Details"),
    ],
    ids=["truncated", "nan", "array", "other-issuer", "fields"],
)
def test_documents_are_checked_before_commit(body, status, message):
    """Malformed JSON, NaN, a non-object, another issuer's VAT number or bad fields are
    refused with the service's status; nothing is committed.
    """
    provider, _ = make()
    reply, _ = submit(provider, body)
    assert reply.status == status
    assert message in json.loads(reply.body)["message"]
    assert provider.commit_count == 0


def test_duplicate_detection_answers_409_with_the_original_record():
    """A second submission of a document is a 409 whose body is the first answer's,
    byte for byte; attempts are counted per identity.
    """
    provider, _ = make()
    first, exchange = submit(provider, document(provider))
    again, second = submit(provider, document(provider, Extra="changed content, same number"))
    assert (first.status, again.status) == (201, 409)
    assert again.body == first.body
    assert (exchange.attempt, second.attempt) == (1, 2)
    assert (
        exchange.identity == second.identity == f"doc:{provider.environment().default_client}/A/1"
    )
    assert provider.commit_count == 1
    assert provider.committed[exchange.identity].commits == 1
    assert provider.stats.submissions == {201: 1, 409: 1}


def test_without_duplicate_detection_every_submission_commits():
    """With duplicate detection off a re-sent document is committed again: 201, a new
    mark, ``commits`` counting up; the record shown is the latest.
    """
    provider, _ = make(duplicate_detection=False)
    replies = [submit(provider, document(provider))[0] for _ in range(3)]
    marks = [json.loads(reply.body)["mark"] for reply in replies]
    assert [reply.status for reply in replies] == [201, 201, 201]
    assert marks == sorted(set(marks))
    (committed,) = provider.committed.values()
    assert committed.commits == 3
    assert committed.record.mark == marks[-1]
    assert isinstance(committed.record, DocumentResult)
    assert provider.commit_count == 3
    client = provider.environment().default_client
    assert list(provider.committed_in("test", client)) == [committed.identity]


# --- cancellations ----------------------------------------------------------------------------


def test_cancellation_is_at_most_once():
    """A mark is cancelled once (200 and a cancellation mark); again is 409; an unknown
    mark 404; a mark that is no integer 400. The mark may come in the query string.
    """
    provider, _ = make()
    reply, _ = submit(provider, document(provider))
    mark = json.loads(reply.body)["mark"]
    exchange = signed_in(provider)
    first = provider.cancel(exchange, None, json.dumps({"mark": mark}).encode())
    second = provider.cancel(signed_in(provider), str(mark), b"")
    assert (first.status, second.status) == (200, 409)
    cancellation = json.loads(first.body)["cancellationMark"]
    assert cancellation > mark
    assert json.loads(second.body)["cancellationMark"] == cancellation
    assert exchange.identity is not None
    assert provider.committed[exchange.identity].cancellation_mark == cancellation
    assert provider.cancel(signed_in(provider), "1", b"").status == 404
    assert provider.cancel(signed_in(provider), "soon", b"").status == 400


# --- the log and the counters -----------------------------------------------------------------


def test_request_log_and_counters():
    """Requests are logged in arrival order with what was learnt about them; a request
    outside the environments keeps its full path; a dropped document counts as such.
    """
    provider, _ = make()
    stray = provider.begin(None, "other", "GET", "/B2GInvoice/GetLastStatus", {})
    dropped = begin(provider)
    dropped.dropped = "reset"
    provider.finish(dropped)
    stray.status = 404
    provider.finish(stray)
    submit(provider, document(provider))
    log = provider.requests
    assert [r.seq for r in log] == sorted(r.seq for r in log)
    assert (log[0].environment, log[0].path, log[0].status) == (
        None,
        "/B2GInvoice/GetLastStatus",
        404,
    )
    assert (log[1].environment, log[1].path, log[1].status) == ("test", "/Invoice/json", None)
    assert [r.path for r in log[2:]] == ["/oauth/token", "/Invoice/json"]
    assert log[-1].client_id == provider.environment().default_client
    assert provider.stats.submissions == {"reset": 1, 201: 1}
    assert provider.stats.token_requests == 1


def test_reset_forgets_state_but_not_credentials_or_marks():
    """reset() forgets documents, log, counters and tokens; credentials stay and marks
    keep counting, so a mark is never handed out twice.
    """
    provider, _ = make()
    reply, _ = submit(provider, document(provider))
    before = credentials(provider)
    provider.reset()
    assert (provider.commit_count, dict(provider.committed), provider.requests) == (0, {}, [])
    assert provider.stats.token_requests == 0
    assert credentials(provider) == before
    again, _ = submit(provider, document(provider))
    assert json.loads(again.body)["mark"] > json.loads(reply.body)["mark"]
