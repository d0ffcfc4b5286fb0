"""The rest of a day's operations, without I/O: their requests, answers and refusals.

Credits (``POST /Invoice/credit``), delayed card payments (``POST /Invoice/updatePayment``),
IRIS instant payments (``InitiatePayment``, ``GetPaymentStatus``) and the listing of issued
documents (``GET /api/invoice/getdocuments/{IssuerVatNumber}/{PageNumber}/``), as the
provider's pages describe them (design guide §12). Each request is a typed record that
writes the provider's JSON; each answer is read into a typed record, or refused with a
typed error naming what is wrong (a hostile answer is never half-read); each refusal of
the provider becomes the operation's own error (:func:`refusal`). The decisions that need
a clock take the time as an argument (:func:`poll_again`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from .convert import result_from_json
from .errors import (
    CreditRefusedError,
    DocumentNotFoundError,
    DuplicateDocumentError,
    InvoicingError,
    MalformedResponseError,
    PaymentConflictError,
    ValidationError,
)

if TYPE_CHECKING:
    from .models import DocumentResult

__all__ = [
    "IRIS_FINAL",
    "CardPayment",
    "CreditResult",
    "InstantPayment",
    "InstantPaymentRequest",
    "InstantPaymentStatus",
    "PaymentUpdateResult",
    "credit_body",
    "next_page",
    "page_documents",
    "parse_instant_payment",
    "parse_payment_status",
    "parse_payment_update",
    "payment_body",
    "poll_again",
    "refusal",
    "yyyymmdd",
]

#: The IRIS statuses a payment ends in.
IRIS_FINAL = frozenset({"Completed", "Expired", "Failed"})


# --- credits ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CreditResult:
    """What ``POST /Invoice/credit`` answered: the provider issued the credit.

    The provider documents ``200`` with an empty body: the credit's own mark is then
    unknown here (:attr:`mark` ``None``) and the day's listing shows it
    (:meth:`InvoicingClient.documents_issued
    <invoicing_async.InvoicingClient.documents_issued>`). When a credit sent again after
    a lost answer is answered ``409`` with the credit's record, :attr:`record` is it.

    .. versionadded:: 0.5.0
    """

    #: The credited document's mark.
    original_mark: int
    #: The credit's numbers, as sent.
    series: str
    number: str
    internal_id: str
    #: Sent as ``relateCredit``: a correlated credit (5.1) of an invoice; ignored for a
    #: retail receipt (its credit is an 11.4).
    relate_credit: bool
    #: 200, or 409 when this call's own earlier attempt had issued it.
    status: int = 200
    #: The credit's record, when the provider answered one.
    record: DocumentResult | None = None
    #: Requests sent for this call.
    attempts: int = 1

    @property
    def mark(self) -> int | None:
        """The credit's own mark, when the provider answered its record."""
        return self.record.mark if self.record is not None else None


def credit_body(
    issuer: str,
    *,
    mark: int,
    authentication_code: str,
    series: str,
    number: str,
    internal_id: str,
    relate_credit: bool,
    prevent_document_mapping: bool,
) -> dict[str, Any]:
    """The request of ``POST /Invoice/credit`` (every member the provider requires).

    :raises ValueError: a member is empty, or ``mark`` is not a positive integer.
    """
    if isinstance(mark, bool) or not isinstance(mark, int) or mark <= 0:
        raise ValueError(f"mark must be a positive integer, not {mark!r}")
    texts = {
        "authentication_code": authentication_code,
        "series": series,
        "number": number,
        "internal_id": internal_id,
    }
    for name, value in texts.items():
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} must be a non-empty string")
    return {
        "issuerTin": issuer,
        "authenticationCode": authentication_code,
        "mark": mark,
        "series": series,
        "number": number,
        "internalId": internal_id,
        "relateCredit": relate_credit,
        "preventDocumentMapping": prevent_document_mapping,
    }


