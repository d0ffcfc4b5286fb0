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
* a credit note 5.1 ("Automotive/5.1 B2B Credit Invoice", camelCase);
* the rest of a day (issue 40): a service receipt 11.2 ("Retail LMC Demo", camelCase), a
  simplified invoice 11.3 ("Energy/B2C Simplified Receipt"), a credit retail receipt 11.4
  ("Financial Services/B2C Credit Retail Receipt"), a receipt on behalf of third parties
  11.5 (developers.s1ecos.com "11.5 B2C": no ``CounterParty``), an uncorrelated credit
  note 5.2 ("Pharmaceutical Sector/B2B Credit Invoice", camelCase), sales abroad 1.2
  ("Healthcare and Pharmaceutical/B2B Sales Invoice_EU", camelCase) and 1.3
  (s1ecos "1.3 B2B": ``"Vat": "BG000000000"`` for a customer in ``GB``), services abroad
  2.2 (s1ecos "2.2 B2B": an Italian customer) and 2.3 ("B2B Service Invoice_Third
  Countries", camelCase: ``"vat": "GB"``), each line abroad at 0 % with its exemption.

:func:`camel` writes any of them the other way, as the samples do (``VATTotal`` →
``vatTotal``, ``IAPRSignPolicy`` → ``iaprSignPolicy``).
"""

from __future__ import annotations

import copy
import functools
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


def _line(net: float, vat: float, category: int, **more: Any) -> dict[str, Any]:
    """A line of one unit, as the samples write one (PascalCase)."""
    return {
        "LineNo": 1,
        "Descriptions": ["Product's specifications"],
        "Quantity": 1,
        "UnitPrice": net,
        "NetTotal": net,
        "VATTotal": vat,
        "Total": round(net + vat, 2),
        "VatCategoryCode": category,
        **more,
    }


def _day_document(  # noqa: PLR0917  (the six things the samples differ by)
    code: str, series: str, number: str, internal: str, line: dict[str, Any], method: int
) -> dict[str, Any]:
    """A document of the rest of a day (PascalCase): one line, paid by ``method``."""
    net, vat = line["NetTotal"], line["VATTotal"]
    gross = round(net + vat, 2)
    return {
        "IAPRSignPolicy": 2,
        "CurrencyCode": "EUR",
        "InvoiceTypeCode": code,
        "DocumentTypeCode": "INVOICE",
        "OrderNumber": "",
        "Series": series,
        "Number": number,
        "DateIssued": "2025-01-23T13:18:12",
        "Issuer": {**_party("issuer", "EL" + SAMPLE_TIN), "BranchCode": 0},
        "Banks": [{"Name": "bank", "IBAN": "GR0000000000"}],
        "DistributionDetails": {"InternalDocumentId": internal},
        "PaymentDetails": {
            "PaymentMethods": [{"PaymentMethodTypeCode": method, "amount": gross}],
        },
        "AdditionalDetails": {"TransmissionMethod": "A", "AvoidEmailGrouping": False},
        "Details": [line],
        "Summaries": {"TotalNetAmount": net, "TotalVATAmount": vat, "TotalGrossValue": gross},
    }


def _abroad(name: str, vat: str, country: str, country_name: str) -> dict[str, Any]:
    party = _party(name, vat)
    party["Address"] = {**party["Address"], "Country": country_name, "CountryCode": country}
    return party


def service_receipt(tin: str = SAMPLE_TIN) -> dict[str, Any]:
    """A service receipt (11.2) in camelCase, to a customer with a VAT number."""
    document = _day_document("11.2", "LMCD", "1", "lmc-demo-11.2-1", _line(100.0, 24.0, 1), 3)
    document["InvoiceType"] = "ΑΠΟΔΕΙΞΗ ΠΑΡΟΧΗΣ ΥΠΗΡΕΣΙΩΝ"
    document["Issuer"]["Vat"] = "EL" + tin
    document["CounterParty"] = _party("CORRAS GAS Station Demo", "EL094019245")
    return camel(document)


def simplified_invoice(tin: str = SAMPLE_TIN) -> dict[str, Any]:
    """A simplified invoice (11.3): a line at 6 % (category 3, ``"VatCategory": "6"``)."""
    line = _line(87.46, 5.25, 3, VatCategory="6", MeasurementUnitCodeEN="KWH")
    document = _day_document("11.3", "ΑΠΛ", "0001203", "energy-11.3-0001203", line, 7)
    document["Issuer"]["Vat"] = "EL" + tin
    return document


def credit_receipt(tin: str = SAMPLE_TIN) -> dict[str, Any]:
    """A credit retail receipt (11.4): a return, the customer without a VAT number."""
    line = _line(590.72, 141.77, 1, IsInformative=False)
    document = _day_document("11.4", "GR05GR", "560009978", "GR05GR56000997.2024/09/20", line, 6)
    document["DocumentType"] = "Πιστωτική απόδειξη πώλησης αγαθών"
    document["Issuer"]["Vat"] = "EL" + tin
    document["CounterParty"] = {**_party("counter party", ""), "Code": "0013505917"}
    document["Recipient"] = _party("Recipient", "")
    return document


def third_party_receipt(tin: str = SAMPLE_TIN) -> dict[str, Any]:
    """A receipt on behalf of third parties (11.5): no CounterParty, paid in cash."""
    line = _line(2862.0, 686.88, 1, Code="289406", MeasurementUnitCode=1)
    document = _day_document(
        "11.5", "0", "2400541242436642", "InternalDocumentId_12437442845", line, 3
    )
    document["InvoiceType"] = "Retail Sales Receipt on Behalf of Third Parties "
    document["Issuer"]["Vat"] = "EL" + tin
    return document


def uncorrelated_credit_note(tin: str = SAMPLE_TIN) -> dict[str, Any]:
    """An uncorrelated credit note (5.2) in camelCase, to a Greek business."""
    document = _day_document(
        "5.2", "01ΤΔ21", "2900729548", "pharma-5.2-2900729548", _line(250.0, 60.0, 1), 5
    )
    document["InvoiceType"] = "ΠΙΣΤΩΤΙΚΟ ΤΙΜΟΛΟΓΙΟ ΠΩΛΗΣΗΣ"
    document["Issuer"]["Vat"] = "EL" + tin
    document["CounterParty"] = {**_party("COMPANY A", "EL094019245"), "Code": "3000003083"}
    return camel(document)


def _exempt(net: float, code: int, text: str) -> dict[str, Any]:
    return _line(net, 0, 7, VatExcemptionCategory=text, VatExemptionCategoryCode=code)


#: The sales abroad, by type: series, number, internal id, net, exemption (its code and
#: article), payment method, the customer (name, VAT number, country, its name), camelCase.
_ABROAD: dict[str, tuple[Any, ...]] = {
    "1.2": ("B", "0000237191", "pharma-1.2-0000237191", 3548.88, 14, 28, 5,
            ("COMPANY CY", "CY10259033P", "CY", "CYPRUS"), True),
    "1.3": ("0", "790", "InternalDocumentId_12234374845", 10000, 8, 24, 5,
            ("counter party", "BG000000000", "GB", "UNITED KINGDOM"), False),
    "2.2": ("0", "89445654", "InternalDocumentId_12437344845", 1776.01, 14, 28, 5,
            ("counter party", "IT000000000", "IT", "ITALY"), False),
    "2.3": ("A", "0000011", "18200000246", 50500, 8, 24, 3,
            ("counter party", "GB", "GB", "UNITED KINGDOM"), True),
}  # fmt: skip


def abroad_invoice(code: str, tin: str = SAMPLE_TIN) -> dict[str, Any]:
    """A sale abroad (1.2, 1.3, 2.2, 2.3): one line at 0 % with its exemption."""
    series, number, internal, net, exemption, article, method, customer, cameled = _ABROAD[code]
    text = f"ΑΠΑΛΛΑΓΗ ΑΠΟ ΦΠΑ – ΑΡΘΡΟ {article} ΤΟΥ ΚΩΔΙΚΑ ΦΠΑ"
    line = _line(net, 0, 7, VatExcemptionCategory=text, VatExemptionCategoryCode=exemption)
    document = _day_document(code, series, number, internal, line, method)
    document["Issuer"]["Vat"] = "EL" + tin
    document["CounterParty"] = _abroad(*customer)
    return camel(document) if cameled else document


#: Every sample, by name: PascalCase and camelCase, prefixed and bare VAT numbers.
SAMPLES = {
    "retail receipt 11.1": retail_receipt,
    "sales invoice 1.1 (camelCase)": sales_invoice,
    "service invoice 2.1": service_invoice,
    "credit note 5.1 (camelCase)": credit_note,
    "service receipt 11.2 (camelCase)": service_receipt,
    "simplified invoice 11.3": simplified_invoice,
    "credit retail receipt 11.4": credit_receipt,
    "receipt on behalf of third parties 11.5": third_party_receipt,
    "uncorrelated credit note 5.2 (camelCase)": uncorrelated_credit_note,
    "intra-community sales invoice 1.2 (camelCase)": functools.partial(abroad_invoice, "1.2"),
    "third-country sales invoice 1.3": functools.partial(abroad_invoice, "1.3"),
    "intra-community service invoice 2.2": functools.partial(abroad_invoice, "2.2"),
    "third-country service invoice 2.3 (camelCase)": functools.partial(abroad_invoice, "2.3"),
}
