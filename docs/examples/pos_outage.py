"""A till that keeps selling through an outage, printing each QR when its mark arrives.

``main()`` runs it against the embedded sandbox: the till sells typed retail receipts;
sales before the outage get the provider's record at once; while the provider refuses
connections, then hangs, each sale is deferred (durable in the till's outbox, stamped
``TransmissionFailure: 1`` as a document issued during a loss of connection) and its
receipt carries the provider's offline QR; when the provider is back, the drainer
transmits the deferred sales, oldest first, and each outcome arrives with the mark and
the real QR code, printed for the receipt. Run it:
``python docs/examples/pos_outage.py`` (needs the ``qr`` extra).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from invoicing_async import (
    Deferral,
    DeferredOutcome,
    DeferredReceipt,
    InvoicingClient,
    document_key,
    qr,
)
from invoicing_async.documents import Line, Party, PaymentMethod, RetailReceipt
from invoicing_sandbox import Sandbox


# region receipts
class Receipts:
    """The till's printer: a receipt per sale, the real QR once the mark is known."""

    def __init__(self) -> None:
        self.printed: dict[str, str] = {}  # invoice key -> the QR text printed last
        self.marks: dict[str, int] = {}
        self.waiting: set[str] = set()  # deferred sales whose mark has not arrived
        self.all_marked = asyncio.Event()

    def sale(self, key: str, answer: Any) -> None:
        """Print a sale's receipt: the record's QR, or the offline one."""
        if isinstance(answer, DeferredReceipt):
            print(f"{key}: deferred ({answer.reason.value}); the offline QR printed")
            assert answer.stamp_error is None  # no stamp hook here: nothing to fail
            self.printed[key] = answer.offline_qr_url or ""
            self.waiting.add(key)
            self.all_marked.clear()
        else:
            print(f"{key}: mark {answer.mark}")
            self.printed[key] = answer.qr_code_string or ""
            self.marks[key] = answer.mark

    def mark_arrived(self, done: DeferredOutcome) -> None:
        """``on_outcome``: a deferred sale was transmitted; print its QR code."""
        record = done.result
        if record is None:  # refused after all: the sale needs a corrected invoice
            print(f"{done.key}: {done.outcome.status.value}: {done.outcome.error}")
            return
        print(f"{done.key}: mark {record.mark} arrived; its QR code:")
        print(qr.render_text(record))
        self.printed[done.key] = record.qr_code_string or ""
        self.marks[done.key] = record.mark  # type: ignore[assignment]
        self.waiting.discard(done.key)
        if not self.waiting:
            self.all_marked.set()


# endregion receipts


# region main
def sale(tin: str, number: int) -> RetailReceipt:
    """A sale at the till: a typed retail receipt, paid by card."""
    return RetailReceipt(
        issuer=Party(vat=tin),
        series="T1",
        number=number,
        issued="2026-11-22T10:15:00",
        lines=[Line("Espresso", quantity=2, unit_price="2.40")],
        payments=[PaymentMethod(7)],
        internal_id=f"till-1/T1/{number}",
    )


async def main() -> None:
    """Sell through an outage against the sandbox."""
    receipts = Receipts()
    with tempfile.TemporaryDirectory() as folder:
        async with (
            Sandbox() as sandbox,
            InvoicingClient(
                sandbox.base_url,
                sandbox.client_id,
                sandbox.client_secret,
                provider_key=sandbox.provider_key,
            ) as client,
            Deferral(
                client,
                Path(folder) / "till.db",  # the till's outbox: a SQLite file
                budget=1.0,  # seconds a customer waits for the provider at most
                portal_url="https://portal.example.invalid",
                on_outcome=receipts.mark_arrived,
                probe_delay=0.05,  # quick for the example; the default is 1 s
            ) as till,
        ):
            sales = [sale(sandbox.client_id, n) for n in range(1, 7)]

            async def sell(invoice: RetailReceipt) -> None:
                answer = await till.submit_or_defer(invoice)
                receipts.sale(document_key(invoice), answer)

            await sell(sales[0])  # the provider answers: the record at once
            async with sandbox.outage("refuse"):  # the provider is down
                await sell(sales[1])  # deferred at once: never sent, so stamped
                await sell(sales[2])  # deferred at once: the provider is known down
            async with sandbox.outage("hang"):
                await sell(sales[3])  # still known down: no budget spent
                print("backlog:", till.backlog.count, "sale(s) waiting")
            # The provider is back: the drainer transmits the backlog, and later sales
            # go straight to the provider again.
            deferred = set(receipts.waiting)
            await asyncio.wait_for(receipts.all_marked.wait(), 60)
            await sell(sales[4])
            await sell(sales[5])
            assert (await till.refresh_backlog()).count == 0

        # Every sale is held once by the provider, with the mark the till printed, and
        # every deferred one (none of them sent before) stamped by the deferral as a
        # document issued during a loss of connection: TransmissionFailure 1.
        assert sandbox.commit_count == 6
        for key, mark in receipts.marks.items():
            held = sandbox.committed[key]
            assert held.commits == 1
            assert held.record.mark == mark
            assert receipts.printed[key] == held.record.qr_code_string
            stamp = held.document.get("TransmissionFailure")
            assert stamp == (1 if key in deferred else None)


# endregion main


if __name__ == "__main__":
    asyncio.run(main())
