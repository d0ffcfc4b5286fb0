"""The invoicing-async command: subcommands and bad input, run as a user would."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from invoicing_async._cli import main


def run_cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "invoicing_async", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        input=stdin,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def provider_key_file(tmp_path_factory):
    from invoicing_sandbox import generate_keypair  # noqa: PLC0415

    path = tmp_path_factory.mktemp("keys") / "provider.asc"
    path.write_text(generate_keypair("cv25519").public_armored)
    return path


def test_key_usable(provider_key_file, capsys):
    """`key` prints fingerprint, chosen subkey, algorithm and a usable verdict."""
    assert main(["key", str(provider_key_file)]) == 0
    out = capsys.readouterr().out
    assert "verdict:      usable" in out
    assert "Curve25519" in out


def test_key_refused_with_reason(tmp_path, capsys):
    """`key` on something that is not a public key says why and exits 1."""
    path = tmp_path / "not-a-key.asc"
    path.write_text("hello")
    assert main(["key", str(path)]) == 1
    assert "REFUSED (unreadable)" in capsys.readouterr().out


def test_key_pin_match_is_said(provider_key_file, capsys):
    """With --fingerprint, a usable key's report says the pin matched."""
    from invoicing_async import ProviderKey  # noqa: PLC0415

    fingerprint = ProviderKey.from_file(provider_key_file).fingerprint
    assert main(["key", str(provider_key_file), "--fingerprint", fingerprint]) == 0
    out = capsys.readouterr().out
    assert "pin:          matches --fingerprint" in out
    assert main(["key", str(provider_key_file)]) == 0
    assert "pin:" not in capsys.readouterr().out


def test_key_pin_mismatch(provider_key_file, capsys):
    """A fingerprint pin that does not match is refused."""
    assert main(["key", str(provider_key_file), "--fingerprint", "00" * 20]) == 1
    assert "fingerprint_mismatch" in capsys.readouterr().out


def test_submit_without_credentials_is_one_clear_line():
    """Missing credentials: one line on stderr naming what is missing, exit 2, no traceback."""
    env = dict.fromkeys(("INVOICING_BASE_URL", "INVOICING_CLIENT_ID", "INVOICING_API_KEY"), "")
    result = run_cli("submit", "--json", "-", env=env, stdin="{}")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert "--base-url" in result.stderr


def test_submit_with_unreadable_provider_key(tmp_path):
    """An unreadable provider key file is one line and exit 2, not a traceback."""
    env = {
        "INVOICING_BASE_URL": "http://127.0.0.1:9",
        "INVOICING_CLIENT_ID": "123456789",
        "INVOICING_API_KEY": "KEY-SENTINEL-1",
    }
    result = run_cli(
        "submit", "--provider-key", str(tmp_path / "missing.asc"), "-", env=env, stdin="{}"
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "missing.asc" in result.stderr
    assert "KEY-SENTINEL" not in result.stderr + result.stdout


def test_plain_http_to_a_remote_host_refused():
    """`token` against plain http on a non-loopback host is refused before any request."""
    env = {
        "INVOICING_BASE_URL": "http://api.provider.example",
        "INVOICING_CLIENT_ID": "123456789",
        "INVOICING_API_KEY": "KEY-SENTINEL-1",
    }
    result = run_cli("token", env=env)
    assert result.returncode == 2
    assert "refusing plain http" in result.stderr
    assert "KEY-SENTINEL" not in result.stderr + result.stdout


def test_help_lists_subcommands():
    """--help names every subcommand."""
    result = run_cli("--help")
    assert result.returncode == 0
    for name in ("demo", "sandbox", "submit", "token", "key", "outbox", "worker", "ledger"):
        assert name in result.stdout


async def run_cli_async(*args: str, env: dict[str, str], stdin: bytes | None = None):
    import asyncio  # noqa: PLC0415

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "invoicing_async",
        *args,
        env={**os.environ, **env},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(stdin), 120)
    return process.returncode, stdout.decode(), stderr.decode()


@pytest.fixture
async def sandbox_env(tmp_path):
    from invoicing_sandbox import Sandbox  # noqa: PLC0415

    async with Sandbox(key_algorithm="cv25519") as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        env = {
            "INVOICING_BASE_URL": sb.base_url,
            "INVOICING_CLIENT_ID": sb.client_id,
            "INVOICING_API_KEY": sb.client_secret,
            "INVOICING_PROVIDER_KEY": str(key_file),
        }
        yield sb, env


async def test_submit_files_directory_jsonl_and_stdin(sandbox_env, tmp_path):
    """`submit` reads JSON files, directories, JSON Lines and stdin; one outcome line each;
    exit 0 when everything was accepted; the API key is never echoed."""
    from invoicing_sandbox import sample_invoices  # noqa: PLC0415

    sb, env = sandbox_env
    docs = sample_invoices(6, issuer_vat=sb.client_id, lines=1)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(docs[0]))
    (folder / "b.json").write_text(json.dumps([docs[1], docs[2]]))
    single = tmp_path / "c.jsonl"
    single.write_text(json.dumps(docs[3]) + "\n" + json.dumps(docs[4]) + "\n")
    output = tmp_path / "out.jsonl"
    code, stdout, stderr = await run_cli_async(
        "submit", str(folder), str(single), "-", "--output", str(output),
        env=env, stdin=json.dumps(docs[5]).encode(),
    )  # fmt: skip
    assert code == 0, stderr
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(lines) == 6
    assert all(line["status"] == "accepted" and line["result"]["mark"] for line in lines)
    assert len(sb.committed) == 6
    assert sb.client_secret not in stdout + stderr + output.read_text()


