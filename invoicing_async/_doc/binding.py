"""How the provider binds an object's members, and the documents it would bind otherwise.

The provider reads names ignoring case (:mod:`._fields`), so ``Series`` and ``series`` are
one member to it; and of a member written twice it keeps one value. ASP.NET's reader,
System.Text.Json, keeps the last one read by default
(``JsonSerializerOptions.AllowDuplicateProperties`` is true) and refuses the document
when told to (``false``: a ``JsonException``, a 400); Json.NET keeps the last too
(``DuplicatePropertyNameHandling.Replace``). :func:`bound` is that binding: the
sandbox's, through its seam.

A document whose two writings of one member hold **different** values (``"Series": "A"``
beside ``"series": "B"``, or ``{"Series": "A", "Series": "B"}`` in a JSON text) is
ambiguous: the library, reading the first, would identify, route and check it by one
value while the provider commits it under the other (and then no record of the provider
matches it). It is refused before anything is sent, as a *twin* (:class:`Twin`) of
:func:`twins`; the same member written twice with the same value is no ambiguity.

Finding them costs one pass over a document, where it is serialised (:func:`suspect`,
which also tells whether a name is not text, for the key check of serialising): each
object's names are looked at once per *shape* (the tuple of its names, remembered), so
a batch of documents built by the same code pays a tuple and a set look-up per object;
the exact :func:`twins` (paths, values) runs only for a document it flags. JSON text is
looked at where it is read to be identified (:func:`twins_of_text`: one read when it
has none). The command reads its JSON with :data:`DECODER`: an object that names a
member twice with different values becomes a :class:`Repeated` (a ``dict`` holding the
last value, as :func:`json.loads` does, and the others beside), so that the twin is
still found once the text is a mapping.
"""

from __future__ import annotations

import decimal
import gc
import json
from collections.abc import Callable, Mapping
from typing import Any

from invoicing_async._core.problems import Twin, joined

__all__ = [
    "DECODER",
    "MAX_TWINS",
    "Repeated",
    "Twin",
    "bound",
    "loads",
    "same",
    "suspect",
    "twins",
    "twins_of_text",
]

#: Twins :func:`twins` reports at most (a hostile document may hold millions).
MAX_TWINS = 100


class Repeated(dict[str, Any]):
    """A JSON text's object that names a member twice, with different values.

    The ``dict`` holds the last value of each name (as :func:`json.loads` does);
    ``repeated`` the other values: ``(name, value, the value kept)`` each.
    """

    __slots__ = ("repeated",)

    def __init__(self, members: dict[str, Any], repeated: tuple[tuple[str, Any, Any], ...]) -> None:
        super().__init__(members)
        self.repeated = repeated


def same(a: Any, b: Any) -> bool:
    """Whether two JSON values are one value.

    Numbers by value (``true`` is no number), objects by their members in any order,
    arrays item by item.
    """
    if a is b:
        return True
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS):
        return not isinstance(a, bool) and not isinstance(b, bool) and a == b
    return type(a) is type(b) and a == b


_NUMBERS = (int, float, decimal.Decimal)


# --- the provider's binding (the sandbox's) ------------------------------------------------


