"""One document's delivery: attempts, safe retries, and its one truthful outcome.

Single calls (``submit_secure``/``submit_json``) and every document of a batch go
through :class:`Delivery`, so both keep the same promise. Retrying a non-idempotent POST
is safe because the provider detects duplicates: a document it already holds is answered
with 409 and its original record. Every failure is classified once, here:

==========================================  ===========================================
failure                                     what happens
==========================================  ===========================================
refused credentials, client closed          stop: NOT_SENT, and a batch stops sending
401/403 to the document                     REJECTED; a run of them opens the breaker
unknown endpoint (404, 405, 415, redirect)  NOT_SENT; a run of them opens the breaker
definite refusal (400, 413 …)               REJECTED
not sent (connection refused, 429)          retried; in a batch a 429 costs a quarter
                                            attempt (the batch halves its concurrency)
may be committed (reset after sending,      retried; a later 409 is our own commit:
read timeout, 408, 5xx, unreadable 2xx,     ACCEPTED with the original record; without
a record of another document)               re-sends (``resend_ambiguous=False``): UNKNOWN
409 whose record cannot be read             held for sure: re-sent for the record; if no
                                            attempt is left, ends without it (the 409 kept)
==========================================  ===========================================

Retries stop at ``max_attempts``, at the deadline (no backoff sleep outlives it), when the
batch's retry budget is spent, or when the batch's circuit breaker opens; the document
then ends UNKNOWN if an attempt may have been committed, else NOT_SENT. A batch also
adapts how many requests it has in flight (:class:`Limiter`): halved on 429/503, grown
back by one per window of successes (AIMD), so it settles at what the provider takes.
"""

from __future__ import annotations

import asyncio
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
    RateLimitError,
    TransportError,
    UnexpectedStatusError,
    UnknownOutcomeError,
    may_have_committed,
)
from ._outcomes import Outcome, OutcomeStatus, RetryPolicy

if TYPE_CHECKING:
    import random
    from collections.abc import Awaitable, Callable

    from ._limiter import Limiter
    from ._models import DocumentResult

__all__ = ["Breaker", "Budget", "Delivery", "Send", "Shared", "stops_everything"]

log = logging.getLogger("invoicing_async.delivery")


def _now() -> float:
    return asyncio.get_running_loop().time()


def stops_everything(error: InvoicingError) -> bool:
    """Failures no other document can escape: bad credentials, no key, a closed client."""
    return isinstance(error, (CredentialsError, ClientStateError, ProviderKeyError))


def _misconfigured(error: InvoicingError) -> bool:
    """Answers that say the configuration, not the document, is wrong."""
    if isinstance(error, (AuthenticationError, UnexpectedStatusError)):
        return True
    # A redirect: the base URL points somewhere else.
    return (
        isinstance(error, MalformedResponseError)
        and error.status is not None
        and (300 <= error.status < 400)
    )


