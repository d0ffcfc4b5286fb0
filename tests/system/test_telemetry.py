"""Traces and metrics as an operator reads them: OpenTelemetry's SDK, in memory.

Each test configures the SDK's tracer and meter providers for itself
(:func:`telemetrytools.otel`) and drives the real client against the sandbox over
loopback HTTP. The conventions checked are OpenTelemetry's stable HTTP client ones
(``http.request.method``, ``server.address``, ``url.full``,
``http.response.status_code``, ``http.request.resend_count``, ``error.type``) and the
library's own ``invoicing.*`` attributes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import subprocess
import sys

import aiohttp
import pytest
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, StatusCode
from sandboxtools import client_for
from telemetrytools import otel

from invoicing_async import (
    Deferral,
    DeferredReceipt,
    DocumentResult,
    InvoicingError,
    OutcomeStatus,
    RetryPolicy,
    UnknownOutcomeError,
    document_key,
)
from invoicing_async._client.outbox import _till
from invoicing_async.outbox import PostgresOutbox, SqliteOutbox
from invoicing_async.telemetry import send_traceparent
from invoicing_async.testing import instant_retries
from invoicing_sandbox import Fault, Sandbox, sample_invoice

#: A deferral's drainer that looks at its outbox often, and retries at once.
FAST = {"poll": 0.1, "probe_delay": 0.02, "retry": RetryPolicy(max_attempts=2, base_delay=0.01)}


@pytest.fixture
async def sb():
    async with Sandbox() as sandbox:
        yield sandbox


async def _until(condition) -> None:
    """Wait for a gauge the worker sets in its own time (no event announces it)."""
    while not condition():  # noqa: ASYNC110  (polling the state under test is the point)
        await asyncio.sleep(0.01)


def http_children(t, parent):
    return [s for s in t.children(parent) if s.kind is SpanKind.CLIENT]


async def test_a_submission_retried_after_a_503_is_one_call_span_with_two_http_spans(sb):
    """submit_json answered 503, then 201: one ``invoicing.submit`` span (document key,
    issuer, safety class, outcome accepted, a ``retry`` event saying why) with two CLIENT
    spans named ``POST`` under it: the first 503 with ``error.type`` and no resend
    count, the second ``http.request.resend_count`` = 1 and 201; ``url.full`` is the
    endpoint's URL. The duration histogram, the documents and retries counters agree."""
    invoice = sample_invoice(1)
    with otel() as t:
        async with client_for(sb) as client:
            await client.token()
            sb.script(Fault.status(503, retry_after=0))
            await client.submit_json(invoice)
        [call] = t.named("invoicing.submit")
        first, second = http_children(t, call)
        duration = t.points("http.client.request.duration")
        documents = t.value("invoicing.documents", {"invoicing.outcome": "accepted"})
        retries = t.value("invoicing.retries", {"invoicing.retry.reason": "throttled"})
    assert call.attributes["invoicing.document_key"] == document_key(invoice)
    assert call.attributes["invoicing.issuer"] == sb.client_id
    assert call.attributes["invoicing.safety"] == "deduplicated_write"
    assert call.attributes["invoicing.outcome"] == "accepted"
    assert call.status.status_code is StatusCode.UNSET
    [event] = call.events
    assert event.name == "retry"
    assert event.attributes["invoicing.retry.reason"] == "throttled"
    for span in (first, second):
        assert span.name == "POST"
        assert span.attributes["http.request.method"] == "POST"
        assert span.attributes["server.address"] == "127.0.0.1"
        assert span.attributes["url.full"] == f"{sb.base_url}/Invoice/json"
    assert first.attributes["http.response.status_code"] == 503
    assert first.attributes["error.type"] == "503"
    assert "http.request.resend_count" not in first.attributes
    assert first.status.status_code is StatusCode.ERROR
    assert second.attributes["http.response.status_code"] == 201
    assert second.attributes["http.request.resend_count"] == 1
    statuses = sorted(attributes.get("http.response.status_code") for attributes, _ in duration)
    assert statuses == [200, 201, 503]  # the token, the document twice
    assert documents == 1
    assert retries == 1


