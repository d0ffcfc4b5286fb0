"""Telemetry hooks (``invoicing_async.telemetry.add_hook``): what a hook is told, and that
nothing is built for a hook that is not there.

The client runs against mocked HTTP (aioresponses): no socket is opened.
"""

from __future__ import annotations

import logging

import pytest
from aioresponses import aioresponses

from invoicing_async import InvoicingClient, document_key
from invoicing_async._core import calls, events
from invoicing_async.telemetry import (
    CallEnded,
    CallStarted,
    Hook,
    Observer,
    RequestEnded,
    RequestObserver,
    RequestStarted,
    Retried,
    Settled,
    add_hook,
    remove_hook,
)
from invoicing_async.testing import instant_retries

BASE = "https://provider.example"
TOKEN_URL = f"{BASE}/oauth/token"
JSON_URL = f"{BASE}/Invoice/json"
TIN = "123456789"
TOKEN = {"access_token": "T-1", "token_type": "bearer", "expires_in": 900, "refresh_token": "R"}
RECORD = {"success": True, "mark": 400001000000001, "uid": "AB12", "status": "UNKNOWN"}


def invoice(number: int) -> dict:
    return {"Issuer": {"Vat": TIN}, "Series": "A", "Number": number}


class Seen(Observer):
    """Writes down what its call is told, by the call's name."""

    def __init__(self, name: str, log: list) -> None:
        self.name = name
        self.log = log

    def retried(self, event: Retried) -> None:
        self.log.append((self.name, event))

    def request(self, event: RequestStarted) -> RequestObserver:
        self.log.append((self.name, event))
        return Answered(self.name, self.log)

    def document(self, event: CallStarted) -> Observer:
        self.log.append((self.name, event))
        return Seen(event.fields["invoicing.document_key"], self.log)

    def settled(self, event: Settled) -> None:
        self.log.append((self.name, event))

    def ended(self, event: CallEnded) -> None:
        self.log.append((self.name, event))


class Answered(RequestObserver):
    def __init__(self, name: str, log: list) -> None:
        self.name = name
        self.log = log

    def ended(self, event: RequestEnded) -> None:
        self.log.append((self.name, event))


class Recorder(Hook):
    """A hook that observes every call (``wanted``: only those of these kinds)."""

    def __init__(self, wanted: frozenset[str] | None = None) -> None:
        self.started: list[CallStarted] = []
        self.log: list = []
        self.wanted = wanted

    def call(self, event: CallStarted) -> Observer | None:
        self.started.append(event)
        if self.wanted is not None and event.kind not in self.wanted:
            return None
        return Seen(event.name or "batch", self.log)

    def told(self, name: str) -> list:
        return [event for called, event in self.log if called == name]


@pytest.fixture
def mock():
    with aioresponses() as m, instant_retries():
        yield m


@pytest.fixture
def recorder():
    hook = Recorder()
    add_hook(hook)
    try:
        yield hook
    finally:
        remove_hook(hook)


def client() -> InvoicingClient:
    return InvoicingClient(BASE, TIN, "APIKEY")


async def test_a_hook_is_told_a_submission_its_token_request_its_retry_and_requests(
    mock, recorder
):
    """A submission answered 503, then 201: the hook is told the ``invoicing.submit``
    call (its document's fields), the token request made in it (the submission its
    parent), a ``throttled`` retry, two requests (the second a re-send) and their
    answers, and the ending: accepted after two attempts."""
    mock.post(TOKEN_URL, payload=TOKEN)
    mock.post(JSON_URL, status=503)
    mock.post(JSON_URL, status=201, payload=RECORD)
    async with client() as c:
        await c.submit_json(invoice(1))
    submit, token = recorder.started
    assert (submit.name, submit.kind) == ("invoicing.submit", "document")
    assert submit.fields["invoicing.document_key"] == document_key(invoice(1))
    assert (token.name, token.kind) == ("invoicing.token", "token")
    assert token.parent is not None
    assert token.parent.fields["invoicing.document_key"] == document_key(invoice(1))
    assert recorder.told("invoicing.token") == [
        RequestStarted("POST", TOKEN_URL, 0),
        RequestEnded(200, None),
        CallEnded("accepted", 1),
    ]
    first, answer, retry, second, accepted, ended = recorder.told("invoicing.submit")
    assert (first, answer) == (RequestStarted("POST", JSON_URL, 0), RequestEnded(503, None))
    assert isinstance(retry, Retried)
    assert retry.reason == "throttled"
    assert (second, accepted) == (RequestStarted("POST", JSON_URL, 1), RequestEnded(201, None))
    assert ended == CallEnded("accepted")  # a call that returned: its attempts untold