def bound(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members as the provider binds them (a JSON decoder's pairs hook).

    Names ignoring case, the last value read kept: under the first spelling, in its
    place. An object without twins is the ``dict`` :func:`json.loads` makes.
    """
    members = dict(pairs)
    if len(members) == len(pairs) and not _folding(tuple(members)):
        return members
    kept: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for name, value in pairs:
        kept[spelled.setdefault(name.lower(), name)] = value
    return kept


# --- finding twins -----------------------------------------------------------------------

#: Tuples of names seen whose names stay distinct ignoring case (the shapes of the
#: objects of the documents sent: a few per application). Bounded: cleared when full.
_DISTINCT: set[tuple[Any, ...]] = set()
_REMEMBERED = 4096
#: Names an object may have for its shape to be remembered (a receipt's have a dozen).
_REMEMBERED_NAMES = 256
_SCALARS = frozenset({str, int, float, bool, type(None)})
#: Whether a ``dict`` may hold a container: tracked by the garbage collector (a dict
#: holding only scalars is not, in CPython; elsewhere every one is looked into).
_HOLDS: Callable[[Any], bool] = getattr(gc, "is_tracked", lambda _value: True)
_SEQUENCES = frozenset({list, tuple})


def _folding(names: tuple[Any, ...]) -> bool:
    """Whether two of ``names`` may be one member to the provider (remembered if not).

    A name that is not text may be too (JSON writes it as text): the exact walks look.
    """
    if names in _DISTINCT:
        return False
    try:
        if len(set(map(str.lower, names))) != len(names):
            return True
    except TypeError:
        return True
    if len(names) <= _REMEMBERED_NAMES:  # an object of a hostile size is looked at each time
        if len(_DISTINCT) >= _REMEMBERED:
            _DISTINCT.clear()
        _DISTINCT.add(names)
    return False


def suspect(document: Any) -> bool:  # noqa: C901, PLR0912  (one hot path, inlined)
    """Whether ``document`` may hold a twin, or a name that is not text, in one pass.

    ``False`` is exact: every name is text, and no object has two names that are one
    ignoring case or is a :class:`Repeated`. Each object's names are looked at once
    per shape, scalars are passed over without a call, and so are the members of an
    object the garbage collector does not track (CPython untracks a ``dict`` that holds
    no container: nothing below it to look at); :func:`twins` says which twins there
    are.
    """
    stack = [document]
    pop, push = stack.pop, stack.append
    distinct, scalars, holds = _DISTINCT, _SCALARS, _HOLDS
    while stack:
        value = pop()
        kind = type(value)
        if kind is dict:
            names = tuple(value)
            if names not in distinct and _folding(names):
                return True
            if holds(value):
                for item in value.values():
                    if type(item) not in scalars:
                        push(item)
        elif kind in _SEQUENCES:
            for item in value:
                if type(item) not in scalars:
                    push(item)
        elif kind is Repeated:
            return True
        elif isinstance(value, Mapping):  # a caller's own (a dict's subclass too)
            if _folding(tuple(value)):
                return True
            stack.extend([item for item in value.values() if type(item) not in scalars])
        elif isinstance(value, (list, tuple)):
            stack.extend([item for item in value if type(item) not in scalars])
    return False


def twins(document: Any, limit: int = MAX_TWINS) -> list[Twin]:
    """Every twin of ``document`` (at most ``limit``), in the order of the document."""
    found: list[Twin] = []
    stack: list[tuple[str, Any]] = [("", document)]
    while stack and len(found) < limit:
        path, value = stack.pop()
        if isinstance(value, Mapping):
            found.extend(_twins_in(path, value))
            items = [(joined(path, _name(k)), v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        else:
            continue
        stack.extend(
            reversed([item for item in items if isinstance(item[1], (Mapping, list, tuple))])
        )
    return found[:limit]


def _name(key: Any) -> str:
    """A member's name as JSON writes it (a key that is not text: its JSON)."""
    return key if isinstance(key, str) else json.dumps(key)


def _twins_in(path: str, mapping: Mapping[Any, Any]) -> list[Twin]:
    found = [
        Twin(path, name, name, (value, kept))
        for name, value, kept in getattr(mapping, "repeated", ())
    ]
    first: dict[str, tuple[str, Any]] = {}
    for key, value in mapping.items():
        name = _name(key)
        seen = first.setdefault(name.lower(), (name, value))
        if seen[0] != name and not _same(seen[1], value):
            found.append(Twin(path, seen[0], name, (seen[1], value)))
    return found


def _same(a: Any, b: Any) -> bool:
    try:
        return same(a, b)
    except RecursionError:  # values nested deeper than can be compared: not one value
        return False


# --- JSON text ---------------------------------------------------------------------------


def _members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object of a JSON text: a ``dict``, a :class:`Repeated` if it names one twice."""
    members = dict(pairs)
    if len(members) == len(pairs):
        return members
    repeated = tuple(
        (name, value, members[name]) for name, value in pairs if not _same(value, members[name])
    )
    return Repeated(members, repeated) if repeated else members


#: The library's reader of JSON text: :func:`json.loads`, but an object that names a
#: member twice with different values is a :class:`Repeated`.
DECODER = json.JSONDecoder(object_pairs_hook=_members)


class _Suspect(Exception):  # noqa: N818  (never leaves this module)
    """An object the fast reader does not vouch for: read again, exactly."""


def _vouched(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs) or _folding(tuple(members)):
        raise _Suspect
    return members


_FAST = json.JSONDecoder(object_pairs_hook=_vouched)


def loads(text: str | bytes | bytearray) -> Any:
    """JSON text as the library reads it (:data:`DECODER`); bytes in UTF-8, -16 or -32.

    :raises ValueError: not JSON (:class:`json.JSONDecodeError`, or bytes of no Unicode
        encoding). :raises RecursionError: nested too deeply.
    """
    return DECODER.decode(_text(text))


def twins_of_text(text: str | bytes | bytearray) -> tuple[Any, list[Twin]]:
    """The value of a JSON text and its twins, in one read when it has none.

    :raises ValueError: not JSON. :raises RecursionError: nested too deeply.
    """
    decoded = _text(text)
    try:
        return _FAST.decode(decoded), []
    except _Suspect:
        value = DECODER.decode(decoded)
        return value, twins(value)


def _text(text: str | bytes | bytearray) -> str:
    if isinstance(text, str):
        return text
    return bytes(text).decode(json.detect_encoding(text), "surrogatepass")