# --- delayed card payments -------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CardPayment:
    """One payment method of ``POST /Invoice/updatePayment``: what the terminal did.

    Sign the payment for the document's mark first
    (:meth:`~invoicing_async.InvoicingClient.sign_pos_transaction`, whose answer gives
    ``providers_signature`` and ``pos_input``), run the terminal, then send it.

    .. versionadded:: 0.5.0
    """

    #: The amount paid.
    amount: float
    #: The terminal's transaction id.
    transaction_id: str
    #: SignPos's ``signature`` for this payment, and the ``signedDataInput`` it signed.
    providers_signature: str
    pos_input: str | None = None
    terminal_id: str | None = None
    #: The myDATA payment method: 7, a POS (card) payment, by default.
    payment_method_type_code: int = 7
    tip_amount: float | None = None
    #: Other members the provider's pages name, sent as given.
    extra: Mapping[str, Any] = attrs.field(factory=dict, hash=False)

    def to_json(self) -> dict[str, Any]:
        """The payment method as the provider reads it (members left out when ``None``)."""
        written: dict[str, Any] = {
            "paymentMethodTypeCode": self.payment_method_type_code,
            "amount": self.amount,
            "transactionId": self.transaction_id,
            "providersSignature": self.providers_signature,
            "posInput": self.pos_input,
            "terminalId": self.terminal_id,
            "tipAmount": self.tip_amount,
        }
        return {**{k: v for k, v in written.items() if v is not None}, **self.extra}


@attrs.frozen(kw_only=True)
class PaymentUpdateResult:
    """What ``POST /Invoice/updatePayment`` answered: the payment is registered.

    .. versionadded:: 0.5.0
    """

    #: The paid document's mark.
    mark: int
    #: The payment's own mark (the provider's ``message``), when it is a number.
    payment_mark: int | None
    #: The provider's ``message`` as sent.
    message: str | None = None
    #: Requests sent for this call.
    attempts: int = 1


def payment_body(issuer: str, mark: int, payments: list[CardPayment]) -> dict[str, Any]:
    """The request of ``POST /Invoice/updatePayment``.

    :raises ValueError: no payment, a payment that is not a :class:`CardPayment`, or a
        mark that is not a positive integer.
    """
    if isinstance(mark, bool) or not isinstance(mark, int) or mark <= 0:
        raise ValueError(f"mark must be a positive integer, not {mark!r}")
    if not payments:
        raise ValueError("at least one payment is required")
    if not all(isinstance(payment, CardPayment) for payment in payments):
        raise ValueError("payments must be CardPayment instances")
    return {
        "mark": mark,
        "entityVatNumber": issuer,
        "paymentMethods": [payment.to_json() for payment in payments],
    }


def parse_payment_update(mark: int, body: Any, attempts: int) -> PaymentUpdateResult:
    """The answer ``{"success": true, "message": "<payment mark>"}``.

    :raises ValidationError: the provider answered ``success`` false.
    :raises MalformedResponseError: the answer is not such an object.
    """
    what = "POST /Invoice/updatePayment"
    if not isinstance(body, Mapping):
        raise MalformedResponseError(f"{what}: the answer is not a JSON object", status=200)
    message = body.get("message")
    message = message if isinstance(message, str) else None
    if body.get("success") is False:
        shown = (message or "success false")[:500]
        raise ValidationError(f"{what}: {shown}", status=200, body=body)
    return PaymentUpdateResult(
        mark=mark, payment_mark=_number(message), message=message, attempts=attempts
    )


# --- IRIS instant payments ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class InstantPaymentRequest:
    """What ``InitiatePayment`` asks: a payment the payer approves by scanning a QR.

    The document's keys and amounts are those of the receipt being paid (``mark`` 0 or
    ``None``: not issued yet). The QR is valid for ``validity_minutes`` (1 to 3).

    .. versionadded:: 0.5.0
    """

    amount: float
    validity_minutes: int = 3
    #: ``payeeInfo``: ``displayName``, ``companyName``, ``tin``.
    payee: Mapping[str, Any] | None = None
    mark: int | None = None
    issue_date: str | None = None
    branch_code: int | None = None
    invoice_type_code: str | None = None
    series: str | None = None
    identifier: str | None = None
    total_net_amount: float | None = None
    total_vat_amount: float | None = None
    total_amount: float | None = None
    tip_amount: float | None = None
    merchant_id: str | None = None
    generate_qr_code_image: bool | None = None
    qr_code_size: int | None = None
    #: Other members, sent as given.
    extra: Mapping[str, Any] = attrs.field(factory=dict, hash=False)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.validity_minutes, bool) or self.validity_minutes not in (1, 2, 3):
            raise ValueError("validity_minutes must be 1, 2 or 3 (the provider's limits)")
        if not isinstance(self.amount, (int, float)) or not self.amount > 0:
            raise ValueError("amount must be a number above 0")

    def to_json(self, issuer: str) -> dict[str, Any]:
        """The request as the provider reads it (members left out when ``None``)."""
        written: dict[str, Any] = {
            "issuerTin": issuer,
            "payeeInfo": dict(self.payee) if self.payee is not None else None,
            "paymentAmount": self.amount,
            "validityPeriod": self.validity_minutes,
            "issueDate": self.issue_date,
            "branchCode": self.branch_code,
            "invoiceTypeCode": self.invoice_type_code,
            "series": self.series,
            "identifier": self.identifier,
            "mark": self.mark,
            "totalNetAmount": self.total_net_amount,
            "totalVatAmount": self.total_vat_amount,
            "totalAmount": self.total_amount,
            "tipAmount": self.tip_amount,
            "merchantId": self.merchant_id,
            "generateQrCodeImage": self.generate_qr_code_image,
            "qrCodeSize": self.qr_code_size,
        }
        return {**{k: v for k, v in written.items() if v is not None}, **self.extra}


