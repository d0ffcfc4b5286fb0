"""One document's delivery: attempts until its outcome is known, decided by one table.

Every attempt's answer is classified once (:func:`classify`) into a :class:`Kind`, and
:data:`RULES` says, for each kind, what the document becomes if this answer ends it,
whether another attempt may change that, whether the provider may now hold the
document, and what the answer says about the configuration (the batch's circuit
breaker). :meth:`Delivery.run` is the loop single calls and batches share; a batch
passes the :class:`Shared` state of its documents (retry budget, breaker, adaptive
in-flight limit), a single call none.

Three refinements the table cannot express alone, the first two the rule of a
deduplicated write in the safety table every operation shares (:mod:`._safety`):

* a 409 (``HELD``) answering this document's own earlier attempt, or an attempt an
  earlier run may have made, is its commit (``ACCEPTED``), else a ``DUPLICATE``; an
  ambiguous failure is re-sent unless ``RetryPolicy.resend_ambiguous`` forbids it;
* once an attempt may have been committed, an ending that says "not sent" says
  ``UNKNOWN`` instead, and a held document stays held whatever a re-send is answered;
* a 401 that the access token may have caused while no new token may be requested
  (``REAUTH``: the re-authentication cooldown) is waited out only by a delivery with a
  deadline that leaves the time; any other delivery takes it as an ``AUTH`` answer, its
  error saying why no new token was tried.

Retries stop at ``max_attempts`` (a 429 in a batch costs a quarter attempt: the batch
halves its concurrency meanwhile), at the deadline (no backoff outlives it), when the
batch's retry budget is spent, or when its breaker opens.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ._documents import Identity, foreign_fields
from ._errors import (
    AuthenticationError,
    ClientStateError,
    CredentialsError,
    DuplicateDocumentError,
    ForeignRecordError,
    InvoicingError,
    MalformedResponseError,
    ProviderKeyError,
    TransportError,
    UnexpectedStatusError,
    UnknownOutcomeError,
)
from ._log import delivery as log
from ._outcomes import Outcome, OutcomeStatus, RetryPolicy
from ._safety import (
    Safety,
    certainly_not_processed,
    duplicate_means_success,
    may_resend,
    maybe_processed,
)

if TYPE_CHECKING:
    import random
    from collections.abc import Awaitable, Callable

    from ._limiter import Limiter
    from ._models import DocumentResult

__all__ = [
    "RULES",
    "SINGLE",
    "Blame",
    "Breaker",
    "Budget",
    "Delivery",
    "Kind",
    "ReauthWaits",
    "Rule",
    "Send",
    "Shared",
    "classify",
]


class Kind(enum.Enum):
    """What one attempt's answer was, as far as the document is concerned."""

    #: 201 with this document's record.
    ACCEPTED = "accepted"
    #: 409: the provider holds the document; the body is its record.
    HELD = "held"
    #: 409 whose record cannot be read: held for sure, a re-send brings the record.
    HELD_UNREADABLE = "held, record unreadable"
    #: A record of another document: the provider may hold this one or not.
    FOREIGN = "foreign record"
    #: The request may have been processed (reset after sending, timeout, 408, 5xx but
    #: 503, an unreadable 2xx): :func:`~._safety.maybe_processed`.
    AMBIGUOUS = "ambiguous"
    #: Certainly not processed, and it may pass (connection refused, no token).
    NOT_SENT = "not sent"
    #: 429 or 503: certainly not processed; the provider asks for fewer requests.
    THROTTLED = "throttled"
    #: A definite refusal of the document (400, 413, 422).
    REFUSED = "refused"
    #: 401/403 even with a token fetched for this request: the API key, or the issuer's
    #: VAT number. Not a judgement of the document: it ends ``NOT_SENT``.
    AUTH = "authentication"
    #: 401 that the access token may have caused (a provider may revoke tokens), while no
    #: new token may be requested yet: the re-authentication cooldown. Waited out (within
    #: a deadline, and a batch's re-authentication waits), else an ``AUTH`` answer.
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

    #: What the document becomes if this answer ends it.
    ends: OutcomeStatus
    #: Whether another attempt may change the outcome.
    retry: bool
    #: Whether the provider may hold the document after this answer.
    may_hold: bool
    breaker: Blame


_A, _D, _R, _U, _N = (
    OutcomeStatus.ACCEPTED,
    OutcomeStatus.DUPLICATE,
    OutcomeStatus.REJECTED,
    OutcomeStatus.UNKNOWN,
    OutcomeStatus.NOT_SENT,
)

