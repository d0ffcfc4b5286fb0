"""User code type-checks: ``mypy --strict`` accepts what the documentation shows."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

SNIPPET = """
from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

from invoicing_async import InvoicingClient, Outcome, outcome_to_dict


async def first_failures(client: InvoicingClient, invoices: list[dict[str, object]]) -> int:
    failures = 0
    async with contextlib.aclosing(client.submit_stream(invoices, concurrency=8)) as outcomes:
        async for outcome in outcomes:
            if not outcome.ok:
                failures += 1
                print(outcome_to_dict(outcome)["status"])
            if failures > 3:
                break  # closing the generator stops the batch
    return failures


def stream_type(client: InvoicingClient) -> AsyncGenerator[Outcome, None]:
    return client.submit_stream([])
"""


BLOCKING_SNIPPET = """
from __future__ import annotations

import atexit

from invoicing_async import DocumentResult, DuplicateDocumentError, InvoicingClient, Outcome
from invoicing_async.blocking import BlockingClient

invoicing = BlockingClient.from_env(limit=50)
atexit.register(invoicing.close)


def checkout(invoice: dict[str, object]) -> int | None:
    try:
        result: DocumentResult = invoicing.submit_secure(invoice, timeout=20)
    except DuplicateDocumentError as exc:
        if exc.result is None:
            raise
        result = exc.result
    return result.mark


def month_end(invoices: list[dict[str, object]]) -> list[Outcome]:
    with BlockingClient("https://api.example", "094019245", "key") as client:
        client.token()
        return client.submit_many(invoices, concurrency=8, ledger="month.db")


async def cancel(client: InvoicingClient, mark: int) -> object:
    return await client.request("POST", "/Invoice/cancelDeliveryNote", json={"mark": mark})


def cancel_blocking(mark: int) -> object:
    return invoicing.run(lambda client: cancel(client, mark))
"""


def test_mypy_strict_accepts_aclosing_submit_stream(tmp_path):
    """``async with contextlib.aclosing(client.submit_stream(...))`` passes mypy --strict
    (submit_stream is typed as the async generator it is)."""
    _mypy_strict(tmp_path, SNIPPET)


def test_mypy_strict_accepts_the_blocking_client(tmp_path):
    """Synchronous code using ``BlockingClient`` (from_env, the mirrored methods, the
    context manager, ``run`` with a coroutine function) passes mypy --strict: the results
    are typed, not Any."""
    _mypy_strict(tmp_path, BLOCKING_SNIPPET)
    wrong = BLOCKING_SNIPPET + "\n\nbad: str = invoicing.submit_json({})\n"
    with pytest.raises(AssertionError, match="Incompatible types in assignment"):
        _mypy_strict(tmp_path, wrong)


def _mypy_strict(tmp_path, code: str) -> None:
    if shutil.which("mypy") is None and not _has_module("mypy"):
        pytest.skip("mypy is not installed (the typing extra; CI installs it)")
    snippet = tmp_path / "user_code.py"
    snippet.write_text(code)
    completed = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--python-version", "3.10", str(snippet)],
        capture_output=True, text=True, timeout=300, check=False, cwd=snippet.parent,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr


def _has_module(name: str) -> bool:
    import importlib.util  # noqa: PLC0415

    return importlib.util.find_spec(name) is not None


OPERATIONS_SNIPPET = """
from __future__ import annotations

from pathlib import Path

from invoicing_async import (
    DocumentResult, InvoicingClient, OperationResult, RetryPolicy, Safety, UnknownOutcomeError,
)


async def cancel_or_check(client: InvoicingClient, mark: int) -> int | None:
    try:
        result: OperationResult = await client.cancel_delivery_note(mark, timeout=20)
    except UnknownOutcomeError:
        status = await client.get_last_b2g_status(mark)
        return status.cancellation_mark
    return result.cancellation_mark


async def everything(client: InvoicingClient, invoice: dict[str, object]) -> None:
    await client.cancel_receiving_note(payload={"mark": 1}, params={"entity": "x"})
    signed = await client.sign_pos_transaction(
        {"issuerTin": "123456783"}, retry=RetryPolicy(resend_ambiguous=False)
    )
    signature: object = signed.body["signature"]
    await client.request_pos_signature("123456783", b'{"a": 1}', safety=Safety.UPLOAD)
    record: DocumentResult = await client.reseed_b2g_invoice(invoice)
    mark: int | None = record.mark
    await client.upload_invoice_file(Path("invoice.pdf"), content_type="application/pdf")
    await client.upload_media(b"...", content_type="image/png", filename="logo.png")
    body: object = await client.request("GET", "/B2GInvoice/GetLastStatus", safety=Safety.READ)
    print(signature, mark, body)
"""


def test_mypy_strict_accepts_the_operations(tmp_path):
    """The named operations, their results and Safety pass mypy --strict in user code."""
    _mypy_strict(tmp_path, OPERATIONS_SNIPPET)


DOCUMENTS_SNIPPET = """
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from invoicing_async import DocumentResult, InvoicingClient
from invoicing_async.documents import (
    Line, Party, PaymentMethod, Problem, RetailReceipt, SalesInvoice, check, checked,
    from_json, to_json,
)


async def sell(client: InvoicingClient, number: int) -> DocumentResult:
    receipt = RetailReceipt(
        issuer=Party(vat="EL123456783"), series="A", number=number,
        issued=dt.datetime(2026, 11, 22, 10, 15),
        lines=[Line("Espresso", quantity=2, unit_price="2.50"), Line(["a", "b"], net_total=1)],
        payments=[PaymentMethod(7)],
    )
    net: Decimal = receipt.lines[0].net_total + receipt.summaries.total_gross_value
    problems: list[Problem] = check(receipt)
    print(net, problems, to_json(receipt)["Series"])
    await client.submit_many([checked(receipt)])
    return await client.submit_secure(receipt)


def read(data: dict[str, object]) -> SalesInvoice:
    return from_json(data, SalesInvoice)
"""


def test_mypy_strict_accepts_typed_documents(tmp_path):
    """Typed documents as the guide builds them pass mypy --strict: a line takes text,
    numbers and decimals, its computed amounts are Decimal, ``from_json`` of a class
    gives that class, and a typed document goes where a dict goes."""
    _mypy_strict(tmp_path, DOCUMENTS_SNIPPET)
    wrong = DOCUMENTS_SNIPPET + "\n\nbad: str = Line('x', unit_price=1).vat_total\n"
    with pytest.raises(AssertionError, match="Incompatible types in assignment"):
        _mypy_strict(tmp_path, wrong)
