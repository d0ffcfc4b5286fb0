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

from invoicing_async._core.problems import SOURCES, Problem, Severity

from .fields import field, first, first_named, number, text_of

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
_TOTAL = ("Total",)
_AMOUNT = ("Amount",)
_NOT_A_NUMBER = "must be a number"
_CENT = decimal.Decimal("0.01")
_HUNDRED = decimal.Decimal(100)


def cents(value: Any) -> int | str:
    """An amount in whole cents, or why it is not one (``must be a number`` …)."""
    kind = value.__class__
    if kind is float and value - value == 0 and -1e13 < value < 1e13:
        # A float has at most two decimals (by its shortest text) exactly when the cents
        # it rounds to, divided back, are the float itself: no text is made.
        amount = round(value * 100)
        return amount if amount / 100 == value else _too_fine(repr(value))
    if kind is int:
        return value * 100 if -_LARGEST < value < _LARGEST else _NOT_A_NUMBER
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


#: No amount is this large, in euro: its cents would have more than 28 digits, the
#: precision decimal arithmetic quantizes an amount in (so a decimal or a text this
#: large is no number either); and its text and its sums stay short.
_LARGEST = 10**26


def _too_fine(text: str) -> str:
    if len(text) > _SHOWN:  # a text of a million zeros and a one is said in a few words
        text = f"{text[: _SHOWN - 10]}…, {len(text):,} characters"
    return f"has more than two decimals ({text}): round it to the cent"


_SHOWN = 40


def shape(value: Any) -> str | None:
    """``must be a number`` unless ``value`` is a number (or numeric text) of an amount.

    As :func:`cents` reads it: finite, and no larger than an amount can be (a float of
    ``1e300`` or a decimal of 30 digits is no amount); its decimals are not looked at.
    """
    kind = value.__class__
    if kind is float:  # NaN is never in range
        return None if -1e13 < value < 1e13 or cents(value) != _NOT_A_NUMBER else _NOT_A_NUMBER
    if kind is int:
        return None if -_LARGEST < value < _LARGEST else _NOT_A_NUMBER
    if (  # a typed document's: what quantizes to the cent in the context's precision
        kind is decimal.Decimal
        and value.is_finite()
        and value.adjusted() < decimal.getcontext().prec - 2
    ):
        return None
    return _NOT_A_NUMBER if cents(value) == _NOT_A_NUMBER else None


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

    __slots__ = ("aliases", "complete", "net", "vat")

    def __init__(self) -> None:
        self.net = self.vat = 0
        self.complete = True
        self.aliases: set[str] = set()


def check(
    details: list[Any],
    summaries: Mapping[str, Any] | None,
    document: Mapping[str, Any],
    problems: list[Problem],
    *,
    lines_hold: bool = False,
) -> None:
    """Append the problems of the amounts of ``details``, ``summaries`` and payments.

    :param lines_hold: the lines hold every rule of a line, and the summaries are their
        totals: the lines are not read (see :func:`~._checks.check_document`).
    """
    totals = _Totals()
    written = None if lines_hold else _as_written(details)
    if written is not None:
        totals.net, totals.vat = written
    for index, line in enumerate(details if written is None and not lines_hold else ()):
        if not isinstance(line, Mapping):
            problems.append(
                Problem(f"Details[{index}]", "must be an object", source=SOURCES["shape"])
            )
            totals.complete = False
            continue
        _line(index, line, totals, totals.aliases, problems)
    gross = None
    if summaries is not None:
        compared = details and not lines_hold
        gross = _summaries(summaries, totals if compared else None, details, problems)
    _payments(document, gross, problems)


def _amount(
    container: Mapping[str, Any],
    where: Any,
    names: tuple[str, ...],
    problems: list[Problem],
    aliases: set[str] | None = None,
) -> int | None:
    """The amount read from the first of ``names`` (its problem appended), or ``None``.

    ``where`` is the container's path, or the index of a line (its path made only for a
    problem).
    """
    name = names[0]
    value = container.get(name)
    if value is None:
        value, name = first_named(container, names)
        if value is None:
            return None
    amount = cents(value)
    if amount.__class__ is int and name is names[0]:
        return amount
    path = f"{_path(where)}.{names[0]}"
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


