"""No document is sent under an identity it does not have (issue 38, B).

A document holding a member twice with different values (``Series`` beside ``series``,
``InternalDocumentId`` beside ``internalDocumentId``, ``Summaries.TotalNetAmount`` 10
beside ``totalNetAmount`` 1000, or a name twice in a JSON text) is read by the provider
otherwise than by the library: the sandbox, binding as System.Text.Json does, commits it
under the other value, and no record then matches the identity the library gave it.
Over real HTTP, each way a document enters refuses it with AmbiguousDocumentError naming
both members, before any request: a single call, ``submit_many`` (the others sent), an
outbox's ``enqueue`` and the command's ``outbox enqueue``/``submit`` (by file, line and
field), a till's ``submit_or_defer``. The same member twice with the same value is sent.
"""

from __future__ import annotations

import json

import pytest
from sandboxtools import client_for, invoice, raw
from test_checked_entry import run

from invoicing_async import (
    AmbiguousDocumentError,
    Deferral,
    DocumentResult,
    OutcomeStatus,
    document_key,
)
from invoicing_async._doc.document import serialize_document
from invoicing_async.outbox import SqliteOutbox
from invoicing_sandbox import Sandbox


@pytest.fixture
async def sb():
    async with Sandbox(key_algorithm="cv25519") as sandbox:
        yield sandbox


def documents_sent(sb: Sandbox) -> int:
    return sum(r.path in ("/Invoice/secure", "/Invoice/json") for r in sb.requests)


def series_twice(sb: Sandbox, number: int) -> dict:
    document = invoice(sb, number)
    document["series"] = "B"  # beside "Series": "A"
    return document


def internal_id_twice(sb: Sandbox, number: int) -> dict:
    document = invoice(sb, number)
    document["DistributionDetails"]["internalDocumentId"] = f"other-{number}"
    return document


def summaries_twice(sb: Sandbox, number: int) -> dict:
    document = invoice(sb, number)
    document["Summaries"]["totalNetAmount"] = 1000
    return document


def named_twice_in_text(sb: Sandbox, number: int) -> bytes:
    body = serialize_document(invoice(sb, number))
    return body.replace(b'"Series":"A"', b'"Series":"A","Series":"B"')


def same_value_twice(sb: Sandbox, number: int) -> dict:
    document = invoice(sb, number)
    document["series"] = document["Series"]
    return document


AMBIGUOUS = {
    "the series": (series_twice, ("Series", "series")),
    "the internal document id": (
        internal_id_twice,
        ("DistributionDetails.InternalDocumentId", "DistributionDetails.internalDocumentId"),
    ),
    "a summary": (summaries_twice, ("Summaries.TotalNetAmount", "Summaries.totalNetAmount")),
    "a name twice in a JSON text": (named_twice_in_text, ("Series", "Series")),
}


async def _post(sb: Sandbox, body: bytes) -> tuple[int, dict]:
    async with client_for(sb) as client:
        token = await client.token()
    headers = {"Authorization": f"Bearer {token.value}", "APIKey": sb.client_secret}
    headers["Content-Type"] = "application/json"
    return await raw("POST", f"{sb.base_url}/Invoice/json", data=body, headers=headers)


async def test_the_sandbox_commits_it_under_the_other_value(sb):
    """What the library guards against: sent as it is (raw HTTP), the sandbox binds the
    last value read, as System.Text.Json does by default, and commits the document under
    an identity other than the one the library reads, with a record for that one."""
    document = series_twice(sb, 1)
    del document["DistributionDetails"]  # identified by issuer, series and number
    status, record = await _post(sb, json.dumps(document).encode())
    assert status == 201, record
    assert record["series"] == "B"
    assert document_key(document) == f"doc:{sb.client_id}/A/1"
    assert list(sb.committed) == [f"doc:{sb.client_id}/B/1"]


@pytest.mark.parametrize("case", sorted(AMBIGUOUS))
@pytest.mark.parametrize("encrypted", [True, False])
async def test_a_single_call_refuses_it_before_any_request(sb, case, encrypted):
    """submit_secure / submit_json raise AmbiguousDocumentError naming both members (no
    status: nothing sent); no document request reaches the sandbox. The same member twice
    with the same value is sent and accepted."""
    make, members = AMBIGUOUS[case]
    async with client_for(sb) as client:
        send = client.submit_secure if encrypted else client.submit_json
        with pytest.raises(AmbiguousDocumentError) as caught:
            await send(make(sb, 1))
        assert caught.value.status is None
        assert caught.value.members == (members,)
        assert documents_sent(sb) == 0
        assert isinstance(await send(same_value_twice(sb, 2)), DocumentResult)
    assert documents_sent(sb) == 1
    assert sb.commit_count == 1


async def test_a_batch_refuses_them_alone_and_sends_the_others(sb, tmp_path):
    """submit_many (with a ledger): each ambiguous document ends rejected with the typed
    error, no attempt, recorded; the others are sent and committed, the same value twice
    among them. Run again over the ledger, the refusals stand and nothing is re-sent."""
    documents = [
        invoice(sb, 1),
        *(make(sb, 10 + n) for n, (make, _) in enumerate(AMBIGUOUS.values())),
        same_value_twice(sb, 2),
    ]
    ledger = tmp_path / "batch.ledger"
    async with client_for(sb) as client:
        outcomes = await client.submit_many(documents, ledger=ledger)
        statuses = [o.status for o in outcomes]
        assert statuses == [
            OutcomeStatus.ACCEPTED,
            *[OutcomeStatus.REJECTED] * 4,
            OutcomeStatus.ACCEPTED,
        ]
        for outcome, (_, members) in zip(outcomes[1:5], AMBIGUOUS.values(), strict=True):
            assert isinstance(outcome.error, AmbiguousDocumentError)
            assert outcome.error.members == (members,)
            assert outcome.attempts == 0
        assert outcomes[1].key == document_key(documents[1])
        assert documents_sent(sb) == 2
        again = await client.submit_many(documents, ledger=ledger)
    assert [o.status for o in again] == statuses
    assert documents_sent(sb) == 2
    assert sb.commit_count == 2


