"""The typed round trip keeps what was written: ``to_json(from_json(x))`` is ``x``.

Member names as spelled (PascalCase, camelCase, the samples' lower-case ``amount``), values
in the JSON types they were written in (text stays text, an integer an integer), ``null``
members, unknown members in their place; only what the model computed where ``x`` had
none is added (at the end of its object, spelled as the object's names are).
"""

from __future__ import annotations

import copy
import json
import pickle
from decimal import Decimal
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from providersamples import SAMPLES, camel, pascal, retail_receipt, service_invoice

from invoicing_async import AmbiguousDocumentError, document_key
from invoicing_async.documents import (
    Line,
    Party,
    RetailReceipt,
    check,
    from_json,
    to_json,
)

#: What the model computes where a document has none (at most these are added).
COMPUTED = {"vatanalysis", "lineno", "summaries", "amount"}


def _as_written(original: Any, again: Any, where: str = "") -> None:
    """``again`` is ``original`` byte for byte in names, order and value types, plus
    members the model computes appended to their object."""
    if isinstance(original, dict):
        assert isinstance(again, dict), where
        names = list(again)
        assert names[: len(original)] == list(original), where
        added = {name.lower() for name in names[len(original) :]}
        assert added <= COMPUTED, (where, added)
        for name, value in original.items():
            _as_written(value, again[name], f"{where}.{name}")
    elif isinstance(original, list):
        assert isinstance(again, list), where
        assert len(again) == len(original), where
        for index, (value, other) in enumerate(zip(original, again, strict=True)):
            _as_written(value, other, f"{where}[{index}]")
    else:
        assert type(again) is type(original), (where, original, again)
        assert again == original, where


def _without_added(original: Any, again: Any) -> Any:
    """``again`` without the members ``original`` did not have."""
    if isinstance(original, dict) and isinstance(again, dict):
        return {k: _without_added(original[k], again[k]) for k in again if k in original}
    if isinstance(original, list) and isinstance(again, list):
        return [_without_added(a, b) for a, b in zip(original, again, strict=False)]
    return again


def _holds(data: dict[str, Any]) -> None:
    again = to_json(from_json(data))
    _as_written(data, again)
    assert json.dumps(_without_added(data, again), ensure_ascii=False) == json.dumps(
        data, ensure_ascii=False
    )


# --- the published samples ----------------------------------------------------------------


@pytest.mark.parametrize("shape", [None, camel, pascal], ids=["as published", "camel", "pascal"])
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_sample_comes_back_as_written(name, shape):
    """Each sample, as published, in camelCase and in PascalCase: its names, order and
    value types come back; only the VAT analysis it lacks is added, spelled as its names
    are."""
    data = SAMPLES[name]()
    if shape is not None:
        data = shape(data)
    _holds(data)
    again = to_json(from_json(data))
    added = list(again)[len(data) :]
    lower = next(iter(data))[:1].islower()
    assert added == (["vatAnalysis"] if lower else ["VatAnalysis"])


def test_text_stays_text_integers_stay_integers_and_lower_case_names_stay():
    """``"NetTotal": "197.03"`` stays text, ``Quantity: 1`` and ``589`` integers (not
    ``1.0``, ``589.0``), the samples' lower-case ``amount`` lower-case."""
    data = retail_receipt()
    line = data["Details"][0]
    line["NetTotal"] = "197.03"
    line["IncomeClassification"]["amount"] = line["IncomeClassification"].pop("Amount")
    data["Summaries"]["TotalNetAmount"] = "197.03"
    invoice = service_invoice()
    invoice["Details"][0]["UnitPrice"] = 589
    again = to_json(from_json(data))
    assert again["Details"][0]["NetTotal"] == "197.03"
    assert again["Details"][0]["Quantity"] == 1
    assert type(again["Details"][0]["Quantity"]) is int
    assert again["Details"][0]["IncomeClassification"]["amount"] == 197.03
    assert "Amount" not in again["Details"][0]["IncomeClassification"]
    assert again["Summaries"]["TotalNetAmount"] == "197.03"
    other = to_json(from_json(invoice))["Details"][0]
    assert (type(other["UnitPrice"]), other["UnitPrice"]) == (int, 589)
    assert (type(other["VATTotal"]), other["VATTotal"]) == (int, 0)
    _holds(data)
    _holds(invoice)


