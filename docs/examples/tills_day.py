"""A till's day: a sale, a return, a card payment later, IRIS, the day's check.

Each step is a function of the guide ``docs/guides/tills-day.rst``; ``main()`` runs the
day against the embedded sandbox, with a lost answer on the way and an IRIS payment the
sandbox settles (nobody scans its QR): ``python docs/examples/tills_day.py``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import tempfile
from pathlib import Path

from invoicing_async import (
    CardPayment,
    CreditResult,
    DocumentResult,
    InstantPaymentRequest,
    InstantPaymentStatus,
    InvoicingClient,
    PaymentUpdateResult,
    RetryPolicy,
)
from invoicing_sandbox import Fault, Sandbox, sample_invoice

TODAY = dt.datetime.now(dt.timezone.utc).date()


# region sale
async def sell(client: InvoicingClient, tin: str, number: int) -> DocumentResult:
    """A retail receipt (11.1), sent as any document: its record has the mark."""
    receipt = sample_invoice(number, issuer_vat=tin, lines=1)
    receipt["InvoiceTypeCode"] = "11.1"
    del receipt["CounterParty"]
    return await client.submit_json(receipt)


# endregion sale


# region return
async def give_back(
    client: InvoicingClient, sale: DocumentResult, number: int
) -> CreditResult:
    """The customer returns the goods: a credit receipt (11.4) of the sale.

    A receipt may be credited many times, and the provider knows a credit by its
    internal id, so a lost answer is sent again safely (the 409 that answers it is this
    credit's record).
    """
    return await client.credit(
        sale, series="RET", number=str(number), internal_id=f"RET-{number}"
    )


# endregion return


# region card-later
async def paid_by_card_later(
    client: InvoicingClient,
    tin: str,
    sale: DocumentResult,
    amount: float,
    transaction: str,
) -> PaymentUpdateResult:
    """A sale on credit, paid by card today: sign, run the terminal, register once."""
    signed = await client.sign_pos_transaction(
        {
            "issuerTin": tin,
            "mark": sale.mark,
            "paymentAmount": amount,
            "terminalId": "T-1",
        }
    )
    # ... the terminal takes the card and answers its transaction id ...
    payment = CardPayment(
        amount=amount,
        transaction_id=transaction,
        providers_signature=signed.body["signature"],
        pos_input=signed.body["signedDataInput"],
        terminal_id="T-1",
    )
    assert sale.mark is not None
    return await client.update_payment(sale.mark, payment)


# endregion card-later


# region iris
async def pay_instantly(client: InvoicingClient, amount: float) -> InstantPaymentStatus:
    """An IRIS payment: show the QR, then ask until the payer has paid (or not)."""
    started = await client.initiate_instant_payment(
        InstantPaymentRequest(amount=amount, validity_minutes=2)
    )
    print(f"show the QR: {started.qr_code}")
    status = await client.wait_for_instant_payment(started, interval=1)
    if status.completed:  # the receipt carries payment method 8 with this id
        print(f"paid: TransactionId {started.authorisation_request_id}")
    return status


# endregion iris


# region reconcile
async def check_the_day(
    client: InvoicingClient, marks: set[int], day: dt.date
) -> set[int]:
    """What the provider lists for the day that the till did not record."""
    listed = set()
    async for record in client.documents_issued(None, day):  # a page at a time
        if record.mark is not None:
            listed.add(record.mark)
    return listed - marks


# endregion reconcile


async def main() -> None:
    """The day against the sandbox; the IRIS payment settles at its first read."""
    async with Sandbox() as sb:
        tin = sb.client_id
        sb.auto_settle_iris_payments("Completed", after=1)
        fast = RetryPolicy(base_delay=0, max_delay=0)
        async with InvoicingClient(
            sb.base_url, tin, sb.client_secret, retry=fast
        ) as client:
            sale = await sell(client, tin, 1)
            on_credit = await sell(client, tin, 2)
            sb.script_operation(Fault.commit_then_drop())  # the credit's answer is lost
            credit = await give_back(client, sale, 1)
            paid = await paid_by_card_later(client, tin, on_credit, 10, "TX-42")
            status = await pay_instantly(client, 4.5)
            our_marks = {
                m for m in (sale.mark, on_credit.mark, credit.mark) if m is not None
            }
            unknown = await check_the_day(client, our_marks, TODAY)
            with tempfile.TemporaryDirectory() as directory:
                size = await client.document_pdf(sale, Path(directory) / "receipt.pdf")
        print(f"credit {credit.mark} after {credit.attempts} requests, one issued")
        print(
            f"payment mark {paid.payment_mark}; IRIS {status.status}; PDF {size} bytes"
        )
        print(f"listed but not recorded: {sorted(unknown)}")
        assert len(sb.credits) == 1
        assert credit.mark == sb.credits[0].mark
        assert status.completed
        assert not unknown


if __name__ == "__main__":
    asyncio.run(main())
