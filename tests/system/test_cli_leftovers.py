"""What the command leaves behind, and how the sandbox service behaves at its edges.

Every test runs the real command in a subprocess; those about files give it a private
``TMPDIR`` and look at what is left there afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from invoicing_async import InvoicingClient, ProviderKey
from invoicing_sandbox import sample_invoices


def environ(tmp: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    return {**env, **extra}


@contextmanager
def sandbox_service(*args: str, env: dict[str, str], cwd: Path):
    """The `sandbox` command running; yields (banner lines, the process)."""
    command = [sys.executable, "-m", "invoicing_async", "sandbox", "--port", "0",
               "--key-algorithm", "cv25519", *args]  # fmt: skip
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd
    ) as process:
        assert process.stdout is not None
        banner: list[str] = []
        try:
            while not banner or banner[-1].strip() != "press Ctrl-C to stop":
                line = process.stdout.readline()
                assert line, process.stderr.read() if process.stderr else ""
                banner.append(line)
            yield banner, process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()  # then the test fails, instead of waiting for ever
                raise


def variables(banner: list[str]) -> dict[str, str]:
    return dict(line.split()[1].split("=", 1) for line in banner if line.startswith("  export "))


def test_sandbox_demo_and_a_ledger_batch_leave_nothing_in_the_temp_dir(tmp_path):
    """The sandbox service without --out (its files, with an API key, in a private
    temporary directory), a demo, and `submit --ledger` against the service: afterwards
    the temporary directory is as it was, and the ledger has no `.lock` beside it."""
    tmp, work = tmp_path / "tmp", tmp_path / "work"
    tmp.mkdir()
    work.mkdir()
    env = environ(tmp)
    with sandbox_service(env=env, cwd=work) as (banner, process):
        found = variables(banner)
        key_dir = Path(found["INVOICING_PROVIDER_KEY"]).parent
        assert key_dir.parent == tmp
        assert (key_dir / "invoicing.env").exists()
        source = work / "invoices.jsonl"
        source.write_text("".join(json.dumps(d) + "\n" for d in sample_invoices(5, lines=1)))
        submitted = subprocess.run(
            [sys.executable, "-m", "invoicing_async", "submit", str(source),
             "--ledger", str(work / "batch.db"), "--output", str(work / "out.jsonl")],
            env={**env, **found}, capture_output=True, text=True, timeout=120, check=False,
            cwd=work,
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    demo = subprocess.run(
        [sys.executable, "-m", "invoicing_async", "demo", "--count", "20",
         "--key-algorithm", "cv25519", "--output", str(work / "demo.jsonl")],
        env=env, capture_output=True, text=True, timeout=120, check=False, cwd=work,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr
    assert list(tmp.iterdir()) == []
    assert sorted(p.name for p in work.iterdir()) == [
        "batch.db", "demo.jsonl", "invoices.jsonl", "out.jsonl",
    ]  # fmt: skip


def test_port_in_use_is_one_line_saying_to_use_port_0(tmp_path):
    """A port already taken (8080 by default) is one line saying to use --port 0, exit 2,
    no OSError traceback; the private directory made for the files is removed."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "invoicing_async", "sandbox", "--port", str(port),
             "--key-algorithm", "cv25519"],
            env=environ(tmp_path), capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr == (
        f"invoicing-async: port {port} on 127.0.0.1 is in use: use --port 0 for any free port "
        "(the URLs printed say which), or another --port\n"
    )
    assert list(tmp_path.iterdir()) == []


