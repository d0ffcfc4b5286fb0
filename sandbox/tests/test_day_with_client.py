"""The rest of a day through the real client, and what the sandbox shows of it.

No typed method of :class:`~invoicing_async.InvoicingClient` calls these operations yet:
``request()`` does, authenticated as the other operations are. The sandbox's ground
truth (``credits``, ``payment_updates``, ``iris_payments``, ``/_sandbox/``) is what the
client's view is checked against; ``reset()`` forgets it.
"""

from __future__ import annotations

import datetime as dt

import aiohttp

from invoicing_async import InvoicingClient, Safety
from invoicing_sandbox import sample_invoice


def client_of(sb) -> InvoicingClient:
    return InvoicingClient(
        sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
    )


async def test_a_day_through_the_client(sb):
    """Submit, credit, sign and pay later, start and settle an IRIS payment, list the
    day, fetch the PDF: each answered as the provider's pages say."""
    invoice = sample_invoice(1, issuer_vat=sb.client_id, lines=2, issued=dt.date(2026, 11, 22))
    async with client_of(sb) as client:
        record = await client.submit_json(invoice)
        credited = await client.request(
            "POST",
            "/Invoice/credit",
            json={
                "issuerTin": sb.client_id,
                "authenticationCode": record.authentication_code,
                "mark": record.mark,
                "series": "CR",
                "number": "1",
                "internalId": "CR-1",
                "relateCredit": False,
                "preventDocumentMapping": False,
            },
        )
        assert credited == {}
        signed = await client.sign_pos_transaction(
            {"issuerTin": sb.client_id, "mark": record.mark, "paymentAmount": 5}
        )
        paid = await client.request(
            "POST",
            "/Invoice/updatePayment",
            json={
                "mark": record.mark,
                "entityVatNumber": sb.client_id,
                "paymentMethods": [
                    {
                        "paymentMethodTypeCode": 7,
                        "amount": 5,
                        "transactionId": "TX-9",
                        "providersSignature": signed.body["signature"],
                        "posInput": signed.body["signedDataInput"],
                    }
                ],
            },
            safety=Safety.AT_MOST_ONCE_WRITE,
        )
        assert paid == {"success": True, "message": str(sb.payment_updates[0].payment_mark)}
        started = await client.request(
            "POST",
            "/paymentsapi/IrisPayments/InitiatePayment",
            json={"issuerTin": sb.client_id, "paymentAmount": 5, "validityPeriod": 2},
        )
        sb.settle_iris_payment(started["endToEndDiasId"])
        state = await client.request(
            "GET",
            "/paymentsapi/IrisPayments/GetPaymentStatus",
            params={"endToEndDiasId": started["endToEndDiasId"]},
        )
        assert (state["paymentStatus"], state["isFinalStatus"]) == ("Completed", True)
        today = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d")
        listed = await client.request(
            "GET",
            f"/api/invoice/getdocuments/{sb.client_id}/1/",
            params={"From": min(today, "20261101"), "dateTo": max(today, "20261130")},
        )
    assert [entry["mark"] for entry in listed] == [record.mark, sb.credits[0].mark]
    async with aiohttp.ClientSession() as session, session.get(f"{record.url}/pdf") as pdf:
        assert (pdf.status, pdf.content_type) == (200, "application/pdf")


async def test_the_sandbox_shows_the_day_and_reset_forgets_it(sb, caller):
    """/_sandbox/ lists the new endpoints, which show the credits and payments held; no
    credential appears; reset() empties credits, payments and IRIS payments."""
    record = await caller.submit_sample(1)
    credit = {
        "issuerTin": caller.tin,
        "authenticationCode": record["authenticationCode"],
        "mark": record["mark"],
        "series": "CR",
        "number": "1",
        "internalId": "CR-1",
        "relateCredit": True,
        "preventDocumentMapping": True,
    }
    assert (await caller.call("POST", "/Invoice/credit", json=credit)).status == 200
    started = await caller.call(
        "POST",
        "/paymentsapi/IrisPayments/InitiatePayment",
        json={"issuerTin": caller.tin, "paymentAmount": 1, "validityPeriod": 1},
    )
    assert started.status == 200

    async def shown(route):
        answer = await caller.call("GET", "", url=f"{sb.inspect_url}/{route}", authenticate=False)
        assert answer.status == 200, answer.body
        return answer

    index = (await shown("")).json()
    for name in ("credits", "payment-updates", "iris-payments", "iris-payments/{endToEndDiasId}"):
        assert f"/_sandbox/{name}" in index["endpoints"]
    [credit_shown] = (await shown("credits")).json()["credits"]
    assert (credit_shown["invoice_type"], credit_shown["prevent_document_mapping"]) == (
        "5.1",
        True,
    )
    e2e = started.json()["endToEndDiasId"]
    one = (await shown(f"iris-payments/{e2e}")).json()
    assert (one["status"], one["validity_minutes"]) == ("Pending", 1)
    everything = b"".join(
        [(await shown(r)).body for r in ("credits", "payment-updates", "iris-payments")]
    )
    assert caller.api_key.encode() not in everything
    assert caller.token.encode() not in everything
    sb.reset()
    assert (sb.credits, sb.payment_updates, sb.iris_payments) == ([], [], [])
