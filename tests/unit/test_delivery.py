"""One document's delivery: classification, retries, deadlines, breaker, AIMD limiter, logs.

A scripted ``send`` stands in for the issuer's channel: each attempt takes the next
answer (a record or an error), so every rule the decision core applies to a document is
checked exactly, without HTTP.
"""

from __future__ import annotations

import asyncio
import logging

import attrs
import pytest

from invoicing_async import (
    AuthenticationError,
    ClientStateError,
    CredentialsError,
    DocumentResult,
    DuplicateDocumentError,
    ForeignRecordError,
    MalformedResponseError,
    OutcomeStatus,
    ProviderTimeoutError,
    RateLimitError,
    RetryPolicy,
    ServerError,
    TransportError,
    UnexpectedStatusError,
    UnknownOutcomeError,
    ValidationError,
)
from invoicing_async._core.shared import Breaker, Budget, ReauthWaits, Shared
from invoicing_async._core.table import RULES, Load, classify
from invoicing_async._doc.document import Identity
from invoicing_async._send._limiter import Limiter
from invoicing_async._send.delivery import Delivery

NO_WAIT = RetryPolicy(base_delay=0, max_delay=0, max_attempts=4)
OWN = DocumentResult(mark=1, series="A", number="7", internal_id="X-7")
IDENTITY = Identity("A", "7", "X-7")


def script(*answers):
    """A send() that answers each attempt with the next record or raises the next error."""
    queue = list(answers)
    calls = []

    async def send(timeout):
        calls.append(timeout)
        answer = queue.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    send.calls = calls
    return send


class route:  # noqa: N801  (read as a function: route(send))
    """A channel whose every attempt is ``send(timeout=...)``, its request out at once."""

    def __init__(self, send):
        self._send = send

    def send(self, prepared, *, timeout, leaving):
        leaving()
        return self._send(timeout=timeout)


def delivery(**kwargs):
    kwargs.setdefault("policy", NO_WAIT)
    return Delivery("id:X-7", 0, IDENTITY, **kwargs)


def shared(policy=NO_WAIT):
    return Shared(Budget(policy), Breaker(policy.circuit_breaker))


REFUSED = TransportError("refused", maybe_sent=False)
RESET = TransportError("reset after sending", maybe_sent=True)


@pytest.mark.parametrize(
    ("answers", "status", "attempts"),
    [
        ([OWN], OutcomeStatus.ACCEPTED, 1),
        ([DuplicateDocumentError("dup", result=OWN)], OutcomeStatus.DUPLICATE, 1),
        ([RESET, DuplicateDocumentError("dup", result=OWN)], OutcomeStatus.ACCEPTED, 2),
        ([ServerError("s", status=500), OWN], OutcomeStatus.ACCEPTED, 2),
        ([ProviderTimeoutError("t", status=408), OWN], OutcomeStatus.ACCEPTED, 2),
        ([MalformedResponseError("m", status=201), OWN], OutcomeStatus.ACCEPTED, 2),
        ([REFUSED, RateLimitError("r", status=429), OWN], OutcomeStatus.ACCEPTED, 3),
        ([ValidationError("v", status=400)], OutcomeStatus.REJECTED, 1),
        ([AuthenticationError("vat", status=401)], OutcomeStatus.NOT_SENT, 1),
        ([UnexpectedStatusError("404", status=404)], OutcomeStatus.NOT_SENT, 1),
        ([CredentialsError("creds", status=400)], OutcomeStatus.NOT_SENT, 1),
        ([RESET, ClientStateError("closed")], OutcomeStatus.UNKNOWN, 2),
        ([REFUSED] * 4, OutcomeStatus.NOT_SENT, 4),
        ([RESET, REFUSED, REFUSED, REFUSED], OutcomeStatus.UNKNOWN, 4),
    ],
    ids=[
        "201",
        "409-first",
        "reset-then-409",
        "500-then-201",
        "408-then-201",
        "unreadable-201-then-201",
        "not-sent-then-201",
        "400",
        "401",
        "404",
        "credentials",
        "reset-then-closed",
        "never-sent",
        "maybe-then-never",
    ],
)
async def test_each_answer_gives_its_truthful_outcome(answers, status, attempts):
    """The classification table: what each answer means for the document."""
    outcome = await delivery().run(route(script(*answers)), None)
    assert (outcome.status, outcome.attempts) == (status, attempts)
    if status is OutcomeStatus.UNKNOWN:
        assert isinstance(outcome.error, UnknownOutcomeError)
        assert outcome.error.attempts == attempts
    if status is OutcomeStatus.ACCEPTED:
        assert outcome.result == OWN
        assert outcome.error is None


