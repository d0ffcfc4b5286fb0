"""The rules of each type of document (``InvoiceTypeCode``): its counterparty, its VAT.

:func:`check_kind` appends the problems of a document (its JSON form, or a typed
document's view: lines may be typed lines, read by their attributes) under the rules of
its type, one :class:`Rules` per type in :data:`RULES`:

* who the counterparty is: a business in another EU country with its VAT number for an
  intra-community sale (``1.2``, ``2.2``), a business outside the EU for a third-country
  sale (``1.3``, ``2.3``), nobody for a retail document (``11.x``);
* which VAT a line may have: a line at 0 % (category 7) names its VAT exemption's
  category (``VatExemptionCategoryCode``); a sale abroad is expected at 0 %;
* what a credit names: the marks of what an ``11.4`` credits (``CorrelatedInvoices``,
  where given), none for an uncorrelated ``5.2``; the third party of an ``11.5``.

The tax platform's rules on the counterparty's country and the exemption of a 0 % line
are errors (the platform refuses such a document); what the provider's pages do not
settle is a warning (:data:`SOURCES` ``unsure``): docs/guides/documents.rst says which.
The types typed before (``11.1``, ``1.1``, ``2.1``, ``5.1``) have no rules here.
"""

from __future__ import annotations

import decimal
import operator
from collections.abc import Mapping
from typing import Any, NamedTuple

from invoicing_async._core.problems import SOURCES, Problem, Severity

from .fields import field, first, folded, text_of, tin

__all__ = ["EU_COUNTRIES", "RULES", "Rules", "check_kind"]

#: The member states of the EU by their ISO 3166 code (Greece as ``GR``; its VAT
#: prefix ``EL`` is read as ``GR``).
EU_COUNTRIES = frozenset(
    [
        "AT",
        "BE",
        "BG",
        "CY",
        "CZ",
        "DE",
        "DK",
        "EE",
        "ES",
        "FI",
        "FR",
        "GR",
        "HR",
        "HU",
        "IE",
        "IT",
        "LT",
        "LU",
        "LV",
        "MT",
        "NL",
        "PL",
        "PT",
        "RO",
        "SE",
        "SI",
        "SK",
    ]
)


class Rules(NamedTuple):
    """What one type of document requires."""

    #: What it is called in a problem's message.
    name: str
    #: Where its counterparty is: ``"eu"`` (another member state), ``"abroad"`` (outside
    #: the EU), or ``None`` (not checked).
    counterparty: str | None = None
    #: How sure a missing counterparty's VAT number is refused (``None``: not checked).
    counterparty_vat: Severity | None = None
    #: Whether a missing counterparty is worth a warning (where it is not required).
    counterparty_expected: bool = False
    #: Whether its lines are expected at 0 % (a sale abroad): a taxed line is a warning.
    zero_rated: bool = False
    #: ``"optional"``: the marks it credits are checked where given; ``"ignored"``: it is
    #: not correlated (marks are a warning); ``None``: not checked.
    correlated: str | None = None
    #: Whether it may name a third party (``ThirdParty``), whose VAT number it then has.
    third_party: bool = False


#: The rules of each type, by ``InvoiceTypeCode``. Every type here requires the VAT
#: exemption of a line at 0 %.
RULES: dict[str, Rules] = {
    "11.2": Rules("a service receipt (11.2)"),
    "11.3": Rules("a simplified invoice (11.3)"),
    "11.4": Rules("a credit receipt (11.4)", correlated="optional"),
    "11.5": Rules("a receipt on behalf of a third party (11.5)", third_party=True),
    "5.2": Rules(
        "an uncorrelated credit note (5.2)", counterparty_expected=True, correlated="ignored"
    ),
    "1.2": Rules("an intra-community sales invoice (1.2)", "eu", Severity.ERROR, zero_rated=True),
    "2.2": Rules("an intra-community service invoice (2.2)", "eu", Severity.ERROR, zero_rated=True),
    "1.3": Rules(
        "a third-country sales invoice (1.3)", "abroad", Severity.WARNING, zero_rated=True
    ),
    "2.3": Rules(
        "a third-country service invoice (2.3)", "abroad", Severity.WARNING, zero_rated=True
    ),
}

