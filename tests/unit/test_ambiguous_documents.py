"""A member written twice with different values is refused, naming both members.

The provider binds names ignoring case, so ``Series`` and ``series`` are one member to
it, as is a name written twice in a JSON text; it keeps one of the two values. A
document whose two writings differ would be identified, routed and checked by one value
while the provider commits it under the other: it is refused (``AmbiguousDocumentError``,
an ``InvalidDocumentError``) where a mapping is serialised and where JSON text is read,
in any of its objects. The same member written twice with the same value is accepted.
The sandbox binds such a document as System.Text.Json does by default: the last value.
(End to end, before any request: tests/system/test_ambiguous_entry.py.)
"""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from providersamples import retail_receipt

from invoicing_async import (
    AmbiguousDocumentError,
    InvalidDocumentError,
    Outcome,
    OutcomeStatus,
    ValidationError,
    document_key,
    outcome_from_dict,
    outcome_to_dict,
)
from invoicing_async._cli.inputs import read
from invoicing_async._doc.binding import suspect, twins
from invoicing_async._doc.checked import require_valid
from invoicing_async._doc.document import identify, serialize_document
from invoicing_async.documents import (
    SOURCES,
    Line,
    Party,
    RetailReceipt,
    Severity,
    check,
    checked,
    from_json,
    to_json,
)
from invoicing_sandbox._rules import parse_document
from invoicing_sandbox._wire import document_identity


def _series_twice(document: dict) -> None:
    document["series"] = "B"  # beside "Series": "GR05GR"


def _internal_id_twice(document: dict) -> None:
    document["DistributionDetails"]["internalDocumentId"] = "another-id"


def _summaries_twice(document: dict) -> None:
    document["Summaries"]["totalNetAmount"] = 1000  # beside TotalNetAmount 197.03


def _issuer_twice(document: dict) -> None:
    document["Issuer"]["VAT"] = "094019245"


def _counterparty_twice(document: dict) -> None:
    document["CounterParty"]["vat"] = "EL094019245"


def _line_twice(document: dict) -> None:
    document["Details"].append(copy.deepcopy(document["Details"][0]))
    document["Details"][1]["netTotal"] = 1.0


def _classification_twice(document: dict) -> None:
    document["Details"][0]["IncomeClassification"]["amount"] = 1.0


def _payment_twice(document: dict) -> None:
    document["PaymentDetails"]["PaymentMethods"][0]["AMOUNT"] = 0


def _distribution_twice(document: dict) -> None:
    document["distributionDetails"] = {"InternalDocumentId": "another-id"}


#: Each place a member is written twice: the two members, as the error names them.
TWICE = {
    "the series": (_series_twice, ("Series", "series")),
    "the internal document id": (
        _internal_id_twice,
        ("DistributionDetails.InternalDocumentId", "DistributionDetails.internalDocumentId"),
    ),
    "a summary": (
        _summaries_twice,
        ("Summaries.TotalNetAmount", "Summaries.totalNetAmount"),
    ),
    "the issuer's VAT number": (_issuer_twice, ("Issuer.Vat", "Issuer.VAT")),
    "the customer's VAT number": (_counterparty_twice, ("CounterParty.Vat", "CounterParty.vat")),
    "a line's amount": (_line_twice, ("Details[1].NetTotal", "Details[1].netTotal")),
    "a nested object of a line": (
        _classification_twice,
        ("Details[0].IncomeClassification.Amount", "Details[0].IncomeClassification.amount"),
    ),
    "a payment method": (
        _payment_twice,
        ("PaymentDetails.PaymentMethods[0].Amount", "PaymentDetails.PaymentMethods[0].AMOUNT"),
    ),
    "a whole object": (_distribution_twice, ("DistributionDetails", "distributionDetails")),
}


def twice(case: str) -> dict:
    document = retail_receipt()
    TWICE[case][0](document)
    return document


@pytest.mark.parametrize("case", sorted(TWICE))
def test_a_member_written_twice_is_refused_where_it_is_serialised_naming_both(case):
    """Serialising (what every way of sending does first) raises AmbiguousDocumentError:
    an InvalidDocumentError and a ValidationError with no status (nothing sent), its
    members the two paths, its problem naming the second and, in its message, the
    first."""
    members = TWICE[case][1]
    with pytest.raises(AmbiguousDocumentError) as caught:
        serialize_document(twice(case))
    error = caught.value
    assert isinstance(error, InvalidDocumentError)
    assert isinstance(error, ValidationError)
    assert error.status is None
    assert error.members == (members,)
    [problem] = error.problems
    assert problem.field == members[1]
    assert problem.severity is Severity.ERROR
    assert problem.source == SOURCES["binding"]
    first = members[0].rpartition(".")[2]
    assert f"is also written {first!r}, with another value" in problem.message
    assert str(error).startswith(f"the document is ambiguous: {members[1]}: ")


