"""The formats of the library's records: one converter per format, as cattrs' ``preconf``.

* the provider's JSON (:func:`make_converter`, :data:`JSON`): its result records, read
  with strict booleans, integers from ints or digit strings, timestamps in ISO 8601 with
  or without milliseconds and offset, statuses kept as text, unknown keys in ``extra``;
* stored dicts (:func:`make_stored_converter`, :data:`STORED`): what users, the command
  line, the ledger and the outbox write and read (:func:`result_to_dict`,
  :func:`error_to_dict`, :func:`outcome_to_dict` and their readers): plain JSON-able
  dicts, stable across releases.

Each converter registers its hooks per type; the hooks are this module's functions,
which the package calls directly where it writes or reads one per document (a
converter's dispatch would cost a call each). The third format, the typed documents'
JSON, is :mod:`invoicing_async._doc.typedjson`'s: the core imports nothing optional.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn

from invoicing_async._core import errors as _errors

from .models import DocumentResult, DocumentStatus
from .outcomes import Outcome, OutcomeStatus
from .problems import Problem, Severity

__all__ = [
    "JSON",
    "RECORDED_PROBLEMS",
    "STORED",
    "causes",
    "error_from_dict",
    "error_to_dict",
    "format_timestamp",
    "make_converter",
    "make_stored_converter",
    "outcome_from_dict",
    "outcome_to_dict",
    "parse_timestamp",
    "result_from_dict",
    "result_from_json",
    "result_to_dict",
    "result_to_json",
    "structure_str_or_int",
]

_ISO_RE = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d)(?::(\d\d)(?:[.,](\d{1,9}))?)?"
    r"\s*(Z|z|[+-]\d\d(?::?\d\d)?)?"
)


def parse_timestamp(text: str) -> dt.datetime:
    """Parse an ISO 8601 timestamp into an aware datetime.

    Accepts ``Z`` or an offset, any number of fraction digits (.NET writes seven) and no
    fraction at all. A timestamp without an offset is read as UTC, which is what the
    provider means by it.
    """
    match = _ISO_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not an ISO 8601 timestamp: {text[:40]!r}")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    tz = dt.timezone.utc
    if offset and offset not in ("Z", "z"):
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        minutes = int(digits[:2]) * 60 + int(digits[2:4] or "0")
        tz = dt.timezone(sign * dt.timedelta(minutes=minutes))
    return dt.datetime(
        int(year),
        int(month),
        int(day),
        int(hour),
        int(minute),
        int(second or 0),
        micro,
        tzinfo=tz,
    )


def format_timestamp(value: dt.datetime) -> str:
    """Format an aware datetime as the provider writes it: UTC, milliseconds, ``Z``.

    A naive datetime is refused: a POS clock in local time silently read as UTC would
    shift every invoice by hours.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("timestamps must be timezone-aware (e.g. datetime.now(timezone.utc))")
    utc = value.astimezone(dt.timezone.utc)
    # strftime's %Y does not pad years before 1000 on every platform: format by hand.
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:"
        f"{utc.second:02d}.{utc.microsecond // 1000:03d}Z"
    )


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _structure_bool(value: Any, _: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise TypeError(f"expected a boolean, got {type(value).__name__}")


def _structure_int(value: Any, _: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise TypeError(f"expected an integer, got {type(value).__name__}")


def _structure_str(value: Any, _: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"expected a string, got {type(value).__name__}")


def structure_str_or_int(value: Any, _: Any) -> str | int | None:
    """A cattrs hook: a string or an integer (not a boolean) as given."""
    if value is None or (isinstance(value, (str, int)) and not isinstance(value, bool)):
        return value
    raise TypeError(f"expected a string or integer, got {type(value).__name__}")


def _structure_datetime(value: Any, _: Any) -> dt.datetime:
    if not isinstance(value, str):
        raise TypeError(f"expected a timestamp string, got {type(value).__name__}")
    return parse_timestamp(value)


# Fields the provider sends, with their wire names; raw_status and extra are ours.
_WIRE = {
    field.name: _camel(field.name)
    for field in attrs.fields(DocumentResult)
    if field.name not in ("status", "raw_status", "extra")
}
_WIRE_LOWER = {wire.lower(): name for name, wire in _WIRE.items()}
_AUTHORITY = "authority_data_response"


def make_converter() -> cattrs.Converter:
    """The provider's JSON: its records (:class:`DocumentResult`) and their values.

    Strict booleans (``"false"`` is not true), integers from ints or digit strings,
    timestamps in ISO 8601 with or without milliseconds and offset (written as the
    provider writes them), statuses kept as text, unknown keys kept in ``extra``; names
    matched in any case. :func:`result_from_json` and :func:`result_to_json` are its
    record's hooks, called directly where a record is read or written per document.
    """
    converter = cattrs.Converter(forbid_extra_keys=False)
    converter.register_structure_hook(bool, _structure_bool)
    converter.register_structure_hook(int, _structure_int)
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(str | int | None, structure_str_or_int)
    converter.register_structure_hook(dt.datetime, _structure_datetime)
    converter.register_unstructure_hook(dt.datetime, format_timestamp)
    converter.register_structure_hook(DocumentResult, lambda data, _: result_from_json(data))
    converter.register_unstructure_hook(DocumentResult, result_to_json)
    return converter


def result_from_json(data: dict[str, Any]) -> DocumentResult:
    """Build a :class:`DocumentResult` from the provider's record.

    Keys match case-insensitively (a provider on .NET may send ``Mark``). The authority's
    answer is read from ``authorityDataResponse``, else from the first other key ending in
    ``Response`` (the real service names it after the tax platform). Raises ``ValueError``
    or a cattrs validation error on a value of the wrong type.
    """
    fields: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    status_text: Any = None
    for key, value in data.items():
        name = _WIRE_LOWER.get(key.lower()) if isinstance(key, str) else None
        if name is not None and name not in fields:
            fields[name] = value
        elif isinstance(key, str) and key.lower() == "status":
            status_text = value
        else:
            extra[str(key)] = value
    if fields.get(_AUTHORITY) is None:
        for key in list(extra):
            if key.lower().endswith("response"):
                fields[_AUTHORITY] = extra.pop(key)
                break
    fields = {name: value for name, value in fields.items() if value is not None}
    status: DocumentStatus | None = None
    raw_status: str | None = None
    if status_text is not None:
        raw_status = str(status_text)  # kept as sent, known or not
        try:
            status = DocumentStatus(raw_status)
        except ValueError:
            status = DocumentStatus.UNKNOWN
    fields["status"] = status
    fields["raw_status"] = raw_status
    fields["extra"] = extra
    return _record(fields, DocumentResult)


# Read directly rather than through a generated function: several times faster, and the
# ledger writes one record per document. The two others are converted on their own.
_PLAIN = tuple((n, w) for n, w in _WIRE.items() if n not in ("date_issued", _AUTHORITY))


def result_to_json(result: DocumentResult) -> dict[str, Any]:
    """The record as the provider writes it: camelCase keys, timestamps with ``Z``.

    ``None`` fields are left out; ``extra`` keys are written back unchanged.
    """
    out = {wire: value for name, wire in _PLAIN if (value := getattr(result, name)) is not None}
    if result.date_issued is not None:
        out[_WIRE["date_issued"]] = format_timestamp(result.date_issued)
    if result.authority_data_response is not None:
        out[_WIRE[_AUTHORITY]] = JSON.unstructure(result.authority_data_response)
    if result.raw_status is not None:
        out["status"] = result.raw_status
    elif result.status is not None:
        out["status"] = result.status.value
    out.update(result.extra)
    return out


#: The provider's JSON (:func:`make_converter`).
JSON = make_converter()
# Keys are matched and renamed by result_from_json before the generated function runs.
_record = make_dict_structure_fn(DocumentResult, JSON)


def result_to_dict(result: DocumentResult) -> dict[str, Any]:
    """A result record as a plain JSON-able dict: the provider's own camelCase record.

    Timestamps are ISO 8601 strings (UTC, milliseconds, ``Z``), ``None`` fields are left
    out, ``extra`` keys are written back unchanged, and ``status`` is the provider's text.
    :func:`result_from_dict` reads it back into an equal record.

    .. versionadded:: 0.2.0
    """
    return result_to_json(result)


def result_from_dict(data: Mapping[str, Any]) -> DocumentResult:
    """Read a record written by :func:`result_to_dict` (or sent by the provider).

    :raises ValueError: a value of the wrong type (``"mark": true``, a date that is not
        ISO 8601).

    .. versionadded:: 0.2.0
    """
    try:
        return result_from_json(dict(data))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a result record: {exc}") from None
    except cattrs.BaseValidationError as exc:
        raise ValueError(f"not a result record: {'; '.join(causes(exc))}") from None


def causes(exc: BaseException, where: str = "", cls: Any = None) -> list[str]:
    """The messages of a cattrs validation error's innermost causes, each at its field.

    ``Details[1].UnitPrice: not a number: 'abc'``: the path is made of the notes cattrs
    puts on each cause (an attribute of a class, an index of a list), an attribute by
    the name its metadata's ``wire`` gives it (the JSON's), else its own.
    """
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, cattrs.AttributeValidationNote):
            found = getattr(attrs.fields(cls), note.name, None) if attrs.has(cls) else None
            name = note.name if found is None else found.metadata.get("wire", note.name)
            where = f"{where}.{name}" if where else name
        elif isinstance(note, cattrs.IterableValidationNote):
            where = f"{where}[{note.index}]"
    nested = getattr(exc, "exceptions", None)
    if not nested:
        message = str(exc)[:200]
        return [f"{where}: {message}" if where else message]
    owner = getattr(exc, "cl", None)
    return [text for inner in nested for text in causes(inner, where, owner)]


#: Attributes of errors written beside type, message and status (all JSON-able).
_ERROR_FIELDS = (
    "reason", "maybe_sent", "retry_after", "attempts", "mismatches", "size", "limit",
    "members", "payment_mark",
)  # fmt: skip
_ERROR_TYPES: dict[str, type[_errors.InvoicingError]] = {
    name: cls
    for name, cls in vars(_errors).items()
    if isinstance(cls, type) and issubclass(cls, _errors.InvoicingError)
}


def error_to_dict(error: _errors.InvoicingError) -> dict[str, Any]:
    """An error as ``{"type", "message", "status", …}``: its class name and its data.

    Never the provider's raw body or anything from the request: messages hold no secrets.
    """
    out: dict[str, Any] = {
        "type": type(error).__name__,
        "message": error.message,
        "status": error.status,
    }
    for name in _ERROR_FIELDS:
        value = getattr(error, name, None)
        if value is not None and value != ():
            out[name] = list(value) if isinstance(value, tuple) else value
    problems = getattr(error, "problems", None)
    if problems:
        if len(problems) > RECORDED_PROBLEMS:  # a document of a million bad lines
            out["more_problems"] = len(problems) - RECORDED_PROBLEMS
            problems = problems[:RECORDED_PROBLEMS]
        out["problems"] = [
            {
                "field": problem.field,
                "message": problem.message,
                "severity": problem.severity.value,
                "source": problem.source,
            }
            for problem in problems
        ]
    result = getattr(error, "result", None)
    if result is not None:
        out["result"] = result_to_json(result)
    last = getattr(error, "last_error", None)
    if isinstance(last, _errors.InvoicingError):
        out["last_error"] = error_to_dict(last)
    return out


#: The problems of an :class:`~invoicing_async.InvalidDocumentError` a record holds: the
#: first ones; ``more_problems`` counts the others (its message names the first five).
RECORDED_PROBLEMS = 100


#: What an error of a type has when its record lacks it (a record of an older version).
_ERROR_DEFAULTS: dict[type[_errors.InvoicingError], dict[str, Any]] = {
    _errors.ForeignRecordError: {"mismatches": ()},
    _errors.PaymentConflictError: {"payment_mark": None},
    _errors.CreditRefusedError: {"reason": "refused"},
    _errors.DocumentTooLargeError: {"size": None, "limit": None},
}


def error_from_dict(data: Mapping[str, Any]) -> _errors.InvoicingError:
    """The error :func:`error_to_dict` wrote, as its own type (``InvoicingError`` if unknown)."""
    cls = _ERROR_TYPES.get(str(data.get("type")), _errors.InvoicingError)
    error = cls.__new__(cls)
    message = str(data.get("message") or "")
    Exception.__init__(error, message)
    status = data.get("status")
    state: dict[str, Any] = {
        "message": message,
        "status": status if isinstance(status, int) else None,
        "body": None,
    }
    for name in _ERROR_FIELDS:
        if name in data:
            value = data[name]
            state[name] = tuple(value) if isinstance(value, list) else value
    if cls is _errors.TransportError:
        state.setdefault("maybe_sent", True)  # the cautious reading of an unknown value
    if issubclass(cls, (_errors.DuplicateDocumentError, _errors.ForeignRecordError)):
        record = data.get("result")
        state["result"] = result_from_dict(record) if isinstance(record, dict) else None
    for name, value in _ERROR_DEFAULTS.get(cls, {}).items():
        state.setdefault(name, value)
    if issubclass(cls, _errors.InvalidDocumentError):
        state["problems"] = tuple(_problem_from_dict(p) for p in data.get("problems") or ())
    if cls is _errors.AmbiguousDocumentError:
        state["members"] = tuple(
            (str(pair[0]), str(pair[1]))
            for pair in state.get("members") or ()
            if isinstance(pair, (list, tuple)) and len(pair) == 2
        )
    if cls is _errors.UnknownOutcomeError:
        last = data.get("last_error")
        state["last_error"] = (
            error_from_dict(last) if isinstance(last, dict) else _errors.InvoicingError(message)
        )
        state.setdefault("attempts", 0)
    error.__dict__.update(state)
    return error


def _problem_from_dict(data: Any) -> Problem:
    if not isinstance(data, Mapping):
        return Problem("", str(data))
    try:
        severity = Severity(data.get("severity"))
    except ValueError:
        severity = Severity.ERROR
    return Problem(
        str(data.get("field") or ""),
        str(data.get("message") or ""),
        severity,
        str(data.get("source") or ""),
    )


def outcome_to_dict(outcome: Outcome) -> dict[str, Any]:
    """An :class:`~invoicing_async.Outcome` as a plain JSON-able dict.

    ``{"index", "key", "issuer", "status", "ok", "attempts", "result", "error",
    "replayed"}``: ``status`` is the
    :class:`~invoicing_async.OutcomeStatus` value, ``result`` the provider's record
    (:func:`result_to_dict`) or ``None``, ``error`` ``None`` or
    ``{"type", "message", "status"}`` plus the error's own data (``maybe_sent``,
    ``retry_after``, ``reason`` …; an ``InvalidDocumentError``'s first 100
    ``problems``, and ``more_problems`` counting the others). Never a secret: messages
    are built without them. :func:`outcome_from_dict` reads it back.

    .. versionadded:: 0.2.0
    .. versionchanged:: 0.4.0 ``issuer``.
    """
    return {
        "index": outcome.index,
        "key": outcome.key,
        "issuer": outcome.issuer,
        "status": outcome.status.value,
        "ok": outcome.ok,
        "attempts": outcome.attempts,
        "result": result_to_json(outcome.result) if outcome.result is not None else None,
        "error": error_to_dict(outcome.error) if outcome.error is not None else None,
        "replayed": outcome.replayed,
    }


def outcome_from_dict(data: Mapping[str, Any]) -> Outcome:
    """Read an outcome written by :func:`outcome_to_dict` (keys it does not know are ignored).

    The error comes back as its own type (``TransportError`` with ``maybe_sent`` …), with
    ``InvoicingError`` standing in for a type this version does not know.

    :raises ValueError: a missing or invalid ``key``, ``index`` or ``status``.

    .. versionadded:: 0.2.0
    """
    try:
        status = OutcomeStatus(data["status"])
        key, index = data["key"], data["index"]
    except (KeyError, ValueError) as exc:
        raise ValueError(f"not an outcome: {exc!r}") from None
    if not isinstance(key, str) or not isinstance(index, int) or isinstance(index, bool):
        raise ValueError("not an outcome: key must be a string and index an integer")  # noqa: TRY004  (documented: a malformed outcome is a ValueError)
    result, error = data.get("result"), data.get("error")
    issuer = data.get("issuer")
    return Outcome(
        index=index,
        key=key,
        issuer=issuer if isinstance(issuer, str) else None,
        status=status,
        result=result_from_dict(result) if isinstance(result, dict) else None,
        error=error_from_dict(error) if isinstance(error, dict) else None,
        attempts=int(data.get("attempts") or 0),
        replayed=data.get("replayed") is True,
    )


def make_stored_converter() -> cattrs.Converter:
    """Stored dicts: what users, the command line, the ledger and the outbox write and read.

    Plain JSON-able dicts, stable across releases (files written by earlier versions
    read): a record as the provider's own (:func:`result_to_dict`), an error as its
    class name and data (:func:`error_to_dict`), an outcome (:func:`outcome_to_dict`);
    each type's hooks are the functions of this module, called directly where a row is
    written per document.
    """
    converter = cattrs.Converter()
    converter.register_unstructure_hook(DocumentResult, result_to_dict)
    converter.register_structure_hook(DocumentResult, lambda data, _: result_from_dict(data))
    converter.register_unstructure_hook_func(_is_error, error_to_dict)
    converter.register_structure_hook_func(_is_error, lambda data, _: error_from_dict(data))
    # By a predicate: registering the class would resolve its annotations, which name
    # types it imports only to be checked.
    converter.register_unstructure_hook_func(lambda cls: cls is Outcome, outcome_to_dict)
    converter.register_structure_hook_func(
        lambda cls: cls is Outcome, lambda data, _: outcome_from_dict(data)
    )
    return converter


def _is_error(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, _errors.InvoicingError)


#: Stored dicts (:func:`make_stored_converter`).
STORED = make_stored_converter()
