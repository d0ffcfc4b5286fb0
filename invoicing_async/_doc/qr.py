"""QR codes for receipts: the provider's ``qrCodeString``, or the offline QR of a deferred sale.

The body of :mod:`invoicing_async.qr` (the guide to it is that face's docstring).
"""

from __future__ import annotations

import collections.abc
import datetime as dt
import decimal
import hashlib
import io
import json
import typing
import urllib.parse

from invoicing_async._core import models as _models
from invoicing_async._doc import fields as _fields

if typing.TYPE_CHECKING:  # the module's namespace holds only its public names
    from collections.abc import Callable, Mapping
    from typing import Any

    import segno

    from invoicing_async._core.models import DocumentResult

__all__ = ["offline_qr_url", "render_png", "render_svg", "render_text"]

#: The error correction level of every code: ``M`` (15 %), what receipt printers use.
_ERROR = "m"
#: VAT number prefixes that differ from the ISO country code (Greece: ``EL``).
_VAT_PREFIX = {"GR": "EL"}


def _code(data: str | DocumentResult) -> segno.QRCode:
    if isinstance(data, _models.DocumentResult):
        if not data.qr_code_string:
            raise ValueError("the record has no qr_code_string to render")
        data = data.qr_code_string
    if not data:
        raise ValueError("nothing to render: the QR text is empty")
    try:
        import segno  # noqa: PLC0415  (optional: the ``qr`` extra)
    except ImportError:
        raise ImportError(
            "rendering QR codes needs segno: pip install 'invoicing-async[qr]'"
        ) from None
    # UTF-8 in byte mode, what phones expect: left to choose, segno would write text
    # that Shift JIS can hold (Greek capitals) in Kanji mode.
    return segno.make(data, error=_ERROR, encoding="utf-8", micro=False)


def render_svg(data: str | DocumentResult, *, scale: int = 4, border: int = 4) -> str:
    """The QR code of ``data`` (a text, or a record's ``qr_code_string``) as SVG markup.

    :param scale: size of one module (a black or white square) in SVG units.
    :param border: quiet zone around the code, in modules (4 is the standard's minimum).
    :raises ValueError: there is no text to render.
    :raises ImportError: segno is not installed (the ``qr`` extra).
    """
    out = io.BytesIO()
    _code(data).save(out, kind="svg", scale=scale, border=border, xmldecl=False)
    return out.getvalue().decode("utf-8")


def render_png(data: str | DocumentResult, *, scale: int = 4, border: int = 4) -> bytes:
    """The QR code of ``data`` as a PNG image (black on white), ``scale`` pixels a module.

    See :func:`render_svg` for the parameters.
    """
    out = io.BytesIO()
    _code(data).save(out, kind="png", scale=scale, border=border)
    return out.getvalue()


def render_text(data: str | DocumentResult, *, border: int = 2) -> str:
    """The QR code of ``data`` as text for a terminal: two modules per character line.

    Unicode half blocks, light modules drawn (for a dark terminal background).
    """
    out = io.StringIO()
    _code(data).terminal(out=out, border=border, compact=True)
    return out.getvalue()


def offline_qr_url(
    document: Mapping[str, Any] | bytes | str, *, portal_url: str, api_key: str
) -> str:
    """The provider's offline QR url of a document it has not registered yet.

    ``{portal_url}/TransmissionFailure?issuerTin=…&customerTin=…&customerName=…
    &invoiceType=…&series=…&number=…&dateIssued=yyyyMMddHHmmss&totalAmount=…
    &totalNetAmount=…&totalVatAmount=…&internalId=…&signature=…``, where ``signature``
    is the hex SHA-1 of the UTF-8 text
    ``{issuerTin}-{customerTin}-{series}-{number}-{dateIssued}-{totalAmount}-{internalId}{api_key}``:
    the portal can tell the receipt is genuine, and the API key itself is never written.

    The values are read from the document's provider fields, as the provider reads them
    (names in any case, amounts as numbers or numeric text): ``Issuer.Vat`` and
    ``CounterParty.Vat`` (with their country's VAT prefix: ``EL`` for the issuer, and
    for a customer whose ``CountryCode`` is ``GR``; the customer's is blank when
    absent), ``CounterParty.RegisteredName`` (or ``Name``), ``InvoiceTypeCode`` (or
    ``InvoiceType``), ``Series``, ``Number``, ``DateIssued`` (a date is midnight),
    ``Summaries.TotalGrossValue`` / ``TotalNetAmount`` (or ``TotalNetValue``) /
    ``TotalVATAmount`` (two decimals, none for a whole amount) and
    ``DistributionDetails.InternalDocumentId``.

    :param document: the document as stored (a mapping, or its JSON bytes).
    :param portal_url: the provider's portal, e.g. ``https://portal.example.com``.
    :param api_key: the API key the signature is keyed with.
    :raises ValueError: a field the url needs is missing or unreadable.

    .. versionchanged:: 0.5.0 names in any case; the provider's names
       (``InvoiceTypeCode``, ``TotalNetAmount``, ``RegisteredName``) first; the issuer's
       TIN always with ``EL``.
    """
    return _signed_url(document, portal_url, lambda text: _sha1(text + api_key))


