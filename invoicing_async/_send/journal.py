"""What a batch asks of a durable record of its documents: three hooks.

A batch with a journal (the SQLite :class:`~invoicing_async.Ledger`, or an outbox
worker's claims) calls, for every document:

1. :meth:`Journal.lookup`, as documents are read, a chunk at a time: what to do with
   each — send it, send it knowing an earlier request may have been committed (a ``409``
   is then its own commit), or report an outcome already final without sending;
2. :meth:`Journal.before_send`, before its first request leaves: returns once the
   journal durably says a request may be out;
3. :meth:`Journal.after_outcome`, with its outcome (never blocks).

A document is named by its :class:`Ref`: its issuer and its key (two issuers'
``A/1`` are two documents).

The journal applies the core's entry rules (:mod:`invoicing_async._core.entries`):
which outcomes end a document for good, and whether a definite refusal still applies
to the content read again (its :class:`~invoicing_async._core.entries.Verdict` holds
the digest of what was refused, compared with what is about to be sent). The batch
only follows its verdicts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from invoicing_async._core.entries import Verdict
    from invoicing_async._core.outcomes import Outcome
    from invoicing_async._doc.document import Prepared

__all__ = ["Journal", "Ref", "Withdrawn"]


class Ref(NamedTuple):
    """A document as a journal knows it: its issuer and its key.

    Two issuers' documents with the same key are two documents. ``issuer`` is the
    document's ``Issuer.Vat`` (or the issuer it is sent for), ``""`` when it names none:
    a string, never ``None``, because it is half of a stored primary key.
    """

    issuer: str
    key: str

    @classmethod
    def of(cls, key: str, issuer: str | None) -> Ref:
        return cls(issuer or "", key)

    @classmethod
    def of_outcome(cls, outcome: Outcome) -> Ref:
        """The document an outcome is about."""
        return cls(outcome.issuer or "", outcome.key)


class Withdrawn(Exception):  # noqa: N818  (a signal, not an error: the journal took it back)
    """Raised by :meth:`Journal.before_send`: the document must not be sent by this batch.

    An outbox worker whose claim was taken over by another worker: the other sends it.
    The document ends ``not_sent`` in this batch.
    """


class Journal(Protocol):
    """The three hooks a batch calls (see the module docstring)."""

    @property
    def waits_on_others(self) -> bool:
        """Whether :meth:`before_send` may wait for another document of the batch.

        A till's drainer lets one probe through while the provider is down: a batch
        then calls it off its workers, holding no room. Otherwise a worker awaits it
        before the request (a ledger's commit waits for its writer, never a document).
        """

    async def lookup(self, refs: Sequence[Ref]) -> Sequence[Verdict]:
        """One verdict per document, in order."""

    async def before_send(self, ref: Ref) -> None:
        """A request for ``ref`` is about to leave: return once that is durable.

        :raises Withdrawn: the document must not be sent by this batch.
        """

    def after_outcome(self, outcome: Outcome, prepared: Prepared | None) -> None:
        """Record ``outcome`` of ``prepared`` (``None``: refused before it was prepared).

        Never blocks; raises a write failure already known (the batch then stops).
        """