def test_null_members_are_kept_and_unknown_members_stay_in_place():
    data = camel(retail_receipt())
    data["currencyCode"] = None
    data["details"][0]["code"] = None
    data = {"zzFirst": {"a": None}, **data}
    data["issuer"] = {"zzIn": 1, **data["issuer"], "zzLast": [None]}
    _holds(data)
    again = to_json(from_json(data))
    assert next(iter(again)) == "zzFirst"
    assert again["currencyCode"] is None
    assert again["details"][0]["code"] is None
    assert next(iter(again["issuer"])) == "zzIn"
    assert list(again["issuer"])[-1] == "zzLast"


def test_what_the_model_computes_is_added_spelled_as_the_document_is():
    """A document without summaries or line numbers gets them, at the end of their
    objects, in camelCase if its names are."""
    data = camel(retail_receipt())
    del data["summaries"]
    del data["details"][0]["lineNo"]
    del data["paymentDetails"]["paymentMethods"][0]["amount"]
    again = to_json(from_json(data))
    _as_written(data, again)
    assert list(again)[-2:] == ["summaries", "vatAnalysis"]
    assert again["summaries"] == {
        "totalNetAmount": 197.03,
        "totalVATAmount": 47.29,
        "totalGrossValue": 244.32,
    }
    assert list(again["details"][0])[-1] == "lineNo"
    assert again["details"][0]["lineNo"] == 1
    assert again["paymentDetails"]["paymentMethods"][0]["amount"] == 244.32
    assert again["vatAnalysis"][0].keys() == {"percentage", "underlyingValue", "vatAmount"}


def test_how_a_document_was_written_is_no_part_of_what_it_is():
    """The same document written otherwise (amounts as text or integers, members in
    another order, the model's names in another case) is equal, with the same key and
    problems; a copy with a field changed writes it in its place, in its type."""
    data = retail_receipt()
    other = dict(reversed(list(retail_receipt().items())))
    data["Details"][0]["NetTotal"] = "197.03"
    other["Details"][0]["Quantity"] = 1.0
    other["Summaries"] = {"totalNetAmount": "197.030", "TOTALVATAMOUNT": 47.29,
                          "totalGrossValue": 244.32}  # fmt: skip
    first, second = from_json(data), from_json(other)
    assert first == second
    assert hash(first.summaries) == hash(second.summaries)
    assert document_key(first) == document_key(second)
    assert check(first) == check(second) == check(data)
    document = from_json(camel(data))
    changed = to_json(attrs.evolve(document, series="B", number="7"))
    assert list(changed) == list(to_json(document))
    assert (changed["series"], changed["number"]) == ("B", "7")
    line = attrs.evolve(document.lines[0], net_total=Decimal("190.5"))
    changed = to_json(attrs.evolve(document, lines=[line]))
    assert changed["details"][0]["netTotal"] == "190.5"  # text, as it was written


def test_a_document_built_by_its_constructor_is_written_as_before():
    """No JSON read: the samples' PascalCase, the type code first, computed members."""
    lines = [Line("Espresso", quantity=2, unit_price="2.50")]
    issuer = Party(vat="EL123456783")
    receipt = RetailReceipt(issuer=issuer, series="A", number=1, issued="2026-11-22", lines=lines)
    written = to_json(receipt)
    assert list(written)[:2] == ["InvoiceTypeCode", "Issuer"]
    assert written["Details"][0]["Quantity"] == 2.0
    assert written["Details"][0]["LineNo"] == 1