def _signed_url(
    document: Mapping[str, Any] | bytes | str, portal_url: str, sign: Callable[[str], str]
) -> str:
    """:func:`offline_qr_url` with the signature made by ``sign(text)``.

    ``text`` is without the API key: a client signs with its own key, which its
    deferral never holds.
    """
    data = json.loads(document) if isinstance(document, (bytes, str)) else document
    if not isinstance(data, collections.abc.Mapping):
        raise ValueError("the document is not a JSON object")  # noqa: TRY004  (data, not type)
    # Read as the provider reads (_fields): names in any case, numbers as text or not.
    issuer, party = _mapping(data, "Issuer"), _mapping(data, "CounterParty")
    summaries = _mapping(data, "Summaries")
    distribution = _mapping(data, "DistributionDetails")
    fields = {
        "issuerTin": _vat(issuer, required=True),
        "customerTin": _vat(party, required=False),
        "customerName": str(_fields.first(party, _NAMES) or ""),
        "invoiceType": _required(data, _TYPES),
        "series": _required(data, ("Series",)),
        "number": _required(data, ("Number",)),
        "dateIssued": _date(_required(data, ("DateIssued",))),
        "totalAmount": _amount(summaries, _GROSS),
        "totalNetAmount": _amount(summaries, _NET),
        "totalVatAmount": _amount(summaries, _VAT),
        "internalId": _required(distribution, ("InternalDocumentId",)),
    }
    signed = "-".join(
        fields[name]
        for name in ("issuerTin", "customerTin", "series", "number", "dateIssued", "totalAmount")
    )
    fields["signature"] = sign(f"{signed}-{fields['internalId']}")
    query = urllib.parse.urlencode(fields, quote_via=urllib.parse.quote)
    return f"{portal_url.rstrip('/')}/TransmissionFailure?{query}"


#: Each value and the names it is read from, the provider's own first (see
#: ``docs/guides/documents.rst``): the type's code is ``InvoiceTypeCode`` (older documents
#: hold it in ``InvoiceType``), the net total ``TotalNetAmount`` (myDATA's name
#: ``TotalNetValue`` is read too), a party's name ``RegisteredName`` (or ``Name``).
_TYPES = ("InvoiceTypeCode", "InvoiceType")
_NAMES = ("RegisteredName", "Name")
_GROSS = ("TotalGrossValue",)
_NET = ("TotalNetAmount", "TotalNetValue")
_VAT = ("TotalVATAmount",)


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()  # noqa: S324  (the provider's algorithm)


def _mapping(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = _fields.field(data, name)
    return value if isinstance(value, collections.abc.Mapping) else {}


def _required(data: Mapping[str, Any], names: tuple[str, ...]) -> str:
    value = _fields.first(data, names)
    if value is None or value == "":
        raise ValueError(f"the offline QR needs the document's {names[0]}")
    return str(value)


def _vat(party: Mapping[str, Any], *, required: bool) -> str:
    """A party's VAT number with its country's prefix (``EL`` for Greece).

    The issuer's is always Greek (the provider's documents are the Greek tax
    platform's): its TIN gets ``EL``, written with the prefix or not. A customer's gets
    the prefix of its ``CountryCode`` (the party's own, or its address's).
    """
    text = str(_fields.field(party, "Vat") or "").strip()
    if not text:
        if required:
            raise ValueError("the offline QR needs the document's Issuer.Vat")
        return ""
    if required:
        digits = _fields.tin(text) or text
        return "EL" + digits if digits.isdigit() else text
    if text[:2].isalpha():
        return text
    address = _mapping(party, "Address")
    country = str(
        _fields.first(party, ("CountryCode", "Country"))
        or _fields.field(address, "CountryCode")
        or ""
    ).upper()
    return _VAT_PREFIX.get(country, country) + text


def _date(text: str) -> str:
    try:
        issued = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"DateIssued {text!r} is not an ISO 8601 date") from None
    return issued.strftime("%Y%m%d%H%M%S")


def _amount(summaries: Mapping[str, Any], names: tuple[str, ...]) -> str:
    amount = _fields.number(_fields.first(summaries, names))
    if amount is None:
        raise ValueError(f"the offline QR needs the document's Summaries.{names[0]}")
    if amount == amount.to_integral_value():
        return str(amount.quantize(decimal.Decimal(1)))
    return str(amount.quantize(decimal.Decimal("0.01"), rounding=decimal.ROUND_HALF_UP))
