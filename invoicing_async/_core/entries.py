"""A durable entry: its states, its record, and every rule a ledger or an outbox applies.

The states an entry is in without a final outcome (:data:`PENDING`, :data:`IN_FLIGHT`,
:data:`PARKED`), its record (:class:`LedgerEntry`), what a journal tells a batch of a
document read again (:class:`Verdict`), and the rules, one pure function per question,
the same for every backend (the stores only write what they say):

* :func:`is_final` decides, when an outcome is recorded, whether the document is done
  for good: the provider holds it (accepted, duplicate), or refused *this exact content*
  (a 400 and other definite refusals, stored with the content's fingerprint:
  :func:`needs_fingerprint`). Failures that blame the configuration
  are never final: ``not_sent`` (refused credentials, no provider key, the breaker, a
  deadline), a ``rejected`` 401/403 (an API key or VAT number problem), and a document
  refused locally before sending (re-checked for free).
* :func:`decide` decides, when a document is read again (a resumed batch, a claimed
  outbox entry), whether to send it, and whether a ``409`` would be its own commit, or
  to report the recorded outcome without sending (a refusal: if the content, compared by
  digest once prepared, has not changed).
* :func:`requeue` decides whether an outbox worker puts an entry back to be sent later,
  :func:`charged` whether that round counts against the entry's budget of rounds
  (``RetryPolicy.max_rounds``), :func:`parks` whether the entry is then parked, and
  :func:`wait_after_round` how long it waits before it is claimed again.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from .errors import TransportError, UnknownOutcomeError
from .outcomes import HELD, Outcome, OutcomeStatus
from .table import refused_by_provider

if TYPE_CHECKING:
    import datetime as dt

    from .retry import RetryPolicy

__all__ = [
    "IN_FLIGHT",
    "PARKED",
    "PENDING",
    "SEND",
    "STATES",
    "LedgerEntry",
    "Verdict",
    "charged",
    "decide",
    "is_final",
    "needs_fingerprint",
    "parks",
    "requeue",
    "wait_after_round",
]

#: An entry waiting to be sent (enqueued, marked for re-sending, or put back after an
#: outcome that is not final).
PENDING = "pending"
#: A request for the entry may be out (or an outbox worker holds it).
IN_FLIGHT = "in_flight"
#: An outbox entry that failed ``RetryPolicy.max_rounds`` rounds: it needs attention.
#: No worker claims it until it is marked to be sent again (``retry``); it keeps its
#: last outcome, and whether a request for it may have been committed.
PARKED = "parked"
#: The states an entry shows as its status (the others show their outcome's).
STATES = (PENDING, IN_FLIGHT, PARKED)


@attrs.frozen(kw_only=True)
class LedgerEntry:
    """What a ledger (or an outbox) holds for one document identity.

    .. versionadded:: 0.2.0
    """

    #: The document's identity (:func:`~invoicing_async.document_key`, or ``key=``).
    key: str
    #: ``"pending"``, ``"in_flight"``, ``"parked"`` (an outbox entry that needs
    #: attention), or the :class:`~invoicing_async.OutcomeStatus` of its last outcome.
    status: OutcomeStatus | str
    #: The last outcome recorded, if any (a pending entry may have one: the reason it
    #: is sent again).
    outcome: Outcome | None = None
    #: The outcome is final: the provider holds the document, or refused this exact
    #: content. Final entries are never sent again unless marked for re-sending.
    final: bool = False
    #: An earlier request may have been committed: a ``409`` is then its own commit.
    maybe_committed: bool = False
    #: SHA-256 of the serialised content a final refusal refused (re-sent if it changes).
    fingerprint: str | None = None
    #: When the entry last changed.
    updated_at: dt.datetime | None = None
    #: Outbox entries: rounds that failed against its budget (``RetryPolicy.max_rounds``)
    #: since it was enqueued with this content or last marked to be sent again.
    #:
    #: .. versionadded:: 0.4.0
    failures: int = 0
    #: Outbox entries: when a worker may claim it next (a pending entry backing off
    #: after a failed round waits until then); ``None``: at once, or a batch's ledger.
    #:
    #: .. versionadded:: 0.4.0
    available_at: dt.datetime | None = None
    #: The issuer (TIN) whose document it is; with :attr:`key`, the document's identity
    #: (two issuers' documents with the same key are two entries). ``None``: the
    #: document names none, or the entry was written by 0.3 (which stored no issuer).
    #:
    #: .. versionadded:: 0.4.0
    issuer: str | None = None


@attrs.frozen
class Verdict:
    """What to do with a document read (again): send it, or report ``replay``."""

    #: The recorded outcome, final: report it without sending.
    replay: Outcome | None = None
    #: An earlier request may have been committed: a 409 is the document's own commit.
    maybe_committed: bool = False
    #: A final refusal of content with this digest: report ``refused`` instead of
    #: sending if the document's content is still the same.
    refused_digest: str | None = None
    refused: Outcome | None = None


#: The verdict for a document the journal has never seen: send it.
SEND = Verdict()


def needs_fingerprint(outcome: Outcome) -> bool:
    """A definite refusal by the provider: final only together with its content's hash.

    The stores keep the digest of what was sent for it (never computed for another
    outcome), and ``None`` for a document refused before it was prepared.
    """
    return outcome.status is OutcomeStatus.REJECTED and refused_by_provider(outcome.error)


def is_final(outcome: Outcome, fingerprint: str | None) -> bool:
    """Whether ``outcome`` ends the document for good (see the module docstring)."""
    if outcome.status in HELD:
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


def parks(failures: int, policy: RetryPolicy) -> bool:
    """Whether an entry put back with ``failures`` rounds charged is parked instead.

    Parked at ``RetryPolicy.max_rounds`` (``None``: never): kept with its outcome,
    never claimed again until an explicit retry.
    """
    return policy.max_rounds is not None and failures >= policy.max_rounds


def wait_after_round(policy: RetryPolicy, failures: int, *, counted: bool) -> float:
    """Seconds an entry put back waits before it may be claimed again.

    The wait grows with the rounds that counted against the document
    (:meth:`~invoicing_async.RetryPolicy.delay_after_round`); one that did not (an
    outage, a 429) waits the first round's: the provider's trouble must not hold the
    backlog back for minutes once it answers again.
    """
    return policy.delay_after_round(failures if counted else 1)


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
    if entry.final and outcome.status in HELD:
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
