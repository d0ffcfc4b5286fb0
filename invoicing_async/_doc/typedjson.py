"""The typed documents of :mod:`._doctypes` as the provider's JSON, and back.

:func:`document_to_json` and :func:`document_from_json`, on a converter of their own:
the names their fields' metadata give (read in any case, as the provider reads them),
amounts as JSON numbers, unknown members kept in each object's ``extra``. An object read
from JSON keeps how it was written (:class:`Written`, its ``extra``) and is written back
so. Imported when a typed document is first used: a client that sends dicts never loads
the models.
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

from invoicing_async._core.convert import causes, structure_str_or_int
from invoicing_async._core.errors import AmbiguousDocumentError, ValidationError
from invoicing_async._doc import types as _doctypes

from .binding import Repeated, same, suspect, twins
from .document import Identity, Kind, keyed, register_kind
from .fields import field, first, tin

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Written", "document_from_json", "document_to_json", "make_converter", "refuse_twins"]

#: Members of a document that sit in objects the model has no class for: the field, the
#: object and the member (``DistributionDetails.InternalDocumentId``).
_NESTED = {
    attribute.name: tuple(attribute.metadata["wire"].split("."))
    for attribute in attrs.fields(_doctypes.DocumentBase)
    if "." in attribute.metadata.get("wire", "")
}
#: Each object of nested fields, by its name in lower case, and its fields and members.
_PARENTS = {parent.lower(): parent for parent, _member in _NESTED.values()}
_PARENT_MEMBERS: dict[str, tuple[tuple[str, str], ...]] = {
    parent: tuple((name, m) for name, (p, m) in _NESTED.items() if p == parent)
    for parent in _PARENTS.values()
}


def _structure_issued(value: Any, _: Any) -> dt.datetime | dt.date | str:
    if not isinstance(value, str):
        raise TypeError(f"expected an ISO 8601 date or date-time, got {type(value).__name__}")
    return _doctypes.issued_of(value)


def _wire_names(cls: type) -> dict[str, str]:
    """Each field of ``cls`` and the name the provider reads it by."""
    return {
        attribute.name: attribute.metadata["wire"]
        for attribute in attrs.fields(cls)
        if "wire" in attribute.metadata
    }


class Written(dict):  # type: ignore[type-arg]
    """An object's ``extra`` as read from JSON, and how that JSON was written.

    The members the model does not name (the dict itself, equal to a plain dict of them:
    how a document was written is no part of what it is), and in ``order`` each member
    of the object as it stood: its name as spelled, the field it fills (``None``: a
    member of ``extra``; :data:`_TYPE`, :data:`_PARENT`) and its value as written;
    ``loaded`` the fields' values as read, ``camel`` whether the model's names were
    written in camelCase. :func:`_as_written` writes the object back so: a value the
    model still holds is written as it was (``"197.03"`` stays text, ``589`` an
    integer, ``null`` kept), unknown members in their place, and only what the model
    computed where the JSON had none is added. Kept by ``attrs.evolve`` (which passes
    ``extra`` on); a document made by its constructor has none.
    """

    __slots__ = ("camel", "loaded", "order")

    order: tuple[tuple[Any, Any, Any], ...]
    loaded: dict[str, Any]
    camel: bool


#: What a member is that fills no field: the document's type code; an object of nested
#: fields (text no field is named, kept as it is by a copy or a pickle).
_TYPE, _PARENT = "#type", "#parent"


def _unstructure_factory(cls: type, converter: cattrs.Converter) -> Callable[[Any], dict[str, Any]]:
    """Write ``cls`` by its wire names; ``None`` and empty fields left out, ``extra`` merged in."""
    overrides: dict[str, Any] = {
        attribute.name: override(
            rename=attribute.metadata.get("wire"),
            omit="wire" not in attribute.metadata or attribute.name in _NESTED,
            omit_if_default=attribute.default is None or attribute.default == (),
        )
        for attribute in attrs.fields(cls)
    }
    write: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(cls, converter, **overrides)
    nested = issubclass(cls, _doctypes.DocumentBase)
    wires = _wire_names(cls)
    models = _models(cls)

    def unstructure(value: Any) -> dict[str, Any]:
        out = write(value)
        extra = value.extra
        if extra.__class__ is Written:
            return _as_written(value, out, extra, (wires, models), document=nested)
        if nested:  # a document: its type first, as the samples write it
            for position, line in enumerate(out["Details"], 1):
                line.setdefault("LineNo", position)
            parents = _write_document(value, out)
            head = {"InvoiceTypeCode": value.type_code}
            out = _merged(head, {k: v for k, v in extra.items() if k not in parents}, out)
        elif extra:
            out = _merged({}, extra, out)
        return out

    return unstructure


def _models(cls: type) -> frozenset[str]:
    """The fields of ``cls`` whose values are typed objects (written by their own hooks)."""
    names = "|".join(kind.__name__ for kind in _DOCUMENT_CLASSES)
    classes = re.compile(rf"\b({names})\b")
    return frozenset(
        attribute.name
        for attribute in attrs.fields(cls)
        if classes.search(str(getattr(attribute.type, "__name__", attribute.type)))
    )


def _as_written(
    value: Any,
    out: dict[str, Any],
    written: Written,
    fields: tuple[dict[str, str], frozenset[str]],
    *,
    document: bool,
) -> dict[str, Any]:
    """``value`` as the JSON it was read from (:class:`Written`), ``out`` its model's JSON.

    Each member in its place and spelling, a value unchanged as written, a changed one
    in the type it was written in (text, an integer) where it can be; then what the
    JSON did not have: members of ``extra`` added since, the model's computed members
    (in camelCase if the object's names were).
    """
    wires, models = fields
    result: dict[str, Any] = {}
    used: set[str] = set()
    camel = written.camel
    loaded = written.loaded
    for key, name, raw in written.order:
        if name is None:
            if key in written:
                result[key] = written[key]
        elif name in wires:
            wire = wires[name]
            used.add(wire)
            current = getattr(value, name)
            was = loaded.get(name)
            if (  # the common case, inline: a value as read, written as it was
                current is not None
                and name not in models
                and current.__class__ is was.__class__
                and current == was
            ):
                result[key] = list(raw) if raw.__class__ is list else raw
            else:
                _put(result, key, current, loaded=was, raw=raw, new=out.get(wire))
        elif name == _TYPE:
            result[key] = raw
        elif name == _PARENT:
            result[key] = _parent_as_written(value, written, raw, camel=camel)
            used.add(raw[0])
    if document:
        result = _document_as_written(value, result, written, wires["lines"], used)
    _added(result, out, written, used)
    return result


def _added(result: dict[str, Any], out: dict[str, Any], written: Written, used: set[str]) -> None:
    """What the JSON read did not have, after what it had.

    Members put in ``extra`` since, then the model's computed members (or given since),
    spelled as the object's names are.
    """
    camel = written.camel
    if written:
        for key in written.keys() - result.keys() - used:
            result[key] = written[key]  # put in extra since it was read
    for wire, item in out.items():
        if wire not in used:  # computed, or given since
            result[_spelled(wire, camel=camel)] = _camelled(item) if camel else item


def _document_as_written(
    document: Any, result: dict[str, Any], written: Written, details: str, used: set[str]
) -> dict[str, Any]:
    """A document's own, where its JSON had none: its type code, line numbers, parents."""
    camel = written.camel
    if not any(name == _TYPE for _key, name, _raw in written.order):
        result = {_spelled("InvoiceTypeCode", camel=camel): document.type_code, **result}
    _number(document, _member(result, details), camel=camel)
    for parent, members in _PARENT_MEMBERS.items():
        if parent not in used:
            given = _given_members(document, members, camel=camel)
            if given:
                held = written.get(parent)
                base = dict(held) if isinstance(held, Mapping) else {}
                result[_spelled(parent, camel=camel)] = {**base, **given}
                used.add(parent)
    return result


def _put(
    result: dict[str, Any], key: Any, current: Any, *, loaded: Any, raw: Any, new: Any
) -> None:
    """Member ``key`` of a field: as written (``raw``) if its value is as read (``loaded``).

    (:func:`_as_written` writes the common case itself.)
    """
    if current is None:
        if raw is None:
            result[key] = None  # null kept
        elif key.__class__ is str and key.lower() == "lineno":
            result[key] = raw  # its position: the document numbers it
        return
    if current.__class__ is loaded.__class__ and current == loaded and not _is_model(current):
        result[key] = list(raw) if raw.__class__ is list else raw
    elif new is not None:
        result[key] = _like(raw, current, new)


def _like(raw: Any, current: Any, new: Any) -> Any:
    """``current`` (written ``new``) as text or an integer if it was written so (``raw``)."""
    if current.__class__ is decimal.Decimal:
        if raw.__class__ is str:
            return format(current, "f")
        if raw.__class__ is int and current == current.to_integral_value():
            return int(current)
    return new


def _is_model(value: Any) -> bool:
    kind = value.__class__
    return kind in _DOCUMENT_CLASSES or (
        kind is tuple and bool(value) and value[0].__class__ in _DOCUMENT_CLASSES
    )


def _member(data: Mapping[str, Any], wire: str) -> Any:
    """The member of ``data`` named ``wire`` in any case (``None``: none)."""
    lower = wire.lower()
    return next((v for k, v in data.items() if k.__class__ is str and k.lower() == lower), None)


def _parent_as_written(
    document: Any, written: Written, parent_and_members: Any, *, camel: bool
) -> dict[str, Any]:
    """An object of nested fields (``DistributionDetails``) as it was written."""
    parent, members = parent_and_members
    held = written.get(parent)
    held = held if isinstance(held, Mapping) else {}
    result: dict[str, Any] = {}
    names = set()
    for key, name, raw in members:
        if name is None:
            if key in held:
                result[key] = held[key]
            continue
        names.add(name)
        current = getattr(document, name)
        new = None if current is None else _documents.unstructure(current)
        _put(result, key, current, loaded=written.loaded.get(name), raw=raw, new=new)
    for key in held.keys() - result.keys():
        result[key] = held[key]
    others = [member for member in _PARENT_MEMBERS[parent] if member[0] not in names]
    result.update(_given_members(document, others, camel=camel))
    return result


def _given_members(document: Any, members: Any, *, camel: bool) -> dict[str, Any]:
    """The nested fields ``members`` (field, member) the document has, by member name."""
    return {
        _spelled(member, camel=camel): _documents.unstructure(value)
        for name, member in members
        if (value := getattr(document, name)) is not None and value != ()
    }


def _number(document: Any, lines: Any, *, camel: bool) -> None:
    """Each line's ``LineNo`` that is its position written (``line_no`` ``None``)."""
    if not isinstance(lines, list):
        return
    for position, (line, out) in enumerate(zip(document.lines, lines, strict=False), 1):
        if line.line_no is not None or not isinstance(out, dict):
            continue
        key = "LineNo" if "LineNo" in out else "lineNo" if "lineNo" in out else None
        if key is None:  # another spelling, or none
            extra = line.extra
            spelled = _spelled("LineNo", camel=camel)
            if extra.__class__ is Written:
                spelled = _spelled("LineNo", camel=extra.camel)
                spelled = next((k for k, n, _raw in extra.order if n == "line_no"), spelled)
            key = spelled
        number = out.get(key)
        if (number != position or number.__class__ is not int) and str(number) != str(position):
            out[key] = position


def _spelled(wire: str, *, camel: bool) -> str:
    """``wire`` as written in camelCase (``VATTotal`` → ``vatTotal``) if ``camel``."""
    if not camel:
        return wire
    run = len(wire) - len(wire.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    if run == len(wire):
        return wire.lower()
    run = max(run - 1, 1)  # the last capital starts the next word: VATTotal -> vatTotal
    return wire[:run].lower() + wire[run:]


def _camelled(value: Any) -> Any:
    """A computed member's value with the model's names in it in camelCase."""
    if isinstance(value, dict):
        return {
            _spelled(k, camel=True) if k in _WIRES else k: _camelled(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_camelled(item) for item in value]
    return value


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
    """A document's nested members (made by its constructor); the parents written."""
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


def _structure_factory(cls: type, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """Read ``cls`` from its wire names in any case; other members kept in ``extra``.

    How the object was written is kept beside (:class:`Written`). A document's nested
    fields are read from their objects (``DistributionDetails.InternalDocumentId``),
    what else those hold kept in ``extra`` under the object's name; its type code is
    the class's own.
    """
    names = {wire.lower(): name for name, wire in _wire_names(cls).items() if "." not in wire}
    read: Callable[[Mapping[str, Any], Any], Any] = make_dict_structure_fn(cls, converter)
    document = issubclass(cls, _doctypes.DocumentBase)

    def structure(data: Any, _: Any) -> Any:
        if not isinstance(data, Mapping):
            raise TypeError(f"expected an object, got {type(data).__name__}")
        fields: dict[str, Any] = {}
        extra = Written()
        order: list[tuple[Any, Any, Any]] = []
        model = []
        for key, value in data.items():
            lower = key.lower() if key.__class__ is str else None
            name = names.get(lower)  # type: ignore[arg-type]
            if document and name is None and lower is not None:
                if lower == "invoicetypecode":
                    order.append((key, _TYPE, value))
                    model.append(key)
                    continue
                parent = _PARENTS.get(lower)
                if parent is not None and isinstance(value, Mapping):
                    members = _read_parent(parent, value, fields, extra)
                    order.append((key, _PARENT, (parent, members)))
                    model.append(key)
                    continue
            if name is None or name in fields:
                extra[key] = value
                order.append((key, None, None))
                continue
            if value is not None:
                fields[name] = value
            order.append((key, name, value))
            model.append(key)
        fields["extra"] = extra
        made = read(fields, cls)
        extra.order = tuple(order)
        extra.loaded = {name: getattr(made, name) for name in fields if name != "extra"}
        extra.camel = bool(model) and all(key[:1].islower() for key in model)
        return made

    return structure


def _read_parent(
    parent: str, data: Mapping[str, Any], fields: dict[str, Any], extra: Written
) -> tuple[tuple[Any, Any, Any], ...]:
    """Read the nested fields of object ``parent``; its other members into ``extra``."""
    wanted = {member.lower(): name for name, member in _PARENT_MEMBERS[parent]}
    members: list[tuple[Any, Any, Any]] = []
    held: dict[str, Any] = {}
    found = False
    for key, value in data.items():
        name = wanted.pop(key.lower(), None) if key.__class__ is str else None
        if name is None:
            held[key] = value
            members.append((key, None, None))
            continue
        found = True
        if value is not None:
            fields[name] = value
        members.append((key, name, value))
    if held or not found:
        extra[parent] = held
    return tuple(members)


_DOCUMENT_CLASSES = {
    cls
    for cls in vars(_doctypes).values()
    if isinstance(cls, type) and attrs.has(cls) and cls.__module__ == _doctypes.__name__
}
#: Every name the model writes (and its parts): what a computed member's camelCase renames.
_WIRES = {
    part
    for cls in _DOCUMENT_CLASSES
    for wire in _wire_names(cls).values()
    for part in (wire, *wire.split("."))
} | {"InvoiceTypeCode"}


def make_converter() -> cattrs.Converter:
    """The typed documents' JSON: each class of :mod:`.types` by its fields' wire names.

    Amounts read as the fields read them (a float by its shortest text) and written as
    JSON numbers; names read in any case; unknown members kept in each object's
    ``extra``, and how each object was written (:class:`Written`), written back so. The
    classes are found in :mod:`.types` when it is made: a class added there is read
    and written so too.
    """
    converter = cattrs.Converter(forbid_extra_keys=False)
    converter.register_structure_hook(decimal.Decimal, lambda value, _: _doctypes.decimal_of(value))
    converter.register_unstructure_hook(decimal.Decimal, float)
    converter.register_unstructure_hook(dt.date, dt.date.isoformat)
    converter.register_unstructure_hook(dt.datetime, dt.datetime.isoformat)
    converter.register_structure_hook_func(
        lambda kind: kind == Mapping[str, Any],
        lambda value, _: value if value.__class__ is Written else dict(value),
    )
    converter.register_structure_hook(dt.datetime | dt.date | str, _structure_issued)
    converter.register_structure_hook(str | int, structure_str_or_int)
    converter.register_unstructure_hook_factory(
        lambda cls: cls in _DOCUMENT_CLASSES, lambda cls: _unstructure_factory(cls, converter)
    )
    converter.register_structure_hook_factory(
        lambda cls: cls in _DOCUMENT_CLASSES, lambda cls: _structure_factory(cls, converter)
    )
    return converter


#: The typed documents' converter (:func:`make_converter`).
_documents = make_converter()


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
        return _documents.structure(data, cls)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a {cls.__name__}: {exc}") from None
    except cattrs.BaseValidationError as exc:
        raise ValueError(f"not a {cls.__name__}: {'; '.join(causes(exc))}") from None


def _plain(document: _doctypes.DocumentBase, _subject: str) -> dict[str, Any]:
    """What is sent of a typed document: its JSON."""
    try:
        return document_to_json(document)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"the document cannot be written as JSON: {exc}") from None


def _described(document: _doctypes.DocumentBase) -> tuple[str, Identity]:
    """A typed document's key and identity: its fields'."""
    issuer = document.issuer
    vat = tin(issuer.vat) if isinstance(issuer, _doctypes.Party) else None
    return keyed(document.series, document.number, document.internal_id, vat, document)


register_kind(_doctypes.DocumentBase, Kind(_plain, _described))
