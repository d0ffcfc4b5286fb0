"""Every safety class against every answer sequence, through every driver: one verdict.

The decision core (``invoicing_async._decision``) decides every request's fate; the
drivers only send. This table states the verdict — how the request ends, after how many
requests — for each answer sequence and each safety class, and runs it through each
driver that sends requests:

* a single document call (``Delivery`` alone);
* a document in a batch (``Delivery`` with a batch's shared budget, breaker,
  re-authentication waits and in-flight limiter);
* a whole batch (``Batch``: its journal-less pipeline), for document submissions;
* an operation (the operations runner, with a record to read, as ``reseed_b2g_invoice``).

A row that one driver ends differently from another fails here. The sale's driver adds
``decisive`` answers on purpose (it defers at the first "unreachable") and is tested in
test_deferral.py.
"""

from __future__ import annotations

import asyncio

import pytest
from helpers import collect

from invoicing_async import (
    AuthenticationError,
    CredentialsError,
    DocumentResult,
    DuplicateDocumentError,
    OutcomeStatus,
    ProviderTimeoutError,
    RateLimitError,
    RetryPolicy,
    Safety,
    ServerError,
    TransportError,
    UnexpectedStatusError,
    ValidationError,
)
from invoicing_async._core.shared import Breaker, Budget, ReauthWaits, Shared
from invoicing_async._doc.document import Identity
from invoicing_async._doc.prepare import _serialized
from invoicing_async._send.batch import Batch, BatchOptions
from invoicing_async._send.delivery import Delivery
from invoicing_async._send.operations import Operation, ending

RECORD = DocumentResult(mark=1, series="A", number="1", internal_id="X-1")
DOCUMENT = {"Series": "A", "Number": "1", "DistributionDetails": {"InternalDocumentId": "X-1"}}
IDENTITY = Identity("A", "1", "X-1")
POLICY = RetryPolicy(base_delay=0, max_delay=0, max_attempts=3, attempt_timeout=None)

#: Each answer a provider (or the way to it) can give one attempt.
ANSWERS = {
    "201": RECORD,
    "409": lambda: DuplicateDocumentError("held", status=409, result=RECORD),
    "409?": lambda: DuplicateDocumentError("held, record unreadable", status=409),
    "400": lambda: ValidationError("bad", status=400),
    "401": lambda: AuthenticationError("refused", status=401),
    "401*": lambda: AuthenticationError("revoked token?", status=401, reauth_in=0.0),
    "404": lambda: UnexpectedStatusError("no such path", status=404),
    "408": lambda: ProviderTimeoutError("tax authority slow", status=408),
    "429": lambda: RateLimitError("slow down", status=429, retry_after=0),
    "500": lambda: ServerError("broken", status=500),
    "503": lambda: ServerError("unavailable", status=503, retry_after=0),
    "reset": lambda: TransportError("reset after sending", maybe_sent=True),
    "refused": lambda: TransportError("connection refused", maybe_sent=False),
    "creds": lambda: CredentialsError("credentials refused", status=400),
}

A, D, R, U, N = (
    OutcomeStatus.ACCEPTED,
    OutcomeStatus.DUPLICATE,
    OutcomeStatus.REJECTED,
    OutcomeStatus.UNKNOWN,
    OutcomeStatus.NOT_SENT,
)
CLASSES = (
    Safety.READ,
    Safety.DEDUPLICATED_WRITE,
    Safety.UPLOAD,
    Safety.AT_MOST_ONCE_WRITE,
)

