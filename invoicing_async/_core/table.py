"""The table: what each kind of answer means, every consequence a column. Pure.

:func:`classify` turns a failed attempt's error into a :class:`Kind`; :data:`RULES` says,
for each kind, everything the library does about it, in one row:

* ``ends``: what the request becomes if this answer ends it;
* ``retry``: whether another attempt may change that;
* ``ambiguous``: whether the provider may have processed this very attempt (a reset
  after sending, a read timeout, 408, a 5xx but 503, an unreadable 2xx, a record of
  another document); ``not_processed``: whether it certainly did not, and it may pass
  (refused connection, no token, 429, 503);
* ``breaker``: what it says about the configuration (:class:`Blame`: a batch's breaker,
  an issuer's, or everyone's);
* ``load``: what it says about the provider's load (:class:`Load`: an in-flight limit
  halved and the issuer's lane paused, or grown);
* ``token_accepted``: the provider took the token sent (a batch's re-authentication
  waits start again);
* ``gives_up``: why a request stops at once after it (a key of :data:`WHY`; ``None``:
  it is a refusal of the request);
* ``sale_ends``: a sale (:class:`~invoicing_async.Deferral`) stops trying at once: it
  is deferred, or, for a foreign record, raised;
* ``defer``: why a sale is deferred after it (a :class:`~invoicing_async.DeferralReason`
  value; ``None``: a definite answer, never deferred);
* ``reason``: what telemetry calls a retry after it (``invoicing.retry.reason``);
* ``operator``: only an operator can help the issuer's documents after it (its
  credentials refused or missing): an outbox worker leaves them waiting.

The questions other modules ask (:func:`maybe_processed`, :func:`deferral`,
:func:`refused_by_provider`, :func:`ending_of`, :func:`held_record` …) are answered
from the table here, so that no other module looks at an error's class or status to
decide anything (``tests/unit/test_layout_decisions.py`` checks it).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

import attrs

from .errors import (
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
from .models import OutcomeStatus
from .safety import Safety

if TYPE_CHECKING:
    from collections.abc import Callable

    from .models import DocumentResult

__all__ = [
    "RULES",
    "WHY",
    "Blame",
    "Kind",
    "Load",
    "Rule",
    "certainly_not_processed",
    "classify",
    "deferral",
    "done_before",
    "duplicate_means_success",
    "ending_of",
    "foreign_record",
    "held_record",
    "last_answer",
    "may_resend",
    "maybe_processed",
    "needs_operator",
    "refused_by_provider",
    "retry_reason",
]


class Kind(enum.Enum):
    """What one attempt's answer was, as far as the request is concerned."""

    #: 409: the provider holds it; the body is its record.
    HELD = "held"
    #: 409 whose record cannot be read: held for sure, a re-send brings the record.
    HELD_UNREADABLE = "held, record unreadable"
    #: A record of another document: the provider may hold this one or not.
    FOREIGN = "foreign record"
    #: No answer in time after the request was sent (a read timeout).
    NO_ANSWER = "no answer"
    #: The connection failed after the request may have left (a reset), or the answer
    #: was not HTTP; an earlier run's unknown outcome.
    DROPPED = "dropped"
    #: 408: the tax authority's service did not answer the provider in time.
    PROVIDER_TIMEOUT = "provider timeout"
    #: 5xx but 503, or a 2xx whose body cannot be read.
    SERVER_ERROR = "server error"
    #: Certainly not processed, and it may pass (connection refused, no token).
    NOT_SENT = "not sent"
    #: 429: the provider asks for fewer requests.
    RATE_LIMITED = "rate limited"
    #: 503: not handled (RFC 9110 §15.6.4); the provider asks for fewer requests.
    UNAVAILABLE = "unavailable"
    #: A definite refusal of the request (400, 413, 422).
    REFUSED = "refused"
    #: 401/403 even with a token fetched for this request: the API key, or the issuer's
    #: VAT number; or no credentials for the issuer. Not a judgement of a document: it
    #: ends ``NOT_SENT``.
    AUTH = "authentication"
    #: 401 that a revoked access token may have caused, while no new token may be
    #: requested yet (the re-authentication cooldown): waited out within the deadline
    #: and a batch's :class:`~._shared.ReauthWaits`, else an ``AUTH`` answer.
    REAUTH = "authentication, no new token yet"
    #: 404/405/415 or a redirect: the base URL or path is wrong.
    MISCONFIGURED = "misconfigured"
    #: The token endpoint refused the issuer's credentials: nothing of that issuer can
    #: be sent.
    CREDENTIALS = "credentials refused"
    #: There are no credentials for the document's issuer (a pool's resolver knows none):
    #: nothing was sent, and nothing of it can be.
    NO_CREDENTIALS = "no credentials"
    #: Nothing can be sent for anyone: an unusable provider key (also one the provider
    #: cannot decrypt), a closed client.
    STOP = "stop"


