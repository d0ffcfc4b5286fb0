"""Getting started: the first encrypted invoice, sent to the embedded sandbox provider.

Run it with ``python docs/examples/getting_started.py``: no credentials, no network
beyond loopback. ``tests/test_docs.py`` runs it too.
"""

from __future__ import annotations

import asyncio
from typing import Any

from invoicing_async import (
    DocumentResult,
    DuplicateDocumentError,
    InvoicingClient,
    document_key,
)
from invoicing_sandbox import Sandbox, sample_invoice


async def submit(client: InvoicingClient, invoice: dict[str, Any]) -> DocumentResult:
    """Submit ``invoice``; if the provider holds it already, return its record."""
    try:
        return await client.submit_secure(invoice)  # POST /Invoice/secure, encrypted
    except DuplicateDocumentError as exc:  # 409: sent before (by us or by a retry)
        if exc.result is None:  # a 409 without the original record: nothing to return
            raise
        return exc.result


async def main() -> None:
    """Submit one invoice twice and check what the provider holds."""
    async with Sandbox() as sandbox:  # a real HTTP server on 127.0.0.1, random port
        # A realistic invoice issued by the sandbox's default client (its TIN).
        invoice = sample_invoice(1, issuer_vat=sandbox.client_id)

        # region first-call
        async with InvoicingClient(
            sandbox.base_url,  # https is required, except on loopback
            sandbox.client_id,  # the issuer's TIN
            sandbox.client_secret,  # the API key
            provider_key=sandbox.provider_key,  # whom documents are encrypted to
        ) as client:
            result = await submit(client, invoice)
            print("accepted: mark", result.mark, "uid", result.uid)
            print("QR code:", result.qr_code_string)
            # endregion first-call

            # Sending the same invoice again is safe: the provider recognises it and
            # answers 409 with the original record, so we get the same result back.
            again = await submit(client, invoice)
            assert again == result

        # The sandbox's ground truth: the provider holds the invoice, committed once;
        # the second request was answered 409.
        held = sandbox.committed[document_key(invoice)]
        assert held.record == result
        assert held.commits == 1
        assert sandbox.stats.submissions[409] == 1


if __name__ == "__main__":
    asyncio.run(main())
