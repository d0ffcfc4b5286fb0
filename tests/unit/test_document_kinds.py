"""The typed documents of the rest of a day (11.2 to 11.5, 5.2, 1.2, 1.3, 2.2, 2.3) and
each type's rules: built from their constructors, read back as their class, checked
without a false alarm; each rule finds its problem and passes the document that holds
it; hostile values of the new members are typed problems or errors, never a crash."""

from __future__ import annotations

import json
from decimal import Decimal

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invoicing_async import ValidationError
from invoicing_async._doc.document import serialize_document
from invoicing_async.documents import (
    SOURCES,
    Address,
    CreditNote,
    CreditReceipt,
    DocumentBase,
    IntraEUSalesInvoice,
    IntraEUServiceInvoice,
    Line,
    Party,
    PaymentMethod,
    ServiceReceipt,
    Severity,
    SimplifiedInvoice,
    ThirdCountrySalesInvoice,
    ThirdCountryServiceInvoice,
    ThirdPartyReceipt,
    UncorrelatedCreditNote,
    check,
    from_json,
    to_json,
)
from invoicing_sandbox._rules import check_document as sandbox_rules

TIN = "123456783"
EXEMPT = Line("Εξαγωγή", unit_price="100.00", vat_category=7, vat_exemption=14)
TAXED = Line("Espresso", quantity=2, unit_price="2.50")


def customer(country: str | None, vat: str | None = "IT12345678901") -> Party:
    address = None if country is None else Address(country_code=country)
    return Party(vat=vat, registered_name="πελάτης", address=address)


#: Each new type and what its sample shape carries (beside the common fields).
SHAPES: dict[type[DocumentBase], dict] = {
    ServiceReceipt: {"lines": [TAXED]},
    SimplifiedInvoice: {"lines": [Line("Ρεύμα", unit_price="87.46", vat_category=3)]},
    CreditReceipt: {"lines": [TAXED], "correlated_invoices": [400007396844549]},
    ThirdPartyReceipt: {
        "lines": [TAXED],
        "third_party": Party(vat="EL094019245", registered_name="εντολέας"),
    },
    UncorrelatedCreditNote: {"lines": [TAXED], "counterparty": Party(vat="EL094019245")},
    IntraEUSalesInvoice: {"lines": [EXEMPT], "counterparty": customer("IT")},
    IntraEUServiceInvoice: {"lines": [EXEMPT], "counterparty": customer("DE", "DE123456789")},
    ThirdCountrySalesInvoice: {"lines": [EXEMPT], "counterparty": customer("GB", "BG000000000")},
    ThirdCountryServiceInvoice: {"lines": [EXEMPT], "counterparty": customer("US", "GB")},
}
CODES = {
    ServiceReceipt: "11.2",
    SimplifiedInvoice: "11.3",
    CreditReceipt: "11.4",
    ThirdPartyReceipt: "11.5",
    UncorrelatedCreditNote: "5.2",
    IntraEUSalesInvoice: "1.2",
    ThirdCountrySalesInvoice: "1.3",
    IntraEUServiceInvoice: "2.2",
    ThirdCountryServiceInvoice: "2.3",
}


def build(cls: type[DocumentBase], **fields) -> DocumentBase:
    options = {
        "issuer": Party(vat="EL" + TIN, address=Address(country_code="GR")),
        "series": "D",
        "number": 7,
        "issued": "2026-11-22T10:15:00",
        "payments": [PaymentMethod(7)],
        "internal_id": f"erp/{cls.__name__}/7",
        **SHAPES[cls],
    }
    return cls(**{**options, **fields})


def fields_of(problems) -> dict[str, Severity]:
    return {problem.field: problem.severity for problem in problems}


@pytest.mark.parametrize("cls", sorted(SHAPES, key=lambda cls: cls.__name__))
def test_each_type_is_built_checked_and_read_back_as_itself(cls):
    """Built from its constructor, with its sample's shape: no problem (warnings
    included), its InvoiceTypeCode written first, from_json chooses its class by that
    code, and the JSON reads back to the same document, its own members included."""
    document = build(cls)
    assert check(document) == []
    data = to_json(document)
    assert next(iter(data.items())) == ("InvoiceTypeCode", CODES[cls])
    assert check(data) == []
    again = from_json(data)
    assert type(again) is cls
    assert again == document
    assert sandbox_rules(json.loads(serialize_document(document))) == []