class Blame(enum.Enum):
    """What an answer says about the configuration."""

    #: Nothing against it: a run of answers that blame it ends.
    NONE = "none"
    #: One more answer that blames it: a breaker opens after ``circuit_breaker`` in a row.
    CONFIG = "configuration"
    #: Nothing more of this issuer can be sent: its breaker opens now.
    ISSUER = "issuer"
    #: Nothing more can be sent for anyone: every breaker of the batch opens now.
    EVERYONE = "everyone"


class Load(enum.Enum):
    """What an answer says about the provider's load (an in-flight limit)."""

    #: Nothing.
    SAME = "same"
    #: Answered as asked: the limit may grow back.
    GROW = "grow"
    #: Fewer requests, please: the limit is halved, the issuer's lane waits.
    SHRINK = "shrink"


@attrs.frozen
class Rule:
    """What follows an answer of one :class:`Kind` (the columns: see the module)."""

    ends: OutcomeStatus
    retry: bool
    reason: str
    ambiguous: bool = False
    not_processed: bool = False
    breaker: Blame = Blame.NONE
    load: Load = Load.SAME
    token_accepted: bool = False
    gives_up: str | None = None
    sale_ends: bool = False
    defer: str | None = None
    operator: bool = False


_A, _D, _R, _U, _N = (
    OutcomeStatus.ACCEPTED,
    OutcomeStatus.DUPLICATE,
    OutcomeStatus.REJECTED,
    OutcomeStatus.UNKNOWN,
    OutcomeStatus.NOT_SENT,
)
_AMBIGUOUS = "ambiguous"
_THROTTLED = "throttled"

#: The one table: every failed answer's consequences (a success ends ``ACCEPTED``, and
#: grows an in-flight limit).
RULES: dict[Kind, Rule] = {
    Kind.HELD: Rule(_D, retry=False, reason="held", load=Load.GROW, token_accepted=True),
    Kind.HELD_UNREADABLE: Rule(
        _D, retry=True, reason="held", load=Load.GROW, token_accepted=True,
        defer="server_error",
    ),
    Kind.FOREIGN: Rule(
        _U, retry=True, reason="foreign record", ambiguous=True, token_accepted=True,
        sale_ends=True,
    ),
    Kind.NO_ANSWER: Rule(_U, retry=True, reason=_AMBIGUOUS, ambiguous=True, defer="timed_out"),
    Kind.DROPPED: Rule(_U, retry=True, reason=_AMBIGUOUS, ambiguous=True, defer="unreachable"),
    Kind.PROVIDER_TIMEOUT: Rule(
        _U, retry=True, reason=_AMBIGUOUS, ambiguous=True, defer="provider_timeout"
    ),
    Kind.SERVER_ERROR: Rule(
        _U, retry=True, reason=_AMBIGUOUS, ambiguous=True, defer="server_error"
    ),
    Kind.NOT_SENT: Rule(
        _N, retry=True, reason="not sent", not_processed=True, sale_ends=True,
        defer="unreachable",
    ),
    Kind.RATE_LIMITED: Rule(
        _N, retry=True, reason=_THROTTLED, not_processed=True, load=Load.SHRINK,
        sale_ends=True, defer="rate_limited",
    ),
    Kind.UNAVAILABLE: Rule(
        _N, retry=True, reason=_THROTTLED, not_processed=True, load=Load.SHRINK,
        sale_ends=True, defer="server_error",
    ),
    Kind.REFUSED: Rule(_R, retry=False, reason="refused", token_accepted=True),
    Kind.AUTH: Rule(
        _N, retry=False, reason="authentication", breaker=Blame.CONFIG, gives_up="credentials"
    ),
    Kind.REAUTH: Rule(_N, retry=True, reason="token refused"),
    Kind.MISCONFIGURED: Rule(
        _N, retry=False, reason="misconfigured", breaker=Blame.CONFIG, gives_up="configuration"
    ),
    Kind.CREDENTIALS: Rule(
        _N, retry=False, reason="credentials refused", breaker=Blame.ISSUER,
        gives_up="credentials refused", operator=True,
    ),
    Kind.NO_CREDENTIALS: Rule(
        _N, retry=False, reason="no credentials", breaker=Blame.CONFIG,
        gives_up="no credentials", operator=True,
    ),
    Kind.STOP: Rule(_N, retry=False, reason="stop", breaker=Blame.EVERYONE, gives_up="stop"),
}  # fmt: skip

