"""What is safe to do when an answer is lost: the safety classes, and each operation's.

Every operation of the provider's API declares one :class:`Safety` class
(:data:`OPERATIONS`), and each class has one retry rule, applied by the decision core
(:mod:`._decision`) to every request:

======================  ==============================  ================================
class                   after a failure that may have   a 409 after this call's own
                        been processed (lost answer,    earlier attempt
                        reset, 408, 5xx but 503)
======================  ==============================  ================================
``READ``                re-sent (a read has no effect)  an error, as any 409
``DEDUPLICATED_WRITE``  re-sent, unless the policy      success: the provider holds
                        says ``resend_ambiguous=False`` what that attempt sent
``UPLOAD``              never re-sent: unknown outcome  an error, as any 409
``AT_MOST_ONCE_WRITE``  never re-sent: unknown outcome  an error, as any 409
======================  ==============================  ================================

Every class re-sends a request that certainly was not processed: the connection was
refused, or the provider answered 429 or 503 (RFC 9110: 503 means the server did not
handle the request). The classes are ordered from the loosest to the strictest, and a
caller may only tighten an operation's class for a call (:func:`tighten`), never loosen
it.

Document submission (``/Invoice/secure``, ``/Invoice/json``) is a deduplicated write:
the provider answers a document it already holds with 409 and its original record. A
definite refusal of a deduplicated write re-sent after a lost answer is that request's
answer: the provider would have answered 409 had it held what was sent.
"""

from __future__ import annotations

import enum
import re
import types
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "OPERATIONS",
    "OperationSpec",
    "Safety",
    "credit_safety",
    "default_safety",
    "operation_for",
    "tighten",
]


class Safety(enum.Enum):
    """How an operation may be retried when its answer is lost (see :doc:`/operations`).

    From the loosest to the strictest. A call may tighten its operation's class (a
    cancellation is never loosened).

    .. versionadded:: 0.3.0
    """

    #: No effect at the provider: repeated freely on any failure that may pass.
    READ = "read"
    #: The provider recognises a repeat and answers 409 with what it holds: re-sent
    #: after an ambiguous failure, and a 409 after this call's own attempt is success.
    DEDUPLICATED_WRITE = "deduplicated_write"
    #: A file the provider stores: re-sent only when it certainly was not processed.
    UPLOAD = "upload"
    #: Takes effect once and never again (a cancellation): never re-sent after an
    #: ambiguous failure; the caller learns the outcome with a read.
    AT_MOST_ONCE_WRITE = "at_most_once_write"

    @property
    def strictness(self) -> int:
        """Position from the loosest (0, ``READ``) to the strictest."""
        return _ORDER.index(self)


_ORDER = (
    Safety.READ,
    Safety.DEDUPLICATED_WRITE,
    Safety.UPLOAD,
    Safety.AT_MOST_ONCE_WRITE,
)


def tighten(declared: Safety, requested: Safety | None) -> Safety:
    """The class a call runs under: ``declared``, or a stricter ``requested`` one.

    :raises ValueError: ``requested`` is looser than ``declared``: the library never
        re-sends an operation more readily than its class allows.
    """
    if requested is None or requested is declared:
        return declared
    if requested.strictness < declared.strictness:
        raise ValueError(
            f"safety={requested.name} would loosen an operation declared "
            f"{declared.name}: a call may only tighten its class"
        )
    return requested


def default_safety(method: str) -> Safety:
    """The class of an operation the table does not know: the safest for its method.

    ``GET`` and ``HEAD`` read; anything else is an at-most-once write until the caller
    says otherwise.
    """
    return Safety.READ if method.upper() in ("GET", "HEAD") else Safety.AT_MOST_ONCE_WRITE


@attrs.frozen
class OperationSpec:
    """One operation of the provider's API and its safety class.

    :ivar name: the :class:`~invoicing_async.InvoicingClient` method that calls it.
    :ivar path: the path, with ``{issuerTin}`` where the path names the issuer.
    :ivar find_out: how a caller learns the outcome after an unknown one.
    """

    name: str
    method: str
    path: str
    safety: Safety
    find_out: str

    def matches(self, method: str, path: str) -> bool:
        """Whether ``method path`` (query string excluded) is this operation."""
        if method.upper() != self.method:
            return False
        pattern = re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(self.path))
        if pattern.endswith("/"):
            pattern += "?"  # a trailing slash is optional, as ASP.NET routes have it
        # ASP.NET routes, like the provider's, ignore case.
        return re.fullmatch(pattern, path.split("?", 1)[0], re.IGNORECASE) is not None


