"""A document marked ``checked`` where it enters an outbox or a deferred sale: refused
with its problems whatever the entry's own ``check`` says, and checked once."""

from __future__ import annotations

import pytest

from invoicing_async import (
    Deferral,
    DocumentResult,
    InvalidDocumentError,
    InvoicingClient,
    ProviderKey,
    document_key,
)
from invoicing_async._doc import checked as checked_module
from invoicing_async.documents import checked
from invoicing_async.outbox import SqliteOutbox
from invoicing_async.testing import MockTransport, Request, Response, respond, token_response
from invoicing_sandbox import cached_keypair, sample_invoice


def refused(number: int) -> dict:
    """A document whose first line's VAT is not its net at 24 %."""
    document = sample_invoice(number, lines=2)
    document["Details"][0]["VATTotal"] += 0.05
    return document


@pytest.fixture
def checks(monkeypatch) -> list[object]:
    """The documents the rules are run on, one entry a run."""
    runs: list[object] = []
    rules = checked_module.check_document

    def counted(document, **options):
        runs.append(document)
        return rules(document, **options)

    monkeypatch.setattr(checked_module, "check_document", counted)
    return runs


@pytest.mark.parametrize("check", [False, True])
async def test_an_outbox_refuses_a_checked_document_with_its_problems(tmp_path, check):
    """enqueue([..., checked(bad)]) raises InvalidDocumentError naming the document's
    position and carrying its problems, with check or without; nothing is enqueued."""
    async with SqliteOutbox(tmp_path / "outbox.db") as outbox:
        with pytest.raises(InvalidDocumentError) as caught:
            await outbox.enqueue([sample_invoice(1), checked(refused(2))], check=check)
        assert str(caught.value).startswith("the provider would refuse document 1: ")
        assert caught.value.problems[0].field == "Details[0].VATTotal"
        assert await outbox.counts() == {}


@pytest.mark.parametrize("check", [False, True])
async def test_an_outbox_checks_a_checked_document_once(tmp_path, checks, check):
    """A valid checked document is enqueued as its document, the rules run on it once."""
    document = sample_invoice(1)
    async with SqliteOutbox(tmp_path / "outbox.db") as outbox:
        assert await outbox.enqueue([checked(document)], check=check) == [document_key(document)]
    assert checks == [document]


async def test_a_deferred_sale_checks_a_checked_document_once(tmp_path, checks):
    """A sale marked checked is checked at the till, once, and sent."""
    document = sample_invoice(1)
    sent = []

    def provider(request: Request) -> Response:
        if request.path == "/oauth/token":
            return token_response()
        sent.append(request.path)
        return respond(200, {"mark": 400001000000001})

    key = ProviderKey.from_armored(cached_keypair("cv25519").public_armored)
    client = InvoicingClient(
        "https://provider.example", "094019245", "key", provider_key=key,
        transport=MockTransport(provider),
    )  # fmt: skip
    async with client, Deferral(client, tmp_path / "till.db", poll=0.1) as till:
        answer = await till.submit_or_defer(checked(document))
        assert isinstance(answer, DocumentResult)
    assert sent == ["/Invoice/secure"]
    assert checks == [document]
