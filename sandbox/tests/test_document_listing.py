"""Listing issued documents: ``GET /api/invoice/getdocuments/{IssuerVatNumber}/{PageNumber}/``.

The provider's page "Retrieving a document"
(https://developers.s1ecos.com/retrieving-a-document-869812m0) and the design guide
§12: ``From=YYYYMMDD`` and ``dateTo=YYYYMMDD``, a JSON array a page at a time, the next
page named by a ``NextPage`` response header. Pages hold ``page_size`` documents here
(2), so that a handful of documents make several pages.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pytest
from daytools import Caller

from invoicing_sandbox import sample_invoice

NOVEMBER = {"From": "20261101", "dateTo": "20261130"}


@pytest.fixture
def sandbox_options():
    return {"page_size": 2}


def listing(tin, page="1"):
    return f"/api/invoice/getdocuments/{tin}/{page}/"


async def submit_days(caller, days):
    """One document issued on each of ``days`` of November 2026; their records."""
    records = []
    for number, day in enumerate(days, 1):
        issued = dt.date(2026, 11, day)
        document = sample_invoice(number, issuer_vat=caller.tin, lines=1, issued=issued)
        records.append(await caller.submit(document))
    return records


async def test_pages_lead_on_by_next_page_until_the_last(sb, caller):
    """Five documents at two a page: pages 1 and 2 name the next page, page 3 (one
    document) has no NextPage; together they are every document once, in the order of
    their marks, each its record as answered with its type."""
    records = await submit_days(caller, [1, 5, 9, 13, 17])
    seen, page, headers = [], "1", []
    while page:
        answer = await caller.call("GET", listing(caller.tin, page), params=NOVEMBER)
        assert answer.status == 200, answer.body
        seen += answer.json()
        page = answer.headers.get("NextPage", "")
        headers.append(page)
    assert headers == ["2", "3", ""]
    assert [entry["mark"] for entry in seen] == [record["mark"] for record in records]
    for entry, record in zip(seen, records, strict=True):
        assert entry == {**record, "invoiceTypeCode": "1.1"}


async def test_both_days_bound_the_listing(sb, caller):
    """From and dateTo are both included; a document's day is its DateIssued."""
    records = await submit_days(caller, [20, 21, 22])
    answer = await caller.call(
        "GET", listing(caller.tin), params={"From": "20261121", "dateTo": "20261121"}
    )
    assert [entry["mark"] for entry in answer.json()] == [records[1]["mark"]]
    answer = await caller.call(
        "GET", listing(caller.tin), params={"From": "20261121", "dateTo": "20261122"}
    )
    assert [entry["mark"] for entry in answer.json()] == [r["mark"] for r in records[1:]]


@pytest.mark.parametrize("page", ["4", "99", "2147483647"])
async def test_a_page_past_the_last_is_empty(sb, caller, page):
    """A page past the last (up to the largest page number) is an empty array, without
    NextPage."""
    await submit_days(caller, [1, 2, 3])
    answer = await caller.call("GET", listing(caller.tin, page), params=NOVEMBER)
    assert (answer.status, answer.json()) == (200, [])
    assert "NextPage" not in answer.headers


async def test_cancellations_and_credits_are_listed_as_they_stand(sb, caller):
    """A cancelled document is listed with its cancellation mark; a credit is listed as
    the document it is (5.1), under its own mark, on the day it was issued."""
    cancelled, credited = await submit_days(caller, [22, 22])
    answer = await caller.call(
        "POST", "/Invoice/cancelDeliveryNote", params={"mark": str(cancelled["mark"])}
    )
    cancellation = answer.json()["cancellationMark"]
    credit = {
        "issuerTin": caller.tin,
        "authenticationCode": credited["authenticationCode"],
        "mark": credited["mark"],
        "series": "CR",
        "number": "1",
        "internalId": "CR-1",
        "relateCredit": True,
        "preventDocumentMapping": False,
    }
    assert (await caller.call("POST", "/Invoice/credit", json=credit)).status == 200
    today = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d")
    query = {"From": min(today, "20261101"), "dateTo": max(today, "20261130")}
    seen, page = [], "1"
    while page:
        answer = await caller.call("GET", listing(caller.tin, page), params=query)
        seen += answer.json()
        page = answer.headers.get("NextPage", "")
    by_mark = {entry["mark"]: entry for entry in seen}
    assert by_mark[cancelled["mark"]]["cancellationMark"] == cancellation
    assert by_mark[credited["mark"]]["cancellationMark"] is None
    assert by_mark[sb.credits[0].mark]["invoiceTypeCode"] == "5.1"
    assert len(seen) == 3


