"""A till never loses a sale to its own hook: the library stamps, the hook is optional.

A sale deferred before any of its requests could have reached the provider is a document
issued during a loss of connection: the library writes the provider's mark for it
(``TransmissionFailure: 1``) into a dict and a typed document alike, with or without a
``stamp`` hook. The hook is given the sale as the till gave it and returns the document
to store; one that raises, or returns what cannot stand for the sale (no document,
another identity, a document the provider would refuse), never costs the sale: it is
stored durably without the hook's changes (the mark still written), the hook's failure
logged and kept with the deferral, in the receipt and, read back from the outbox, in the
outcome the drainer delivers. Over real HTTP to the sandbox (its outage switch).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from typing import Any

import attrs
import pytest
from sandboxtools import Outcomes, client_for, invoice

from invoicing_async import Deferral, DeferredReceipt, OutcomeStatus, RetryPolicy, document_key
from invoicing_async.documents import RetailReceipt, from_json, to_json
from invoicing_async.outbox import PostgresOutbox
from invoicing_sandbox import Sandbox

#: The drainer, fast: probes 20 ms apart at first, the outbox looked at every 0.1 s.
FAST: dict[str, Any] = {
    "probe_delay": 0.02,
    "probe_max_delay": 0.1,
    "poll": 0.1,
    "retry": RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02, attempt_timeout=5.0),
}
MARK = {"TransmissionFailure": 1}


@pytest.fixture
async def sb():
    async with Sandbox() as sandbox:
        yield sandbox


def receipt(sb: Sandbox, number: int) -> RetailReceipt:
    """A till's typed sale of the sandbox's issuer: its sample invoice as a receipt."""
    return from_json({**invoice(sb, number), "InvoiceTypeCode": "11.1"}, RetailReceipt)


def json_of(document: Any) -> dict[str, Any]:
    """The provider's JSON of a dict or a typed document."""
    return to_json(document) if isinstance(document, RetailReceipt) else dict(document)


def stored(path, key: str) -> dict[str, Any]:
    """The document the till's outbox holds for ``key`` (what the drainer sends)."""
    with sqlite3.connect(path) as connection:
        row = connection.execute("SELECT document FROM entries WHERE key = ?", (key,)).fetchone()
    connection.close()
    return json.loads(row[0])


async def defer_refused(sb: Sandbox, client, till: Deferral, document: Any) -> DeferredReceipt:
    """Sell ``document`` while the provider refuses connections: deferred at once."""
    await client.token()
    await sb.set_outage("refuse")
    answer = await till.submit_or_defer(document)
    assert isinstance(answer, DeferredReceipt)
    return answer


@pytest.mark.parametrize("kind", ["typed", "dict"])
async def test_a_sale_that_never_left_is_stamped_by_the_library_without_a_hook(sb, tmp_path, kind):
    """No hook: a typed receipt and a dict, deferred while the provider refuses
    connections, are stored and committed with the provider's mark for a loss of
    connection, once; the receipt says the sale was stamped."""
    path = tmp_path / "till.db"
    sale = receipt(sb, 1) if kind == "typed" else invoice(sb, 1)
    key = document_key(sale)
    outcomes = Outcomes()
    async with (
        client_for(sb) as client,
        Deferral(client, path, on_outcome=outcomes, **FAST) as till,
    ):
        answer = await defer_refused(sb, client, till, sale)
        assert (answer.key, answer.maybe_sent, answer.stamped) == (key, False, True)
        assert answer.stamp_error is None
        assert stored(path, key) == {**json_of(sale), **MARK}
        await sb.set_outage(None)
        delivered = (await outcomes.wait(1))[answer.key]
    assert delivered.outcome.status is OutcomeStatus.ACCEPTED
    held = sb.committed[key]
    assert held.document == {**json_of(sale), **MARK}
    assert held.commits == 1


async def test_the_hook_gets_the_sale_as_given_and_the_library_marks_what_it_returns(sb, tmp_path):
    """A typed sale's hook receives the typed document and may return a changed copy;
    the mark is written into what it returns, and the provider holds exactly that."""
    path = tmp_path / "till.db"
    sale = receipt(sb, 2)
    given: list[Any] = []

    def note(document: RetailReceipt) -> RetailReceipt:
        given.append(document)
        return attrs.evolve(document, extra={**document.extra, "PosId": "7"})

    outcomes = Outcomes()
    async with (
        client_for(sb) as client,
        Deferral(client, path, stamp=note, on_outcome=outcomes, **FAST) as till,
    ):
        answer = await defer_refused(sb, client, till, sale)
        assert (answer.stamped, answer.stamp_error) == (True, None)
        await sb.set_outage(None)
        await outcomes.wait(1)
    assert given == [sale]
    assert isinstance(given[0], RetailReceipt)
    assert sb.committed[answer.key].document == {**to_json(sale), "PosId": "7", **MARK}


