"""Conversion between plain JSON and the library's records.

One private :class:`cattrs.Converter`, customised per type, so the rules live in one
place: strict booleans (``"false"`` is not true), integers from ints or digit strings,
timestamps in ISO 8601 with or without milliseconds and offset, statuses kept as text,
unknown keys kept in ``extra``.

The public functions (:func:`result_to_dict`, :func:`result_from_dict`,
:func:`outcome_to_dict`, :func:`outcome_from_dict`) are what users, the command line and
the journal write and read: plain JSON-able dicts, stable across releases.

A second converter turns the typed documents of :mod:`._doctypes` into the provider's
JSON and back (:func:`document_to_json`, :func:`document_from_json`): the names their
fields' metadata give (read in any case, as the provider reads them), amounts as JSON
numbers, unknown members kept in each object's ``extra``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from . import _doctypes, _errors
from ._fields import field, first
from ._models import DocumentResult, DocumentStatus
from ._outcomes import Outcome, OutcomeStatus
from ._problems import Problem, Severity

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "document_from_json",
    "document_to_json",
    "error_from_dict",
    "error_to_dict",
    "format_timestamp",
    "outcome_from_dict",
    "outcome_to_dict",
    "parse_timestamp",
    "result_from_dict",
    "result_from_json",
    "result_to_dict",
    "result_to_json",
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


def _structure_str_or_int(value: Any, _: Any) -> str | int | None:
    if value is None or (isinstance(value, (str, int)) and not isinstance(value, bool)):
        return value
    raise TypeError(f"expected a string or integer, got {type(value).__name__}")


def _structure_datetime(value: Any, _: Any) -> dt.datetime:
    if not isinstance(value, str):
        raise TypeError(f"expected a timestamp string, got {type(value).__name__}")
    return parse_timestamp(value)


_converter = cattrs.Converter(forbid_extra_keys=False)
_converter.register_structure_hook(bool, _structure_bool)
_converter.register_structure_hook(int, _structure_int)
_converter.register_structure_hook(str, _structure_str)
_converter.register_structure_hook(str | int | None, _structure_str_or_int)
_converter.register_structure_hook(dt.datetime, _structure_datetime)
_converter.register_unstructure_hook(dt.datetime, format_timestamp)

# Fields the provider sends, with their wire names; raw_status and extra are ours.
_WIRE = {
    field.name: _camel(field.name)
    for field in attrs.fields(DocumentResult)
    if field.name not in ("status", "raw_status", "extra")
}
_WIRE_LOWER = {wire.lower(): name for name, wire in _WIRE.items()}
_AUTHORITY = "authority_data_response"

# Keys are matched and renamed by result_from_json before the generated function runs.
_structure_record = make_dict_structure_fn(DocumentResult, _converter)


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
    return _structure_record(fields, DocumentResult)


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
        out[_WIRE[_AUTHORITY]] = _converter.unstructure(result.authority_data_response)
    if result.raw_status is not None:
        out["status"] = result.raw_status
    elif result.status is not None:
        out["status"] = result.status.value
    out.update(result.extra)
    return out


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
        raise ValueError(f"not a result record: {'; '.join(_causes(exc))}") from None


def _causes(exc: BaseException) -> list[str]:
    nested = getattr(exc, "exceptions", None)
    if not nested:
        return [str(exc)]
    return [text for inner in nested for text in _causes(inner)]


#: Attributes of errors written beside type, message and status (all JSON-able).
_ERROR_FIELDS = (
    "reason", "maybe_sent", "retry_after", "attempts", "mismatches", "size", "limit",
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
    if cls is _errors.ForeignRecordError:
        state.setdefault("mismatches", ())
    if cls is _errors.DocumentTooLargeError:
        state.setdefault("size", None)
        state.setdefault("limit", None)
    if cls is _errors.InvalidDocumentError:
        state["problems"] = tuple(_problem_from_dict(p) for p in data.get("problems") or ())
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
    ``retry_after``, ``reason`` …). Never a secret: messages are built without them.
    :func:`outcome_from_dict` reads it back.

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


# --- typed documents ----------------------------------------------------------------------

#: The typed documents' converter: amounts read as the fields read them (a float by its
#: shortest text), written as JSON numbers.
_documents = cattrs.Converter(forbid_extra_keys=False)
_documents.register_structure_hook(decimal.Decimal, lambda value, _: _doctypes.decimal_of(value))
_documents.register_unstructure_hook(decimal.Decimal, float)
_documents.register_unstructure_hook(dt.date, dt.date.isoformat)
_documents.register_unstructure_hook(dt.datetime, dt.datetime.isoformat)
_documents.register_structure_hook_func(
    lambda kind: kind == Mapping[str, Any], lambda value, _: dict(value)
)

#: Members of a document that sit in objects the model has no class for: the field, the
#: object and the member (``DistributionDetails.InternalDocumentId``).
_NESTED = {
    attribute.name: tuple(attribute.metadata["wire"].split("."))
    for attribute in attrs.fields(_doctypes.DocumentBase)
    if "." in attribute.metadata.get("wire", "")
}


def _structure_issued(value: Any, _: Any) -> dt.datetime | dt.date | str:
    if not isinstance(value, str):
        raise TypeError(f"expected an ISO 8601 date or date-time, got {type(value).__name__}")
    return _doctypes.issued_of(value)


_documents.register_structure_hook(dt.datetime | dt.date | str, _structure_issued)
_documents.register_structure_hook(str | int, _structure_str_or_int)


def _wire_names(cls: type) -> dict[str, str]:
    """Each field of ``cls`` and the name the provider reads it by."""
    return {
        attribute.name: attribute.metadata["wire"]
        for attribute in attrs.fields(cls)
        if "wire" in attribute.metadata
    }


def _unstructure_factory(cls: type) -> Callable[[Any], dict[str, Any]]:
    """Write ``cls`` by its wire names; ``None`` fields left out, ``extra`` merged in."""
    overrides: dict[str, Any] = {
        attribute.name: override(
            rename=attribute.metadata.get("wire"),
            omit="wire" not in attribute.metadata or attribute.name in _NESTED,
            omit_if_default=attribute.default is None,
        )
        for attribute in attrs.fields(cls)
    }
    write: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(cls, _documents, **overrides)
    nested = issubclass(cls, _doctypes.DocumentBase)

    def unstructure(value: Any) -> dict[str, Any]:
        out = write(value)
        if nested:  # a document: its type first, as the samples write it
            _write_document(value, out)
            out = {"InvoiceTypeCode": value.type_code, **value.extra, **out}
        elif value.extra:
            out = {**value.extra, **out}
        return out

    return unstructure


def _write_document(document: _doctypes.DocumentBase, out: dict[str, Any]) -> None:
    """A document's own: its lines' positions, its nested members."""
    for position, line in enumerate(out["Details"], 1):
        line.setdefault("LineNo", position)
    for name, (parent, member) in _NESTED.items():
        value = getattr(document, name)
        if value is None or value == ():
            continue
        written = dict(document.extra.get(parent) or {})
        written[member] = _documents.unstructure(value)
        out[parent] = written


def _structure_factory(cls: type) -> Callable[[Any, Any], Any]:
    """Read ``cls`` from its wire names in any case; other members kept in ``extra``."""
    names = {wire.lower(): name for name, wire in _wire_names(cls).items()}
    read: Callable[[Mapping[str, Any], Any], Any] = make_dict_structure_fn(cls, _documents)

    def structure(data: Any, _: Any) -> Any:
        if not isinstance(data, Mapping):
            raise TypeError(f"expected an object, got {type(data).__name__}")
        fields: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            name = names.get(key.lower()) if isinstance(key, str) else None
            if name is None or name in fields:
                extra[key] = value
            elif value is not None:
                fields[name] = value
        fields["extra"] = extra
        return read(fields, cls)

    return structure


_DOCUMENT_CLASSES = {
    cls
    for cls in vars(_doctypes).values()
    if isinstance(cls, type) and attrs.has(cls) and cls.__module__ == _doctypes.__name__
}
_documents.register_unstructure_hook_factory(
    lambda cls: cls in _DOCUMENT_CLASSES, _unstructure_factory
)
_documents.register_structure_hook_factory(lambda cls: cls in _DOCUMENT_CLASSES, _structure_factory)


def document_to_json(document: _doctypes.DocumentBase) -> dict[str, Any]:
    """The provider's JSON of a typed document (a ``dict`` ready to serialise)."""
    return _documents.unstructure(document)  # type: ignore[no-any-return]


