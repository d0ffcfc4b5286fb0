"""Receipt QR codes: every rendering decodes, with a real decoder, to the text given.

PNG images are read by zbar's ``zbarimg``; the SVG path and the terminal's half blocks
are turned back into the module matrix they draw, written as a PBM image and read by
``zbarimg`` too, so what a customer's phone scans is what the provider returned. The
offline QR url of a deferred sale is checked against the provider's documented form.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import urllib.parse

import pytest
from qrtools import decode, needs_zbar
from sandboxtools import client_for

from invoicing_async import DocumentResult, qr
from invoicing_sandbox import Sandbox, sample_invoice


def pbm(matrix: list[list[bool]], path, scale: int = 4) -> None:
    """Write a module matrix (True: dark) as a plain PBM image."""
    width = len(matrix[0]) * scale
    lines = ["P1", f"{width} {len(matrix) * scale}"]
    for row in matrix:
        line = " ".join("1" if dark else "0" for dark in row for _ in range(scale))
        lines += [line] * scale
    path.write_text("\n".join(lines) + "\n", encoding="ascii")


def svg_matrix(svg: str, border: int) -> list[list[bool]]:
    """The modules segno's SVG path draws: horizontal runs, absolute or relative moves."""
    match = re.search(r'd="([^"]+)"', svg)
    assert match is not None
    size = int(re.search(r'width="(\d+)"', svg).group(1))  # type: ignore[union-attr]
    scale = float(re.search(r"scale\(([\d.]+)\)", svg).group(1))  # type: ignore[union-attr]
    modules = round(size / scale)
    matrix = [[False] * modules for _ in range(modules)]
    x = y = 0.0
    for command, a, b in re.findall(r"([Mmh])(-?[\d.]+)(?:\s(-?[\d.]+))?", match.group(1)):
        if command == "M":
            x, y = float(a), float(b)
        elif command == "m":
            x, y = x + float(a), y + float(b)
        else:
            for column in range(int(x), int(x + float(a))):
                matrix[int(y)][column] = True
            x += float(a)
    assert all(not any(row) for row in matrix[:border])  # the quiet zone stays light
    return matrix


def text_matrix(text: str) -> list[list[bool]]:
    """The modules of the terminal rendering: two rows a line, light modules drawn."""
    top = {"█": True, "▀": True, "▄": False, " ": False}
    bottom = {"█": True, "▀": False, "▄": True, " ": False}
    matrix = []
    for line in text.splitlines():
        matrix.append([not top[c] for c in line])
        matrix.append([not bottom[c] for c in line])
    return matrix


@pytest.fixture(scope="module")
def record() -> DocumentResult:
    """A real record of the sandbox, with its qr_code_string."""
    import asyncio  # noqa: PLC0415

    async def submit() -> DocumentResult:
        async with Sandbox() as sb, client_for(sb) as client:
            return await client.submit_secure(sample_invoice(7))

    return asyncio.run(submit())


@needs_zbar
def test_png_decodes_to_the_records_qr_code_string(record, tmp_path):
    """render_png of a record is an image zbar reads as exactly its qr_code_string."""
    assert record.qr_code_string
    image = tmp_path / "receipt.png"
    image.write_bytes(qr.render_png(record, scale=3))
    assert image.read_bytes().startswith(b"\x89PNG")
    assert decode(image) == record.qr_code_string


@needs_zbar
def test_svg_decodes_to_the_text(record, tmp_path):
    """The SVG draws the modules that zbar reads back as the text."""
    svg = qr.render_svg(record.qr_code_string, scale=5, border=4)
    assert svg.startswith("<svg")
    pbm(svg_matrix(svg, border=4), tmp_path / "receipt.pbm")
    assert decode(tmp_path / "receipt.pbm") == record.qr_code_string


@needs_zbar
def test_terminal_text_decodes_to_the_text_non_ascii_included(tmp_path):
    """The terminal rendering (half blocks) holds the same code: non-ASCII text too."""
    text = "https://portal.invalid/TransmissionFailure?series=ΤΔΑ&number=60"
    pbm(text_matrix(qr.render_text(text, border=2)), tmp_path / "terminal.pbm")
    assert decode(tmp_path / "terminal.pbm") == text


def test_nothing_to_render_is_refused():
    """A record without qr_code_string, or empty text, is a ValueError, not a blank code."""
    with pytest.raises(ValueError, match="qr_code_string"):
        qr.render_png(DocumentResult())
    with pytest.raises(ValueError, match="empty"):
        qr.render_svg("")


def test_without_segno_rendering_says_what_to_install(monkeypatch):
    """Rendering without the qr extra names it; offline_qr_url needs no extra."""
    monkeypatch.setitem(sys.modules, "segno", None)
    with pytest.raises(ImportError, match=r"invoicing-async\[qr\]"):
        qr.render_text("x")
    assert qr.offline_qr_url(sample_invoice(1), portal_url="https://p.invalid", api_key="k")


