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
import operator
from collections.abc import Mapping, Sequence  # noqa: TC003  (cattrs resolves the annotations at run time)
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from .amounts import VAT_RATES

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "CENT",
    "Address",
    "Classification",
    "CreditNote",
    "CreditReceipt",
    "DocumentBase",
    "IntraEUSalesInvoice",
    "IntraEUServiceInvoice",
    "Line",
    "Party",
    "PaymentMethod",
    "RetailReceipt",
    "SalesInvoice",
    "ServiceInvoice",
    "ServiceReceipt",
    "SimplifiedInvoice",
    "Summaries",
    "ThirdCountrySalesInvoice",
    "ThirdCountryServiceInvoice",
    "ThirdPartyReceipt",
    "UncorrelatedCreditNote",
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
    elif isinstance(value, int) and value.bit_length() > _LONGEST_INT:
        # A decimal of it takes time growing as the square of its digits: minutes.
        raise ValueError(f"not a number: an integer of {value.bit_length():,} bits is too large")
    else:
        try:
            amount = Decimal(repr(value) if isinstance(value, float) else value)
        except decimal.InvalidOperation:
            raise ValueError(f"not a number: {value!r}") from None
    if not amount.is_finite():
        raise ValueError(f"not a finite number: {value!r}")
    return amount


#: The most bits of an int read as a decimal: about the 4,300 digits Python writes as text.
_LONGEST_INT = 14_300


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


def _positioned(lines: Iterable[Line]) -> tuple[Line, ...]:
    """The lines, those numbered by their position unnumbered (``None`` is the position)."""
    lines = tuple(lines)
    if any(map(_LINE_NO, lines)):  # at C speed: line numbers are never 0
        lines = tuple(
            _unnumbered(line) if line.line_no == position else line
            for position, line in enumerate(lines, 1)
        )
    return lines


def _unnumbered(line: Line) -> Line:
    """A copy of ``line`` without its number, its amounts as they are.

    Not ``attrs.evolve``: it would make the line again from its values, its amounts then
    given rather than ``computed`` (and :func:`~._checked.readable` would read them).
    """
    copy: Line = object.__new__(line.__class__)
    copy.__dict__.update(line.__dict__, line_no=None)
    return copy


def _methods(methods: Iterable[PaymentMethod]) -> tuple[PaymentMethod, ...]:
    return tuple(methods)


def _analysis(rates: Iterable[VatAnalysis]) -> tuple[VatAnalysis, ...]:
    return tuple(rates)


def _marks(marks: Iterable[int]) -> tuple[int, ...]:
    """Marks as given; :raises ValueError: one is not a mark (a positive 64-bit integer)."""
    marks = tuple(marks)
    for index, mark in enumerate(marks):
        if mark.__class__ is not int or not 0 < mark < _MARK_LIMIT:
            big = mark.__class__ is int and mark.bit_length() > 64
            shown = f"an integer of {mark.bit_length():,} bits" if big else repr(mark)
            raise ValueError(
                f"correlated_invoices[{index}]: a mark is a positive 64-bit integer, "
                f"not {shown[:40]}"
            )
    return marks


#: Marks are below it: a 64-bit integer (a .NET ``long``).
_MARK_LIMIT = 2**63


_LINE_NO = operator.attrgetter("line_no")
_CATEGORY = operator.attrgetter("vat_category")
_NET = operator.attrgetter("net_total")
_VAT = operator.attrgetter("vat_total")
_ZERO = Decimal(0)


def _extra() -> Any:
    """The ``extra`` field: members the model does not name, kept as they are."""
    return attrs.field(factory=dict, hash=False, repr=False)


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