async def test_the_vat_number_is_the_clients_with_or_without_el(sb, caller):
    """The path's VAT number with EL is the same issuer; another issuer's is 401 (and
    lists nothing of theirs); the trailing slash may be left out."""
    await submit_days(caller, [1])
    with_el = await caller.call("GET", listing(f"EL{caller.tin}"), params=NOVEMBER)
    assert (with_el.status, len(with_el.json())) == (200, 1)
    bare = await caller.call("GET", f"/api/invoice/getdocuments/{caller.tin}/1", params=NOVEMBER)
    assert bare.json() == with_el.json()
    sb.add_client(sb.environments[0], "094019245", "another-api-key")
    async with Caller(sb, tin="094019245") as other:
        await submit_days(other, [1])
    theirs = await caller.call("GET", listing("094019245"), params=NOVEMBER)
    assert theirs.status == 401
    assert b"094019245-A-1" not in theirs.body


@pytest.mark.parametrize(
    ("query", "fields"),
    [
        ({"From": "20260230", "dateTo": "20260301"}, ["From"]),
        ({"From": "2026-11-01", "dateTo": "20261130"}, ["From"]),
        ({"From": "20261101", "dateTo": "2026113"}, ["dateTo"]),
        (
            {"From": "\uff12\uff10\uff12\uff16\uff11\uff11\uff10\uff11", "dateTo": "20261130"},
            ["From"],
        ),
        ({"From": "20261130", "dateTo": "20261101"}, ["dateTo"]),
        ({"dateTo": "20261130"}, ["From"]),
        ({}, ["From", "dateTo"]),
        ({"From": "", "dateTo": "x" * 5_000}, ["From", "dateTo"]),
    ],
)
async def test_bad_dates_are_named(sb, caller, query, fields):
    """Dates that are not YYYYMMDD of a real day, absent ones, and dateTo before From:
    a 400 naming each."""
    answer = await caller.call("GET", listing(caller.tin), params=query)
    assert answer.status == 400, answer.body
    assert [e["field"] for e in answer.json()["errors"]] == fields


@pytest.mark.parametrize("page", ["0", "-1", "abc", "1.5", "2147483648", "9" * 30, "\u0661"])
async def test_a_page_number_out_of_range_is_named(sb, caller, page):
    """The page number is an integer from 1 to 2147483647: anything else is a 400."""
    answer = await caller.call("GET", listing(caller.tin, page), params=NOVEMBER)
    assert answer.status == 400, answer.body
    assert [e["field"] for e in answer.json()["errors"]] == ["PageNumber"]


async def test_a_page_number_of_a_million_digits_is_refused_and_the_sandbox_goes_on(sb, caller):
    """A request line of a million digits is refused at once (a 4xx, by the HTTP parser),
    in time linear in its size; the next request is served."""
    path = f"/{sb.environments[0]}{listing(caller.tin, '7' * 1_000_000)}"
    reader, writer = await asyncio.open_connection("127.0.0.1", sb.port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 30)
    except ConnectionError:
        status_line = b"HTTP/1.1 400 closed"
    finally:
        writer.close()
    assert status_line.split()[1].startswith(b"4")
    answer = await caller.call("GET", listing(caller.tin), params=NOVEMBER)
    assert (answer.status, json.loads(answer.body)) == (200, [])