# --- the offline QR url -------------------------------------------------------------------


def test_offline_qr_url_has_the_documented_fields_and_signature():
    """{portal}/TransmissionFailure with the documented fields in order, and a signature
    that is the hex SHA-1 of the documented text followed by the API key; the key itself
    is not in the url."""
    document = sample_invoice(3)
    url = qr.offline_qr_url(document, portal_url="https://portal.invalid/", api_key="KEY-42")
    head, _, query = url.partition("?")
    assert head == "https://portal.invalid/TransmissionFailure"
    fields = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
    assert list(fields) == [
        "issuerTin", "customerTin", "customerName", "invoiceType", "series", "number",
        "dateIssued", "totalAmount", "totalNetAmount", "totalVatAmount", "internalId",
        "signature",
    ]  # fmt: skip
    party, summaries = document["CounterParty"], document["Summaries"]
    assert fields["issuerTin"] == "EL" + document["Issuer"]["Vat"]  # Greece's VAT prefix
    assert fields["customerTin"] == "EL" + party["Vat"]
    assert fields["customerName"] == party["RegisteredName"]
    assert fields["invoiceType"] == "1.1"
    assert (fields["series"], fields["number"]) == ("A", "3")
    assert fields["dateIssued"] == "20261122000000"
    assert fields["totalAmount"] == f"{summaries['TotalGrossValue']:.2f}"
    assert fields["internalId"] == document["DistributionDetails"]["InternalDocumentId"]
    text = "-".join(
        fields[name]
        for name in ("issuerTin", "customerTin", "series", "number", "dateIssued", "totalAmount")
    )
    signed = f"{text}-{fields['internalId']}KEY-42"
    assert fields["signature"] == hashlib.sha1(signed.encode()).hexdigest()  # noqa: S324
    assert "KEY-42" not in url


def test_offline_qr_url_formats_dates_amounts_and_absent_customers():
    """A date-time keeps its time; whole amounts have no decimals; a B2C document's
    customer TIN is blank; a VAT number that has its prefix keeps it; JSON bytes work."""
    document = {
        "Issuer": {"Vat": "EL123456783"},
        "Series": "ΤΔΑ",
        "Number": 60,
        "DateIssued": "2022-12-31T14:30:59",
        "InvoiceType": "11.1",
        "Summaries": {"TotalGrossValue": 124, "TotalNetValue": 100.5, "TotalVatAmount": 23.5},
        "DistributionDetails": {"InternalDocumentId": "11.1_ΤΔΑ_60"},
    }
    url = qr.offline_qr_url(document, portal_url="https://p.invalid", api_key="k")
    fields = dict(urllib.parse.parse_qsl(url.partition("?")[2], keep_blank_values=True))
    assert fields["issuerTin"] == "EL123456783"
    assert (fields["customerTin"], fields["customerName"]) == ("", "")
    assert fields["dateIssued"] == "20221231143059"
    assert (fields["totalAmount"], fields["totalNetAmount"]) == ("124", "100.50")
    assert fields["series"] == "ΤΔΑ"
    raw = qr.offline_qr_url(
        __import__("json").dumps(document).encode(), portal_url="https://p.invalid", api_key="k"
    )
    assert raw == url


@pytest.mark.parametrize(
    ("field", "why"),
    [("Series", "Series"), ("DateIssued", "DateIssued"), ("Summaries", "TotalGrossValue")],
)
def test_offline_qr_url_needs_its_fields(field, why):
    """A document without a field the url needs is refused with that field's name."""
    document = sample_invoice(1)
    del document[field]
    with pytest.raises(ValueError, match=why):
        qr.offline_qr_url(document, portal_url="https://p.invalid", api_key="k")


# --- the command ------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoicing_async", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@needs_zbar
def test_the_qr_command_prints_or_writes_a_code(record, tmp_path):
    """`invoicing-async qr TEXT` prints the terminal code; --png/--svg write images that
    decode to TEXT; without TEXT or --key it is a usage error."""
    text = record.qr_code_string
    printed = _cli("qr", text)
    assert printed.returncode == 0, printed.stderr
    pbm(text_matrix(printed.stdout), tmp_path / "printed.pbm")
    assert decode(tmp_path / "printed.pbm") == text
    written = _cli("qr", text, "--png", str(tmp_path / "code.png"), "--scale", "3")
    assert written.returncode == 0, written.stderr
    assert decode(tmp_path / "code.png") == text
    assert _cli("qr", text, "--svg", str(tmp_path / "code.svg")).returncode == 0
    assert (tmp_path / "code.svg").read_text(encoding="utf-8").startswith("<svg")
    assert _cli("qr").returncode == 2
