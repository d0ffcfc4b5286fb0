"""What the ledger holds for one document, and how an outcome is stored and read back.

Stored outcomes are the JSON of :func:`~invoicing_async.outcome_to_dict` (the form the
command line prints and users store): the provider's record, and an error as its type,
message, status and data (never a secret). Read back with
:func:`~invoicing_async.outcome_from_dict`, an error is the class it was written from.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._core.convert import outcome_from_dict, outcome_to_dict
from invoicing_async._core.outcomes import Outcome, OutcomeStatus
from invoicing_async._doc.document import dumps

if TYPE_CHECKING:
    import datetime as dt

__all__ = [
    "IN_FLIGHT",
    "PARKED",
    "PENDING",
    "STATES",
    "LedgerEntry",
    "entry_from_row",
    "outcome_from_json",
    "outcome_json",
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


def outcome_json(outcome: Outcome) -> str:
    """The outcome as the JSON text the ledger stores (:func:`outcome_to_dict`'s form)."""
    return dumps(outcome_to_dict(outcome)).decode("utf-8")


def outcome_from_json(text: str | bytes | dict[str, Any], *, key: str) -> Outcome | None:
    """The outcome stored as ``text``; ``None`` if it cannot be read."""
    try:
        data = dict(text) if isinstance(text, dict) else json.loads(text)
        data["key"] = key
        return outcome_from_dict(data)
    except (ValueError, TypeError, AttributeError):
        return None


def entry_from_row(
    key: str,
    state: str,
    status: str | None,
    *,
    final: bool,
    maybe_committed: bool,
    fingerprint: str | None,
    outcome: str | bytes | dict[str, Any] | None,
    updated_at: dt.datetime | None,
    failures: int = 0,
    available_at: dt.datetime | None = None,
    issuer: str = "",
) -> LedgerEntry:
    """A stored row as an entry (both backends store the same columns)."""
    recorded = outcome_from_json(outcome, key=key) if outcome is not None else None
    if recorded is not None and issuer and recorded.issuer is None:
        recorded = attrs.evolve(recorded, issuer=issuer)
    shown: OutcomeStatus | str = state
    if state not in STATES:
        shown = OutcomeStatus(status) if status else PENDING
    return LedgerEntry(
        key=key,
        status=shown,
        outcome=recorded,
        final=final,
        maybe_committed=maybe_committed or status == OutcomeStatus.UNKNOWN.value,
        fingerprint=fingerprint,
        updated_at=updated_at,
        failures=failures,
        available_at=available_at,
        issuer=issuer or None,
    )