def _path(where: Any) -> str:
    return f"Details[{where}]" if where.__class__ is int else str(where)


class _Payment(int):
    """The index of a payment method: its path, made only for a problem."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"PaymentDetails.PaymentMethods[{int(self)}]"


def _as_written(details: list[Any]) -> tuple[int, int] | None:  # noqa: C901, PLR0912  (a hot loop, inlined)
    """The lines' net and VAT totals in cents, if every line holds every rule of a line.

    The common case, checked at the cost of a few lookups a line: each written as the
    samples write one (amounts as numbers: floats as JSON has them, or decimals as a
    typed document has them; the category's code). ``None``: some line is to be looked
    at closer, rule by rule (and any amount :func:`_whole` does not read, such as a
    decimal ``NaN``, is reported there).
    """
    net_sum = vat_sum = 0
    for line in details:
        if line.__class__ is not dict:
            return None
        get = line.get
        net, vat = get("NetTotal"), get("VATTotal")
        if net.__class__ is float and vat.__class__ is float:  # JSON's: inlined
            # A float has at most two decimals (by its shortest text) exactly when the
            # cents it rounds to, divided back, are the float itself (in the cents' range).
            if not (-1e13 < net < 1e13 and -1e13 < vat < 1e13):  # NaN, infinite, too large
                return None
            net_cents, vat_cents = round(net * 100), round(vat * 100)
            if net_cents / 100 != net or vat_cents / 100 != vat:
                return None
        else:  # a typed document's decimals, ints, or a mix
            net_whole, vat_whole = _whole(net), _whole(vat)
            if net_whole is None or vat_whole is None:
                return None
            net_cents, vat_cents = net_whole, vat_whole
        code = get("VatCategoryCode")
        rate = VAT_RATES.get(code) if code.__class__ is int else None
        if rate is None:
            return None
        product = net_cents * rate  # vat_of, inlined
        expected = (product + 50) // 100 if product >= 0 else -((50 - product) // 100)
        if not -1 <= vat_cents - expected <= 1:
            return None
        total = get("Total")
        if total is not None:
            if total.__class__ is float and -1e13 < total < 1e13:
                total_cents = round(total * 100)
                if total_cents / 100 != total:
                    return None
            elif (  # a typed line's: its net plus its VAT (compared once finite)
                total.__class__ is net.__class__ is vat.__class__ is decimal.Decimal
                and total.is_finite()
                and total == net + vat
            ):
                total_cents = net_cents + vat_cents
            else:
                whole = _whole(total)
                if whole is None:
                    return None
                total_cents = whole
            if not -1 <= total_cents - net_cents - vat_cents <= 1:
                return None
        net_sum += net_cents
        vat_sum += vat_cents
    return net_sum, vat_sum


def _whole(value: Any) -> int | None:
    """``value`` in cents, if it is an amount in cents the hot loop reads; else ``None``.

    An int, or a float or decimal with at most two decimals, below 10¹³ in magnitude.
    ``None`` for anything else (a decimal ``NaN`` or infinity, a huge exponent, text):
    the rules read it, one by one, and say what it is.
    """
    kind = value.__class__
    if kind is decimal.Decimal:
        # Finite (NaN and infinities have no int), and in the range of a float's cents:
        # a huge exponent would overflow, or make an int of a million digits.
        if not value.is_finite() or value.adjusted() > _DIGITS:
            return None
        hundreds = value * _HUNDRED
        whole = int(hundreds)
        return whole if whole == hundreds else None
    if kind is int:
        return value * 100 if -_LARGEST < value < _LARGEST else None
    if kind is float and -1e13 < value < 1e13:
        cents = round(value * 100)
        return cents if cents / 100 == value else None
    return None


#: The largest power of ten (its exponent) an amount :func:`_whole` reads reaches: 10¹²,
#: below 10¹³ as floats are read.
_DIGITS = 12


def _line(
    index: int,
    line: Mapping[str, Any],
    totals: _Totals,
    aliases: set[str],
    problems: list[Problem],
) -> None:
    net = _amount(line, index, _NET, problems, aliases)
    vat = _amount(line, index, _VAT, problems, aliases)
    total = _amount(line, index, _TOTAL, problems)
    if net is None or vat is None:
        totals.complete = False
        for names, amount in ((_NET, net), (_VAT, vat)):
            if amount is None and first(line, names) is None:
                problems.append(
                    Problem(
                        f"{_path(index)}.{names[0]}",
                        "is missing: the provider reads a line's amounts from NetTotal "
                        "and VATTotal",
                        Severity.WARNING,
                        SOURCES["unsure"],
                    )
                )
        return
    totals.net += net
    totals.vat += vat
    _rate(index, line, net, vat, problems)
    if (
        total is not None
        and abs(total - net - vat) > 1
        and not any(field(line, name) for name in _LINE_OTHERS)
    ):
        problems.append(
            Problem(
                f"{_path(index)}.Total",
                f"is not NetTotal plus VATTotal ({format_cents(net + vat)})",
                Severity.WARNING,
                SOURCES["unsure"],
            )
        )


def _rate(index: int, line: Mapping[str, Any], net: int, vat: int, problems: list[Problem]) -> None:
    code = line.get("VatCategoryCode")
    if code is None:
        code = field(line, "VatCategoryCode")
        if code is None:
            return
    if code.__class__ is int:
        rate = VAT_RATES.get(code)
    else:
        category = number(code)
        whole = category is not None and category % 1 == 0
        rate = VAT_RATES.get(int(category)) if whole else None  # type: ignore[arg-type]
    if rate is None:
        problems.append(
            Problem(
                f"{_path(index)}.VatCategoryCode",
                f"is not one of the tax platform's VAT categories (1 to 10): "
                f"{text_of(code)[:20]!r}",
                Severity.WARNING,
                SOURCES["unsure"],
            )
        )
        return
    expected = vat_of(net, rate)
    if abs(vat - expected) > 1:
        problems.append(
            Problem(
                f"{_path(index)}.VATTotal",
                f"is not the net at the category's rate: {rate}% of {format_cents(net)} "
                f"is {format_cents(expected)}",
                source=SOURCES["rates"],
            )
        )


def _summaries(
    summaries: Mapping[str, Any],
    totals: _Totals | None,
    details: list[Any],
    problems: list[Problem],
) -> int | None:
    """Check the summary totals against the lines'; the gross value, if readable."""
    silent: list[Problem] = []  # the shapes of the required ones are reported already
    net = _amount(summaries, "Summaries", ("TotalNetAmount", "TotalNetValue"), silent)
    vat = _amount(summaries, "Summaries", ("TotalVATAmount",), silent)
    gross = _amount(summaries, "Summaries", ("TotalGrossValue",), silent)
    problems.extend(p for p in silent if p.source != SOURCES["shape"])
    others = 0
    simple = True
    for name, sign in _OTHER_TOTALS if len(summaries) > 3 else ():  # more than the three
        value = summaries.get(name)
        if value == 0 and value.__class__ in (float, int):  # most often: written as zero
            continue
        amount = _amount(summaries, "Summaries", (name,), problems)
        if amount:
            others += sign * amount
            simple = False
    if totals is not None and totals.complete:
        for name, given, summed, lines in (
            ("TotalNetAmount", net, totals.net, "NetTotal"),
            ("TotalVATAmount", vat, totals.vat, "VATTotal"),
        ):
            if given is not None and abs(given - summed) > 1:
                # Informative lines may not count: then it is not sure (looked for only now).
                sure = not any(_informative(line) for line in details)
                problems.append(
                    Problem(
                        f"Summaries.{name}",
                        f"is not the total of the lines' {lines} ({format_cents(summed)})",
                        Severity.ERROR if sure else Severity.WARNING,
                        SOURCES["totals"] if sure else SOURCES["unsure"],
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


def _informative(line: Any) -> bool:
    return isinstance(line, Mapping) and field(line, "IsInformative") is True


def _payments(document: Mapping[str, Any], gross: int | None, problems: list[Problem]) -> None:
    details = field(document, "PaymentDetails")
    methods = field(details, "PaymentMethods") if isinstance(details, Mapping) else None
    if not isinstance(methods, list) or not methods:
        return
    paid: int | None = 0
    for index, method in enumerate(methods):
        amount = (
            _amount(method, _Payment(index), _AMOUNT, problems)
            if method.__class__ is dict or isinstance(method, Mapping)
            else None
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
