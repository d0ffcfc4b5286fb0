"""The sandbox's test-facing API of the rest of a day: credits, payments, IRIS.

A part of :class:`~invoicing_sandbox.Sandbox` (its private base), kept apart from the
lifecycle and the faults: what tests read of credits, delayed card payments and IRIS
payments, and how they settle an IRIS payment nobody will scan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._credits import IssuedCredit
    from ._iris import IrisPayment, IrisStatus
    from ._operations import Operations
    from ._payments import PaymentUpdate

__all__ = ["DayFacade"]


class DayFacade:
    """Credits, payments and IRIS payments, as :class:`~invoicing_sandbox.Sandbox` shows them."""

    _operations: Operations

    @property
    def credits(self) -> list[IssuedCredit]:
        """Every credit issued by ``POST /Invoice/credit``, in order.

        Each credit is held like any document too: ``committed[credit.identity]``.

        .. versionadded:: 0.5.0
        """
        return list(self._operations.credits.issued)

    @property
    def payment_updates(self) -> list[PaymentUpdate]:
        """Every delayed card payment registered by ``POST /Invoice/updatePayment``.

        .. versionadded:: 0.5.0
        """
        return list(self._operations.payments.updates)

    @property
    def iris_payments(self) -> list[IrisPayment]:
        """Every IRIS payment started, in order, each as it stands now (expired on the clock).

        .. versionadded:: 0.5.0
        """
        return self._operations.iris.payments

    def settle_iris_payment(
        self,
        end_to_end_id: str,
        status: IrisStatus = "Completed",
        *,
        description: str | None = None,
    ) -> IrisPayment:
        """End a pending IRIS payment: the payer approved it (``Completed``), or not.

        ``status`` is ``Completed``, ``Failed`` or ``Expired``; the next
        ``GetPaymentStatus`` answers it (final). To let a payment expire on its own,
        move the sandbox's ``clock`` past its validity instead. Over HTTP:
        ``POST /_sandbox/iris-payments/{endToEndDiasId}/complete`` (``fail``, ``expire``).

        :raises KeyError: no payment ``end_to_end_id``.
        :raises ValueError: it ended already, or ``status`` is not a final one.

        .. versionadded:: 0.5.0
        """
        return self._operations.iris.settle(end_to_end_id, status, description=description)

    def auto_settle_iris_payments(self, status: IrisStatus | None, *, after: int = 1) -> None:
        """Settle every pending IRIS payment ``status`` at its ``after``-th status read.

        For demos and tests that poll as a till does: ``auto_settle_iris_payments(
        "Completed", after=2)`` answers ``Pending`` once, then ``Completed``. ``None``
        turns it off; :meth:`reset` too.

        .. versionadded:: 0.5.0
        """
        self._operations.iris.auto_settle(status, after=after)