@pytest.mark.parametrize("case", sorted(TWICE))
def test_check_names_it_as_an_error(case):
    """``check`` finds it (it gave a warning for three objects before, nothing for the
    others): an error naming the second member; a checked document raises it."""
    document = twice(case)
    errors = [p for p in check(document) if p.severity is Severity.ERROR]
    assert TWICE[case][1][1] in {p.field for p in errors}
    with pytest.raises(AmbiguousDocumentError) as caught:
        require_valid(document, subject="document 3")
    assert caught.value.members == (TWICE[case][1],)
    assert str(caught.value).startswith("document 3 is ambiguous: ")
    with pytest.raises(AmbiguousDocumentError):
        serialize_document(checked(document))


def test_the_same_member_twice_with_the_same_value_is_accepted():
    """Two spellings of a member holding one value (``1`` and ``1.0`` are one number),
    and a name twice in a JSON text with one value, are no ambiguity: serialised, read
    and checked as before (no warning either)."""
    document = retail_receipt()
    document["series"] = document["Series"]
    document["Summaries"]["totalNetAmount"] = document["Summaries"]["TotalNetAmount"]
    document["Details"][0]["quantity"] = 1.0  # beside "Quantity": 1
    document["distributionDetails"] = copy.deepcopy(document["DistributionDetails"])
    body = serialize_document(document)
    assert check(document) == check(retail_receipt())
    assert identify(body) == identify(document)
    text = body.decode()
    repeated = text.replace('"Series":"GR05GR"', '"Series":"GR05GR","Series":"GR05GR"')
    assert repeated != text
    assert identify(repeated) == identify(document)
    assert check(repeated.encode()) == check(retail_receipt())


def test_json_text_with_a_name_twice_is_refused_where_it_is_identified():
    """JSON text (bytes or str) is read by the library itself: a name written twice
    with different values (json.loads would keep the last, silently) or two spellings
    are refused where the text is identified, naming the member; ``document_key`` never
    raises, and names the text by what json.loads reads."""
    body = serialize_document(retail_receipt())
    twice_in_text = body.replace(b'"Series":"GR05GR"', b'"Series":"GR05GR","Series":"B"')
    spelled = body.replace(b'"Series":"GR05GR"', b'"Series":"GR05GR","series":"B"')
    nested = body.replace(b'"Postal":"15125"', b'"Postal":"15125","Postal":"1"', 1)
    for text, members in (
        (twice_in_text, ("Series", "Series")),
        (spelled.decode(), ("Series", "series")),
        (memoryview(nested), ("Issuer.Address.Postal", "Issuer.Address.Postal")),
    ):
        with pytest.raises(AmbiguousDocumentError) as caught:
            identify(text, subject="document 7")
        assert caught.value.members == (members,)
        assert str(caught.value).startswith(f"document 7 is ambiguous: {members[1]}: ")
        assert caught.value.problems[0].field == members[1]
        document_key(text)  # never raises
    [problem] = [p for p in check(twice_in_text) if p.is_error]
    assert problem.field == "Series"
    assert problem.message.startswith(
        'is written twice, with different values ("GR05GR", then "B")'
    )
    with pytest.raises(AmbiguousDocumentError):
        require_valid(twice_in_text)


def test_a_typed_document_never_reads_the_other_value():
    """from_json of the dict that keyed ``…/A/1`` as a dict and ``…/B/1`` typed is
    refused, naming both; a typed document whose ``extra`` holds a member the model
    writes, with another value (its name or another spelling), is refused by to_json
    and where it is serialised, instead of one of the values being dropped."""
    document = to_json(_typed())
    ambiguous = {"series": "B", **document, "Series": "A"}
    with pytest.raises(AmbiguousDocumentError) as caught:
        from_json(ambiguous)
    assert caught.value.members == (("series", "Series"),)
    assert from_json({**document, "series": document["Series"]}).series == document["Series"]
    for extra, members in (
        ({"Series": "B"}, ("Series", "Series")),
        ({"series": "B"}, ("series", "Series")),  # extra is written first
        ({"DistributionDetails": {"internalDocumentId": "x"}}, None),
    ):
        typed = _typed(extra=extra)
        with pytest.raises(AmbiguousDocumentError) as caught:
            to_json(typed)
        if members is not None:
            assert caught.value.members == (members,)
        with pytest.raises(AmbiguousDocumentError):
            serialize_document(typed)
    assert to_json(_typed(extra={"Series": "A"}))["Series"] == "A"  # the same value


def _typed(**options: Any) -> RetailReceipt:
    return RetailReceipt(
        issuer=Party(vat="EL123456783"), series="A", number=1, issued="2026-11-22",
        lines=[Line("Tea", unit_price="2.00")], internal_id="till/A/1", **options,
    )  # fmt: skip


