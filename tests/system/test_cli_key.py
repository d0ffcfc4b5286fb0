"""`invoicing-async key FILE`: a refusal is one line a person can act on."""

from __future__ import annotations

import os

import keyfactory as kf
import pytest
import trickykeys as tk

from invoicing_async._cli import main

ACTIONS = ("ask the provider", "give the provider's public key", "confirm the fingerprint")

CASES = [
    pytest.param(kf.garbage, "unreadable", id="not-a-key"),
    pytest.param(kf.v6_x25519, "unsupported_version", id="v6"),
    pytest.param(kf.secret_key_block, "secret_key", id="secret", marks=pytest.mark.interop),
    pytest.param(
        lambda: kf.expired_primary().armored, "expired", id="expired", marks=pytest.mark.interop
    ),
    pytest.param(lambda: kf.rsa1024().armored, "weak_rsa", id="rsa1024", marks=pytest.mark.interop),
    pytest.param(
        tk.js("x25519-only"), "unsupported_algorithm", id="x25519-only", marks=pytest.mark.interop
    ),
    pytest.param(
        tk.gpg_sha1_since_cutoff, "weak_hash", id="sha1-since-2023", marks=pytest.mark.interop
    ),
    pytest.param(
        lambda: kf.only_subkey_revoked().armored,
        "no_encryption_subkey",
        id="revoked-subkey",
        marks=pytest.mark.interop,
    ),
    pytest.param(tk.bc_future_primary, "not_yet_valid", id="future", marks=pytest.mark.interop),
]


@pytest.mark.parametrize(("make", "reason"), CASES)
def test_refusal_is_one_actionable_line(make, reason, tmp_path, capsys):
    """The refusal is a single line naming the reason code and what to ask for or do."""
    path = tmp_path / "provider.asc"
    data = make()
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    assert main(["key", str(path)]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"verdict:      REFUSED ({reason}): ")
    assert any(action in lines[0] for action in ACTIONS), lines[0]


@pytest.mark.interop
def test_pin_mismatch_says_to_confirm_the_fingerprint(tmp_path, capsys):
    """A pin that does not match tells the user to confirm the fingerprint out of band."""
    path = tmp_path / "provider.asc"
    path.write_text(kf.cv25519().armored)
    assert main(["key", str(path), "--fingerprint", "00" * 20]) == 1
    line = capsys.readouterr().out.strip()
    assert "REFUSED (fingerprint_mismatch)" in line
    assert "confirm the fingerprint" in line


@pytest.mark.parametrize("command", ["submit", "worker"])
def test_a_missing_provider_key_says_where_to_get_one_not_to_send_unencrypted(
    command, tmp_path, capsys, monkeypatch
):
    """``submit`` and ``worker`` without a provider key stop with one line (exit 2) that
    says what to give (``--provider-key`` or the variable), where the key comes from and
    how to check it; it does not offer ``--json`` (sending documents unencrypted) as the
    fix, and nothing is sent."""
    for name in list(os.environ):
        if name.startswith("INVOICING_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("INVOICING_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("INVOICING_CLIENT_ID", "094019245")
    monkeypatch.setenv("INVOICING_API_KEY", "not-a-real-key")
    document = tmp_path / "invoice.json"
    document.write_text("{}", encoding="utf-8")
    arguments = {
        "submit": ["submit", str(document)],
        "worker": ["worker", "--ledger", str(tmp_path / "outbox.db")],
    }[command]
    assert main(arguments) == 2
    said = capsys.readouterr().err.strip()
    assert len(said.splitlines()) == 1, said
    assert "--provider-key" in said
    assert "INVOICING_PROVIDER_KEY" in said
    assert "invoicing-async key" in said
    assert "--json" not in said
    assert not (tmp_path / "outbox.db").exists()
