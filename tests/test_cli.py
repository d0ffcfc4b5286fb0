"""The invoicing-async command: subcommands and bad input, run as a user would."""

from __future__ import annotations

import json
import os
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
    from invoicing_async.sandbox._openpgp import generate_keypair  # noqa: PLC0415

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


def test_key_pin_mismatch(provider_key_file, capsys):
    """A fingerprint pin that does not match is refused."""
    assert main(["key", str(provider_key_file), "--fingerprint", "00" * 20]) == 1
    assert "fingerprint_mismatch" in capsys.readouterr().out


def test_submit_without_credentials_is_one_clear_line():
    """Missing credentials: one line on stderr naming what is missing, exit 2, no traceback."""
    env = {k: "" for k in ("INVOICING_BASE_URL", "INVOICING_CLIENT_ID", "INVOICING_API_KEY")}
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
    for name in ("demo", "sandbox", "submit", "token", "key"):
        assert name in result.stdout