#: The one table: every answer's consequence for the document.
RULES: dict[Kind, Rule] = {
    Kind.ACCEPTED: Rule(_A, retry=False, may_hold=True, breaker=Blame.NONE),
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


class Send(Protocol):
    """One attempt at sending a document, within ``timeout`` seconds (``None``: no limit)."""

    def __call__(self, *, timeout: float | None) -> Awaitable[DocumentResult]: ...


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

    It opens after ``threshold`` answers in a row that blame the configuration, or at
    once for one that leaves nothing to send (:attr:`Blame.STOP`).
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
        blame = Blame.NONE if kind is None else RULES[kind].breaker
        if blame is Blame.NONE or error is None:
            self._run = 0
            return
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
            log.warning("stopping the batch: %s", error)


class ReauthWaits:
    """The re-authentication cooldowns a batch waits out (``REAUTH`` answers).

    Every document that meets a 401 while no new token may be requested waits for the
    same moment: the end of the cooldown. Those waits form one *window*, however many
    documents join it, so a provider that revokes every token within a second costs
    one window per cooldown, never one per document. After ``limit`` windows in a row
    without a document answered in between (:meth:`progress`), documents stop waiting:
    a 401 that new tokens do not cure is no longer the token's fault.
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
        """A document was answered with a token: the run of fruitless windows ends."""
        self._windows = 0


@attrs.frozen
class Shared:
    """What the documents of one batch share (a single call shares nothing)."""

    budget: Budget
    breaker: Breaker
    limiter: Limiter | None
    #: What a 429 costs of ``max_attempts``: a batch adapts its concurrency meanwhile.
    throttled_cost: float = 0.25
    #: ``None``: wait for a new token only within a deadline (a single call).
    reauth: ReauthWaits | None = None


class _Unlimited(Budget):
    def __init__(self) -> None:
        super().__init__(RetryPolicy(min_budget=0))

    def started(self) -> None:
        pass

    def take(self) -> bool:
        return True


class _NoBreaker(Breaker):
    """A single call stops by itself: nothing else to stop."""

    def __init__(self) -> None:
        super().__init__(None)

    def record(self, error: InvoicingError | None, kind: Kind | None = None) -> None:
        pass


#: A single call's shared state: no budget, no breaker, no limit, a 429 costs in full.
SINGLE = Shared(_Unlimited(), _NoBreaker(), None, throttled_cost=1.0)

#: Answers the provider gave to a token it accepted.
_TOKEN_ACCEPTED = frozenset({Kind.HELD, Kind.HELD_UNREADABLE, Kind.FOREIGN, Kind.REFUSED})

#: Answers that end a delivery ``NOT_SENT`` (or ``UNKNOWN``), and why (a key of :data:`_WHY`).
_ENDS = {Kind.STOP: "stop", Kind.MISCONFIGURED: "configuration", Kind.AUTH: "credentials"}

#: Why a delivery stops trying, as its log line and error say it.
_WHY = {
    "attempts": "no attempts left",
    "budget": "the batch's retry budget ran out",
    "deadline": "the deadline passed",
    "stop": "the batch stopped",
    "no re-sends": "re-sending after an ambiguous failure is off",
    "configuration": "the provider refuses the configuration",
    "credentials": "the provider refused the credentials or the issuer (a new token did not help)",
    "refused on re-send": "a re-send for the record was refused",
    "lease lost": "another worker took the entry over",
}


@attrs.define
class Delivery:
    """The attempts at one document, until its outcome is known.

    :param maybe_committed: an earlier run may have committed it (a resumed batch):
        a 409 is then our own commit, not a duplicate.
    :param deadline: loop time by which the document must be settled, or ``None``.
    """

    key: str
    index: int
    identity: Identity
    policy: RetryPolicy
    maybe_committed: bool = False
    #: A document submission is a deduplicated write (see :mod:`._safety`).
    safety: Safety = Safety.DEDUPLICATED_WRITE
    deadline: float | None = None
    #: Requests sent.
    attempts: int = 0
    last_error: InvoicingError | None = None
    #: Attempts charged against ``max_attempts`` (a 429 in a batch costs less).
    _spent: float = 0.0
    #: A request is out (true also when it is cancelled midway).
    _sending: bool = False
    #: The provider holds the document (a 409 whose record could not be read yet).
    _held: tuple[OutcomeStatus, DuplicateDocumentError] | None = None

    async def run(
        self,
        send: Send,
        *,
        shared: Shared = SINGLE,
        before_first: Callable[[], Awaitable[None]] | None = None,
        rng: random.Random | None = None,
    ) -> Outcome:
        """Send until the outcome is known; ``send(timeout=...)`` makes one attempt."""
        while True:
            if shared.breaker.error is not None:
                return self.give_up("stop", shared.breaker.error)
            if self.attempts and not shared.budget.take():
                return self.give_up("budget")
            if self.attempts == 0 and before_first is not None:
                await before_first()
            outcome = await self._attempt(send, shared)
            if outcome is not None:
                return outcome
            delay = self.policy.delay(
                self.attempts, retry_after=_wait_for(self.last_error), rng=rng
            )
            if self.deadline is not None and _now() + delay >= self.deadline:
                return self.give_up("deadline")
            log.info(
                "invoice %s: attempt %d failed (%s); retrying in %.2f s",
                self.key,
                self.attempts,
                self.last_error,
                delay,
            )
            await asyncio.sleep(delay)

    async def _attempt(self, send: Send, shared: Shared) -> Outcome | None:
        """One request within the attempt timeout and the deadline; ``None``: retry."""
        limiter = shared.limiter
        round_sent = 0
        if limiter is not None:
            fast = limiter.try_acquire()
            round_sent = fast if fast is not None else await limiter.acquire()
        overload: InvoicingError | None = None
        answered = False
        try:
            timeout = self.policy.attempt_timeout
            if self.deadline is not None:
                remaining = self.deadline - _now()
                if remaining <= 0:
                    return self.give_up("deadline")
                timeout = remaining if timeout is None else min(timeout, remaining)
            self.attempts += 1
            self._spent += 1
            self._sending = True
            try:
                record = await send(timeout=timeout)
            except InvoicingError as exc:
                self._sending, answered = False, True
                # A 409 says nothing about the provider's load: like a success.
                overload = None if isinstance(exc, DuplicateDocumentError) else exc
                return self._answered(self._own(exc), shared)
            self._sending, answered = False, True
            if shared.reauth is not None:
                shared.reauth.progress()
            mismatch = self._foreign(record, 201)
            return self._answered(mismatch, shared) if mismatch else self._end_held(_A, record)
        finally:
            if limiter is not None:
                limiter.release(round_sent, overload, answered=answered)

    def _own(self, error: InvoicingError) -> InvoicingError:
        """A 409's record of another document is a foreign record, not a duplicate."""
        if isinstance(error, DuplicateDocumentError) and error.result is not None:
            return self._foreign(error.result, 409) or error
        return error

    def _foreign(self, record: DocumentResult, status: int) -> ForeignRecordError | None:
        mismatches = foreign_fields(self.identity, record)
        if not mismatches:
            return None
        return ForeignRecordError(
            f"the provider answered with the record of another document "
            f"(differs in {', '.join(mismatches)})",
            status=status,
            result=record,
            mismatches=mismatches,
        )

    def _answered(self, error: InvoicingError, shared: Shared) -> Outcome | None:
        """A failed attempt (a 409 included): the outcome it decides, or ``None`` to retry."""
        kind = classify(error)
        if kind is Kind.REAUTH and not self._may_wait(error, shared):
            kind = Kind.AUTH  # no time to wait for a new token: the answer, said why
        rule = RULES[kind]
        self.last_error = error
        shared.breaker.record(error, kind)
        if kind in _TOKEN_ACCEPTED and shared.reauth is not None:
            shared.reauth.progress()
        if kind in (Kind.HELD, Kind.HELD_UNREADABLE):
            assert isinstance(error, DuplicateDocumentError)  # noqa: S101  (classify says so)
            ours = duplicate_means_success(self.safety, after_own_attempt=self.maybe_committed)
            status, first = self._held or (_A if ours else _D, error)
            if kind is Kind.HELD or self._spent >= self.policy.max_attempts:
                return self._end_held(status, error.result, first)
            self._held = status, first  # a re-send is safe and answers 409 with the record
            return None
        if rule.may_hold:
            self.maybe_committed = True
            resend = self.policy.resend_ambiguous
            if not may_resend(self.safety, maybe_sent=True, resend_ambiguous=resend):
                return self.give_up("no re-sends")
        if not rule.retry:
            why = _ENDS.get(kind)
            return self.give_up(why, error) if why else self._rejected(error)
        if kind is Kind.THROTTLED:
            self._spent -= 1 - shared.throttled_cost
        if self._spent >= self.policy.max_attempts:
            return self.give_up("attempts")
        return None

    def _may_wait(self, error: InvoicingError, shared: Shared) -> bool:
        """Whether to wait for the next token (``REAUTH``).

        Within the deadline, and the batch's re-authentication waits; a single call
        waits only within a deadline.
        """
        wait = _wait_for(error)
        if wait is None:
            return False
        until = _now() + wait
        if self.deadline is not None and until >= self.deadline:
            return False
        if shared.reauth is None:
            return self.deadline is not None
        return shared.reauth.enter(until)

    def _end_held(
        self,
        status: OutcomeStatus,
        record: DocumentResult | None,
        duplicate: DuplicateDocumentError | None = None,
    ) -> Outcome:
        """The provider holds the document: accepted (ours) or a duplicate (sent before).

        A 409 is kept as the error of a duplicate, and of an acceptance without a record
        (so a single call can say so).
        """
        if status is _D:
            log.info("invoice %s: attempt %d: already transmitted (409)", self.key, self.attempts)
        else:
            # Accepted at once is the common case; accepted after retries is worth a line.
            log.log(
                logging.INFO if self.attempts > 1 else logging.DEBUG,
                "invoice %s: accepted at attempt %d",
                self.key,
                self.attempts,
            )
        kept = duplicate if status is _D or record is None else None
        return self._end(status, result=record, error=kept)

    def _rejected(self, error: InvoicingError) -> Outcome:
        if self._held is not None:  # refused on a re-send for the record: still held
            return self.give_up("refused on re-send", error)
        log.warning("invoice %s: attempt %d: rejected: %s", self.key, self.attempts, error)
        return self._end(_R, error=error)

    def interrupted(self) -> Outcome:
        """The outcome to record when the delivery is cancelled midway."""
        committed = self._sending or self.maybe_committed
        return self._end(_U if committed else _N, error=self.last_error)

    def refuse(self, error: InvoicingError) -> Outcome:
        """Refused before sending (a document that cannot be read or serialised)."""
        log.warning("invoice %s: rejected before sending: %s", self.key, error)
        return self._end(_R, error=error)

    def give_up(self, why: str, error: InvoicingError | None = None) -> Outcome:
        """Stop trying (``why``: a key of :data:`_WHY`).

        Held if the provider holds the document, ``UNKNOWN`` if an attempt may have been
        committed, else ``NOT_SENT``.
        """
        reason = _WHY[why]
        if self._held is not None:
            status, first = self._held
            return self._end_held(status, None, first)
        error = error or self.last_error
        if self.maybe_committed:
            last = error or TransportError("no answer", maybe_sent=True)
            log.warning(
                "invoice %s: outcome unknown after %d attempt(s), %s: %s",
                self.key,
                self.attempts,
                reason,
                last,
            )
            unknown = UnknownOutcomeError(
                f"the provider may or may not hold the document after {self.attempts} "
                f"attempt(s) ({reason}; last: {last}); re-send it later to find out",
                last_error=last,
                attempts=self.attempts,
            )
            return self._end(_U, error=unknown)
        if error is None:
            error = TransportError(f"not sent: {reason}", maybe_sent=False)
        # A document never sent because the batch stopped is one of many: the stop was
        # logged once; only a document that was tried is worth a warning of its own.
        log.log(
            logging.WARNING if self.attempts else logging.DEBUG,
            "invoice %s: not sent after %d attempt(s), %s: %s",
            self.key,
            self.attempts,
            reason,
            error,
        )
        return self._end(_N, error=error)

    def _end(self, status: OutcomeStatus, **fields: Any) -> Outcome:
        return Outcome(
            index=self.index, key=self.key, status=status, attempts=self.attempts, **fields
        )


#: Past the end of a re-authentication cooldown: the token cache's clock and the loop's
#: may tick apart by this much.
_REAUTH_MARGIN = 0.05


def _wait_for(error: InvoicingError | None) -> float | None:
    """The wait an error asks for: ``Retry-After``, or until a new token may be forced."""
    if isinstance(error, AuthenticationError) and error.reauth_in is not None:
        return error.reauth_in + _REAUTH_MARGIN
    return getattr(error, "retry_after", None)


def _now() -> float:
    return asyncio.get_running_loop().time()