@attrs.frozen(kw_only=True)
class InstantPayment:
    """An IRIS payment started: the QR to show, and the ids to follow it by.

    .. versionadded:: 0.5.0
    """

    #: What :meth:`~invoicing_async.InvoicingClient.instant_payment_status` asks about.
    end_to_end_id: str
    #: What the document's payment method 8 carries as its ``TransactionId``.
    authorisation_request_id: str
    #: The QR's text (show it), and its image when the provider drew one.
    qr_code: str | None = None
    qr_code_image: str | None = None
    created_at: dt.datetime | None = None
    expires_at: dt.datetime | None = None
    #: Minutes the QR is valid for, as asked.
    validity_minutes: int = 3
    signed_data_input: str | None = attrs.field(default=None, repr=False)
    signature: str | None = attrs.field(default=None, repr=False)


@attrs.frozen(kw_only=True)
class InstantPaymentStatus:
    """An IRIS payment's status (``GetPaymentStatus``).

    .. versionadded:: 0.5.0
    """

    end_to_end_id: str
    #: ``Pending`` (keep polling), ``Completed``, ``Expired`` or ``Failed``.
    status: str
    description: str | None = None
    completed_at: dt.datetime | None = None
    #: The provider's ``isFinalStatus`` (or, when it sends none, a final status).
    final: bool = False

    @property
    def completed(self) -> bool:
        """Whether the payer paid."""
        return self.status == "Completed"


def parse_instant_payment(body: Any, validity_minutes: int) -> InstantPayment:
    """``InitiatePayment``'s answer.

    :raises MalformedResponseError: it is not an object with both ids.
    """
    what = "POST /paymentsapi/IrisPayments/InitiatePayment"
    if not isinstance(body, Mapping):
        raise MalformedResponseError(f"{what}: the answer is not a JSON object", status=200)
    e2e, authorisation = _text(body, "endToEndDiasId"), _text(body, "authorisationRequestId")
    if not e2e or not authorisation:
        raise MalformedResponseError(
            f"{what}: the answer lacks endToEndDiasId or authorisationRequestId", status=200
        )
    return InstantPayment(
        end_to_end_id=e2e,
        authorisation_request_id=authorisation,
        qr_code=_text(body, "qrCode"),
        qr_code_image=_text(body, "qrCodeImage"),
        created_at=_time(body.get("createdAt")),
        expires_at=_time(body.get("expiresAt")),
        validity_minutes=validity_minutes,
        signed_data_input=_text(body, "signedDataInput"),
        signature=_text(body, "signature"),
    )


def parse_payment_status(body: Any, end_to_end_id: str) -> InstantPaymentStatus:
    """``GetPaymentStatus``'s answer.

    :raises MalformedResponseError: it is not an object with a ``paymentStatus``, or it
        is about another payment.
    """
    what = "GET /paymentsapi/IrisPayments/GetPaymentStatus"
    if not isinstance(body, Mapping) or not _text(body, "paymentStatus"):
        raise MalformedResponseError(f"{what}: the answer has no paymentStatus", status=200)
    named = _text(body, "endToEndDiasId")
    if named is not None and named != end_to_end_id:
        raise MalformedResponseError(
            f"{what}: the answer is about another payment ({named[:64]!r})", status=200
        )
    status = _text(body, "paymentStatus") or ""
    final = body.get("isFinalStatus")
    return InstantPaymentStatus(
        end_to_end_id=end_to_end_id,
        status=status,
        description=_text(body, "paymentStatusDescription"),
        completed_at=_time(body.get("completedAt")),
        final=final if isinstance(final, bool) else status in IRIS_FINAL,
    )


def poll_again(status: InstantPaymentStatus, now: float, deadline: float) -> bool:
    """Whether to ask about a payment again: not final, and its time not over."""
    return not status.final and now < deadline


# --- the listing -----------------------------------------------------------------------