async def test_without_resends_an_ambiguous_failure_ends_unknown_at_once():
    """resend_ambiguous=False: never a second request after a failure that may have been
    committed."""
    policy = RetryPolicy(base_delay=0, max_delay=0, resend_ambiguous=False)
    send = script(RESET, OWN)
    outcome = await delivery(policy=policy).run(route(send), None)
    assert outcome.status is OutcomeStatus.UNKNOWN
    assert outcome.error.last_error is RESET
    assert len(send.calls) == 1


@pytest.mark.parametrize(
    ("first", "status"),
    [(RESET, OutcomeStatus.ACCEPTED), (None, OutcomeStatus.DUPLICATE)],
    ids=["own-commit", "sent-before"],
)
async def test_a_409_without_a_readable_record_is_resent_for_the_record(first, status):
    """A 409 whose body cannot be read (truncated on the way) says the provider holds
    the document but not its record: re-sending is safe and brings the record back.
    Only when no attempt is left does the outcome keep the 409 without a record."""
    unreadable = DuplicateDocumentError("dup", result=None)
    answers = [a for a in (first, unreadable, DuplicateDocumentError("dup", result=OWN)) if a]
    outcome = await delivery().run(route(script(*answers)), None)
    assert (outcome.status, outcome.result) == (status, OWN)
    last_chance = delivery(policy=RetryPolicy(base_delay=0, max_attempts=len(answers) - 1))
    held = await last_chance.run(route(script(*answers[:-1])), None)
    assert (held.status, held.result, held.error) == (status, None, unreadable)


async def test_a_409_without_a_record_stays_held_when_the_retry_budget_runs_out():
    """The batch's budget spent after a record-less 409: still held, never NOT_SENT."""
    policy = RetryPolicy(base_delay=0, max_delay=0, min_budget=0, budget_ratio=0)
    unreadable = DuplicateDocumentError("dup", result=None)
    outcome = await delivery(policy=policy, shared=shared(policy)).run(
        route(script(unreadable)), None
    )
    assert (outcome.status, outcome.result, outcome.error) == (
        OutcomeStatus.DUPLICATE,
        None,
        unreadable,
    )


async def test_in_a_batch_a_429_costs_a_quarter_attempt():
    """A batch halves its concurrency on 429: the refusals while it adapts (each one
    certainly not processed) cost a quarter attempt, so a document is not given up
    while the batch finds the provider's capacity. A single call (no batch) counts
    every 429 as an attempt."""
    slow = RateLimitError("slow", status=429)
    policy = RetryPolicy(base_delay=0, max_delay=0, max_attempts=2)
    answers = [slow] * 4 + [OWN]
    in_batch = await delivery(policy=policy, shared=shared(policy)).run(
        route(script(*answers)), None
    )
    assert (in_batch.status, in_batch.attempts) == (OutcomeStatus.ACCEPTED, 5)
    alone = await delivery(policy=policy).run(route(script(*answers)), None)
    assert (alone.status, alone.attempts) == (OutcomeStatus.NOT_SENT, 2)
    always = await delivery(policy=policy, shared=shared(policy)).run(
        route(script(*[slow] * 9)), None
    )
    assert (always.status, always.attempts) == (OutcomeStatus.NOT_SENT, 8)


@pytest.mark.parametrize("duplicate", [False, True])
async def test_a_foreign_record_is_never_accepted(duplicate):
    """A 201 (or 409) with another document's record is an ambiguous answer: retried, and
    the document's own record (here through the 409 that follows) is what it ends with."""
    foreign = DocumentResult(mark=2, series="A", number="8", internal_id="X-8")
    first = DuplicateDocumentError("dup", result=foreign) if duplicate else foreign
    outcome = await delivery().run(
        route(script(first, DuplicateDocumentError("dup", result=OWN))), None
    )
    assert outcome.status is OutcomeStatus.ACCEPTED
    assert outcome.result == OWN
    only_foreign = await delivery(policy=RetryPolicy(max_attempts=1)).run(
        route(script(first)), None
    )
    assert only_foreign.status is OutcomeStatus.UNKNOWN
    assert isinstance(only_foreign.error.last_error, ForeignRecordError)
    assert only_foreign.error.last_error.result == foreign
    assert only_foreign.error.last_error.mismatches == ("number", "internal_id")


