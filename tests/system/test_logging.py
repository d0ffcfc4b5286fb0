"""The library's log: named child loggers per area, the right levels, never a secret."""

from __future__ import annotations

import logging

from invoicing_async import InvoicingClient
from invoicing_sandbox import Fault, Sandbox, sample_invoice

AREAS = {
    "invoicing_async.transport",
    "invoicing_async.auth",
    "invoicing_async.delivery",
    "invoicing_async.batch",
    "invoicing_async.sandbox",
}


async def test_named_loggers_levels_and_no_secrets(caplog):
    """A batch with a retried fault logs on named child loggers only: each request at
    DEBUG on `.transport` (method, path, status, time), the sandbox's request lines at
    INFO on `.sandbox`, retries at INFO on `.delivery` with the document key and attempt;
    no API key and no token in any line."""
    caplog.set_level(logging.DEBUG, logger="invoicing_async")
    invoice = sample_invoice(1)
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.script(Fault.status(503, retry_after=0))
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            [outcome] = await client.submit_many([invoice], encrypted=False)
            token = (await client.token()).value
    assert outcome.ok
    records = [r for r in caplog.records if r.name.startswith("invoicing_async")]
    assert {r.name for r in records} <= AREAS
    transport = [r for r in records if r.name == "invoicing_async.transport"]
    assert transport
    assert all(r.levelno == logging.DEBUG for r in transport)
    assert any(
        r.getMessage().startswith("POST ") and "/test/Invoice/json -> 503" in r.getMessage()
        for r in transport
    )
    retries = [r for r in records if r.name == "invoicing_async.delivery" and r.levelno >= 20]
    assert any(outcome.key in r.getMessage() and "attempt 1" in r.getMessage() for r in retries)
    text = "\n".join(r.getMessage() for r in records)
    assert sb.client_secret not in text
    assert token not in text