def test_how_it_was_written_survives_copies_and_pickling():
    document = from_json(camel(retail_receipt()))
    for same in (copy.deepcopy(document), pickle.loads(pickle.dumps(document))):  # noqa: S301  (our own bytes)
        assert same == document
        assert to_json(same) == to_json(document)


def test_a_member_in_two_spellings_is_still_refused():
    data = retail_receipt()
    data["series"] = "OTHER"
    with pytest.raises(AmbiguousDocumentError):
        from_json(data)
    data["series"] = data["Series"]  # the same value twice: read, and written twice
    again = to_json(from_json(data))
    assert (again["Series"], again["series"]) == (data["Series"], data["Series"])


# --- the samples' shapes, any way they may be written -------------------------------------

_AMOUNTS = {
    "quantity", "unitprice", "nettotal", "vattotal", "total", "amount", "totalnetamount",
    "totalvatamount", "totalgrossvalue",
}  # fmt: skip
#: Members the model reads whose value may be null (optional, not computed).
_NULLABLE = {"currencycode", "code", "brandname", "registeredname", "branchcode", "city"}
_UNKNOWN = st.from_regex(r"[Zz]z[A-Za-z]{1,6}", fullmatch=True)
_LEAF = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=5)
_JSON = st.recursive(
    _LEAF,
    lambda inner: (
        st.lists(inner, max_size=2)
        | st.dictionaries(_UNKNOWN, inner, max_size=2).filter(  # no name in two spellings
            lambda d: len({name.lower() for name in d}) == len(d)
        )
    ),
    max_leaves=4,
)


def _amount(draw: Any, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return value
    number = Decimal(str(value))
    kinds = [float, lambda d: format(d, "f"), lambda d: f"{d:.2f}"]
    if number == number.to_integral_value():
        kinds.append(int)
    return draw(st.sampled_from(kinds))(number)


def _rewritten(draw: Any, value: Any, taken: set[str] | None = None) -> Any:
    """``value`` with its amounts in any JSON type, optional members null, unknown
    members anywhere in its objects."""
    if isinstance(value, list):
        return [_rewritten(draw, item) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    names = {name.lower() for name in value}
    for name, item in [*value.items(), (None, None)]:
        if draw(st.integers(0, 5)) == 0:
            unknown = draw(_UNKNOWN)
            if unknown.lower() not in names:
                names.add(unknown.lower())
                out[unknown] = draw(_JSON)
        if name is None:
            break
        lower = name.lower()
        if lower in _AMOUNTS:
            out[name] = _amount(draw, item)
        elif lower in _NULLABLE and draw(st.integers(0, 3)) == 0:
            out[name] = None
        else:
            out[name] = _rewritten(draw, item)
    return out


@st.composite
def written_samples(draw: Any) -> dict[str, Any]:
    data = SAMPLES[draw(st.sampled_from(sorted(SAMPLES)))]()
    shape = draw(st.sampled_from([lambda d: d, camel, pascal]))
    return _rewritten(draw, shape(data))


@settings(max_examples=150, deadline=None)
@given(written_samples())
def test_any_way_the_samples_may_be_written_comes_back_byte_for_byte(data):
    """Over the samples' shapes, in either case, amounts as numbers, integers or text,
    optional members null, unknown members anywhere: the round trip gives the JSON back
    byte for byte, but for what the model computed where it had none."""
    _holds(data)
    document = from_json(data)
    assert from_json(to_json(document)) == document


def test_the_typed_documents_have_a_converter_of_their_own():
    """Their format's converter (make_converter, as the two others): a new one reads and
    writes as from_json and to_json do."""
    from invoicing_async._doc.typedjson import make_converter  # noqa: PLC0415

    converter = make_converter()
    data = camel(retail_receipt())
    document = converter.structure(data, RetailReceipt)
    assert document == from_json(data)
    assert converter.unstructure(document) == to_json(from_json(data))
