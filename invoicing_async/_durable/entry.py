"""How an entry (:class:`~invoicing_async._core.entries.LedgerEntry`) is stored and read back.

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
from invoicing_async._core.entries import PENDING, STATES, LedgerEntry
from invoicing_async._core.outcomes import Outcome, OutcomeStatus
from invoicing_async._doc.document import dumps

if TYPE_CHECKING:
    import datetime as dt

__all__ = ["entry_from_row", "outcome_from_json", "outcome_json"]


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
