"""What a check of a document finds: a :class:`Problem` per field, and how sure it is.

The records :func:`~invoicing_async.documents.check` returns, the sandbox answers its 400
with, and :class:`~invoicing_async.InvalidDocumentError` carries; and :data:`SOURCES`,
where each rule comes from.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from ._binding import Twin

__all__ = ["SOURCES", "Problem", "Severity", "twin_problem"]


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
    "unsure": "not documented as refused by the provider: a warning, never a refusal",
}


def twin_problem(twin: Twin) -> Problem:
    """The error of a member written twice with different values (:mod:`._binding`).

    It names the second member (its path), and the first in its message.
    """
    return Problem(twin.members[1], twin.message, source=SOURCES["binding"])