def raises(document: Any) -> Any:
    """A hook with a bug: the docs' former dict hook, given a typed document."""
    return {**document, "TransmissionFailure": 1}


async def returns_later(document: Any) -> Any:
    """An async function given as the hook: it returns a coroutine, not a document."""
    return document


@pytest.mark.parametrize(
    ("hook", "says"),
    [
        (raises, "raised TypeError: 'RetailReceipt' object is not a mapping"),
        (lambda _: None, "returned NoneType, not a document"),
        (lambda document: [document], "returned list, not a document"),
        (returns_later, "returned a coroutine"),
        (lambda document: attrs.evolve(document, number=99), "identity"),
        (lambda document: attrs.evolve(document, lines=[]), "the provider would refuse"),
    ],
    ids=["raises", "none", "list", "coroutine", "identity", "refused"],
)
async def test_a_hook_that_fails_never_costs_the_sale(sb, tmp_path, caplog, hook, says):
    """The hook raises, or returns no document, a coroutine, another sale, or one the
    provider would refuse: the sale is still durable before the receipt, stored as the
    till gave it with the library's mark, the hook's failure logged (ERROR) and kept
    with the deferral; the drainer commits it once, and the outcome it delivers (read
    back from the outbox) says the hook failed too."""
    path = tmp_path / "till.db"
    sale = receipt(sb, 3)
    key = document_key(sale)
    outcomes = Outcomes()
    caplog.set_level(logging.INFO, logger="invoicing_async")
    async with (
        client_for(sb) as client,
        Deferral(client, path, stamp=hook, on_outcome=outcomes, **FAST) as till,
    ):
        answer = await defer_refused(sb, client, till, sale)
        assert answer.key == key
        assert answer.stamped  # the library's mark: the hook's changes are missing
        assert answer.stamp_error is not None
        assert answer.stamp_error.startswith("the stamp hook ")
        assert says in answer.stamp_error
        assert stored(path, key) == {**to_json(sale), **MARK}
        [logged] = [
            r for r in caplog.records if r.levelno == logging.ERROR and "stamp hook" in r.message
        ]
        assert logged.name == "invoicing_async.deferral"
        assert key in logged.message
        await sb.set_outage(None)
        delivered = (await outcomes.wait(1))[answer.key]
    assert delivered.outcome.status is OutcomeStatus.ACCEPTED
    assert delivered.receipt == answer  # as stored: the hook's failure included
    held = sb.committed[key]
    assert held.document == {**to_json(sale), **MARK}
    assert held.commits == 1


async def test_a_mark_the_sale_carries_is_kept_and_the_mark_can_be_turned_off(sb, tmp_path):
    """A sale that carries the mark already (in any spelling: the provider reads names
    in any case) keeps it as it is, never in two spellings; ``transmission_failure=False``
    stores a sale as given."""
    path = tmp_path / "till.db"
    own = {**invoice(sb, 4), "transmissionFailure": 3}
    plain = invoice(sb, 5)
    async with client_for(sb) as client:
        async with Deferral(client, path, **FAST) as till:
            first = await defer_refused(sb, client, till, own)
        async with Deferral(client, path, transmission_failure=False, **FAST) as till:
            second = await till.submit_or_defer(plain)
    assert isinstance(second, DeferredReceipt)
    assert (first.stamped, second.stamped) == (False, False)
    assert stored(path, first.key) == own
    assert stored(path, second.key) == plain


async def test_a_hook_failure_is_kept_by_a_postgres_outbox(sb, postgres_dsn):
    """A fleet's outbox stores the hook's failure with the deferral, and reads it back."""
    sale = invoice(sb, 6)
    outcomes = Outcomes()

    def broken(document: dict) -> dict:
        raise RuntimeError("the receipt printer is offline")

    async with (
        client_for(sb) as client,
        Deferral(
            client, PostgresOutbox(postgres_dsn), stamp=broken, on_outcome=outcomes, **FAST
        ) as till,
    ):
        answer = await defer_refused(sb, client, till, sale)
        assert answer.stamp_error == (
            "the stamp hook raised RuntimeError: the receipt printer is offline"
        )
        await sb.set_outage(None)
        delivered = (await outcomes.wait(1))[answer.key]
    assert delivered.receipt == answer
    assert sb.committed[answer.key].document == {**sale, **MARK}
