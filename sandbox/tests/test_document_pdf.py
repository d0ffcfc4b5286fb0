"""A document's public url and its PDF: ``GET {url}/pdf`` on the record's ``url``.

The record's ``url`` (``{domain}/v/{signature}``, the QR the receipt prints) is public:
anyone holding the paper receipt reads it, so it needs no credentials. By default the
sandbox writes its own address as the domain, so the url of every record it answers
serves that document's PDF.
"""

from __future__ import annotations

from daytools import Caller

from invoicing_sandbox import sample_invoice


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
