"""The decision core: one place decides every request's fate. Pure: no I/O, no clock.

Every request the library makes — a document in a batch, a single call, a sale, each
named operation, a token grant — is run by the same state machine, :class:`Attempts`,
in the shape of stamina's retry context and h11's connection: the driver asks it what
to do, does it, and tells it what happened, handing it the time each time::

    step = attempts.next(now)              # Send(timeout) | End(outcome)
    ... send one attempt within step.timeout ...
    step = attempts.failed(error, now)     # Wait(seconds) | End(outcome)
    step = attempts.succeeded(result)      # End(outcome)

What an answer means is decided in two steps. :func:`classify` turns the failed
attempt's error into a :class:`Kind`, and :data:`RULES` says, for each kind, what the
request becomes if this answer ends it, whether another attempt may change that,
whether the provider may now hold what was sent, and what the answer says about the
configuration (a batch's :class:`Breaker`). Then the request's :class:`~._safety.Safety`
class says what may follow (:func:`may_resend`, :func:`duplicate_means_success`):

* after a failure that may have been processed (:func:`maybe_processed`: a reset after
  sending, a read timeout, 408, 5xx but 503, an unreadable 2xx) a ``READ`` or a
  ``DEDUPLICATED_WRITE`` is sent again, an ``UPLOAD`` or an ``AT_MOST_ONCE_WRITE`` ends
  ``UNKNOWN`` at once;
* a 409 answering a deduplicated write whose earlier attempt may have been processed
  is that attempt's commit (``ACCEPTED``), else a ``DUPLICATE``; a 409 whose record
  cannot be read is sent again for the record when the caller needs one;
* once an attempt may have been processed, an ending that says "not sent" says
  ``UNKNOWN`` instead — except for a ``READ``, which has no effect to be unsure about;
* a definite refusal of a re-sent deduplicated write (a 400 after a lost answer) is
  the answer, ``REJECTED``: the provider answers what it already holds with 409, so a
  refusal of the identical request says it holds nothing;
* a 401 that a revoked access token may have caused while no new token may be
  requested yet (``REAUTH``) is waited out within the deadline and the batch's
  :class:`ReauthWaits`; a 401/403 that a new token did not cure (``AUTH``) ends
  ``NOT_SENT``: it refuses the credentials, never the document.

Retries stop at ``max_attempts`` (a 429 in a batch costs a quarter attempt: the batch
halves its concurrency meanwhile), at the deadline (no wait outlives it), when the
batch's retry budget is spent, when its breaker opens, or at the first answer of a kind
the caller named ``decisive`` (a sale defers at once when the provider is unreachable).

What a batch's documents share — its retry :class:`Budget`, its :class:`Breaker`, its
:class:`ReauthWaits` — is owned by the batch and handed in as :class:`Shared`; a single
call shares nothing (:data:`SINGLE`). Drivers: :mod:`._delivery` (documents),
:mod:`._operations` (the other operations), the token grant in :mod:`._channel`, all
through the one loop of :mod:`._attempts`.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

import attrs

from ._errors import (
    AuthenticationError,
    ClientStateError,
    CredentialsError,
    DuplicateDocumentError,
    ForeignRecordError,
    InvoicingError,
    MalformedResponseError,
    ProviderKeyError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    TransportError,
    UnexpectedStatusError,
    UnknownIssuerError,
    UnknownOutcomeError,
)
from ._outcomes import OutcomeStatus
from ._safety import Safety

if TYPE_CHECKING:
    import random
    from collections.abc import Collection

    from ._retry import RetryPolicy

__all__ = [
    "RULES",
    "SINGLE",
    "Attempts",
    "Blame",
    "Breaker",
    "Budget",
    "End",
    "Kind",
    "ReauthWaits",
    "Rule",
    "Send",
    "Shared",
    "Wait",
    "certainly_not_processed",
    "classify",
    "duplicate_means_success",
    "may_resend",
    "maybe_processed",
]


# --- what an answer means -----------------------------------------------------------------


def maybe_processed(error: BaseException) -> bool:
    """Whether the provider may have processed the request that failed with ``error``.

    True for failures after the request may have been processed: a reset after sending,
    a read timeout, 408, 5xx except 503 (RFC 9110 §15.6.4: not handled), an unreadable
    2xx, a record of another document, an earlier unknown outcome. False for definite
    answers (400, 401, 409, 429, 503) and for requests that never left (connection
    refused, refused locally).
    """
    if isinstance(error, TransportError):
        return error.maybe_sent
    if isinstance(error, ServerError):
        return error.status != 503
    if isinstance(error, ProviderTimeoutError):
        return True
    if isinstance(error, MalformedResponseError):
        return error.status is None or 200 <= error.status < 300
    return isinstance(error, (ForeignRecordError, UnknownOutcomeError))


def certainly_not_processed(error: BaseException) -> bool:
    """Whether ``error`` says the provider did not process the request, which may pass.

    A refused connection (or no token to send with), 429, and 503.
    """
    if isinstance(error, TransportError):
        return not error.maybe_sent
    if isinstance(error, ServerError):
        return error.status == 503
    return isinstance(error, RateLimitError)


def may_resend(safety: Safety, *, maybe_sent: bool, resend_ambiguous: bool = True) -> bool:
    """Whether a request of class ``safety`` may be sent again after a failed attempt.

    :param maybe_sent: the failed attempt may have been processed by the provider
        (:func:`maybe_processed`); ``False`` when it certainly was not.
    :param resend_ambiguous: :attr:`RetryPolicy.resend_ambiguous
        <invoicing_async.RetryPolicy.resend_ambiguous>`: ``False`` tightens a
        deduplicated write to "never re-sent after an ambiguous failure". A read has no
        effect to repeat and ignores it.
    """
    if not maybe_sent or safety is Safety.READ:
        return True
    return safety is Safety.DEDUPLICATED_WRITE and resend_ambiguous


def duplicate_means_success(safety: Safety, *, after_own_attempt: bool) -> bool:
    """Whether a 409 answer means "done, by this request" rather than "done before".

    True only for a deduplicated write whose earlier attempt (in this call, or in an
    earlier run that may have sent it) may have been processed: the provider answers
    with what that attempt left. A 409 to the first attempt (or after attempts that
    certainly never arrived) means it was done before; for the other classes a 409 is
    always an answer of its own (a second cancellation is refused with the first one's
    mark).
    """
    return safety is Safety.DEDUPLICATED_WRITE and after_own_attempt


class Kind(enum.Enum):
    """What one attempt's answer was, as far as the request is concerned."""

    #: 409: the provider holds it; the body is its record.
    HELD = "held"
    #: 409 whose record cannot be read: held for sure, a re-send brings the record.
    HELD_UNREADABLE = "held, record unreadable"
    #: A record of another document: the provider may hold this one or not.
    FOREIGN = "foreign record"
    #: The request may have been processed (:func:`maybe_processed`).
    AMBIGUOUS = "ambiguous"
    #: Certainly not processed, and it may pass (connection refused, no token).
    NOT_SENT = "not sent"
    #: 429 or 503: certainly not processed; the provider asks for fewer requests.
    THROTTLED = "throttled"
    #: A definite refusal of the request (400, 413, 422).
    REFUSED = "refused"
    #: 401/403 even with a token fetched for this request: the API key, or the issuer's
    #: VAT number. Not a judgement of a document: it ends ``NOT_SENT``.
    AUTH = "authentication"
    #: 401 that a revoked access token may have caused, while no new token may be
    #: requested yet: the re-authentication cooldown. Waited out (within the deadline,
    #: and a batch's :class:`ReauthWaits`), else an ``AUTH`` answer.
    REAUTH = "authentication, no new token yet"
    #: 404/405/415 or a redirect: the base URL or path is wrong.
    MISCONFIGURED = "misconfigured"
    #: Nothing can be sent: refused credentials, an unusable provider key (also one the
    #: provider cannot decrypt), a closed client.
    STOP = "stop"


