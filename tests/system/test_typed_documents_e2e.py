"""A typed document goes wherever a dict goes: every document method of the client, the
pool and their blocking twins, a Submission, a deferred sale and an outbox, over real
HTTP to the sandbox, which holds exactly the document's JSON."""

from __future__ import annotations

import asyncio

import attrs
import pytest
from sandboxtools import client_for

from invoicing_async import (
    Deferral,
    DeferredReceipt,
    IssuerPool,
    OutcomeStatus,
    Submission,
    document_key,
)
from invoicing_async.blocking import BlockingClient, BlockingPool
from invoicing_async.documents import (
    Address,
    CreditReceipt,
    IntraEUSalesInvoice,
    IntraEUServiceInvoice,
    Line,
    Party,
    PaymentMethod,
    RetailReceipt,
    SalesInvoice,
    ServiceReceipt,
    SimplifiedInvoice,
    ThirdCountrySalesInvoice,
    ThirdCountryServiceInvoice,
    ThirdPartyReceipt,
    UncorrelatedCreditNote,
    check,
    checked,
    to_json,
)
from invoicing_async.outbox import SqliteOutbox
from invoicing_async.testing import instant_retries
from invoicing_sandbox import Sandbox


@pytest.fixture
async def sb():
    async with Sandbox(key_algorithm="cv25519") as sandbox:
        yield sandbox


def receipt(sb: Sandbox, number: int, **fields) -> RetailReceipt:
    """A two-line retail receipt of the sandbox's issuer, its VAT number prefixed."""
    options = {
        "issuer": Party(vat="EL" + sb.client_id),
        "series": "T",
        "number": number,
        "issued": "2026-11-22T10:15:00",
        "lines": [
            Line("Espresso", quantity=2, unit_price="2.50"),
            Line("Νερό 0,5L", quantity=1, unit_price="0.50", vat_category=2),
        ],
        "payments": [PaymentMethod(7)],
        "internal_id": f"till-1/T/{number}",
    }
    return RetailReceipt(**{**options, **fields})


def held(sb: Sandbox, document) -> dict:
    """The document the sandbox committed for ``document``'s identity."""
    return sb.committed[document_key(document)].document


async def test_the_clients_and_the_pools_methods_take_typed_documents(sb):
    """submit_secure, submit_json, submit_many (a Submission among them) and
    submit_stream of the client and of a pool: each typed document is committed once,
    as its JSON."""
    async with client_for(sb) as client:
        await client.submit_secure(receipt(sb, 1))
        await client.submit_json(receipt(sb, 2))
        outcomes = await client.submit_many(
            [receipt(sb, 3), Submission(document=receipt(sb, 4), encrypted=False)]
        )
        assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED] * 2
        streamed = [o async for o in client.submit_stream([receipt(sb, 5)])]
        assert streamed[0].ok
    async with IssuerPool(
        sb.base_url, {sb.client_id: sb.client_secret}, provider_key=sb.provider_key
    ) as pool:
        await pool.submit_secure(receipt(sb, 6))
        await pool.submit_json(receipt(sb, 7))
        [outcome] = await pool.submit_many([receipt(sb, 8)])
        assert outcome.ok
        assert [o.ok async for o in pool.submit_stream([receipt(sb, 9)])] == [True]
    for number in range(1, 10):
        document = receipt(sb, number)
        assert held(sb, document) == to_json(document)
        assert sb.committed[document_key(document)].commits == 1


async def test_the_blocking_twins_take_typed_documents(sb):
    """BlockingClient and BlockingPool, from a thread: single calls and batches."""

    def sell() -> None:
        with BlockingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client:
            assert client.submit_secure(receipt(sb, 11)).mark is not None
            assert client.submit_json(receipt(sb, 12)).mark is not None
            assert [o.ok for o in client.submit_many([receipt(sb, 13)])] == [True]
        with BlockingPool(
            sb.base_url, {sb.client_id: sb.client_secret}, provider_key=sb.provider_key
        ) as pool:
            assert pool.submit_secure(receipt(sb, 14)).mark is not None
            assert [o.ok for o in pool.submit_many([receipt(sb, 15)])] == [True]

    await asyncio.to_thread(sell)
    assert {held(sb, receipt(sb, n))["Series"] for n in range(11, 16)} == {"T"}


async def test_a_typed_sale_is_deferred_through_an_outage_and_sent_as_it_was(sb, tmp_path):
    """A deferred typed sale: durable in the outbox as its JSON, stamped through a hook
    of its own type, committed once when the provider is back."""
    delivered = asyncio.Event()
    sale = receipt(sb, 21)

    def stamp(document: RetailReceipt) -> RetailReceipt:
        return attrs.evolve(document, extra={**document.extra, "TransmissionFailure": 1})

    async with (
        client_for(sb) as client,
        Deferral(
            client,
            tmp_path / "till.db",
            stamp=stamp,
            on_outcome=lambda _: delivered.set(),
            probe_delay=0.02,
            probe_max_delay=0.1,
            poll=0.1,
        ) as till,
    ):
        await client.token()
        await sb.set_outage("refuse")
        answer = await till.submit_or_defer(sale)
        assert isinstance(answer, DeferredReceipt)
        assert answer.key == "id:till-1/T/21"
        await sb.set_outage(None)
        await asyncio.wait_for(delivered.wait(), 60)
    assert held(sb, sale) == {**to_json(sale), "TransmissionFailure": 1}