#: The VAT category of a line at 0 % that needs an exemption (7; 8 is a record without VAT).
_EXEMPT_CATEGORY = 7
#: The tax platform's VAT exemption categories (``VatExemptionCategoryCode``): 1 to 31.
_EXEMPTIONS = range(1, 32)
#: A mark: a positive 64-bit integer (a .NET ``long``), at most 19 digits as text.
_MARK_LIMIT = 2**63
_MARK_DIGITS = 19
_SHOWN = 20
_TYPES = SOURCES["types"]
_UNSURE = SOURCES["unsure"]
_SHAPE = SOURCES["shape"]


def check_kind(document: Mapping[str, Any], problems: list[Problem]) -> None:
    """Append the problems of ``document`` under the rules of its ``InvoiceTypeCode``."""
    code = document.get("InvoiceTypeCode")
    if code is None:
        code = first(document, ("InvoiceTypeCode", "InvoiceType"))
    rules = RULES.get(code) if code.__class__ is str else None
    if rules is None:
        return
    if rules.counterparty is not None or rules.counterparty_expected:
        _counterparty(document, rules, problems)
    details = field(document, "Details")
    if isinstance(details, list):
        _lines(details, rules, problems)
    if rules.correlated is not None:
        _correlated(document, rules, problems)
    if rules.third_party:
        _third_party(document, problems)


def _shown(value: Any) -> str:
    text = text_of(value)
    return repr(text if len(text) <= _SHOWN else f"{text[:_SHOWN]}…")


def _country(party: Mapping[str, Any]) -> tuple[Any, str]:
    """A party's country code as written, and its path (``Address.CountryCode``)."""
    address = field(party, "Address")
    if isinstance(address, Mapping):
        code = field(address, "CountryCode")
        if code is not None:
            return code, "Address.CountryCode"
    return field(party, "CountryCode"), "Address.CountryCode"


def _iso(code: Any) -> str | None:
    """An ISO 3166 two-letter code, upper case (``EL`` read as ``GR``); ``None`` if not one."""
    if code.__class__ is not str:
        return None
    text = code.strip()
    if len(text) != 2 or not (text.isascii() and text.isalpha()):
        return None
    text = text.upper()
    return "GR" if text == "EL" else text


def _counterparty(document: Mapping[str, Any], rules: Rules, problems: list[Problem]) -> None:
    party = field(document, "CounterParty")
    if not isinstance(party, Mapping):
        if rules.counterparty is not None:
            problems.append(
                Problem(
                    "CounterParty",
                    f"is required: {rules.name} names its customer, with its country",
                    source=_TYPES,
                )
            )
        elif party is None:
            problems.append(
                Problem(
                    "CounterParty",
                    f"is missing: {rules.name} credits a business customer (name it)",
                    Severity.WARNING,
                    _UNSURE,
                )
            )
        return
    if rules.counterparty is None:
        return
    country = _counterparty_country(document, party, rules, problems)
    _counterparty_vat(party, country, rules, problems)


def _counterparty_country(
    document: Mapping[str, Any], party: Mapping[str, Any], rules: Rules, problems: list[Problem]
) -> str | None:
    written, where = _country(party)
    path = f"CounterParty.{where}"
    if written is None or written == "":
        problems.append(
            Problem(path, f"is required: {rules.name} names the customer's country", source=_TYPES)
        )
        return None
    country = _iso(written)
    if country is None:
        problems.append(
            Problem(path, f"must be an ISO 3166 two-letter code ({_shown(written)})", source=_SHAPE)
        )
        return None
    issuer = field(document, "Issuer")
    home = _iso(_country(issuer)[0]) if isinstance(issuer, Mapping) else None
    home = home or "GR"
    if rules.counterparty == "eu":
        if country == home:
            wrong = (
                f"is the issuer's country ({home}): {rules.name} is a sale to another EU "
                "country (a domestic sale is a 1.1 or a 2.1)"
            )
        elif country not in EU_COUNTRIES:
            wrong = (
                f"is not an EU member state ({country}): {rules.name} is a sale to another "
                "EU country (outside the EU: a 1.3 or a 2.3)"
            )
        else:
            return country
    elif country in EU_COUNTRIES:
        wrong = (
            f"is an EU member state ({country}): {rules.name} is a sale outside the EU "
            "(within it: a 1.2 or a 2.2; in the issuer's country: a 1.1 or a 2.1)"
        )
    else:
        return country
    problems.append(Problem(path, wrong, source=_TYPES))
    return None


