"""What the library tells about a document: its one truthful :class:`Outcome`.

How it retries to get one is :mod:`._retry` (the policy) and :mod:`._decision` (the
rules).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .errors import InvoicingError
    from .models import DocumentResult

__all__ = ["ANSWERED", "HELD", "BatchProgress", "Outcome", "OutcomeStatus"]


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


# Tuples, not sets: ``in`` compares the members by identity, and never calls
# ``Enum.__hash__`` (a Python function) for the status looked up.

#: The endings that say the provider holds the document (:attr:`Outcome.ok`).
HELD = (OutcomeStatus.ACCEPTED, OutcomeStatus.DUPLICATE)
#: The endings that say the provider answered the request (and took the credentials it
#: was sent with): it holds the document, or refused it. An outbox worker's issuer
#: whose credentials were refused works again; a till's provider is up.
ANSWERED = (OutcomeStatus.ACCEPTED, OutcomeStatus.DUPLICATE, OutcomeStatus.REJECTED)


@attrs.frozen(kw_only=True)
class Outcome:
    """The single outcome of one document handed to bulk submission.

    .. versionadded:: 0.1.0
    """

    #: Position of the document in the input.
    index: int
    #: The document's identity (internal document id, issuer/series/number, or content hash).
    key: str
    status: OutcomeStatus
    result: DocumentResult | None = None
    error: InvoicingError | None = None
    #: Requests sent for this document in this run.
    attempts: int = 0
    #: Settled by an earlier run and read back from the journal: nothing was sent now.
    #:
    #: .. versionadded:: 0.2.0
    replayed: bool = False
    #: The issuer (TIN) whose document it is: its ``Issuer.Vat``, or the issuer it was
    #: sent for (``None``: the document names none). With :attr:`key`, the document's
    #: identity: two issuers' documents with the same key are two documents.
    #:
    #: .. versionadded:: 0.4.0
    issuer: str | None = None

    @property
    def ok(self) -> bool:
        """True exactly when the provider holds the document."""
        return self.status in HELD


@attrs.frozen
class BatchProgress:
    """Passed to the progress callback after every settled document."""

    #: Documents settled so far (sent now, or read back from the ledger).
    settled: int
    #: Of those, how many ended in each status.
    counts: Mapping[OutcomeStatus, int]
    #: Of those, how many were settled by an earlier run and read back from the ledger:
    #: nothing was sent for them now.
    #:
    #: .. versionadded:: 0.3.0
    replayed: int = 0
