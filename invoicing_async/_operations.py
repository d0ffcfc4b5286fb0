"""The provider's other operations: request bodies, one runner, typed results.

An operation call is built once (:class:`Call`: method, path, body bytes, content type,
query, and the :class:`~._safety.Safety` class it runs under) and sent by
:func:`perform_answer` or :func:`perform_record` as often as its class allows: every
failure is asked the two questions of :mod:`._safety` (may it have been processed? may
the class re-send it?) and the loop ends with a typed result, the provider's definite
error, or :class:`~invoicing_async.UnknownOutcomeError` saying how to learn the truth.
Attempts, backoff and timeouts come from :class:`~invoicing_async.RetryPolicy`; the
token, the 401 policy and the one request are the session's (:mod:`._session`).

A body is built once and re-sent byte-identical: a JSON payload is serialised with the
package's one encoder, a file is read once and framed as ``multipart/form-data``.
"""

from __future__ import annotations

import asyncio
import logging
import pathlib
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import attrs

from . import _protocol as proto
from ._documents import dumps
from ._errors import (
    ClientStateError,
    CredentialsError,
    DuplicateDocumentError,
    InvoicingError,
    TransportError,
    UnknownOutcomeError,
    ValidationError,
)
from ._redact import mentions, redact_error, redact_json, redact_record
from ._safety import (
    OPERATIONS,
    Safety,
    certainly_not_processed,
    default_safety,
    duplicate_means_success,
    may_resend,
    maybe_processed,
    operation_for,
    tighten,
)

if TYPE_CHECKING:
    import os
    from collections.abc import Callable

    from ._models import DocumentResult
    from ._outcomes import RetryPolicy
    from ._session import Session

    FileInput = bytes | bytearray | memoryview | str | os.PathLike[str]

__all__ = [
    "Call",
    "OperationResult",
    "Options",
    "Payload",
    "Upload",
    "free_call",
    "json_body",
    "multipart_body",
    "named_call",
    "perform_answer",
    "perform_record",
    "read_file",
    "run",
    "run_for_record",
    "run_free",
]

log = logging.getLogger("invoicing_async.operations")

T = TypeVar("T")

_FIND_OUT_UNKNOWN = "ask the provider whether it took effect before sending it again"


@attrs.frozen(kw_only=True)
class OperationResult:
    """The answer of an operation whose body is not a document result record.

    Secrets the provider echoed (the API key, tokens) are scrubbed from :attr:`body`.

    .. versionadded:: 0.2.0
    """

    #: The request, e.g. ``POST /Invoice/cancelDeliveryNote``.
    operation: str
    #: The HTTP status answered: 200, 201 …, or 409 when a deduplicated write sent again
    #: after a lost answer was answered with what its earlier attempt left.
    status: int
    #: The answer's JSON body, parsed (``None`` when empty).
    body: Any = attrs.field(default=None, eq=False)
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


def named_call(
    name: str,
    *,
    path_params: Mapping[str, str] | None = None,
    body: bytes | None = None,
    content_type: str | None = None,
    params: Mapping[str, str] | None = None,
    safety: Safety | None = None,
) -> Call:
    """The call of operation ``name`` (a key of :data:`~._safety.OPERATIONS`).

    :raises ValueError: ``safety`` would loosen the operation's class, or a path
        parameter is empty.
    """
    spec = OPERATIONS[name]
    values = {}
    for key, value in (path_params or {}).items():
        if not str(value):
            raise ValueError(f"{key} must not be empty")
        values[key] = quote(str(value), safe="")
    return Call(
        spec.method,
        spec.path.format(**values),
        tighten(spec.safety, safety),
        spec.find_out,
        body,
        content_type,
        params,
    )


def free_call(
    method: str,
    path: str,
    *,
    body: bytes | None,
    content_type: str | None,
    params: Mapping[str, str] | None,
    safety: Safety | None,
) -> Call:
    """A call of ``method path``: the table's class if it knows the operation.

    An operation the table does not know runs under ``safety``, by default the safest
    class for its method (:func:`~._safety.default_safety`).

    :raises ValueError: ``path`` is not a path on the provider, or ``safety`` would
        loosen a known operation's class.
    """
    method = method.upper()
    proto.check_path(path)
    spec = operation_for(method, path)
    if spec is None:
        chosen = safety if safety is not None else default_safety(method)
        return Call(method, path, chosen, _FIND_OUT_UNKNOWN, body, content_type, params)
    return Call(
        method, path, tighten(spec.safety, safety), spec.find_out, body, content_type, params
    )


# --- what the client's methods give -----------------------------------------------------


@attrs.frozen
class Options:
    """How a call runs: a stricter class than declared (or ``None``), retries, timeout."""

    safety: Safety | None
    policy: RetryPolicy
    timeout: float | None


