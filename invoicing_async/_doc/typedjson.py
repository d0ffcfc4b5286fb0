"""The typed documents of :mod:`._doctypes` as the provider's JSON, and back.

:func:`document_to_json` and :func:`document_from_json`, on a converter of their own:
the names their fields' metadata give (read in any case, as the provider reads them),
amounts as JSON numbers, unknown members kept in each object's ``extra``. Imported when
a typed document is first used: a client that sends dicts never loads the models.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from invoicing_async._core.convert import causes, structure_str_or_int
from invoicing_async._core.errors import AmbiguousDocumentError
from invoicing_async._doc import types as _doctypes

from .binding import Repeated, same, suspect, twins
from .fields import field, first

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["document_from_json", "document_to_json", "refuse_twins"]

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
_documents.register_structure_hook(str | int, structure_str_or_int)


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
            parents = _write_document(value, out)
            head = {"InvoiceTypeCode": value.type_code}
            out = _merged(head, {k: v for k, v in value.extra.items() if k not in parents}, out)
        elif value.extra:
            out = _merged({}, value.extra, out)
        return out

    return unstructure


def _merged(head: dict[str, Any], extra: Mapping[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """``head``, ``extra`` and the model's members ``out``, in that order.

    A member ``extra`` holds under a name the model writes, with another value, is not
    dropped: the object is a :class:`~._binding.Repeated` (a member written twice), which
    sending refuses as it refuses ``Series`` beside ``series``.
    """
    merged = {**head, **extra, **out}
    clash = extra.keys() & (head.keys() | out.keys()) if extra else None
    if not clash:
        return merged
    written = {**head, **out}
    repeated = tuple(
        (name, extra[name], written[name]) for name in clash if not same(extra[name], written[name])
    )
    return Repeated(merged, repeated) if repeated else merged


def _write_document(document: _doctypes.DocumentBase, out: dict[str, Any]) -> set[str]:
    """A document's own: its lines' positions, its nested members; the parents written."""
    for position, line in enumerate(out["Details"], 1):
        line.setdefault("LineNo", position)
    parents = set()
    for name, (parent, member) in _NESTED.items():
        value = getattr(document, name)
        if value is None or value == ():
            continue
        out[parent] = _merged(
            {}, document.extra.get(parent) or {}, {member: _documents.unstructure(value)}
        )
        parents.add(parent)
    return parents


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
    """The provider's JSON of a typed document (a ``dict`` ready to serialise).

    A member its ``extra`` holds twice (beside the model's, with another value, or in
    two spellings) is left for the one who serialises it to refuse
    (:func:`refuse_twins`; sending refuses it where it serialises the mapping).
    """
    return _documents.unstructure(document)  # type: ignore[no-any-return]


def refuse_twins(data: Any) -> None:
    """Refuse a document's JSON that holds a member twice with different values.

    :raises AmbiguousDocumentError: naming both members of each.
    """
    if suspect(data):
        found = twins(data)
        if found:
            raise AmbiguousDocumentError.of(found)


def document_from_json(
    data: Mapping[str, Any], cls: type[_doctypes.DocumentBase] | None = None
) -> _doctypes.DocumentBase:
    """The typed document of the provider's JSON ``data`` (names in any case).

    :param cls: the class to read it as; default: the one of its ``InvoiceTypeCode``.
    :raises ValueError: ``data`` is not such a document (the reason is in the message).
    :raises AmbiguousDocumentError: ``data`` holds a member twice with different values
        (``Series`` and ``series``): which one the provider reads is not known.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"not a document: expected an object, got {type(data).__name__}")  # noqa: TRY004  (documented: bad data is a ValueError)
    refuse_twins(data)
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
        raise ValueError(f"not a {cls.__name__}: {'; '.join(causes(exc))}") from None


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
