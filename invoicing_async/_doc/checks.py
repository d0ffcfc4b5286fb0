"""The provider's rules about a document, in one place: what it would answer with a 400.

:func:`check_document` reads a document (a mapping: its JSON form) as the provider reads
it (:mod:`._fields`: names in any case, numbers as numbers or numeric text) and returns
every :class:`Problem` it finds, in the order of the rules:

* the required fields and their shapes (``Issuer.Vat``, ``Series``, ``Number``,
  ``DateIssued``, ``InvoiceTypeCode``, ``Details``, the ``Summaries`` totals);
* the issuer's TIN and its check digit (the Greek ΑΦΜ rule);
* the amounts (:mod:`._amounts`): in euro and cents, each line's VAT its net at its
  category's rate (rounded per line), the summaries the totals of the lines, within a
  cent;
* the rules of its type (:mod:`.kinds`): the counterparty of a sale abroad, the VAT
  exemption of a line at 0 %, the marks a credit names;
* in any object, a member written twice with different values (``Series`` beside
  ``series``, :mod:`._binding`): the provider would read one of them, the rules the
  other. An error: the library refuses such a document wherever it enters, checked or
  not.

Each problem names the field as the provider's samples write it (``Details[2].VATTotal``)
and where its rule comes from (:data:`SOURCES`). A rule the provider is known to enforce
is an :attr:`Severity.ERROR`; one it may not (a name it may not read, a total it may not
compare) is a :attr:`Severity.WARNING`: never a refusal. The client checks with these
rules (``invoicing_async.documents.check``, a deferred sale, a checked batch or outbox),
and the sandbox answers its 400 with them, through its seam.
"""

from __future__ import annotations

import datetime as dt
import functools
import operator
import re
from collections.abc import Mapping
from typing import Any

from invoicing_async._core.problems import SOURCES, Problem, Severity, twin_problem
from invoicing_async._doc import amounts as _amounts

from .binding import suspect, twins
from .fields import field, first_named, number, text_of, tin
from .kinds import check_kind

__all__ = [
    "REQUIRED_FIELDS",
    "check_digit",
    "check_document",
    "errors_of",
    "valid_tin",
]


def check_digit(digits: str) -> str:
    """The check digit of a Greek TIN's first eight digits (the ΑΦΜ rule).

    The sum of the eight digits weighted by 2⁸ … 2¹, modulo 11, modulo 10.
    """
    total = sum(map(operator.mul, map(int, digits[:8]), _WEIGHTS))
    return str(total % 11 % 10)


_WEIGHTS = (256, 128, 64, 32, 16, 8, 4, 2)


@functools.lru_cache(maxsize=4096)  # a till or an ERP sends for a few issuers, again and again
def valid_tin(digits: str) -> bool:
    """Whether ``digits`` is a Greek TIN: nine ASCII digits, the last the check digit."""
    return (
        len(digits) == 9
        and digits.isascii()
        and digits.isdigit()
        and check_digit(digits) == digits[8]
    )


def _key(value: Any) -> str | None:
    if (isinstance(value, str) and value.strip()) or (
        isinstance(value, int) and not isinstance(value, bool)
    ):
        return None
    return "must be a non-empty string or an integer"


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) and value.strip() else "must be a non-empty string"


def _object(value: Any) -> str | None:
    if value.__class__ is dict or isinstance(value, Mapping):
        return None
    return "must be an object"


def _lines(value: Any) -> str | None:
    return None if isinstance(value, list) and value else "must be a non-empty list"


#: An ISO 8601 date, or date-time with an optional fraction and offset (no offset: UTC).
_DATE = re.compile(
    r"\s*(\d{4})-(\d\d)-(\d\d)(?:[Tt ](\d\d):(\d\d)(?::(\d\d)(?:[.,]\d{1,9})?)?"
    r"\s*(Z|z|[+-](\d\d)(?::?(\d\d))?)?)?\s*"
)


