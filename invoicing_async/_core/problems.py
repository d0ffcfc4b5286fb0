"""What a check of a document finds: a :class:`Problem` per field, and how sure it is.

The records :func:`~invoicing_async.documents.check` returns, the sandbox answers its 400
with, and :class:`~invoicing_async.InvalidDocumentError` carries; and :data:`SOURCES`,
where each rule comes from.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

import attrs

__all__ = ["SOURCES", "Problem", "Severity", "Twin", "joined", "twin_problem"]


class Severity(enum.Enum):
    """How sure it is that the provider refuses a document with a problem.

    .. versionadded:: 0.5.0
    """

    #: The provider refuses the document (400; for the issuer's TIN, 401), or the
    #: library does (a member written twice with different values, which the provider
    #: would read otherwise): fix it before sending.
    ERROR = "error"
    #: The provider may accept the document, or read it otherwise than meant: worth a
    #: look, never a refusal.
    WARNING = "warning"


@attrs.frozen(slots=True)
class Problem:
    """One problem with one field of a document.

    .. versionadded:: 0.5.0
    """

    #: The field, as the provider's samples name it: ``Issuer.Vat``,
    #: ``Details[2].VATTotal`` (lines counted from 0), ``Summaries.TotalNetAmount``.
    field: str
    #: What is wrong, and what the provider expects (``is required``, ``is not the net
    #: at the category's rate: 24% of 197.03 is 47.29``).
    message: str
    severity: Severity = Severity.ERROR
    #: Where the rule comes from (one of the texts of ``invoicing_async.documents.SOURCES``).
    source: str = ""

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"

    @property
    def is_error(self) -> bool:
        """Whether the provider refuses the document for it."""
        return self.severity is Severity.ERROR


#: Where each rule comes from, by name: what a :attr:`Problem.source` holds.
SOURCES = {
    "required": "the provider: a field every document must have (every published sample "
    "has it; the sandbox refuses a document without it with 400)",
    "shape": "the provider: the field's type, as its samples write it",
    "names": "the provider's samples: the names it reads (docs/guides/documents.rst)",
    "binding": "the provider: names are read ignoring case (ASP.NET model binding), and "
    "of a member written twice one value is kept: two writings of a member with different "
    "values are refused by the library, which would read the other",
    "tin": "the Greek TIN (ΑΦΜ): nine digits, the last a mod-11 check digit; the issuer's "
    "must be the API key's (401 otherwise)",
    "cents": "the tax platform (myDATA): amounts are in euro and cents, two decimals",
    "rates": "the tax platform (myDATA): a line's VAT is its net at its VAT category's "
    "rate, rounded to the cent per line (a cent of difference accepted)",
    "totals": "the tax platform (myDATA): the summaries are the totals of the lines "
    "(a cent of difference accepted)",
    "types": "the tax platform (myDATA): the invoice type's counterparty (its country for "
    "a sale abroad) and the VAT exemption of a line at 0 % (docs/guides/documents.rst)",
    "unsure": "not documented as refused by the provider: a warning, never a refusal",
}


def twin_problem(twin: Twin) -> Problem:
    """The error of a member written twice with different values (:mod:`._binding`).

    It names the second member (its path), and the first in its message.
    """
    return Problem(twin.members[1], twin.message, source=SOURCES["binding"])


class Twin(NamedTuple):
    """One member of an object written twice with different values.

    ``first`` and ``second`` are the two names as written: two spellings
    (``TotalNetAmount``, ``totalNetAmount``), or one name twice in a JSON text.
    """

    #: The object's path: ``""`` (the document), ``Issuer``, ``Details[2]``.
    path: str
    first: str
    second: str
    #: The two values, in the order they are written.
    values: tuple[Any, Any]

    @property
    def members(self) -> tuple[str, str]:
        """The two members as paths: ``("Series", "series")``."""
        return joined(self.path, self.first), joined(self.path, self.second)

    @property
    def message(self) -> str:
        """What is wrong with the second member (a problem's message)."""
        first, second = (_shown(value) for value in self.values)
        if self.first == self.second:
            told = f"is written twice, with different values ({first}, then {second})"
        else:
            told = (
                f"is also written {self.first!r}, with another value ({second} here, {first} there)"
            )
        return (
            f"{told}: the provider reads the two as one field and keeps one of them; write it once"
        )


def joined(path: str, name: str) -> str:
    """``Details[2].Series`` of an object's path and a member's name."""
    return f"{path}.{name}" if path else name


def _shown(value: Any) -> str:
    """A value for a message: its JSON, cut short (an object or array: its kind)."""
    if isinstance(value, Mapping):
        return "{…}" if value else "{}"
    if isinstance(value, (list, tuple)):
        return "[…]" if value else "[]"
    if isinstance(value, str) and len(value) > _SHOWN:
        value = value[:_SHOWN]  # cut before it is written: a value may be megabytes
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


_SHOWN = 40
