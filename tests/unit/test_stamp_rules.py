"""What is stored of a deferred sale that never left: the rules of the stamp, pure.

``TransmissionFailure: 1`` is written into a dict and a typed document's JSON, never
twice in two spellings, never over a value the sale carries, never into the caller's
exact bytes; the hook's document is stored when it is one the provider would take, of
the sale's identity, and within the size limit; otherwise the sale as given is, and the
failure is said in words, logged once. The deferral over real HTTP is
``tests/system/test_deferral_stamp.py``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from invoicing_async._doc.document import describe, serialize_document
from invoicing_async._pos._stamp import stamp_sale
from invoicing_async.documents import Line, Party, PaymentMethod, RetailReceipt, checked, to_json
from invoicing_sandbox import sample_invoice

SALE = sample_invoice(1, lines=2)
RECEIPT = RetailReceipt(
    issuer=Party(vat="EL123456783"),
    series="T",
    number=1,
    issued="2026-11-22T10:15:00",
    lines=[Line("Espresso", quantity=2, unit_price="2.50")],
    payments=[PaymentMethod(7)],
    internal_id="till-1/T/1",
)


def stamp(document: Any, hook=None, *, transmission_failure=True, max_size=None):
    """:func:`stamp_sale` of ``document``, as the deferral calls it."""
    key, identity = describe(document)
    plain = serialize_document(document)
    return stamp_sale(
        document,
        key,
        identity,
        plain=plain,
        hook=hook,
        transmission_failure=transmission_failure,
        max_size=max_size,
    )


@pytest.mark.parametrize("document", [SALE, RECEIPT], ids=["dict", "typed"])
def test_a_dict_and_a_typed_document_get_the_member_last(document):
    """The JSON the sale is sent as, with ``TransmissionFailure: 1`` after its members."""
    body, stamped, error = stamp(document)
    data = to_json(document) if isinstance(document, RetailReceipt) else document
    assert body == serialize_document({**data, "TransmissionFailure": 1})
    assert (stamped, error) == (True, None)


@pytest.mark.parametrize(
    "name", ["TransmissionFailure", "transmissionFailure", "TRANSMISSIONFAILURE"]
)
def test_a_member_of_its_own_is_kept_and_a_null_one_replaced(name):
    """The provider reads names in any case: a value the sale carries, in any spelling,
    is its own (kept, nothing changed); a ``null`` one is no value, and is replaced by
    the one member, never written beside it."""
    own = {**SALE, name: 3}
    assert stamp(own) == (serialize_document(own), False, None)
    body, stamped, _ = stamp({**SALE, name: None})
    written = json.loads(body)
    assert [k for k in written if k.lower() == "transmissionfailure"] == ["TransmissionFailure"]
    assert (written["TransmissionFailure"], stamped) == (1, True)


@pytest.mark.parametrize(
    "document", [serialize_document(SALE), serialize_document(SALE).decode()], ids=["bytes", "text"]
)
def test_the_callers_bytes_are_stored_as_given(document):
    """JSON bytes and text are the caller's exact bytes (perhaps signed): not rewritten."""
    assert stamp(document) == (serialize_document(document), False, None)


def test_without_the_member_and_without_a_hook_the_sale_is_stored_as_given():
    assert stamp(SALE, transmission_failure=False) == (serialize_document(SALE), False, None)


@pytest.mark.parametrize(
    ("returned", "stored"),
    [
        (
            lambda sale: serialize_document({**sale, "TransmissionFailure": 2}),
            {**SALE, "TransmissionFailure": 2},
        ),
        (
            lambda sale: checked({**sale, "PosId": "7"}),
            {**SALE, "PosId": "7", "TransmissionFailure": 1},
        ),
    ],
    ids=["bytes", "checked"],
)
def test_the_hook_may_return_any_kind_of_document(returned, stored):
    """Bytes are stored as the hook wrote them; a checked document is checked and
    unwrapped, then stamped."""
    assert stamp(SALE, returned) == (serialize_document(stored), True, None)


def test_a_hooks_document_too_large_to_send_is_not_stored():
    """The client's ``max_document_size`` holds for what the hook returns: the sale as
    given is stored (stamped), not a document the drainer could never send."""
    plain = serialize_document(SALE)

    def bloat(sale: dict) -> dict:
        return {**sale, "Notes": "x" * 1000}

    body, stamped, error = stamp(SALE, bloat, max_size=len(plain) + 100)
    assert body == serialize_document({**SALE, "TransmissionFailure": 1})
    assert stamped
    assert error is not None
    assert error.startswith("the stamp hook returned a document that cannot be sent:")


def test_a_failing_hook_is_logged_once_with_its_traceback_and_its_words_are_bounded(caplog):
    """An ERROR naming the sale and the failure, with the hook's traceback; the failure
    kept with the sale is one bounded line."""

    def broken(sale: dict) -> dict:
        raise ValueError("x" * 10_000)

    caplog.set_level(logging.INFO, logger="invoicing_async")
    body, stamped, error = stamp(SALE, broken, transmission_failure=False)
    assert (body, stamped) == (serialize_document(SALE), False)
    assert error is not None
    assert error.startswith("the stamp hook raised ValueError: xxx")
    assert len(error) < 300
    [record] = caplog.records
    assert (record.name, record.levelno) == ("invoicing_async.deferral", logging.ERROR)
    assert describe(SALE)[0] in record.getMessage()
    assert record.exc_info is not None