def _not_sent(error: InvoicingError) -> bool:
    """Failures that certainly left nothing at the provider and may pass: retry them."""
    if isinstance(error, TransportError):
        return not error.maybe_sent
    return isinstance(error, RateLimitError)


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

    It opens after ``threshold`` consecutive answers that blame the configuration, or
    at once for refused credentials, a missing key or a closed client. Any other answer
    from the provider ends the run of bad answers.
    """

    def __init__(self, threshold: int | None) -> None:
        self._threshold = threshold
        self._run = 0
        self.error: InvoicingError | None = None

    def trip(self, error: InvoicingError) -> None:
        """Open now: nothing more can be sent."""
        if self.error is None:
            self.error = error
            log.warning("stopping the batch: %s", error)

    def record(self, error: InvoicingError | None) -> None:
        """One answer (``None``: a success)."""
        if error is None or not _misconfigured(error):
            self._run = 0
            return
        self._run += 1
        if self._threshold is not None and self._run >= self._threshold and self.error is None:
            self.trip(
                TransportError(
                    f"not sent: the batch stopped after {self._run} consecutive answers that "
                    f"blame the configuration (last: {error})",
                    maybe_sent=False,
                )
            )


@attrs.frozen
class Shared:
    """What the documents of one batch share."""

    budget: Budget
    breaker: Breaker
    limiter: Limiter


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
    deadline: float | None = None
    attempts: int = 0
    last_error: InvoicingError | None = None
    _sending: bool = False
    # 429s answered in a batch: each costs a quarter attempt (the limiter adapts).
    _throttled: int = 0
    # A 409 whose record could not be read: held for sure, re-sent for the record.
    _held: Outcome | None = None

    async def run(
        self,
        send: Send,
        *,
        shared: Shared | None = None,
        before_first: Callable[[], Awaitable[None]] | None = None,
        rng: random.Random | None = None,
    ) -> Outcome:
        """Send until the outcome is known; ``send(timeout=...)`` makes one attempt."""
        while True:
            if shared is not None and shared.breaker.error is not None:
                return self.give_up("stop", shared.breaker.error)
            if self.attempts and shared is not None and not shared.budget.take():
                return self.give_up("retry budget")
            if self.attempts == 0 and before_first is not None:
                await before_first()
            outcome = await self._attempt(send, shared)
            if outcome is not None:
                return outcome
            delay = self.policy.delay(
                self.attempts, retry_after=getattr(self.last_error, "retry_after", None), rng=rng
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

    async def _attempt(self, send: Send, shared: Shared | None) -> Outcome | None:
        """One request within the attempt timeout and the deadline; ``None``: retry."""
        round_sent = 0
        if shared is not None:
            fast = shared.limiter.try_acquire()
            round_sent = fast if fast is not None else await shared.limiter.acquire()
        error: InvoicingError | None = None
        answered = False
        try:
            timeout = self.policy.attempt_timeout
            if self.deadline is not None:
                remaining = self.deadline - _now()
                if remaining <= 0:
                    return self.give_up("deadline")
                timeout = remaining if timeout is None else min(timeout, remaining)
            self.attempts += 1
            # Stays true if the send is cancelled: the request may be out, and
            # interrupted() must say so.
            self._sending = True
            try:
                result = await send(timeout=timeout)
            except DuplicateDocumentError as exc:
                self._sending, answered = False, True
                return self._answered(exc.result, shared, duplicate=exc)
            except InvoicingError as exc:
                self._sending, answered, error = False, True, exc
                return self._failed(exc, shared)
            self._sending, answered = False, True
            return self._answered(result, shared)
        finally:
            if shared is not None:
                shared.limiter.release(round_sent, error, answered=answered)

    def interrupted(self) -> Outcome:
        """The outcome to record when the delivery is cancelled midway."""
        committed = self._sending or self.maybe_committed
        status = OutcomeStatus.UNKNOWN if committed else OutcomeStatus.NOT_SENT
        return self._end(status, error=self.last_error)

    def _answered(
        self,
        record: DocumentResult | None,
        shared: Shared | None,
        *,
        duplicate: DuplicateDocumentError | None = None,
    ) -> Outcome | None:
        """A 201, or a 409 with the record the provider holds."""
        if shared is not None:
            shared.breaker.record(None)
        mismatches = foreign_fields(self.identity, record) if record is not None else ()
        if mismatches:
            return self._failed(
                ForeignRecordError(
                    f"the provider answered with the record of another document "
                    f"(differs in {', '.join(mismatches)})",
                    status=201 if duplicate is None else 409,
                    result=record,
                    mismatches=mismatches,
                ),
                shared,
            )
        if duplicate is not None and record is None and self._spent() < self.policy.max_attempts:
            # Held, record unreadable: a re-send is safe and answers 409 with the record.
            self._held = self._held or self._end(self._duplicate_status(), error=duplicate)
            self.last_error = duplicate
            return None
        if duplicate is not None and self._duplicate_status() is OutcomeStatus.DUPLICATE:
            log.info(
                "invoice %s: attempt %d: already transmitted before (409)", self.key, self.attempts
            )
            return self._end(OutcomeStatus.DUPLICATE, result=record, error=duplicate)
        # Accepted at once is the common case; accepted after retries is worth a line.
        log.log(
            logging.INFO if self.attempts > 1 else logging.DEBUG,
            "invoice %s: accepted at attempt %d",
            self.key,
            self.attempts,
        )
        # A 409 without a record after our own attempt: held, but the record is unknown;
        # the 409 is kept so a single call can say so.
        return self._end(
            OutcomeStatus.ACCEPTED, result=record, error=duplicate if record is None else None
        )

    def _failed(self, error: InvoicingError, shared: Shared | None) -> Outcome | None:
        """A failed attempt: the outcome it decides, or ``None`` to retry."""
        self.last_error = error
        if shared is not None:
            shared.breaker.record(error)
        if stops_everything(error):
            if shared is not None:
                shared.breaker.trip(error)
            return self.give_up("stop", error)
        if may_have_committed(error):
            self.maybe_committed = True
            if not self.policy.resend_ambiguous:
                return self.give_up("no re-sends")
        elif _misconfigured(error) and not isinstance(error, AuthenticationError):
            return self.give_up("configuration", error)
        elif not _not_sent(error):
            return self._rejected(error)
        if isinstance(error, RateLimitError) and shared is not None:
            self._throttled += 1
        if self._spent() >= self.policy.max_attempts:
            return self.give_up("attempts")
        return None

    def _rejected(self, error: InvoicingError) -> Outcome:
        if self._held is not None:  # refused on a re-send for the record: still held
            return self.give_up("refused on re-send", error)
        log.warning("invoice %s: attempt %d: rejected: %s", self.key, self.attempts, error)
        return self._end(OutcomeStatus.REJECTED, error=error)

    def _spent(self) -> float:
        """Attempts used up: a 429 in a batch costs a quarter."""
        return self.attempts - 0.75 * self._throttled

    def _duplicate_status(self) -> OutcomeStatus:
        """A 409 to our own earlier attempt is our commit; else it was sent before."""
        held = self._held.status if self._held is not None else None
        if held is None:
            held = OutcomeStatus.ACCEPTED if self.maybe_committed else OutcomeStatus.DUPLICATE
        return held

    def refuse(self, error: InvoicingError) -> Outcome:
        """Refused before sending (a document that cannot be read or serialised)."""
        log.warning("invoice %s: rejected before sending: %s", self.key, error)
        return self._end(OutcomeStatus.REJECTED, error=error)

    def give_up(self, why: str, error: InvoicingError | None = None) -> Outcome:
        """Stop trying: UNKNOWN if an attempt may have been committed, else NOT_SENT."""
        if self._held is not None:
            return attrs.evolve(self._held, attempts=self.attempts)
        error = error or self.last_error
        if self.maybe_committed:
            last = error or TransportError("no answer", maybe_sent=True)
            log.warning(
                "invoice %s: outcome unknown after %d attempt(s) (%s): %s",
                self.key,
                self.attempts,
                why,
                last,
            )
            return self._end(
                OutcomeStatus.UNKNOWN,
                error=UnknownOutcomeError(
                    f"the provider may or may not hold the document after {self.attempts} "
                    f"attempt(s) ({why}; last: {last}); re-send it later to find out",
                    last_error=last,
                    attempts=self.attempts,
                ),
            )
        if error is None:
            error = TransportError(f"not sent: the {why} ran out", maybe_sent=False)
        # A document never sent because the batch stopped is one of many: the stop was
        # logged once; only a document that was tried is worth a warning of its own.
        level = logging.WARNING if self.attempts else logging.DEBUG
        log.log(
            level,
            "invoice %s: not sent after %d attempt(s) (%s): %s",
            self.key,
            self.attempts,
            why,
            error,
        )
        return self._end(OutcomeStatus.NOT_SENT, error=error)

    def _end(self, status: OutcomeStatus, **fields: Any) -> Outcome:
        return Outcome(
            index=self.index, key=self.key, status=status, attempts=self.attempts, **fields
        )