@attrs.frozen
class Payload:
    """A JSON operation's input: the body (a JSON-able value, bytes, or ``None``)."""

    body: Any = attrs.field(repr=False)
    params: Mapping[str, str] | None = None
    #: Sent as the ``mark`` query parameter.
    mark: int | str | None = None
    path_params: Mapping[str, str] | None = None

    def query(self) -> Mapping[str, str] | None:
        """``params`` with ``mark`` in it, when given."""
        if self.mark is None:
            return self.params
        return {**(self.params or {}), "mark": str(self.mark)}

    def encoded(self) -> bytes | None:
        """The body's bytes (``None``: no body)."""
        return None if self.body is None else json_body(self.body)


@attrs.frozen
class Upload:
    """A file operation's input, sent as ``multipart/form-data``."""

    file: FileInput = attrs.field(repr=False)
    content_type: str
    filename: str | None = None
    fields: Mapping[str, str] | None = None
    params: Mapping[str, str] | None = None


async def run(
    session: Session, name: str, given: Payload | Upload, options: Options
) -> OperationResult:
    """Call operation ``name`` (a key of :data:`~._safety.OPERATIONS`) for its answer."""
    if isinstance(given, Upload):
        data, path_name = await read_file(given.file)
        body, content_type = multipart_body(
            data=data,
            filename=given.filename or path_name or "file",
            content_type=given.content_type,
            fields=given.fields,
        )
        call = named_call(
            name,
            body=body,
            content_type=content_type,
            params=given.params,
            safety=options.safety,
        )
    else:
        call = named_call(
            name,
            path_params=given.path_params,
            body=given.encoded(),
            params=given.query(),
            safety=options.safety,
        )
    return await perform_answer(session, call, policy=options.policy, timeout=options.timeout)


async def run_for_record(
    session: Session, name: str, given: Payload, options: Options
) -> DocumentResult:
    """Call operation ``name``, whose answer is a document result record."""
    call = named_call(name, body=given.encoded(), params=given.query(), safety=options.safety)
    return await perform_record(session, call, policy=options.policy, timeout=options.timeout)


async def run_free(
    session: Session, method: str, path: str, given: Payload, options: Options
) -> OperationResult:
    """Call ``method path``, known to the table or not (see :func:`free_call`)."""
    call = free_call(
        method,
        path,
        body=given.encoded(),
        content_type=None,
        params=given.query(),
        safety=options.safety,
    )
    return await perform_answer(session, call, policy=options.policy, timeout=options.timeout)


# --- bodies ----------------------------------------------------------------------------


def json_body(payload: Any) -> bytes:
    """``payload`` as compact UTF-8 JSON, or its bytes unchanged.

    :raises ValidationError: (``status`` ``None``) it is not JSON-serialisable.
    """
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    try:
        return dumps(payload)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"the request body cannot be serialised to JSON: {exc}") from None


async def read_file(file: FileInput) -> tuple[bytes, str | None]:
    """The file's bytes and its name (``None`` for bytes), read off the event loop.

    :raises ValidationError: (``status`` ``None``) the file cannot be read.
    """
    if isinstance(file, (bytes, bytearray, memoryview)):
        return bytes(file), None
    path = pathlib.Path(file)
    try:
        data = await asyncio.to_thread(path.read_bytes)
    except OSError as exc:
        raise ValidationError(
            f"cannot read the file {path.name!r}: {exc.strerror or type(exc).__name__}"
        ) from None
    return data, path.name


def multipart_body(
    *,
    data: bytes,
    filename: str,
    content_type: str,
    field: str = "file",
    fields: Mapping[str, str] | None = None,
) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body: ``fields`` as text parts, then the file.

    Returns the body and its ``Content-Type`` (with the boundary). Names are escaped as
    browsers do (``"``, CR and LF percent-encoded).

    :raises ValueError: ``content_type`` holds a line break.
    """
    if "\r" in content_type or "\n" in content_type:
        raise ValueError("content_type must be one line")
    boundary = "invoicing-async-" + secrets.token_hex(16)
    texts = [(str(name), str(value).encode("utf-8")) for name, value in (fields or {}).items()]
    while any(boundary.encode("ascii") in part for part in (data, *(v for _, v in texts))):
        boundary = "invoicing-async-" + secrets.token_hex(16)  # pragma: no cover - 2**-128
    delimiter = f"--{boundary}\r\n".encode("ascii")
    chunks: list[bytes] = []
    for name, value in texts:
        disposition = f'Content-Disposition: form-data; name="{_escaped(name)}"\r\n\r\n'
        chunks += [delimiter, disposition.encode("utf-8"), value, b"\r\n"]
    disposition = (
        f'Content-Disposition: form-data; name="{_escaped(field)}"; '
        f'filename="{_escaped(filename)}"\r\nContent-Type: {content_type}\r\n\r\n'
    )
    chunks += [delimiter, disposition.encode("utf-8"), data, b"\r\n"]
    chunks.append(f"--{boundary}--\r\n".encode("ascii"))
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


def _escaped(name: str) -> str:
    return name.replace("\r", "%0D").replace("\n", "%0A").replace('"', "%22")


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
