"""IRIS instant payments through the provider: initiate, then poll the status. Sans I/O.

The provider's pages (https://developers.s1ecos.com/provider-iris-documentation-1819287m0,
https://developers.s1ecos.com/irispaymentsinitiatepayment-25192152e0 and
https://developers.s1ecos.com/irispaymentsgetpaymentstatus-25192153e0):

``POST /paymentsapi/IrisPayments/InitiatePayment``
    ``issuerTin``, ``payeeInfo`` (``displayName``, ``companyName``, ``tin``),
    ``paymentAmount``, ``validityPeriod`` (the request is valid for 1 to 3 minutes), the
    document's keys (``issueDate``, ``branchCode``, ``invoiceTypeCode``, ``series``,
    ``identifier``, ``mark``) and amounts (``totalNetAmount``, ``totalVatAmount``,
    ``totalAmount``, ``tipAmount``), ``merchantId``, ``generateQrCodeImage`` and
    ``qrCodeSize``. Answers ``endToEndDiasId``, ``authorisationRequestId``, ``qrCode``,
    ``qrCodeImage``, ``createdAt``, ``expiresAt``, ``signedDataInput``, ``signature``.
``GET /paymentsapi/IrisPayments/GetPaymentStatus?endToEndDiasId=``
    ``endToEndDiasId``, ``paymentStatus`` (``Pending``: keep polling; ``Completed``;
    ``Expired``: the validity ended unpaid; ``Failed``), ``paymentStatusDescription``,
    ``completedAt`` and ``isFinalStatus``.

The document then carries payment method 8 whose ``TransactionId`` is the
``authorisationRequestId``. Nobody scans the sandbox's QR codes: a test settles a
payment (:meth:`Iris.settle`, ``Sandbox.settle_iris_payment``, or over HTTP
``POST /_sandbox/iris-payments/{endToEndDiasId}/complete``), and a pending payment
expires when the sandbox's clock passes its validity, so a test moves a fake clock
instead of waiting three minutes.

What the pages leave open, and what the sandbox does: ``issuerTin`` must be the
client's (``401``); ``paymentAmount`` above 0 and ``validityPeriod`` an integer from 1
to 3 are required (``400``); a ``mark`` other than 0 must be one of the issuer's
documents (``404``). Each request starts a new payment (it is not deduplicated: a
payment is started again when it failed or expired). The ids are derived from the
sandbox's salt (reproducible with a seed); ``qrCode`` is the sandbox's own text and
``qrCodeImage`` is ``null`` (the sandbox draws no images: render ``qrCode``). The
signature is the issuer's POS key's (:mod:`._pos`) over ``signedDataInput``, the
request's canonical JSON. ``createdAt`` and ``expiresAt`` are wall-clock times; expiry
itself is read on the sandbox's clock. An unknown ``endToEndDiasId``, or another
issuer's, is ``404``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ._bodies import Fields, read_object
from ._pos import canonical
from ._replies import Reply, error_reply
from ._wire import dumps, format_timestamp

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._bodies import OperationCall
    from ._pos import PosSigner
    from ._provider import Exchange, Provider

__all__ = ["FINAL", "ROUTES", "Iris", "IrisPayment", "IrisStatus"]

ROUTES: tuple[tuple[str, str, str], ...] = (
    ("POST", "/paymentsapi/IrisPayments/InitiatePayment", "InitiatePayment"),
    ("GET", "/paymentsapi/IrisPayments/GetPaymentStatus", "GetPaymentStatus"),
)

IrisStatus = Literal["Pending", "Completed", "Expired", "Failed"]
#: The statuses a payment ends in (``isFinalStatus``).
FINAL: frozenset[str] = frozenset({"Completed", "Expired", "Failed"})
_DESCRIPTIONS = {
    "Pending": "the payer has not approved the payment yet",
    "Completed": "the payment was completed",
    "Expired": "the QR code's validity ended without a payment",
    "Failed": "the payment failed",
}


@attrs.frozen(kw_only=True)
class IrisPayment:
    """An IRIS payment the sandbox started (``/paymentsapi/IrisPayments/InitiatePayment``).

    .. versionadded:: 0.5.0
    """

    end_to_end_id: str
    #: What the document's payment method 8 carries as its ``TransactionId``.
    authorisation_request_id: str
    environment: str
    client_id: str
    amount: float
    validity_minutes: int
    #: The document's mark when one was named (a payment of an issued document).
    mark: int | None
    created_at: dt.datetime
    expires_at: dt.datetime
    #: When it expires, on the sandbox's clock.
    deadline: float = attrs.field(repr=False)
    status: IrisStatus = "Pending"
    description: str = _DESCRIPTIONS["Pending"]
    completed_at: dt.datetime | None = None
    #: Status requests answered so far.
    status_reads: int = 0
    #: The request as received.
    request: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)

    @property
    def final(self) -> bool:
        """Whether the status is final (``Completed``, ``Expired``, ``Failed``)."""
        return self.status in FINAL


#: The ``/_sandbox/iris-payments/{id}/{action}`` actions.
_ACTIONS: dict[str, IrisStatus] = {"complete": "Completed", "fail": "Failed", "expire": "Expired"}


def _shown(payment: IrisPayment) -> dict[str, Any]:
    """A payment as the inspection endpoints show it (times as the service writes them)."""

    def written(_: Any, __: Any, value: Any) -> Any:
        return format_timestamp(value) if isinstance(value, dt.datetime) else value

    shown = attrs.asdict(payment, value_serializer=written)
    shown["final"] = payment.final
    return shown


class Iris:
    """The IRIS payments started, their rules and their settlement (see the module)."""

    def __init__(
        self,
        provider: Provider,
        signer: PosSigner,
        salt: str,
        clock: Callable[[], float],
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc),
    ) -> None:
        self._provider = provider
        self._signer = signer
        self._salt = salt
        self._clock = clock
        self._now = now
        self._started = 0  # counts on through reset(): an id is never handed out twice
        self.reset()

    def reset(self) -> None:
        """Forget the payments, and settle none on their own."""
        self._payments: dict[str, IrisPayment] = {}
        self._auto: tuple[IrisStatus, int] | None = None

    @property
    def payments(self) -> list[IrisPayment]:
        """Every payment started, in order, each as it stands."""
        return [self._current(p.end_to_end_id) for p in list(self._payments.values())]

    # --- what tests control ---------------------------------------------------------------

    def settle(
        self, end_to_end_id: str, status: IrisStatus, *, description: str | None = None
    ) -> IrisPayment:
        """End a pending payment ``Completed``, ``Failed`` or ``Expired``.

        :raises KeyError: no such payment.
        :raises ValueError: ``status`` is not final, or the payment ended already.
        """
        if status not in FINAL:
            raise ValueError(f"settle a payment Completed, Failed or Expired, not {status!r}")
        payment = self._current(end_to_end_id)
        if payment.final:
            raise ValueError(f"IRIS payment {end_to_end_id} ended already: {payment.status}")
        return self._end(payment, status, description)

    def auto_settle(self, status: IrisStatus | None, *, after: int = 1) -> None:
        """Settle each pending payment ``status`` at its ``after``-th status read.

        ``None`` turns it off (payments then stay pending until settled, or expire).
        """
        if status is not None and status not in FINAL:
            raise ValueError(f"settle payments Completed, Failed or Expired, not {status!r}")
        if after < 1:
            raise ValueError("after must be at least 1")
        self._auto = None if status is None else (status, after)

    # --- /_sandbox/ ------------------------------------------------------------------------

    def inspect(self, route: str) -> Reply | None:
        """``iris-payments`` and ``iris-payments/{endToEndDiasId}`` (``None``: not these)."""
        if route == "iris-payments":
            return Reply(200, dumps({"iris_payments": [_shown(p) for p in self.payments]}))
        name, _, wanted = route.partition("/")
        if name != "iris-payments" or "/" in wanted:
            return None
        if wanted not in self._payments:
            return error_reply(404, f"no IRIS payment {wanted[:64]!r}")
        return Reply(200, dumps(_shown(self._current(wanted))))

    def control(self, route: str) -> Reply | None:
        """``POST iris-payments/{endToEndDiasId}/{complete|fail|expire}``: settle one."""
        name, wanted, action = ([*route.split("/"), "", ""])[:3]
        if name != "iris-payments" or not wanted:
            return None
        status = _ACTIONS.get(action)
        if status is None:
            return error_reply(404, "use iris-payments/{endToEndDiasId}/complete, fail or expire")
        try:
            return Reply(200, dumps(_shown(self.settle(wanted, status))))
        except KeyError:
            return error_reply(404, f"no IRIS payment {wanted[:64]!r}")
        except ValueError as exc:
            return error_reply(409, str(exc))

    # --- requests ----------------------------------------------------------------------------

    def initiate(self, exchange: Exchange, call: OperationCall) -> Reply:
        """The reply to an authenticated ``InitiatePayment``."""
        fields = read_object(call.body)
        if isinstance(fields, Reply):
            return fields
        issuer = fields.vat("issuerTin")
        amount = fields.amount("paymentAmount", positive=True)
        minutes = fields.integer("validityPeriod", low=1, high=3)
        mark = fields.mark("mark", required=False)
        fields.mapping("payeeInfo")
        for name in ("totalNetAmount", "totalVatAmount", "totalAmount", "tipAmount"):
            fields.amount(name, required=False)
        for name in ("merchantId", "series", "identifier", "invoiceTypeCode"):
            fields.text(name, required=False, numbers=True)
        refusal = fields.refusal()
        if refusal is not None or amount is None or minutes is None:
            return refusal or error_reply(400, "paymentAmount, validityPeriod: are required")
        environment, client_id = exchange.environment or "", exchange.client_id or ""
        if issuer != client_id:
            return error_reply(401, "the issuer's TIN does not match the API key")
        if mark and self._provider.holding(environment, client_id, mark=mark) is None:
            return error_reply(404, f"no document with mark {mark}")
        payment = self._start((environment, client_id), amount, minutes, mark or None, fields.data)
        answer = {
            "endToEndDiasId": payment.end_to_end_id,
            "authorisationRequestId": payment.authorisation_request_id,
            "qrCode": f"IRIS:{payment.end_to_end_id}:{payment.authorisation_request_id}",
            "qrCodeImage": None,
            "createdAt": format_timestamp(payment.created_at),
            "expiresAt": format_timestamp(payment.expires_at),
            "signedDataInput": canonical(payment.request).decode("utf-8"),
            "signature": self._signer.sign(client_id, payment.request),
        }
        return Reply(200, dumps(answer))

    def status(self, exchange: Exchange, call: OperationCall) -> Reply:
        """The reply to an authenticated ``GetPaymentStatus``."""
        query = Fields(call.query)
        wanted = query.text("endToEndDiasId")
        if wanted is None:
            return query.refusal() or error_reply(400, "endToEndDiasId: is required")
        held = self._payments.get(wanted)
        scope = (exchange.environment, exchange.client_id)
        if held is None or (held.environment, held.client_id) != scope:
            return error_reply(404, f"no IRIS payment {wanted[:64]!r}")
        payment = self._current(wanted)
        if (
            not payment.final
            and self._auto is not None
            and payment.status_reads + 1 >= self._auto[1]
        ):
            payment = self._end(payment, self._auto[0], None)
        payment = self._payments[wanted] = attrs.evolve(
            payment, status_reads=payment.status_reads + 1
        )
        answer = {
            "endToEndDiasId": payment.end_to_end_id,
            "paymentStatus": payment.status,
            "paymentStatusDescription": payment.description,
            "completedAt": (
                format_timestamp(payment.completed_at) if payment.completed_at is not None else None
            ),
            "isFinalStatus": payment.final,
        }
        return Reply(200, dumps(answer))

    # --- state -------------------------------------------------------------------------------

    def _start(
        self,
        scope: tuple[str, str],
        amount: float,
        minutes: int,
        mark: int | None,
        request: Any,
    ) -> IrisPayment:
        self._started += 1
        seed = hashlib.sha256(f"{self._salt}\x00iris\x00{self._started}".encode()).digest()
        created = self._now()
        payment = IrisPayment(
            end_to_end_id=seed[:16].hex().upper(),
            authorisation_request_id=str(uuid.UUID(bytes=seed[16:], version=4)),
            environment=scope[0],
            client_id=scope[1],
            amount=amount,
            validity_minutes=minutes,
            mark=mark,
            created_at=created,
            expires_at=created + dt.timedelta(minutes=minutes),
            deadline=self._clock() + minutes * 60,
            request=dict(request),
        )
        self._payments[payment.end_to_end_id] = payment
        return payment

    def _current(self, end_to_end_id: str) -> IrisPayment:
        """The payment as it stands now: a pending one past its validity has expired."""
        payment = self._payments[end_to_end_id]
        if not payment.final and self._clock() >= payment.deadline:
            payment = self._end(payment, "Expired", None)
        return payment

    def _end(
        self, payment: IrisPayment, status: IrisStatus, description: str | None
    ) -> IrisPayment:
        ended = attrs.evolve(
            payment,
            status=status,
            description=description or _DESCRIPTIONS[status],
            completed_at=self._now() if status == "Completed" else None,
        )
        self._payments[payment.end_to_end_id] = ended
        return ended
