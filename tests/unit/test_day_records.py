"""The rest of a day's requests and answers without I/O (``invoicing_async._core.day``).

Requests written as the provider reads them, answers read into typed records or refused
with a typed error (a hostile answer is never half-read), the listing's ``NextPage``
rule, and each refusal of the provider turned into the operation's own error.
"""

from __future__ import annotations

import datetime as dt

import pytest

from invoicing_async import (
    CardPayment,
    CreditRefusedError,
    DocumentNotFoundError,
    DuplicateDocumentError,
    InstantPaymentRequest,
    MalformedResponseError,
    PaymentConflictError,
    ValidationError,
)
from invoicing_async._core import day
from invoicing_async._core.convert import error_from_dict, error_to_dict


def test_a_credit_request_names_every_member_and_refuses_empty_ones():
    """Every member the provider requires, with the client's TIN; an empty one or a mark
    that is not a positive integer is refused before sending."""
    body = day.credit_body(
        "094019245",
        mark=4001,
        authentication_code="ABC",
        series="CR",
        number="1",
        internal_id="CR-1",
        relate_credit=True,
        prevent_document_mapping=False,
    )
    assert body == {
        "issuerTin": "094019245",
        "authenticationCode": "ABC",
        "mark": 4001,
        "series": "CR",
        "number": "1",
        "internalId": "CR-1",
        "relateCredit": True,
        "preventDocumentMapping": False,
    }
    good = {"authentication_code": "A", "series": "S", "number": "1", "internal_id": "I"}
    for name in good:
        with pytest.raises(ValueError, match=name):
            day.credit_body(
                "1",
                mark=1,
                relate_credit=False,
                prevent_document_mapping=False,
                **{**good, name: " "},
            )
    for mark in (0, -1, True, "1"):
        with pytest.raises(ValueError, match="mark"):
            day.credit_body(
                "1", mark=mark, relate_credit=False, prevent_document_mapping=False, **good
            )


def test_a_card_payment_writes_the_providers_names_and_leaves_out_none():
    """camelCase members; a member not given is left out; extra members are kept."""
    payment = CardPayment(
        amount=5, transaction_id="TX", providers_signature="SIG", extra={"merchantId": "M"}
    )
    assert day.payment_body("1", 7, [payment]) == {
        "mark": 7,
        "entityVatNumber": "1",
        "paymentMethods": [
            {
                "paymentMethodTypeCode": 7,
                "amount": 5,
                "transactionId": "TX",
                "providersSignature": "SIG",
                "merchantId": "M",
            }
        ],
    }
    with pytest.raises(ValueError, match="at least one"):
        day.payment_body("1", 7, [])
    with pytest.raises(ValueError, match="CardPayment"):
        day.payment_body("1", 7, [{"amount": 5}])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"success": False, "message": "no"}, ValidationError),
        ([], MalformedResponseError),
        ("12", MalformedResponseError),
    ],
)
def test_a_payment_answer_that_is_not_success_is_typed(body, error):
    """success false is a refusal; an answer that is not an object is malformed."""
    with pytest.raises(error):
        day.parse_payment_update(7, body, 1)


def test_a_payment_answer_gives_its_payment_mark():
    """The message is the payment mark; one that is not a number is kept as text."""
    done = day.parse_payment_update(7, {"success": True, "message": "4009"}, 2)
    assert (done.mark, done.payment_mark, done.attempts) == (7, 4009, 2)
    assert day.parse_payment_update(7, {"success": True, "message": "ok"}, 1).payment_mark is None


def test_an_instant_payment_request_keeps_the_providers_limits():
    """Validity 1 to 3 minutes and an amount above 0, checked when it is made; the
    request written with the issuer's TIN, members not given left out."""
    for minutes in (0, 4, True):
        with pytest.raises(ValueError, match="validity_minutes"):
            InstantPaymentRequest(amount=1, validity_minutes=minutes)
    with pytest.raises(ValueError, match="amount"):
        InstantPaymentRequest(amount=0)
    written = InstantPaymentRequest(amount=2.5, validity_minutes=1, mark=9).to_json("1")
    assert written == {"issuerTin": "1", "paymentAmount": 2.5, "validityPeriod": 1, "mark": 9}


