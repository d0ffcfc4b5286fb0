"""What an operation's request carries, and reading its JSON as the service binds it.

The aiohttp application (:mod:`._app`) reads a request into an :class:`OperationCall`
(its body, or its form's fields and files), which the operations decide on.

The provider's other operations (credits, payments, IRIS) take a JSON object whose
members are bound as ASP.NET binds them: names in any case (``issuerTin`` or
``IssuerTin``), each member of one type. :class:`Fields` reads the members an operation
needs and notes every problem, so that the request is refused once (``400``) naming all
of them, in the service's body (``success``, ``message``, ``statusCode``, ``errors``).
Sans I/O, like the provider state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._for_sandbox import field, tin

from ._replies import Reply, error_reply
from ._rules import mark_of, parse_document

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["MAX_AMOUNT", "Fields", "OperationCall", "UploadedFile", "read_object"]


@attrs.frozen
class UploadedFile:
    """One file part of a ``multipart/form-data`` request."""

    field: str
    filename: str
    content_type: str
    data: bytes = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class OperationCall:
    """What an authenticated request to an operation carries, read by the application."""

    method: str
    query: Mapping[str, str]
    path_params: Mapping[str, str]
    content_type: str
    body: bytes = attrs.field(default=b"", repr=False)
    #: The text fields and the file parts of a ``multipart/form-data`` body.
    fields: Mapping[str, str] = attrs.field(factory=dict, hash=False)
    files: tuple[UploadedFile, ...] = ()


_MISSING = object()
#: Amounts are below this (a JSON number may be as large as it likes).
MAX_AMOUNT = 10**15


def read_object(body: bytes) -> Fields | Reply:
    """The JSON object of ``body`` to read fields from, or the 400 the service answers."""
    parsed = parse_document(body)
    return parsed if isinstance(parsed, Reply) else Fields(parsed)


class Fields:
    """The members of one JSON object, read by name in any case; problems noted."""

    def __init__(self, data: Mapping[str, Any], prefix: str = "") -> None:
        self.data = data
        self._prefix = prefix
        self.problems: list[tuple[str, str]] = []

    def _get(self, name: str, *, required: bool = False) -> Any:
        """The member (``_MISSING`` when absent or null: noted if ``required``)."""
        value = field(self.data, name)
        if value is None:
            if required:
                self.note(name, "is required")
            return _MISSING
        return value

    def note(self, name: str, message: str) -> None:
        """Note a problem of member ``name`` (a rule beyond its type)."""
        self.problems.append((self._prefix + name, message))

    def text(self, name: str, *, required: bool = True, numbers: bool = False) -> str | None:
        """A non-empty string (with ``numbers``, an integer is its text too)."""
        value = self._get(name, required=required)
        if value is _MISSING:
            return None
        if numbers and isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str) or not value.strip():
            self.note(name, "must be a non-empty string")
            return None
        return value

    def boolean(self, name: str) -> bool | None:
        """A JSON boolean, required."""
        value = self._get(name)
        if not isinstance(value, bool):
            self.note(name, "is required" if value is _MISSING else "must be true or false")
            return None
        return value

    def integer(self, name: str, *, low: int, high: int, required: bool = True) -> int | None:
        """A JSON integer from ``low`` to ``high``."""
        value = self._get(name, required=required)
        if value is _MISSING:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.note(name, f"must be an integer from {low} to {high}")
            return None
        return value

    def amount(self, name: str, *, required: bool = True, positive: bool = False) -> float | None:
        """A JSON number from 0 (with ``positive``, above 0) to below :data:`MAX_AMOUNT`."""
        value = self._get(name, required=required)
        if value is _MISSING:
            return None
        number = None if isinstance(value, bool) else value
        # An integer of a thousand digits is valid JSON, and no float: compared first.
        if not isinstance(number, (int, float)) or not 0 <= number < MAX_AMOUNT:
            number = None
        if number is None or (positive and number == 0):
            low = "above 0" if positive else "from 0"
            self.note(name, f"must be a number {low} to below {MAX_AMOUNT:.0e}")
            return None
        return float(number)

    def mark(self, name: str = "mark", *, required: bool = True) -> int | None:
        """A document's mark (see :func:`mark_of`); ``0`` or ``null`` when not required."""
        value = self._get(name, required=required)
        if value is _MISSING:
            return None
        mark = mark_of(value)
        if mark is None:
            self.note(name, "must be an integer (a mark)")
        return mark

    def vat(self, name: str) -> str | None:
        """A VAT number as a TIN (the ``EL`` prefix dropped), required."""
        text = self.text(name)
        return None if text is None else tin(text)

    def objects(self, name: str) -> list[Fields] | None:
        """A non-empty array of JSON objects, each read as its own :class:`Fields`."""
        value = self._get(name)
        if not isinstance(value, list) or not value:
            message = "is required" if value is _MISSING else "must be a non-empty array"
            self.note(name, message)
            return None
        if not all(isinstance(item, dict) for item in value):
            self.note(name, "must hold JSON objects only")
            return None
        return [Fields(item, f"{self._prefix}{name}[{n}].") for n, item in enumerate(value)]

    def mapping(self, name: str) -> Mapping[str, Any] | None:
        """An optional JSON object."""
        value = self._get(name)
        if value is _MISSING:
            return None
        if not isinstance(value, dict):
            self.note(name, "must be a JSON object")
            return None
        return value

    def refusal(self, *more: Fields) -> Reply | None:
        """The 400 naming every problem of this object (and of ``more``), or ``None``."""
        problems = [p for fields in (self, *more) for p in fields.problems]
        if not problems:
            return None
        return error_reply(
            400,
            "; ".join(f"{name}: {message}" for name, message in problems)[:2000],
            errors=[{"field": name, "message": message} for name, message in problems],
        )