def test_the_types_own_members_are_written_as_the_samples_name_them():
    """An 11.4's marks as ``CorrelatedInvoices``, an 11.5's third party as a party."""
    assert to_json(build(CreditReceipt))["CorrelatedInvoices"] == [400007396844549]
    assert to_json(build(ThirdPartyReceipt))["ThirdParty"] == {
        "Vat": "EL094019245",
        "RegisteredName": "εντολέας",
    }
    assert from_json({**to_json(build(CreditReceipt)), "InvoiceTypeCode": "11.4"})


# --- the counterparty abroad --------------------------------------------------------------


@pytest.mark.parametrize("cls", [IntraEUSalesInvoice, IntraEUServiceInvoice])
def test_an_intra_community_sale_needs_a_customer_in_another_eu_country_with_its_vat(cls):
    """1.2 / 2.2: no customer, no country, a country outside the EU, the issuer's own
    country, or no VAT number: an error each, naming the field; another member state
    with a VAT number passes."""
    cases = {
        None: "CounterParty",
        customer(None): "CounterParty.Address.CountryCode",
        customer("US"): "CounterParty.Address.CountryCode",
        customer("GR"): "CounterParty.Address.CountryCode",
        customer("el"): "CounterParty.Address.CountryCode",  # Greece's VAT prefix
        customer("IT", vat=None): "CounterParty.Vat",
        customer("IT", vat=""): "CounterParty.Vat",
    }
    for party, field in cases.items():
        problems = check(build(cls, counterparty=party))
        assert fields_of(problems) == {field: Severity.ERROR}, party
        assert problems[0].source == SOURCES["types"]
    assert check(build(cls, counterparty=customer("FR", "FR12345678901"))) == []
    assert check(build(cls, counterparty=customer(" it "))) == []  # read as written: IT


def test_the_issuers_country_is_read_from_its_address():
    """An issuer whose address is in Cyprus sells intra-community to Greece, not to
    Cyprus; no address: Greece (the provider's issuers)."""
    cypriot = Party(vat="EL" + TIN, address=Address(country_code="CY"))
    document = build(IntraEUSalesInvoice, issuer=cypriot, counterparty=customer("CY"))
    assert fields_of(check(document)) == {"CounterParty.Address.CountryCode": Severity.ERROR}
    greek = customer("GR", "EL094019245")  # its VAT prefix EL is Greece
    assert check(build(IntraEUSalesInvoice, issuer=cypriot, counterparty=greek)) == []
    bare = build(IntraEUSalesInvoice, issuer=Party(vat=TIN), counterparty=customer("GR"))
    assert fields_of(check(bare)) == {"CounterParty.Address.CountryCode": Severity.ERROR}


@pytest.mark.parametrize("cls", [ThirdCountrySalesInvoice, ThirdCountryServiceInvoice])
def test_a_third_country_sale_needs_a_customer_outside_the_eu(cls):
    """1.3 / 2.3: a customer in a member state (Greece included) is an error; one without
    a VAT number a warning (a customer abroad may have none); one in GB passes, its VAT
    number written as the sample does (``BG…``, or only ``GB``)."""
    for country in ("DE", "GR", "EL"):
        problems = check(build(cls, counterparty=customer(country)))
        assert fields_of(problems) == {"CounterParty.Address.CountryCode": Severity.ERROR}
    assert fields_of(check(build(cls, counterparty=None))) == {"CounterParty": Severity.ERROR}
    problems = check(build(cls, counterparty=customer("CH", vat=None)))
    assert fields_of(problems) == {"CounterParty.Vat": Severity.WARNING}
    assert problems[0].source == SOURCES["unsure"]
    assert check(build(cls, counterparty=customer("GB", "GB"))) == []


def test_a_vat_number_of_another_country_than_the_customers_is_a_warning():
    """An intra-community customer in Italy whose VAT number starts with ``DE``."""
    problems = check(build(IntraEUSalesInvoice, counterparty=customer("IT", "DE123456789")))
    assert fields_of(problems) == {"CounterParty.Vat": Severity.WARNING}


def test_the_country_may_be_written_on_the_party_and_in_any_case():
    """A dict that writes ``countryCode`` on the counterparty itself, camelCase."""
    data = to_json(build(IntraEUSalesInvoice))
    data["CounterParty"] = {"vat": "AT12345678", "countryCode": "at"}
    assert check(data) == []
    data["CounterParty"]["countryCode"] = "CH"
    assert fields_of(check(data)) == {"CounterParty.Address.CountryCode": Severity.ERROR}


def test_a_retail_document_needs_no_customer_and_a_52_warns_without_one():
    """11.x: none needed. 5.2 credits a business customer: a warning without one."""
    for cls in (ServiceReceipt, SimplifiedInvoice, CreditReceipt, ThirdPartyReceipt):
        assert check(build(cls, counterparty=None)) == []
    problems = check(build(UncorrelatedCreditNote, counterparty=None))
    assert fields_of(problems) == {"CounterParty": Severity.WARNING}


