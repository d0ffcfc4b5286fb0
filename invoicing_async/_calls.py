"""Operation calls built from what a client method is given, ready for the runner.

A :class:`~._operations.Call` holds the bytes to send, built once so that every attempt
sends the same: a JSON payload serialised with the package's one encoder (or the
caller's bytes unchanged), a file read once (off the event loop) and framed as
``multipart/form-data``; the path with its parameters, the query (``mark`` included),
and the :class:`~._safety.Safety` class the call runs under: the table's, tightened as
the caller asks (:func:`~._safety.tighten`).
"""

from __future__ import annotations

import asyncio
import pathlib
import secrets
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import attrs

from . import _protocol as proto
from ._documents import dumps
from ._errors import ValidationError
from ._operations import Call, perform_answer, perform_record
from ._safety import OPERATIONS, default_safety, operation_for, tighten

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping

    from ._models import DocumentResult
    from ._operations import OperationResult
    from ._outcomes import RetryPolicy
    from ._safety import Safety
    from ._session import Session

    FileInput = bytes | bytearray | memoryview | str | os.PathLike[str]

__all__ = [
    "Options",
    "Payload",
    "Upload",
    "free_call",
    "json_body",
    "multipart_body",
    "named_call",
    "read_file",
    "run",
    "run_for_record",
    "run_free",
]

_FIND_OUT_UNKNOWN = "ask the provider whether it took effect before sending it again"


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
