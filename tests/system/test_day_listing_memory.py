"""Listing a day of 10,000 documents keeps the client's memory flat.

``documents_issued`` holds one page at a time. The peak of memory allocated while a day
is listed (``tracemalloc``, started after the documents are held) is measured for a day
of 1,000 documents and for a day of 10,000, pages of 100 each, in one sandbox holding
both days: 9,000 more documents may not cost more than 1 MiB (about 110 bytes a document,
less than one record's JSON, let alone its parsed record), what the event loop's
cancelled timers and the HTTP stack's caches hold for a hundred more requests (asyncio
compacts them; they do not grow with the day). The documents are committed into the
sandbox directly (sending 11,000 would take minutes on a shared machine): the listing is
what is measured, over real HTTP.
"""

from __future__ import annotations

import datetime as dt
import gc
import tracemalloc

from sandboxtools import client_for

from invoicing_sandbox import Sandbox, sample_invoice
from invoicing_sandbox._provider import Submission
from invoicing_sandbox._wire import document_identity

SMALL_DAY = dt.date(2026, 11, 21)
BIG_DAY = dt.date(2026, 11, 22)


def hold(sb: Sandbox, day: dt.date, count: int) -> None:
    """``count`` documents issued on ``day``, committed as if they had been sent."""
    template = sample_invoice(1, issuer_vat=sb.client_id, lines=1, issued=day)
    noon = dt.datetime.combine(day, dt.time(12), dt.timezone.utc)
    for n in range(count):
        number = f"{day:%d}-{n}"
        document = {
            **template,
            "Number": number,
            "DistributionDetails": {"InternalDocumentId": f"{sb.client_id}-{number}"},
        }
        key = ("test", sb.client_id, document_identity(document))
        sb._provider.commit(Submission(key, document, b"", encrypted=False), noon)


async def peak_while_listing(client, day: dt.date) -> tuple[int, int]:
    """Documents listed on ``day`` (counted, not kept), and the peak allocated meanwhile."""
    gc.collect()
    tracemalloc.start()
    try:
        count = 0
        async for _record in client.documents_issued(None, day):
            count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, peak


async def test_listing_10000_documents_keeps_memory_flat():
    """1,000 and 10,000 documents listed, every one; the peak for 10,000 is within
    1 MiB of the peak for 1,000."""
    async with Sandbox(key_algorithm="cv25519", page_size=100) as sb:
        hold(sb, SMALL_DAY, 1_000)
        hold(sb, BIG_DAY, 10_000)
        async with client_for(sb) as client:
            await peak_while_listing(client, SMALL_DAY)  # warm: connections, token, imports
            small, small_peak = await peak_while_listing(client, SMALL_DAY)
            big, big_peak = await peak_while_listing(client, BIG_DAY)
    assert (small, big) == (1_000, 10_000)
    print(f"peak while listing: 1,000 documents {small_peak} B, 10,000 {big_peak} B")
    assert big_peak - small_peak < 1024 * 1024
