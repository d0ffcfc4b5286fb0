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
    from ._client.client import InvoicingClient
    from ._client.engine import ClientOptions
    from ._client.pool import IssuerPool
    from ._core.convert import outcome_from_dict, outcome_to_dict, result_from_dict, result_to_dict
    from ._core.day import (
        CardPayment,
        CreditResult,
        InstantPayment,
        InstantPaymentRequest,
        InstantPaymentStatus,
        PaymentUpdateResult,
    )
    from ._core.entries import LedgerEntry
    from ._core.errors import (
        AmbiguousDocumentError,
        AuthenticationError,
        ClientStateError,
        CredentialsError,
        CreditRefusedError,
        DocumentNotFoundError,
        DocumentTooLargeError,
        DuplicateDocumentError,
        ForeignRecordError,
        InvalidDocumentError,
        InvoicingError,
        LedgerError,
        MalformedResponseError,
        PaymentConflictError,
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
    from ._core.models import AccessToken, DocumentResult, DocumentStatus, OutcomeStatus
    from ._core.outcomes import BatchProgress, Outcome
    from ._core.retry import RetryPolicy
    from ._core.safety import Safety
    from ._doc.document import Submission, document_key
    from ._doc.pgp import ProviderKey
    from ._durable.ledger import Ledger
    from ._io.tokencache import TokenCache
    from ._io.tokenstore import CredentialsKey, MemoryTokenStore, TokenStore
    from ._pos.records import Backlog, DeferralReason, DeferredOutcome, DeferredReceipt
    from ._pos.sale import Deferral
    from ._send.operations import OperationResult

__all__ = [
    "AccessToken",
    "AmbiguousDocumentError",
    "AuthenticationError",
    "Backlog",
    "BatchProgress",
    "CardPayment",
    "ClientOptions",
    "ClientStateError",
    "CredentialsError",
    "CredentialsKey",
    "CreditRefusedError",
    "CreditResult",
    "Deferral",
    "DeferralReason",
    "DeferredOutcome",
    "DeferredReceipt",
    "DocumentNotFoundError",
    "DocumentResult",
    "DocumentStatus",
    "DocumentTooLargeError",
    "DuplicateDocumentError",
    "ForeignRecordError",
    "InstantPayment",
    "InstantPaymentRequest",
    "InstantPaymentStatus",
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
    "PaymentConflictError",
    "PaymentUpdateResult",
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
    "AccessToken": "._core.models",
    "AmbiguousDocumentError": "._core.errors",
    "AuthenticationError": "._core.errors",
    "Backlog": "._pos.records",
    "BatchProgress": "._core.outcomes",
    "CardPayment": "._core.day",
    "ClientOptions": "._client.engine",
    "ClientStateError": "._core.errors",
    "CredentialsError": "._core.errors",
    "CredentialsKey": "._io.tokenstore",
    "CreditRefusedError": "._core.errors",
    "CreditResult": "._core.day",
    "Deferral": "._pos.sale",
    "DeferralReason": "._pos.records",
    "DeferredOutcome": "._pos.records",
    "DeferredReceipt": "._pos.records",
    "DocumentNotFoundError": "._core.errors",
    "DocumentResult": "._core.models",
    "DocumentStatus": "._core.models",
    "DocumentTooLargeError": "._core.errors",
    "DuplicateDocumentError": "._core.errors",
    "ForeignRecordError": "._core.errors",
    "InstantPayment": "._core.day",
    "InstantPaymentRequest": "._core.day",
    "InstantPaymentStatus": "._core.day",
    "InvalidDocumentError": "._core.errors",
    "InvoicingClient": "._client.client",
    "InvoicingError": "._core.errors",
    "IssuerPool": "._client.pool",
    "Ledger": "._durable.ledger",
    "LedgerEntry": "._core.entries",
    "LedgerError": "._core.errors",
    "MalformedResponseError": "._core.errors",
    "MemoryTokenStore": "._io.tokenstore",
    "OperationResult": "._send.operations",
    "Outcome": "._core.outcomes",
    "OutcomeStatus": "._core.models",
    "PaymentConflictError": "._core.errors",
    "PaymentUpdateResult": "._core.day",
    "ProviderKey": "._doc.pgp",
    "ProviderKeyError": "._core.errors",
    "ProviderTimeoutError": "._core.errors",
    "RateLimitError": "._core.errors",
    "RetryPolicy": "._core.retry",
    "Safety": "._core.safety",
    "ServerError": "._core.errors",
    "Submission": "._doc.document",
    "TokenCache": "._io.tokencache",
    "TokenStore": "._io.tokenstore",
    "TransportError": "._core.errors",
    "UnexpectedStatusError": "._core.errors",
    "UnknownIssuerError": "._core.errors",
    "UnknownOutcomeError": "._core.errors",
    "ValidationError": "._core.errors",
    "document_key": "._doc.document",
    "outcome_from_dict": "._core.convert",
    "outcome_to_dict": "._core.convert",
    "result_from_dict": "._core.convert",
    "result_to_dict": "._core.convert",
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
