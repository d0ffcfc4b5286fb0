"""What the library tells about a document: its one truthful :class:`Outcome`.

Its five endings, :class:`~.models.OutcomeStatus`, are a record of their own (the
decision table names them without the outcome), and are imported from here too.

How it retries to get one is :mod:`._retry` (the policy) and :mod:`._decision` (the
rules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from .models import OutcomeStatus

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .errors import InvoicingError
    from .models import DocumentResult

__all__ = ["ANSWERED", "HELD", "BatchProgress", "Outcome", "OutcomeStatus"]


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
