"""The exception tree.

Every failure the library reports derives from :class:`InvoicingError`::

    InvoicingError                   .status, .body, .message
    ├── ProviderKeyError             .reason: the provider key cannot be used
    ├── AuthenticationError          401/403 from an operation: .error, .error_description
    │   └── CredentialsError         the token endpoint refused the credentials: nothing sent
    ├── UnknownIssuerError           no credentials for a document's issuer: nothing sent
    ├── ValidationError              400 and other definite refusals; status None: refused locally
    │   ├── CreditRefusedError       the original cannot get this credit: .reason
    │   ├── DocumentNotFoundError    404: the document (or IRIS payment) named is not the issuer's
    │   ├── DocumentTooLargeError    larger than the limit (locally) or 413: .size, .limit
    │   └── InvalidDocumentError     the provider would refuse it (checked locally): .problems
    │       └── AmbiguousDocumentError  a member written twice, with different values: .members
    ├── DuplicateDocumentError       409: already transmitted; .result is the original record
    │   └── PaymentConflictError     409: the transaction is recorded with other details
    ├── ProviderTimeoutError         408: the tax authority's service did not answer in time
    ├── RateLimitError               429: .retry_after
    ├── ServerError                  5xx: .retry_after (503)
    ├── TransportError               no usable HTTP exchange: .maybe_sent
    ├── MalformedResponseError       a response that cannot be read or is oversized
    ├── UnexpectedStatusError        a status the API does not define (404, 405, 415 …)
    ├── ForeignRecordError           a record that belongs to another document: .result
    ├── UnknownOutcomeError          retries ran out: the provider may or may not hold it
    ├── ClientStateError             the client is closed, or bound to another event loop
    └── LedgerError                  the ledger cannot be used (locked, disk full): .reason

Messages are built from status codes and the provider's own ``message`` /
``error_description`` text, never from request headers, so the API key and tokens cannot
appear in them (the client additionally scrubs its own secrets from provider text).

Whether an attempt *may have been processed* by the provider is the question retrying
asks of every failure; the decision core answers it in one place
(:func:`invoicing_async._decision.maybe_processed`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from .models import DocumentResult
    from .problems import Problem, Twin

__all__ = [
    "MISSING_PROVIDER_KEY",
    "AmbiguousDocumentError",
    "AuthenticationError",
    "ClientStateError",
    "CredentialsError",
    "CreditRefusedError",
    "DocumentNotFoundError",
    "DocumentTooLargeError",
    "DuplicateDocumentError",
    "ForeignRecordError",
    "InvalidDocumentError",
    "InvoicingError",
    "LedgerError",
    "MalformedResponseError",
    "PaymentConflictError",
    "ProviderKeyError",
    "ProviderTimeoutError",
    "RateLimitError",
    "ServerError",
    "TransportError",
    "UnexpectedStatusError",
    "UnknownIssuerError",
    "UnknownOutcomeError",
    "ValidationError",
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

    :ivar reason: a stable code: ``missing`` (no key given), ``unreadable``,
        ``secret_key``, ``unsupported_version``, ``expired`` (also raised by
        ``encrypt()`` once no subkey is valid any more), ``revoked``,
        ``no_encryption_subkey``, ``weak_rsa``, ``unsupported_algorithm``,
        ``fingerprint_mismatch``, ``weak_hash`` (its self-signatures use only hashes the
        policy refuses), ``not_yet_valid`` (dated in the future), ``no_self_signature``
        (no user id certification or direct-key signature by the key itself counts) or
        ``malformed`` (a broken key packet, an invalid public point, more misplaced or
        failing signatures than a key carries). The message says what to ask the
        provider for. ``not_decryptable``: the provider answered that it cannot decrypt
        what was encrypted to the key (not the provider's current key); the error then
        has the provider's ``status`` and ``body``.

    .. versionchanged:: 0.2.0 the ``weak_hash`` and ``not_yet_valid`` reasons.
    .. versionchanged:: 0.3.0 the ``no_self_signature``, ``malformed`` and
       ``not_decryptable`` reasons.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        status: int | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body)
        self.reason = reason

    def __repr__(self) -> str:
        return f"ProviderKeyError({self.message!r}, reason={self.reason!r})"


class AuthenticationError(InvoicingError):
    """Credentials were refused: by the token endpoint, or 401/403 from a protected call.

    :ivar error: the OAuth ``error`` code (e.g. ``invalid_request``) when given.
    :ivar error_description: the provider's ``error_description`` when given.
    :ivar reauth_in: for a 401 to a document that the access token may have caused,
        when no new token may be requested yet (at most one per
        :attr:`TokenCache.reauth_cooldown <invoicing_async.TokenCache.reauth_cooldown>`):
        the seconds until one may. ``None`` otherwise. A batch with a ``deadline`` (a
        single call with a ``timeout``) waits that long and sends the document again
        when the time allows.

    .. versionchanged:: 0.3.0 ``reauth_in``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: Mapping[str, Any] | None = None,
        error: str | None = None,
        error_description: str | None = None,
        reauth_in: float | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body)
        self.error = error
        self.error_description = error_description
        self.reauth_in = reauth_in


