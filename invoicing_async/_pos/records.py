"""What deferred submission tells the application: receipts, outcomes, the backlog.

Plain frozen records (:class:`DeferredReceipt`, :class:`DeferredOutcome`,
:class:`Backlog`), why a sale was deferred (:class:`DeferralReason`: the values of the
decision core's ``defer`` column), and a stored deferral read back as a receipt.
"""

from __future__ import annotations

import datetime as dt
import enum
import time
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from invoicing_async._core.models import DocumentResult
    from invoicing_async._core.outcomes import Outcome
    from invoicing_async._durable.deferrals import DeferralRecord

__all__ = [
    "Backlog",
    "DeferralReason",
    "DeferredOutcome",
    "DeferredReceipt",
    "receipt_of",
]


class DeferralReason(enum.Enum):
    """Why a sale was deferred instead of answered by the provider.

    .. versionadded:: 0.3.0
    """

    #: The provider could not be reached (connection refused, dropped, no token).
    UNREACHABLE = "unreachable"
    #: The provider did not answer within the budget.
    TIMED_OUT = "timed_out"
    #: The provider answered 5xx (or a 2xx that could not be read).
    SERVER_ERROR = "server_error"
    #: 408: the tax authority's service did not answer the provider in time.
    PROVIDER_TIMEOUT = "provider_timeout"
    #: 429: the provider asked for fewer requests.
    RATE_LIMITED = "rate_limited"


@attrs.frozen(kw_only=True)
class DeferredReceipt:
    """A sale deferred by :meth:`Deferral.submit_or_defer`: durable in the outbox.

    The document is sent by the drainer as soon as the provider answers; its
    :class:`DeferredOutcome` then carries the provider's record (mark, uid, QR).

    .. versionadded:: 0.3.0
    """

    #: The document's identity (:func:`~invoicing_async.document_key`).
    key: str
    #: When the sale was deferred (UTC).
    deferred_at: dt.datetime
    reason: DeferralReason
    #: The first attempt may have reached the provider: the document is stored, and
    #: will be sent, exactly as it was (never stamped).
    maybe_sent: bool
    #: The document was changed before it was stored, as one issued during a loss of
    #: connection: ``TransmissionFailure: 1`` written, the ``stamp`` hook's document
    #: stored, or both.
    #:
    #: .. versionchanged:: 0.5.0 ``TransmissionFailure``, written without a hook too.
    stamped: bool
    #: Requests this call sent (0: deferred at once, the provider being known down).
    attempts: int
    #: The provider's offline QR url for the receipt (with ``portal_url`` configured and
    #: the fields it needs in the document), else ``None``.
    offline_qr_url: str | None
    #: What happened, in words (the last error, or why no attempt was made).
    detail: str
    #: The issuer (TIN) whose sale it is: its ``Issuer.Vat`` (``None``: it names none).
    #: With :attr:`key`, the sale's identity, in a till of many shops.
    #:
    #: .. versionadded:: 0.4.0
    issuer: str | None = None
    #: Why the ``stamp`` hook's document is not the one stored, in words (``the stamp
    #: hook raised TypeError: …``, ``… returned NoneType, not a document …``): the sale
    #: is stored as it was given (``TransmissionFailure`` written), without the hook's
    #: changes. ``None``: the hook did not fail (or there is none).
    #:
    #: .. versionadded:: 0.5.0
    stamp_error: str | None = None


@attrs.frozen
class DeferredOutcome:
    """The final outcome of a deferred sale, as the drainer delivers it.

    ``outcome.result`` is the provider's record (``mark``, ``uid``, ``qr_code_string``)
    when the provider holds the document (``accepted``, or ``duplicate``: held before);
    a ``rejected`` outcome carries the provider's refusal in ``outcome.error``.

    .. versionadded:: 0.3.0
    """

    receipt: DeferredReceipt
    outcome: Outcome

    @property
    def key(self) -> str:
        """The document's identity."""
        return self.receipt.key

    @property
    def issuer(self) -> str | None:
        """The issuer whose sale it is (see :attr:`DeferredReceipt.issuer`).

        .. versionadded:: 0.4.0
        """
        return self.receipt.issuer

    @property
    def result(self) -> DocumentResult | None:
        """The provider's record, when it holds the document."""
        return self.outcome.result


@attrs.frozen
class Backlog:
    """Deferred sales not yet transmitted: how many, and since when.

    .. versionadded:: 0.3.0
    """

    count: int
    #: When the oldest of them was deferred (UTC), or ``None`` without any.
    oldest: dt.datetime | None
    #: Of them, how many are parked: poison documents the drainer gave up on after
    #: ``RetryPolicy.max_rounds`` failed rounds. They need attention; an explicit retry
    #: (``invoicing-async ledger retry --status parked``) sends them again.
    #:
    #: .. versionadded:: 0.4.0
    parked: int = 0

    @property
    def age(self) -> float:
        """Seconds the oldest has waited (0 without any)."""
        if self.oldest is None:
            return 0.0
        return max(0.0, time.time() - self.oldest.timestamp())


def receipt_of(deferred: DeferralRecord) -> DeferredReceipt:
    """A stored deferral as the receipt the application sees."""
    return DeferredReceipt(
        key=deferred.key,
        deferred_at=dt.datetime.fromtimestamp(deferred.deferred_at, dt.timezone.utc),
        reason=DeferralReason(deferred.reason),
        maybe_sent=deferred.maybe_sent,
        stamped=deferred.stamped,
        attempts=deferred.attempts,
        offline_qr_url=deferred.offline_qr,
        detail=deferred.detail,
        issuer=deferred.issuer or None,
        stamp_error=deferred.stamp_error,
    )
