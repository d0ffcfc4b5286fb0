"""Typed documents: the provider's invoice JSON as attrs classes (public in ``documents``).

Each class mirrors an object of the provider's samples; each field carries the name the
provider reads (its metadata's ``wire``: :func:`wire`), and ``extra`` keeps every member
the model does not name, unchanged both ways. Amounts are :class:`~decimal.Decimal`; a
line's net, VAT and total, the summaries and the VAT analysis are computed from the
lines when not given, with the tax platform's rounding: to the cent, half up, per line.

Conversion to the provider's JSON and back is :mod:`._convert`'s (cattrs); a document
is turned into JSON where documents enter the package (:mod:`._documents`), so every
method that takes a ``dict`` takes a typed document.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping, Sequence  # noqa: TC003  (cattrs resolves the annotations at run time)
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from ._amounts import VAT_RATES

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "CENT",
    "Address",
    "Classification",
    "CreditNote",
    "DocumentBase",
    "Line",
    "Party",
    "PaymentMethod",
    "RetailReceipt",
    "SalesInvoice",
    "ServiceInvoice",
    "Summaries",
    "VatAnalysis",
    "wire",
]

#: One cent: amounts are rounded to it, half up (the tax platform's rounding).
CENT = Decimal("0.01")
_HUNDRED = Decimal(100)


def wire(name: str) -> dict[str, str]:
    """The metadata of a field the provider's JSON names ``name`` (as its samples write it).

    ``Parent.Member`` names a member of an object the model does not have a class for
    (``DistributionDetails.InternalDocumentId``).
    """
    return {"wire": name}


def decimal_of(value: Decimal | float | str) -> Decimal:
    """An amount or quantity as a :class:`~decimal.Decimal` (a float by its shortest text).

    :raises ValueError: not a finite number.
    """
    if type(value) is Decimal:
        amount = value
    elif isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        raise TypeError(f"expected a number, not {type(value).__name__}")
    else:
        try:
            amount = Decimal(repr(value) if isinstance(value, float) else value)
        except decimal.InvalidOperation:
            raise ValueError(f"not a number: {value!r}") from None
    if not amount.is_finite():
        raise ValueError(f"not a finite number: {value!r}")
    return amount


def optional_decimal(value: Decimal | float | str | None) -> Decimal | None:
    """:func:`decimal_of`, ``None`` kept."""
    return None if value is None else decimal_of(value)


def issued_of(value: dt.datetime | dt.date | str) -> dt.datetime | dt.date | str:
    """When a document was issued, as its field keeps it.

    An ISO 8601 text is read as the date or date-time it writes back exactly; any other
    text is kept as it is (and sent so).
    """
    if not isinstance(value, str):
        return value
    kind: Any = dt.date if len(value) == 10 else dt.datetime
    try:
        parsed = kind.fromisoformat(value)
    except ValueError:
        return value
    return parsed if parsed.isoformat() == value else value


def _texts(value: str | Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _positioned(lines: Iterable[Line]) -> tuple[Line, ...]:
    """The lines, those numbered by their position unnumbered (``None`` is the position)."""
    lines = tuple(lines)
    if any(line.line_no is not None for line in lines):
        lines = tuple(
            attrs.evolve(line, line_no=None) if line.line_no == position else line
            for position, line in enumerate(lines, 1)
        )
    return lines


def _extra() -> Any:
    """The ``extra`` field: members the model does not name, kept as they are."""
    return attrs.field(factory=dict, hash=False, repr=False)


def _cents(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, decimal.ROUND_HALF_UP)


@attrs.frozen(kw_only=True)
class Address:
    """A party's address (``Address``)."""

    street: str | None = attrs.field(metadata=wire("Street"), default=None)
    number: str | None = attrs.field(metadata=wire("Number"), default=None)
    postal: str | None = attrs.field(metadata=wire("Postal"), default=None)
    city: str | None = attrs.field(metadata=wire("City"), default=None)
    #: ISO 3166 code: ``GR``.
    country_code: str | None = attrs.field(metadata=wire("CountryCode"), default=None)
    country: str | None = attrs.field(metadata=wire("Country"), default=None)
    extra: Mapping[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class Party:
    """The issuer (``Issuer``) or the customer (``CounterParty``) of a document."""

    #: The VAT number: the TIN, with or without ``EL`` (``EL123456783``, ``123456783``);
    #: empty for a retail customer.
    vat: str | None = attrs.field(metadata=wire("Vat"), default=None)
    registered_name: str | None = attrs.field(metadata=wire("RegisteredName"), default=None)
    brand_name: str | None = attrs.field(metadata=wire("BrandName"), default=None)
    tax_office: str | None = attrs.field(metadata=wire("TaxOffice"), default=None)
    #: The branch (0: the head office).
    branch_code: int | None = attrs.field(metadata=wire("BranchCode"), default=None)
    address: Address | None = attrs.field(metadata=wire("Address"), default=None)
    extra: Mapping[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class Classification:
    """A line's income classification (``IncomeClassification``).

    The tax platform's type and category codes (``E3_561_003``, ``category1_3``) and
    the amount.
    """

    type_code: str | None = attrs.field(metadata=wire("ClassificationTypeCode"), default=None)
    category_code: str | None = attrs.field(
        metadata=wire("ClassificationCategoryCode"), default=None
    )
    amount: Decimal | None = attrs.field(
        metadata=wire("Amount"), default=None, converter=optional_decimal
    )
    extra: Mapping[str, Any] = _extra()


@attrs.frozen
class Line:
    """One line of a document (an element of ``Details``).

    ``Line("Espresso", quantity=2, unit_price="2.50")``: the net is the quantity at the
    unit price and the VAT the net at the category's rate (``vat_category``, the tax
    platform's ``VatCategoryCode``: 1 is 24 %), each rounded to the cent, half up; the
    total is their sum. Any of them given is kept as given (:func:`check
    <invoicing_async.documents.check>` says whether the provider would take it).

    :raises ValueError: neither ``net_total`` nor ``unit_price`` is given, or the VAT of
        an unknown category is not given.
    """

    #: The line's texts (``Descriptions``): one text, or several.
    descriptions: tuple[str, ...] = attrs.field(metadata=wire("Descriptions"), converter=_texts)
    quantity: Decimal = attrs.field(
        metadata=wire("Quantity"), default=Decimal(1), converter=decimal_of, kw_only=True
    )
    unit_price: Decimal | None = attrs.field(
        metadata=wire("UnitPrice"), default=None, converter=optional_decimal, kw_only=True
    )
    #: The VAT category (``VatCategoryCode``): 1 24 %, 2 13 %, 3 6 %, 4 17 %, 5 9 %,
    #: 6 4 %, 7 0 %, 8 without VAT, 9 3 %, 10 4 %.
    vat_category: int = attrs.field(metadata=wire("VatCategoryCode"), default=1, kw_only=True)
    #: The net (``NetTotal``): the quantity at the unit price, to the cent, unless given.
    net_total: Decimal = attrs.field(
        metadata=wire("NetTotal"),
        default=attrs.Factory(lambda line: line.computed_net(), takes_self=True),
        converter=decimal_of,
        kw_only=True,
    )
    #: The VAT (``VATTotal``): the net at the category's rate, to the cent, unless given.
    vat_total: Decimal = attrs.field(
        metadata=wire("VATTotal"),
        default=attrs.Factory(lambda line: line.computed_vat(), takes_self=True),
        converter=decimal_of,
        kw_only=True,
    )
    #: The line's total (``Total``): net plus VAT, unless given.
    total: Decimal = attrs.field(
        metadata=wire("Total"),
        default=attrs.Factory(lambda line: line.net_total + line.vat_total, takes_self=True),
        converter=decimal_of,
        kw_only=True,
    )
    #: The line's number (``LineNo``); ``None``: its position in its document (1 for the
    #: first line).
    line_no: int | None = attrs.field(metadata=wire("LineNo"), default=None, kw_only=True)
    code: str | None = attrs.field(metadata=wire("Code"), default=None, kw_only=True)
    measurement_unit: int | None = attrs.field(
        metadata=wire("MeasurementUnitCode"), default=None, kw_only=True
    )
    #: The VAT exemption's code (``VatExemptionCategoryCode``) of a line at 0 %.
    vat_exemption: int | None = attrs.field(
        metadata=wire("VatExemptionCategoryCode"), default=None, kw_only=True
    )
    income_classification: Classification | None = attrs.field(
        metadata=wire("IncomeClassification"), default=None, kw_only=True
    )
    extra: Mapping[str, Any] = attrs.field(factory=dict, hash=False, repr=False, kw_only=True)

    def computed_net(self) -> Decimal:
        """The quantity at the unit price, to the cent (half up).

        :raises ValueError: the line has no unit price.
        """
        if self.unit_price is None:
            raise ValueError("a line needs its net_total or its unit_price")
        return _cents(self.quantity * self.unit_price)

    def computed_vat(self) -> Decimal:
        """The net at the category's rate, to the cent (half up).

        :raises ValueError: the category is not one of the tax platform's.
        """
        rate = VAT_RATES.get(self.vat_category)
        if rate is None:
            raise ValueError(
                f"VAT category {self.vat_category!r} is not the tax platform's: "
                "give the line's vat_total"
            )
        return _cents(self.net_total * rate / _HUNDRED)


@attrs.frozen
class PaymentMethod:
    """How a document is paid (an element of ``PaymentDetails.PaymentMethods``).

    ``PaymentMethod(7)`` (the tax platform's codes: 1 domestic bank account, 2 foreign
    bank account, 3 cash, 4 cheque, 5 on credit, 6 web banking, 7 POS / e-POS): a
    document's only method without an amount is paid its whole gross value.
    """

    type_code: int = attrs.field(metadata=wire("PaymentMethodTypeCode"))
    amount: Decimal | None = attrs.field(
        metadata=wire("Amount"), default=None, converter=optional_decimal
    )
    #: A name for it (``PaymentMethodType``: ``Κάρτα``).
    name: str | None = attrs.field(metadata=wire("PaymentMethodType"), default=None, kw_only=True)
    extra: Mapping[str, Any] = attrs.field(factory=dict, hash=False, repr=False, kw_only=True)


@attrs.frozen(kw_only=True)
class Summaries:
    """A document's totals (``Summaries``): computed from its lines unless given."""

    total_net_amount: Decimal = attrs.field(metadata=wire("TotalNetAmount"), converter=decimal_of)
    total_vat_amount: Decimal = attrs.field(metadata=wire("TotalVATAmount"), converter=decimal_of)
    total_gross_value: Decimal = attrs.field(metadata=wire("TotalGrossValue"), converter=decimal_of)
    total_withheld_amount: Decimal | None = attrs.field(
        metadata=wire("TotalWithheldAmount"), default=None, converter=optional_decimal
    )
    total_fees_amount: Decimal | None = attrs.field(
        metadata=wire("TotalFeesAmount"), default=None, converter=optional_decimal
    )
    total_stamp_duty_amount: Decimal | None = attrs.field(
        metadata=wire("TotalStampDutyAmount"), default=None, converter=optional_decimal
    )
    total_other_taxes_amount: Decimal | None = attrs.field(
        metadata=wire("TotalOtherTaxesAmount"), default=None, converter=optional_decimal
    )
    total_deductions_amount: Decimal | None = attrs.field(
        metadata=wire("TotalDeductionsAmount"), default=None, converter=optional_decimal
    )
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def of(cls, lines: Sequence[Line]) -> Summaries:
        """The totals of ``lines``: net, VAT, and gross their sum."""
        net = sum([line.net_total for line in lines], Decimal(0))
        vat = sum([line.vat_total for line in lines], Decimal(0))
        return cls(total_net_amount=net, total_vat_amount=vat, total_gross_value=net + vat)


@attrs.frozen(kw_only=True)
class VatAnalysis:
    """The net and VAT at one rate (an element of ``VatAnalysis``)."""

    #: The rate, in percent (``Percentage``).
    percentage: Decimal = attrs.field(metadata=wire("Percentage"), converter=decimal_of)
    #: The net at that rate (``UnderlyingValue``).
    underlying_value: Decimal = attrs.field(metadata=wire("UnderlyingValue"), converter=decimal_of)
    vat_amount: Decimal = attrs.field(metadata=wire("VatAmount"), converter=decimal_of)
    name: str | None = attrs.field(metadata=wire("Name"), default=None)
    extra: Mapping[str, Any] = _extra()

    @classmethod
    def of(cls, lines: Sequence[Line]) -> tuple[VatAnalysis, ...]:
        """The net and VAT of ``lines`` by rate, in the order the rates first appear."""
        rates: dict[int, list[Decimal]] = {}
        for line in lines:
            rate = VAT_RATES.get(line.vat_category)
            if rate is None:
                continue  # a category the platform does not know: no rate to list it at
            sums = rates.setdefault(rate, [Decimal(0), Decimal(0)])
            sums[0] += line.net_total
            sums[1] += line.vat_total
        return tuple(
            cls(percentage=Decimal(rate), underlying_value=net, vat_amount=vat)
            for rate, (net, vat) in rates.items()
        )


@attrs.frozen(kw_only=True)
class DocumentBase:
    """What the four typed documents share; each writes its own ``InvoiceTypeCode``.

    Computed unless given: ``summaries`` (the totals of the lines), ``vat_analysis``
    (their net and VAT by rate), and the amount of the only payment method given
    without one (the gross value).
    """

    #: The tax platform's type of the document (``InvoiceTypeCode``).
    type_code: ClassVar[str] = ""

    issuer: Party = attrs.field(metadata=wire("Issuer"))
    series: str = attrs.field(metadata=wire("Series"))
    number: str | int = attrs.field(metadata=wire("Number"))
    #: When it was issued (``DateIssued``): a date, a date-time (written as given: local
    #: time without an offset, as the samples write it), or the text to send.
    issued: dt.datetime | dt.date | str = attrs.field(
        metadata=wire("DateIssued"), converter=issued_of
    )
    #: The lines (``Details``). A line's ``line_no`` that is its position is kept as
    #: ``None`` (its position, written as its ``LineNo``).
    lines: tuple[Line, ...] = attrs.field(metadata=wire("Details"), converter=_positioned)
    counterparty: Party | None = attrs.field(metadata=wire("CounterParty"), default=None)
    #: The document's identity at the provider (``DistributionDetails.InternalDocumentId``):
    #: the same for a corrected invoice, so that a re-sent one is recognised.
    internal_id: str | None = attrs.field(
        metadata=wire("DistributionDetails.InternalDocumentId"), default=None
    )
    #: How it is paid (``PaymentDetails.PaymentMethods``).
    payments: tuple[PaymentMethod, ...] = attrs.field(
        metadata=wire("PaymentDetails.PaymentMethods"), default=(), converter=tuple
    )
    #: ``CurrencyCode`` (``EUR``).
    currency: str | None = attrs.field(metadata=wire("CurrencyCode"), default=None)
    #: The totals (``Summaries``): of the lines, unless given.
    summaries: Summaries = attrs.field(
        metadata=wire("Summaries"),
        default=attrs.Factory(lambda document: Summaries.of(document.lines), takes_self=True),
    )
    #: The net and VAT by rate (``VatAnalysis``): of the lines, unless given.
    vat_analysis: tuple[VatAnalysis, ...] = attrs.field(
        metadata=wire("VatAnalysis"),
        default=attrs.Factory(lambda document: VatAnalysis.of(document.lines), takes_self=True),
        converter=tuple,
    )
    #: Members the model does not name, sent as they are (``{"IAPRSignPolicy": 2}``);
    #: those of ``PaymentDetails`` and ``DistributionDetails`` under their own name
    #: (``{"DistributionDetails": {"MovePurpose": "ΠΩΛΗΣΗ"}}``).
    extra: Mapping[str, Any] = _extra()

    def __attrs_post_init__(self) -> None:
        payments = self.payments
        if len(payments) == 1 and payments[0].amount is None:
            paid = attrs.evolve(payments[0], amount=self.summaries.total_gross_value)
            object.__setattr__(self, "payments", (paid,))


@attrs.frozen(kw_only=True)
class RetailReceipt(DocumentBase):
    """A retail receipt (``11.1``): a sale to a consumer, the customer optional."""

    type_code: ClassVar[str] = "11.1"


@attrs.frozen(kw_only=True)
class SalesInvoice(DocumentBase):
    """A sales invoice (``1.1``): goods sold to a business (``counterparty`` with its VAT)."""

    type_code: ClassVar[str] = "1.1"


@attrs.frozen(kw_only=True)
class ServiceInvoice(DocumentBase):
    """A service invoice (``2.1``): services to a business (``counterparty`` with its VAT)."""

    type_code: ClassVar[str] = "2.1"


@attrs.frozen(kw_only=True)
class CreditNote(DocumentBase):
    """A credit note (``5.1``) correlated to the invoices it credits, by their marks."""

    type_code: ClassVar[str] = "5.1"

    #: The marks of the invoices it credits (``CorrelatedInvoices``).
    correlated_invoices: tuple[int, ...] = attrs.field(
        metadata=wire("CorrelatedInvoices"), default=(), converter=tuple
    )


#: The typed document of each ``InvoiceTypeCode``.
TYPES: dict[str, type[DocumentBase]] = {
    cls.type_code: cls for cls in (RetailReceipt, SalesInvoice, ServiceInvoice, CreditNote)
}