class CredentialsError(AuthenticationError):
    """The token endpoint refused the client id and API key.

    Wrong credentials, or credentials of another environment. Nothing was sent, and no
    document can be until the credentials are fixed.

    .. versionadded:: 0.2.0
    """


class UnknownIssuerError(InvoicingError):
    """No credentials for the issuer a document names: nothing was sent.

    An :class:`~invoicing_async.IssuerPool` routes each document to the issuer in its
    ``Issuer.Vat`` (or the ``issuer=`` given); this is the answer when the pool's
    credentials resolver does not know that issuer, fails, or the document names none.
    Not a judgement of the document: once the credentials are there, send it again.

    :ivar issuer: the issuer's TIN (``None``: the document names none).

    .. versionadded:: 0.4.0
    """

    def __init__(self, message: str, *, issuer: str | None) -> None:
        super().__init__(message)
        self.issuer = issuer


class ValidationError(InvoicingError):
    """The document or request was refused as invalid (400 and other definite 4xx).

    ``status`` is ``None`` when the library refused it before sending (for example a
    document that cannot be serialised to JSON): nothing reached the provider.
    """


class DocumentNotFoundError(ValidationError):
    """404 from an operation on a document: the provider holds none by what was given.

    A credit's original (its ``mark`` with its ``authenticationCode``), a paid
    document's ``mark``, an IRIS payment's ``endToEndDiasId``: not one of this issuer's.
    A definite answer: nothing was done.

    .. versionadded:: 0.5.0
    """


class CreditRefusedError(ValidationError):
    """400 to ``POST /Invoice/credit``: the original cannot get this credit.

    :ivar reason: ``"correlated_already"`` (a document gets one correlated 5.1 credit:
        credit it further with ``relate_credit=False``), ``"is_a_credit"`` (a credit is
        not credited), ``"cancelled"`` (the original is cancelled), or ``"refused"``
        (any other refusal, such as a member missing). Read from the provider's words:
        ``"refused"`` when they are not recognised.

    .. versionadded:: 0.5.0
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str = "refused",
        status: int | None = 400,
        body: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body)
        self.reason = reason


class DocumentTooLargeError(ValidationError):
    """The document is larger than the limit: a definite refusal of this document.

    Raised before anything is sent when the serialised document (or the bytes given)
    exceeds the client's ``max_document_size`` (``status`` ``None``), and for the
    provider's ``413 Payload Too Large`` or a 400 that says the message is too large.
    Sending it again will not help: the document must be made smaller (split it), or
    the limit raised if the provider takes more.

    :ivar size: the document's size in bytes, when known (``None`` for the provider's
        answer).
    :ivar limit: the limit in bytes it exceeds, when known.

    .. versionadded:: 0.4.0
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: Mapping[str, Any] | None = None,
        size: int | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body)
        self.size = size
        self.limit = limit