def _date(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be an ISO 8601 date or date-time string"
    if len(value) == 10 and value[4] == value[7] == "-" and value.isascii():  # a date
        try:
            dt.date.fromisoformat(value)
        except ValueError:
            return "must be an ISO 8601 date or date-time"
        return None
    if (  # yyyy-MM-ddTHH:mm:ss, as the samples write it: read at C speed
        len(value) == 19
        and value[4] == value[7] == "-"
        and value[10] == "T"
        and value[13] == value[16] == ":"
        and value.isascii()
    ):
        try:
            dt.datetime.fromisoformat(value)
        except ValueError:
            return "must be an ISO 8601 date or date-time"
        return None
    match = _DATE.fullmatch(value)
    try:
        if match is None:
            raise ValueError(value)  # noqa: TRY301  (one answer for both)
        year, month, day, hour, minute, second, _zone, hours, minutes = match.groups()
        dt.date(int(year), int(month), int(day))
        dt.time(int(hour or 0), int(minute or 0), int(second or 0))
        if int(hours or 0) > 23 or int(minutes or 0) > 59:
            raise ValueError(value)  # noqa: TRY301
    except ValueError:
        return "must be an ISO 8601 date or date-time"
    return None


def _total(value: Any) -> str | None:
    return _amounts.shape(value)


def _gross(value: Any) -> str | None:
    if value.__class__ is float and 0 <= value < 1e13:  # an amount that cents reads as is
        return None
    problem = _amounts.shape(value)
    if problem is None and number(value) < 0:  # type: ignore[operator]
        return "must be a non-negative number"
    return problem


# (path, names it is read from: the provider's first, check of its shape). A dotted path
# names a member of the object before the dot; each is required unless lenient.
_FIELDS: tuple[tuple[str, tuple[str, ...], Any], ...] = (
    ("Issuer", ("Issuer",), _object),
    ("Issuer.Vat", ("Vat",), _key),
    ("Series", ("Series",), _key),
    ("Number", ("Number",), _key),
    ("DateIssued", ("DateIssued",), _date),
    ("InvoiceTypeCode", ("InvoiceTypeCode", "InvoiceType"), _text),
    ("Details", ("Details",), _lines),
    ("Summaries", ("Summaries",), _object),
    ("Summaries.TotalNetAmount", ("TotalNetAmount", "TotalNetValue"), _total),
    ("Summaries.TotalVATAmount", ("TotalVATAmount",), _total),
    ("Summaries.TotalGrossValue", ("TotalGrossValue",), _gross),
)

#: The fields the provider requires in every document, as dotted paths.
REQUIRED_FIELDS = tuple(path for path, _names, _check in _FIELDS)
#: :data:`_FIELDS` with each path's parent: ``(path, parent's path, names, check)``.
_TABLE = tuple((path, path.rpartition(".")[0], names, check) for path, names, check in _FIELDS)


def check_document(
    document: Any,
    *,
    require: bool = True,
    issuer_known: bool = False,
    lines_hold: bool = False,
) -> list[Problem]:
    """Every problem of ``document`` (its JSON form: a mapping), in the rules' order.

    :param require: whether a missing field is a problem (``False``: a field is checked
        only when present, the sandbox's ``require_fields=False``).
    :param issuer_known: the issuer's VAT number was matched to an API key (the
        provider's own check, answered 401): its TIN is not checked again.
    :param lines_hold: every line is known to hold the rules of a line and the summaries
        to be the lines' totals (a typed document's, computed by its model with the
        rules' own arithmetic): the lines' amounts are not read again.
    """
    if not isinstance(document, Mapping):
        return [Problem("", "the document must be a JSON object", source=SOURCES["shape"])]
    problems: list[Problem] = []
    present = _fields_of(document, require, problems)
    vat = present.get("Issuer.Vat")
    if vat is not None and not issuer_known:
        _issuer_tin(vat, problems)
    _counterparty_tin(document, problems)
    details, summaries = present.get("Details"), present.get("Summaries")
    _amounts.check(
        details if isinstance(details, list) else [],
        summaries if isinstance(summaries, Mapping) else None,
        document,
        problems,
        lines_hold=lines_hold,
    )
    check_kind(document, problems)
    if suspect(document):  # a member written twice, with different values: any object
        problems.extend(map(twin_problem, twins(document)))
    return problems


def errors_of(problems: list[Problem]) -> list[Problem]:
    """The problems the provider refuses a document for."""
    return [problem for problem in problems if problem.severity is Severity.ERROR]


def _fields_of(
    document: Mapping[str, Any], require: bool, problems: list[Problem]
) -> dict[str, Any]:
    """The required fields' values that have their shape, by path; problems for the rest."""
    present: dict[str, Any] = {}
    for path, parent_path, names, check in _TABLE:
        parent = present.get(parent_path) if parent_path else document
        if parent is None:
            continue  # a member of what is missing or not an object is not looked for
        value = parent.get(names[0])  # the provider's name, as written: one lookup
        used = names[0]
        if value is None:
            value, used = first_named(parent, names)
            if value is None:
                if require:
                    problems.append(Problem(path, "is required", source=SOURCES["required"]))
                continue
        problem = check(value)
        if problem:
            problems.append(Problem(path, problem, source=SOURCES["shape"]))
            continue
        present[path] = value
        if used is not names[0]:
            problems.append(_alias(path, used, names[0]))
    return present


def _alias(path: str, used: str, read: str) -> Problem:
    return Problem(
        path,
        f"read from {used!r}: the provider's samples name it {read!r} (rename it, so "
        "that the provider reads it)",
        Severity.WARNING,
        SOURCES["names"],
    )


def _issuer_tin(vat: Any, problems: list[Problem]) -> None:
    digits = tin(vat) or ""
    if valid_tin(digits):
        return
    message = (
        "is not a valid TIN: its check digit is wrong"
        if len(digits) == 9 and digits.isdigit()
        else "must be the issuer's TIN: nine digits, with or without 'EL'"
    )
    problems.append(Problem("Issuer.Vat", message, source=SOURCES["tin"]))


def _counterparty_tin(document: Mapping[str, Any], problems: list[Problem]) -> None:
    """A Greek customer's TIN with a wrong check digit: a warning.

    A customer may be foreign, and the provider's samples hold placeholders.
    """
    party = field(document, "CounterParty")
    vat = field(party, "Vat") if isinstance(party, Mapping) else None
    if not vat or not isinstance(vat, (str, int)) or isinstance(vat, bool):
        return
    text = text_of(vat).strip()
    greek = text[:2].upper() in ("EL", "GR") or (text.isdigit() and _greek(party))
    digits = tin(text) or ""
    if greek and len(digits) == 9 and digits.isdigit() and not valid_tin(digits):
        problems.append(
            Problem(
                "CounterParty.Vat",
                "is not a valid Greek TIN: its check digit is wrong",
                Severity.WARNING,
                SOURCES["tin"],
            )
        )


def _greek(party: Mapping[str, Any]) -> bool:
    address = field(party, "Address")  # the samples' place of a party's country
    country = field(address, "CountryCode") if isinstance(address, Mapping) else None
    if country is None:
        country = field(party, "CountryCode") or field(party, "Country")
    return str(country or "").upper() in ("GR", "EL")
