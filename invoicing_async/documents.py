"""Documents as the provider writes them, typed and checked before they leave.

Typed documents for what POS and ERP software send in a day: at the till
:class:`RetailReceipt` (``11.1``), :class:`ServiceReceipt` (``11.2``),
:class:`SimplifiedInvoice` (``11.3``), :class:`CreditReceipt` (``11.4``, a return) and
:class:`ThirdPartyReceipt` (``11.5``); from the ERP :class:`SalesInvoice` (``1.1``),
:class:`IntraEUSalesInvoice` (``1.2``), :class:`ThirdCountrySalesInvoice` (``1.3``),
:class:`ServiceInvoice` (``2.1``), :class:`IntraEUServiceInvoice` (``2.2``),
:class:`ThirdCountryServiceInvoice` (``2.3``), :class:`CreditNote` (``5.1``) and
:class:`UncorrelatedCreditNote` (``5.2``), with their :class:`Party` (issuer, customer), their
:class:`Line` s, :class:`PaymentMethod` s, :class:`Summaries` and :class:`VatAnalysis`.
Amounts are :class:`~decimal.Decimal`; a line's net, VAT and total, the summaries and
the VAT analysis are computed from the lines, with the tax platform's rounding (to the
cent, half up, per line), unless given::

    from invoicing_async.documents import Line, Party, PaymentMethod, RetailReceipt

    receipt = RetailReceipt(
        issuer=Party(vat="EL123456783"),
        series="A", number=17, issued="2026-11-22T10:15:00",
        lines=[Line("Espresso", quantity=2, unit_price="2.50")],
        payments=[PaymentMethod(7)],          # POS; its amount is the gross value
        internal_id="till-1/A/17",
    )
    await client.submit_secure(receipt)       # as a dict would be

Every document method takes a typed document as it takes a ``dict`` (submit, batches,
deferred sales, outboxes). :func:`to_json` gives the provider's JSON (PascalCase names,
as its samples write them), :func:`from_json` reads it back (names in any case); members
the model does not name are kept in ``extra``, unchanged both ways.

:func:`check` finds what the provider would answer with a 400, as :class:`Problem` s
naming the field (``Details[0].VATTotal``), each an error or a warning (a rule the
provider may not enforce), each saying where its rule comes from; a dict, a typed
document or JSON bytes alike. The sandbox refuses with the same rules. :func:`checked`
marks a document to be checked where it is sent: a batch's document that would be
refused ends refused, unsent, with an :class:`~invoicing_async.InvalidDocumentError`::

    problems = check(receipt)                         # [] when it is fine
    outcomes = await client.submit_many(map(checked, invoices))

.. versionadded:: 0.5.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, overload

from ._core import problems as _problems
from ._core.problems import Problem, Severity
from ._doc import amounts as _amounts
from ._doc import checked as _checked
from ._doc import typedjson as _docjson
from ._doc.checked import Checked, checked
from ._doc.types import (
    Address,
    Classification,
    CreditNote,
    CreditReceipt,
    DocumentBase,
    IntraEUSalesInvoice,
    IntraEUServiceInvoice,
    Line,
    Party,
    PaymentMethod,
    RetailReceipt,
    SalesInvoice,
    ServiceInvoice,
    ServiceReceipt,
    SimplifiedInvoice,
    Summaries,
    ThirdCountrySalesInvoice,
    ThirdCountryServiceInvoice,
    ThirdPartyReceipt,
    UncorrelatedCreditNote,
    VatAnalysis,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "SOURCES",
    "VAT_RATES",
    "Address",
    "Checked",
    "Classification",
    "CreditNote",
    "CreditReceipt",
    "DocumentBase",
    "IntraEUSalesInvoice",
    "IntraEUServiceInvoice",
    "Line",
    "Party",
    "PaymentMethod",
    "Problem",
    "RetailReceipt",
    "SalesInvoice",
    "ServiceInvoice",
    "ServiceReceipt",
    "Severity",
    "SimplifiedInvoice",
    "Summaries",
    "ThirdCountrySalesInvoice",
    "ThirdCountryServiceInvoice",
    "ThirdPartyReceipt",
    "UncorrelatedCreditNote",
    "VatAnalysis",
    "check",
    "checked",
    "from_json",
    "to_json",
]

_D = TypeVar("_D", bound=DocumentBase)

#: The tax platform's VAT categories (a line's ``vat_category``, ``VatCategoryCode``) and
#: their rates in percent: 1 24 %, 2 13 %, 3 6 %, 4 17 %, 5 9 %, 6 4 %, 7 0 %, 8 without
#: VAT (0), 9 3 %, 10 4 %.
#:
#: .. versionadded:: 0.5.0
VAT_RATES: dict[int, int] = _amounts.VAT_RATES

#: Where each rule of :func:`check` comes from, by name: the texts a
#: :attr:`Problem.source` holds.
#:
#: .. versionadded:: 0.5.0
SOURCES: dict[str, str] = _problems.SOURCES


def check(document: Any) -> list[Problem]:
    """Every problem the provider would find in ``document``, in the rules' order.

    :param document: a mapping (in any case), a typed document, or its JSON (bytes or
        text).
    :returns: the problems: those whose :attr:`~Problem.severity` is
        :attr:`Severity.ERROR` the provider refuses the document for (the sandbox
        answers each with a 400 naming the same field), or the library does (a member
        written twice with different values, which the provider would read otherwise:
        :class:`~invoicing_async.AmbiguousDocumentError`); warnings never refuse. ``[]``
        when there is none.

    .. versionadded:: 0.5.0
    """
    return _checked.problems_of(document)


def to_json(document: DocumentBase) -> dict[str, Any]:
    """The provider's JSON of a typed document: a ``dict`` of its samples' names.

    Computed values are written (``NetTotal``, ``Summaries``, ``VatAnalysis``, a line's
    ``LineNo`` its position unless given), ``None`` fields left out, and each object's
    ``extra`` members written as they are.

    A document read by :func:`from_json` is written as it was read: ``to_json(from_json(x))``
    is ``x``, its members' names as spelled (PascalCase, camelCase, in any case), in
    their order, each value the model still holds in the JSON type it was written in
    (``"NetTotal": "197.03"`` stays text, ``1`` and ``589`` integers), ``null`` members
    kept; only what the model computed where ``x`` had none is added, at the end of its
    object, spelled as the object's names are (``vatAnalysis`` in a camelCase
    document). How a document was written is no part of what it is (its equality, its
    key); a copy (``attrs.evolve``) keeps it, a changed value written in its place, as
    text or an integer where it was.

    :raises ~invoicing_async.AmbiguousDocumentError: an ``extra`` that holds a member
        the model writes (or another spelling of it: ``{"series": "B"}``) with another
        value; the document would say it twice.

    .. versionadded:: 0.5.0
    .. versionchanged:: 0.5.0 a document read from JSON is written as it was read.
    """
    written = _docjson.document_to_json(document)
    _docjson.refuse_twins(written)
    return written


@overload
def from_json(data: Mapping[str, Any], cls: type[_D]) -> _D: ...
@overload
def from_json(data: Mapping[str, Any], cls: None = None) -> DocumentBase: ...
def from_json(data: Mapping[str, Any], cls: type[DocumentBase] | None = None) -> DocumentBase:
    """The typed document of the provider's JSON (names in any case).

    :param cls: the class to read it as; default: the one its ``InvoiceTypeCode`` names
        (``11.1`` to ``11.5``, ``1.1`` to ``1.3``, ``2.1`` to ``2.3``, ``5.1``, ``5.2``).
    :raises ValueError: ``data`` is not such a document (the message names the field it
        cannot read: ``Details[1].UnitPrice: not a number``), or names another type.
    :raises ~invoicing_async.AmbiguousDocumentError: ``data`` holds a member twice with
        different values (``Series`` and ``series``, in any object): the provider would
        read one, the typed document the other.

    .. versionadded:: 0.5.0
    """
    return _docjson.document_from_json(data, cls)
