"""Logs an aggregator reads: one JSON object per record, its fields as keys.

python-json-logger's formatter writes every attribute a record carries; the library
puts its fields there (``invoicing.document_key``, ``invoicing.issuer``,
``invoicing.attempt``, ``invoicing.outcome`` …), so nothing is parsed out of messages.
"""

import asyncio
import io
import json
import logging
import sys

# region config
from pythonjsonlogger.json import JsonFormatter

from invoicing_async import InvoicingClient
from invoicing_sandbox import Fault, Sandbox, sample_invoice


def json_handler(stream: io.TextIOBase) -> logging.Handler:
    """One JSON object per record, with every field the record carries."""
    handler = logging.StreamHandler(stream)
    fields = "{asctime}{levelname}{name}{message}"
    handler.setFormatter(JsonFormatter(fields, style="{"))
    return handler


def configure() -> None:
    """At the application's start-up: the library's records as JSON on stderr."""
    logger = logging.getLogger("invoicing_async")
    logger.addHandler(json_handler(sys.stderr))
    logger.setLevel(logging.INFO)


# endregion config


async def main() -> None:
    """A batch with one retry, logged as JSON: the retry's record has its fields."""
    stream = io.StringIO()
    logger = logging.getLogger("invoicing_async")
    handler = json_handler(stream)
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        async with Sandbox() as sb:
            sb.script(Fault.status(503, retry_after=0))
            client = InvoicingClient(sb.base_url, sb.client_id, sb.client_secret)
            async with client:
                invoices = [sample_invoice(1)]
                [outcome] = await client.submit_many(invoices, encrypted=False)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    retry = next(r for r in records if r["name"] == "invoicing_async.delivery")
    print(json.dumps(retry, indent=2))
    assert retry["invoicing.document_key"] == outcome.key
    assert retry["invoicing.issuer"] == sb.client_id
    assert retry["invoicing.attempt"] == 1
    assert sb.client_secret not in stream.getvalue()


if __name__ == "__main__":
    asyncio.run(main())
