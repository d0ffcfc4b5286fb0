"""Documents checked where they enter: the rules of :mod:`._checks` applied to any kind.

A document is a mapping, a typed document (:mod:`._doctypes`), or its JSON as bytes or
text; :func:`problems_of` reads each as the provider would (the JSON form: :func:`readable`)
and returns every problem the rules find. :func:`require_valid` raises
:class:`~invoicing_async.InvalidDocumentError` when one of them is an error: a
:class:`~invoicing_async.Deferral` calls it for each sale, ``outbox.enqueue(...,
check=True)`` for each document. :class:`Checked` marks a document to be checked where
it is serialised (:func:`~._documents.serialize_document`), so that a batch's document
the provider would refuse ends refused, unsent, in its own outcome. :func:`hostile_json`
says why valid JSON is no document Python reads (too deep, a number too long), naming the
field: for JSON given to :func:`problems_of`, and to the command's readers.
"""

from __future__ import annotations

import json
import operator
import sys
from collections.abc import Mapping
from typing import Any

import attrs

from invoicing_async._core.errors import AmbiguousDocumentError, InvalidDocumentError
from invoicing_async._core.problems import SOURCES, Problem, twin_problem

from .binding import loads, suspect, twins
from .checks import check_document, errors_of
from .document import Checked, Kind, Submission, describe, register_kind
from .fields import Digits, too_long_in
from .types import DocumentBase, Line, Party, Summaries

__all__ = [
    "Checked",
    "ambiguities",
    "checked",
    "hostile_json",
    "problems_of",
    "readable",
    "require_valid",
    "too_long_in",
]


def checked(document: Any) -> Any:
    """``document`` marked to be checked where it is sent (a ``Submission``'s too).

    Its identity is the document's. When it is serialised to be sent (a single call,
    a batch, a deferred sale), a document the provider would refuse raises
    :class:`~invoicing_async.InvalidDocumentError` instead: in a batch, its outcome is
    refused and nothing is sent; the other documents go on. ``map(checked, documents)``
    checks a batch.

    .. versionadded:: 0.5.0
    """
    if isinstance(document, Submission):
        return attrs.evolve(document, document=checked(document.document))
    if isinstance(document, Checked):
        return document
    return Checked(document)


def _plain(document: Checked, subject: str) -> Any:
    """What is sent of a checked document: the document, if the provider would take it."""
    require_valid(document.document, subject=subject)
    return document.document


register_kind(Checked, Kind(_plain, lambda document: describe(document.document)))


_NOT_AN_OBJECT = Problem("", "the document must be a JSON object", source=SOURCES["shape"])


def readable(document: Any) -> tuple[Any, bool]:
    """What the rules read of ``document``: the JSON object (a mapping) it is.

    The object JSON bytes or text hold (or, for valid JSON Python does not read, the
    :class:`Problem` :func:`hostile_json` says it has); of a typed document, the members
    of its JSON the rules read (:func:`_rules_view`: the same names and values, amounts as the
    :class:`~decimal.Decimal` they are); anything else as it is (the rules then say it
    is not a JSON object). And whether its lines hold the rules of a line by
    construction (a typed document whose lines and summaries its model computed).
    """
    if isinstance(document, Checked):
        document = document.document
    if isinstance(document, DocumentBase):
        computed = _computed(document)
        return _rules_view(document, computed=computed), computed
    if isinstance(document, (bytes, bytearray, memoryview, str)):
        text = bytes(document) if not isinstance(document, str) else document
        try:  # a name written twice in the text is kept for the rules (_binding)
            return loads(text), False
        except json.JSONDecodeError:
            return None, False
        except (ValueError, RecursionError) as exc:
            try:
                return hostile_json(text, exc), False
            except json.JSONDecodeError:
                return None, False
    return document, False


def problems_of(document: Any) -> list[Problem]:
    """Every problem of ``document`` (any kind): errors and warnings, in the rules' order."""
    data, lines_hold = readable(document)
    if isinstance(data, Problem):
        return [data]
    if not isinstance(data, Mapping):
        return [_NOT_AN_OBJECT]
    return check_document(data, lines_hold=lines_hold)


def ambiguities(document: Any) -> list[Problem]:
    """The errors of ``document``'s members written twice with different values."""
    data, _ = readable(document)
    return list(map(twin_problem, twins(data))) if suspect(data) else []


def hostile_json(text: str | bytes, error: ValueError | RecursionError) -> Problem:
    """Why JSON ``text``, which :func:`json.loads` refused with ``error``, is no document.

    Valid JSON that Python does not read: objects and arrays nested deeper than its
    recursion limit (a :class:`RecursionError`), or a number of more digits than it makes
    an integer of (``sys.get_int_max_str_digits()``, 4,300 by default), whose field is
    named (``Details[1].NetTotal``). ``text`` is read once more to find it, each number
    kept as its length: time linear in the text, and no digits in the message.

    :raises json.JSONDecodeError: ``text`` is not JSON either.
    """
    if isinstance(error, RecursionError):
        return _TOO_DEEP
    try:
        value = json.loads(text, parse_int=_integer)
    except RecursionError:
        return _TOO_DEEP
    found = too_long_in(value)
    if found is None:  # not the digits: whatever else json said
        return Problem("", f"the document cannot be read: {str(error)[:200]}", source=_SHAPE)
    field, digits = found
    limit = sys.get_int_max_str_digits()
    message = f"is a number of {digits:,} digits, more than Python reads ({limit:,})"
    return Problem(field, message if field else f"the document {message}", source=_SHAPE)


