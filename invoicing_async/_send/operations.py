"""The provider's other operations: a call built once, run by the decision core.

An operation call is built once from what a client method is given (:class:`Operation`:
method, path, body bytes, content type, query, and the :class:`~._safety.Safety` class
it runs under — the table's, tightened as the caller asks), so that every attempt sends
the same bytes: a JSON payload serialised with the package's one encoder (or the
caller's bytes unchanged), a file read once (off the event loop) and framed as
``multipart/form-data``. :func:`run`, :func:`run_for_record` and :func:`run_free` then
send it as often as its class allows: the decision core (:mod:`._decision`) decides,
the one loop (:func:`~._attempts.drive`) drives, and the ending becomes the call's typed
result, the provider's definite error, or :class:`~invoicing_async.UnknownOutcomeError`
saying how to learn the truth. Attempts, backoff and timeouts come from
:class:`~invoicing_async.RetryPolicy`; the token, the 401 policy and the one request are
the issuer's channel's (:mod:`._channel`).
"""

from __future__ import annotations

import asyncio
import pathlib
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import quote

import attrs

from invoicing_async._core import calls
from invoicing_async._core import protocol as proto
from invoicing_async._core.errors import InvoicingError, ValidationError
from invoicing_async._core.log import operations as log
from invoicing_async._core.machine import Attempts, End
from invoicing_async._core.redact import redact_json, redact_record
from invoicing_async._core.safety import OPERATIONS, Safety, default_safety, operation_for, tighten
from invoicing_async._core.table import done_before
from invoicing_async._doc.document import dumps
from invoicing_async._io.loop import Named, drive

if TYPE_CHECKING:
    import os
    from collections.abc import Callable

    from invoicing_async._core.models import DocumentResult
    from invoicing_async._core.retry import RetryPolicy
    from invoicing_async._io.channel import Channel

    FileInput = bytes | bytearray | memoryview | str | os.PathLike[str]

__all__ = [
    "Operation",
    "OperationResult",
    "Options",
    "Payload",
    "Upload",
    "ending",
    "free_call",
    "json_body",
    "multipart_body",
    "named_call",
    "perform",
    "read_file",
    "run",
    "run_for_record",
    "run_free",
]

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
class Operation:
    """One operation call, ready to send as often as :attr:`safety` allows."""

    method: str
    path: str
    safety: Safety
    #: What the caller does to learn the outcome after an unknown one.
    find_out: str
    body: bytes | None = attrs.field(default=None, repr=False)
    content_type: str | None = None
    params: Mapping[str, str] | None = None
    #: The operation's name in the table (``cancel_delivery_note``), or ``request``: its
    #: span's and its metrics' name (the path may hold a mark).
    name: str = "request"

    @property
    def what(self) -> str:
        """``METHOD /path``, for messages."""
        return f"{self.method} {self.path}"


# --- the runner ------------------------------------------------------------------------


async def perform_answer(
    channel: Channel, call: Operation, *, policy: RetryPolicy, timeout: float | None
) -> OperationResult:
    """Run ``call``; its answer as an :class:`OperationResult` (see :func:`perform`)."""

    def answered(status: int, body: Any, attempts: int) -> OperationResult:
        return OperationResult(
            operation=call.what,
            status=status,
            body=body,
            mark=_integer(body, "mark"),
            cancellation_mark=_integer(body, "cancellationMark"),
            attempts=attempts,
        )

    def ok(response: proto.Response) -> tuple[int, Any]:
        body = proto.parse_json_response(response, call.what)
        if channel.may_echo(response.body):
            body = redact_json(body, channel.known_secrets())
        return response.status, body

    try:
        status, body, attempts = await perform(
            channel, call, ok, policy=policy, timeout=timeout, needs_record=False
        )
    except InvoicingError as exc:
        done_before(exc, call.what)  # not a document: the provider's own words say what
        raise
    return answered(status, body, attempts)


async def perform_record(
    channel: Channel, call: Operation, *, policy: RetryPolicy, timeout: float | None
) -> DocumentResult:
    """Run ``call``, whose answer is a document result record (see :func:`perform`)."""

    def ok(response: proto.Response) -> tuple[int, DocumentResult]:
        record = proto.parse_document_response(response)
        if channel.may_echo(response.body):
            record = redact_record(record, channel.known_secrets())
        return response.status, record

    _status, record, _attempts = await perform(
        channel, call, ok, policy=policy, timeout=timeout, needs_record=True
    )
    return record