class InvalidDocumentError(ValidationError):
    """The provider would refuse the document: found by checking it, before sending.

    Raised (``status`` ``None``: nothing was sent) by a document checked where it
    enters: a :class:`~invoicing_async.Deferral`'s sale (refused at the till, never
    queued), ``outbox.enqueue(..., check=True)``, and a document of
    :func:`invoicing_async.documents.checked` (its outcome in a batch). The message names
    the first problems; ``problems`` has them all.

    :ivar problems: every :class:`~invoicing_async.documents.Problem` the check found
        that the provider refuses a document for (each an error, naming its field).

    .. versionadded:: 0.5.0
    """

    #: What the message says of the document (``{subject}``: ``the document``, ``document 3``).
    _SAYS = "the provider would refuse {subject}"

    def __init__(self, problems: Iterable[Problem], *, subject: str = "the document") -> None:
        self.problems = tuple(problems)
        shown = "; ".join(str(problem) for problem in self.problems[:_SHOWN])
        more = len(self.problems) - _SHOWN
        if more > 0:
            shown += f"; and {more} more"
        super().__init__(f"{self._SAYS.format(subject=subject)}: {shown}")


#: Problems an :class:`InvalidDocumentError`'s message names (all are in ``problems``).
_SHOWN = 5


class AmbiguousDocumentError(InvalidDocumentError):
    """The document holds a member twice, with different values: refused before sending.

    The provider reads names ignoring case, so ``Series`` and ``series`` (or
    ``Summaries.TotalNetAmount`` and ``Summaries.totalNetAmount``) are one member to
    it, as is a name written twice in a JSON text; and of the two values it keeps one
    (its JSON reader's choice: System.Text.Json keeps the last). The library would read
    the document otherwise than the provider: identify it by one series while the
    provider commits it under the other, and then no record it answers would match.
    So it is refused (``status`` ``None``: nothing was sent) wherever a document enters:
    a single call, a batch (its outcome ``rejected``), an outbox's ``enqueue``, a
    deferred sale, the command. The same member written twice with the same value is no
    ambiguity, and is sent as it is.

    :ivar members: each member written twice, as the two paths written
        (``("Series", "series")``; a name written twice in a text: the path twice).
    :ivar problems: an error for each (:func:`invoicing_async.documents.check` finds them
        too), naming the second member and the first in its message; with the check's
        other errors when the document was checked.

    .. versionadded:: 0.5.0
    """

    _SAYS = "{subject} is ambiguous"

    def __init__(
        self,
        problems: Iterable[Problem],
        *,
        members: Iterable[tuple[str, str]] = (),
        subject: str = "the document",
    ) -> None:
        super().__init__(problems, subject=subject)
        self.members = tuple(members)

    @classmethod
    def of(
        cls, twins: Iterable[Twin], *, subject: str = "the document", others: Iterable[Problem] = ()
    ) -> AmbiguousDocumentError:
        """The refusal of a document with these twins (and ``others``: the check's errors)."""
        from .problems import twin_problem  # noqa: PLC0415  (only a refusal needs it)

        twins = tuple(twins)
        problems = [twin_problem(twin) for twin in twins]
        return cls(
            [*problems, *(p for p in others if p not in problems)],
            members=(twin.members for twin in twins),
            subject=subject,
        )


class DuplicateDocumentError(InvoicingError):
    """409: the provider already holds this document (or already did this operation).

    :ivar result: the original :class:`~invoicing_async.DocumentResult` when the body
        carries it, else ``None``. Re-sending a document is the documented way to get its
        result back. For a second cancellation, its ``cancellation_mark`` is the first's.

    .. versionchanged:: 0.3.0 raised by the other operations too (see :doc:`/operations`).
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


class PaymentConflictError(DuplicateDocumentError):
    """409 to ``POST /Invoice/updatePayment``: the transaction is recorded with other details.

    The terminal's ``transactionId`` is registered for the document already, with
    another amount or signature: nothing new was registered.

    :ivar payment_mark: the payment mark recorded for that transaction, when given.

    .. versionadded:: 0.5.0
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = 409,
        body: Mapping[str, Any] | None = None,
        payment_mark: int | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body)
        self.payment_mark = payment_mark


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
    :ivar timed_out: the request ran out of time (connecting, or waiting for the answer),
        rather than failing.

    .. versionchanged:: 0.5.0 ``timed_out``.
    """

    def __init__(self, message: str, *, maybe_sent: bool, timed_out: bool = False) -> None:
        super().__init__(message)
        self.maybe_sent = maybe_sent
        self.timed_out = timed_out

    def __repr__(self) -> str:
        return f"TransportError({self.message!r}, maybe_sent={self.maybe_sent!r})"


class MalformedResponseError(InvoicingError):
    """A response that cannot be used: unreadable or oversized body, unexpected status.

    When ``status`` is 2xx the provider accepted the request, so the document may be
    committed even though its result record could not be read.
    """


class UnexpectedStatusError(InvoicingError):
    """A status the API does not define for the operation (404, 405, 415 …).

    It usually means a wrong base URL or path: the provider did not process the request,
    and the document was not refused either.

    .. versionadded:: 0.2.0
    """


class ForeignRecordError(InvoicingError):
    """The provider answered with a record that belongs to another document.

    Its series, number or internal document id differ from the document sent, so it is
    never taken as this document's result; whether the provider holds this document is
    unknown.

    :ivar result: the foreign record, kept for inspection.
    :ivar mismatches: the fields that differ, e.g. ``("number",)``.

    .. versionadded:: 0.2.0
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        result: DocumentResult | None = None,
        mismatches: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, status=status)
        self.result = result
        self.mismatches = mismatches