class Blame(enum.Enum):
    """What an answer says about the configuration."""

    #: Nothing against it: the run of bad answers ends.
    NONE = "none"
    #: Another answer that blames it: a batch stops after ``circuit_breaker`` in a row.
    CONFIG = "configuration"
    #: Nothing more can be sent: a batch stops now.
    STOP = "stop"


@attrs.frozen
class Rule:
    """What follows an answer of one :class:`Kind`."""

    #: What the request becomes if this answer ends it.
    ends: OutcomeStatus
    #: Whether another attempt may change the outcome.
    retry: bool
    #: Whether the provider may hold what was sent after this answer.
    may_hold: bool
    breaker: Blame


_A, _D, _R, _U, _N = (
    OutcomeStatus.ACCEPTED,
    OutcomeStatus.DUPLICATE,
    OutcomeStatus.REJECTED,
    OutcomeStatus.UNKNOWN,
    OutcomeStatus.NOT_SENT,
)

#: The one table: every failed answer's consequence (a success ends ``ACCEPTED``).
RULES: dict[Kind, Rule] = {
    Kind.HELD: Rule(_D, retry=False, may_hold=True, breaker=Blame.NONE),
    Kind.HELD_UNREADABLE: Rule(_D, retry=True, may_hold=True, breaker=Blame.NONE),
    Kind.FOREIGN: Rule(_U, retry=True, may_hold=True, breaker=Blame.NONE),
    Kind.AMBIGUOUS: Rule(_U, retry=True, may_hold=True, breaker=Blame.NONE),
    Kind.NOT_SENT: Rule(_N, retry=True, may_hold=False, breaker=Blame.NONE),
    Kind.THROTTLED: Rule(_N, retry=True, may_hold=False, breaker=Blame.NONE),
    Kind.REFUSED: Rule(_R, retry=False, may_hold=False, breaker=Blame.NONE),
    Kind.AUTH: Rule(_N, retry=False, may_hold=False, breaker=Blame.CONFIG),
    Kind.REAUTH: Rule(_N, retry=True, may_hold=False, breaker=Blame.NONE),
    Kind.MISCONFIGURED: Rule(_N, retry=False, may_hold=False, breaker=Blame.CONFIG),
    Kind.STOP: Rule(_N, retry=False, may_hold=False, breaker=Blame.STOP),
}


