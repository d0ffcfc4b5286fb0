"""Realistic sample invoices, for the demo, benchmarks and users' own tests.

Documents follow the provider's PascalCase shape, with the names its published samples
write (``Issuer.Vat``, ``Series``, ``Number``, ``DateIssued``, ``InvoiceTypeCode``,
``Details[]`` with ``NetTotal`` / ``VATTotal`` / ``VatCategoryCode``, ``Summaries`` with
``TotalNetAmount`` / ``TotalVATAmount`` / ``TotalGrossValue``, ``PaymentDetails``,
``DistributionDetails``), with Greek text and amounts that add up (each line's VAT its
net at 24 %, rounded per line), so they pass ``invoicing_async.documents.check`` without
a warning and exercise UTF-8 and realistic sizes (about 900 bytes plus 340 per line:
10 lines is ~4.3 KB, 23 lines ~8.6 KB).
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from ._rules import with_check_digit

__all__ = ["SANDBOX_CLIENT_ID", "sample_invoice", "sample_invoices"]

#: The TIN of the sandbox's default client and the issuer of sample invoices, so that
#: ``Sandbox()`` accepts ``sample_invoice(n)`` as they come (9 digits, valid check digit).
SANDBOX_CLIENT_ID = "123456783"

_PRODUCTS = [
    ("Καφές espresso 1kg", "24.90"),
    ("Ελαιόλαδο παρθένο 5L", "38.50"),
    ("Χαρτί εκτύπωσης A4 (500 φύλλα)", "5.20"),
    ("Υπηρεσία τεχνικής υποστήριξης (ώρα)", "45.00"),
    ("Φέτα ΠΟΠ 400g", "6.80"),
    ("Μέλι θυμαρίσιο 1kg", "14.00"),
    ("Καλώδιο δικτύου Cat6 3m", "3.90"),
    ("Μεταφορικά έξοδα", "12.00"),
]
_CITIES = ["Αθήνα", "Θεσσαλονίκη", "Πάτρα", "Ηράκλειο", "Λάρισα", "Βόλος"]
_CENT = Decimal("0.01")


def _money(value: Decimal) -> float:
    return float(value.quantize(_CENT, rounding=ROUND_HALF_UP))


def sample_invoice(
    number: int,
    *,
    issuer_vat: str = SANDBOX_CLIENT_ID,
    series: str = "A",
    lines: int = 10,
    branch: int = 0,
    issued: dt.date | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """One invoice; the same arguments always give the same document.

    Its identity is ``DistributionDetails.InternalDocumentId`` =
    ``{issuer_vat}-{series}-{number}``. The default issuer is the default client of
    :class:`~invoicing_sandbox.Sandbox` (:data:`SANDBOX_CLIENT_ID`), so a sandbox
    with default options accepts it; for another client pass
    ``issuer_vat=env.client_id``.

    .. versionchanged:: 0.2.0 the default issuer is the sandbox's default client.
    .. versionchanged:: 0.5.0 the names the provider's samples write (``NetTotal``,
       ``TotalNetAmount``, ``InvoiceTypeCode``, ``PaymentDetails`` …) and a customer's
       TIN with a valid check digit.
    """
    rng = random.Random(f"{seed}:{issuer_vat}:{series}:{number}")
    issued = issued or dt.date(2026, 11, 22)
    details = []
    net_total = vat_total = Decimal(0)
    for line in range(1, lines + 1):
        name, price = _PRODUCTS[rng.randrange(len(_PRODUCTS))]
        quantity = Decimal(rng.randint(1, 20))
        net = Decimal(price) * quantity
        vat = (net * Decimal("0.24")).quantize(_CENT, rounding=ROUND_HALF_UP)
        net_total += net
        vat_total += vat
        details.append(
            {
                "LineNo": line,
                "Code": f"SKU-{rng.randint(10000, 99999)}",
                "Descriptions": [name],
                "MeasurementUnitCode": 1,
                "Quantity": float(quantity),
                "UnitPrice": float(Decimal(price)),
                "NetTotal": _money(net),
                "VATTotal": _money(vat),
                "Total": _money(net + vat),
                "VatCategoryCode": 1,
                "IncomeClassification": {
                    "ClassificationTypeCode": "E3_561_001",
                    "ClassificationCategoryCode": "category1_1",
                    "Amount": _money(net),
                },
            }
        )
    city = _CITIES[rng.randrange(len(_CITIES))]
    customer = "".join(str(rng.randrange(10)) for _ in range(8))
    return {
        "Issuer": {
            "Vat": issuer_vat,
            "RegisteredName": "Παράδειγμα Εμπορική Α.Ε.",
            "BranchCode": branch,
            "Address": {
                "CountryCode": "GR",
                "Street": "Ερμού",
                "Number": "25",
                "Postal": "10563",
                "City": "Αθήνα",
            },
        },
        "CounterParty": {
            "Vat": with_check_digit(customer),
            "RegisteredName": f"Πελάτης {number} Ο.Ε.",
            "Address": {
                "CountryCode": "GR",
                "Street": "Τσιμισκή",
                "Number": "12",
                "Postal": "54624",
                "City": city,
            },
        },
        "Series": series,
        "Number": number,
        "DateIssued": issued.isoformat(),
        "InvoiceTypeCode": "1.1",
        "CurrencyCode": "EUR",
        "PaymentDetails": {
            "PaymentMethods": [
                {
                    "PaymentMethodTypeCode": 7,
                    "PaymentMethodType": "Κάρτα",
                    "Amount": _money(net_total + vat_total),
                }
            ]
        },
        "Details": details,
        "Summaries": {
            "TotalNetAmount": _money(net_total),
            "TotalVATAmount": _money(vat_total),
            "TotalWithheldAmount": 0.0,
            "TotalFeesAmount": 0.0,
            "TotalStampDutyAmount": 0.0,
            "TotalOtherTaxesAmount": 0.0,
            "TotalDeductionsAmount": 0.0,
            "TotalGrossValue": _money(net_total + vat_total),
        },
        "DistributionDetails": {"InternalDocumentId": f"{issuer_vat}-{series}-{number}"},
    }


def sample_invoices(count: int, *, start: int = 1, **kwargs: Any) -> list[dict[str, Any]]:
    """``count`` consecutive invoices (numbers ``start`` …)."""
    return [sample_invoice(start + n, **kwargs) for n in range(count)]