def _integer(digits: str) -> int:
    try:
        return int(digits)
    except ValueError:
        return Digits(len(digits.lstrip("-")))


_SHAPE = SOURCES["shape"]
_TOO_DEEP = Problem(
    "",
    "the document is nested too deeply to be read: objects and arrays within one another "
    "beyond Python's recursion limit",
    source=_SHAPE,
)


def require_valid(document: Any, *, subject: str = "the document") -> None:
    """Return if the provider would take ``document`` (warnings never refuse).

    :param subject: what the error's message calls the document (``document 3``).
    :raises InvalidDocumentError: with the errors the rules found;
        :class:`~invoicing_async.AmbiguousDocumentError` when a member is written twice
        with different values (its errors first).
    """
    data, lines_hold = readable(document)
    if not isinstance(data, Mapping):
        problem = data if isinstance(data, Problem) else _NOT_AN_OBJECT
        raise InvalidDocumentError([problem], subject=subject)
    errors = errors_of(check_document(data, lines_hold=lines_hold))
    if errors:
        found = twins(data) if suspect(data) else []
        if found:
            raise AmbiguousDocumentError.of(found, subject=subject, others=errors)
        raise InvalidDocumentError(errors, subject=subject)


def _computed(document: DocumentBase) -> bool:
    """Whether a typed document's lines and summaries are its model's computations.

    A line computed from its quantity, price and category holds the rules of a line (its
    amounts in cents, its VAT at its category's rate rounded as the rules round, its
    total their sum), and summaries computed from the lines are their totals: the rules
    need not read them again. ``tests/unit/test_typed_documents.py`` holds a typed
    document's problems to those of its JSON.
    """
    lines = document.lines
    return document.summaries.computed_of(lines) and all(map(_COMPUTED, lines))


_COMPUTED = operator.attrgetter("computed")


def _rules_view(document: DocumentBase, *, computed: bool) -> dict[str, Any]:
    """The members of a typed document's JSON that the rules read, as its JSON has them.

    Its JSON (:func:`~._convert.document_to_json`) but for what no rule reads (texts,
    quantities, prices), and with amounts as their decimals rather than the floats JSON
    is written with (the same numbers): a check of a typed document costs little more
    than its rules. Lines that are ``computed`` are not written out: the rules do not
    read them. ``tests/unit/test_typed_documents.py`` holds it to the JSON's problems.
    """
    view: dict[str, Any] = {**document.extra} if document.extra else {}
    view["InvoiceTypeCode"] = document.type_code
    view["Issuer"] = _party(document.issuer)
    view["Series"] = document.series
    view["Number"] = document.number
    issued = document.issued
    view["DateIssued"] = issued if isinstance(issued, str) else issued.isoformat()
    view["Details"] = (
        list(document.lines)  # read by their attributes where a rule reads them (.kinds)
        if computed
        else [_line(line) for line in document.lines]
    )
    summaries = document.summaries
    view["Summaries"] = {
        **summaries.extra,
        **{
            wire: value
            for name, wire in _SUMMARIES
            if (value := getattr(summaries, name)) is not None
        },
    }
    if document.counterparty is not None:
        view["CounterParty"] = _party(document.counterparty)
    if document.payments:
        payment = dict(document.extra.get("PaymentDetails") or {})
        payment["PaymentMethods"] = [
            {"Amount": method.amount} if method.amount is not None else {}
            for method in document.payments
        ]
        view["PaymentDetails"] = payment
    if document.internal_id is not None:
        distribution = dict(document.extra.get("DistributionDetails") or {})
        distribution["InternalDocumentId"] = document.internal_id
        view["DistributionDetails"] = distribution
    kind = document.__class__
    own = _OWN_FIELDS.get(kind)
    if own is None:
        own = _OWN_FIELDS[kind] = _own_fields(kind)
    for name, wire in own:  # a type's own: marks, third party
        value = getattr(document, name)
        if value is None or value == ():
            continue
        view[wire] = _party(value) if isinstance(value, Party) else list(value)
    return view


def _line(line: Line) -> dict[str, Any]:
    """What the rules read of a line whose amounts were given."""
    view: dict[str, Any] = {**line.extra} if line.extra else {}
    view["NetTotal"] = line.net_total
    view["VATTotal"] = line.vat_total
    view["Total"] = line.total
    view["VatCategoryCode"] = line.vat_category
    if line.vat_exemption is not None:
        view["VatExemptionCategoryCode"] = line.vat_exemption
    return view


def _own_fields(cls: type[DocumentBase]) -> tuple[tuple[str, str], ...]:
    """The fields a type of document adds to :class:`DocumentBase`'s, and their names."""
    base = {attribute.name for attribute in attrs.fields(DocumentBase)}
    return tuple(
        (attribute.name, attribute.metadata["wire"])
        for attribute in attrs.fields(cls)
        if attribute.name not in base and "wire" in attribute.metadata
    )


#: :func:`_own_fields` of each class of document seen.
_OWN_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def _party(party: Party) -> dict[str, Any]:
    view: dict[str, Any] = {**party.extra} if party.extra else {}
    if party.vat is not None:
        view["Vat"] = party.vat
    if party.address is not None:
        view["Address"] = {**party.address.extra, "CountryCode": party.address.country_code}
    return view


#: The summaries' fields and their names.
_SUMMARIES = tuple(
    (attribute.name, attribute.metadata["wire"])
    for attribute in attrs.fields(Summaries)
    if "wire" in attribute.metadata
)
