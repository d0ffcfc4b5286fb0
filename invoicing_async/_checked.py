"""Documents checked where they enter: the rules of :mod:`._checks` applied to any kind.

A document is a mapping, a typed document (:mod:`._doctypes`), or its JSON as bytes or
text; :func:`problems_of` reads each as the provider would (the JSON form: :func:`readable`)
and returns every problem the rules find. :func:`require_valid` raises
:class:`~invoicing_async.InvalidDocumentError` when one of them is an error: a
:class:`~invoicing_async.Deferral` calls it for each sale, ``outbox.enqueue(...,
check=True)`` for each document. :class:`Checked` marks a document to be checked where
it is serialised (:func:`~._documents.serialize_document`), so that a batch's document
the provider would refuse ends refused, unsent, in its own outcome.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

import attrs

from ._binding import loads, suspect, twins
from ._checks import check_document, errors_of
from ._doctypes import DocumentBase, Party, Summaries
from ._errors import AmbiguousDocumentError, InvalidDocumentError
from ._problems import SOURCES, Problem, twin_problem

__all__ = ["Checked", "ambiguities", "problems_of", "readable", "require_valid"]


@attrs.frozen(slots=True)
class Checked:
    """A document checked before it is sent (see :func:`invoicing_async.documents.checked`).

    Its identity is the document's; serialising it raises
    :class:`~invoicing_async.InvalidDocumentError` when the provider would refuse it.
    """

    document: Any = attrs.field(repr=False)


_NOT_AN_OBJECT = Problem("", "the document must be a JSON object", source=SOURCES["shape"])


def readable(document: Any) -> tuple[Any, bool]:
    """What the rules read of ``document``: the JSON object (a mapping) it is.

    The object JSON bytes or text hold; of a typed document, the members of its JSON the
    rules read (:func:`_rules_view`: the same names and values, amounts as the
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
        try:  # a name written twice in the text is kept for the rules (_binding)
            return loads(document if isinstance(document, str) else bytes(document)), False
        except (ValueError, RecursionError):
            return None, False
    return document, False


def problems_of(document: Any) -> list[Problem]:
    """Every problem of ``document`` (any kind): errors and warnings, in the rules' order."""
    data, lines_hold = readable(document)
    if not isinstance(data, Mapping):
        return [_NOT_AN_OBJECT]
    return check_document(data, lines_hold=lines_hold)


def ambiguities(document: Any) -> list[Problem]:
    """The errors of ``document``'s members written twice with different values."""
    data, _ = readable(document)
    return list(map(twin_problem, twins(data))) if suspect(data) else []


def require_valid(document: Any, *, subject: str = "the document") -> None:
    """Return if the provider would take ``document`` (warnings never refuse).

    :param subject: what the error's message calls the document (``document 3``).
    :raises InvalidDocumentError: with the errors the rules found;
        :class:`~invoicing_async.AmbiguousDocumentError` when a member is written twice
        with different values (its errors first).
    """
    data, lines_hold = readable(document)
    if not isinstance(data, Mapping):
        raise InvalidDocumentError([_NOT_AN_OBJECT], subject=subject)
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
        list(document.lines)
        if computed
        else [
            {
                **line.extra,
                "NetTotal": line.net_total,
                "VATTotal": line.vat_total,
                "Total": line.total,
                "VatCategoryCode": line.vat_category,
            }
            if line.extra
            else {
                "NetTotal": line.net_total,
                "VATTotal": line.vat_total,
                "Total": line.total,
                "VatCategoryCode": line.vat_category,
            }
            for line in document.lines
        ]
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
    return view


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