#: Why a request stops trying, as its log line and error say it.
WHY = {
    "attempts": "no attempts left",
    "budget": "the batch's retry budget ran out",
    "deadline": "the deadline passed",
    "stop": "its issuer's documents stopped",
    "decisive": "an answer that decides at once",
    "no re-sends": "re-sending after an ambiguous failure is off (resend_ambiguous=False)",
    "at most once": "{safety} is not re-sent after a failure that may have been processed",
    "configuration": "the provider refuses the configuration",
    "credentials": "the provider refused the credentials or the issuer (a new token did not help)",
    "credentials refused": "the provider refused the issuer's credentials",
    "refused on re-send": "a re-send for the record was refused",
    "lease lost": "another worker took the entry over",
    "no credentials": "there are no credentials for its issuer",
}


def classify(error: InvoicingError) -> Kind:
    """The kind of a failed attempt (see :class:`Kind`): its class's, the most specific."""
    for cls in type(error).__mro__:
        kind = _KINDS.get(cls)
        if kind is not None:
            return kind if isinstance(kind, Kind) else kind(error)
    return Kind.REFUSED  # 400, 413, 422 and any other definite refusal


def _held(error: Any) -> Kind:
    return Kind.HELD if error.result is not None else Kind.HELD_UNREADABLE


def _transport(error: Any) -> Kind:
    if not error.maybe_sent:
        return Kind.NOT_SENT
    return Kind.NO_ANSWER if error.timed_out else Kind.DROPPED


def _server(error: Any) -> Kind:
    return Kind.UNAVAILABLE if error.status == 503 else Kind.SERVER_ERROR


def _authentication(error: Any) -> Kind:
    return Kind.AUTH if error.reauth_in is None else Kind.REAUTH


def _malformed(error: Any) -> Kind:
    status = error.status
    if status is None or 200 <= status < 300:  # accepted, its answer unreadable
        return Kind.SERVER_ERROR
    return Kind.MISCONFIGURED if 300 <= status < 400 else Kind.REFUSED


#: Each error class's kind, or how to tell it from the error (see :func:`classify`).
_KINDS: dict[type[InvoicingError], Kind | Callable[[Any], Kind]] = {
    ClientStateError: Kind.STOP,
    ProviderKeyError: Kind.STOP,
    CredentialsError: Kind.CREDENTIALS,
    UnknownIssuerError: Kind.NO_CREDENTIALS,
    DuplicateDocumentError: _held,
    ForeignRecordError: Kind.FOREIGN,
    TransportError: _transport,
    UnknownOutcomeError: Kind.DROPPED,
    ServerError: _server,
    ProviderTimeoutError: Kind.PROVIDER_TIMEOUT,
    RateLimitError: Kind.RATE_LIMITED,
    AuthenticationError: _authentication,
    MalformedResponseError: _malformed,
    UnexpectedStatusError: Kind.MISCONFIGURED,
}


# --- the questions, answered from the table -------------------------------------------------


