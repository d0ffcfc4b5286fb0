"""The sandbox as a service: defaults that work, TLS, read-only endpoints, logs, the command."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from invoicing_async import InvoicingClient, TransportError, document_key
from invoicing_sandbox import SANDBOX_CLIENT_ID, Fault, Sandbox, sample_invoice

ROOT = Path(__file__).resolve().parents[2]


async def test_default_sandbox_accepts_default_samples():
    """`Sandbox()` and `sample_invoice(1)`, both with defaults, go together: accepted
    (it was a 401, the sample's issuer not being the sandbox's client)."""
    async with Sandbox() as sb:
        assert sb.client_id == SANDBOX_CLIENT_ID
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client:
            result = await client.submit_secure(sample_invoice(1))
        assert sb.committed[document_key(sample_invoice(1))].record == result
        assert sb.environment("production").client_id != SANDBOX_CLIENT_ID


async def test_tls_sandbox_with_the_real_client():
    """`Sandbox(tls=True)` serves HTTPS over loopback; the client trusts it through
    `client_ssl_context()` and verifies it (without the CA: a TransportError, not sent)."""
    async with Sandbox(tls=True, key_algorithm="cv25519") as sb:
        assert sb.url.startswith("https://127.0.0.1:")
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret,
            provider_key=sb.provider_key, ssl=sb.client_ssl_context(),
        ) as client:  # fmt: skip
            result = await client.submit_secure(sample_invoice(2))
        assert result.mark == sb.committed[document_key(sample_invoice(2))].record.mark
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as untrusting:
            with pytest.raises(TransportError) as caught:
                await untrusting.token()
        assert caught.value.maybe_sent is False
        assert "certificate" in caught.value.message
        assert "BEGIN CERTIFICATE" in (sb.ca_certificate or "")


def _get(url: str, context=None) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(url, context=context, timeout=30) as answer:  # noqa: S310
            body = answer.read()
            status = answer.status
    except urllib.error.HTTPError as exc:
        body, status = exc.read(), exc.code
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body.decode()


async def test_read_only_endpoints_show_stats_documents_and_status():
    """/_sandbox/ shows stats, the committed documents and one document's status by
    identity (404 when not held), the request log and the provider key; they are not
    counted in the request log and never show an API key."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.script(Fault.commit_then_drop())
        invoice = sample_invoice(3)
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            await client.submit_json(invoice)
        requests_before = len(sb.requests)

        def read_all():
            base = sb.inspect_url
            return {
                path: _get(base + path)
                for path in ("/", "/stats", "/documents", "/requests", "/provider-key",
                             f"/documents/{document_key(invoice)}", "/documents/id:nothing",
                             "/nothing")
            }  # fmt: skip

        answers = await asyncio.to_thread(read_all)
        status, index = answers["/"]
        assert status == 200
        assert [env["name"] for env in index["environments"]] == ["test", "production"]
        assert sb.client_secret not in json.dumps(answers)
        assert answers["/stats"][1]["submissions"] == {"409": 1, "drop": 1}
        assert answers["/stats"][1]["commits"] == 1
        [held] = answers["/documents"][1]["documents"]
        assert held["identity"] == document_key(invoice)
        status, one = answers[f"/documents/{document_key(invoice)}"]
        assert (status, one["status"], one["commits"]) == (200, "committed", 1)
        assert one["record"]["mark"] == held["mark"]
        assert answers["/documents/id:nothing"][0] == 404
        assert answers["/nothing"][0] == 404
        assert len(answers["/requests"][1]["requests"]) == requests_before
        assert "BEGIN PGP PUBLIC KEY BLOCK" in answers["/provider-key"][1]
        assert len(sb.requests) == requests_before  # inspection is not logged


async def test_read_only_endpoints_cannot_collide_with_an_environment():
    """No environment can be named like the inspection prefix."""
    with pytest.raises(ValueError):
        Sandbox(environments=("_sandbox",))


async def test_request_log_line_per_request(caplog):
    """Each request is one INFO line on `invoicing_async.sandbox`: method, path, status,
    document identity, attempt, fault; never the API key or a token."""
    caplog.set_level(logging.INFO, logger="invoicing_async.sandbox")
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.script(Fault.status(503, retry_after=0))
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            await client.submit_json(sample_invoice(4))
    lines = [r.getMessage() for r in caplog.records if r.name == "invoicing_async.sandbox"]
    assert len(lines) == 3
    assert lines[0].startswith("POST /test/oauth/token -> 200")
    key = document_key(sample_invoice(4))
    assert lines[1].startswith("POST /test/Invoice/json -> 503, fault status:503")
    assert f"-> 201, document {key} attempt 1, client {sb.client_id}" in lines[2]
    assert not any(sb.client_secret in line for line in lines)


async def test_latency_delays_document_requests():
    """`set_latency` delays every document request (the service's --latency)."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.set_latency(0.2)
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            await client.token()
            started = asyncio.get_running_loop().time()
            await client.submit_json(sample_invoice(5))
            assert asyncio.get_running_loop().time() - started >= 0.2
        with pytest.raises(ValueError):
            sb.set_latency(-1)


def test_seeded_sandboxes_have_the_same_credentials():
    """`seed` gives the same credentials on every run (the service's --seed)."""
    first, second = Sandbox(seed=7), Sandbox(seed=7)
    assert first.client_secret == second.client_secret
    assert Sandbox(seed=8).client_secret != first.client_secret


def test_sandbox_command_as_a_network_service(tmp_path):
    """`sandbox --host 0.0.0.0 --name localhost`: HTTPS with a CA it writes (not into the
    current directory) and prints, an env file; `submit` with that env file reaches it
    over TLS; -v logs each request; SIGTERM stops it with a summary."""
    out = tmp_path / "sandbox"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    every_interface = "0.0.0.0"  # noqa: S104  (the service's bind; reached over loopback only)
    command = [
        sys.executable, "-m", "invoicing_async", "sandbox", "--host", every_interface, "--port", "0",
        "--name", "localhost", "--out", str(out), "--key-algorithm", "cv25519", "--seed", "5",
        "--faults", "0.2", "-v",
    ]  # fmt: skip
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd
    ) as process:
        try:
            banner = []
            while not banner or banner[-1].strip() != "press Ctrl-C to stop":
                line = process.stdout.readline()
                assert line, process.stderr.read()
                banner.append(line)
            text = "".join(banner)
            assert "base URL:      https://localhost:" in text
            assert f"CA file:       {out / 'ca.pem'}" in text
            variables = dict(
                line.split("=", 1) for line in (out / "invoicing.env").read_text().splitlines()
            )
            assert variables["INVOICING_BASE_URL"].startswith("https://localhost:")
            assert oct((out / "invoicing.env").stat().st_mode & 0o777) == "0o600"
            source = tmp_path / "invoices.jsonl"
            source.write_text("".join(json.dumps(sample_invoice(n)) + "\n" for n in range(1, 9)))
            env = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}
            submitted = subprocess.run(
                [sys.executable, "-m", "invoicing_async", "submit", str(source)],
                env={**env, **variables}, capture_output=True, text=True, timeout=120,
                check=False,
            )  # fmt: skip
            assert submitted.returncode == 0, submitted.stderr
            assert len(submitted.stdout.splitlines()) == 8
        finally:
            process.send_signal(signal.SIGTERM)
            stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0
    assert "sandbox stopped after" in stdout
    assert "8 commit(s)" in stdout
    assert "POST /test/Invoice/secure -> 201" in stderr
    assert list(cwd.iterdir()) == []