async def test_a_token_request_is_a_span_of_its_own_under_the_call_that_needed_it(sb):
    """The first call's token request: an ``invoicing.token`` span (issuer, grant) under
    the submission's span, its POST under it, counted by ``invoicing.token.requests``;
    the submission's own POST is its first send (no resend count)."""
    with otel() as t:
        async with client_for(sb) as client:
            await client.submit_json(sample_invoice(1))
        [call] = t.named("invoicing.submit")
        [token] = t.named("invoicing.token")
        requests = t.value("invoicing.token.requests", {"invoicing.grant": "client_credentials"})
    assert token.parent.span_id == call.context.span_id
    assert token.attributes["invoicing.issuer"] == sb.client_id
    assert token.attributes["invoicing.grant"] == "client_credentials"
    [token_post] = http_children(t, token)
    assert token_post.attributes["url.full"] == f"{sb.base_url}/oauth/token"
    [post] = http_children(t, call)
    assert "http.request.resend_count" not in post.attributes
    assert requests == 1


async def test_an_at_most_once_operation_with_a_lost_answer_records_its_unknown_outcome(sb):
    """A cancellation whose answer is lost (committed, then the connection dropped) is
    not re-sent; its span says ``unknown`` with its safety class, its status is an
    error named by the error's class, its one HTTP span failed; the operations counter
    counts one unknown cancellation."""
    with otel() as t:
        async with client_for(sb) as client:
            await client.token()
            sb.script_operation(Fault.commit_then_drop())
            with pytest.raises(UnknownOutcomeError):
                await client.cancel_delivery_note(400001234567890)
        [call] = t.named("invoicing.cancel_delivery_note")
        unknown = t.value(
            "invoicing.operations",
            {"invoicing.operation": "cancel_delivery_note", "invoicing.outcome": "unknown"},
        )
    assert call.attributes["invoicing.outcome"] == "unknown"
    assert call.attributes["invoicing.safety"] == "at_most_once_write"
    assert call.attributes["error.type"] == "UnknownOutcomeError"
    assert call.status.status_code is StatusCode.ERROR
    [post] = http_children(t, call)
    assert post.attributes["error.type"]  # the failure's class (the connection dropped)
    assert "?" not in post.attributes["url.full"]  # the mark was a query parameter
    assert unknown == 1


async def test_a_deferred_sale_and_its_later_delivery_are_linked(sb, tmp_path):
    """A sale deferred while the provider refuses connections: its ``invoicing.sale``
    span says ``deferred`` and why; once the provider is back the drainer's delivery of
    the same document is a trace of its own (``invoicing.document``, accepted) whose
    link points at the sale's span. The backlog gauges count the sale while it waits,
    and nothing once it is sent."""
    doc = sample_invoice(2)
    delivered = asyncio.Event()
    with otel() as t:
        async with (
            client_for(sb) as client,
            Deferral(
                client, tmp_path / "till.db", on_outcome=lambda _: delivered.set(), **FAST
            ) as till,
        ):
            await client.token()
            await sb.set_outage("refuse")
            receipt = await till.submit_or_defer(doc)
            assert isinstance(receipt, DeferredReceipt)
            waiting = t.value("invoicing.deferral.backlog")
            await sb.set_outage(None)
            await asyncio.wait_for(delivered.wait(), 60)
            await till.refresh_backlog()
            left = t.value("invoicing.deferral.backlog")
        [sale] = t.named("invoicing.sale")
        [delivery] = [
            span
            for span in t.named("invoicing.document")
            if span.attributes["invoicing.outcome"] == "accepted"
        ]
        deferred = t.value("invoicing.documents", {"invoicing.outcome": "deferred"})
    assert sale.attributes["invoicing.document_key"] == document_key(doc)
    assert sale.attributes["invoicing.outcome"] == "deferred"
    assert sale.attributes["invoicing.deferral.reason"] == "unreachable"
    assert delivery.attributes["invoicing.document_key"] == document_key(doc)
    assert delivery.parent is None  # the worker's documents start traces of their own
    [link] = delivery.links
    assert link.context.span_id == sale.context.span_id
    assert link.context.trace_id == sale.context.trace_id
    assert deferred == 1
    assert waiting == 1
    assert left == 0