def yyyymmdd(day: dt.date) -> str:
    """A day as the listing's ``From`` and ``dateTo`` take it."""
    if not isinstance(day, dt.date):
        raise TypeError(f"a day is a datetime.date, not {type(day).__name__}")
    return f"{day.year:04d}{day.month:02d}{day.day:02d}"


def page_documents(body: Any, page: int) -> list[DocumentResult]:
    """A page of the listing: a JSON array of result records.

    :raises MalformedResponseError: it is not an array of objects, or an element is not
        a record (its position named).
    """
    what = f"the listing's page {page}"
    if not isinstance(body, list):
        raise MalformedResponseError(f"{what} is not a JSON array", status=200)
    documents = []
    for index, entry in enumerate(body):
        if not isinstance(entry, dict):
            raise MalformedResponseError(f"{what}: element {index} is not an object", status=200)
        try:
            documents.append(result_from_json(entry))
        except Exception:  # noqa: BLE001  (cattrs raises exception groups of many kinds)
            raise MalformedResponseError(
                f"{what}: element {index} is not a result record", status=200
            ) from None
    return documents


#: A page number: ASCII digits, at most those of ``int.MaxValue``.
_PAGE = re.compile(r"[0-9]{1,10}")


def next_page(header: str | None, page: int, *, empty: bool) -> int | None:
    """The page the ``NextPage`` header of page ``page`` leads to (``None``: the last).

    :raises MalformedResponseError: the header is not a page number after ``page`` (a
        listing that loops back, or stands still, would never end), or an empty page
        names a next one.
    """
    if header is None or not header.strip():
        return None
    text = header.strip()
    if not _PAGE.fullmatch(text):
        raise MalformedResponseError(
            f"the listing's page {page}: NextPage {text[:32]!r} is not a page number", status=200
        )
    following = int(text)
    if following <= page:
        raise MalformedResponseError(
            f"the listing's page {page}: NextPage {following} does not lead on (it would loop)",
            status=200,
        )
    if empty:
        raise MalformedResponseError(
            f"the listing's page {page} is empty and names a next page ({following})", status=200
        )
    return following


# --- refusals ----------------------------------------------------------------------------

#: The provider's words of each reason, the most specific first.
_CREDIT_REASONS = (
    ("is_a_credit", re.compile(r"is a credit|not credited", re.IGNORECASE)),
    ("cancelled", re.compile(r"\bcancell?ed\b", re.IGNORECASE)),
    ("correlated_already", re.compile(r"correlated credit|credited already", re.IGNORECASE)),
)


def refusal(operation: str, error: InvoicingError) -> InvoicingError:
    """The operation's own error for the provider's refusal ``error`` (else ``error``).

    ``operation`` is ``credit``, ``update_payment``, ``initiate_instant_payment`` or
    ``instant_payment_status``. A 404 names a document (or a payment) the issuer does not
    have: :class:`DocumentNotFoundError`; a credit's 400, :class:`CreditRefusedError`
    with its reason; a payment's 409, :class:`PaymentConflictError`.
    """
    body = error.body
    if error.status == 404 and operation in _ABOUT_A_DOCUMENT:
        return DocumentNotFoundError(error.message, status=404, body=body)
    if operation == "credit" and error.status == 400 and type(error) is ValidationError:
        reason = next(
            (name for name, words in _CREDIT_REASONS if words.search(error.message)), "refused"
        )
        return CreditRefusedError(error.message, reason=reason, body=body)
    if operation == "update_payment" and isinstance(error, DuplicateDocumentError):
        detail = body.get("message") if body is not None else None
        message = f"POST /Invoice/updatePayment: {detail[:500]}" if isinstance(detail, str) else (
            "POST /Invoice/updatePayment: the transaction is recorded with other details"
        )  # fmt: skip
        mark = body.get("paymentMark") if body is not None else None
        return PaymentConflictError(
            message,
            body=body,
            payment_mark=mark if isinstance(mark, int) and not isinstance(mark, bool) else None,
        )
    return error


_ABOUT_A_DOCUMENT = frozenset(
    {"credit", "update_payment", "initiate_instant_payment", "instant_payment_status"}
)


def _text(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    return value if isinstance(value, str) else None


def _number(text: str | None) -> int | None:
    if text is not None and text.isascii() and text.strip().isdigit():
        return int(text)
    return None


def _time(value: Any) -> dt.datetime | None:
    """An ISO 8601 time of the provider (``Z`` or an offset; naive read as UTC)."""
    if not isinstance(value, str) or not value or len(value) > 64:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.timezone.utc)
