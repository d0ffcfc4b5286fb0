"""The rules about a document's amounts: cents, VAT rates, totals.

The tax platform the provider reports to (myDATA) keeps amounts in euro and cents, a
line's VAT at its category's rate of its net (rounded per line), and the summaries the
totals of the lines. Amounts are compared in whole cents (integers): a float is read by
its shortest text, so ``12.400000000000002`` is not twelve euro forty but an amount with
more than two decimals. A difference of one cent is accepted where amounts are compared,
as the tax platform accepts it.

What is checked, and how sure it is (:class:`~._problems.Severity`):

* each amount is a number with at most two decimals (error);
* a line's ``VATTotal`` is its ``NetTotal`` at the rate of its ``VatCategoryCode``
  (error; an unknown category is a warning);
* ``Summaries.TotalNetAmount`` / ``TotalVATAmount`` are the totals of the lines' (error),
  ``TotalGrossValue`` their sum (error; a warning when other taxes, withheld amounts or
  deductions take part: their signs are the platform's, not checked here);
* a line's ``Total`` is its net plus its VAT, and the payment methods add up to the
  gross value (warnings: the provider may not compare them).
"""

from __future__ import annotations

import decimal
from collections.abc import Mapping
from typing import Any

from ._fields import field, first, number
from ._problems import SOURCES, Problem, Severity

__all__ = ["VAT_RATES", "cents", "check", "format_cents", "shape", "vat_of"]

#: The tax platform's VAT categories (``VatCategoryCode``) and their rates, in percent:
#: 24 %, 13 %, 6 %, 17 %, 9 %, 4 %, 0 %, records without VAT, and the 3 % and 4 % of the
#: islands' reduced rates.
VAT_RATES: dict[int, int] = {1: 24, 2: 13, 3: 6, 4: 17, 5: 9, 6: 4, 7: 0, 8: 0, 9: 3, 10: 4}

#: Summary totals other than net and VAT, with the sign each takes in the gross value.
_OTHER_TOTALS = (
    ("TotalWithheldAmount", -1),
    ("TotalFeesAmount", 1),
    ("TotalStampDutyAmount", 1),
    ("TotalOtherTaxesAmount", 1),
    ("TotalDeductionsAmount", -1),
)
#: A line's own amounts of other taxes: when one is not zero, its ``Total`` is not
#: compared with net plus VAT.
_LINE_OTHERS = (
    "WithheldAmount",
    "FeesAmount",
    "StampDutyAmount",
    "OtherTaxesAmount",
    "DeductionsAmount",
)
#: The names a line's net and VAT are read from: the provider's, then myDATA's.
_NET = ("NetTotal", "NetValue")
_VAT = ("VATTotal", "VatAmount")
_NOT_A_NUMBER = "must be a number"
_CENT = decimal.Decimal("0.01")


def cents(value: Any) -> int | str:
    """An amount in whole cents, or why it is not one (``must be a number`` …)."""
    if type(value) is float:
        text = repr(value)
        dot = text.find(".")
        if dot >= 0 and "e" not in text:
            if len(text) - dot > 3:
                return _too_fine(text)
            return round(value * 100)
    elif type(value) is int:
        return value * 100
    amount = number(value)
    if amount is None:
        return _NOT_A_NUMBER
    try:
        rounded = amount.quantize(_CENT)
    except decimal.InvalidOperation:  # more digits than an amount has
        return _NOT_A_NUMBER
    if amount != rounded:
        return _too_fine(str(value).strip())
    return int(rounded * 100)


def _too_fine(text: str) -> str:
    return f"has more than two decimals ({text}): round it to the cent"


def shape(value: Any) -> str | None:
    """``must be a number`` unless ``value`` is a number (or numeric text)."""
    return _NOT_A_NUMBER if number(value) is None else None


def format_cents(amount: int) -> str:
    """Cents as euro text: ``4729`` is ``47.29``."""
    sign = "-" if amount < 0 else ""
    whole, part = divmod(abs(amount), 100)
    return f"{sign}{whole}.{part:02d}"


def vat_of(net: int, rate: int) -> int:
    """The VAT, in cents, of ``net`` cents at ``rate`` percent: rounded half up, per line."""
    product = net * rate
    return (product + 50) // 100 if product >= 0 else -((-product + 50) // 100)


class _Totals:
    """The lines' totals, as far as every line could be read."""

    __slots__ = ("complete", "informative", "net", "vat")

    def __init__(self) -> None:
        self.net = self.vat = 0
        self.complete = True
        self.informative = False


def check(
    details: list[Any],
    summaries: Mapping[str, Any] | None,
    document: Mapping[str, Any],
    problems: list[Problem],
) -> None:
    """Append the problems of the amounts of ``details``, ``summaries`` and payments."""
    totals = _Totals()
    aliases: set[str] = set()
    for index, line in enumerate(details):
        if not isinstance(line, Mapping):
            problems.append(
                Problem(f"Details[{index}]", "must be an object", source=SOURCES["shape"])
            )
            totals.complete = False
            continue
        _line(index, line, totals, aliases, problems)
    gross = None
    if summaries is not None:
        gross = _summaries(summaries, totals if details else None, problems)
    _payments(document, gross, problems)