async def test_a_batch_is_one_span_with_each_request_under_it_naming_its_document(sb):
    """submit_many is one call: an ``invoicing.batch`` span, under it each request's
    CLIENT span naming its document (key, issuer), a re-send with its resend count; the
    documents counter counts every outcome, a rejected one too."""
    documents = [sample_invoice(n) for n in range(1, 4)]
    documents[1]["Summaries"]["TotalGrossValue"] = -1
    with otel() as t, instant_retries():
        async with client_for(sb) as client:
            await client.token()
            sb.script(Fault.status(503, retry_after=0))
            outcomes = await client.submit_many(documents, encrypted=False)
        [batch] = t.named("invoicing.batch")
        children = t.children(batch)
        accepted = t.value("invoicing.documents", {"invoicing.outcome": "accepted"})
        rejected = t.value("invoicing.documents", {"invoicing.outcome": "rejected"})
    assert [o.status for o in outcomes].count(OutcomeStatus.REJECTED) == 1
    assert batch.attributes["invoicing.batch.documents"] == 3
    assert len(children) == 4  # three documents, one of them sent twice
    assert {s.kind for s in children} == {SpanKind.CLIENT}
    assert sorted({s.attributes["invoicing.document_key"] for s in children}) == sorted(
        document_key(d) for d in documents
    )
    assert all(s.attributes["invoicing.issuer"] == sb.client_id for s in children)
    [resent] = [s for s in children if "http.request.resend_count" in s.attributes]
    assert resent.attributes["http.request.resend_count"] == 1
    assert (accepted, rejected) == (2, 1)


async def test_the_traceparent_header_is_sent_only_when_asked(sb):
    """By default no ``traceparent`` header reaches the provider, even while tracing;
    after ``send_traceparent()`` each request carries its own CLIENT span's context."""
    sent: list[dict] = []

    async def on_request_start(_session, _context, params) -> None:
        sent.append(dict(params.headers))

    trace_config = aiohttp.TraceConfig()
    trace_config.on_request_start.append(on_request_start)
    with otel() as t:
        async with (
            aiohttp.ClientSession(trace_configs=[trace_config]) as session,
            client_for(sb, session=session) as client,
        ):
            await client.token()
            await client.submit_json(sample_invoice(1))
            send_traceparent()
            try:
                await client.submit_json(sample_invoice(2))
            finally:
                send_traceparent(enabled=False)
        second = t.named("invoicing.submit")[1]
        [post] = http_children(t, second)
    assert all("traceparent" not in headers for headers in sent[:2])
    traceparent = sent[2]["traceparent"]
    assert traceparent.split("-")[2] == format(post.context.span_id, "016x")


