"""TLS for the sandbox run as a service: a private CA and a server certificate, made here.

A sandbox listening on a network (``--host 0.0.0.0`` in a container) serves HTTPS, since
the client refuses plain http to any host but loopback, and rightly. Clients trust the
sandbox by its CA certificate (``ssl=ssl.create_default_context(cafile=...)``, or
``INVOICING_CA_FILE``), which is all that is written to disk; the private keys stay in
memory except for the moment :mod:`ssl` needs them in a file (0600, deleted at once).

A CA plus a leaf, rather than one self-signed leaf: verifiers in strict mode (Python 3.13
defaults to ``VERIFY_X509_STRICT``) refuse a leaf used as its own trust anchor. Keys are
P-256 (milliseconds to make); the leaf names every host name and address given.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
import ssl
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["ServerCertificate", "default_names"]

_LIFETIME = dt.timedelta(days=30)


def default_names(host: str) -> list[str]:
    """The names a client may use for a sandbox on ``host``: loopback, and this machine."""
    names = ["localhost", "127.0.0.1", "::1"]
    if host not in ("", "127.0.0.1", "::1", "localhost"):
        names += [socket.gethostname(), socket.getfqdn()]
        if host not in ("0.0.0.0", "::"):  # noqa: S104  (a name, not a bind)
            names.append(host)
    return list(dict.fromkeys(name for name in names if name))


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


class ServerCertificate:
    """A fresh CA and a server certificate for ``names``; the CA's PEM is public.

    :param names: DNS names and IP addresses the certificate is valid for.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self.names = list(dict.fromkeys(names))
        if not self.names:
            raise ValueError("a certificate needs at least one name")
        now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "invoicing_async sandbox CA")])
        ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + _LIFETIME)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(ca_ski, critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        self._key = ec.generate_private_key(ec.SECP256R1())
        leaf = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.names[0])]))
            .issuer_name(ca_name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + _LIFETIME)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.SubjectAlternativeName([_general_name(name) for name in self.names]),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        #: The CA certificate (PEM): what clients trust.
        self.ca_pem = ca.public_bytes(serialization.Encoding.PEM).decode("ascii")
        self._leaf_pem = leaf.public_bytes(serialization.Encoding.PEM)

    def write_ca(self, path: str | os.PathLike[str]) -> Path:
        """Write the CA certificate (public) to ``path`` and return it."""
        target = Path(path)
        target.write_text(self.ca_pem, encoding="ascii")
        return target

    def server_context(self) -> ssl.SSLContext:
        """The server side's context (TLS 1.2 or later) with the certificate and its key."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        key_pem = self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        # ssl loads keys from files only: a private directory, removed at once.
        with tempfile.TemporaryDirectory(prefix="invoicing-sandbox-tls-") as directory:
            chain = Path(directory) / "server.pem"
            fd = os.open(chain, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(key_pem + self._leaf_pem)
            context.load_cert_chain(chain)
        return context

    def client_context(self) -> ssl.SSLContext:
        """A verifying client context trusting this CA (for ``InvoicingClient(ssl=...)``)."""
        context = ssl.create_default_context()
        context.load_verify_locations(cadata=self.ca_pem)
        return context
