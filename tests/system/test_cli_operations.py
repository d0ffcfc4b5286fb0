"""`invoicing-async cancel` and `status` as an operator meets them: the real command in a
subprocess against a sandbox on loopback, one JSON line each, exit codes 0/1/2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sandboxtools import client_for, invoice
from test_cli_submit import run

from invoicing_async import document_key
from invoicing_sandbox import Fault, Sandbox


@pytest.fixture
async def sandbox():
    async with Sandbox() as sb:
        sb.env = {
            "INVOICING_BASE_URL": sb.base_url,
            "INVOICING_CLIENT_ID": sb.client_id,
            "INVOICING_API_KEY": sb.client_secret,
        }
        async with client_for(sb) as client:
            sb.record = await client.submit_json(invoice(sb, 1))
        yield sb


def line(stdout: str) -> dict:
    [text] = stdout.splitlines()
    return json.loads(text)


async def test_cancel_then_cancel_again(sandbox):
    """The first cancel prints outcome done with the cancellation mark (exit 0); the
    second is refused (exit 1) with the original cancellation mark."""
    mark = str(sandbox.record.mark)
    code, stdout, _ = await run("cancel", "delivery-note", mark, env=sandbox.env)
    first = line(stdout)
    truth = sandbox.committed[document_key(invoice(sandbox, 1))].cancellation_mark
    assert code == 0
    assert (first["outcome"], first["status"], first["cancellation_mark"]) == ("done", 200, truth)
    code, stdout, _ = await run("cancel", "delivery-note", mark, env=sandbox.env)
    again = line(stdout)
    assert code == 1
    assert (again["outcome"], again["cancellation_mark"]) == ("refused", truth)
    assert again["error"]["type"] == "DuplicateDocumentError"


async def test_cancel_with_a_lost_answer_says_to_check_status_and_is_sent_once(sandbox):
    """The sandbox cancels and the answer is lost: exit 1, outcome unknown, the line and
    stderr name the status command; exactly one request. `status` then tells the truth."""
    mark = str(sandbox.record.mark)
    sandbox.script_operation(Fault.commit_then_drop())
    code, stdout, stderr = await run("cancel", "receiving-note", mark, env=sandbox.env)
    unknown = line(stdout)
    assert code == 1
    assert unknown["outcome"] == "unknown"
    assert unknown["next"] == f"invoicing-async status {mark}"
    assert f"invoicing-async status {mark}" in stderr
    assert unknown["error"]["type"] == "UnknownOutcomeError"
    cancels = [r for r in sandbox.requests if r.path == "/Invoice/cancelReceivingNote"]
    assert len(cancels) == 1
    code, stdout, _ = await run("status", mark, env=sandbox.env)
    status = line(stdout)
    assert code == 0
    assert status["body"]["lastStatus"] == "cancelled"
    assert status["cancellation_mark"] is not None
    assert sandbox.client_secret not in stdout + stderr


async def test_status_of_an_unknown_mark_is_refused(sandbox):
    """A mark the provider does not hold: outcome refused, the 404 in the error, exit 1."""
    code, stdout, _ = await run("status", "1", env=sandbox.env)
    refused = line(stdout)
    assert code == 1
    assert (refused["outcome"], refused["error"]["status"]) == ("refused", 404)


async def test_cancel_by_payload_and_params(sandbox):
    """--payload sends a JSON body and --param query parameters, as the provider's
    documentation may ask."""
    payload = json.dumps({"mark": sandbox.record.mark})
    code, stdout, _ = await run(
        "cancel", "delivery-note", "--payload", payload, "--param", "note=x", env=sandbox.env
    )
    assert code == 0
    assert line(stdout)["mark"] == sandbox.record.mark
    [request] = [r for r in sandbox.requests if r.path == "/Invoice/cancelDeliveryNote"]
    assert request.query == {"note": "x"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("cancel", "delivery-note", "12a"), "MARK must be a number"),
        (("cancel", "delivery-note"), "give the note's MARK"),
        (("cancel", "delivery-note", "1", "--param", "novalue"), "NAME=VALUE"),
        (("cancel", "delivery-note", "1", "--payload", "[1]"), "JSON object"),
        (("status",), "give the document's MARK"),
    ],
)
async def test_bad_usage_exits_2_with_one_line(sandbox, args, message):
    """Bad usage is one line on stderr and exit 2; nothing is sent."""
    code, stdout, stderr = await run(*args, env=sandbox.env)
    assert code == 2
    assert message in stderr
    assert stdout == ""
    assert not [r for r in sandbox.requests if "cancel" in r.path or "Status" in r.path]


def test_missing_credentials_exit_2():
    """Without credentials the command says which are missing (exit 2)."""
    completed = subprocess.run(
        [sys.executable, "-m", "invoicing_async", "status", "1"],
        capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert completed.returncode == 2
    assert "missing --base-url" in completed.stderr


def test_cancel_help_states_the_safety_rule():
    """`cancel --help` says a cancellation is never re-sent after a lost answer and to
    check with `status`."""
    completed = subprocess.run(
        [sys.executable, "-m", "invoicing_async", "cancel", "--help"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    text = " ".join(completed.stdout.split())
    assert "at most once" in text
    assert "NOT re-sent" in text
    assert "invoicing-async status MARK" in text
