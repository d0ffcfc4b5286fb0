"""`invoicing-async reconcile`, `update-payment` and `instant-payment-status` as an operator
meets them: the real command in a subprocess against a sandbox on loopback."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from sandboxtools import client_for, run_command

from invoicing_async import InvoicingClient, RetryPolicy
from invoicing_sandbox import Fault, Sandbox, sample_invoice

DAY = dt.date(2026, 11, 22)


@pytest.fixture
async def sb():
    async with Sandbox(key_algorithm="cv25519", page_size=2) as sandbox:
        yield sandbox


def lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def on_the_day(sb, number, day=DAY):
    return sample_invoice(number, issuer_vat=sb.client_id, lines=1, issued=day)


async def test_reconcile_finds_a_document_missing_on_each_side(sb, tmp_path):
    """Three documents sent with the ledger, one sent without it (missing in the ledger),
    one the ledger holds as accepted by the issuer in another environment (missing at
    the provider listed here), one of another day (ignored): one line for each missing document,
    exit 1; once both sides agree, exit 0 and no line."""
    ledger = tmp_path / "ledger.db"
    async with client_for(sb) as client:
        sent = await client.submit_many([on_the_day(sb, n) for n in (1, 2, 3)], ledger=ledger)
        outside = await client.submit_json(on_the_day(sb, 4))
        await client.submit_many([on_the_day(sb, 5, DAY + dt.timedelta(days=1))], ledger=ledger)
    sb.add_client("production", sb.client_id, sb.client_secret)
    production = sb.environment("production", client_id=sb.client_id)
    async with (
        client_for(sb) as client,
        InvoicingClient(production.base_url, sb.client_id, sb.client_secret) as elsewhere,
    ):
        [away] = await elsewhere.submit_many([on_the_day(sb, 6)], ledger=ledger, encrypted=False)
    code, stdout, stderr = await run_command(
        sb, "reconcile", DAY.isoformat(), "--ledger", str(ledger)
    )
    assert code == 1, stderr
    found = lines(stdout)
    assert {(f["missing"], f["mark"]) for f in found} == {
        ("in_ledger", outside.mark),
        ("at_provider", away.result.mark),
    }
    assert "4 accepted in the ledger, 4 listed by the provider" in stderr
    assert all(o.result.mark not in {f["mark"] for f in found} for o in sent)

    agreeing = tmp_path / "agreeing.db"
    async with client_for(sb) as client:
        await client.submit_many([on_the_day(sb, n) for n in (1, 2, 3, 4)], ledger=agreeing)
    code, stdout, stderr = await run_command(
        sb, "reconcile", DAY.isoformat(), "--ledger", str(agreeing)
    )
    assert (code, stdout) == (0, ""), stderr


async def test_reconcile_names_an_unsettled_entry_and_refuses_a_bad_day(sb, tmp_path):
    """An entry whose outcome is unknown cannot be matched: it is listed as unsettled
    (exit 1). A day that is not a date is bad usage (exit 2, one line)."""
    ledger = tmp_path / "ledger.db"
    sb.script(Fault.commit_then_drop())
    async with client_for(sb) as client:
        [unknown] = await client.submit_many(
            [on_the_day(sb, 1)], ledger=ledger, retry=RetryPolicy(resend_ambiguous=False)
        )
    assert unknown.status.value == "unknown"
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    code, stdout, _ = await run_command(sb, "reconcile", today, "--ledger", str(ledger))
    assert code == 1
    assert lines(stdout) == [
        {"unsettled": unknown.key, "status": "unknown", "issuer": sb.client_id}
    ]
    code, stdout, stderr = await run_command(sb, "reconcile", "22/11/2026", "--ledger", str(ledger))
    assert (code, stdout) == (2, "")
    assert "YYYY-MM-DD" in stderr


async def test_update_payment_registers_once_and_a_lost_answer_is_unknown(sb):
    """The payment signed for the mark is registered (exit 0, its payment mark); the same
    payment whose answer is lost is not sent again (exit 1, unknown)."""
    async with client_for(sb) as client:
        record = await client.submit_json(on_the_day(sb, 1))
        signed = await client.sign_pos_transaction(
            {"issuerTin": sb.client_id, "mark": record.mark, "paymentAmount": 5}
        )
    payment = json.dumps(
        {
            "amount": 5,
            "transactionId": "TX-1",
            "providersSignature": signed.body["signature"],
            "posInput": signed.body["signedDataInput"],
            "terminalId": "T-1",
        }
    )
    code, stdout, stderr = await run_command(
        sb, "update-payment", str(record.mark), "--payment", payment
    )
    assert code == 0, stderr
    [done] = lines(stdout)
    assert (done["outcome"], done["payment_mark"]) == ("done", sb.payment_updates[0].payment_mark)
    sb.script_operation(Fault.commit_then_drop())
    code, stdout, _ = await run_command(
        sb, "update-payment", str(record.mark), "--payment", payment
    )
    assert (code, lines(stdout)[0]["outcome"]) == (1, "unknown")
    code, _, stderr = await run_command(sb, "update-payment", "12", "--payment", '{"amount": 1}')
    assert code == 2
    assert "lacks transactionId" in stderr


async def test_instant_payment_status_reads_and_waits(sb):
    """A pending payment reads Pending (exit 0); settled, --wait reads it Completed and
    final (exit 0); an unknown id is refused (exit 1, DocumentNotFoundError)."""
    from invoicing_async import InstantPaymentRequest  # noqa: PLC0415

    async with client_for(sb) as client:
        started = await client.initiate_instant_payment(InstantPaymentRequest(amount=2))
    code, stdout, _ = await run_command(sb, "instant-payment-status", started.end_to_end_id)
    assert (code, lines(stdout)[0]["payment_status"]) == (0, "Pending")
    sb.settle_iris_payment(started.end_to_end_id)
    code, stdout, _ = await run_command(
        sb, "instant-payment-status", started.end_to_end_id, "--wait", "30"
    )
    [read] = lines(stdout)
    assert (code, read["payment_status"], read["final"]) == (0, "Completed", True)
    code, stdout, _ = await run_command(sb, "instant-payment-status", "F" * 32)
    [refused] = lines(stdout)
    assert (code, refused["outcome"], refused["error"]["type"]) == (
        1,
        "refused",
        "DocumentNotFoundError",
    )