def _amount(
    container: Mapping[str, Any],
    where: str,
    names: tuple[str, ...],
    problems: list[Problem],
    aliases: set[str] | None = None,
) -> int | None:
    """The amount read from the first of ``names`` (its problem appended), or ``None``."""
    for name in names:
        value = field(container, name)
        if value is None:
            continue
        amount = cents(value)
        path = f"{where}.{names[0]}" if where else names[0]
        if isinstance(amount, str):
            source = SOURCES["shape"] if amount == _NOT_A_NUMBER else SOURCES["cents"]
            problems.append(Problem(path, amount, source=source))
            return None
        if name != names[0] and aliases is not None and name not in aliases:
            aliases.add(name)
            problems.append(
                Problem(
                    path,
                    f"read from {name!r} (in every line that has it): the provider's "
                    f"samples name it {names[0]!r} (rename it, so that the provider "
                    "reads it)",
                    Severity.WARNING,
                    SOURCES["names"],
                )
            )
        return amount
    return None


def _line(
    index: int,
    line: Mapping[str, Any],
    totals: _Totals,
    aliases: set[str],
    problems: list[Problem],
) -> None:
    where = f"Details[{index}]"
    net = _amount(line, where, _NET, problems, aliases)
    vat = _amount(line, where, _VAT, problems, aliases)
    total = _amount(line, where, ("Total",), problems)
    if field(line, "IsInformative") is True:
        totals.informative = True
    if net is None or vat is None:
        totals.complete = False
        for names, amount in ((_NET, net), (_VAT, vat)):
            if amount is None and first(line, names) is None:
                problems.append(
                    Problem(
                        f"{where}.{names[0]}",
                        "is missing: the provider reads a line's amounts from NetTotal "
                        "and VATTotal",
                        Severity.WARNING,
                        SOURCES["unsure"],
                    )
                )
        return
    totals.net += net
    totals.vat += vat
    _rate(where, line, net, vat, problems)
    if (
        total is not None
        and abs(total - net - vat) > 1
        and not any(field(line, name) for name in _LINE_OTHERS)
    ):
        problems.append(
            Problem(
                f"{where}.Total",
                f"is not NetTotal plus VATTotal ({format_cents(net + vat)})",
                Severity.WARNING,
                SOURCES["unsure"],
            )
        )


def _rate(where: str, line: Mapping[str, Any], net: int, vat: int, problems: list[Problem]) -> None:
    code = field(line, "VatCategoryCode")
    if code is None:
        return
    category = number(code)
    rate = VAT_RATES.get(int(category)) if category is not None and category % 1 == 0 else None
    if rate is None:
        problems.append(
            Problem(
                f"{where}.VatCategoryCode",
                f"is not one of the tax platform's VAT categories (1 to 10): {code!r}",
                Severity.WARNING,
                SOURCES["unsure"],
            )
        )
        return
    expected = vat_of(net, rate)
    if abs(vat - expected) > 1:
        problems.append(
            Problem(
                f"{where}.VATTotal",
                f"is not the net at the category's rate: {rate}% of {format_cents(net)} "
                f"is {format_cents(expected)}",
                source=SOURCES["rates"],
            )
        )


def _summaries(
    summaries: Mapping[str, Any], totals: _Totals | None, problems: list[Problem]
) -> int | None:
    """Check the summary totals against the lines'; the gross value, if readable."""
    silent: list[Problem] = []  # the shapes of the required ones are reported already
    net = _amount(summaries, "Summaries", ("TotalNetAmount", "TotalNetValue"), silent)
    vat = _amount(summaries, "Summaries", ("TotalVATAmount",), silent)
    gross = _amount(summaries, "Summaries", ("TotalGrossValue",), silent)
    problems.extend(p for p in silent if p.source != SOURCES["shape"])
    others = 0
    simple = True
    for name, sign in _OTHER_TOTALS:
        amount = _amount(summaries, "Summaries", (name,), problems)
        if amount:
            others += sign * amount
            simple = False
    if totals is not None and totals.complete:
        severity = Severity.WARNING if totals.informative else Severity.ERROR
        for name, given, summed, lines in (
            ("TotalNetAmount", net, totals.net, "NetTotal"),
            ("TotalVATAmount", vat, totals.vat, "VATTotal"),
        ):
            if given is not None and abs(given - summed) > 1:
                problems.append(
                    Problem(
                        f"Summaries.{name}",
                        f"is not the total of the lines' {lines} ({format_cents(summed)})",
                        severity,
                        SOURCES["totals"],
                    )
                )
    if gross is not None and net is not None and vat is not None:
        expected = net + vat + others
        if abs(gross - expected) > 1:
            problems.append(
                Problem(
                    "Summaries.TotalGrossValue",
                    f"is not TotalNetAmount plus TotalVATAmount"
                    f"{'' if simple else ' and the other totals'} ({format_cents(expected)})",
                    Severity.ERROR if simple else Severity.WARNING,
                    SOURCES["totals"] if simple else SOURCES["unsure"],
                )
            )
    return gross


def _payments(document: Mapping[str, Any], gross: int | None, problems: list[Problem]) -> None:
    details = field(document, "PaymentDetails")
    methods = field(details, "PaymentMethods") if isinstance(details, Mapping) else None
    if not isinstance(methods, list) or not methods:
        return
    paid: int | None = 0
    for index, method in enumerate(methods):
        where = f"PaymentDetails.PaymentMethods[{index}]"
        amount = (
            _amount(method, where, ("Amount",), problems) if isinstance(method, Mapping) else None
        )
        paid = None if amount is None or paid is None else paid + amount
    if paid is not None and gross is not None and abs(paid - gross) > 1:
        problems.append(
            Problem(
                "PaymentDetails.PaymentMethods",
                f"add up to {format_cents(paid)}, not TotalGrossValue ({format_cents(gross)})",
                Severity.WARNING,
                SOURCES["unsure"],
            )
        )
