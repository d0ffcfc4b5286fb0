"""Typed documents: the four documents POS and ERP software send most, checked.

``main()`` builds a retail receipt, a sales invoice, a service invoice, a credit note
and an intra-community sales invoice, checks each (no problem), sends them to the
embedded sandbox, prints the
receipt's JSON, and then what ``check`` says of the commonest mistakes, each refused
by the sandbox with a 400 naming the same fields. Run it with plain Python:
``python docs/examples/documents.py``.
"""

from __future__ import annotations

import asyncio
import json

from invoicing_async import InvoicingClient, ValidationError, document_key
from invoicing_async.documents import (
    Address,
    CreditNote,
    IntraEUSalesInvoice,
    Line,
    Party,
    PaymentMethod,
    RetailReceipt,
    SalesInvoice,
    ServiceInvoice,
    check,
    from_json,
    to_json,
)
from invoicing_sandbox import Sandbox

#: The sandbox's default client: a default ``Sandbox()`` takes this issuer's documents.
ISSUER = Party(vat="EL123456783", registered_name="Παράδειγμα Εμπορική")
CUSTOMER = Party(vat="EL094019245", registered_name="Πελάτης")


# region receipt
def retail_receipt(number: int) -> RetailReceipt:
    """A sale at the till: two lines at 24 % and 13 %, paid by card."""
    return RetailReceipt(
        issuer=ISSUER,
        series="T1",
        number=number,
        issued="2026-11-22T10:15:00",
        lines=[
            Line("Espresso", quantity=2, unit_price="2.40"),
            Line("Κρουασάν βουτύρου", unit_price="1.90", vat_category=2),  # 13 %
        ],
        payments=[PaymentMethod(7, name="Κάρτα")],  # POS; its amount: the total
        internal_id=f"till-1/T1/{number}",
    )


# endregion receipt


# region invoices
def sales_invoice(number: int) -> SalesInvoice:
    """Goods sold to a business, on credit."""
    return SalesInvoice(
        issuer=ISSUER,
        counterparty=CUSTOMER,
        series="A",
        number=number,
        issued="2026-11-22",
        lines=[
            Line(
                "Χαρτί A4 (500 φύλλα)", quantity=40, unit_price="5.20", code="SKU-100"
            ),
            Line("Μεταφορικά", net_total="12.00"),  # a net given: its VAT computed
        ],
        payments=[PaymentMethod(5)],  # on credit
        internal_id=f"erp/A/{number}",
    )


def service_invoice(number: int) -> ServiceInvoice:
    """A service to a business, one line exempt from VAT (category 7, 0 %)."""
    return ServiceInvoice(
        issuer=ISSUER,
        counterparty=CUSTOMER,
        series="Y",
        number=number,
        issued="2026-11-22",
        lines=[
            Line("Τεχνική υποστήριξη (ώρες)", quantity=6, unit_price="45.00"),
            Line("Εκπαίδευση", net_total="300.00", vat_category=7, vat_exemption=14),
        ],
        internal_id=f"erp/Y/{number}",
    )


def credit_note(number: int, credited_mark: int) -> CreditNote:
    """Two packs of paper returned: credits the invoice with that mark."""
    return CreditNote(
        issuer=ISSUER,
        counterparty=CUSTOMER,
        series="C",
        number=number,
        issued="2026-11-23",
        lines=[Line("Επιστροφή: χαρτί A4", quantity=2, unit_price="5.20")],
        correlated_invoices=[credited_mark],
        internal_id=f"erp/C/{number}",
        extra={
            "RelativeDocuments": [f"erp/A/{number}"]
        },  # a member the model does not name
    )


# endregion invoices


# region abroad
def export_invoice(number: int) -> IntraEUSalesInvoice:
    """Goods sold to a business in Italy: its VAT number and country, a line at 0 %."""
    return IntraEUSalesInvoice(
        issuer=ISSUER,
        counterparty=Party(
            vat="IT00000000000",
            registered_name="Cliente",
            address=Address(country_code="IT"),
        ),
        series="EX",
        number=number,
        issued="2026-11-22",
        lines=[
            Line(
                "Ελαιόλαδο",
                quantity=100,
                unit_price="9.80",
                vat_category=7,
                vat_exemption=14,
            )
        ],
        internal_id=f"erp/EX/{number}",
    )


# endregion abroad


# region mistakes
def mistakes() -> dict[str, dict]:
    """The receipt's JSON (built by hand, say) with each of the commonest mistakes."""
    made = {}
    document = to_json(retail_receipt(1))
    del document["Issuer"]
    made["no issuer"] = document
    document = to_json(retail_receipt(2))  # every line's VAT at 24 %, the second's 13 %
    document["Details"][1].update(VATTotal=0.46, Total=2.36)
    document["Summaries"].update(TotalVATAmount=1.61, TotalGrossValue=8.31)
    made["a line's VAT not at its category's rate"] = document
    document = to_json(retail_receipt(3))  # the totals of the first line only
    document["Summaries"].update(
        TotalNetAmount=4.80, TotalVATAmount=1.15, TotalGrossValue=5.95
    )
    made["summaries that are not the lines' totals"] = document
    document = to_json(retail_receipt(4))
    document["Summaries"]["TotalNetAmount"] = 4.8 + 1.9  # 6.699999999999999
    made["amounts added up as floats"] = document
    return made


# endregion mistakes


async def main() -> None:
    """Build, check and send the four documents; show what check says of mistakes."""
    async with (
        Sandbox() as sb,
        InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client,
    ):
        # region send
        receipt = retail_receipt(17)
        assert check(receipt) == []  # nothing the provider would refuse
        record = await client.submit_secure(receipt)  # as a dict is sent
        invoice = sales_invoice(42)
        outcomes = await client.submit_many(
            [invoice, service_invoice(7), credit_note(3, credited_mark=record.mark)]
        )
        # endregion send
        assert all(outcome.ok for outcome in outcomes)
        export = export_invoice(12)
        assert check(export) == []  # a customer in another EU country, its line exempt
        await client.submit_json(export)
        for document in (receipt, invoice):
            held = sb.committed[document_key(document)].document
            assert held == to_json(document)  # the provider got exactly its JSON
            assert from_json(held) == document  # and it reads back the same
        print(json.dumps(to_json(receipt), ensure_ascii=False, indent=2))
        for mistake, document in mistakes().items():
            problems = [p for p in check(document) if p.is_error]
            print(f"# {mistake}")
            for problem in problems:
                print(f"{problem.field}: {problem.message}")
            try:
                await client.submit_json(document)
            except ValidationError as refused:  # the sandbox: 400, the same fields
                errors = (refused.body or {}).get("errors", [])
                assert {e["field"] for e in errors} == {p.field for p in problems}
            else:
                raise AssertionError(f"{mistake}: accepted")


if __name__ == "__main__":
    asyncio.run(main())
