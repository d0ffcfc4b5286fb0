"""Typed documents: built with the platform's rounding, written as the provider's JSON,
read back unchanged, unknown members kept both ways."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from providersamples import SAMPLES, camel

from invoicing_async import document_key
from invoicing_async._doc.checked import readable
from invoicing_async._doc.document import describe, serialize_document
from invoicing_async.documents import (
    VAT_RATES,
    Address,
    CreditNote,
    Line,
    Party,
    PaymentMethod,
    RetailReceipt,
    SalesInvoice,
    ServiceInvoice,
    Summaries,
    VatAnalysis,
    check,
    from_json,
    to_json,
)
from invoicing_sandbox._rules import check_document as sandbox_rules
from invoicing_sandbox._rules import issuer_vat, parse_document

TIN = "123456783"


def receipt(**fields) -> RetailReceipt:
    options = {
        "issuer": Party(vat="EL" + TIN),
        "series": "A",
        "number": 17,
        "issued": "2026-11-22T10:15:00",
        "lines": [
            Line("Espresso", quantity=2, unit_price="2.50"),
            Line("Κρουασάν", quantity=3, unit_price="1.15", vat_category=2),
        ],
        "payments": [PaymentMethod(7)],
        "internal_id": "till-1/A/17",
    }
    return RetailReceipt(**{**options, **fields})


def test_a_line_is_computed_with_the_platforms_rounding_per_line():
    """Net is quantity x unit price and VAT net x rate, each rounded to the cent half
    up, line by line (three lines of 0.35 at 13 %: 0.05 VAT each, 0.15 in all, where the
    VAT of the summed net would be 0.14); the total is their sum."""
    lines = [Line("Τσίχλα", quantity=1, unit_price="0.35", vat_category=2) for _ in range(3)]
    assert [(line.net_total, line.vat_total, line.total) for line in lines] == [
        (Decimal("0.35"), Decimal("0.05"), Decimal("0.40"))
    ] * 3
    document = receipt(lines=lines, payments=[])
    assert document.summaries == Summaries(
        total_net_amount=Decimal("1.05"),
        total_vat_amount=Decimal("0.15"),
        total_gross_value=Decimal("1.20"),
    )
    assert document.vat_analysis == (
        VatAnalysis(
            percentage=Decimal(13), underlying_value=Decimal("1.05"), vat_amount=Decimal("0.15")
        ),
    )
    assert Line("x", quantity="0.333", unit_price="1.50").net_total == Decimal("0.50")
    assert Line("x", net_total="10.125", vat_category=7).vat_total == 0  # given: kept


def test_given_values_are_kept_and_the_only_payment_gets_the_gross_value():
    """A line's given VAT is kept as given (check says whether it is right); summaries
    given are kept; the only payment method without an amount is paid the gross."""
    line = Line("x", net_total="10.00", vat_total="2.00")
    assert (line.vat_total, line.total) == (Decimal("2.00"), Decimal("12.00"))
    given = Summaries(total_net_amount=1, total_vat_amount=2, total_gross_value=3)
    assert receipt(summaries=given).summaries is given
    document = receipt()
    assert document.payments == (PaymentMethod(7, Decimal("10.10")),)
    two = receipt(payments=[PaymentMethod(3, "5"), PaymentMethod(7)])
    assert two.payments[1].amount is None


def test_lines_without_a_price_or_an_unknown_category_say_what_they_need():
    """A line needs its net or its unit price; the VAT of a category the platform does
    not have must be given."""
    with pytest.raises(ValueError, match="net_total or its unit_price"):
        Line("x")
    with pytest.raises(ValueError, match="give the line's vat_total"):
        Line("x", unit_price=1, vat_category=42)
    assert Line("x", unit_price=1, vat_category=42, vat_total=0).total == 1


def test_the_json_has_the_names_of_the_providers_samples():
    """InvoiceTypeCode first, PascalCase names, computed values written, each line's
    LineNo its position, the internal id and payments in their nested objects with the
    unknown members of those objects kept."""
    document = receipt(
        extra={"IAPRSignPolicy": 2, "DistributionDetails": {"MovePurpose": "ΠΩΛΗΣΗ"}}
    )
    data = to_json(document)
    assert next(iter(data)) == "InvoiceTypeCode"
    assert data["InvoiceTypeCode"] == "11.1"
    assert data["IAPRSignPolicy"] == 2
    assert data["Issuer"] == {"Vat": "EL123456783"}
    assert data["DistributionDetails"] == {
        "MovePurpose": "ΠΩΛΗΣΗ",
        "InternalDocumentId": "till-1/A/17",
    }
    assert data["PaymentDetails"] == {
        "PaymentMethods": [{"PaymentMethodTypeCode": 7, "Amount": 10.1}]
    }
    first = data["Details"][0]
    assert first == {
        "Descriptions": ["Espresso"],
        "Quantity": 2.0,
        "UnitPrice": 2.5,
        "VatCategoryCode": 1,
        "NetTotal": 5.0,
        "VATTotal": 1.2,
        "Total": 6.2,
        "LineNo": 1,
    }
    assert data["Details"][1]["LineNo"] == 2
    assert data["Summaries"] == {
        "TotalNetAmount": 8.45,
        "TotalVATAmount": 1.65,
        "TotalGrossValue": 10.1,
    }
    assert check(document) == []
    assert {type(d).__name__: d.type_code for d in (SalesInvoice, ServiceInvoice, CreditNote)}


def test_the_identity_of_a_typed_document_is_its_jsons():
    """document_key of a typed document is that of its JSON (id:, doc: with the TIN, or
    the content hash), read from its fields without writing it."""
    for document in (
        receipt(),
        receipt(internal_id=None),
        receipt(internal_id=None, issuer=Party()),
    ):
        assert describe(document) == describe(to_json(document))
        assert document_key(document) == document_key(serialize_document(document))
    assert document_key(receipt(internal_id=None)) == f"doc:{TIN}/A/17"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_providers_samples_read_as_typed_documents(name):
    """Each sample (and its camelCase twin) reads as its type, passes check, and writes
    back every member the model does not name unchanged."""
    data = SAMPLES[name]()
    for written in (data, camel(data)):
        document = from_json(written)
        assert type(document).type_code == data.get("InvoiceTypeCode", "") or data.get(
            "invoiceTypeCode"
        )
        assert check(document) == []
        again = to_json(document)
        known = {"invoicetypecode", *_wire_names(type(document))}
        for key, value in written.items():
            if key.lower() not in known and key.lower() not in _NESTED_PARENTS:
                assert again[key] == value, key
        assert from_json(again) == document
        assert describe(document) == describe(written)


_NESTED_PARENTS = {"distributiondetails", "paymentdetails"}


def _wire_names(cls) -> set[str]:
    return {a.metadata["wire"].lower() for a in attrs.fields(cls) if "wire" in a.metadata}


def test_reading_refuses_what_is_not_such_a_document():
    """Another type, a type it is not, or a member of the wrong type: a ValueError."""
    with pytest.raises(ValueError, match=r"InvoiceTypeCode '8\.1'"):
        from_json({"InvoiceTypeCode": "8.1"})
    with pytest.raises(ValueError, match="not a CreditNote"):
        from_json(to_json(receipt()), CreditNote)
    data = to_json(receipt())
    data["Details"][0]["Quantity"] = "two"
    with pytest.raises(ValueError, match="not a RetailReceipt"):
        from_json(data)


# --- round trips ---------------------------------------------------------------------------

_MONEY = st.decimals(min_value=0, max_value=100_000, places=2, allow_nan=False)
_QUANTITY = st.decimals(min_value=Decimal("0.001"), max_value=1000, places=3, allow_nan=False)
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
#: Member names no model field has, in any case.
_UNKNOWN = st.from_regex(r"Zz[A-Za-z]{1,6}", fullmatch=True)


def _objects(names, values):
    """JSON objects whose names stay distinct ignoring case (two spellings of a member
    with different values are refused: tests/unit/test_ambiguous_documents.py)."""
    return st.dictionaries(names, values, max_size=3).filter(
        lambda d: len({name.lower() for name in d}) == len(d)
    )


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | _objects(_TEXT, inner),
    max_leaves=6,
)
_EXTRA = _objects(_UNKNOWN, _JSON)


@st.composite
def lines(draw) -> Line:
    category = draw(st.sampled_from(sorted(VAT_RATES)))
    options = {
        "quantity": draw(_QUANTITY),
        "vat_category": category,
        "code": draw(st.none() | _TEXT),
        "extra": draw(_EXTRA),
    }
    if draw(st.booleans()):
        options["unit_price"] = draw(_MONEY)
    else:
        options["net_total"] = draw(_MONEY)
    if draw(st.booleans()):
        options["line_no"] = draw(st.integers(1, 999))
    return Line(draw(st.lists(_TEXT, min_size=1, max_size=2)), **options)


#: Amounts a caller may give wrong: any number of decimals, any size.
_ANY_AMOUNT = st.decimals(min_value=-1000, max_value=100_000, places=3, allow_nan=False)


@st.composite
def given_lines(draw) -> Line:
    """A line whose VAT or total may be given, right or wrong."""
    line = draw(lines())
    options = {}
    if draw(st.booleans()):
        options["vat_total"] = draw(_ANY_AMOUNT)
    if draw(st.booleans()):
        options["total"] = draw(_ANY_AMOUNT)
    return attrs.evolve(line, **options) if options else line


@st.composite
def documents(draw):
    cls = draw(st.sampled_from([RetailReceipt, SalesInvoice, ServiceInvoice, CreditNote]))
    issuer = Party(
        vat=draw(st.sampled_from([TIN, "EL" + TIN])),
        registered_name=draw(st.none() | _TEXT),
        address=draw(st.none() | st.builds(Address, city=_TEXT, extra=_EXTRA)),
        extra=draw(_EXTRA),
    )
    options = {
        "issuer": issuer,
        "series": draw(_TEXT.filter(str.strip)),
        "number": draw(st.integers(1, 10**9) | _TEXT.filter(str.strip)),
        "issued": draw(
            st.dates().map(dt.date.isoformat)
            | st.datetimes(min_value=dt.datetime(2000, 1, 1))
            | st.dates()
        ),
        "lines": draw(st.lists(lines(), min_size=1, max_size=6)),
        "counterparty": draw(st.none() | st.builds(Party, vat=st.just("094019245"))),
        "internal_id": draw(st.none() | _TEXT.filter(bool)),
        "payments": draw(st.lists(st.builds(PaymentMethod, st.integers(1, 7)), max_size=2)),
        "currency": draw(st.none() | st.just("EUR")),
        "extra": draw(_EXTRA),
    }
    if cls is CreditNote:
        options["correlated_invoices"] = draw(st.lists(st.integers(1, 10**15), max_size=2))
    return cls(**options)


@settings(max_examples=150, deadline=None)
@given(documents())
def test_a_typed_document_round_trips_through_json_the_sandbox_accepts(document):
    """Typed → the bytes sent → the sandbox's parser and rules (no 400, the issuer's TIN
    the client's) → typed again: equal, unknown members included; and the JSON read
    back writes the same JSON."""
    body = serialize_document(document)
    parsed = parse_document(body)
    assert isinstance(parsed, dict)
    assert issuer_vat(parsed) == TIN
    assert sandbox_rules(parsed) == []
    assert [p for p in check(body) if p.is_error] == []
    again = from_json(json.loads(body))
    assert again == document
    assert to_json(again) == json.loads(body)
    assert document_key(again) == document_key(document) == document_key(body)


@settings(max_examples=100, deadline=None)
@given(documents(), _EXTRA)
def test_unknown_members_survive_from_json_to_json(document, unknown):
    """Members the model does not name, at the top and in nested objects, are written
    back exactly as read, whatever their case."""
    data = json.loads(serialize_document(document))
    spelled = {name.lower(): name for name in data}
    data.update({spelled.get(name.lower(), name): value for name, value in unknown.items()})
    data["DistributionDetails"] = {**data.get("DistributionDetails", {}), "zzMove": "Π"}
    data["Details"][0]["zzLot"] = [1, {"a": None}]
    again = to_json(from_json(data))
    assert again == data


@settings(max_examples=200, deadline=None)
@given(documents(), st.lists(given_lines(), max_size=3), st.booleans(), st.booleans())
def test_a_typed_documents_problems_are_its_jsons(document, more, totals, paid):
    """check of a typed document finds exactly what check of its JSON finds, whether its
    amounts were computed (read no more: they hold by construction) or given, right or
    wrong (lines' VAT and totals, summaries, payments)."""
    options: dict = {"lines": [*document.lines, *more]}
    if totals:
        options["summaries"] = Summaries(
            total_net_amount=Decimal("10.005"), total_vat_amount=2, total_gross_value=12
        )
    if paid:
        options["payments"] = [PaymentMethod(3, "1.5"), PaymentMethod(7)]
    document = attrs.evolve(document, **options)
    assert check(document) == check(json.loads(serialize_document(document)))


def test_a_copy_with_other_lines_keeps_the_totals_it_is_given_and_check_says_so():
    """attrs.evolve(document, lines=...) keeps the first document's computed summaries:
    check (of the copy, or of its JSON) finds they are not the new lines' totals."""
    document = receipt()
    copy = attrs.evolve(document, lines=[*document.lines, Line("Νερό", unit_price="0.50")])
    assert copy.summaries == document.summaries
    problems = check(copy)
    assert {p.field for p in problems if p.is_error} == {
        "Summaries.TotalNetAmount",
        "Summaries.TotalVATAmount",
    }
    assert problems == check(json.loads(serialize_document(copy)))


def test_lines_numbered_by_their_position_keep_their_computed_amounts():
    """Lines the caller numbered 1, 2 … (their positions) are the lines left unnumbered:
    the same document, JSON and check, and their amounts still computed (check does not
    read them again); a line numbered otherwise keeps its number."""
    numbered = receipt(
        lines=[
            Line("Espresso", quantity=2, unit_price="2.50", line_no=1),
            Line("Κρουασάν", quantity=3, unit_price="1.15", vat_category=2, line_no=2),
        ]
    )
    plain = receipt()
    assert numbered == plain
    assert to_json(numbered) == to_json(plain)
    assert check(numbered) == check(plain) == []
    assert [(line.line_no, line.computed) for line in numbered.lines] == [(None, True)] * 2
    assert readable(numbered)[1] is True  # its lines are not read again by check
    other = receipt(lines=[Line("Espresso", unit_price="2.50", line_no=7)])
    assert [(line.line_no, line.computed) for line in other.lines] == [(7, True)]