_READ_THEN_RESEND = "send the identical request again: the provider answers what it holds"
_CHECK_STATUS = (
    "read the document's status (InvoicingClient.get_last_b2g_status, or "
    "`invoicing-async status MARK`) and cancel again only if it is not cancelled"
)
_CHECK_CREDIT = (
    "list the day's documents (InvoicingClient.documents_issued, or `invoicing-async "
    "reconcile`) for a credit with this internalId before sending it again"
)
_CHECK_PAYMENT = (
    "the provider's pages give no read of a payment: compare the terminal's record with "
    "the provider's before sending it again (the sandbox answers the same payment sent "
    "again with its first payment mark)"
)
_START_AGAIN = (
    "start a new payment: a QR whose answer was lost was never shown to the payer, and "
    "it expires unpaid within its validity"
)
_CHECK_UPLOAD = (
    "the provider may store a second copy: ask it whether it holds the file before "
    "uploading it again"
)

#: Every operation the client knows, by the name of its :class:`InvoicingClient` method.
OPERATIONS: Mapping[str, OperationSpec] = types.MappingProxyType(
    {
        spec.name: spec
        for spec in (
            OperationSpec(
                "submit_secure",
                "POST",
                "/Invoice/secure",
                Safety.DEDUPLICATED_WRITE,
                _READ_THEN_RESEND,
            ),
            OperationSpec(
                "submit_json", "POST", "/Invoice/json", Safety.DEDUPLICATED_WRITE, _READ_THEN_RESEND
            ),
            OperationSpec(
                "cancel_delivery_note",
                "POST",
                "/Invoice/cancelDeliveryNote",
                Safety.AT_MOST_ONCE_WRITE,
                _CHECK_STATUS,
            ),
            OperationSpec(
                "cancel_receiving_note",
                "POST",
                "/Invoice/cancelReceivingNote",
                Safety.AT_MOST_ONCE_WRITE,
                _CHECK_STATUS,
            ),
            OperationSpec(
                "request_pos_signature",
                "POST",
                "/PosSignatures/{issuerTin}",
                Safety.DEDUPLICATED_WRITE,
                _READ_THEN_RESEND,
            ),
            OperationSpec(
                "sign_pos_transaction",
                "POST",
                "/PosTransactions/signpos",
                Safety.DEDUPLICATED_WRITE,
                _READ_THEN_RESEND,
            ),
            OperationSpec(
                "reseed_b2g_invoice",
                "POST",
                "/B2GInvoice/ReSeedInvoice",
                Safety.DEDUPLICATED_WRITE,
                _READ_THEN_RESEND,
            ),
            OperationSpec(
                "get_last_b2g_status",
                "GET",
                "/B2GInvoice/GetLastStatus",
                Safety.READ,
                "read it again later",
            ),
            OperationSpec(
                "upload_invoice_file", "POST", "/Invoice/File", Safety.UPLOAD, _CHECK_UPLOAD
            ),
            OperationSpec("upload_media", "POST", "/media/upload", Safety.UPLOAD, _CHECK_UPLOAD),
            OperationSpec(
                "credit", "POST", "/Invoice/credit", Safety.AT_MOST_ONCE_WRITE, _CHECK_CREDIT
            ),
            OperationSpec(
                "update_payment",
                "POST",
                "/Invoice/updatePayment",
                Safety.AT_MOST_ONCE_WRITE,
                _CHECK_PAYMENT,
            ),
            OperationSpec(
                "initiate_instant_payment",
                "POST",
                "/paymentsapi/IrisPayments/InitiatePayment",
                Safety.AT_MOST_ONCE_WRITE,
                _START_AGAIN,
            ),
            OperationSpec(
                "instant_payment_status",
                "GET",
                "/paymentsapi/IrisPayments/GetPaymentStatus",
                Safety.READ,
                "read it again later",
            ),
            OperationSpec(
                "documents_issued",
                "GET",
                "/api/invoice/getdocuments/{issuerTin}/{page}/",
                Safety.READ,
                "read it again later",
            ),
        )
    }
)


def credit_safety(*, relate_credit: bool) -> Safety:
    """The class of a credit (``POST /Invoice/credit``): decided by whether it may repeat.

    The provider credits a document many times by uncorrelated credits (5.2) and a retail
    receipt by credit receipts (11.4), and identifies a credit by its ``internalId`` (its
    uniqueness key of documents): the same credit sent again is answered ``409`` with its
    record, so ``relate_credit=False`` is a ``DEDUPLICATED_WRITE``. A correlated credit
    (5.1) is given once per document: a request sent again after a lost answer may be
    refused for the credit its first attempt made, so ``relate_credit=True`` is an
    ``AT_MOST_ONCE_WRITE`` (the table's class, which :meth:`InvoicingClient.request
    <invoicing_async.InvoicingClient.request>` uses too), even for a receipt, whose
    ``relateCredit`` the provider ignores: the client cannot tell a receipt from an
    invoice by its mark.
    """
    return Safety.AT_MOST_ONCE_WRITE if relate_credit else Safety.DEDUPLICATED_WRITE


def operation_for(method: str, path: str) -> OperationSpec | None:
    """The known operation ``method path`` is, or ``None``."""
    for spec in OPERATIONS.values():
        if spec.matches(method, path):
            return spec
    return None
