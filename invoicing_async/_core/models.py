"""Frozen records the library hands to its callers.

Records are plain attrs classes with no behaviour beyond small derived properties; the
conversion from and to the provider's camelCase JSON lives in :mod:`._convert`.
"""

from __future__ import annotations

import datetime as dt  # noqa: TC003  (cattrs resolves the annotations at run time)
import enum
from typing import Any

import attrs

__all__ = ["AccessToken", "DocumentResult", "DocumentStatus", "OutcomeStatus"]


class DocumentStatus(enum.Enum):
    """The ``status`` field of a document result record, as the provider writes it.

    The specification names one value, ``UNKNOWN``, and the provider writes it in the
    records it answers with, accepted documents included. It is the record's own field
    and says nothing about the submission: it does **not** mean that the outcome is
    unknown. Whether the provider holds a document is told by getting its record at all
    (201, or 409 with the original record), by ``mark``, and in bulk by
    :attr:`Outcome.status <invoicing_async.Outcome.status>`.

    A value the library does not know is read as ``UNKNOWN`` too; the text exactly as
    sent is always kept in :attr:`DocumentResult.raw_status`, so a provider adding
    statuses never breaks a caller and loses nothing.

    .. versionchanged:: 0.2.0 ``raw_status`` keeps every value, known ones included.
    """

    #: The specification's only value: "no processing status given", not "not committed".
    UNKNOWN = "UNKNOWN"


class OutcomeStatus(enum.Enum):
    """How one document of a batch ended.

    ``ACCEPTED`` and ``DUPLICATE`` mean the provider holds the document (``Outcome.ok``).
    """

    #: 201, or a 409 answering this batch's own earlier attempt whose response was lost.
    ACCEPTED = "accepted"
    #: 409 on the first attempt: the document was sent before this batch.
    DUPLICATE = "duplicate"
    #: A definite refusal of the document (400, 413, 422, a document that cannot be
    #: serialised). Never a 401 or 403: credentials are not the document's fault.
    REJECTED = "rejected"
    #: It may or may not have been committed: retries were exhausted on an ambiguous failure.
    UNKNOWN = "unknown"
    #: Certainly not committed, but not refused either: every attempt failed before reaching
    #: the provider (connection refused, rate limited), the provider refused the
    #: credentials rather than the document (401/403), or the deadline or retry budget ran
    #: out before it was sent. Safe to submit again later.
    NOT_SENT = "not_sent"


@attrs.frozen(kw_only=True)
class DocumentResult:
    """The provider's result record for one document (201, or the original record of a 409).

    Every field of the specification, snake_cased; any of them may be ``None`` when the
    provider leaves it out. Keys the specification does not list are kept in :attr:`extra`.

    .. versionadded:: 0.1.0
    """

    success: bool | None = None
    message: str | None = None
    status_code: str | int | None = None
    integrity_signature: str | None = None
    signature: str | None = None
    uid: str | None = None
    mark: int | None = None
    cancellation_mark: int | None = None
    authentication_code: str | None = None
    #: The tax platform's own answer, read from ``authorityDataResponse`` or from the
    #: platform-named ``…Response`` key the real service uses. Any JSON value.
    authority_data_response: Any = None
    #: The specification's status, read from :attr:`raw_status` (``UNKNOWN`` for any
    #: text the library does not know); given alone, it sets :attr:`raw_status`.
    status: DocumentStatus | None = None
    series: str | None = None
    number: str | None = None
    date_issued: dt.datetime | None = None
    domain: str | None = None
    url: str | None = None
    qr_code_string: str | None = None
    erp_qr_code: str | None = None
    unique_id: str | None = None
    internal_id: str | None = None
    #: The ``status`` text exactly as the provider sent it (``None`` when absent): the
    #: value to look at when a provider writes statuses the specification does not name.
    raw_status: str | None = None
    #: Keys of the record the specification does not list, unchanged.
    extra: dict[str, Any] = attrs.field(factory=dict, hash=False)

    def __attrs_post_init__(self) -> None:
        # One status, two views: a record built with only one of them gets the other,
        # as parsing a provider's record gives both, so every record converts to the
        # provider's form (one ``status`` text) and back unchanged.
        if self.raw_status is None and self.status is not None:
            object.__setattr__(self, "raw_status", self.status.value)
        elif self.status is None and self.raw_status is not None:
            try:
                status = DocumentStatus(self.raw_status)
            except ValueError:
                status = DocumentStatus.UNKNOWN
            object.__setattr__(self, "status", status)


@attrs.frozen(kw_only=True)
class AccessToken:
    """An OAuth access token with its lifetime on the monotonic clock.

    ``obtained_at`` is the clock read *before* the token request was sent, so the computed
    expiry is never later than the provider's. The token and refresh token are left out
    of ``repr`` on purpose.

    Renewal windows scale with the lifetime ``L`` and are capped for the provider's
    900 s tokens (the rule botocore and the AWS SDKs follow):

    ===================  =====================  ========================================
    window               length                 900 s token
    ===================  =====================  ========================================
    renewal (advisory)   ``min(300 s, L / 3)``  from 600 s on one caller renews (plus a
                                                per-process jitter of up to a fifth of the
                                                window), the others keep the token
    blocking             ``min(60 s, L / 15)``  the last minute: the token is no longer
                                                sent, callers wait for a new one
    failed renewal       ``min(30 s, L / 30)``  at most one retry per 30 s while the old
                                                token stays usable
    ===================  =====================  ========================================
    """

    value: str = attrs.field(repr=False)
    token_type: str
    expires_in: float
    obtained_at: float
    refresh_token: str | None = attrs.field(default=None, repr=False)

    @property
    def expires_at(self) -> float:
        """Monotonic time at which the provider stops accepting the token."""
        return self.obtained_at + self.expires_in

    @property
    def renew_ahead(self) -> float:
        """Seconds before expiry from which the token may be renewed: ``min(300, L/3)``."""
        return min(300.0, self.expires_in / 3)

    @property
    def renew_at(self) -> float:
        """Monotonic time from which one caller renews while others keep using the token.

        Five minutes ahead of expiry for a 900 s token (a third of shorter lifetimes);
        :class:`~invoicing_async.TokenCache` adds a jitter per process on top.
        """
        return self.expires_at - self.renew_ahead

    @property
    def unusable_at(self) -> float:
        """Monotonic time after which the token is not sent any more; callers wait.

        The last minute of a 900 s token (the last fifteenth of shorter lifetimes): a
        request never leaves with a token about to expire on the way, and renewal has
        had the whole advisory window to succeed before anyone blocks.
        """
        return self.expires_at - min(60.0, self.expires_in / 15)

    @property
    def retry_interval(self) -> float:
        """Seconds between renewal attempts after one failed: ``min(30, L/30)``."""
        return min(30.0, self.expires_in / 30)