async def test_a_retry_after_beyond_the_deadline_gives_up_without_sleeping():
    """No sleep outlives the deadline: a 429 asking for 600 s with 60 s left ends now,
    not after a sleep until the deadline."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    outcome = await delivery(policy=RetryPolicy(), deadline=started + 60).run(
        route(script(RateLimitError("slow", status=429, retry_after=600))), None
    )
    assert loop.time() - started < 30
    assert outcome.status is OutcomeStatus.NOT_SENT


async def test_each_attempt_gets_what_is_left_of_the_deadline():
    """The attempt timeout is capped by the time left to the deadline."""
    loop = asyncio.get_running_loop()
    send = script(REFUSED, OWN)
    policy = RetryPolicy(base_delay=0, max_delay=0, attempt_timeout=30)
    await delivery(policy=policy, deadline=loop.time() + 2).run(route(send), None)
    assert all(0 < timeout <= 2 for timeout in send.calls)


async def test_a_cancelled_send_is_recorded_as_unknown_a_cancelled_wait_as_not_sent():
    """interrupted() says UNKNOWN when a request may be out, NOT_SENT when none is."""

    async def hang(timeout):
        await asyncio.sleep(3600)

    sending = delivery()
    task = asyncio.ensure_future(sending.run(route(hang), None))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sending.interrupted().status is OutcomeStatus.UNKNOWN

    waiting = delivery(policy=RetryPolicy(base_delay=3600, max_delay=3600))
    task = asyncio.ensure_future(waiting.run(route(script(REFUSED)), None))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert waiting.interrupted().status is OutcomeStatus.NOT_SENT


class waiting_for_a_token:  # noqa: N801  (read as a function: a route)
    """A channel whose attempts wait for a token that never comes: nothing ever leaves."""

    def __init__(self):
        self.waiting = asyncio.Event()

    async def send(self, prepared, *, timeout, leaving):
        self.waiting.set()
        await asyncio.Future()  # the token; leaving() would be called once it came
        leaving()


async def test_a_delivery_cut_off_before_its_request_left_is_not_sent_and_sent_nothing():
    """Cut off while its route waits for an access token (``leaving`` not called yet),
    a delivery is NOT_SENT and that attempt is not one of its requests: 0 attempts, or
    the requests that did leave before (issue 38: before, it was recorded UNKNOWN, as
    if the provider might hold it)."""
    for earlier in ([], [REFUSED]):
        route = waiting_for_a_token()
        answers = list(earlier)

        class after_earlier:  # noqa: N801
            def send(self, prepared, *, timeout, leaving):
                if answers:
                    leaving()
                    return script(answers.pop(0))(timeout)
                return route.send(prepared, timeout=timeout, leaving=leaving)

        cut = delivery()
        task = asyncio.ensure_future(cut.run(after_earlier(), None))
        await route.waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        outcome = cut.interrupted()
        assert outcome.status is OutcomeStatus.NOT_SENT
        assert outcome.attempts == len(earlier)
        assert not cut.maybe_committed


async def test_a_request_that_left_and_was_cut_off_may_have_been_committed():
    """Once ``leaving`` was called, a cut-off attempt is UNKNOWN and counted."""
    left = asyncio.Event()

    class out:  # noqa: N801
        async def send(self, prepared, *, timeout, leaving):
            leaving()
            left.set()
            await asyncio.Future()  # no answer

    cut = delivery()
    task = asyncio.ensure_future(cut.run(out(), None))
    await left.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    outcome = cut.interrupted()
    assert outcome.status is OutcomeStatus.UNKNOWN
    assert outcome.attempts == 1


def test_breaker_opens_after_a_run_and_any_other_answer_ends_the_run():
    """Consecutive configuration failures open it; a success or a 400 resets the run."""
    breaker = Breaker(3)
    vat = AuthenticationError("vat", status=401)
    breaker.record(vat)
    breaker.record(vat)
    breaker.record(None)
    breaker.record(vat)
    breaker.record(ValidationError("bad", status=400))
    breaker.record(vat)
    breaker.record(vat)
    assert breaker.error is None
    breaker.record(vat)
    assert isinstance(breaker.error, TransportError)
    assert "3 consecutive" in str(breaker.error)


async def test_an_open_breaker_sends_nothing_more():
    """Once a batch's breaker is open, its documents end NOT_SENT without a request."""
    batch = shared()
    batch.breaker.trip(CredentialsError("creds", status=400))
    send = script(OWN)
    outcome = await delivery(shared=batch).run(route(send), None)
    assert outcome.status is OutcomeStatus.NOT_SENT
    assert isinstance(outcome.error, CredentialsError)
    assert send.calls == []


def load(error):
    """What the decision core says an answer (``None``: a success) tells of the load."""
    return Load.GROW if error is None else RULES[classify(error)].load


async def test_limiter_halves_once_per_round_and_grows_back_slowly():
    """AIMD: overloads from one round halve the limit once; each success adds 1/limit."""
    limiter = Limiter(16)
    rounds = [await limiter.acquire() for _ in range(8)]
    for sent in rounds:
        limiter.release(sent, load(RateLimitError("slow", status=429)))
    assert limiter.limit == 8
    for _ in range(9):  # a window of successes (the limit grows within it) adds one
        limiter.release(await limiter.acquire(), load(None))
    assert limiter.limit == 9
    limiter.release(await limiter.acquire(), load(ServerError("busy", status=503)))
    assert limiter.limit == 4
    for _ in range(10):
        limiter.release(await limiter.acquire(), load(RateLimitError("s", status=429)))
    assert limiter.limit == 1  # never below one