@attrs.frozen(init=False, slots=False)
class Line:
    """One line of a document (an element of ``Details``).

    ``Line("Espresso", quantity=2, unit_price="2.50")``: the net is the quantity at the
    unit price and the VAT the net at the category's rate (``vat_category``, the tax
    platform's ``VatCategoryCode``: 1 is 24 %), each rounded to the cent, half up; the
    total is their sum. Any of them given is kept as given (:func:`check
    <invoicing_async.documents.check>` says whether the provider would take it).
    Amounts and the quantity may be given as :class:`~decimal.Decimal`, ``int``, numeric
    text or ``float`` (read by its shortest text: ``2.3`` is ``Decimal("2.3")``). The
    amounts are computed when the line is made: a copy with another quantity or price
    (``attrs.evolve``) keeps those it is given; make a new line instead.

    :raises ValueError: neither ``net_total`` nor ``unit_price`` is given, the VAT of an
        unknown category is not given, an amount is not a number, or one to compute is
        too large to be an amount (``unit_price="1e999999"``), naming it.
    """

    #: The line's texts (``Descriptions``): one text, or several.
    descriptions: tuple[str, ...] = attrs.field(metadata=wire("Descriptions"))
    quantity: Decimal = attrs.field(metadata=wire("Quantity"), default=Decimal(1))
    unit_price: Decimal | None = attrs.field(metadata=wire("UnitPrice"), default=None)
    #: The VAT category (``VatCategoryCode``): 1 24 %, 2 13 %, 3 6 %, 4 17 %, 5 9 %,
    #: 6 4 %, 7 0 %, 8 without VAT, 9 3 %, 10 4 %.
    vat_category: int = attrs.field(metadata=wire("VatCategoryCode"), default=1)
    #: The net (``NetTotal``): the quantity at the unit price, to the cent, unless given.
    net_total: Decimal = attrs.field(metadata=wire("NetTotal"), default=None)
    #: The VAT (``VATTotal``): the net at the category's rate, to the cent, unless given.
    vat_total: Decimal = attrs.field(metadata=wire("VATTotal"), default=None)
    #: The line's total (``Total``): net plus VAT, unless given.
    total: Decimal = attrs.field(metadata=wire("Total"), default=None)
    #: The line's number (``LineNo``); ``None``: its position in its document (1 for the
    #: first line).
    line_no: int | None = attrs.field(metadata=wire("LineNo"), default=None)
    code: str | None = attrs.field(metadata=wire("Code"), default=None)
    measurement_unit: int | None = attrs.field(metadata=wire("MeasurementUnitCode"), default=None)
    #: The VAT exemption's code (``VatExemptionCategoryCode``) of a line at 0 %.
    vat_exemption: int | None = attrs.field(metadata=wire("VatExemptionCategoryCode"), default=None)
    income_classification: Classification | None = attrs.field(
        metadata=wire("IncomeClassification"), default=None
    )
    extra: Mapping[str, Any] = attrs.field(factory=dict, hash=False, repr=False)
    #: Whether the line's net, VAT and total were all computed (none given): then they
    #: hold the rules of a line by construction (``check`` does not read them again).
    computed: bool = attrs.field(init=False, default=False, eq=False, hash=False, repr=False)

    # Written out rather than generated, and its values kept in a dict (not slots): a
    # document is built line by line, and so a line costs a third of what attrs'
    # converters, factories and frozen slots do.
    def __init__(
        self,
        descriptions: str | Iterable[str],
        *,
        quantity: Decimal | float | str = 1,
        unit_price: Decimal | float | str | None = None,
        vat_category: int = 1,
        net_total: Decimal | float | str | None = None,
        vat_total: Decimal | float | str | None = None,
        total: Decimal | float | str | None = None,
        line_no: int | None = None,
        code: str | None = None,
        measurement_unit: int | None = None,
        vat_exemption: int | None = None,
        income_classification: Classification | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        quantity = quantity if quantity.__class__ is Decimal else decimal_of(quantity)
        price = None if unit_price is None else decimal_of(unit_price)
        if net_total is not None:
            net = decimal_of(net_total)
        elif price is not None:
            try:
                net = (quantity * price).quantize(CENT, decimal.ROUND_HALF_UP)
            except decimal.DecimalException:  # beyond what decimal arithmetic holds
                raise _too_large("net_total", "quantity times unit_price") from None
        else:
            raise ValueError("a line needs its net_total or its unit_price")
        if vat_total is not None:
            vat = decimal_of(vat_total)
        else:
            rate = _RATES.get(vat_category)
            if rate is None:
                raise ValueError(
                    f"VAT category {vat_category!r} is not the tax platform's: "
                    "give the line's vat_total"
                )
            try:
                vat = (net * rate).quantize(CENT, decimal.ROUND_HALF_UP)
            except decimal.DecimalException:
                raise _too_large("vat_total", "net_total at the category's rate") from None
        if total is None:
            try:
                whole = net + vat
            except decimal.DecimalException:
                raise _too_large("total", "net_total + vat_total") from None
        else:
            whole = decimal_of(total)
        # Frozen: the values are put in the instance's dict at once.
        self.__dict__.update(
            descriptions=(descriptions,) if isinstance(descriptions, str) else tuple(descriptions),
            quantity=quantity,
            unit_price=price,
            vat_category=vat_category,
            net_total=net,
            vat_total=vat,
            total=whole,
            line_no=line_no,
            code=code,
            measurement_unit=measurement_unit,
            vat_exemption=vat_exemption,
            income_classification=income_classification,
            extra={} if extra is None else extra,
            computed=net_total is None and vat_total is None and total is None,
        )


def _too_large(name: str, what: str) -> ValueError:
    """The error of an amount that cannot be computed: beyond what decimals hold."""
    return ValueError(f"{name}: {what} is too large to be an amount in cents")


def _sum(name: str, what: str, amounts: Iterable[Decimal]) -> Decimal:
    """The sum of ``amounts``; ``ValueError`` naming ``name`` if it overflows."""
    try:
        return sum(amounts, _ZERO)
    except decimal.DecimalException:  # beyond what decimal arithmetic holds
        raise _too_large(name, what) from None


#: Each VAT category's rate, as the fraction a net is multiplied by.
_RATES = {code: Decimal(rate) / _HUNDRED for code, rate in VAT_RATES.items()}


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
    #: The lines these totals were computed :meth:`of` (``None``: given).
    _of: Sequence[Line] | None = attrs.field(
        init=False, default=None, eq=False, hash=False, repr=False
    )

    @classmethod
    def of(cls, lines: Sequence[Line]) -> Summaries:
        """The totals of ``lines``: net, VAT, and gross their sum."""
        net = _sum("Summaries.TotalNetAmount", "the lines' NetTotal", map(_NET, lines))
        vat = _sum("Summaries.TotalVATAmount", "the lines' VATTotal", map(_VAT, lines))
        gross = _sum("Summaries.TotalGrossValue", "TotalNetAmount + TotalVATAmount", (net, vat))
        totals = cls(total_net_amount=net, total_vat_amount=vat, total_gross_value=gross)
        object.__setattr__(totals, "_of", lines)
        return totals

    def computed_of(self, lines: Sequence[Line]) -> bool:
        """Whether these are the totals :meth:`of` exactly ``lines`` (the same object)."""
        return self._of is lines


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
        """The net and VAT of ``lines`` by rate, in the order the rates first appear.

        :raises ValueError: the sum at a rate is beyond what decimals hold.
        """
        try:
            return cls._by_rate(lines)
        except decimal.DecimalException:
            raise _too_large("VatAnalysis", "the lines' amounts at a rate") from None

    @classmethod
    def _by_rate(cls, lines: Sequence[Line]) -> tuple[VatAnalysis, ...]:
        categories = set(map(_CATEGORY, lines))
        if len(categories) == 1:  # most documents: summed at C speed
            rate = VAT_RATES.get(categories.pop())
            if rate is None:
                return ()
            net, vat = sum(map(_NET, lines), _ZERO), sum(map(_VAT, lines), _ZERO)
            return (cls(percentage=Decimal(rate), underlying_value=net, vat_amount=vat),)
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
    """What the typed documents share; each writes its own ``InvoiceTypeCode``.

    Computed unless given: ``summaries`` (the totals of the lines), ``vat_analysis``
    (their net and VAT by rate), and the amount of the only payment method given
    without one (the gross value). They are computed when the document is made: a copy
    with other lines (``attrs.evolve(document, lines=…)``) keeps those it is given, the
    first document's (:func:`check <invoicing_async.documents.check>` says they no
    longer add up): make a new document instead.
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
        metadata=wire("PaymentDetails.PaymentMethods"), default=(), converter=_methods
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
        converter=_analysis,
    )
    #: Members the model does not name, sent as they are (``{"IAPRSignPolicy": 2}``);
    #: those of ``PaymentDetails`` and ``DistributionDetails`` under their own name
    #: (``{"DistributionDetails": {"MovePurpose": "ΠΩΛΗΣΗ"}}``).
    extra: Mapping[str, Any] = _extra()

    def __attrs_post_init__(self) -> None:
        payments = self.payments
        if len(payments) == 1 and payments[0].amount is None:
            [only] = payments
            paid = PaymentMethod(
                only.type_code, self.summaries.total_gross_value, name=only.name, extra=only.extra
            )
            object.__setattr__(self, "payments", (paid,))


@attrs.frozen(kw_only=True)
class RetailReceipt(DocumentBase):
    """A retail receipt (``11.1``): a sale to a consumer, the customer optional."""

    type_code: ClassVar[str] = "11.1"


@attrs.frozen(kw_only=True)
class ServiceReceipt(DocumentBase):
    """A service receipt (``11.2``): services to a consumer, the customer optional.

    .. versionadded:: 0.5.0
    """

    type_code: ClassVar[str] = "11.2"


@attrs.frozen(kw_only=True)
class SimplifiedInvoice(DocumentBase):
    """A simplified invoice (``11.3``): a small sale, the customer optional.

    .. versionadded:: 0.5.0
    """

    type_code: ClassVar[str] = "11.3"


@attrs.frozen(kw_only=True)
class ThirdPartyReceipt(DocumentBase):
    """A retail receipt of a sale on behalf of a third party (``11.5``).

    .. versionadded:: 0.5.0
    """

    type_code: ClassVar[str] = "11.5"

    #: Whom the goods are sold for (``ThirdParty``): its VAT number and name. The
    #: provider's published 11.5 sample does not show this member: see the guide.
    third_party: Party | None = attrs.field(metadata=wire("ThirdParty"), default=None)


@attrs.frozen(kw_only=True)
class SalesInvoice(DocumentBase):
    """A sales invoice (``1.1``): goods sold to a business (``counterparty`` with its VAT)."""

    type_code: ClassVar[str] = "1.1"


@attrs.frozen(kw_only=True)
class IntraEUSalesInvoice(DocumentBase):
    """An intra-community sales invoice (``1.2``): goods sold to another EU country.

    ``counterparty`` with its VAT number and ``address.country_code``.

    .. versionadded:: 0.5.0
    """

    type_code: ClassVar[str] = "1.2"


@attrs.frozen(kw_only=True)
class ThirdCountrySalesInvoice(DocumentBase):
    """A third-country sales invoice (``1.3``): goods sold to a business outside the EU.

    ``counterparty`` with ``address.country_code``.

    .. versionadded:: 0.5.0
    """

    type_code: ClassVar[str] = "1.3"


@attrs.frozen(kw_only=True)
class ServiceInvoice(DocumentBase):
    """A service invoice (``2.1``): services to a business (``counterparty`` with its VAT)."""

    type_code: ClassVar[str] = "2.1"


@attrs.frozen(kw_only=True)
class IntraEUServiceInvoice(DocumentBase):
    """An intra-community service invoice (``2.2``): services to another EU country.

    ``counterparty`` with its VAT number and ``address.country_code``.

    .. versionadded:: 0.5.0
    """

    type_code: ClassVar[str] = "2.2"


@attrs.frozen(kw_only=True)
class ThirdCountryServiceInvoice(DocumentBase):
    """A third-country service invoice (``2.3``): services to a business outside the EU.

    ``counterparty`` with ``address.country_code``.

    .. versionadded:: 0.5.0
    """

    type_code: ClassVar[str] = "2.3"


@attrs.frozen(kw_only=True)
class _Correlated(DocumentBase):
    """A credit that names the documents it credits, by their marks."""

    #: The marks of the documents it credits (``CorrelatedInvoices``).
    correlated_invoices: tuple[int, ...] = attrs.field(
        metadata=wire("CorrelatedInvoices"), default=(), converter=_marks
    )


@attrs.frozen(kw_only=True)
class CreditNote(_Correlated):
    """A credit note (``5.1``) correlated to the invoices it credits, by their marks."""

    type_code: ClassVar[str] = "5.1"


@attrs.frozen(kw_only=True)
class UncorrelatedCreditNote(DocumentBase):
    """A credit note not correlated to an invoice (``5.2``), to a business customer.

    Goods returned or a price corrected (``counterparty`` with its VAT).

    .. versionadded:: 0.5.0
    """

    type_code: ClassVar[str] = "5.2"


@attrs.frozen(kw_only=True)
class CreditReceipt(_Correlated):
    """A credit retail receipt (``11.4``): goods a consumer returns.

    Correlated to the retail receipts it credits by their marks (``correlated_invoices``).

    .. versionadded:: 0.5.0
    """

    type_code: ClassVar[str] = "11.4"


#: The typed document of each ``InvoiceTypeCode``.
TYPES: dict[str, type[DocumentBase]] = {
    cls.type_code: cls
    for cls in (
        RetailReceipt,
        ServiceReceipt,
        SimplifiedInvoice,
        CreditReceipt,
        ThirdPartyReceipt,
        SalesInvoice,
        IntraEUSalesInvoice,
        ThirdCountrySalesInvoice,
        ServiceInvoice,
        IntraEUServiceInvoice,
        ThirdCountryServiceInvoice,
        CreditNote,
        UncorrelatedCreditNote,
    )
}
