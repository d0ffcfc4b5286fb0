"""The attempts of one request, as a state machine: ask, send, tell. Pure: no I/O, no clock.

Every request the library makes — a document in a batch, a single call, a sale, each
named operation, a token grant — is run by :class:`Attempts`, in the shape of stamina's
retry context and h11's connection: the driver asks it what to do, does it, and tells it
what happened, handing it the time each time::

    step = attempts.next(now)              # Send(timeout) | End(outcome)
    ... get what the attempt needs (a token) ...
    attempts.left()                        # its request leaves: it may be processed
    ... send it within step.timeout ...
    step = attempts.failed(error, now)     # Wait(seconds) | End(outcome)
    step = attempts.succeeded(result)      # End(outcome)

Cut off midway (:meth:`Attempts.interrupted`), an attempt whose request had left may
have been processed; one that never left (its driver was still waiting for a token)
certainly was not, and is not one of the requests sent.

What an answer means is the table's (:data:`~._table.RULES`); the request's
:class:`~invoicing_async.Safety` class then says what may follow:

* after a failure that may have been processed a ``READ`` or a ``DEDUPLICATED_WRITE`` is
  sent again, an ``UPLOAD`` or an ``AT_MOST_ONCE_WRITE`` ends ``UNKNOWN`` at once;
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
  :class:`~._shared.ReauthWaits`; a 401/403 that a new token did not cure (``AUTH``)
  ends ``NOT_SENT``: it refuses the credentials, never the document.

Retries stop at ``max_attempts`` (a 429 in a batch costs a quarter attempt: the batch
halves its concurrency meanwhile), at the deadline (no wait outlives it), when the
batch's retry budget is spent, when its breaker opens, or, for a sale, at the first
answer the table says ends a sale (``sale_ends``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import attrs

from .errors import (
    AuthenticationError,
    DuplicateDocumentError,
    InvoicingError,
    TransportError,
    UnknownOutcomeError,
)
from .safety import Safety
from .shared import SINGLE, Shared
from .table import (
    _A,
    _D,
    _N,
    _R,
    _U,
    RULES,
    WHY,
    Blame,
    Kind,
    Load,
    classify,
    duplicate_means_success,
    may_resend,
)

if TYPE_CHECKING:
    import random

    from .outcomes import OutcomeStatus
    from .retry import RetryPolicy

__all__ = ["Attempts", "End", "Send", "Wait", "sent_nothing"]


# The machine's answers are named tuples: values, made for every attempt of every
# document, at the cost of a tuple.


class Send(NamedTuple):
    """Send one attempt, within ``timeout`` seconds (``None``: no limit)."""

    timeout: float | None


class Wait(NamedTuple):
    """Wait ``seconds``, then ask :meth:`Attempts.next` again; ``after`` is why.

    ``reason`` names the retry (telemetry's); ``pause``: the provider asked for fewer
    requests, so the issuer's other documents wait as long.
    """

    seconds: float
    after: InvoicingError
    reason: str = "retry"
    pause: bool = False


class End(NamedTuple):
    """The request's outcome: how it ended, and with what.

    :ivar result: what the provider answered (a record, or an operation's answer), when
        it holds what was sent; for a held request whose answer could not be read,
        ``None`` (``error`` is then the 409).
    :ivar error: why it ended otherwise (for ``UNKNOWN`` an
        :class:`~invoicing_async.UnknownOutcomeError`); the 409 of a duplicate.
    :ivar last: the last failed attempt's error (what ended a sale at once).
    :ivar reason: why it stopped trying, in words, when it gave up.
    :ivar commit: the 409 that ended it ``ACCEPTED``: the provider's answer to a re-send
        of a deduplicated write whose earlier attempt may have been processed is that
        attempt's commit (``None``: a 2xx ended it, or it did not end accepted).
    """

    status: OutcomeStatus
    attempts: int
    result: Any = None
    error: InvoicingError | None = None
    last: InvoicingError | None = None
    reason: str | None = None
    commit: DuplicateDocumentError | None = None


#: Past the end of a re-authentication cooldown: the token cache's clock and the loop's
#: may tick apart by this much.
_REAUTH_MARGIN = 0.05

_FIND_OUT_DOCUMENT = "re-send it later to find out (the provider answers 409 if it holds it)"


@attrs.define
class Attempts:
    """The attempts of one request, until its outcome is known.

    :param safety: the request's :class:`~invoicing_async.Safety` class.
    :param policy: attempts, backoff, attempt timeout, ambiguous re-sends.
    :param deadline: the time (on the driver's clock) by which the request must end, or
        ``None``.
    :param shared: the batch's state (:data:`~._shared.SINGLE` for a single call).
    :param maybe_committed: an earlier run may have processed it (a resumed batch): a
        409 is then its own commit.
    :param needs_record: a 409 without a readable record is sent again for the record
        (documents); otherwise the 409 itself is the answer (operations).
    :param sale: a sale: the answers the table marks ``sale_ends`` end it at once.
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
    sale: bool = False
    subject: str = "the document"
    find_out: str = _FIND_OUT_DOCUMENT
    rng: random.Random | None = None
    #: Requests sent.
    attempts: int = 0
    last_error: InvoicingError | None = None
    #: What the last attempt's answer said about the provider's load (``None``: no
    #: attempt was answered since the last :meth:`next`).
    load: Load | None = None
    #: Attempts charged against ``max_attempts`` (a 429 in a batch costs less).
    _spent: float = 0.0
    #: The attempt under way: ``None`` none, ``False`` asked for (:class:`Send`) but its
    #: request has not left, ``True`` its request left (:meth:`left`), unanswered.
    _out: bool | None = None
    #: The provider holds it (a 409 whose record could not be read yet).
    _held: tuple[OutcomeStatus, DuplicateDocumentError] | None = None

    # --- the three questions -------------------------------------------------------------

    def next(self, now: float) -> Send | End:
        """Before an attempt: send it (and within what timeout), or end."""
        shared = self.shared
        self.load = None
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
        self._out = False
        return Send(timeout)

    def left(self) -> None:
        """The attempt's request leaves: until it is answered, it may be processed."""
        self._out = True

    def succeeded(self, result: Any) -> End:
        """The attempt was answered with success (2xx): its ``result``."""
        self._out = None
        shared = self.shared
        shared.breaker.record(None)
        if shared.reauth is not None:
            shared.reauth.progress()
        self.load = Load.GROW
        return End(_A, self.attempts, result, None, self.last_error)

    def failed(self, error: InvoicingError, now: float) -> Wait | End:
        """The attempt failed with ``error`` (a 409 included): wait and retry, or end."""
        self._out = None
        kind = classify(error)
        if kind is Kind.REAUTH and not self._may_wait(error, now):
            kind = Kind.AUTH  # no time to wait for a new token: the answer, said why
        shared = self.shared
        rule = RULES[kind]
        self.last_error = error
        self.load = rule.load
        shared.breaker.record(error, kind)
        if rule.token_accepted and shared.reauth is not None:
            shared.reauth.progress()
        if kind is Kind.HELD or kind is Kind.HELD_UNREADABLE:
            assert isinstance(error, DuplicateDocumentError)  # noqa: S101  (classify says so)
            return self._held_answer(error, kind, now)
        if rule.ambiguous and self.safety is not Safety.READ:
            self.maybe_committed = True
            resend = self.policy.resend_ambiguous
            if not may_resend(self.safety, maybe_sent=True, resend_ambiguous=resend):
                dedup = self.safety is Safety.DEDUPLICATED_WRITE
                return self.give_up("no re-sends" if dedup else "at most once", error)
        if self.sale and rule.sale_ends:
            return self.give_up("decisive", error)
        if not rule.retry:
            why = rule.gives_up
            return self.give_up(why, error) if why else self._refused(error)
        if rule.load is Load.SHRINK:
            self._spent -= 1 - shared.throttled_cost
        if self._spent >= self.policy.max_attempts:
            return self.give_up("attempts")
        return self._retry(error, now, rule.reason, pause=rule.load is Load.SHRINK)

    # --- endings without an answer -----------------------------------------------------------

    def unsendable(self, error: InvoicingError) -> End:
        """It cannot be sent (not serialised, not encrypted, no credentials): how it ends.

        Refused (``REJECTED``) if it is the document's fault; else it ends ``NOT_SENT``
        and the breaker hears of it: nothing of its issuer (or of anyone: no provider
        key) can be sent.
        """
        rule = RULES[classify(error)]
        blame = rule.breaker
        if blame is Blame.ISSUER or blame is Blame.EVERYONE:
            self.shared.breaker.trip(error, everyone=blame is Blame.EVERYONE)
            return self.give_up("stop", error)
        if rule.gives_up is not None:  # no credentials for its issuer
            return self.give_up(rule.gives_up, error)
        return self._end(_R, error=error, reason="refused before sending")

    def give_up(self, why: str, error: InvoicingError | None = None) -> End:
        """Stop trying (``why``: a key of :data:`~._table.WHY`).

        Held if the provider holds it, ``UNKNOWN`` if an attempt may have been processed,
        else ``NOT_SENT``.
        """
        reason = WHY[why].format(safety=self.safety.name)
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

    def interrupted(self) -> End:
        """The ending to record when the attempts are cancelled midway.

        ``UNKNOWN`` if a request had left and was not answered (it may have been
        processed), or an earlier one may have been; else ``NOT_SENT``. An attempt whose
        request never left (it waited for a token) is not counted: nothing was sent.
        """
        out, self._out = self._out, None
        if out is False:
            self.attempts -= 1
            self._spent -= 1
        committed = (out is True and self.safety is not Safety.READ) or self.maybe_committed
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
            kept = _kept(status, error, first)
            commit = error if status is _A else None
            return End(status, self.attempts, error.result, kept, error, None, commit)
        self._held = status, first
        return self._retry(error, now, RULES[kind].reason)

    def _retry(
        self, error: InvoicingError, now: float, reason: str, *, pause: bool = False
    ) -> Wait | End:
        delay = self.policy.delay(self.attempts, retry_after=_wait_for(error), rng=self.rng)
        if self.deadline is not None and now + delay >= self.deadline:
            return self.give_up("deadline")
        return Wait(delay, error, reason, pause)

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


def sent_nothing(status: OutcomeStatus, attempts: int) -> bool:
    """Whether an ending left the provider untouched: ``NOT_SENT``, no request sent.

    A document cut off while it waited for its token (:meth:`Attempts.interrupted`):
    whatever a journal marked before its first request, none left.
    """
    return status is _N and attempts == 0


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
