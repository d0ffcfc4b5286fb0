"""asyncio client for the e-invoicing provider's API.

The public API is what this module exports; everything in ``_``-modules is private.
The embedded provider for tests and demos is :mod:`invoicing_sandbox` (its own
distribution). Importing this package costs nothing until a name is used: each is
imported on first use (the client brings aiohttp and cryptography).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._client import InvoicingClient
    from ._convert import outcome_from_dict, outcome_to_dict, result_from_dict, result_to_dict
    from ._deferred import (
        Backlog,
        Deferral,
        DeferralReason,
        DeferredOutcome,
        DeferredReceipt,
    )
    from ._documents import Submission, document_key
    from ._engine import ClientOptions
    from ._errors import (
        AmbiguousDocumentError,
        AuthenticationError,
        ClientStateError,
        CredentialsError,
        DocumentTooLargeError,
        DuplicateDocumentError,
        ForeignRecordError,
        InvalidDocumentError,
        InvoicingError,
        LedgerError,
        MalformedResponseError,
        ProviderKeyError,
        ProviderTimeoutError,
        RateLimitError,
        ServerError,
        TransportError,
        UnexpectedStatusError,
        UnknownIssuerError,
        UnknownOutcomeError,
        ValidationError,
    )
    from ._ledger._entry import LedgerEntry
    from ._ledger._sqlite_ledger import Ledger
    from ._models import AccessToken, DocumentResult, DocumentStatus
    from ._operations import OperationResult
    from ._outcomes import BatchProgress, Outcome, OutcomeStatus
    from ._pgp import ProviderKey
    from ._pool import IssuerPool
    from ._retry import RetryPolicy
    from ._safety import Safety
    from ._tokencache import TokenCache
    from ._tokenstore import CredentialsKey, MemoryTokenStore, TokenStore

__all__ = [
    "AccessToken",
    "AmbiguousDocumentError",
    "AuthenticationError",
    "Backlog",
    "BatchProgress",
    "ClientOptions",
    "ClientStateError",
    "CredentialsError",
    "CredentialsKey",
    "Deferral",
    "DeferralReason",
    "DeferredOutcome",
    "DeferredReceipt",
    "DocumentResult",
    "DocumentStatus",
    "DocumentTooLargeError",
    "DuplicateDocumentError",
    "ForeignRecordError",
    "InvalidDocumentError",
    "InvoicingClient",
    "InvoicingError",
    "IssuerPool",
    "Ledger",
    "LedgerEntry",
    "LedgerError",
    "MalformedResponseError",
    "MemoryTokenStore",
    "OperationResult",
    "Outcome",
    "OutcomeStatus",
    "ProviderKey",
    "ProviderKeyError",
    "ProviderTimeoutError",
    "RateLimitError",
    "RetryPolicy",
    "Safety",
    "ServerError",
    "Submission",
    "TokenCache",
    "TokenStore",
    "TransportError",
    "UnexpectedStatusError",
    "UnknownIssuerError",
    "UnknownOutcomeError",
    "ValidationError",
    "document_key",
    "outcome_from_dict",
    "outcome_to_dict",
    "result_from_dict",
    "result_to_dict",
]

#: Where each public name lives; imported on first use (see the module docstring).
_HOMES = {
    "AccessToken": "._models",
    "AmbiguousDocumentError": "._errors",
    "AuthenticationError": "._errors",
    "Backlog": "._deferred",
    "BatchProgress": "._outcomes",
    "ClientOptions": "._engine",
    "ClientStateError": "._errors",
    "CredentialsError": "._errors",
    "CredentialsKey": "._tokenstore",
    "Deferral": "._deferred",
    "DeferralReason": "._deferred",
    "DeferredOutcome": "._deferred",
    "DeferredReceipt": "._deferred",
    "DocumentResult": "._models",
    "DocumentStatus": "._models",
    "DocumentTooLargeError": "._errors",
    "DuplicateDocumentError": "._errors",
    "ForeignRecordError": "._errors",
    "InvalidDocumentError": "._errors",
    "InvoicingClient": "._client",
    "InvoicingError": "._errors",
    "IssuerPool": "._pool",
    "Ledger": "._ledger._sqlite_ledger",
    "LedgerEntry": "._ledger._entry",
    "LedgerError": "._errors",
    "MalformedResponseError": "._errors",
    "MemoryTokenStore": "._tokenstore",
    "OperationResult": "._operations",
    "Outcome": "._outcomes",
    "OutcomeStatus": "._outcomes",
    "ProviderKey": "._pgp",
    "ProviderKeyError": "._errors",
    "ProviderTimeoutError": "._errors",
    "RateLimitError": "._errors",
    "RetryPolicy": "._retry",
    "Safety": "._safety",
    "ServerError": "._errors",
    "Submission": "._documents",
    "TokenCache": "._tokencache",
    "TokenStore": "._tokenstore",
    "TransportError": "._errors",
    "UnexpectedStatusError": "._errors",
    "UnknownIssuerError": "._errors",
    "UnknownOutcomeError": "._errors",
    "ValidationError": "._errors",
    "document_key": "._documents",
    "outcome_from_dict": "._convert",
    "outcome_to_dict": "._convert",
    "result_from_dict": "._convert",
    "result_to_dict": "._convert",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version  # noqa: PLC0415  (lazy: costs ~10 ms)

        return version("invoicing-async")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