def _counterparty_vat(
    party: Mapping[str, Any], country: str | None, rules: Rules, problems: list[Problem]
) -> None:
    vat = field(party, "Vat")
    if vat is None or vat == "":
        if rules.counterparty_vat is not None:
            sure = rules.counterparty_vat is Severity.ERROR
            problems.append(
                Problem(
                    "CounterParty.Vat",
                    f"is required: {rules.name} names the customer's VAT number"
                    if sure
                    else f"is missing: {rules.name} names the customer's VAT number "
                    "where it has one",
                    rules.counterparty_vat,
                    _TYPES if sure else _UNSURE,
                )
            )
        return
    if not isinstance(vat, (str, int)) or isinstance(vat, bool):
        problems.append(Problem("CounterParty.Vat", "must be a string", source=_SHAPE))
        return
    text = (tin(vat) or "").strip()
    prefix = _iso(text[:2]) if len(text) > 2 and text[:2].isalpha() else None
    if rules.counterparty == "eu" and country and prefix and prefix != country:
        problems.append(
            Problem(
                "CounterParty.Vat",
                f"starts with {text[:2]!r}, not the customer's country ({country}): an EU "
                "VAT number starts with its country's code",
                Severity.WARNING,
                _UNSURE,
            )
        )


def _whole(value: Any) -> int | None:
    """A small whole number (a code), as JSON or a typed document writes one; else ``None``."""
    kind = value.__class__
    if kind is int:
        return value  # type: ignore[no-any-return]
    if kind is str:
        text = value.strip()
        return int(text) if text.isascii() and text.isdigit() and len(text) <= 6 else None
    if kind is float:
        return int(value) if value.is_integer() and abs(value) < 1e6 else None
    if (
        kind is decimal.Decimal
        and value.is_finite()
        and value.adjusted() < 6
        and value == value.to_integral_value()
    ):
        return int(value)
    return None


def _read_line(line: Any) -> tuple[Any, Any]:
    """A line's VAT category and exemption as written: a JSON line's, in any case."""
    if line.__class__ is dict:  # the exact names first, as the samples write them
        category, exemption = line.get("VatCategoryCode"), line.get(_EXEMPTION)
        if exemption is None and _EXEMPTION_SIZE in map(len, line):
            exemption = folded(line, _EXEMPTION)
        return (field(line, "VatCategoryCode") if category is None else category), exemption
    if isinstance(line, Mapping):
        return field(line, "VatCategoryCode"), field(line, _EXEMPTION)
    return getattr(line, "vat_category", None), getattr(line, "vat_exemption", None)


_EXEMPTION = "VatExemptionCategoryCode"
_EXEMPTION_SIZE = len(_EXEMPTION)
#: A typed line's category and exemption (the typed view's lines: :func:`_typed_lines`).
_CATEGORY = operator.attrgetter("vat_category")
_EXEMPTION_OF = operator.attrgetter("vat_exemption")