async def test_no_secret_and_no_document_content_in_any_span_event_or_metric(sb, tmp_path):
    """A run through every kind of call (a token fetched and refreshed, a 401 answered
    with a new token, a batch with a retry and a refusal, an operation with a payload,
    a sale deferred and delivered, a provider echoing the secrets): no API key, access
    token, refresh token or document content appears in any span name, attribute,
    event, link or status, nor in any metric's attributes."""
    marker = "CONTENT-THAT-MUST-NOT-LEAK"
    documents = [sample_invoice(n) for n in range(1, 6)]
    for document in documents:
        document["CounterParty"]["RegisteredName"] = marker
    documents[3]["Summaries"]["TotalGrossValue"] = -1
    delivered = asyncio.Event()
    with otel() as t, instant_retries():
        async with (
            client_for(sb) as client,
            Deferral(
                client, tmp_path / "till.db", on_outcome=lambda _: delivered.set(), **FAST
            ) as till,
        ):
            first = await client.token()
            sb.script(Fault.status(503, retry_after=0), Fault.echo_secrets())
            await client.submit_many(documents[:4], encrypted=False)
            sb.expire_tokens()  # a 401: a new token (refreshed), the request sent again
            await client.submit_json(documents[4])
            with contextlib.suppress(InvoicingError):  # refused: it names no note
                await client.cancel_delivery_note(payload={"note": marker})
            await sb.set_outage("refuse")
            sale = sample_invoice(9)
            sale["CounterParty"]["RegisteredName"] = marker
            assert isinstance(await till.submit_or_defer(sale), DeferredReceipt)
            await sb.set_outage(None)
            await asyncio.wait_for(delivered.wait(), 60)
            last = await client.token()
        texts = []
        for span in t.spans():
            texts += [span.name, span.status.description or ""]
            texts += [json.dumps(dict(span.attributes), default=str)]
            for event in span.events:
                texts += [event.name, json.dumps(dict(event.attributes), default=str)]
            texts += [json.dumps(dict(link.attributes or {})) for link in span.links]
        for name in (
            "http.client.request.duration",
            "invoicing.documents",
            "invoicing.operations",
            "invoicing.retries",
            "invoicing.token.requests",
        ):
            texts += [json.dumps(attributes) for attributes, _ in t.points(name)]
    text = "\n".join(texts)
    assert "invoicing.sale" in text  # the scan saw the whole run
    assert '"invoicing.retry.reason": "token refused"' in text
    secrets = [sb.client_secret, first.value, last.value]
    secrets += [token.refresh_token for token in (first, last) if token.refresh_token]
    for secret in secrets:
        assert secret not in text
    assert marker not in text
    assert "TotalGrossValue" not in text


async def test_the_outbox_pending_gauge_counts_what_a_worker_has_left(sb, tmp_path):
    """An outbox worker's ``invoicing.outbox.pending`` gauge (named by its outbox) shows
    the entries waiting when it starts, and 0 once it has sent them."""
    documents = [sample_invoice(n, issuer_vat=sb.client_id) for n in range(1, 6)]
    with otel() as t:
        async with SqliteOutbox(tmp_path / "outbox.db") as outbox:
            await outbox.enqueue(documents, encrypted=False)
            sb.hold()
            async with client_for(sb) as client:
                worker = asyncio.ensure_future(outbox.run_worker(client, concurrency=8, poll=0.05))
                await sb.wait_held(5)
                before = t.points("invoicing.outbox.pending")
                sb.release()
                await asyncio.wait_for(_until(lambda: t.value("invoicing.outbox.pending") == 0), 60)
                worker.cancel()
                await asyncio.gather(worker, return_exceptions=True)
    [(attributes, point)] = before
    assert attributes == {"invoicing.outbox": repr(outbox)}
    assert point.value == 5


async def test_a_worker_that_returned_no_longer_reports_its_pending_gauge(sb, tmp_path):
    """Once an outbox worker has returned, its gauge is gone at once, not when the
    garbage collector gets to it: a later worker's gauge is the only one read."""
    documents = [sample_invoice(n, issuer_vat=sb.client_id) for n in range(1, 3)]
    with otel() as t:
        async with SqliteOutbox(tmp_path / "outbox.db") as outbox:
            await outbox.enqueue(documents, encrypted=False)
            async with client_for(sb) as client:
                gc.disable()  # what a cycle keeps alive stays alive: the test decides
                try:
                    await outbox.run_worker(client, stop_when_empty=True, poll=0.05)
                    assert t.points("invoicing.outbox.pending") == []
                finally:
                    gc.enable()


