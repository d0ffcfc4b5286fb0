"""Reading a document as the provider does: the one reader of its fields.

The provider binds a document's JSON as ASP.NET services do, **case-insensitively**:
its own samples write the same document in PascalCase and in camelCase (``Series`` and
``series``, ``Issuer.Vat`` and ``issuer.vat``). It reads the issuer's VAT number with or
without the country prefix (``EL118058830`` and ``094019245``): the TIN is the nine
digits. Numbers come as JSON numbers or as numeric strings. Every reader of a document
in the package (its identity and routing, the offline QR, the ledger and outbox, the
rules of :mod:`._checks`, and the sandbox through its seam) reads it here, so that none
of them is stricter, or reads another field, than the others.

Which names the provider reads, settled from its samples, is written down in
``docs/guides/documents.rst`` ("The names the provider reads").

Reading is cheap for the canonical PascalCase document: the exact name is tried first
(one ``dict.get``), and the members are searched ignoring case only when it is missing.
That the exact name wins is sound because no document with two writings of one member
holding different values is sent (:mod:`._binding`: refused where it is serialised or
its text read).

A number too long for Python to write as text is found where it is (:func:`too_long_in`),
for the errors that name it.
"""

from __future__ import annotations

import decimal
import math
import re
import sys
from collections.abc import Mapping
from typing import Any

__all__ = [
    "Digits",
    "field",
    "first",
    "first_named",
    "folded",
    "number",
    "path",
    "text_of",
    "tin",
    "too_long_in",
]


def field(mapping: Mapping[str, Any], name: str) -> Any:
    """The member ``name`` of ``mapping``, matched ignoring case; ``None`` when absent.

    The exact name first: a PascalCase document costs one lookup per field.
    """
    value = mapping.get(name)
    if value is not None:
        return value
    return folded(mapping, name)


def folded(mapping: Mapping[str, Any], name: str) -> Any:
    """The member whose name equals ``name`` ignoring case, or ``None``.

    :func:`field`'s search once the exact name is missing (a member that is ``null`` is
    searched for too: it is then no value either way), for a hot path that tries the
    exact name inline.
    """
    # A miss is cheap: most often no name has the length (looked for at C speed), and
    # names of another length are passed over without being lowered.
    size = len(name)
    try:
        if size not in map(len, mapping):
            return None
    except TypeError:  # a name that is not text: each is looked at
        pass
    lower = name.lower()
    for key in mapping:
        if type(key) is str and len(key) == size and key.lower() == lower:
            return mapping[key]
    return None


def first(mapping: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    """The first of ``names`` (each matched ignoring case) that ``mapping`` has, or ``None``.

    For a field the provider reads under one name that documents also carry under
    another (``InvoiceTypeCode``, and the ``InvoiceType`` that holds the code in older
    documents): the provider's name comes first.
    """
    for name in names:
        value = field(mapping, name)
        if value is not None:
            return value
    return None


def first_named(mapping: Mapping[str, Any], names: tuple[str, ...]) -> tuple[Any, str]:
    """:func:`first`, and which of ``names`` it was read from; ``(None, "")`` for none.

    The name is the element of ``names`` itself (``name is names[0]`` says it is the
    provider's): a rule reports a value read from another name with a warning.
    """
    for name in names:
        value = field(mapping, name)
        if value is not None:
            return value, name
    return None, ""


def path(document: Mapping[str, Any], *names: str) -> Any:
    """The value at ``names`` (``"Issuer", "Vat"``), ``None`` if any step is absent."""
    value: Any = document
    for name in names:
        if not isinstance(value, Mapping):
            return None
        value = field(value, name)
    return value


_PREFIXES = frozenset({"EL", "el", "El", "eL", "GR", "gr", "Gr", "gR"})
#: A Greek VAT number with its country prefix (``EL``, also ``GR``), spaces allowed.
_PREFIXED = re.compile(r"\s*(?:[Ee][Ll]|[Gg][Rr])\s*([0-9]{9})\s*")


def tin(value: Any) -> str | None:
    """The tax identification number a VAT number names, as text; ``None`` when empty.

    ``EL123456783`` (the country prefix, as the provider's samples write the issuer's)
    and ``123456783`` are the same TIN: the nine digits. Any other value is kept as
    written (a foreign VAT number, or what the provider will refuse).
    """
    if not value:  # None, "", 0, false: no VAT number
        return None
    text = value if isinstance(value, str) else text_of(value)
    if text.isdigit():
        return text
    if len(text) == 11 and text[:2] in _PREFIXES and text[2:].isdigit() and text.isascii():
        return text[2:]
    prefixed = _PREFIXED.fullmatch(text)
    return prefixed.group(1) if prefixed is not None else text


def number(value: Any) -> decimal.Decimal | None:
    """A JSON number, or a numeric string, as a finite :class:`~decimal.Decimal`; else ``None``.

    ``true`` is not a number (a JSON boolean), and neither is ``"12,40"``, nor an int of
    more digits than Python writes (:func:`text_of`). A float is read by its shortest
    text (``12.4``, not its binary expansion), so a float that rounds to
    ``12.400000000000002`` reads as exactly that.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        text = text_of(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text or not _NUMERIC.fullmatch(text):
            return None
    elif isinstance(value, decimal.Decimal):
        return value if value.is_finite() else None
    else:
        return None
    try:
        amount = decimal.Decimal(text)
    except decimal.InvalidOperation:
        return None
    return amount if amount.is_finite() else None


#: What a numeric string may look like (a JSON number's text, with an optional sign).
_NUMERIC = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def text_of(value: Any) -> str:
    """``str(value)``, but for an int of more digits than Python writes as text.

    Python refuses to write an int of more than ``sys.get_int_max_str_digits()`` digits
    (4,300 by default: the time it takes grows as their square); such an int is said by
    its size (``<an integer of 3,321,929 bits>``), which is no number, TIN or key.
    """
    try:
        return str(value)
    except ValueError:
        if not isinstance(value, int):
            raise
        return f"<an integer of {value.bit_length():,} bits>"


class Digits(int):
    """A number too long to be read as an integer, as the count of its digits."""

    __slots__ = ()


def too_long_in(value: Any) -> tuple[str, int] | None:
    """The first integer in ``value`` of more digits than Python writes: its path, digits.

    ``Details[0].NetTotal`` and ``1,000,001``; an int that is a :class:`Digits` stands
    for one that was not read. Looked for without recursion, the path made only for
    the one found: time linear in ``value``, however deep.
    """
    limit = sys.get_int_max_str_digits()
    stack: list[tuple[Any, Any]] = [(value, None)]  # (value, (parent's step, its key))
    while stack:
        item, step = stack.pop()
        kind = item.__class__
        if kind is Digits:
            return _path(step), int(item)
        if kind is int and limit and item.bit_length() > limit * 3:  # 3.32 bits a digit
            digits = math.floor(math.log10(abs(item))) + 1
            if digits > limit:
                return _path(step), digits
        elif isinstance(item, Mapping):
            stack.extend((inner, (step, key)) for key, inner in reversed(list(item.items())))
        elif isinstance(item, (list, tuple)):
            stack.extend((inner, (step, index)) for index, inner in reversed(list(enumerate(item))))
    return None


def _path(step: Any) -> str:
    """``Details[0].NetTotal`` of the chain of (parent's step, key or index) ``step``."""
    names: list[str] = []
    while step is not None:
        step, key = step
        names.append(f"[{key}]" if key.__class__ is int else f".{text_of(key)[:100]}")
    return "".join(reversed(names)).removeprefix(".")