def test_instant_payment_answers_are_read_or_refused_whole():
    """The ids are required; times are read as UTC; a status about another payment, or
    without a status, is malformed; isFinalStatus is read, or derived."""
    started = day.parse_instant_payment(
        {
            "endToEndDiasId": "E",
            "authorisationRequestId": "A",
            "createdAt": "2026-11-22T10:00:00Z",
            "expiresAt": "2026-11-22T10:02:00",
        },
        2,
    )
    assert started.expires_at - started.created_at == dt.timedelta(minutes=2)
    assert started.expires_at.tzinfo is not None
    with pytest.raises(MalformedResponseError, match="authorisationRequestId"):
        day.parse_instant_payment({"endToEndDiasId": "E"}, 2)
    with pytest.raises(MalformedResponseError, match="another payment"):
        day.parse_payment_status({"endToEndDiasId": "X", "paymentStatus": "Pending"}, "E")
    with pytest.raises(MalformedResponseError, match="paymentStatus"):
        day.parse_payment_status({"endToEndDiasId": "E"}, "E")
    assert day.parse_payment_status({"paymentStatus": "Expired"}, "E").final
    pending = day.parse_payment_status({"paymentStatus": "Pending", "isFinalStatus": False}, "E")
    assert not pending.final
    assert day.poll_again(pending, now=1.0, deadline=2.0)
    assert not day.poll_again(pending, now=2.0, deadline=2.0)


@pytest.mark.parametrize(
    ("header", "page", "empty", "expected"),
    [(None, 1, False, None), ("", 3, True, None), ("2", 1, False, 2), (" 9 ", 4, False, 9)],
)
def test_next_page_leads_on(header, page, empty, expected):
    """No header (or an empty one) ends the listing; a later page leads on."""
    assert day.next_page(header, page, empty=empty) == expected


@pytest.mark.parametrize(
    ("header", "page", "empty", "words"),
    [
        ("1", 1, False, "does not lead on"),
        ("1", 2, False, "does not lead on"),
        ("-3", 1, False, "not a page number"),
        ("1e3", 1, False, "not a page number"),
        ("9" * 100_000, 1, False, "not a page number"),
        ("٣", 1, False, "not a page number"),
        ("2", 1, True, "empty"),
    ],
)
def test_a_next_page_that_would_never_end_is_malformed(header, page, empty, words):
    """Looping back, standing still, no page number (a sign, an exponent, 100,000
    digits, a non-ASCII digit), or an empty page that names a next one."""
    with pytest.raises(MalformedResponseError, match=words):
        day.next_page(header, page, empty=empty)


@pytest.mark.parametrize(
    ("body", "words"),
    [({"mark": 1}, "not a JSON array"), ([1], "element 0 is not an object"),
     ([{"mark": 1}, {"mark": "x"}], "element 1 is not a result record")],
)  # fmt: skip
def test_a_page_that_is_not_an_array_of_records_is_malformed(body, words):
    """A page is an array of records, each read whole; the bad element is named."""
    with pytest.raises(MalformedResponseError, match=words):
        day.page_documents(body, 1)


def test_refusals_become_the_operations_own_errors():
    """A 404 about a document: DocumentNotFoundError; a credit's 400: CreditRefusedError
    with its reason; a payment's 409: PaymentConflictError with the payment mark; other
    errors unchanged. Each survives error_to_dict and error_from_dict."""
    missing = day.refusal("credit", _error(404, "no document with mark 1"))
    assert isinstance(missing, DocumentNotFoundError)
    for words, reason in [
        ("mark 1 has a correlated credit (5.1) already", "correlated_already"),
        ("mark 1 is a credit (5.2): a credit is not credited", "is_a_credit"),
        ("mark 1 is cancelled (cancellation mark 2)", "cancelled"),
        ("series: is required", "refused"),
    ]:
        refused = day.refusal("credit", ValidationError(words, status=400))
        assert isinstance(refused, CreditRefusedError)
        assert refused.reason == reason
        assert error_from_dict(error_to_dict(refused)).reason == reason  # type: ignore[attr-defined]
    body = {"message": "transaction 'TX' is recorded", "paymentMark": 44}
    conflict = day.refusal("update_payment", DuplicateDocumentError("409", body=body))
    assert isinstance(conflict, PaymentConflictError)
    assert conflict.payment_mark == 44
    assert error_from_dict(error_to_dict(conflict)).payment_mark == 44  # type: ignore[attr-defined]
    other = ValidationError("x", status=400)
    assert day.refusal("update_payment", other) is other
    listing = _error(404, "nowhere")
    assert day.refusal("documents_issued", listing) is listing


def _error(status, message):
    from invoicing_async import UnexpectedStatusError  # noqa: PLC0415

    return UnexpectedStatusError(message, status=status)