def classify(error: InvoicingError) -> Kind:
    """The kind of a failed attempt (see :class:`Kind`)."""
    if isinstance(error, (CredentialsError, ClientStateError, ProviderKeyError)):
        return Kind.STOP
    if isinstance(error, UnknownIssuerError):
        return Kind.AUTH  # no credentials for the issuer: nothing sent, and nothing can be
    if isinstance(error, DuplicateDocumentError):
        return Kind.HELD if error.result is not None else Kind.HELD_UNREADABLE
    if isinstance(error, ForeignRecordError):
        return Kind.FOREIGN
    if maybe_processed(error):
        return Kind.AMBIGUOUS
    if isinstance(error, TransportError):
        return Kind.NOT_SENT
    if certainly_not_processed(error):  # 429, 503
        return Kind.THROTTLED
    if isinstance(error, AuthenticationError):
        return Kind.AUTH if error.reauth_in is None else Kind.REAUTH
    if isinstance(error, UnexpectedStatusError) or (
        isinstance(error, MalformedResponseError)
        and error.status is not None
        and 300 <= error.status < 400
    ):
        return Kind.MISCONFIGURED
    return Kind.REFUSED


#: Answers the provider gave to a token it accepted: a batch's re-authentication
#: waits start again.
_TOKEN_ACCEPTED = frozenset({Kind.HELD, Kind.HELD_UNREADABLE, Kind.FOREIGN, Kind.REFUSED})

#: Answers that end a request ``NOT_SENT`` (or ``UNKNOWN``), and why (a key of :data:`_WHY`).
_ENDS = {Kind.STOP: "stop", Kind.MISCONFIGURED: "configuration", Kind.AUTH: "credentials"}

#: Why a request stops trying, as its log line and error say it.
_WHY = {
    "attempts": "no attempts left",
    "budget": "the batch's retry budget ran out",
    "deadline": "the deadline passed",
    "stop": "its issuer's documents stopped",
    "decisive": "an answer that decides at once",
    "no re-sends": "re-sending after an ambiguous failure is off (resend_ambiguous=False)",
    "at most once": "{safety} is not re-sent after a failure that may have been processed",
    "configuration": "the provider refuses the configuration",
    "credentials": "the provider refused the credentials or the issuer (a new token did not help)",
    "refused on re-send": "a re-send for the record was refused",
    "lease lost": "another worker took the entry over",
    "no credentials": "there are no credentials for its issuer",
}


# --- what a batch's requests share -----------------------------------------------------------