class UnknownOutcomeError(InvoicingError):
    """Retries ran out after a failure that may have been committed.

    The provider may or may not hold the document. Sending the identical document again
    later is safe and tells: a provider that holds it answers 409 with its record.

    An operation that is never re-sent after such a failure (a cancellation, an upload:
    see :doc:`/operations`) raises it after its one ambiguous attempt; its message says
    how to learn the outcome (for a cancellation: read the document's status).

    :ivar last_error: the last attempt's error.
    :ivar attempts: requests sent.

    .. versionadded:: 0.2.0
    """

    def __init__(self, message: str, *, last_error: InvoicingError, attempts: int) -> None:
        super().__init__(message, status=last_error.status)
        self.last_error = last_error
        self.attempts = attempts


class ClientStateError(InvoicingError):
    """The client cannot send: it is closed, or bound to another event loop.

    Build a client inside the ``asyncio.run`` (the event loop) that uses it.

    .. versionadded:: 0.2.0
    """


class LedgerError(InvoicingError):
    """The ledger (or outbox) cannot be used; a batch stops with this error.

    Nothing is lost when it is raised: a document is sent only after its ``sending``
    record is durable, and a document whose outcome could not be written stays in
    flight in the ledger, so the next run re-sends it and the provider's duplicate
    detection answers with its record.

    :ivar reason: a stable code: ``locked`` (another process holds the ledger),
        ``write_failed`` (the disk is full, or another write failure),
        ``unreadable`` (not a ledger, or a newer format), ``missing`` (no such file, for
        a ledger opened with ``create=False``), ``closed``, ``lease_lost`` (an outbox
        worker's claim on an entry was taken over by another worker), ``ambiguous``
        (an entry asked for by key alone, which documents of several issuers have),
        ``unavailable`` (the outbox database is down or unreachable: a worker waits for
        it), or ``refused`` (the outbox database refuses the worker: its role or
        password, a permission, a database that does not exist).

    .. versionadded:: 0.2.0
    .. versionchanged:: 0.3.0 the ``missing`` reason.
    .. versionchanged:: 0.4.0 the ``ambiguous`` reason.
    .. versionchanged:: 0.5.0 the ``refused`` reason.
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __repr__(self) -> str:
        return f"LedgerError({self.message!r}, reason={self.reason!r})"


#: The text to use when a document must be encrypted and the client has no provider key:
#: what to set, for clients built in code and for those built by ``from_env``.
MISSING_PROVIDER_KEY = (
    "no provider key to encrypt to: give the client provider_key= (a ProviderKey), or "
    "set INVOICING_PROVIDER_KEY (a key file, pinned by INVOICING_PROVIDER_FINGERPRINT) "
    "for InvoicingClient.from_env(); submit_json sends unencrypted without one"
)

# Tracebacks, reprs and logs name the class users import (invoicing_async.LedgerError),
# not this private module. The methods keep this module's name (the docs find the tree
# drawn above through them).
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type):
        _value.__module__ = "invoicing_async"
del _name, _value