async def test_a_batch_asks_the_hook_once_and_tells_each_document_through_its_observer(
    mock, recorder
):
    """submit_many is one call for the hook (``invoicing.batch``); its observer is told
    each document as it starts, each outcome (settled), and the batch's close; each
    document's observer is told its request and its ending."""
    mock.post(TOKEN_URL, payload=TOKEN)
    mock.post(JSON_URL, status=201, payload=RECORD, repeat=True)
    documents = [invoice(1), invoice(2)]
    async with client() as c:
        await c.token()
        await c.submit_many(documents, encrypted=False)
    batch = [e for e in recorder.started if e.kind == "batch"]
    assert [e.name for e in batch] == ["invoicing.batch"]
    told = recorder.told("invoicing.batch")
    started = [e for e in told if isinstance(e, CallStarted)]
    assert sorted(e.fields["invoicing.document_key"] for e in started) == sorted(
        map(document_key, documents)
    )
    assert [e for e in told if isinstance(e, Settled)] == [Settled("accepted", True)] * 2
    assert told[-1] == CallEnded("closed")
    for document in documents:
        first, answer, ended = recorder.told(document_key(document))
        assert first == RequestStarted("POST", JSON_URL, 0)
        assert answer == RequestEnded(201, None)
        assert ended.status == "accepted"


def _never(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("an event was built for nobody")


EVENTS = ("CallStarted", "Described", "Retried", "RequestStarted", "Settled", "CallEnded")


async def test_with_no_hook_installed_no_event_is_built(mock, monkeypatch, caplog):
    """No hook installed (not even the library's own): a submission retried after a 503
    and a batch build no event at all; their log records still carry their fields."""
    mock.post(TOKEN_URL, payload=TOKEN)
    mock.post(JSON_URL, status=503)
    mock.post(JSON_URL, status=201, payload=RECORD, repeat=True)
    caplog.set_level(logging.DEBUG, logger="invoicing_async.transport")
    async with client() as c:  # the engine installs its hook as it is built
        monkeypatch.setattr(events, "HOOKS", ())
        for name in EVENTS:
            monkeypatch.setattr(calls, name, _never)
        await c.submit_json(invoice(1))
        await c.submit_many([invoice(2)], encrypted=False)
    keys = {r.__dict__.get("invoicing.document_key") for r in caplog.records}
    assert {document_key(invoice(1)), document_key(invoice(2))} <= keys


async def test_a_call_no_hook_observes_tells_nothing_more(mock, monkeypatch):
    """A hook that answers ``None`` for a call (it wants only batches) is asked once per
    call; that call's retries, requests and ending build no event."""
    hook = Recorder(wanted=frozenset({"batch"}))
    mock.post(TOKEN_URL, payload=TOKEN)
    mock.post(JSON_URL, status=503)
    mock.post(JSON_URL, status=201, payload=RECORD)
    async with client() as c:
        monkeypatch.setattr(events, "HOOKS", (hook,))  # the library's own too is gone
        for name in EVENTS[1:]:
            monkeypatch.setattr(calls, name, _never)
        await c.submit_json(invoice(1))
    assert [e.name for e in hook.started] == ["invoicing.submit", "invoicing.token"]
    assert hook.log == []


def test_a_hook_is_installed_once_and_removed():
    """Adding a hook twice installs it once; removing it uninstalls it; removing one that
    is not installed does nothing."""
    hook = Hook()
    before = events.HOOKS
    add_hook(hook)
    add_hook(hook)
    assert (*before, hook) == events.HOOKS
    remove_hook(hook)
    remove_hook(hook)
    assert before == events.HOOKS
