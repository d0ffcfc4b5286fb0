"""The ``INVOICING_*`` variables of a running sandbox, for clients configured by them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from invoicing_async._for_sandbox import (
    ENV_API_KEY,
    ENV_BASE_URL,
    ENV_CA_FILE,
    ENV_CLIENT_ID,
    ENV_PROVIDER_FINGERPRINT,
    ENV_PROVIDER_KEY,
)

if TYPE_CHECKING:
    import os
    from pathlib import Path

    from invoicing_async import ProviderKey

__all__ = ["client_variables"]


class _Running(Protocol):
    """What is read of a running :class:`~invoicing_sandbox.Sandbox`."""

    @property
    def base_url(self) -> str: ...
    @property
    def client_id(self) -> str: ...
    @property
    def client_secret(self) -> str: ...
    @property
    def provider_key(self) -> ProviderKey: ...
    @property
    def ca_certificate(self) -> str | None: ...
    def write_public_key(self, path: str | os.PathLike[str]) -> Path: ...
    def write_ca_certificate(self, path: str | os.PathLike[str]) -> Path: ...


def client_variables(sandbox: _Running, directory: Path) -> dict[str, str]:
    """What ``InvoicingClient.from_env()`` reads to reach ``sandbox``.

    Base URL, credentials, the provider key (a file in ``directory``) and its pin, and
    the CA file of a TLS sandbox.
    """
    key_file = sandbox.write_public_key(directory / "provider.asc")
    variables = {
        ENV_BASE_URL: sandbox.base_url,
        ENV_CLIENT_ID: sandbox.client_id,
        ENV_API_KEY: sandbox.client_secret,
        ENV_PROVIDER_KEY: str(key_file.resolve()),
        ENV_PROVIDER_FINGERPRINT: sandbox.provider_key.fingerprint,
    }
    if sandbox.ca_certificate is not None:
        ca_file = sandbox.write_ca_certificate(directory / "ca.pem")
        variables[ENV_CA_FILE] = str(ca_file.resolve())
    return variables
