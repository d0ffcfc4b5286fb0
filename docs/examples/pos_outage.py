"""A till that keeps selling through an outage, printing each QR when its mark arrives.

``main()`` runs it against the embedded sandbox: sales before the outage get the
provider's record at once; while the provider refuses connections, then hangs, each
sale is deferred (durable in the till's outbox) and its receipt carries the provider's
offline QR; when the provider is back, the drainer transmits the deferred sales, oldest
first, and each outcome arrives with the mark and the real QR code, printed for the
receipt. Run it: ``python docs/examples/pos_outage.py`` (needs the ``qr`` extra).
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
from invoicing_sandbox import Sandbox, sample_invoice


# region stamp
def mark_transmission_failure(invoice: dict[str, Any]) -> dict[str, Any]:
    """Stamp an invoice issued while the provider could not be reached.

    Called only for an invoice that certainly never reached the provider; one whose
    first attempt may have is stored and sent again exactly as it was.
    """
    return {**invoice, "TransmissionFailure": 1}


# endregion stamp


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
                stamp=mark_transmission_failure,
                portal_url="https://portal.example.invalid",
                on_outcome=receipts.mark_arrived,
                probe_delay=0.05,  # quick for the example; the default is 1 s
            ) as till,
        ):
            tin = sandbox.client_id
            sales = [sample_invoice(n, issuer_vat=tin) for n in range(1, 7)]

            async def sell(invoice: dict[str, Any]) -> None:
                answer = await till.submit_or_defer(invoice)
                receipts.sale(document_key(invoice), answer)

            await sell(sales[0])  # the provider answers: the record at once
            async with sandbox.outage("refuse"):  # the provider is down
                await sell(sales[1])  # deferred at once: certainly not sent, stamped
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
        # every deferred one was stamped.
        assert sandbox.commit_count == 6
        for key, mark in receipts.marks.items():
            held = sandbox.committed[key]
            assert held.commits == 1
            assert held.record.mark == mark
            assert receipts.printed[key] == held.record.qr_code_string
            assert ("TransmissionFailure" in held.document) == (key in deferred)


# endregion main


if __name__ == "__main__":
    asyncio.run(main())
