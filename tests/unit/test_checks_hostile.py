"""``check`` and the typed documents against hostile values: problems, never exceptions.

A program's dict may hold what no JSON reader gives: an integer of a million digits
(which Python will not write as text), an amount of 4,300 digits whose totals then have
more. ``check`` says which field is no amount, in a message of a few words, and a
document checked where it is sent is refused with :class:`InvalidDocumentError`; a typed
line whose amount cannot be computed raises the ``ValueError`` its class documents,
and ``from_json`` names the field it could not read.
"""

from __future__ import annotations

import copy
import json
from decimal import Decimal

import pytest

from invoicing_async import (
    InvalidDocumentError,
    Outcome,
    OutcomeStatus,
    outcome_from_dict,
    outcome_to_dict,
)
from invoicing_async._doc.checked import require_valid
from invoicing_async.documents import (
    SOURCES,
    Line,
    Party,
    Problem,
    RetailReceipt,
    Severity,
    check,
    from_json,
    to_json,
)
from invoicing_sandbox import sample_invoice

HUGE = 10**10**6  # an int of a million and one digits: str() of it raises ValueError
LONG = int("9" * 4299)  # readable as text, but not once it is in cents


def _with(path: tuple, value: object) -> dict:
    document = sample_invoice(1, lines=2)
    gross = document["Summaries"]["TotalGrossValue"]
    document["PaymentDetails"] = {"PaymentMethods": [{"Amount": gross}]}
    target = document
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return document


_NOT_A_NUMBER = "must be a number"


@pytest.mark.parametrize("value", [HUGE, -HUGE, LONG], ids=["huge", "negative", "4,299 digits"])
@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("Details", 0, "NetTotal"), "Details[0].NetTotal"),
        (("Details", 1, "VATTotal"), "Details[1].VATTotal"),
        (("Details", 1, "Total"), "Details[1].Total"),
        (("Summaries", "TotalNetAmount"), "Summaries.TotalNetAmount"),
        (("Summaries", "TotalVATAmount"), "Summaries.TotalVATAmount"),
        (("Summaries", "TotalGrossValue"), "Summaries.TotalGrossValue"),
        (("PaymentDetails", "PaymentMethods", 0, "Amount"), "PaymentDetails.PaymentMethods[0].Amount"),
    ],
)  # fmt: skip
def test_an_amount_too_large_is_no_number_at_its_field(path, field, value):
    """An amount of a million digits, or of 4,299 (whose cents and totals have more),
    anywhere a document has amounts: "must be a number" at that field, no message
    longer than a line, and a checked document is refused, never a ValueError."""
    document = _with(path, value)
    problems = check(document)
    assert Problem(field, _NOT_A_NUMBER, source=SOURCES["shape"]) in problems
    assert all(len(problem.message) < 200 for problem in problems)
    with pytest.raises(InvalidDocumentError):
        require_valid(document)


@pytest.mark.parametrize("value", [1e300, Decimal("1E+30"), Decimal("9E+999999"), "1e30"], ids=str)
@pytest.mark.parametrize("name", ["TotalNetAmount", "TotalVATAmount", "TotalGrossValue"])
def test_a_summary_total_beyond_an_amount_is_an_error(name, value):
    """A summary total that is a number but no amount in cents (a float of 1e300, a
    decimal of 31 digits or of a huge exponent): "must be a number" at that field, as
    for a line's amount; it was accepted silently (its problem dropped as "reported
    already")."""
    problems = check(_with(("Summaries", name), value))
    assert Problem(f"Summaries.{name}", _NOT_A_NUMBER, source=SOURCES["shape"]) in problems


def test_integers_of_a_million_digits_elsewhere_are_problems_not_exceptions():
    """The issuer's and the customer's VAT number, and a line's VAT category, as an int
    of a million digits: the problems their rules find, in short messages."""
    issuer = check(_with(("Issuer", "Vat"), HUGE))
    assert [p.field for p in issuer if p.is_error] == ["Issuer.Vat"]
    assert check(_with(("CounterParty", "Vat"), HUGE)) == []
    category = check(_with(("Details", 0, "VatCategoryCode"), HUGE))
    assert [(p.field, p.severity) for p in category] == [
        ("Details[0].VatCategoryCode", Severity.WARNING)
    ]
    assert all(len(p.message) < 200 for p in issuer + category)


def test_an_amount_with_a_long_text_is_said_in_a_few_words():
    """An amount given as text of a million characters with more than two decimals: the
    problem quotes its beginning, not the million characters."""
    problems = check(_with(("Details", 0, "NetTotal"), "1." + "0" * 10**6 + "1"))
    [problem] = [p for p in problems if p.field == "Details[0].NetTotal"]
    assert problem.message.startswith("has more than two decimals (1.000")
    assert len(problem.message) < 200


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b'{"Series": "A", "Number": ' + b"1" * 10**6 + b"}", "Number"),
        (b'{"Details": [{}, {"NetTotal": ' + b"9" * 4400 + b"}]}", "Details[1].NetTotal"),
        (b'{"a":' * 10**5 + b"1" + b"}" * 10**5, ""),
    ],
    ids=["number", "amount", "deep"],
)
def test_json_python_does_not_read_is_one_problem_naming_its_field(text, problem):
    """JSON bytes with a number of a million digits, or nested 100,000 deep: check
    says so (the field of the number), not "the document must be a JSON object"."""
    [found] = check(text)
    assert found.field == problem
    assert found.is_error
    assert ("digits" if problem else "nested too deeply") in found.message
    with pytest.raises(InvalidDocumentError, match="digits" if problem else "nested"):
        require_valid(text)