def _abandoned_request(base_url: str, token: str, api_key: str) -> None:
    """A document request whose client dies after sending half of the body.

    The client waits for ``100 Continue`` first: the sandbox has then dispatched the
    request to its handler. A client that dies sooner may be gone before the server
    reads the request at all (aiohttp then drops it unseen, and logs nothing).
    """
    host, port = base_url.split("//")[1].split("/", maxsplit=1)[0].split(":")
    head = (
        f"POST /test/Invoice/json HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nAPIKey: {api_key}\r\nContent-Length: 1000\r\n"
        "Expect: 100-continue\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=60) as connection:
        connection.sendall(head.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = connection.recv(1024)
            assert chunk, answer
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 100"), answer
        connection.sendall(b'{"Series": "A",')


def test_killed_clients_are_quiet_and_out_keeps_the_provider_key(tmp_path):
    """Twenty clients dying mid-request print no traceback (one line each with -v);
    the env file pins the provider key (INVOICING_PROVIDER_FINGERPRINT) so from_env
    works; a restart with the same --out keeps the same provider key, so apps that
    loaded provider.asc keep working."""
    out = tmp_path / "out"
    env = environ()
    with sandbox_service("--out", str(out), "-v", env=env, cwd=tmp_path) as (banner, process):
        found = variables(banner)
        env_file = dict(line.split("=", 1) for line in (out / "invoicing.env").read_text().split())
        assert env_file == found
        key = ProviderKey.from_file(found["INVOICING_PROVIDER_KEY"])
        assert found["INVOICING_PROVIDER_FINGERPRINT"] == key.fingerprint
        assert InvoicingClient.from_env(found).provider_key == key
        form = (
            f"grant_type=client_credentials&client_id={found['INVOICING_CLIENT_ID']}"
            f"&client_secret={found['INVOICING_API_KEY']}"
        )
        url = found["INVOICING_BASE_URL"] + "/oauth/token"
        with urllib.request.urlopen(url, data=form.encode()) as answer:  # noqa: S310
            token = json.loads(answer.read())["access_token"]
        for _ in range(20):
            _abandoned_request(found["INVOICING_BASE_URL"], token, found["INVOICING_API_KEY"])
        assert process.stderr is not None
        seen = []  # the request log (-v): wait for the twenty lines, then stop it
        # A watchdog, not a wait: if a line never comes, the sandbox is killed, the read
        # ends, and the test fails showing the log instead of hanging.
        watchdog = threading.Timer(60, process.kill)
        watchdog.start()
        try:
            while sum("-> client gone" in line for line in seen) < 20:
                line = process.stderr.readline()
                assert line, "".join(seen)
                seen.append(line)
        finally:
            watchdog.cancel()
        process.send_signal(signal.SIGINT)
        stdout, rest = process.communicate(timeout=60)
        stderr = "".join(seen) + rest
    assert process.returncode == 0
    assert "Traceback" not in stderr
    assert "Error handling request" not in stderr
    assert stderr.count("-> client gone") == 20, stderr
    assert "client gone x20" in stdout
    first_key = (out / "provider.asc").read_text()

    with sandbox_service("--out", str(out), env=env, cwd=tmp_path) as (banner, _):
        assert variables(banner)["INVOICING_PROVIDER_FINGERPRINT"] == key.fingerprint
    assert (out / "provider.asc").read_text() == first_key
    assert oct((out / "provider-secret.asc").stat().st_mode & 0o777) == "0o600"


def test_ctrl_c_at_the_first_line_of_the_banner_stops_the_sandbox(tmp_path):
    """The banner ends "press Ctrl-C to stop": Ctrl-C works from its first line on, also
    for a sandbox started in the background (SIGINT inherited ignored, as from a shell
    without job control). Before, the banner came first and the handlers after it: a
    SIGINT in between was ignored, and the sandbox served on."""
    code = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "sys.argv[0] = 'invoicing-async'; runpy.run_module('invoicing_async', run_name='__main__')"
    )
    command = [sys.executable, "-c", code, "sandbox", "--port", "0", "--key-algorithm", "cv25519"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=environ(tmp_path), cwd=tmp_path,
    ) as process:  # fmt: skip
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("base URL:"), first
        process.send_signal(signal.SIGINT)
        try:
            stdout, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            pytest.fail("the SIGINT sent at the banner's first line was ignored")
    assert process.returncode == 0, stderr
    assert "sandbox stopped after" in stdout
