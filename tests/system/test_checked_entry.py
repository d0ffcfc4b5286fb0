"""Checked where documents enter: a batch's documents marked ``checked``, an outbox's
``enqueue(check=True)``, and the command's ``submit --check`` / ``outbox enqueue
--check``: a document the provider would refuse is refused before any request, with its
problems named (by file and line, from the command), and the others go on."""

from __future__ import annotations

import json

import pytest
from sandboxtools import client_for
from sandboxtools import run_command as run

from invoicing_async import InvalidDocumentError, OutcomeStatus, Submission, document_key
from invoicing_async.documents import checked
from invoicing_async.outbox import SqliteOutbox
from invoicing_sandbox import Sandbox, sample_invoice


@pytest.fixture
async def sb():
    async with Sandbox(key_algorithm="cv25519") as sandbox:
        yield sandbox


def three(sb: Sandbox) -> list[dict]:
    """A valid invoice, one whose first line's VAT is not at its rate (nor its total the
    summaries'), one with no Series."""
    good, rate, series = (sample_invoice(n, issuer_vat=sb.client_id, lines=2) for n in (1, 2, 3))
    rate["Details"][0]["VATTotal"] += 1
    del series["Series"]
    return [good, rate, series]


def documents_sent(sb: Sandbox) -> int:
    return sum(r.path in ("/Invoice/secure", "/Invoice/json") for r in sb.requests)


async def test_a_batch_of_checked_documents_refuses_the_bad_ones_before_any_request(sb):
    """map(checked, ...) in submit_many (a Submission's document too): each document the
    provider would refuse ends rejected with InvalidDocumentError (status None, its
    problems), never sent; the valid one is committed."""
    good, rate, series = three(sb)
    async with client_for(sb) as client:
        outcomes = await client.submit_many(
            map(checked, [good, rate, Submission(document=series, encrypted=False)])
        )
    assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED, *[OutcomeStatus.REJECTED] * 2]
    for outcome, field in zip(outcomes[1:], ("Details[0].VATTotal", "Series"), strict=True):
        assert isinstance(outcome.error, InvalidDocumentError)
        assert outcome.error.status is None
        assert outcome.error.problems[0].field == field
    assert outcomes[1].key == document_key(rate)
    assert documents_sent(sb) == 1
    assert sb.commit_count == 1


async def test_an_outbox_enqueues_nothing_of_a_list_with_a_refused_document(sb, tmp_path):
    """enqueue(check=True) raises InvalidDocumentError naming the document's position
    and its problems; nothing is enqueued. Without check the list is enqueued as it is."""
    good, rate, _series = three(sb)
    async with SqliteOutbox(tmp_path / "outbox.db") as outbox:
        with pytest.raises(InvalidDocumentError) as caught:
            await outbox.enqueue([good, rate], check=True)
        assert str(caught.value).startswith("the provider would refuse document 1: ")
        assert caught.value.problems[0].field == "Details[0].VATTotal"
        assert await outbox.counts() == {}
        assert await outbox.enqueue([good], check=True) == [document_key(good)]
        await outbox.enqueue([rate])
        assert sum((await outbox.counts()).values()) == 2


def jsonl(path, documents: list[dict]) -> str:
    path.write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    return str(path)


async def test_submit_check_reports_every_bad_document_by_line_and_field(sb, tmp_path):
    """submit --check: a problem line on stderr per problem (file:line: field: message),
    a rejected record for each refused document (its problems in it; records come as
    documents settle), the valid one sent; without --check all three are sent (the
    sandbox refuses two: 400)."""
    name = jsonl(tmp_path / "in.jsonl", three(sb))
    status, out, err = await run(sb, "submit", "--json", "--check", name)
    assert status == 1, err
    records = sorted(map(json.loads, out.splitlines()), key=lambda r: r["source"]["line"])
    assert [r["status"] for r in records] == ["accepted", "rejected", "rejected"]
    assert [r["source"]["line"] for r in records] == [1, 2, 3]
    assert records[1]["error"]["type"] == "InvalidDocumentError"
    assert records[1]["error"]["problems"][0]["field"] == "Details[0].VATTotal"
    assert f"{name}:2: Details[0].VATTotal: is not the net at the category's rate" in err
    assert f"{name}:3: Series: is required" in err
    assert documents_sent(sb) == 1
    status, out, _ = await run(sb, "submit", "--json", name)
    assert status == 1
    assert documents_sent(sb) == 1 + 3


async def test_outbox_enqueue_check_enqueues_none_of_a_file_with_errors_unless_told(sb, tmp_path):
    """outbox enqueue --check: every problem named by file and line, nothing enqueued
    (exit 2); --skip-invalid enqueues the valid document and says how many it skipped
    (exit 1)."""
    name = jsonl(tmp_path / "in.jsonl", three(sb))
    ledger = str(tmp_path / "outbox.db")
    status, _, err = await run(sb, "outbox", "enqueue", "--check", name, "--ledger", ledger)
    assert status == 2, err
    assert f"{name}:2: Details[0].VATTotal" in err
    assert f"{name}:3: Series: is required" in err
    assert "2 document(s) the provider would refuse: nothing was enqueued" in err
    async with SqliteOutbox(ledger) as outbox:
        assert await outbox.counts() == {}
    status, _, err = await run(sb, "outbox", "enqueue", "--skip-invalid", name, "--ledger", ledger)
    assert status == 1, err
    assert "enqueued 1 document(s), 2 skipped" in err
    async with SqliteOutbox(ledger) as outbox:
        assert sum((await outbox.counts()).values()) == 1
