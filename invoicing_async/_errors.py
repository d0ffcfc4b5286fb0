"""The exception tree.

Every failure the library reports derives from :class:`InvoicingError`::

    InvoicingError                   .status, .body, .message
    ├── ProviderKeyError             .reason: the provider key cannot be used (raised on load)
    ├── AuthenticationError          401/403 or a refused token request: .error, .error_description
    ├── ValidationError              400 and other definite refusals; status None: refused locally
    ├── DuplicateDocumentError       409: already transmitted; .result is the original record
    ├── ProviderTimeoutError         408: the tax authority's service did not answer in time
    ├── RateLimitError               429: .retry_after
    ├── ServerError                  5xx: .retry_after (503)
    ├── TransportError               no usable HTTP exchange: .maybe_sent
    └── MalformedResponseError       a response that cannot be read, is oversized or unexpected

Messages are built from status codes and the provider's own ``message`` /
``error_description`` text, never from request headers, so the API key and tokens cannot
appear in them (the client additionally scrubs its own secrets from provider text).

Whether an attempt *may have been committed* by the provider is the question bulk
submission asks of every failure; :func:`may_have_committed` answers it in one place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._models import DocumentResult

__all__ = [
    "AuthenticationError",
    "DuplicateDocumentError",
    "InvoicingError",
    "MalformedResponseError",
    "ProviderKeyError",
    "ProviderTimeoutError",
    "RateLimitError",
    "ServerError",
    "TransportError",
    "ValidationError",
    "may_have_committed",
]


class InvoicingError(Exception):
    """Base class of every error raised by :mod:`invoicing_async`.

    :ivar message: a human sentence saying what went wrong.
    :ivar status: the HTTP status of the response, or ``None`` when there was none.
    :ivar body: the provider's parsed error body (a mapping), or ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.body = body

    def __str__(self) -> str:
        if self.status is None:
            return self.message
        return f"{self.message} (HTTP {self.status})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions with keyword-only arguments do not pickle by default; process pools
        # and multiprocessing-based test runners need them to.
        return (_rebuild, (type(self), self.__dict__.copy()))


def _rebuild(cls: type[InvoicingError], state: dict[str, Any]) -> InvoicingError:
    error = cls.__new__(cls)
    Exception.__init__(error, state.get("message", ""))
    error.__dict__.update(state)
    return error


class ProviderKeyError(InvoicingError):
    """The provider's public key cannot be used for encryption.

    :ivar reason: a stable code: ``unreadable``, ``secret_key``, ``unsupported_version``,
        ``expired``, ``revoked``, ``no_encryption_subkey``, ``weak_rsa``,
        ``unsupported_algorithm`` or ``fingerprint_mismatch``.
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __repr__(self) -> str:
        return f"ProviderKeyError({self.message!r}, reason={self.reason!r})"


class AuthenticationError(InvoicingError):
    """Credentials were refused: by the token endpoint, or 401/403 from a protected call.

    :ivar error: the OAuth ``error`` code (e.g. ``invalid_request``) when given.
    :ivar error_description: the provider's ``error_description`` when given.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: Mapping[str, Any] | None = None,
        error: str | None = None,
        error_description: str | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body)
        self.error = error
        self.error_description = error_description


class ValidationError(InvoicingError):
    """The document or request was refused as invalid (400 and other definite 4xx).

    ``status`` is ``None`` when the library refused it before sending (for example a
    document that cannot be serialised to JSON): nothing reached the provider.
    """


class DuplicateDocumentError(InvoicingError):
    """409: the provider already holds this document.

    :ivar result: the original :class:`~invoicing_async.DocumentResult` when the body
        carries it, else ``None``. Re-sending a document is the documented way to get its
        result back.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = 409,
        body: Mapping[str, Any] | None = None,
        result: DocumentResult | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body)
        self.result = result


class ProviderTimeoutError(InvoicingError):
    """408: the tax authority's service timed out; the document may or may not be recorded."""


class _RetryAfterError(InvoicingError):
    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body)
        self.retry_after = retry_after


class RateLimitError(_RetryAfterError):
    """429: too many requests. :ivar retry_after: seconds the provider asked to wait, if any."""


class ServerError(_RetryAfterError):
    """5xx from the provider. :ivar retry_after: seconds to wait (``Retry-After``), if any."""


class TransportError(InvoicingError):
    """No usable HTTP exchange: connection refused or reset, timeout, TLS failure.

    :ivar maybe_sent: ``False`` only when the request certainly did not reach the provider
        (for example the connection was refused); ``True`` when it may have been processed.
    """

    def __init__(self, message: str, *, maybe_sent: bool) -> None:
        super().__init__(message)
        self.maybe_sent = maybe_sent

    def __repr__(self) -> str:
        return f"TransportError({self.message!r}, maybe_sent={self.maybe_sent!r})"


class MalformedResponseError(InvoicingError):
    """A response that cannot be used: unreadable or oversized body, unexpected status.

    When ``status`` is 2xx the provider accepted the request, so the document may be
    committed even though its result record could not be read.
    """


def may_have_committed(error: BaseException) -> bool:
    """Say whether the provider may hold the document despite ``error``.

    True for failures after the request may have been processed (reset after sending, read
    timeout, 408, 5xx, an unreadable 2xx). False for definite answers (400, 401, 409, 429)
    and for requests that never left (connection refused, refused locally).
    """
    if isinstance(error, TransportError):
        return error.maybe_sent
    if isinstance(error, (ProviderTimeoutError, ServerError)):
        return True
    if isinstance(error, MalformedResponseError):
        return error.status is None or 200 <= error.status < 300
    return False