# --- typed documents ------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"unit_price": "1e999999"},
        {"unit_price": "9E+999999", "quantity": "9E+999999"},
        {"unit_price": 10**30},
        {"unit_price": HUGE},
        {"quantity": "1e999999", "unit_price": "2.50"},
        {"net_total": "1E+999999"},  # its VAT is computed
        {"net_total": "9E+999999", "vat_total": "9E+999999"},  # and its total
    ],
    ids=",".join,
)
def test_a_line_whose_amounts_cannot_be_computed_raises_value_error(options):
    """Line(unit_price="1e999999") and the like: the ValueError the class documents
    (an amount that is not one), naming what could not be computed; never a decimal
    InvalidOperation or Overflow, and never the minutes an int of a million digits
    takes to become a decimal."""
    with pytest.raises(ValueError, match="too large") as caught:
        Line("x", **options)
    assert type(caught.value) is ValueError
    assert len(str(caught.value)) < 200


def test_a_document_whose_totals_overflow_raises_value_error():
    """Two lines of 9E+999999 each (kept as given) whose sum no decimal holds: the
    document raises ValueError naming its totals, not decimal.Overflow."""
    line = Line("x", net_total="9E+999999", vat_total="0", total="9E+999999", vat_category=7)
    with pytest.raises(ValueError, match="Summaries") as caught:
        RetailReceipt(
            issuer=Party(vat="123456783"), series="A", number=1, issued="2026-11-22",
            lines=[line, line],
        )  # fmt: skip
    assert type(caught.value) is ValueError


def _receipt_json() -> dict:
    receipt = RetailReceipt(
        issuer=Party(vat="EL123456783"), series="A", number=1, issued="2026-01-01T00:00:00",
        lines=[Line("a", unit_price="1"), Line("b", unit_price="2")],
    )  # fmt: skip
    return to_json(receipt)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["Details"][1].update(UnitPrice="abc"), "Details[1].UnitPrice"),
        (lambda d: d["Summaries"].update(TotalNetAmount="zz"), "Summaries.TotalNetAmount"),
        (lambda d: d["Issuer"].update(BranchCode="zz"), "Issuer.BranchCode"),
        (lambda d: d["PaymentDetails"]["PaymentMethods"][0].update(Amount=[]), "PaymentDetails.PaymentMethods[0].Amount"),
    ],
    ids=["price", "summary", "branch", "payment"],
)  # fmt: skip
def test_from_json_names_the_field_it_cannot_read(change, field):
    """from_json's ValueError names the field (as the provider's JSON names it) that is
    not what its class takes, and what is wrong with it."""
    data = _receipt_json()
    data["PaymentDetails"] = {"PaymentMethods": [{"PaymentMethodTypeCode": 3, "Amount": 3.72}]}
    change(data)
    with pytest.raises(ValueError, match="not a RetailReceipt") as caught:
        from_json(data)
    assert f"{field}: " in str(caught.value)


def test_from_json_of_a_line_it_cannot_compute_names_the_line():
    """A line of the provider's JSON whose net is to be computed from a unit price of
    1e999999: from_json's ValueError names the line and says why, not
    ``[<class 'decimal.InvalidOperation'>]``."""
    data = _receipt_json()
    line = data["Details"][1]
    for name in ("NetTotal", "VATTotal", "Total"):
        del line[name]
    line["UnitPrice"] = "1e999999"
    with pytest.raises(ValueError, match="not a RetailReceipt") as caught:
        from_json(copy.deepcopy(data))
    message = str(caught.value)
    assert "Details[1]" in message
    assert "too large" in message
    assert "InvalidOperation" not in message


def test_a_record_holds_the_first_hundred_problems_and_counts_the_others():
    """An InvalidDocumentError of 250 problems is written with its first 100 and
    ``more_problems: 150`` (a document of a million bad lines made a record of 144 MB);
    read back, it has those 100, and its message as it was."""
    problems = [Problem(f"Details[{n}]", "must be an object") for n in range(250)]
    error = InvalidDocumentError(problems)
    outcome = Outcome(index=0, key="k", status=OutcomeStatus.REJECTED, error=error)
    written = outcome_to_dict(outcome)["error"]
    assert (len(written["problems"]), written["more_problems"]) == (100, 150)
    again = outcome_from_dict(json.loads(json.dumps(outcome_to_dict(outcome))))
    assert again.error.problems == tuple(problems[:100])
    assert str(again.error) == str(error)
