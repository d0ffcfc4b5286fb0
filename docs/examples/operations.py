"""The provider's other operations, each safe to retry as its class says.

A cancellation whose answer is lost is never sent again: the status read says whether
it took effect. A card payment's signature is re-sent after a lost answer and comes back
the same. ``main()`` runs it against the embedded sandbox, losing answers on purpose:
``python docs/examples/operations.py``.
"""

from __future__ import annotations

import asyncio

from invoicing_async import (
    DuplicateDocumentError,
    InvoicingClient,
    OperationResult,
    UnknownOutcomeError,
)
from invoicing_sandbox import Fault, Sandbox, sample_invoice


# region cancel
async def cancel_delivery_note(client: InvoicingClient, mark: int) -> int:
    """Cancel the note once; its cancellation mark, whatever happened to the answer."""
    try:
        result = await client.cancel_delivery_note(mark)
    except DuplicateDocumentError as exc:  # cancelled before: the original mark
        assert exc.result is not None
        assert exc.result.cancellation_mark is not None
        return exc.result.cancellation_mark
    except UnknownOutcomeError:  # sent once, the answer lost: never re-sent blindly
        status = await client.get_last_b2g_status(mark)
        if status.cancellation_mark is not None:
            return status.cancellation_mark  # it did take effect
        result = await client.cancel_delivery_note(mark)  # certainly not: once more
    assert result.cancellation_mark is not None
    return result.cancellation_mark


# endregion cancel


# region sign
async def sign_card_payment(client: InvoicingClient, tin: str, amount: float) -> str:
    """The provider's signature a card terminal needs for this payment."""
    signed: OperationResult = await client.sign_pos_transaction(
        {
            "issuerTin": tin,
            "issueDate": "2026-11-22T10:15:00",
            "branchCode": 0,
            "invoiceTypeCode": "11.1",
            "series": "POS",
            "identifier": "7",
            "amount": amount,
            "terminalId": "T-100",
            "signatureDurationType": 1,
        }
    )
    return str(signed.body["signature"])


# endregion sign


async def main() -> None:
    """Against the sandbox: a lost cancellation answer, a lost signature answer."""
    async with Sandbox() as sb:
        tin, api_key = sb.client_id, sb.client_secret
        async with InvoicingClient(sb.base_url, tin, api_key) as client:
            record = await client.submit_json(sample_invoice(1))
            assert record.mark is not None
            sb.script_operation(Fault.commit_then_drop())  # cancelled, answer lost
            cancellation = await cancel_delivery_note(client, record.mark)
            assert await cancel_delivery_note(client, record.mark) == cancellation
            sb.script_operation(Fault.commit_then_drop())  # signed, answer lost
            signature = await sign_card_payment(client, sb.client_id, 12.4)
        cancels = [r for r in sb.requests if r.path == "/Invoice/cancelDeliveryNote"]
        print(f"cancellation mark {cancellation}: {len(cancels)} cancel requests")
        print(f"signature {signature[:16]}…, {len(sb.pos_signatures)} signed")
        assert len(cancels) == 2  # the lost one, and the repeat answered 409
        assert [s.signature for s in sb.pos_signatures] == [signature]


if __name__ == "__main__":
    asyncio.run(main())