async def test_an_outbox_enqueues_none_of_a_list_holding_one(sb, tmp_path):
    """enqueue (checked or not) raises AmbiguousDocumentError naming the document's
    position and both members: nothing is enqueued; without it the list is."""
    good = invoice(sb, 1)
    async with SqliteOutbox(tmp_path / "outbox.db") as outbox:
        for check in (False, True):
            for make, members in AMBIGUOUS.values():
                with pytest.raises(AmbiguousDocumentError) as caught:
                    await outbox.enqueue([good, make(sb, 2)], check=check)
                assert str(caught.value).startswith(f"document 1 is ambiguous: {members[1]}: ")
                assert caught.value.members == (members,)
                assert await outbox.counts() == {}
        keys = await outbox.enqueue([good, same_value_twice(sb, 2)], check=True)
        assert keys == [document_key(good), document_key(same_value_twice(sb, 2))]


async def test_a_till_refuses_the_sale_before_any_request_or_receipt(sb, tmp_path):
    """Deferral.submit_or_defer raises AmbiguousDocumentError before any request and
    before anything is stored (no receipt is printed for it); the same value twice is
    sold and answered by the provider."""
    path = tmp_path / "till.db"
    async with client_for(sb) as client, Deferral(client, path) as till:
        for make, members in AMBIGUOUS.values():
            with pytest.raises(AmbiguousDocumentError) as caught:
                await till.submit_or_defer(make(sb, 1))
            assert caught.value.members == (members,)
        assert documents_sent(sb) == 0
        assert (await till.refresh_backlog()).count == 0
        assert isinstance(await till.submit_or_defer(same_value_twice(sb, 2)), DocumentResult)
    assert sb.commit_count == 1


def jsonl(sb: Sandbox, path) -> str:
    """Four lines: valid, Series twice in two spellings, Series twice in the text, the
    same value twice."""
    lines = [
        json.dumps(invoice(sb, 1)),
        json.dumps(series_twice(sb, 2)),
        named_twice_in_text(sb, 3).decode(),
        json.dumps(same_value_twice(sb, 4)),
    ]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


async def test_a_stamp_that_writes_a_member_twice_never_costs_the_sale(sb, tmp_path):
    """The provider unreachable, a sale is stamped before it is deferred: a stamp that
    writes a member again in another spelling, with another value, is a hook that
    failed: the sale is kept as the till gave it (stamped by the library, never under
    the hook's ambiguous series), and its receipt says why the hook's document was not
    taken."""

    def stamp(document: dict) -> dict:
        return {**document, "series": "Z"}

    path = tmp_path / "till.db"
    async with client_for(sb) as client, Deferral(client, path, stamp=stamp) as till:
        await client.token()
        await sb.set_outage("refuse")
        receipt = await till.submit_or_defer(invoice(sb, 1))
        assert receipt.stamp_error is not None
        assert "series" in receipt.stamp_error
        assert "'Series'" in receipt.stamp_error
        assert (await till.refresh_backlog()).count == 1
    assert sb.commit_count == 0


async def test_outbox_enqueue_skips_them_naming_file_line_and_field(sb, tmp_path):
    """outbox enqueue (with --check or without): each ambiguous document named by file,
    line and field, nothing enqueued (exit 2); --skip-invalid enqueues the other two and
    says it skipped two (exit 1)."""
    name = jsonl(sb, tmp_path / "in.jsonl")
    ledger = str(tmp_path / "outbox.db")
    for check in (["--check"], []):
        status, _, err = await run(sb, "outbox", "enqueue", *check, name, "--ledger", ledger)
        assert status == 2, err
        assert f"{name}:2: series: is also written 'Series', with another value" in err
        assert f"{name}:3: Series: is written twice, with different values" in err
        assert "2 document(s) the provider would refuse: nothing was enqueued" in err
    async with SqliteOutbox(ledger) as outbox:
        assert await outbox.counts() == {}
    args = ("outbox", "enqueue", "--check", "--skip-invalid", name, "--ledger", ledger)
    status, _, err = await run(sb, *args)
    assert status == 1, err
    assert "enqueued 2 document(s), 2 skipped" in err
    async with SqliteOutbox(ledger) as outbox:
        assert sum((await outbox.counts()).values()) == 2
    assert documents_sent(sb) == 0


async def test_submit_records_them_rejected_and_sends_the_others(sb, tmp_path):
    """submit (with --check or without): a rejected record for each ambiguous line with
    the typed error and its members, no request for it; the two others are sent."""
    name = jsonl(sb, tmp_path / "in.jsonl")
    for check, sent in (([], 2), (["--check"], 4)):
        status, out, err = await run(sb, "submit", "--json", *check, name)
        assert status == 1, err
        records = sorted(map(json.loads, out.splitlines()), key=lambda r: r["source"]["line"])
        assert [r["status"] for r in records][1:3] == ["rejected", "rejected"]
        for record, members in zip(
            records[1:3], (["Series", "series"], ["Series", "Series"]), strict=True
        ):
            assert record["error"]["type"] == "AmbiguousDocumentError"
            assert record["error"]["members"] == [members]
        assert {records[0]["status"], records[3]["status"]} <= {"accepted", "duplicate"}
        assert documents_sent(sb) == sent  # the two others (again: 409, their records)
    assert sb.commit_count == 2