async def test_an_outbox_takes_typed_documents(sb, tmp_path):
    """Enqueued typed documents are stored as their JSON and drained by a worker."""
    invoice = SalesInvoice(
        issuer=Party(vat=sb.client_id),
        counterparty=Party(vat="EL094019245", registered_name="πελάτης"),
        series="B",
        number="0001",
        issued="2026-11-22",
        lines=[Line("Υπηρεσία", net_total="100.00")],
        internal_id="erp/B/0001",
    )
    async with SqliteOutbox(tmp_path / "outbox.db") as outbox, client_for(sb) as client:
        keys = await outbox.enqueue([invoice, receipt(sb, 31)])
        assert keys == ["id:erp/B/0001", "id:till-1/T/31"]
        with instant_retries():
            counts = await outbox.run_worker(client, stop_when_empty=True, poll=0.05)
    assert counts == {OutcomeStatus.ACCEPTED: 2}
    assert held(sb, invoice) == to_json(invoice)


def _abroad(country: str, vat: str) -> Party:
    return Party(vat=vat, registered_name="customer", address=Address(country_code=country))


#: A document of each type of the rest of a day, as its sample is shaped (issue 40).
_EXEMPT = [Line("Export", unit_price="250.00", vat_category=7, vat_exemption=14)]
_DAY = [
    (ServiceReceipt, {}),
    (SimplifiedInvoice, {"lines": [Line("Ρεύμα", unit_price="87.46", vat_category=3)]}),
    (CreditReceipt, {"correlated_invoices": [400007396844549]}),
    (ThirdPartyReceipt, {"third_party": Party(vat="EL094019245")}),
    (UncorrelatedCreditNote, {"counterparty": Party(vat="EL094019245")}),
    (IntraEUSalesInvoice, {"lines": _EXEMPT, "counterparty": _abroad("IT", "IT000000000")}),
    (IntraEUServiceInvoice, {"lines": _EXEMPT, "counterparty": _abroad("DE", "DE123456789")}),
    (ThirdCountrySalesInvoice, {"lines": _EXEMPT, "counterparty": _abroad("GB", "BG000000000")}),
    (ThirdCountryServiceInvoice, {"lines": _EXEMPT, "counterparty": _abroad("GB", "GB")}),
]


async def test_each_type_of_the_rest_of_a_day_is_accepted_as_its_json(sb):
    """11.2, 11.3, 11.4, 11.5, 5.2, 1.2, 1.3, 2.2, 2.3 built from their constructors:
    no problem, each committed once over real HTTP (checked where serialised), the
    sandbox holding exactly its JSON, InvoiceTypeCode included."""
    documents = [_typed(sb, cls, 40 + n, fields) for n, (cls, fields) in enumerate(_DAY)]
    assert [check(document) for document in documents] == [[]] * len(_DAY)
    async with client_for(sb) as client:
        outcomes = await client.submit_many(list(map(checked, documents)))
    assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED] * len(_DAY)
    for document in documents:
        assert held(sb, document) == to_json(document)
        assert held(sb, document)["InvoiceTypeCode"] == type(document).type_code


async def test_the_sandbox_refuses_a_sale_abroad_to_the_issuers_country(sb):
    """A 1.2 to a Greek customer, sent unchecked: the sandbox answers 400 naming the
    counterparty's country, as check says; a 0 % line without its exemption likewise."""
    wrong = _typed(
        sb,
        IntraEUSalesInvoice,
        60,
        {"lines": _EXEMPT, "counterparty": _abroad("GR", "EL094019245")},
    )
    bare = _typed(
        sb,
        ThirdCountrySalesInvoice,
        61,
        {
            "lines": [Line("Export", unit_price="1.00", vat_category=7)],
            "counterparty": _abroad("US", "US1"),
        },
    )
    assert [p.field for p in check(wrong)] == ["CounterParty.Address.CountryCode"]
    async with client_for(sb) as client:
        outcomes = await client.submit_many([wrong, bare])
    assert [o.status for o in outcomes] == [OutcomeStatus.REJECTED] * 2
    messages = [str(o.error) for o in outcomes]
    assert "CounterParty.Address.CountryCode" in messages[0]
    assert "Details[0].VatExemptionCategoryCode" in messages[1]
    assert all(o.error is not None and o.error.status == 400 for o in outcomes)


def _typed(sb: Sandbox, cls, number: int, fields: dict):
    """A document of ``cls`` of the sandbox's issuer, one line at 24 % unless given."""
    options = {
        "issuer": Party(vat="EL" + sb.client_id),
        "series": "D",
        "number": number,
        "issued": "2026-11-22T18:00:00",
        "lines": [Line("Espresso", quantity=2, unit_price="2.50")],
        "payments": [PaymentMethod(7)],
        "internal_id": f"day/{cls.type_code}/{number}",
    }
    return cls(**{**options, **fields})
