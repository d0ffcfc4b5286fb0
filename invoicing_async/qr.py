"""QR codes for receipts: the provider's ``qrCodeString``, or the offline QR of a deferred sale.

A receipt prints the QR code of :attr:`DocumentResult.qr_code_string
<invoicing_async.DocumentResult.qr_code_string>` (the provider returns it with the mark,
and only then: keep it with the sale). A sale deferred while the provider is down
prints the provider's *offline QR* instead (:func:`offline_qr_url`), and the real one
when its mark arrives::

    from invoicing_async import qr

    svg = qr.render_svg(result)                   # a DocumentResult, or any text
    png = qr.render_png(receipt.offline_qr_url, scale=6)
    print(qr.render_text(result))                 # for a terminal

Rendering needs the ``qr`` extra (segno, pure Python, no dependency of its own):
``pip install 'invoicing-async[qr]'``. :func:`offline_qr_url` does not.

.. versionadded:: 0.3.0
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

from . import _models

if typing.TYPE_CHECKING:  # the module's namespace holds only its public names
    from collections.abc import Callable, Mapping
    from typing import Any

    import segno

    from ._models import DocumentResult

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

    The values are read from the document's provider fields: ``Issuer.Vat`` and
    ``CounterParty.Vat`` (with their country's VAT prefix, ``EL`` for ``GR``; the
    customer's is blank when absent), ``CounterParty.Name``, ``InvoiceType``,
    ``Series``, ``Number``, ``DateIssued`` (a date is midnight), ``Summaries.
    TotalGrossValue`` / ``TotalNetValue`` / ``TotalVatAmount`` (two decimals, none for a
    whole amount) and ``DistributionDetails.InternalDocumentId``.

    :param document: the document as stored (a mapping, or its JSON bytes).
    :param portal_url: the provider's portal, e.g. ``https://portal.example.com``.
    :param api_key: the API key the signature is keyed with.
    :raises ValueError: a field the url needs is missing or unreadable.
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
    issuer, party = _mapping(data, "Issuer"), _mapping(data, "CounterParty")
    summaries = _mapping(data, "Summaries")
    distribution = _mapping(data, "DistributionDetails")
    fields = {
        "issuerTin": _vat(issuer, required=True),
        "customerTin": _vat(party, required=False),
        "customerName": str(party.get("Name") or ""),
        "invoiceType": _required(data, "InvoiceType"),
        "series": _required(data, "Series"),
        "number": _required(data, "Number"),
        "dateIssued": _date(_required(data, "DateIssued")),
        "totalAmount": _amount(summaries, "TotalGrossValue"),
        "totalNetAmount": _amount(summaries, "TotalNetValue"),
        "totalVatAmount": _amount(summaries, "TotalVatAmount"),
        "internalId": _required(distribution, "InternalDocumentId"),
    }
    signed = "-".join(
        fields[name]
        for name in ("issuerTin", "customerTin", "series", "number", "dateIssued", "totalAmount")
    )
    fields["signature"] = sign(f"{signed}-{fields['internalId']}")
    query = urllib.parse.urlencode(fields, quote_via=urllib.parse.quote)
    return f"{portal_url.rstrip('/')}/TransmissionFailure?{query}"


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()  # noqa: S324  (the provider's algorithm)


def _mapping(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = data.get(name)
    return value if isinstance(value, collections.abc.Mapping) else {}


def _required(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name)
    if value is None or value == "":
        raise ValueError(f"the offline QR needs the document's {name}")
    return str(value)


def _vat(party: Mapping[str, Any], *, required: bool) -> str:
    vat = str(party.get("Vat") or "")
    if not vat:
        if required:
            raise ValueError("the offline QR needs the document's Issuer.Vat")
        return ""
    if vat[:2].isalpha():
        return vat
    country = str(party.get("Country") or "").upper()
    return _VAT_PREFIX.get(country, country) + vat


def _date(text: str) -> str:
    try:
        issued = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"DateIssued {text!r} is not an ISO 8601 date") from None
    return issued.strftime("%Y%m%d%H%M%S")


def _amount(summaries: Mapping[str, Any], name: str) -> str:
    value = summaries.get(name)
    try:
        amount = decimal.Decimal(str(value))
    except (decimal.InvalidOperation, ValueError):
        raise ValueError(f"the offline QR needs the document's Summaries.{name}") from None
    if not amount.is_finite():
        raise ValueError(f"Summaries.{name} is not a finite amount")
    if amount == amount.to_integral_value():
        return str(amount.quantize(decimal.Decimal(1)))
    return str(amount.quantize(decimal.Decimal("0.01"), rounding=decimal.ROUND_HALF_UP))
