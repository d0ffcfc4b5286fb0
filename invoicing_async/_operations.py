"""The provider's other operations: one runner and their typed results.

An operation call is built once (:class:`Call`: method, path, body bytes, content type,
query, and the :class:`~._safety.Safety` class it runs under; :mod:`._calls` builds it)
and sent by :func:`perform_answer` or :func:`perform_record` as often as its class
allows: every failure is asked the two questions of :mod:`._safety` (may it have been
processed? may the class re-send it?) and the loop ends with a typed result, the
provider's definite error, or :class:`~invoicing_async.UnknownOutcomeError` saying how
to learn the truth. Attempts, backoff and timeouts come from
:class:`~invoicing_async.RetryPolicy`; the token, the 401 policy and the one request are
the session's (:mod:`._session`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from . import _protocol as proto
from ._errors import (
    ClientStateError,
    CredentialsError,
    DuplicateDocumentError,
    InvoicingError,
    TransportError,
    UnknownOutcomeError,
)
from ._log import operations as log
from ._redact import mentions, redact_error, redact_json, redact_record
from ._safety import (
    Safety,
    certainly_not_processed,
    duplicate_means_success,
    may_resend,
    maybe_processed,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._models import DocumentResult
    from ._outcomes import RetryPolicy
    from ._session import Session

__all__ = ["Call", "OperationResult", "perform_answer", "perform_record"]


T = TypeVar("T")


@attrs.frozen(kw_only=True)
class OperationResult:
    """The answer of an operation whose body is not a document result record.

    Secrets the provider echoed (the API key, tokens) are scrubbed from :attr:`body`.

    .. versionadded:: 0.3.0
    """

    #: The request, e.g. ``POST /Invoice/cancelDeliveryNote``.
    operation: str
    #: The HTTP status answered: 200, 201 …, or 409 when a deduplicated write sent again
    #: after a lost answer was answered with what its earlier attempt left.
    status: int
    #: The answer's JSON body, parsed (``None`` when empty).
    body: Any = attrs.field(default=None, hash=False)
    #: The body's ``mark``, when it has one.
    mark: int | None = None
    #: The body's ``cancellationMark``, when it has one (a cancellation's own mark).
    cancellation_mark: int | None = None
    #: Requests sent for this call.
    attempts: int = 1


@attrs.frozen
class Call:
    """One operation call, ready to send as often as :attr:`safety` allows."""

    method: str
    path: str
    safety: Safety
    #: What the caller does to learn the outcome after an unknown one.
    find_out: str
    body: bytes | None = attrs.field(default=None, repr=False)
    content_type: str | None = None
    params: Mapping[str, str] | None = None

    @property
    def what(self) -> str:
        """``METHOD /path``, for messages."""
        return f"{self.method} {self.path}"


# --- the runner ------------------------------------------------------------------------


async def perform_answer(
    session: Session, call: Call, *, policy: RetryPolicy, timeout: float | None
) -> OperationResult:
    """Run ``call``; its answer as an :class:`OperationResult` (see :func:`_perform`)."""

    def answered(status: int, body: Any, attempts: int) -> OperationResult:
        return OperationResult(
            operation=call.what,
            status=status,
            body=body,
            mark=_integer(body, "mark"),
            cancellation_mark=_integer(body, "cancellationMark"),
            attempts=attempts,
        )

    def ok(response: proto.Response, attempts: int) -> OperationResult:
        body = proto.parse_json_response(response, call.what)
        known = session.known_secrets()
        if mentions(response.body, known):
            body = redact_json(body, known)
        return answered(response.status, body, attempts)

    def duplicate(error: DuplicateDocumentError, attempts: int) -> OperationResult:
        return answered(409, error.body, attempts)

    try:
        return await _perform(session, call, ok, duplicate, policy=policy, timeout=timeout)
    except DuplicateDocumentError as exc:
        # Not a document: the provider's own words say what was done before.
        detail = exc.body.get("message") if exc.body is not None else None
        if isinstance(detail, str) and detail:
            exc.message = f"{call.what}: done before this call: {detail[:500]}"
            exc.args = (exc.message,)
        raise


async def perform_record(
    session: Session, call: Call, *, policy: RetryPolicy, timeout: float | None
) -> DocumentResult:
    """Run ``call``, whose answer is a document result record (see :func:`_perform`)."""

    def ok(response: proto.Response, _attempts: int) -> DocumentResult:
        record = proto.parse_document_response(response)
        known = session.known_secrets()
        return redact_record(record, known) if mentions(response.body, known) else record

    def duplicate(error: DuplicateDocumentError, _attempts: int) -> DocumentResult:
        if error.result is None:  # held for sure, but the record cannot be read
            raise error
        return error.result

    return await _perform(session, call, ok, duplicate, policy=policy, timeout=timeout)


async def _perform(
    session: Session,
    call: Call,
    ok: Callable[[proto.Response, int], T],
    duplicate: Callable[[DuplicateDocumentError, int], T],
    *,
    policy: RetryPolicy,
    timeout: float | None,
) -> T:
    """Send ``call`` until its class says stop.

    ``ok`` reads a 2xx answer; ``duplicate`` reads a 409 that
    :func:`~._safety.duplicate_means_success`. Any other answer is raised as its typed
    error; a failure that may pass is retried while the class allows, the policy has
    attempts and ``timeout`` has time (:class:`_Attempts`).
    """
    session.ensure_usable()
    loop = asyncio.get_running_loop()
    state = _Attempts(call, policy, None if timeout is None else loop.time() + timeout)
    while True:
        attempt_timeout = state.next_timeout(loop.time())
        try:
            response = await session.send_call(
                call.method,
                call.path,
                body=call.body,
                content_type=call.content_type,
                params=call.params,
                timeout=attempt_timeout,
            )
            if 200 <= response.status < 300:
                return ok(response, state.attempts)
            refusal = proto.error_for_response(response, call.what)
            if isinstance(refusal, DuplicateDocumentError) and duplicate_means_success(
                call.safety, after_own_attempt=state.acted
            ):
                redact_error(refusal, session.known_secrets())  # in place
                return duplicate(refusal, state.attempts)
            raise refusal
        except (CredentialsError, ClientStateError):
            raise  # nothing was sent, and nothing can be
        except InvoicingError as exc:
            delay = state.failed(redact_error(exc, session.known_secrets()), loop.time())
        log.info(
            "%s: attempt %d failed (%s); retrying in %.2f s",
            call.what,
            state.attempts,
            state.error,
            delay,
        )
        await asyncio.sleep(delay)


@attrs.define
class _Attempts:
    """The attempts of one call: what was tried, and whether another may follow."""

    call: Call
    policy: RetryPolicy
    deadline: float | None
    attempts: int = 0
    #: An attempt may have been processed by the provider.
    acted: bool = False
    error: InvoicingError | None = None

    def next_timeout(self, now: float) -> float | None:
        """Count an attempt and return its timeout; raise if no time is left for it."""
        timeout = self.policy.attempt_timeout
        if self.deadline is not None:
            remaining = self.deadline - now
            if remaining <= 0:
                raise self._give_up("the call's timeout")
            timeout = remaining if timeout is None else min(timeout, remaining)
        self.attempts += 1
        return timeout

    def failed(self, error: InvoicingError, now: float) -> float:
        """The delay before the next attempt; raise what the call ends with instead."""
        self.error = error
        maybe = maybe_processed(error)
        if not (maybe or certainly_not_processed(error)):  # a definite answer
            if self.acted and self.call.safety is not Safety.READ:
                raise self._unknown("refused after an earlier attempt was lost")
            raise error
        self.acted = self.acted or maybe
        if not may_resend(
            self.call.safety, maybe_sent=maybe, resend_ambiguous=self.policy.resend_ambiguous
        ):
            raise self._unknown(
                f"{self.call.safety.name} is not re-sent after a failure that may have been "
                "processed" + ("" if self.policy.resend_ambiguous else " (resend_ambiguous=False)")
            )
        if self.attempts >= self.policy.max_attempts:
            raise self._give_up("attempts")
        delay = self.policy.delay(self.attempts, retry_after=getattr(error, "retry_after", None))
        if self.deadline is not None and now + delay >= self.deadline:
            raise self._give_up("the call's timeout")
        return delay

    def _give_up(self, why: str) -> InvoicingError:
        """Unknown if a write may have taken effect, else the last error."""
        if self.acted and self.call.safety is not Safety.READ:
            return self._unknown(f"{why} ran out")
        if self.error is None:
            return TransportError(f"{self.call.what}: not sent: {why} ran out", maybe_sent=False)
        return self.error

    def _unknown(self, why: str) -> UnknownOutcomeError:
        call, error = self.call, self.error
        assert error is not None  # noqa: S101  (only after a failed attempt)
        log.warning(
            "%s: outcome unknown after %d attempt(s) (%s): %s", call.what, self.attempts, why, error
        )
        return UnknownOutcomeError(
            f"{call.what}: may or may not have taken effect after {self.attempts} "
            f"attempt(s) ({why}; last: {error}); {call.find_out}",
            last_error=error,
            attempts=self.attempts,
        )


def _integer(body: Any, key: str) -> int | None:
    """``body[key]`` as an integer (an int, or a string of digits), else ``None``."""
    if not isinstance(body, Mapping):
        return None
    value = body.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.strip().isdigit():
        return int(value)
    return None
