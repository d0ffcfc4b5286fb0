"""The storage side of an outbox: claims, leases and fenced writes.

A :class:`Store` (PostgreSQL or SQLite) hands out :class:`Claim` s on entries under a
lease, and applies :class:`Settlement` s only while the lease still holds (fencing): a
worker whose claim was taken over writes nothing. The worker that drives claims
through a batch is :mod:`invoicing_async._client.worker`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import attrs

from invoicing_async._core.entries import PENDING
from invoicing_async._doc.document import describe
from invoicing_async._send.journal import Ref

from .entry import entry_from_row

if TYPE_CHECKING:
    from collections.abc import Sequence

    from invoicing_async._core.entries import LedgerEntry

__all__ = ["Claim", "Settlement", "Store", "make_claim"]


_NOBODY = Ref("", "")


@attrs.frozen
class Claim:
    """One entry a worker holds under ``lease``: its serialised document and endpoint."""

    id: Any
    lease: str
    document: bytes = attrs.field(repr=False)
    encrypted: bool
    entry: LedgerEntry
    #: Times the entry was claimed, this claim included.
    claims: int
    #: The document's fingerprint as claimed: a settlement is charged to this content.
    content: str | None = None
    #: The document's identity: the issuer stored with it, else the one its
    #: ``Issuer.Vat`` names (an entry written by 0.3, which stored none).
    ref: Ref = attrs.field(default=_NOBODY)


@attrs.frozen
class Settlement:
    """An outcome to write, if the lease still holds.

    If the stored document was replaced by other content meanwhile (enqueued again,
    changed), an outcome that is not ``done`` is not charged to it: the entry goes back
    to be sent at once, with no failed rounds (``content`` tells them apart).
    """

    id: Any
    lease: str
    state: str  # "done"; "pending": to be sent again after ``delay`` seconds; "parked"
    status: str
    final: bool
    ambiguous: bool
    fingerprint: str | None
    attempts: int
    outcome: str
    delay: float
    #: The entry's failed rounds, this one included if it counts.
    failures: int = 0
    #: The fingerprint of the content the outcome is about (the claim's).
    content: str | None = None


class Store(Protocol):
    """The storage side of an outbox; every write is fenced by lease."""

    async def claim(
        self, limit: int, lease: str, seconds: float, skip: Sequence[str] = ()
    ) -> list[Claim]:
        """Claim up to ``limit`` entries (pending, or whose lease expired).

        None of the issuers in ``skip`` (their documents wait for an operator).
        """

    async def extend(self, leases: Sequence[str], seconds: float) -> None:
        """Extend the leases still held."""

    async def mark_sending(
        self, items: Sequence[tuple[Any, str]], sending: bool = True
    ) -> set[Any]:
        """Record that requests leave; returns the ids whose lease held.

        ``sending=False``: that those marked never left after all (a worker stopped
        while they waited for a token): the entries are as if never marked.
        """

    async def settle(self, items: Sequence[Settlement]) -> set[Any]:
        """Write outcomes; returns the ids whose lease held."""

    async def release(self, leases: Sequence[str], delay: float) -> None:
        """Put entries still held under ``leases`` back as pending."""

    async def remaining(self, skip: Sequence[str] = ()) -> int:
        """Entries pending or in flight (anyone's): parked ones wait for no worker.

        Not those of the issuers in ``skip``.
        """

    async def waiting(self, issuers: Sequence[str]) -> dict[str, int]:
        """How many entries of each of ``issuers`` are pending or in flight."""

    async def parked(self) -> int:
        """Entries parked: they need attention."""

    async def ping(self) -> None:
        """Return once the database answers (a readiness probe); raise LedgerError if not."""


def make_claim(
    row_id: Any,
    lease: str,
    *,
    key: str,
    issuer: str,
    document: bytes,
    encrypted: bool,
    status: str | None,
    maybe_committed: bool,
    claims: int,
    outcome: Any,
    failures: int,
    content: str | None,
) -> Claim:
    """A claimed row as a worker sees it: an entry to send (``pending``)."""
    if not issuer:  # stored by 0.3: the issuer the document names, if any
        issuer = describe(bytes(document))[1].issuer or ""
    entry = entry_from_row(
        key,
        PENDING,
        status,
        final=False,
        maybe_committed=maybe_committed,
        fingerprint=None,
        outcome=outcome,
        updated_at=None,
        failures=failures,
        issuer=issuer,
    )
    return Claim(
        row_id, lease, bytes(document), bool(encrypted), entry, claims, content, Ref(issuer, key)
    )