# --- VAT categories and exemptions ----------------------------------------------------------


@pytest.mark.parametrize("cls", sorted(SHAPES, key=lambda cls: cls.__name__))
def test_a_line_at_zero_percent_needs_its_exemption(cls):
    """A line of category 7 without ``VatExemptionCategoryCode`` is an error in every new
    type; with one it passes."""
    bare = Line("Χωρίς ΦΠΑ", unit_price="10.00", vat_category=7)
    problems = check(build(cls, lines=[TAXED, bare]))
    errors = {p.field for p in problems if p.is_error}
    assert errors == {"Details[1].VatExemptionCategoryCode"}
    assert check(build(cls, lines=[EXEMPT])) == []


def test_an_exemption_must_be_the_platforms_code():
    """Not an integer (text, a fraction, true): an error; an integer outside 1 to 31: a
    warning; numeric text, as the samples write numbers, passes."""
    data = to_json(build(ServiceReceipt, lines=[EXEMPT]))
    line = data["Details"][0]
    for bad in ("ΑΡΘΡΟ 24", 14.5, True, [14], "1" * 10_000):
        line["VatExemptionCategoryCode"] = bad
        problems = check(data)
        assert fields_of(problems) == {"Details[0].VatExemptionCategoryCode": Severity.ERROR}
        assert len(problems[0].message) < 200  # a huge value is not repeated
    for unknown in (0, 99, 10**100):
        line["VatExemptionCategoryCode"] = unknown
        assert fields_of(check(data)) == {"Details[0].VatExemptionCategoryCode": Severity.WARNING}
    line["VatExemptionCategoryCode"] = "14"
    assert check(data) == []


def test_a_taxed_line_in_a_sale_abroad_is_a_warning():
    """1.2, 1.3, 2.2, 2.3 are expected at 0 %: the first taxed line is named, once."""
    for cls in (IntraEUSalesInvoice, ThirdCountryServiceInvoice):
        problems = check(build(cls, lines=[EXEMPT, TAXED, TAXED]))
        assert fields_of(problems) == {"Details[1].VatCategoryCode": Severity.WARNING}
    assert check(build(ServiceReceipt, lines=[TAXED])) == []  # at home: taxed, of course


# --- credits and third parties ----------------------------------------------------------------


def test_a_credit_receipts_marks_are_marks():
    """An 11.4 names none (as the provider's sample) or marks: 64-bit integers, as JSON
    or digits; anything else is an error naming its place."""
    assert check(build(CreditReceipt, correlated_invoices=[])) == []
    data = to_json(build(CreditReceipt))
    data["CorrelatedInvoices"] = ["400007396844549", 0, -1, 2**63, "x" * 10_000, True, 1.5]
    problems = check(data)
    assert fields_of(problems) == {
        f"CorrelatedInvoices[{index}]": Severity.ERROR for index in range(1, 7)
    }
    data["CorrelatedInvoices"] = 400007396844549
    assert fields_of(check(data)) == {"CorrelatedInvoices": Severity.ERROR}


def test_an_uncorrelated_credit_that_names_marks_is_a_warning():
    data = to_json(build(UncorrelatedCreditNote))
    data["CorrelatedInvoices"] = [400007396844549]
    assert fields_of(check(data)) == {"CorrelatedInvoices": Severity.WARNING}


def test_a_third_party_is_named_by_its_vat_number():
    """An 11.5 without a third party passes (the provider's sample has none); one
    without a VAT number is a warning; one that is not an object an error."""
    assert check(build(ThirdPartyReceipt, third_party=None)) == []
    problems = check(build(ThirdPartyReceipt, third_party=Party(registered_name="x")))
    assert fields_of(problems) == {"ThirdParty.Vat": Severity.WARNING}
    data = to_json(build(ThirdPartyReceipt))
    data["ThirdParty"] = "EL094019245"
    assert fields_of(check(data)) == {"ThirdParty": Severity.ERROR}


def test_the_types_typed_before_have_no_new_rules():
    """11.1, 1.1, 2.1, 5.1 keep their rules: a 1.1 to a customer abroad, a 0 % line
    without an exemption, are theirs to decide (no new problem)."""
    data = to_json(build(IntraEUSalesInvoice, lines=[Line("x", unit_price=1, vat_category=7)]))
    for code in ("11.1", "1.1", "2.1", "5.1"):
        assert check({**data, "InvoiceTypeCode": code, "CounterParty": None}) == []


# --- hostile values --------------------------------------------------------------------------


