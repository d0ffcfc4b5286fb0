"""The rules of ``check``, one by one: what is an error, what only a warning, and what
is accepted as the provider accepts it (any case, numbers as text, a cent of
difference)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from providersamples import camel, retail_receipt, service_invoice

from invoicing_async import (
    InvalidDocumentError,
    Outcome,
    OutcomeStatus,
    outcome_from_dict,
    outcome_to_dict,
)
from invoicing_async._doc.checked import require_valid
from invoicing_async._doc.checks import valid_tin
from invoicing_async.documents import SOURCES, Line, Party, Problem, RetailReceipt, Severity, check
from invoicing_sandbox import sample_invoice


def fields(problems: list[Problem], severity: Severity = Severity.ERROR) -> set[str]:
    return {p.field for p in problems if p.severity is severity}


@pytest.mark.parametrize(
    ("tin", "valid"),
    [("118058830", True), ("094019245", True), ("123456783", True), ("123456789", False),
     ("12345678", False), ("\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff13", False)],
)  # fmt: skip
def test_a_tin_has_nine_digits_and_its_check_digit(tin, valid):
    """The Greek TIN rule: nine ASCII digits, the last the mod-11 check digit."""
    assert valid_tin(tin) is valid


def test_the_issuers_tin_is_checked_with_or_without_its_prefix():
    """A wrong check digit or a VAT number that is no TIN is an error at Issuer.Vat;
    ``EL``, ``el`` or no prefix are alike."""
    for vat in ("EL118058830", "el118058830", "118058830", " EL 118058830 "):
        document = retail_receipt()
        document["Issuer"]["Vat"] = vat
        assert check(document) == [], vat
    for vat, message in (("EL118058831", "check digit"), ("DE123456789", "nine digits")):
        document = retail_receipt()
        document["Issuer"]["Vat"] = vat
        [problem] = check(document)
        assert (problem.field, problem.severity) == ("Issuer.Vat", Severity.ERROR)
        assert message in problem.message
        assert problem.source == SOURCES["tin"]


def test_names_in_any_case_and_numbers_as_text_are_read():
    """camelCase throughout, amounts and codes as numeric text: no problem."""
    document = camel(retail_receipt())
    line = document["details"][0]
    line.update(netTotal="197.03", vatTotal="47.29", vatCategoryCode="1")
    assert check(document) == []
    assert check(json.dumps(document).encode()) == []


def test_amounts_are_numbers_in_cents():
    """An amount written "12,40" is no number; 12.400000000000002 and "12.401" have
    more than two decimals; "12.40" and 12.4 are cents."""
    document = service_invoice()
    line = document["Details"][0]
    for value, message in (("475,00", "must be a number"), (475.000000001, "two decimals"),
                           ("475.001", "two decimals")):  # fmt: skip
        line["NetTotal"] = value
        [problem] = [p for p in check(document) if p.field == "Details[0].NetTotal"]
        assert message in problem.message
        assert problem.severity is Severity.ERROR
    line["NetTotal"] = "475.00"
    assert check(document) == []


def test_a_cent_of_difference_is_accepted_and_two_are_not():
    """A line's VAT one cent off its rate, summaries one cent off the lines: fine; two
    cents: an error naming the field, with what it should be."""
    document = retail_receipt()
    line, summaries = document["Details"][0], document["Summaries"]
    line["VATTotal"] = 47.30  # 24 % of 197.03 is 47.2872
    summaries["TotalVATAmount"] = 47.30
    summaries["TotalGrossValue"] = 244.33
    line["Total"] = 244.33
    document["PaymentDetails"]["PaymentMethods"][0]["Amount"] = 244.33
    assert check(document) == []
    line["VATTotal"] = 47.31
    [problem] = check(document)
    assert problem.field == "Details[0].VATTotal"
    assert problem.message == "is not the net at the category's rate: 24% of 197.03 is 47.29"
    assert problem.source == SOURCES["rates"]


def test_zero_rate_categories_and_unknown_ones():
    """Categories 7 (0 %) and 8 (no VAT) want no VAT; a category the platform does not
    have is a warning, its VAT not compared."""
    document = service_invoice()
    line = document["Details"][0]
    line["VATTotal"] = 10
    assert "Details[0].VATTotal" in fields(check(document))
    line["VATTotal"], line["VatCategoryCode"] = 0, 8
    assert check(document) == []
    line["VatCategoryCode"] = 42
    assert fields(check(document), Severity.WARNING) == {"Details[0].VatCategoryCode"}
    assert fields(check(document)) == set()


def test_the_gross_value_with_other_taxes_is_only_a_warning():
    """Gross = net + VAT is an error when nothing else takes part; with withheld or other
    taxes (whose signs the platform decides) a mismatch is a warning."""
    document = retail_receipt()
    document["Summaries"]["TotalGrossValue"] = 250
    assert fields(check(document)) == {"Summaries.TotalGrossValue"}
    document["Summaries"]["TotalOtherTaxesAmount"] = 1.0
    assert fields(check(document)) == set()
    assert "Summaries.TotalGrossValue" in fields(check(document), Severity.WARNING)


def test_older_names_are_read_with_a_warning():
    """myDATA's TotalNetValue and a line's NetValue/VatAmount are read (the totals still
    compared), each named once with the provider's name (two spellings of one member:
    tests/unit/test_ambiguous_documents.py)."""
    document = retail_receipt()
    line = document["Details"][0]
    line["NetValue"], line["VatAmount"] = line.pop("NetTotal"), line.pop("VATTotal")
    document["Summaries"]["TotalNetValue"] = document["Summaries"].pop("TotalNetAmount")
    problems = check(document)
    assert fields(problems) == set()
    warned = {p.field: p.message for p in problems if p.severity is Severity.WARNING}
    assert set(warned) == {"Details[0].NetTotal", "Details[0].VATTotal", "Summaries.TotalNetAmount"}
    assert "'NetValue'" in warned["Details[0].NetTotal"]
    document["Summaries"]["TotalNetValue"] = 1
    assert fields(check(document)) == {"Summaries.TotalNetAmount", "Summaries.TotalGrossValue"}


def test_what_is_not_a_document():
    """JSON that is not an object, and bytes that are no JSON: one error, no field."""
    for document in (b"[1]", b"{", "null", 5):
        assert check(document) == [
            Problem("", "the document must be a JSON object", source=SOURCES["shape"])
        ]


def test_an_invalid_document_error_carries_its_problems_and_is_recorded_with_them():
    """require_valid raises InvalidDocumentError (a ValidationError, nothing sent) with
    the errors only; it is written to and read from an outcome with its problems."""
    document = retail_receipt()
    del document["Series"]
    document["CounterParty"]["Vat"] = "EL123456789"  # a warning: not among the problems
    with pytest.raises(InvalidDocumentError) as caught:
        require_valid(document)
    error = caught.value
    assert error.status is None
    assert [p.field for p in error.problems] == ["Series"]
    assert str(error) == "the provider would refuse the document: Series: is required"
    outcome = Outcome(index=0, key="k", status=OutcomeStatus.REJECTED, error=error)
    again = outcome_from_dict(json.loads(json.dumps(outcome_to_dict(outcome))))
    assert isinstance(again.error, InvalidDocumentError)
    assert again.error.problems == error.problems


@pytest.mark.parametrize("value", ["NaN", "sNaN", "Infinity", "-Infinity", "9E+999999"])
@pytest.mark.parametrize("index", [0, 1])
def test_an_amount_that_is_no_finite_decimal_is_no_number_and_never_raises(value, index):
    """A line's NetTotal written as Decimal NaN, an infinity or beyond what a decimal
    multiplies: check returns "must be a number" at that field (as for its other amounts
    and shapes), in the first line or a later one, never an exception."""
    document = sample_invoice(1, lines=3)
    for line in document["Details"]:  # amounts as a program's decimals
        for name in ("NetTotal", "VATTotal", "Total"):
            line[name] = Decimal(repr(line[name]))
    document["Details"][index]["NetTotal"] = Decimal(value)
    problems = check(document)
    assert (
        Problem(f"Details[{index}].NetTotal", "must be a number", source=SOURCES["shape"])
        in problems
    )
    document["Details"][index]["NetTotal"] = 1.5  # a float net among decimal VATs
    document["Details"][index]["Total"] = Decimal(value)
    assert f"Details[{index}].Total" in fields(check(document))


def test_a_typed_line_of_a_huge_amount_is_no_number_and_never_raises():
    """A typed line given a net beyond what an amount has (``1E+999999``: a finite
    decimal) is reported as its JSON would be, not raised while checking."""
    line = Line("x", net_total="1E+999999", vat_total="0", total="0", vat_category=7)
    document = RetailReceipt(
        issuer=Party(vat="123456783"), series="A", number=1, issued="2026-11-22", lines=[line]
    )
    assert "Details[0].NetTotal" in fields(check(document))
