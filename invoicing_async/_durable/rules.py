"""The finality rules: one pure function per question, the same for every backend.

* :func:`is_final` decides, when an outcome is recorded, whether the document is done
  for good: the provider holds it (accepted, duplicate), or refused *this exact content*
  (a 400 and other definite refusals, stored with the content's fingerprint). Failures
  that blame the configuration are never final: ``not_sent`` (refused credentials, no
  provider key, the breaker, a deadline), a ``rejected`` 401/403 (an API key or VAT
  number problem), and a document refused locally before sending (re-checked for free).
* :func:`decide` decides, when a document is read again (a resumed batch, a claimed
  outbox entry), whether to send it, and whether a ``409`` would be its own commit, or
  to report the recorded outcome without sending (a refusal: if the content, compared by
  digest once prepared, has not changed).
* :func:`requeue` decides whether an outbox worker puts an entry back to be sent later,
  and :func:`charged` whether that round counts against the entry's budget of rounds
  (``RetryPolicy.max_rounds``, after which it is parked).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from invoicing_async._core.errors import TransportError, UnknownOutcomeError
from invoicing_async._core.outcomes import Outcome, OutcomeStatus
from invoicing_async._core.table import refused_by_provider
from invoicing_async._send.journal import SEND, Verdict

from .entry import IN_FLIGHT, PENDING

if TYPE_CHECKING:
    from invoicing_async._doc.document import Prepared

    from .entry import LedgerEntry

__all__ = ["charged", "decide", "digest_of", "is_final", "needs_fingerprint", "requeue"]

_HELD = (OutcomeStatus.ACCEPTED, OutcomeStatus.DUPLICATE)


def needs_fingerprint(outcome: Outcome) -> bool:
    """A definite refusal by the provider: final only together with its content's hash."""
    return outcome.status is OutcomeStatus.REJECTED and refused_by_provider(outcome.error)


def digest_of(outcome: Outcome, prepared: Prepared | None) -> str | None:
    """The digest a final refusal is kept with (``None`` for every other outcome)."""
    return prepared.digest if prepared is not None and needs_fingerprint(outcome) else None


def is_final(outcome: Outcome, fingerprint: str | None) -> bool:
    """Whether ``outcome`` ends the document for good (see the module docstring)."""
    if outcome.status in _HELD:
        return True
    return needs_fingerprint(outcome) and fingerprint is not None


def requeue(outcome: Outcome, *, final: bool, resend_ambiguous: bool) -> bool:
    """Whether an outbox entry goes back to be sent again after ``outcome``.

    Everything that is not final, except an ``unknown`` outcome under a policy that
    forbids ambiguous re-sends: that one stays ``unknown`` and is reported.
    """
    if final:
        return False
    return outcome.status is not OutcomeStatus.UNKNOWN or resend_ambiguous


def charged(outcome: Outcome) -> bool:
    """Whether a round put back after ``outcome`` counts against the entry's budget.

    Only an ``unknown`` outcome: the provider may have received the document and
    failed on it (a 5xx, a connection reset or a timeout after sending, a 408), which a
    poison document does every time. ``not_sent`` never counts: the provider certainly
    did not process the document (it was unreachable, asked for fewer requests, or the
    worker did not send it: the breaker, a deadline), which says nothing against the
    document, and a long outage must not park a whole backlog; nor does a refusal that
    blames the configuration (401/403): fixing the key lets every entry through.
    """
    return outcome.status is OutcomeStatus.UNKNOWN


def decide(entry: LedgerEntry | None, *, resend_ambiguous: bool) -> Verdict:
    """Send the document, or report its recorded outcome (see :class:`Verdict`)."""
    if entry is None:
        return SEND
    maybe = entry.maybe_committed
    if entry.status == PENDING:  # enqueued, or marked for re-sending by an operator
        return Verdict(maybe_committed=maybe)
    outcome = entry.outcome
    if entry.status == IN_FLIGHT or (
        outcome is not None and outcome.status is OutcomeStatus.UNKNOWN
    ):
        if resend_ambiguous:
            return Verdict(maybe_committed=True)
        return Verdict(replay=_unknown(entry))
    if outcome is None:
        return Verdict(maybe_committed=maybe)
    if entry.final and outcome.status in _HELD:
        return Verdict(replay=outcome)
    if entry.final and entry.fingerprint is not None:
        # Refused for good: unless the content changed since (the batch compares).
        return Verdict(maybe_committed=maybe, refused_digest=entry.fingerprint, refused=outcome)
    return Verdict(maybe_committed=maybe)


def _unknown(entry: LedgerEntry) -> Outcome:
    """The recorded ambiguity, reported again without a request (no ambiguous re-sends)."""
    outcome = entry.outcome
    if outcome is not None and outcome.status is OutcomeStatus.UNKNOWN:
        return outcome
    error = UnknownOutcomeError(
        "a request for this document was in flight when an earlier run stopped; the "
        "provider may or may not hold it, and the retry policy forbids re-sending "
        "(resend_ambiguous=False): re-send it once the provider detects duplicates",
        last_error=TransportError("interrupted while the request was in flight", maybe_sent=True),
        attempts=0,
    )
    return Outcome(index=0, key=entry.key, status=OutcomeStatus.UNKNOWN, error=error)
