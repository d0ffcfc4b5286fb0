"""A small, valid PDF of text lines, written by hand (no PDF library). Pure.

What the sandbox answers for a document's ``{url}/pdf``: one A4 page in Helvetica
(a standard font every reader has), the lines top to bottom. The file is PDF 1.4 as
ISO 32000-1 lays it out: a header, five numbered objects (catalog, page tree, page,
font, content stream), a cross-reference table of their byte offsets and a trailer.
Text is written in WinAnsiEncoding: a character it lacks (Greek letters) becomes ``?``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["text_pdf"]

_TOP, _LEFT, _LEADING, _SIZE = 800, 56, 16, 11
#: Lines a page holds from the top margin to the bottom one.
_MAX_LINES = (_TOP - 56) // _LEADING


def _text(line: str) -> bytes:
    r"""``line`` as a PDF string: WinAnsi bytes, with ``\``, ``(`` and ``)`` escaped."""
    raw = line.replace("\r", " ").replace("\n", " ").encode("cp1252", "replace")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def text_pdf(lines: Iterable[str]) -> bytes:
    """One page showing ``lines`` (as many as it holds), as the bytes of a PDF file."""
    shown = list(lines)[:_MAX_LINES]
    content = b"BT /F1 %d Tf %d TL %d %d Td\n" % (_SIZE, _LEADING, _LEFT, _TOP)
    content += b"".join(_text(line) + b" Tj T*\n" for line in shown) + b"ET\n"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>"
        ),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Length %d >>\nstream\n%sendstream" % (len(content), content),
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")  # binary bytes: a binary file
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)
