"""Configuration from ``INVOICING_*`` environment variables: one definition for all readers.

:meth:`InvoicingClient.from_env <invoicing_async.InvoicingClient.from_env>` and the
``invoicing-async`` command read the same variables through :func:`read_settings`, so
a deployment configured for one works with the other:

======================================  ===================================================
``INVOICING_BASE_URL``                  the environment's base URL
``INVOICING_CLIENT_ID``                 the issuer's TIN
``INVOICING_API_KEY``                   the API key itself
``INVOICING_API_KEY_FILE``              a file holding the API key (a mounted secret)
``INVOICING_PROVIDER_KEY``              a file holding the provider's public key
``INVOICING_PROVIDER_FINGERPRINT``      the fingerprint that key must have (a pin)
``INVOICING_CA_FILE``                   PEM certificates to trust besides the system's
======================================  ===================================================

A trailing newline (from a shell, a file or a ``.env`` line) is never part of a value.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from invoicing_async._doc.pgp import ProviderKey

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "ENV_API_KEY",
    "ENV_API_KEY_FILE",
    "ENV_BASE_URL",
    "ENV_CA_FILE",
    "ENV_CLIENT_ID",
    "ENV_PROVIDER_FINGERPRINT",
    "ENV_PROVIDER_KEY",
    "Settings",
    "client_arguments",
    "read_settings",
    "ssl_context",
]

ENV_BASE_URL = "INVOICING_BASE_URL"
ENV_CLIENT_ID = "INVOICING_CLIENT_ID"
ENV_API_KEY = "INVOICING_API_KEY"
ENV_API_KEY_FILE = "INVOICING_API_KEY_FILE"
ENV_PROVIDER_KEY = "INVOICING_PROVIDER_KEY"
ENV_PROVIDER_FINGERPRINT = "INVOICING_PROVIDER_FINGERPRINT"
ENV_CA_FILE = "INVOICING_CA_FILE"


@attrs.frozen(kw_only=True)
class Settings:
    """What the variables (or the options that override them) say; ``None``: not given."""

    base_url: str | None
    client_id: str | None
    api_key: str | None = attrs.field(repr=False)
    provider_key: str | None
    fingerprint: str | None
    ca_file: str | None

    def missing(self, *, labels: Mapping[str, str] | None = None) -> list[str]:
        """The required settings that are not given, named by ``labels`` or variable."""
        names = {
            "base_url": ENV_BASE_URL,
            "client_id": ENV_CLIENT_ID,
            "api_key": f"{ENV_API_KEY} (or {ENV_API_KEY_FILE})",
            **(labels or {}),
        }
        return [label for field, label in names.items() if not getattr(self, field)]


def _clean(value: str | None) -> str | None:
    value = (value or "").strip()
    return value or None


def _read_key_file(path: str, origin: str) -> str | None:
    try:
        return _clean(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise ValueError(f"cannot read the API key file {path} ({origin}): {reason}") from None


def read_settings(
    environ: Mapping[str, str],
    *,
    base_url: str | None = None,
    client_id: str | None = None,
    api_key_file: str | None = None,
    provider_key: str | None = None,
    fingerprint: str | None = None,
    ca_file: str | None = None,
) -> Settings:
    """The settings from ``environ``; a value given here wins over its variable.

    The API key comes from ``api_key_file``, else ``INVOICING_API_KEY``, else the file
    ``INVOICING_API_KEY_FILE`` names.

    :raises ValueError: an API key file that cannot be read (the message names the file,
        never its content).
    """
    if api_key_file:
        api_key = _read_key_file(api_key_file, "--api-key-file")
    elif _clean(environ.get(ENV_API_KEY)):
        api_key = _clean(environ.get(ENV_API_KEY))
    elif _clean(environ.get(ENV_API_KEY_FILE)):
        api_key = _read_key_file(str(_clean(environ.get(ENV_API_KEY_FILE))), ENV_API_KEY_FILE)
    else:
        api_key = None
    return Settings(
        base_url=_clean(base_url) or _clean(environ.get(ENV_BASE_URL)),
        client_id=_clean(client_id) or _clean(environ.get(ENV_CLIENT_ID)),
        api_key=api_key,
        provider_key=_clean(provider_key) or _clean(environ.get(ENV_PROVIDER_KEY)),
        fingerprint=_clean(fingerprint) or _clean(environ.get(ENV_PROVIDER_FINGERPRINT)),
        ca_file=_clean(ca_file) or _clean(environ.get(ENV_CA_FILE)),
    )


def ssl_context(ca_file: str | None) -> ssl.SSLContext | None:
    """A verifying context trusting the system's CAs and those in ``ca_file`` (``None``: none).

    :raises ValueError: the file cannot be read or holds no certificate.
    """
    if ca_file is None:
        return None
    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load the CA file {ca_file}: {exc}") from None
    return context


def client_arguments(environ: Mapping[str, str]) -> tuple[tuple[str, str, str], dict[str, object]]:
    """``InvoicingClient``'s positional arguments and options, from ``environ``.

    :raises ValueError: a required variable is missing, or a file cannot be read.
    :raises ProviderKeyError: the provider key cannot be used, or fails its pin.
    """
    settings = read_settings(environ)
    missing = settings.missing()
    if missing:
        raise ValueError("missing environment variable(s): " + ", ".join(missing))
    options: dict[str, object] = {}
    if settings.provider_key is not None:
        options["provider_key"] = ProviderKey.from_file(
            settings.provider_key, fingerprint=settings.fingerprint
        )
    context = ssl_context(settings.ca_file)
    if context is not None:
        options["ssl"] = context
    positional = (str(settings.base_url), str(settings.client_id), str(settings.api_key))
    return positional, options
