"""A document's public url and its PDF: ``GET {url}/pdf`` on the record's ``url``.

The record's ``url`` (``{domain}/v/{signature}``, the QR the receipt prints) is public:
anyone holding the paper receipt reads it, so it needs no credentials. By default the
sandbox writes its own address as the domain, so the url of every record it answers
serves that document's PDF.
"""

from __future__ import annotations

import asyncio
import shutil

import pytest
from daytools import Caller

from invoicing_sandbox import Fault, Sandbox, sample_invoice


async def test_two_issuers_with_one_internal_id_get_two_public_urls(sb, caller):
    """Two issuers may number their documents alike (the same InternalDocumentId): each
    document still gets its own signature, url and uniqueId, so a public url names one
    document."""
    other_tin = "094019245"
    sb.add_client(sb.environments[0], other_tin, "another-api-key")
    first = sample_invoice(1, issuer_vat=sb.client_id, lines=1)
    second = sample_invoice(1, issuer_vat=other_tin, lines=1)
    for document in (first, second):
        document["DistributionDetails"]["InternalDocumentId"] = "INV-1"
    async with Caller(sb, tin=other_tin) as other:
        one = await caller.submit(first)
        two = await other.submit(second)
    assert one["url"] != two["url"]
    assert one["signature"] != two["signature"]
    assert one["uniqueId"] != two["uniqueId"]


def xref_is_sound(pdf: bytes) -> bool:
    """Whether the cross-reference table points at each object, as a reader looks."""
    tail = pdf.rpartition(b"startxref\n")[2]
    start = int(tail.split(b"\n")[0])
    if not pdf[start:].startswith(b"xref\n"):
        return False
    lines = pdf[start:].split(b"\n")
    count = int(lines[1].split()[1])
    entries = lines[3 : 2 + count]  # object 0 is the free one
    return all(
        pdf[int(entry.split()[0]) :].startswith(b"%d 0 obj" % number)
        for number, entry in enumerate(entries, 1)
    )


async def pdf_of(caller, url, method="GET"):
    return await caller.call(method, "", url=f"{url}/pdf", authenticate=False)


async def test_a_records_url_serves_its_pdf_without_credentials(sb, caller):
    """GET {url}/pdf with no token and no API key (a public url: the receipt's QR) answers
    a PDF of the document: application/pdf, a sound file naming its mark and number."""
    record = await caller.submit_sample(1)
    assert record["url"].startswith(f"{sb.base_url}/v/")
    answer = await pdf_of(caller, record["url"])
    assert answer.status == 200, answer.body
    assert answer.headers["Content-Type"] == "application/pdf"
    assert int(answer.headers["Content-Length"]) == len(answer.body)
    pdf = answer.body
    assert pdf.startswith(b"%PDF-1.4\n")
    assert pdf.endswith(b"%%EOF\n")
    assert xref_is_sound(pdf)
    assert b"(MARK %d)" % record["mark"] in pdf
    assert b"A/1" in pdf
    assert [r.path for r in sb.requests][-1].endswith("/pdf")
    assert sb.requests[-1].client_id is None  # read by anyone: nobody authenticated


@pytest.mark.skipif(shutil.which("gs") is None, reason="Ghostscript (gs) is not installed")
async def test_a_pdf_reader_reads_the_text(sb, caller, tmp_path):
    """Ghostscript opens the PDF without an error and finds its lines of text."""
    record = await caller.submit_sample(1)
    path = tmp_path / "document.pdf"
    path.write_bytes((await pdf_of(caller, record["url"])).body)
    done = await asyncio.create_subprocess_exec(
        "gs", "-q", "-dNOPAUSE", "-dBATCH", "-dSAFER", "-dPDFSTOPONERROR",
        "-sDEVICE=txtwrite", "-sOutputFile=-", str(path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await done.communicate()
    assert done.returncode == 0, err
    assert f"MARK {record['mark']}" in out.decode()


async def test_a_cancelled_documents_pdf_says_so(sb, caller):
    """The PDF of a cancelled document names its cancellation mark."""
    record = await caller.submit_sample(1)
    answer = await caller.call(
        "POST", "/Invoice/cancelDeliveryNote", params={"mark": str(record["mark"])}
    )
    cancellation = answer.json()["cancellationMark"]
    pdf = (await pdf_of(caller, record["url"])).body
    assert b"CANCELLED \\(cancellation mark %d\\)" % cancellation in pdf  # escaped


async def test_an_unknown_url_is_404_and_the_pdf_is_read_only(sb, caller):
    """Another signature, or the signature under another environment, is a 404; a POST is
    a 405."""
    record = await caller.submit_sample(1)
    signature = record["signature"]
    assert (await pdf_of(caller, f"{sb.base_url}/v/{'0' * 40}")).status == 404
    other = sb.environment(sb.environments[1]).base_url
    assert (await pdf_of(caller, f"{other}/v/{signature}")).status == 404
    posted = await pdf_of(caller, record["url"], method="POST")
    assert (posted.status, posted.headers["Allow"]) == (405, "GET")


async def test_the_pdf_takes_the_operations_faults(sb, caller):
    """A fault scripted for the operations meets the PDF's request too: a 503, then the
    PDF."""
    record = await caller.submit_sample(1)
    sb.script_operation(Fault.status(503, retry_after=0))
    assert (await pdf_of(caller, record["url"])).status == 503
    assert (await pdf_of(caller, record["url"])).status == 200


async def test_a_domain_given_is_written_as_it_is():
    """Sandbox(domain=...) writes that domain into records (a docker service name, say)."""
    sandbox = Sandbox(key_algorithm="cv25519", domain="https://shop.example/")
    async with sandbox as sb, Caller(sb) as caller:
        record = await caller.submit_sample(1)
    assert record["domain"] == "https://shop.example"
    assert record["url"] == f"https://shop.example/v/{record['signature']}"