async def test_a_record_logged_while_a_document_is_sent_carries_its_fields(sb, caplog):
    """Records logged while a document is being sent (the transport's, a retry's) carry
    the document's fields as attributes, with OpenTelemetry configured or not: a JSON
    formatter gets ``invoicing.document_key`` and ``invoicing.issuer`` without parsing
    the message, the transport's records the HTTP names."""
    caplog.set_level("DEBUG", logger="invoicing_async")
    invoice = sample_invoice(1)
    async with client_for(sb) as client:
        await client.token()
        caplog.clear()
        sb.script(Fault.status(503, retry_after=0))
        [outcome] = await client.submit_many([invoice], encrypted=False)
    assert outcome.ok
    transport = [r for r in caplog.records if r.name == "invoicing_async.transport"]
    assert len(transport) == 2
    for record in transport:
        fields = record.__dict__
        assert fields["invoicing.document_key"] == document_key(invoice)
        assert fields["invoicing.issuer"] == sb.client_id
        assert fields["http.request.method"] == "POST"
        assert fields["url.path"] == "/test/Invoice/json"
    assert transport[0].__dict__["http.response.status_code"] == 503
    assert transport[1].__dict__["http.request.resend_count"] == 1
    mentioned = [
        r
        for r in caplog.records
        if document_key(invoice) in r.getMessage() and r.name != "invoicing_async.sandbox"
    ]
    assert mentioned
    assert all(r.__dict__["invoicing.document_key"] == document_key(invoice) for r in mentioned)


async def test_without_a_provider_nothing_is_made(sb):
    """With the API imported but no provider configured, a submission makes no span and
    no measurement, and the sale still answers as before."""
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
    assert type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider"
    async with client_for(sb) as client:
        record = await client.submit_json(sample_invoice(1))
    assert isinstance(record, DocumentResult)


def test_a_client_never_imports_opentelemetry_for_an_application_that_did_not():
    """An application that configured no telemetry (never imported OpenTelemetry) pays
    no import: a submission, a batch and a sale leave ``opentelemetry`` unimported."""
    code = """
import asyncio, sys, tempfile, pathlib
from invoicing_async import InvoicingClient, Deferral
from invoicing_sandbox import Sandbox, sample_invoice

async def main():
    async with Sandbox() as sb:
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret,
                                   provider_key=sb.provider_key) as client:
            await client.submit_json(sample_invoice(1))
            await client.submit_many([sample_invoice(2)], encrypted=False)
            with tempfile.TemporaryDirectory() as work:
                async with Deferral(client, pathlib.Path(work) / "till.db") as till:
                    await till.submit_or_defer(sample_invoice(3))

asyncio.run(main())
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("dsn", "named"),
    [
        (
            "postgresql://app:s3cret@db.example:5433/shop?sslmode=require&password=s3cret",
            "PostgresOutbox('postgresql://app@db.example:5433/shop')",
        ),
        ("postgres://db.example/shop", "PostgresOutbox('postgres://db.example/shop')"),
        (
            "host=db.example port=5433 dbname=shop user=app password='s3cret'",
            "PostgresOutbox('host=db.example port=5433 dbname=shop user=app')",
        ),
    ],
)
def test_a_postgres_outbox_is_named_by_its_database_never_its_password(dsn, named):
    """The name a PostgreSQL outbox has on its gauges (``invoicing.outbox``, the
    worker's and a till's drainer's) is its repr: it says which database (user, host,
    port, database) and never holds the password, wherever the DSN puts it (before:
    ``PostgresOutbox(...)`` for every outbox, whichever it was)."""
    outbox = PostgresOutbox(dsn)
    assert repr(outbox) == named
    assert repr(_till(outbox)) == named  # the drainer's gauges
    assert "s3cret" not in repr(outbox)
