"""The delayed card payment, ``POST /Invoice/updatePayment``. Sans I/O.

The provider's page (https://developers.s1ecos.com/delayed-pos-payment-950993m0): a
document issued earlier the same day, with a mark, is paid by card later. The POS first
signs the payment for that mark with ``/PosTransactions/SignPos`` (its body names the
``mark``), runs the terminal, and then posts the payment: the document's ``mark``, the
``entityVatNumber``, and ``paymentMethods[]`` with ``paymentMethodTypeCode``, ``amount``,
``transactionId`` (the terminal's), the ``providersSignature`` and ``posInput`` SignPos
gave, ``terminalId`` and an optional ``tipAmount``. The answer (design guide §12):
``200`` with ``{"success": true, "message": "<the payment's mark>"}``.

What the pages leave open, and what the sandbox does:

* At least one payment method carries a ``providersSignature`` and a ``transactionId``,
  and each signature must be one the sandbox's SignPos gave this issuer for this very
  ``mark``; its ``posInput``, when sent, the ``signedDataInput`` SignPos answered with;
  its ``amount`` the ``paymentAmount`` signed. Else ``400`` naming the member.
* The document must be the issuer's (``404`` otherwise) and not cancelled (``400``);
  ``entityVatNumber`` (``EL`` or not) the client's (``401`` otherwise).
* Sent again: the same payment methods for the same mark are answered as the first
  time, ``200`` with the same payment mark (a lost answer re-sent registers nothing
  new); a ``transactionId`` recorded for the mark with other details is a conflict,
  ``409`` with the payment mark recorded. Another transaction (another card) gets a
  payment mark of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ._bodies import Fields, read_object
from ._pos import canonical
from ._replies import Reply, error_reply
from ._rules import mark_of
from ._wire import dumps

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ._bodies import OperationCall
    from ._pos import PosSignature
    from ._provider import Exchange, Provider

__all__ = ["ROUTES", "PaymentUpdate", "Payments"]

ROUTES: tuple[tuple[str, str, str], ...] = (("POST", "/Invoice/updatePayment", "updatePayment"),)
#: A signed amount and the amount paid may differ by rounding only.
_CENT = 0.005


@attrs.frozen(kw_only=True)
class PaymentUpdate:
    """A delayed card payment the sandbox registered (``POST /Invoice/updatePayment``).

    .. versionadded:: 0.5.0
    """

    environment: str
    client_id: str
    #: The paid document's mark, and the payment's own.
    mark: int
    payment_mark: int
    #: The terminal's transaction ids of its payment methods.
    transaction_ids: tuple[str, ...]
    #: The payment methods as received.
    payment_methods: list[dict[str, Any]] = attrs.field(eq=False, repr=False)
    #: Requests that registered it: more than 1 when the same payment was sent again.
    requests: int = 1


class Payments:
    """The payments registered, and the rules of ``/Invoice/updatePayment``."""

    def __init__(
        self, provider: Provider, signatures: Callable[[], Iterable[PosSignature]]
    ) -> None:
        self._provider = provider
        self._signatures = signatures
        self.reset()

    def reset(self) -> None:
        """Forget the payments."""
        self.updates: list[PaymentUpdate] = []

    def inspect(self, route: str) -> Reply | None:
        """``GET /_sandbox/payment-updates``: the payments (``None``: not this route)."""
        if route != "payment-updates":
            return None
        updates = [attrs.asdict(update) for update in self.updates]
        return Reply(200, dumps({"payment_updates": updates}))

    def handle(self, exchange: Exchange, call: OperationCall) -> Reply:
        """The reply to an authenticated ``POST /Invoice/updatePayment``."""
        fields = read_object(call.body)
        if isinstance(fields, Reply):
            return fields
        mark, vat = fields.mark("mark"), fields.vat("entityVatNumber")
        methods = fields.objects("paymentMethods") or []
        for method in methods:
            _read_method(method)
        refusal = fields.refusal(*methods)
        if refusal is not None or mark is None:
            return refusal or error_reply(400, "mark: is required")
        environment, client_id = exchange.environment or "", exchange.client_id or ""
        if vat != client_id:
            return error_reply(401, "the entityVatNumber does not match the API key")
        held = self._provider.holding(environment, client_id, mark=mark)
        if held is None:
            return error_reply(404, f"no document with mark {mark}")
        exchange.identity = held[0].identity
        if held[0].cancellation_mark is not None:
            return error_reply(400, f"mark {mark} is cancelled: it takes no payment")
        refusal = self._unsigned(fields, methods, environment, client_id, mark)
        if refusal is not None:
            return refusal
        sent = [dict(method.data) for method in methods]
        return self._register(environment, client_id, mark, sent)

    def _unsigned(
        self, fields: Fields, methods: list[Fields], environment: str, client_id: str, mark: int
    ) -> Reply | None:
        """The 400 of payment methods SignPos did not sign for ``mark``, or ``None``."""
        given = {
            s.signature: s
            for s in self._signatures()
            if (s.environment, s.client_id) == (environment, client_id)
            and mark_of(s.payload.get("mark")) == mark
        }
        signed = [m for m in methods if m.text("providersSignature", required=False)]
        if not signed:
            message = "a payment signed with SignPos for the mark is required"
            fields.note("paymentMethods", f"{message} (providersSignature, transactionId)")
        for method in signed:
            signature = given.get(method.text("providersSignature") or "")
            method.text("transactionId")
            if signature is None:
                method.note("providersSignature", f"not a signature SignPos gave for mark {mark}")
                continue
            pos_input = method.text("posInput", required=False)
            if pos_input is not None and pos_input != canonical(signature.payload).decode():
                method.note("posInput", "not the input SignPos signed (its signedDataInput)")
            amount, paid = signature.payload.get("paymentAmount"), method.amount("amount")
            number = amount if isinstance(amount, (int, float)) else None
            if number is not None and paid is not None and abs(paid - number) > _CENT:
                method.note("amount", f"{paid:g} is not the paymentAmount signed ({number:g})")
        return fields.refusal(*methods)

    def _register(
        self, environment: str, client_id: str, mark: int, sent: list[dict[str, Any]]
    ) -> Reply:
        """The payment registered (or found again), answered with its payment mark."""
        transactions = tuple(str(m.get("transactionId") or "") for m in sent)
        wanted = canonical({"paymentMethods": sent})
        for n, update in enumerate(self.updates):
            if (update.environment, update.client_id, update.mark) != (
                environment,
                client_id,
                mark,
            ):
                continue
            if canonical({"paymentMethods": update.payment_methods}) == wanted:
                self.updates[n] = attrs.evolve(update, requests=update.requests + 1)
                return _paid(update.payment_mark)
            clash = sorted(set(transactions) & set(update.transaction_ids) - {""})
            if clash:
                return _conflict(mark, update.payment_mark, clash[0])
        payment_mark = self._provider.new_mark()
        self.updates.append(
            PaymentUpdate(
                environment=environment,
                client_id=client_id,
                mark=mark,
                payment_mark=payment_mark,
                transaction_ids=transactions,
                payment_methods=sent,
            )
        )
        return _paid(payment_mark)


def _read_method(method: Fields) -> None:
    """Read one payment method's members (problems noted on it)."""
    method.integer("paymentMethodTypeCode", low=1, high=99)
    method.amount("amount")
    method.amount("tipAmount", required=False)
    for name in ("transactionId", "providersSignature", "posInput", "terminalId"):
        method.text(name, required=False)


def _paid(payment_mark: int) -> Reply:
    return Reply(200, dumps({"success": True, "message": str(payment_mark)}))


def _conflict(mark: int, payment_mark: int, transaction: str) -> Reply:
    message = (
        f"transaction {transaction[:64]!r} is recorded for mark {mark} already, with other "
        f"details (payment mark {payment_mark})"
    )
    body = {
        "success": False,
        "message": message,
        "statusCode": "Conflict",
        "mark": mark,
        "paymentMark": payment_mark,
    }
    return Reply(409, dumps(body))