def test_hostile_members_are_typed_errors_or_problems():
    """Huge marks, odd country codes, very long strings: a ValueError when made (a mark)
    or read (from_json), a problem when checked, in a message of bounded size."""
    with pytest.raises(ValueError, match=r"correlated_invoices\[0\].*4,097 bits"):
        build(CreditReceipt, correlated_invoices=[2**4096])
    for bad in (0, -3, True, "1"):
        with pytest.raises(ValueError, match="correlated_invoices"):
            build(CreditReceipt, correlated_invoices=[bad])
    with pytest.raises(ValueError, match="correlated_invoices"):  # a 5.1's marks too
        CreditNote(
            issuer=Party(vat=TIN), series="C", number=1, issued="2026-11-22", lines=[TAXED],
            correlated_invoices=[2**63],
        )  # fmt: skip
    data = to_json(build(CreditReceipt))
    data["CorrelatedInvoices"] = [10**40]
    with pytest.raises(ValueError, match="not a CreditReceipt"):
        from_json(data)
    data["CorrelatedInvoices"] = ["9" * 100_000]
    with pytest.raises(ValueError, match="not a CreditReceipt"):
        from_json(data)
    for country in ("ITA", "I", "", "1T", "\u0399\u03a4", "I\u2028", "X" * 1_000_000, 39):
        problems = check(build(IntraEUSalesInvoice, counterparty=customer(country)))
        assert [p.field for p in problems if p.is_error] == ["CounterParty.Address.CountryCode"]
        assert all(len(p.message) < 300 for p in problems)
    long_vat = "IT" + "9" * 1_000_000
    problems = check(build(IntraEUSalesInvoice, counterparty=customer("IT", long_vat)))
    assert problems == []  # a foreign VAT number's digits are the tax platform's to judge
    huge = Line("x", unit_price="1e20", vat_category=7, vat_exemption=10**5000)
    problems = check(build(ThirdCountrySalesInvoice, lines=[huge]))
    assert fields_of(problems) == {"Details[0].VatExemptionCategoryCode": Severity.WARNING}
    with pytest.raises(ValidationError, match=r"Details\[0\]\.VatExemptionCategoryCode"):
        serialize_document(build(ThirdCountrySalesInvoice, lines=[huge]))  # where it is sent


# --- a typed document's problems are its JSON's ------------------------------------------


_COUNTRIES = st.sampled_from(["IT", "GR", "el", "GB", "us", "ITA", "", None])
_VATS = st.sampled_from(["IT12345678901", "DE1", "", None, "GB"])


@st.composite
def kinds(draw) -> DocumentBase:
    cls = draw(st.sampled_from(sorted(SHAPES, key=lambda cls: cls.__name__)))
    lines = draw(
        st.lists(
            st.builds(
                Line,
                st.just("x"),
                unit_price=st.decimals(0, 1000, places=2),
                vat_category=st.sampled_from([1, 3, 7, 8]),
                vat_exemption=st.none() | st.integers(0, 40),
            ),
            min_size=1,
            max_size=3,
        )
    )
    fields: dict = {"lines": lines}
    if draw(st.booleans()):  # amounts given: the rules read the lines again
        fields["lines"] = [attrs.evolve(line, vat_total=line.vat_total) for line in lines]
    party = st.none() | st.builds(customer, _COUNTRIES, _VATS)
    if cls not in (CreditReceipt, ThirdPartyReceipt):
        fields["counterparty"] = draw(party)
    if cls is CreditReceipt:
        fields["correlated_invoices"] = draw(st.lists(st.integers(1, 2**63 - 1), max_size=2))
    if cls is ThirdPartyReceipt:
        fields["third_party"] = draw(st.none() | st.builds(Party, vat=_VATS))
    return build(cls, **fields)


@settings(max_examples=200, deadline=None)
@given(kinds())
def test_a_typed_documents_type_problems_are_its_jsons(document):
    """check of a typed document of a new type finds exactly what check of its JSON
    finds, whatever its counterparty, lines, exemptions and marks; and the sandbox
    refuses exactly its errors."""
    body = serialize_document(document)
    problems = check(document)
    assert problems == check(json.loads(body))
    assert sandbox_rules(json.loads(body)) == [p for p in problems if p.is_error]
    assert from_json(json.loads(body)) == document


def test_a_line_given_amounts_keeps_its_exemption_in_the_rules_view():
    """A line whose amounts are given (read again by the rules) carries its exemption
    to them: no false alarm."""
    line = Line("x", net_total="10.00", vat_total="0", vat_category=7, vat_exemption=14)
    assert check(build(IntraEUSalesInvoice, lines=[line])) == []
    assert line.total == Decimal("10.00")
