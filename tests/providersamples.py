"""Documents copied in shape from the provider's published samples.

A helper module, not a test module. The IMPACT eINVOICING documentation publishes full
sample documents per industry ("DocumentSamples new", einvoicedocs.impact.gr); these
keep their shape and field names (amounts changed so that they add up, the issuer's TIN
the samples' own ``118058830``, whose check digit is valid):

* a retail receipt 11.1, as "Financial Services/B2C Retail Receipt" writes it
  (PascalCase, ``"Vat": "EL118058830"``);
* a sales invoice 1.1, as "Automotive/1.1 B2B Sales Invoice for new vehicles" writes it
  (camelCase: ``"issuer": {"vat": …}``, ``"distributionDetails"``);
* a service invoice 2.1 ("Manufacturing/B2B Service Invoice", a VAT-exempt line);
* a credit note 5.1 ("Automotive/5.1 B2B Credit Invoice", camelCase).

:func:`camel` writes any of them the other way, as the samples do (``VATTotal`` →
``vatTotal``, ``IAPRSignPolicy`` → ``iaprSignPolicy``).
"""

from __future__ import annotations

import copy
from typing import Any

#: The issuer's TIN of the provider's samples (``EL118058830``): a valid check digit.
SAMPLE_TIN = "118058830"


def camel(value: Any) -> Any:
    """``value`` with every member name in camelCase, as .NET writes it."""
    if isinstance(value, dict):
        return {_camel(key): camel(item) for key, item in value.items()}
    if isinstance(value, list):
        return [camel(item) for item in value]
    return value


def pascal(value: Any) -> Any:
    """``value`` with every member name's first letter upper-case."""
    if isinstance(value, dict):
        return {key[:1].upper() + key[1:]: pascal(item) for key, item in value.items()}
    if isinstance(value, list):
        return [pascal(item) for item in value]
    return value