def document_from_json(
    data: Mapping[str, Any], cls: type[_doctypes.DocumentBase] | None = None
) -> _doctypes.DocumentBase:
    """The typed document of the provider's JSON ``data`` (names in any case).

    :param cls: the class to read it as; default: the one of its ``InvoiceTypeCode``.
    :raises ValueError: ``data`` is not such a document (the reason is in the message).
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"not a document: expected an object, got {type(data).__name__}")  # noqa: TRY004  (documented: bad data is a ValueError)
    code = first(data, ("InvoiceTypeCode", "InvoiceType"))
    if cls is None:
        cls = _doctypes.TYPES.get(str(code))
        if cls is None:
            raise ValueError(
                f"no typed document of InvoiceTypeCode {code!r}: read it as a dict "
                f"(typed: {', '.join(sorted(_doctypes.TYPES))})"
            )
    elif field(data, "InvoiceTypeCode") not in (None, cls.type_code):
        raise ValueError(f"not a {cls.__name__}: its InvoiceTypeCode is {code!r}")
    try:
        return _documents.structure(_read_document(data), cls)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a {cls.__name__}: {exc}") from None
    except cattrs.BaseValidationError as exc:
        raise ValueError(f"not a {cls.__name__}: {'; '.join(_causes(exc))}") from None


def _read_document(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with its nested members lifted to the names of the document's fields.

    The type code is the class's own (dropped); a line's ``LineNo`` that is its position
    is dropped too (``None``: its position); what is left of a nested object stays.
    """
    out: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        lower = key.lower() if isinstance(key, str) else None
        if lower == "invoicetypecode":
            continue  # the class's own
        if lower in _PARENTS and isinstance(value, Mapping):
            nested[_PARENTS[lower]] = dict(value)
        elif lower == "details" and isinstance(value, list):
            out[key] = [_positioned(line, position) for position, line in enumerate(value, 1)]
        else:
            out[key] = value
    for parent, member in _NESTED.values():
        held = nested.get(parent)
        if held is None:
            continue
        found = next((k for k in held if isinstance(k, str) and k.lower() == member.lower()), None)
        if found is not None:
            out[f"{parent}.{member}"] = held.pop(found)  # the field's wire name
    for parent, held in nested.items():
        if held or not any(f"{p}.{m}" in out for p, m in _NESTED.values() if p == parent):
            out[parent] = held
    return out


_PARENTS = {parent.lower(): parent for parent, _member in _NESTED.values()}


def _positioned(line: Any, position: int) -> Any:
    if not isinstance(line, Mapping):
        return line
    number = field(line, "LineNo")
    if number != position or isinstance(number, bool):
        return line
    return {k: v for k, v in line.items() if not (isinstance(k, str) and k.lower() == "lineno")}