#: answers -> (READ, DEDUPLICATED_WRITE, UPLOAD, AT_MOST_ONCE_WRITE): (status, requests).
#: ``max_attempts=3``; every driver has a deadline a minute away.
TABLE = {
    ("201",): [(A, 1)] * 4,
    ("409",): [(D, 1)] * 4,  # held before the first attempt: done before this request
    ("reset", "409"): [(D, 2), (A, 2), (U, 1), (U, 1)],  # a write's own lost commit
    ("reset", "201"): [(A, 2), (A, 2), (U, 1), (U, 1)],
    ("500", "201"): [(A, 2), (A, 2), (U, 1), (U, 1)],
    ("408", "408", "408"): [(N, 3), (U, 3), (U, 1), (U, 1)],
    ("503", "201"): [(A, 2)] * 4,  # 503: certainly not handled, any class re-sends
    ("429", "201"): [(A, 2)] * 4,
    ("refused", "refused", "refused"): [(N, 3)] * 4,
    ("reset", "refused", "refused"): [(N, 3), (U, 3), (U, 1), (U, 1)],
    # The decided divergence: a definite refusal of a deduplicated write re-sent after a
    # lost answer is the answer (a held one would have been answered 409).
    ("reset", "400"): [(R, 2), (R, 2), (U, 1), (U, 1)],
    ("400",): [(R, 1)] * 4,
    ("401",): [(N, 1)] * 4,  # credentials, never the request's refusal
    ("reset", "401"): [(N, 2), (U, 2), (U, 1), (U, 1)],
    ("401*", "201"): [(A, 2)] * 4,  # a revoked token: waited out within the deadline
    ("404",): [(N, 1)] * 4,
    ("creds",): [(N, 1)] * 4,
    ("reset", "409?", "409"): [(D, 3), (A, 3), (U, 1), (U, 1)],  # re-sent for the record
}

ROWS = [
    pytest.param(answers, safety, verdict, id=f"{'+'.join(answers)}:{safety.name}")
    for answers, verdicts in TABLE.items()
    for safety, verdict in zip(CLASSES, verdicts, strict=True)
]


def scripted(answers):
    """One attempt per call: the next answer, returned or raised."""
    queue = [ANSWERS[name] for name in answers]

    async def attempt(*, timeout=None):
        answer = queue.pop(0)
        if callable(answer):
            raise answer()
        return answer

    return attempt


async def single_call(answers, safety):
    delivery = Delivery(
        "id:X-1",
        0,
        IDENTITY,
        policy=POLICY,
        deadline=asyncio.get_running_loop().time() + 60,
        safety=safety,
    )
    outcome = await delivery.run(_Sender(answers), prepared=None)
    return outcome.status, outcome.attempts


async def in_a_batch(answers, safety):
    shared = Shared(Budget(POLICY), Breaker(POLICY.circuit_breaker), ReauthWaits(3))
    delivery = Delivery(
        "id:X-1",
        0,
        IDENTITY,
        policy=POLICY,
        shared=shared,
        deadline=asyncio.get_running_loop().time() + 60,
        safety=safety,
    )
    outcome = await delivery.run(_Sender(answers), prepared=None)
    return outcome.status, outcome.attempts


class _Sender:
    """A channel for a batch: each attempt takes the next scripted answer."""

    limit = 8
    parallelism = (4, 1)

    def __init__(self, answers):
        self._attempt = scripted(answers)

    per_issuer = False

    def ensure_usable(self):
        pass

    async def acquire(self, issuer):
        return self

    def release(self, route):
        pass

    async def prepare_many(self, documents):
        return [_serialized(document) for document, _ in documents]

    async def send(self, prepared, *, timeout, leaving):
        leaving()
        return await self._attempt()


async def whole_batch(answers, safety):
    if safety is not Safety.DEDUPLICATED_WRITE:
        return None  # a batch sends documents: deduplicated writes only
    sender = _Sender(answers)
    options = BatchOptions(retry=POLICY, deadline=60, concurrency=2)
    [outcome] = await collect(Batch(sender, sender, options, None), [DOCUMENT])
    return outcome.status, outcome.attempts


class _Channel:
    """An issuer's channel for the operations runner: scripted answers."""

    def __init__(self, answers):
        self._attempt = scripted(answers)

    def ensure_usable(self):
        pass

    async def send_call(self, method, path, **_):
        return await self._attempt()


async def operation(answers, safety):
    call = Operation("POST", "/B2GInvoice/ReSeedInvoice", safety, "read its status")
    end = await ending(
        _Channel(answers),
        call,
        lambda record: (201, record),
        policy=POLICY,
        timeout=60,
        needs_record=True,
    )
    return end.status, end.attempts


DRIVERS = [single_call, in_a_batch, whole_batch, operation]


@pytest.mark.parametrize(("answers", "safety", "verdict"), ROWS)
async def test_every_driver_gives_the_tables_verdict(answers, safety, verdict):
    """Each driver ends the request as the table says: same status, same requests."""
    got = {driver.__name__: await driver(answers, safety) for driver in DRIVERS}
    expected = {name: verdict for name, seen in got.items() if seen is not None}
    assert {name: seen for name, seen in got.items() if seen is not None} == expected