def _camel(name: str) -> str:
    run = len(name) - len(name.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    if run == len(name):
        return name.lower()
    if run > 1:
        run -= 1  # the last capital starts the next word: VATTotal -> vatTotal
    return name[:run].lower() + name[run:]


def with_vat(document: dict[str, Any], vat: str) -> dict[str, Any]:
    """A copy of ``document`` whose issuer's VAT number is written ``vat`` (any case)."""
    document = copy.deepcopy(document)
    issuer = next(value for key, value in document.items() if key.lower() == "issuer")
    name = next(key for key in issuer if key.lower() == "vat")
    issuer[name] = vat
    return document


def _party(name: str, vat: str) -> dict[str, Any]:
    return {
        "RegisteredName": name,
        "Vat": vat,
        "Address": {
            "Country": "Ελλάδα",
            "CountryCode": "GR",
            "City": f"{name}'s city",
            "Street": f"{name}'s street",
            "Postal": "15125",
        },
    }


def retail_receipt(tin: str = SAMPLE_TIN, *, vat_prefix: str = "EL") -> dict[str, Any]:
    """A retail receipt (11.1), PascalCase, the issuer's VAT number with its prefix."""
    issuer = _party("issuer", vat_prefix + tin)
    issuer["BrandName"] = "issuer's brand"
    issuer["TaxOfficeCode"] = "Φ.Α.Ε. ΑΘΗΝΩΝ"
    issuer["BranchCode"] = 0
    return {
        "IAPRSignPolicy": 2,
        "Currency": "Euro",
        "CurrencyCode": "EUR",
        "InvoiceTypeCode": "11.1",
        "SpecialInvoiceCategory": 0,
        "VariationType": 0,
        "DocumentType": "Απόδειξη Λιανικής Πώλησης",
        "DocumentTypeCode": "INVOICE",
        "IsDeliveryNote": False,
        "Series": "GR05GR",
        "Number": "560010167",
        "DateIssued": "2024-10-08T09:00:16",
        "ReferenceCode": "I-67175854",
        "Issuer": issuer,
        "CounterParty": {**_party("counter party", ""), "Code": "0013502413"},
        "AllowancesCharges": [],
        "DistributionDetails": {"InternalDocumentId": "GR05GR56001016.2024/10/09"},
        "PaymentDetails": {
            "PaymentMethods": [
                {
                    "PaymentMethodType": "WEB BANKING",
                    "PaymentMethodTypeCode": 6,
                    "Amount": 244.32,
                    "Remarks": "",
                    "Contactless": False,
                }
            ],
            "PaymentDate": "2024-10-29T00:00:00",
        },
        "AdditionalDetails": {"AccountingDepartmentEmails": [""], "TransmissionMethod": "A"},
        "Details": [
            {
                "LineNo": 1,
                "ItemCodification": "",
                "Descriptions": ["Συμβουλευτικές υπηρεσίες"],
                "MeasurementUnitCodeEN": "PCE",
                "Quantity": 1,
                "UnitPrice": 197.03,
                "NetTotal": 197.03,
                "Total": 244.32,
                "VATTotal": 47.29,
                "VatCategory": "24",
                "VatCategoryCode": 1,
                "IsInformative": False,
                "IsHidden": False,
                "IncomeClassification": {
                    "ClassificationTypeCode": "E3_561_003",
                    "ClassificationCategoryCode": "category1_3",
                    "Amount": 197.03,
                },
            }
        ],
        "Summaries": {
            "TotalNetAmount": 197.03,
            "TotalVATAmount": 47.29,
            "TotalGrossValue": 244.32,
        },
    }


def sales_invoice(tin: str = SAMPLE_TIN) -> dict[str, Any]:
    """A sales invoice (1.1) in camelCase, the issuer's VAT number bare, two lines."""
    lines = [
        (1, "Όχημα επιβατικό", 1, "18500.00", 1, "18500.00", "4440.00"),
        (2, "Τέλη ταξινόμησης", 1, "130.00", 1, "130.00", "31.20"),
    ]
    details = [
        {
            "lineNo": no,
            "code": f"V-{no}",
            "descriptions": [text],
            "measurementUnitCodeEN": "PCE",
            "quantity": quantity,
            "unitPrice": float(price),
            "netTotal": float(net),
            "vatTotal": float(vat),
            "total": round(float(net) + float(vat), 2),
            "vatCategory": "24",
            "vatCategoryCode": category,
        }
        for no, text, quantity, price, category, net, vat in lines
    ]
    return camel(
        {
            "CurrencyCode": "EUR",
            "InvoiceType": "ΤΙΜΟΛΟΓΙΟ ΠΩΛΗΣΗΣ (Δ) (121)",
            "InvoiceTypeCode": "1.1",
            "SpecialInvoiceCategory": 0,
            "VariationType": 0,
            "DocumentTypeCode": "INVOICE",
            "IsDeliveryNote": False,
            "Series": "0395",
            "Number": "000597",
            "DateIssued": "2024-10-21T09:34:28",
            "Issuer": {**_party("Issuer", tin), "PosId": "0"},
            "CounterParty": _party("CounterParty", "EL094019245"),
            "AllowancesCharges": [],
            "DistributionDetails": {
                "InternalDocumentId": "a153fa8b-4377-4fb2-be73-c49ca24250f5",
                "MovePurpose": "ΠΩΛΗΣΗ",
            },
            "PaymentDetails": {
                "PaymentMethods": [{"PaymentMethodTypeCode": 5, "Amount": 23101.2}],
            },
        }
    ) | {
        "details": details,
        "summaries": {
            "totalNetAmount": 18630.0,
            "totalVATAmount": 4471.2,
            "totalGrossValue": 23101.2,
        },
    }


def service_invoice(tin: str = SAMPLE_TIN) -> dict[str, Any]:
    """A service invoice (2.1), PascalCase, one VAT-exempt line (category 7, 0 %)."""
    return {
        "IAPRSignPolicy": 2,
        "CurrencyCode": "EUR",
        "InvoiceType": "Τιμολόγιο Παροχής",
        "InvoiceTypeCode": "2.1",
        "Series": "0",
        "Number": "24006666",
        "DateIssued": "2024-10-09T14:10:48",
        "Issuer": _party("issuer", "EL" + tin),
        "CounterParty": _party("counter party", "EL094019245"),
        "DistributionDetails": {"InternalDocumentId": "455cf21a-a8d8-4742-804f-95d0485a1760"},
        "PaymentDetails": {"PaymentMethods": [{"PaymentMethodTypeCode": 2, "Amount": 475}]},
        "Details": [
            {
                "LineNo": 1,
                "Descriptions": ["Product's specifications"],
                "MeasurementUnitCodeEN": "PCE",
                "Quantity": 1,
                "UnitPrice": 475,
                "NetTotal": 475,
                "Total": 475,
                "VATTotal": 0,
                "VatExcemptionCategory": "«ΑΠΑΛΛΑΓΗ ΑΠΟ ΦΠΑ – ΑΡΘΡΟ 22 ΤΟΥ ΚΩΔΙΚΑ ΦΠΑ»",
                "VatExemptionCategoryCode": 14,
                "VatCategoryCode": 7,
            }
        ],
        "Summaries": {"TotalNetAmount": 475, "TotalVATAmount": 0, "TotalGrossValue": 475},
    }


def credit_note(tin: str = SAMPLE_TIN) -> dict[str, Any]:
    """A credit note (5.1) in camelCase, correlated to an earlier invoice's mark."""
    return camel(
        {
            "CurrencyCode": "EUR",
            "InvoiceTypeCode": "5.1",
            "DocumentType": "Πιστωτικό Τιμολόγιο / Συσχετιζόμενο",
            "Series": "ΓΘ",
            "Number": "0000149",
            "DateIssued": "2024-10-21T00:00:00",
            "RelativeDocuments": ["G/ΤΠΥΔΑ-ΓΘ-0005647"],
            "CorrelatedInvoices": [400007396844549],
            "Issuer": _party("Issuer", "EL" + tin),
            "CounterParty": _party("counterParty", "EL094019245"),
            "DistributionDetails": {"InternalDocumentId": "credit-0000149"},
            "Details": [
                {
                    "LineNo": 1,
                    "Descriptions": ["Επιστροφή"],
                    "Quantity": 2,
                    "UnitPrice": "12.50",
                    "NetTotal": "25.00",
                    "VATTotal": "6.00",
                    "Total": "31.00",
                    "VatCategoryCode": "1",
                }
            ],
            "Summaries": {
                "TotalNetAmount": "25.00",
                "TotalVATAmount": "6.00",
                "TotalGrossValue": "31.00",
            },
        }
    )


#: Every sample, by name: PascalCase and camelCase, prefixed and bare VAT numbers.
SAMPLES = {
    "retail receipt 11.1": retail_receipt,
    "sales invoice 1.1 (camelCase)": sales_invoice,
    "service invoice 2.1": service_invoice,
    "credit note 5.1 (camelCase)": credit_note,
}