class Budget:
    """Retries a batch may spend: a floor plus a share per document started."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._tokens = float(policy.min_budget)
        self._ratio = policy.budget_ratio

    def started(self) -> None:
        """One more document: a little more budget."""
        self._tokens += self._ratio

    def take(self) -> bool:
        """Spend one retry, if any is left."""
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


class Breaker:
    """Stops a batch that can only fail.

    It opens after ``threshold`` answers in a row that blame the configuration (an
    answer that does not blame it ends the row), or at once for one that leaves nothing
    to send (:attr:`Blame.STOP`); :attr:`error` then says why.
    """

    def __init__(self, threshold: int | None) -> None:
        self._threshold = threshold
        self._run = 0
        self.error: InvoicingError | None = None

    def record(self, error: InvoicingError | None, kind: Kind | None = None) -> None:
        """One answer (``None``: a success), judged by :data:`RULES` as ``kind``.

        ``kind`` is the answer's classification unless given (a refined one).
        """
        if error is not None and kind is None:
            kind = classify(error)
        blame = Blame.NONE if error is None or kind is None else RULES[kind].breaker
        if blame is Blame.NONE:
            self._run = 0
            return
        assert error is not None  # noqa: S101  (only an error blames)
        if blame is Blame.STOP:
            self.trip(error)
            return
        self._run += 1
        if self._threshold is not None and self._run >= self._threshold:
            self.trip(
                TransportError(
                    f"not sent: the batch stopped after {self._run} consecutive answers that "
                    f"blame the configuration (last: {error})",
                    maybe_sent=False,
                )
            )

    def trip(self, error: InvoicingError) -> None:
        """Open now: nothing more can be sent."""
        if self.error is None:
            self.error = error


class ReauthWaits:
    """The re-authentication cooldowns a batch waits out (``REAUTH`` answers).

    Every document that meets a 401 while no new token may be requested waits for the
    same moment: the end of the cooldown. Those waits form one *window*, however many
    documents join it, so a provider that revokes every token within a second costs
    one window per cooldown, never one per document. After ``limit`` windows in a row
    without an answer to an accepted token in between (:meth:`progress`), documents
    stop waiting: a 401 that new tokens do not cure is no longer the token's fault.
    """

    #: Windows closer than this are one (the cache's and the loop's clocks differ a little).
    _SAME = 0.25

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._windows = 0
        self._until = float("-inf")

    def enter(self, until: float) -> bool:
        """Whether a document may wait until ``until`` (loop time) for a new token."""
        if until <= self._until + self._SAME:
            return True
        if self._windows >= self._limit:
            return False
        self._windows += 1
        self._until = until
        return True

    def progress(self) -> None:
        """A request was answered with a token: the run of fruitless windows ends."""
        self._windows = 0


@attrs.frozen
class Shared:
    """What the requests of one batch share (a single call shares nothing)."""

    budget: Budget
    breaker: Breaker
    #: ``None``: wait for a new token only within a deadline (a single call).
    reauth: ReauthWaits | None = None
    #: What a 429 costs of ``max_attempts``: a batch adapts its concurrency meanwhile.
    throttled_cost: float = 0.25


class _Unlimited(Budget):
    def __init__(self) -> None:
        self._tokens = float("inf")
        self._ratio = 0.0

    def take(self) -> bool:
        return True


class _NoBreaker(Breaker):
    """A single call stops by itself: nothing else to stop."""

    def __init__(self) -> None:
        super().__init__(None)

    def record(self, error: InvoicingError | None, kind: Kind | None = None) -> None:
        pass


#: A single call's shared state: no budget, no breaker, a 429 costs a whole attempt.
SINGLE = Shared(_Unlimited(), _NoBreaker(), None, throttled_cost=1.0)


# --- the state machine -----------------------------------------------------------------------


@attrs.frozen
class Send:
    """Send one attempt, within ``timeout`` seconds (``None``: no limit)."""

    timeout: float | None


@attrs.frozen
class Wait:
    """Wait ``seconds``, then ask :meth:`Attempts.next` again; ``after`` is why."""

    seconds: float
    after: InvoicingError


@attrs.frozen
class End:
    """The request's outcome: how it ended, and with what.

    :ivar result: what the provider answered (a record, or an operation's answer), when
        it holds what was sent; for a held request whose answer could not be read,
        ``None`` (``error`` is then the 409).
    :ivar error: why it ended otherwise (for ``UNKNOWN`` an
        :class:`~invoicing_async.UnknownOutcomeError`); the 409 of a duplicate.
    :ivar last: the last failed attempt's error (what a ``decisive`` answer was).
    :ivar reason: why it stopped trying, in words, when it gave up.
    """

    status: OutcomeStatus
    attempts: int
    result: Any = None
    error: InvoicingError | None = None
    last: InvoicingError | None = None
    reason: str | None = None


#: Past the end of a re-authentication cooldown: the token cache's clock and the loop's
#: may tick apart by this much.
_REAUTH_MARGIN = 0.05

_FIND_OUT_DOCUMENT = "re-send it later to find out (the provider answers 409 if it holds it)"


@attrs.define
class Attempts:
    """The attempts of one request, until its outcome is known.

    :param safety: the request's :class:`~._safety.Safety` class.
    :param policy: attempts, backoff, attempt timeout, ambiguous re-sends.
    :param deadline: the time (on the driver's clock) by which the request must end, or
        ``None``.
    :param shared: the batch's state (:data:`SINGLE` for a single call).
    :param maybe_committed: an earlier run may have processed it (a resumed batch): a
        409 is then its own commit.
    :param needs_record: a 409 without a readable record is sent again for the record
        (documents); otherwise the 409 itself is the answer (operations).
    :param decisive: kinds of answer that end the attempts at once (a sale: unreachable,
        throttled, a foreign record).
    :param subject: what the request is, for the messages (``"the document"``,
        ``"POST /Invoice/cancelDeliveryNote"``).
    :param find_out: what the caller does to learn the outcome after an unknown one.
    :param rng: the jitter's random source.
    """

    safety: Safety
    policy: RetryPolicy
    deadline: float | None = None
    shared: Shared = SINGLE
    maybe_committed: bool = False
    needs_record: bool = True
    decisive: Collection[Kind] = frozenset()
    subject: str = "the document"
    find_out: str = _FIND_OUT_DOCUMENT
    rng: random.Random | None = None
    #: Requests sent.
    attempts: int = 0
    last_error: InvoicingError | None = None
    #: Attempts charged against ``max_attempts`` (a 429 in a batch costs less).
    _spent: float = 0.0
    #: The provider holds it (a 409 whose record could not be read yet).
    _held: tuple[OutcomeStatus, DuplicateDocumentError] | None = None

    # --- the three questions -------------------------------------------------------------

    def next(self, now: float) -> Send | End:
        """Before an attempt: send it (and within what timeout), or end."""
        shared = self.shared
        if shared.breaker.error is not None:
            return self.give_up("stop", shared.breaker.error)
        if self.attempts and not shared.budget.take():
            return self.give_up("budget")
        timeout = self.policy.attempt_timeout
        if self.deadline is not None:
            remaining = self.deadline - now
            if remaining <= 0:
                return self.give_up("deadline")
            timeout = remaining if timeout is None else min(timeout, remaining)
        self.attempts += 1
        self._spent += 1
        return Send(timeout)

    def succeeded(self, result: Any) -> End:
        """The attempt was answered with success (2xx): its ``result``."""
        self.shared.breaker.record(None)
        if self.shared.reauth is not None:
            self.shared.reauth.progress()
        return self._end(_A, result=result)

    def failed(self, error: InvoicingError, now: float) -> Wait | End:
        """The attempt failed with ``error`` (a 409 included): wait and retry, or end."""
        kind = classify(error)
        if kind is Kind.REAUTH and not self._may_wait(error, now):
            kind = Kind.AUTH  # no time to wait for a new token: the answer, said why
        shared = self.shared
        rule = RULES[kind]
        self.last_error = error
        shared.breaker.record(error, kind)
        if kind in _TOKEN_ACCEPTED and shared.reauth is not None:
            shared.reauth.progress()
        if kind in (Kind.HELD, Kind.HELD_UNREADABLE):
            assert isinstance(error, DuplicateDocumentError)  # noqa: S101  (classify says so)
            return self._held_answer(error, kind, now)
        if rule.may_hold and self.safety is not Safety.READ:
            self.maybe_committed = True
            resend = self.policy.resend_ambiguous
            if not may_resend(self.safety, maybe_sent=True, resend_ambiguous=resend):
                dedup = self.safety is Safety.DEDUPLICATED_WRITE
                return self.give_up("no re-sends" if dedup else "at most once", error)
        if kind in self.decisive:
            return self.give_up("decisive", error)
        if not rule.retry:
            why = _ENDS.get(kind)
            return self.give_up(why, error) if why else self._refused(error)
        if kind is Kind.THROTTLED:
            self._spent -= 1 - shared.throttled_cost
        if self._spent >= self.policy.max_attempts:
            return self.give_up("attempts")
        return self._retry(error, now)

    # --- endings without an answer -----------------------------------------------------------

    def give_up(self, why: str, error: InvoicingError | None = None) -> End:
        """Stop trying (``why``: a key of :data:`_WHY`).

        Held if the provider holds it, ``UNKNOWN`` if an attempt may have been processed,
        else ``NOT_SENT``.
        """
        reason = _WHY[why].format(safety=self.safety.name)
        if self._held is not None:
            status, first = self._held
            return self._end(status, error=first, reason=reason)
        error = error or self.last_error
        if self.maybe_committed:
            last = error or TransportError("no answer", maybe_sent=True)
            unknown = UnknownOutcomeError(
                f"{self.subject} may or may not have taken effect after {self.attempts} "
                f"attempt(s) ({reason}; last: {last}); {self.find_out}",
                last_error=last,
                attempts=self.attempts,
            )
            return self._end(_U, error=unknown, reason=reason)
        if error is None:
            error = TransportError(f"not sent: {reason}", maybe_sent=False)
        return self._end(_N, error=error, reason=reason)

    def refuse(self, error: InvoicingError) -> End:
        """Refused before sending (it cannot be read, serialised or encrypted)."""
        return self._end(_R, error=error, reason="refused before sending")

    def interrupted(self, *, sending: bool) -> End:
        """The ending to record when the attempts are cancelled midway.

        ``sending``: a request was out when it happened (it may have been processed).
        """
        committed = (sending and self.safety is not Safety.READ) or self.maybe_committed
        return self._end(_U if committed else _N, error=self.last_error, reason="interrupted")

    # --- internals -------------------------------------------------------------------------------

    def _held_answer(self, error: DuplicateDocumentError, kind: Kind, now: float) -> Wait | End:
        """A 409: the provider holds it. Ours or a duplicate, by the safety class.

        Sent again for the record when the caller needs one and it could not be read
        (a re-send is safe: it answers 409 with the record).
        """
        ours = duplicate_means_success(self.safety, after_own_attempt=self.maybe_committed)
        status, first = self._held or (_A if ours else _D, error)
        readable = kind is Kind.HELD or not self.needs_record
        if readable or self._spent >= self.policy.max_attempts:
            return self._end(status, result=error.result, error=_kept(status, error, first))
        self._held = status, first
        return self._retry(error, now)

    def _retry(self, error: InvoicingError, now: float) -> Wait | End:
        delay = self.policy.delay(self.attempts, retry_after=_wait_for(error), rng=self.rng)
        if self.deadline is not None and now + delay >= self.deadline:
            return self.give_up("deadline")
        return Wait(delay, error)

    def _may_wait(self, error: InvoicingError, now: float) -> bool:
        """Whether to wait for the next token (``REAUTH``).

        Within the deadline, and the batch's re-authentication waits; a single call
        waits only within a deadline.
        """
        wait = _wait_for(error)
        if wait is None:
            return False
        until = now + wait
        if self.deadline is not None and until >= self.deadline:
            return False
        if self.shared.reauth is None:
            return self.deadline is not None
        return self.shared.reauth.enter(until)

    def _refused(self, error: InvoicingError) -> End:
        if self._held is not None:  # refused on a re-send for the record: still held
            return self.give_up("refused on re-send", error)
        return self._end(_R, error=error)

    def _end(
        self,
        status: OutcomeStatus,
        *,
        result: Any = None,
        error: InvoicingError | None = None,
        reason: str | None = None,
    ) -> End:
        return End(status, self.attempts, result, error, self.last_error, reason)


def _kept(
    status: OutcomeStatus, latest: DuplicateDocumentError, first: DuplicateDocumentError
) -> DuplicateDocumentError | None:
    """The 409 kept with a held ending.

    A duplicate's first 409; an acceptance's when its record could not be read (so a
    single call can say so).
    """
    if status is _D:
        return first
    return first if latest.result is None else None


def _wait_for(error: InvoicingError | None) -> float | None:
    """The wait an error asks for: ``Retry-After``, or until a new token may be forced."""
    if isinstance(error, AuthenticationError) and error.reauth_in is not None:
        return error.reauth_in + _REAUTH_MARGIN
    return getattr(error, "retry_after", None)
