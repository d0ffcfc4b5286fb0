"""Configuration from INVOICING_* variables: one definition for the client and the command."""

from __future__ import annotations

import ssl

import pytest

from invoicing_async import InvoicingClient, ProviderKeyError
from invoicing_sandbox import Sandbox, cached_keypair, sample_invoice

SECRET = "SECRET-KEY-SENTINEL"


def test_from_env_requires_the_three_variables_and_names_them():
    """Missing variables are named in one ValueError; the API key never is."""
    with pytest.raises(ValueError) as caught:
        InvoicingClient.from_env({"INVOICING_API_KEY": SECRET})
    message = str(caught.value)
    assert "INVOICING_BASE_URL" in message
    assert "INVOICING_CLIENT_ID" in message
    assert "INVOICING_API_KEY" not in message  # given, so not missing
    assert SECRET not in message


def test_from_env_reads_key_file_pin_and_ca(tmp_path):
    """INVOICING_API_KEY_FILE (trailing newline dropped), INVOICING_PROVIDER_KEY pinned by
    INVOICING_PROVIDER_FINGERPRINT, INVOICING_CA_FILE; options win over variables."""
    key_file = tmp_path / "provider.asc"
    key_file.write_text(cached_keypair("cv25519").public_armored)
    api_key = tmp_path / "api-key"
    api_key.write_text(SECRET + "\n")
    environ = {
        "INVOICING_BASE_URL": "https://invoicing.example.com/",
        "INVOICING_CLIENT_ID": "094019245",
        "INVOICING_API_KEY_FILE": str(api_key),
        "INVOICING_PROVIDER_KEY": str(key_file),
    }
    client = InvoicingClient.from_env(environ, limit=7)
    assert client.base_url == "https://invoicing.example.com"
    assert client.limit == 7
    assert client.provider_key is not None
    assert client._channel._client_secret == SECRET
    with pytest.raises(ProviderKeyError) as caught:
        InvoicingClient.from_env({**environ, "INVOICING_PROVIDER_FINGERPRINT": "00" * 20})
    assert caught.value.reason == "fingerprint_mismatch"
    with pytest.raises(ValueError, match="CA file"):
        InvoicingClient.from_env({**environ, "INVOICING_CA_FILE": str(tmp_path / "none.pem")})


async def test_from_env_reaches_a_tls_sandbox(tmp_path):
    """The variables the sandbox service writes are enough for from_env over TLS."""
    async with Sandbox(tls=True, key_algorithm="cv25519") as sb:
        environ = {
            "INVOICING_BASE_URL": sb.base_url,
            "INVOICING_CLIENT_ID": sb.client_id,
            "INVOICING_API_KEY": sb.client_secret,
            "INVOICING_PROVIDER_KEY": str(sb.write_public_key(tmp_path / "p.asc")),
            "INVOICING_CA_FILE": str(sb.write_ca_certificate(tmp_path / "ca.pem")),
        }
        async with InvoicingClient.from_env(environ) as client:
            result = await client.submit_secure(sample_invoice(1))
        assert result.mark is not None
        assert isinstance(client._engine.transport._ssl, ssl.SSLContext)