async def test_submit_malformed_line_is_reported_and_nothing_is_lost(sandbox_env, tmp_path):
    """A malformed JSON line is one clear stderr line and a rejected outcome; the other
    documents are submitted and written; the exit status is 1."""
    from invoicing_sandbox import sample_invoices  # noqa: PLC0415

    sb, env = sandbox_env
    docs = sample_invoices(2, issuer_vat=sb.client_id, lines=1)
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps(docs[0]) + "\n{not json\n" + json.dumps(docs[1]) + "\n")
    output = tmp_path / "out.jsonl"
    code, _, stderr = await run_cli_async(
        "submit", "--json", str(source), "--output", str(output), env=env
    )
    assert code == 1
    assert "Traceback" not in stderr
    assert f"{source}:2:2: invalid JSON" in stderr
    statuses = [json.loads(line)["status"] for line in output.read_text().splitlines()]
    assert sorted(statuses) == ["accepted", "accepted", "rejected"]
    assert len(sb.committed) == 2


async def test_token_prints_lifetime_not_the_token(sandbox_env):
    """`token` checks credentials and prints the lifetime, never the token unless asked."""
    _, env = sandbox_env
    code, stdout, _ = await run_cli_async("token", env=env)
    assert code == 0
    assert "valid for 900 s" in stdout
    assert len(stdout.strip().splitlines()) == 1
    code, stdout, _ = await run_cli_async("token", "--show-token", env=env)
    assert code == 0
    assert len(stdout.strip().splitlines()) == 2


async def test_token_wrong_environment_fails_cleanly(sandbox_env):
    """Credentials of one environment on another: one line, exit 1, invalid_request."""
    sb, env = sandbox_env
    other = sb.environment("production")
    code, _, stderr = await run_cli_async(
        "token", env={**env, "INVOICING_BASE_URL": other.base_url}
    )
    assert code == 1
    assert "invalid_request" in stderr
    assert "Traceback" not in stderr
    assert sb.client_secret not in stderr


def test_demo_finishes_and_writes_results(tmp_path):
    """`demo` runs with zero configuration and writes one result line per invoice."""
    output = tmp_path / "demo.jsonl"
    result = run_cli("demo", "--output", str(output))
    assert result.returncode == 0, result.stderr
    assert "accepted:" in result.stdout
    assert "tokens:      1 request(s)" in result.stdout
    # Rejections are part of the show, and the summary says so (exit 0 all the same).
    assert re.search(r"^rejected:\s+3$", result.stdout, re.MULTILINE)
    assert (
        "expected:    3 rejected and 6 duplicate(s): the demo breaks 3 invoice(s) on purpose"
        in (result.stdout)
    )
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert len(lines) == 300
    statuses = {line["status"] for line in lines}
    assert {"accepted", "duplicate", "rejected"} <= statuses
    assert "unknown" not in statuses
    assert "not_sent" not in statuses


def test_sandbox_command_serves_until_interrupted(tmp_path):
    """`sandbox` prints its base URL, credentials and key path, writes nothing into the
    current directory (its files go to a private temporary directory), serves, and stops
    on SIGINT with a summary."""
    import signal  # noqa: PLC0415
    import socket  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [
        sys.executable, "-m", "invoicing_async", "sandbox", "--port", str(port),
        "--key-algorithm", "cv25519",
    ]  # fmt: skip
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    ) as process:
        try:
            lines = [process.stdout.readline() for _ in range(4)]
            assert lines[0].startswith("base URL:")
            base_url = lines[0].split()[-1]
            client_id = lines[1].split()[-1]
            api_key = lines[2].split()[-1]
            key_file = Path(lines[3].split()[2])
            assert key_file.exists()
            assert tmp_path not in key_file.parents
            assert oct(key_file.parent.stat().st_mode & 0o777) == "0o700"
            form = f"grant_type=client_credentials&client_id={client_id}&client_secret={api_key}"
            with urllib.request.urlopen(f"{base_url}/oauth/token", data=form.encode()) as answer:  # noqa: S310
                assert json.loads(answer.read())["expires_in"] == 900
        finally:
            process.send_signal(signal.SIGINT)
            stdout, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    assert "sandbox stopped after" in stdout
    assert "1 token request(s)" in stdout
    assert list(tmp_path.iterdir()) == []
    assert not key_file.parent.exists()  # its private directory (with the API key) is gone


def test_every_option_has_help_and_the_key_variable_holds_the_key():
    """Every option and argument of every subcommand has a help text; --api-key-file's
    says that $INVOICING_API_KEY holds the key itself (not a path)."""
    import argparse  # noqa: PLC0415

    from invoicing_async._cli.command import _parser  # noqa: PLC0415

    parser = _parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(subparsers.choices) >= {"demo", "sandbox", "submit", "token", "key"}
    for name, command in [("", parser), *subparsers.choices.items()]:
        for action in command._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            assert action.help, f"{name} {action.option_strings or action.dest}"
    submit = subparsers.choices["submit"].format_help()
    assert "the key itself in $INVOICING_API_KEY" in " ".join(submit.split())


def test_version_and_verbose_flags():
    """--version prints the installed version; -v is accepted before or after the
    subcommand."""
    from importlib.metadata import version  # noqa: PLC0415

    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"invoicing-async {version('invoicing-async')}"
    for args in (("-v", "key", "--help"), ("key", "-vv", "--help")):
        assert run_cli(*args).returncode == 0