async def perform(
    channel: Channel,
    call: Operation,
    ok: Callable[[proto.Response], tuple[int, T]],
    *,
    policy: RetryPolicy,
    timeout: float | None,
    needs_record: bool,
) -> tuple[int, T, int]:
    """Send ``call`` until the decision core ends it: ``(status, answer, attempts)``.

    ``ok`` reads a 2xx answer. A 409 that the core takes for this call's own commit is
    answered with its body (``needs_record``: its record, else the 409 is raised); any
    other ending raises its error.
    """
    end = await ending(channel, call, ok, policy=policy, timeout=timeout, needs_record=needs_record)
    result = end.result
    if isinstance(result, _Answered):  # only a 2xx ends with one
        return result.status, result.value, end.attempts
    # A 409 the core took for this call's own earlier attempt: what it left.
    commit = end.commit
    if commit is not None and needs_record and result is not None:
        return 409, result, end.attempts
    if commit is not None and not needs_record:
        return 409, commit.body, end.attempts  # type: ignore[return-value]
    assert end.error is not None  # noqa: S101  (every other ending carries one)
    raise end.error


async def ending(
    channel: Channel,
    call: Operation,
    ok: Callable[[proto.Response], tuple[int, T]],
    *,
    policy: RetryPolicy,
    timeout: float | None,
    needs_record: bool,
) -> End:
    """How ``call`` ends, attempted as the decision core says (the runner's one loop)."""
    channel.ensure_usable()
    loop = asyncio.get_running_loop()
    attempts = Attempts(
        call.safety,
        policy,
        deadline=None if timeout is None else loop.time() + timeout,
        needs_record=needs_record,
        subject=call.what,
        find_out=call.find_out,
    )

    async def attempt(attempt_timeout: float | None) -> _Answered[T]:
        response = await channel.send_call(
            call.method,
            call.path,
            body=call.body,
            content_type=call.content_type,
            params=call.params,
            timeout=attempt_timeout,
        )
        status, answer = ok(response)
        return _Answered(status, answer)

    fields = {"invoicing.operation": call.name, "invoicing.safety": call.safety.name.lower()}
    with calls.calling(f"invoicing.{call.name}", "operation", fields) as made:
        end = await drive(
            attempts, attempt, subject=Named(call.what, {"invoicing.operation": call.what}), log=log
        )
        made.ended(end)
    return end


@attrs.frozen
class _Answered(Generic[T]):
    """A 2xx answer, read: its status and what ``ok`` made of it."""

    status: int
    value: T


# --- building calls ---------------------------------------------------------------------

_FIND_OUT_UNKNOWN = "ask the provider whether it took effect before sending it again"


def named_call(
    name: str,
    *,
    path_params: Mapping[str, str] | None = None,
    body: bytes | None = None,
    content_type: str | None = None,
    params: Mapping[str, str] | None = None,
    safety: Safety | None = None,
    declared: Safety | None = None,
) -> Operation:
    """The call of operation ``name`` (a key of :data:`~._safety.OPERATIONS`).

    ``declared``: the class this call's request makes it (a credit's, decided by
    :func:`~._safety.credit_safety`) instead of the table's.

    :raises ValueError: ``safety`` would loosen the operation's class, or a path
        parameter is empty.
    """
    spec = OPERATIONS[name]
    values = {}
    for key, value in (path_params or {}).items():
        if not str(value):
            raise ValueError(f"{key} must not be empty")
        values[key] = quote(str(value), safe="")
    return Operation(
        spec.method,
        spec.path.format(**values),
        tighten(declared or spec.safety, safety),
        spec.find_out,
        body,
        content_type,
        params,
        name,
    )


def free_call(
    method: str,
    path: str,
    *,
    body: bytes | None,
    content_type: str | None,
    params: Mapping[str, str] | None,
    safety: Safety | None,
) -> Operation:
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
        return Operation(method, path, chosen, _FIND_OUT_UNKNOWN, body, content_type, params)
    return Operation(
        method,
        path,
        tighten(spec.safety, safety),
        spec.find_out,
        body,
        content_type,
        params,
        spec.name,
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
    channel: Channel, name: str, given: Payload | Upload, options: Options
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
    return await perform_answer(channel, call, policy=options.policy, timeout=options.timeout)


async def run_for_record(
    channel: Channel, name: str, given: Payload, options: Options
) -> DocumentResult:
    """Call operation ``name``, whose answer is a document result record."""
    call = named_call(name, body=given.encoded(), params=given.query(), safety=options.safety)
    return await perform_record(channel, call, policy=options.policy, timeout=options.timeout)


async def run_free(
    channel: Channel, method: str, path: str, given: Payload, options: Options
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
    return await perform_answer(channel, call, policy=options.policy, timeout=options.timeout)


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