def _typed_lines(details: list[Any], rules: Rules) -> bool:
    """Whether typed lines hold the rules without being read one by one (at C speed).

    Each line at 0 % with an exemption of the platform's, and (a sale abroad) no taxed
    line: the common cases. ``False`` for JSON lines, or typed lines to read one by one.
    """
    try:
        exemptions = set(map(_EXEMPTION_OF, details))
        categories = set(map(_CATEGORY, details))
    except AttributeError:  # JSON lines
        return False
    unexempt = None in exemptions
    if unexempt and _EXEMPT_CATEGORY in categories:
        return False  # which line at 0 % has none: read them
    if any(code.__class__ is not int or code not in _EXEMPTIONS for code in exemptions - {None}):
        return False
    return not (rules.zero_rated and categories - {_EXEMPT_CATEGORY, 8})


def _lines(details: list[Any], rules: Rules, problems: list[Problem]) -> None:
    if _typed_lines(details, rules):
        return
    taxed = None
    for index, line in enumerate(details):
        category, exemption = _read_line(line)
        code = category if category.__class__ is int else _whole(category)
        if exemption is None:
            if code == _EXEMPT_CATEGORY:
                problems.append(
                    Problem(
                        f"Details[{index}].VatExemptionCategoryCode",
                        "is required: a line at 0 % (VAT category 7) names the category of "
                        "its VAT exemption (the tax platform's code, 1 to 31)",
                        source=_TYPES,
                    )
                )
        else:
            reason = _whole(exemption)
            if reason is None or exemption.__class__ is bool:
                problems.append(
                    Problem(
                        f"Details[{index}].VatExemptionCategoryCode",
                        f"must be an integer: the tax platform's VAT exemption category "
                        f"({_shown(exemption)})",
                        source=_SHAPE,
                    )
                )
            elif reason not in _EXEMPTIONS:
                problems.append(
                    Problem(
                        f"Details[{index}].VatExemptionCategoryCode",
                        f"is not one of the tax platform's VAT exemption categories (1 to "
                        f"31): {_shown(exemption)}",
                        Severity.WARNING,
                        _UNSURE,
                    )
                )
        if rules.zero_rated and taxed is None and code not in (None, _EXEMPT_CATEGORY, 8):
            taxed = index
    if taxed is not None:
        problems.append(
            Problem(
                f"Details[{taxed}].VatCategoryCode",
                f"is a taxed category: {rules.name} is usually at 0 % (category 7) with "
                "the exemption's category (first such line)",
                Severity.WARNING,
                _UNSURE,
            )
        )


def _is_mark(value: Any) -> bool:
    if value.__class__ is str:
        text = value.strip()
        return text.isascii() and text.isdigit() and len(text) <= _MARK_DIGITS and int(text) > 0
    return value.__class__ is int and 0 < value < _MARK_LIMIT


def _correlated(document: Mapping[str, Any], rules: Rules, problems: list[Problem]) -> None:
    marks = field(document, "CorrelatedInvoices")
    if marks is None or marks == []:
        return  # the provider's 11.4 sample names none: see the guide
    if not isinstance(marks, (list, tuple)):
        problems.append(Problem("CorrelatedInvoices", "must be a list of marks", source=_SHAPE))
        return
    for index, mark in enumerate(marks):
        if not _is_mark(mark):
            problems.append(
                Problem(
                    f"CorrelatedInvoices[{index}]",
                    f"is not a mark (a positive 64-bit integer): {_shown(mark)}",
                    source=_SHAPE,
                )
            )
    if rules.correlated == "ignored":
        problems.append(
            Problem(
                "CorrelatedInvoices",
                f"names marks: {rules.name} is not correlated (a credit of those "
                "invoices is a 5.1)",
                Severity.WARNING,
                _UNSURE,
            )
        )


def _third_party(document: Mapping[str, Any], problems: list[Problem]) -> None:
    party = field(document, "ThirdParty")
    if party is None:
        return  # the provider's sample has none: see the guide
    if not isinstance(party, Mapping):
        problems.append(Problem("ThirdParty", "must be an object", source=_SHAPE))
        return
    vat = field(party, "Vat")
    if vat is None or vat == "":
        problems.append(
            Problem(
                "ThirdParty.Vat",
                "is missing: the third party a receipt sells for is named by its VAT number",
                Severity.WARNING,
                _UNSURE,
            )
        )