def maybe_processed(error: BaseException) -> bool:
    """Whether the provider may have processed the request that failed with ``error``.

    True for failures after the request may have been processed: a reset after sending,
    a read timeout, 408, 5xx except 503 (RFC 9110 §15.6.4: not handled), an unreadable
    2xx, a record of another document, an earlier unknown outcome. False for definite
    answers (400, 401, 409, 429, 503) and for requests that never left (connection
    refused, refused locally).
    """
    return isinstance(error, InvoicingError) and RULES[classify(error)].ambiguous


def certainly_not_processed(error: BaseException) -> bool:
    """Whether ``error`` says the provider did not process the request, which may pass.

    A refused connection (or no token to send with), 429, and 503.
    """
    return isinstance(error, InvoicingError) and RULES[classify(error)].not_processed


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


def ending_of(error: InvoicingError) -> OutcomeStatus:
    """What a call that raised ``error`` ended as (a 409 ``duplicate`` …)."""
    return RULES[classify(error)].ends


def retry_reason(error: InvoicingError) -> str:
    """What telemetry calls a re-send after ``error`` (``invoicing.retry.reason``)."""
    return RULES[classify(error)].reason


def refused_by_provider(error: InvoicingError | None) -> bool:
    """Whether ``error`` is the provider's definite refusal of the content sent.

    A 400 and the like: final for that content (a ledger keeps its fingerprint). Not a
    refusal made locally (``status`` ``None``: checked again for free), and never a
    401/403, which blames the credentials.
    """
    return error is not None and error.status is not None and classify(error) is Kind.REFUSED


def needs_operator(error: InvoicingError | None) -> bool:
    """Whether ``error`` leaves the issuer's documents to an operator (credentials)."""
    return error is not None and RULES[classify(error)].operator


def last_answer(error: InvoicingError | None) -> InvoicingError | None:
    """The answer behind ``error``: an unknown outcome's last failed attempt's error."""
    if isinstance(error, UnknownOutcomeError) and isinstance(error.last_error, InvoicingError):
        return error.last_error
    return error


def deferral(error: InvoicingError | None, *, out_of_time: bool) -> str | None:
    """Why a sale is deferred after its attempts ended with ``error``.

    A :class:`~invoicing_async.DeferralReason` value, or ``None`` for a definite answer
    (never deferred). ``None`` as ``error``: no answer came within the sale's budget.
    An unknown outcome is deferred for the reason its last attempt failed.

    :param out_of_time: the sale's budget ran out: a connection that failed then did so
        because time was up (``timed_out``), not because the provider is unreachable.
    """
    error = last_answer(error)
    if error is None:
        return "timed_out"
    reason = RULES[classify(error)].defer
    if out_of_time and reason == "unreachable":
        return "timed_out"
    return reason


# --- a record answered: this document's, or another's ------------------------------------


def held_record(error: InvoicingError) -> DocumentResult | None:
    """The record a 409 answered with, to be checked against the document sent.

    A 409 says the provider holds *a* document: this one, or (its record says so)
    another, which is a :func:`foreign_record`, never a duplicate. ``None`` for every
    other failure, and for a 409 whose record cannot be read.
    """
    return error.result if isinstance(error, DuplicateDocumentError) else None


def foreign_record(
    record: DocumentResult, mismatches: tuple[str, ...], *, held: bool
) -> ForeignRecordError:
    """The error an answer with another document's record is (``Kind.FOREIGN``).

    The provider may or may not hold the document sent.

    :param mismatches: the fields in which ``record`` differs from the document sent.
    :param held: it came with a 409 (:func:`held_record`), else with a 201.
    """
    return ForeignRecordError(
        f"the provider answered with the record of another document "
        f"(differs in {', '.join(mismatches)})",
        status=409 if held else 201,
        result=record,
        mismatches=mismatches,
    )


def done_before(error: InvoicingError, what: str) -> None:
    """An operation's 409 (not a document's) says what was done before, in its message.

    The provider's own words, from the body's ``message`` (at most 500 characters).

    :param what: the request, ``METHOD /path``.
    """
    if not isinstance(error, DuplicateDocumentError):
        return
    detail = error.body.get("message") if error.body is not None else None
    if isinstance(detail, str) and detail:
        error.message = f"{what}: done before this call: {detail[:500]}"
        error.args = (error.message,)