def test_a_hostile_document_is_named_briefly():
    """Twins of megabytes, of values nested deeper than can be compared, and thousands
    of them: the refusal names at most a hundred, each in a short message; nothing
    raises but the refusal."""
    deep: Any = 1
    for _ in range(50_000):
        deep = [deep]
    document = {"Series": "x" * 1_000_000, "series": "y", "A": deep, "a": [deep]}
    document.update({f"K{n}": n for n in range(5000)} | {f"k{n}": -n for n in range(5000)})
    found = twins(document)
    assert len(found) == 100
    assert found[0].message.startswith(
        'is also written \'Series\', with another value ("y" here, "xxx'
    )
    assert max(len(twin.message) for twin in found) < 200
    assert twins({"A": deep, "a": [deep]})[0].values[0] is deep  # compared, deep as it is


def test_the_error_is_kept_with_its_members_in_an_outcome_and_a_pickle():
    """An outcome written to a ledger or outbox and read back, or a pickled error (a
    process pool), keeps its class, its members and its problems."""
    with pytest.raises(AmbiguousDocumentError) as caught:
        serialize_document(twice("a summary"))
    error = caught.value
    outcome = Outcome(index=0, key="k", status=OutcomeStatus.REJECTED, error=error)
    again = outcome_from_dict(json.loads(json.dumps(outcome_to_dict(outcome)))).error
    for copied in (again, pickle.loads(pickle.dumps(error))):  # noqa: S301  (our own bytes)
        assert type(copied) is AmbiguousDocumentError
        assert copied.members == error.members
        assert copied.problems == error.problems
        assert str(copied) == str(error)


def test_the_command_keeps_a_name_written_twice_for_the_check(tmp_path):
    """The command reads JSON itself: a line naming a member twice with different
    values (json.loads would keep the last) is read so that --check names it and
    sending refuses it; one naming it twice with one value reads as json.loads does."""
    path = tmp_path / "in.jsonl"
    path.write_text('{"Series": "A", "Series": "B"}\n{"Series": "A", "Series": "A"}\n')
    [(_, first), (_, second)] = list(read([str(path)]))
    assert first == {"Series": "B"}
    assert "Series" in {p.field for p in check(first) if p.is_error}
    with pytest.raises(AmbiguousDocumentError):
        serialize_document(first)
    assert type(second) is dict
    assert serialize_document(second) == b'{"Series":"A"}'


def test_the_sandbox_binds_the_last_value_read_as_the_service_does():
    """The sandbox's reader is System.Text.Json's default binding: names ignoring case,
    the last value read kept (under the first spelling), for a name written twice too;
    the document is identified and committed with it."""
    body = serialize_document(retail_receipt())
    for text in (
        body.replace(b'"Series":"GR05GR"', b'"Series":"GR05GR","series":"B"'),
        body.replace(b'"Series":"GR05GR"', b'"Series":"GR05GR","Series":"B"'),
    ):
        document = parse_document(text)
        assert isinstance(document, dict)
        assert document["Series"] == "B"
        assert "series" not in document
    del document["DistributionDetails"]
    assert document_identity(document) == "doc:118058830/B/560010167"
    nested = parse_document(b'{"A": {"b": 1, "B": 2, "c": [{"x": 1, "X": 3}]}}')
    assert nested == {"A": {"b": 2, "c": [{"x": 3}]}}


_NAMES = st.sampled_from(["a", "A", "b", "B", "ab", "aB"])
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(0, 2) | st.sampled_from(["x", "y"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAMES, inner, max_size=4),
    max_leaves=12,
)


def _naive(value: Any, path: str = "") -> set[tuple[str, str]]:
    """The twins of ``value``, found the slow way: every pair of every object."""
    found: set[tuple[str, str]] = set()
    if isinstance(value, dict):
        names = list(value)
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                if first.lower() == second.lower() and json.dumps(
                    value[first], sort_keys=True
                ) != json.dumps(value[second], sort_keys=True):
                    found.add((f"{path}.{first}".lstrip("."), f"{path}.{second}".lstrip(".")))
        for name, item in value.items():
            found |= _naive(item, f"{path}.{name}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found |= _naive(item, f"{path}[{index}]")
    return found


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_the_one_pass_misses_no_twin(value):
    """Whatever the shape (seen before or not), the one pass over a document says
    "maybe" whenever there is a twin, and the exact walk finds the same twins as
    comparing every pair of every object."""
    for _ in range(2):  # the second time, its shapes are remembered
        expected = _naive(value)
        found = {twin.members for twin in twins(value)}
        assert found <= expected | {(b, a) for a, b in expected}
        assert len(found) == len(expected)
        if expected:
            assert suspect(value)