async def test_limiter_holds_requests_beyond_the_limit_until_one_ends():
    """Room is given in order as requests end; a waiter that is cancelled gives way."""
    limiter = Limiter(1)
    first = await limiter.acquire()
    second = asyncio.ensure_future(limiter.acquire())
    third = asyncio.ensure_future(limiter.acquire())
    await asyncio.sleep(0)
    assert not second.done()
    second.cancel()
    limiter.release(first, load(None))
    assert await asyncio.wait_for(third, 1) == 0


async def test_retries_and_give_ups_are_logged_with_key_and_attempt(caplog):
    """An operator sees each retry (INFO) and each give-up (WARNING) with the document's
    key and the attempt number."""
    caplog.set_level(logging.INFO, logger="invoicing_async")
    await delivery().run(route(script(REFUSED, REFUSED, REFUSED, REFUSED)), None)
    retries = [r for r in caplog.records if r.levelno == logging.INFO]
    assert all(r.getMessage().startswith("invoice id:X-7: attempt") for r in retries)
    assert len(retries) == 3
    assert "attempt 2 failed" in retries[1].getMessage()
    [gave_up] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "id:X-7" in gave_up.getMessage()
    assert "after 4 attempt(s)" in gave_up.getMessage()


# --- a 401 while no new token may be requested (the re-authentication cooldown) -------------

COOLDOWN_401 = AuthenticationError("token refused", status=401, reauth_in=0.05)


async def test_a_401_in_the_reauth_cooldown_is_waited_out_within_a_deadline():
    """A 401 that the token may have caused, while no new token may be requested for
    0.05 s: a delivery whose deadline leaves the time waits that long and sends again
    (accepted); the wait is the cooldown, not a backoff; the breaker is not fed."""
    loop = asyncio.get_running_loop()
    send = script(COOLDOWN_401, OWN)
    policy = RetryPolicy(base_delay=3600, max_delay=3600, circuit_breaker=1)
    state = shared(policy)
    started = loop.time()
    outcome = await delivery(policy=policy, deadline=started + 60, shared=state).run(
        route(send), None
    )
    assert outcome.status is OutcomeStatus.ACCEPTED
    assert outcome.attempts == 2
    assert loop.time() - started < 30  # the 0.05 s cooldown, not the 3600 s backoff
    assert state.breaker.error is None


async def test_a_401_in_the_reauth_cooldown_without_time_to_wait_is_not_sent_and_says_why():
    """Without a deadline in a single call (or with a deadline too close to wait the
    cooldown out), the same 401 ends the document ``not_sent`` — never ``rejected``:
    the provider refused a token, not the document — its error saying when a new token
    may be requested, and counted by the breaker like any 401 to a document."""
    policy = RetryPolicy(circuit_breaker=1)
    for deadline in (None, asyncio.get_running_loop().time() + 10):  # 10 s < the 30 s wait
        state = shared(policy)
        blocked = AuthenticationError("token refused", status=401, reauth_in=30.0)
        outcome = await delivery(policy=policy, deadline=deadline, shared=state).run(
            route(script(blocked)), None
        )
        assert outcome.status is OutcomeStatus.NOT_SENT
        assert outcome.error.reauth_in == 30.0
        assert state.breaker.error is not None


async def test_a_batch_waits_out_reauth_cooldowns_as_windows_shared_by_its_documents():
    """In a batch without a deadline, documents that meet a 401 in the cooldown wait
    for the next token. All documents waiting for the same moment share one window,
    so a burst of 401s costs one wait of the batch's ``reauth_waits``; after that many
    windows in a row with nothing answered between, documents end ``not_sent``, and an
    answered document starts the count again."""
    waits = ReauthWaits(2)
    assert all(waits.enter(10.0) for _ in range(100))  # one window, however many wait
    assert waits.enter(20.0)  # a second window
    assert not waits.enter(30.0)  # a third, with nothing answered since: no more waits
    assert waits.enter(20.1)  # joining the window already open is still allowed
    waits.progress()
    assert waits.enter(30.0)

    state = attrs.evolve(shared(), reauth=ReauthWaits(1))
    outcome = await delivery(shared=state).run(route(script(COOLDOWN_401, OWN)), None)
    assert (outcome.status, outcome.attempts) == (OutcomeStatus.ACCEPTED, 2)
    state = attrs.evolve(shared(), reauth=ReauthWaits(0))
    outcome = await delivery(shared=state).run(route(script(COOLDOWN_401, OWN)), None)
    assert (outcome.status, outcome.attempts) == (OutcomeStatus.NOT_SENT, 1)
    assert outcome.error is COOLDOWN_401
