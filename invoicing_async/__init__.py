"""asyncio client for the e-invoicing provider's API.

The public API is what this module exports; everything in ``_``-modules is private.
The embedded provider for tests and demos is :mod:`invoicing_async.sandbox`.
"""

from __future__ import annotations

from ._client import InvoicingClient
from ._convert import outcome_from_dict, outcome_to_dict, result_from_dict, result_to_dict
from ._deferral import Deferral
from ._documents import Submission, document_key
from ._errors import (
    AuthenticationError,
    ClientStateError,
    CredentialsError,
    DuplicateDocumentError,
    ForeignRecordError,
    InvoicingError,
    LedgerError,
    MalformedResponseError,
    ProviderKeyError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    TransportError,
    UnexpectedStatusError,
    UnknownOutcomeError,
    ValidationError,
)
from ._ledger._entry import LedgerEntry
from ._ledger._sqlite_ledger import Ledger
from ._models import AccessToken, DocumentResult, DocumentStatus
from ._outcomes import BatchProgress, Outcome, OutcomeStatus, RetryPolicy
from ._pgp import ProviderKey
from ._receipts import Backlog, DeferralReason, DeferredOutcome, DeferredReceipt
from ._tokencache import TokenCache
from ._tokenstore import CredentialsKey, MemoryTokenStore, TokenStore

__all__ = [
    "AccessToken",
    "AuthenticationError",
    "Backlog",
    "BatchProgress",
    "ClientStateError",
    "CredentialsError",
    "CredentialsKey",
    "Deferral",
    "DeferralReason",
    "DeferredOutcome",
    "DeferredReceipt",
    "DocumentResult",
    "DocumentStatus",
    "DuplicateDocumentError",
    "ForeignRecordError",
    "InvoicingClient",
    "InvoicingError",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "MalformedResponseError",
    "MemoryTokenStore",
    "Outcome",
    "OutcomeStatus",
    "ProviderKey",
    "ProviderKeyError",
    "ProviderTimeoutError",
    "RateLimitError",
    "RetryPolicy",
    "ServerError",
    "Submission",
    "TokenCache",
    "TokenStore",
    "TransportError",
    "UnexpectedStatusError",
    "UnknownOutcomeError",
    "ValidationError",
    "document_key",
    "outcome_from_dict",
    "outcome_to_dict",
    "result_from_dict",
    "result_to_dict",
]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from importlib.metadata import version  # noqa: PLC0415  (lazy: costs ~10 ms)

        return version("invoicing-async")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
