"""Adversarial: messages made by independent OpenPGP implementations reach the sandbox.

Sequoia (``sq encrypt``) and GnuPG encrypt a document to the sandbox's public key, with
their own choices of compression, padding, cipher and packet framing; the result is sent
unchanged with ``client.send_prepared(body, encrypted=True)`` and must be decrypted and
committed byte-exact. (GnuPG with its defaults against an RSA key is covered in
tests/test_sandbox.py; the library's own messages decrypting in gpg and sq are covered in
tests/test_interop.py.)
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from invoicing_async import InvoicingClient, document_key
from invoicing_async._documents import serialize_document
from invoicing_async.sandbox import Sandbox, sample_invoice

pytestmark = pytest.mark.interop

SQ = shutil.which("sq")
GPG = shutil.which("gpg")


def sq_encrypt(public_key: str, plaintext: bytes, *options: str) -> bytes:
    with tempfile.TemporaryDirectory() as home:
        cert = Path(home) / "provider.asc"
        cert.write_text(public_key)
        command = [SQ, "encrypt", "--recipient-cert", str(cert), *options]
        env = {**os.environ, "SEQUOIA_HOME": home, "HOME": home}
        return subprocess.run(
            command, input=plaintext, capture_output=True, check=True, env=env, timeout=60
        ).stdout


def gpg_encrypt(public_key: str, fingerprint: str, plaintext: bytes, *options: str) -> bytes:
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "GNUPGHOME": home}
        key_path = Path(home) / "provider.asc"
        key_path.write_text(public_key)
        run = {"env": env, "capture_output": True, "timeout": 60}
        subprocess.run([GPG, "--batch", "--quiet", "--import", str(key_path)], check=True, **run)
        command = [GPG, "--batch", "--quiet", "--trust-model", "always", *options]
        command += ["--encrypt", "--recipient", fingerprint]
        return subprocess.run(command, input=plaintext, check=True, **run).stdout


async def submit_foreign(sb: Sandbox, encrypt, number: int) -> None:
    """Encrypt document ``number`` with ``encrypt`` and check the sandbox commits it."""
    document = sample_invoice(number, issuer_vat=sb.client_id, lines=3)
    plaintext = serialize_document(document)
    body = await asyncio.to_thread(encrypt, plaintext)
    async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
        result = await client.send_prepared(body, encrypted=True)
    committed = sb.committed[document_key(document)]
    assert committed.body == plaintext  # byte-exact
    assert committed.encrypted
    assert committed.record == result


@pytest.mark.skipif(SQ is None, reason="sq (Sequoia) is not installed")
@pytest.mark.parametrize("algorithm", ["cv25519", "rsa3072"])
@pytest.mark.parametrize(
    "options",
    [
        (),
        ("--compression", "none"),
        ("--compression", "zip"),
        ("--compression", "zlib"),
        ("--compression", "bzip2"),
        ("--binary",),
    ],
    ids=["default-pad", "uncompressed", "zip", "zlib", "bzip2", "binary"],
)
async def test_sequoia_encrypted_document_is_accepted(algorithm, options):
    """A document ``sq encrypt`` encrypts to the sandbox's public key (armored or binary,
    padded, uncompressed or compressed with zip, zlib or bzip2) is decrypted and committed byte-exact.
    """
    async with Sandbox(key_algorithm=algorithm) as sb:
        await submit_foreign(
            sb, lambda plaintext: sq_encrypt(sb.public_key_armored, plaintext, *options), 1
        )


@pytest.mark.skipif(GPG is None, reason="gpg (GnuPG) is not installed")
@pytest.mark.parametrize(
    "options",
    [
        ("--armor",),
        ("--armor", "--compress-algo", "none"),
        ("--armor", "--compress-algo", "zlib", "--cipher-algo", "AES128"),
        ("--armor", "--compress-algo", "zip", "--cipher-algo", "AES192"),
        ("--armor", "--cipher-algo", "CAMELLIA256"),
        (),  # binary
    ],
    ids=["default", "uncompressed", "zlib-aes128", "zip-aes192", "camellia256", "binary"],
)
async def test_gnupg_encrypted_document_to_a_cv25519_key_is_accepted(options):
    """GnuPG (ECDH on Curve25519, with other compression and cipher choices than its
    defaults, armored or binary) encrypts a document the sandbox commits byte-exact.
    """
    async with Sandbox(key_algorithm="cv25519") as sb:
        fingerprint = sb.provider_key.fingerprint

        def encrypt(plaintext: bytes) -> bytes:
            return gpg_encrypt(sb.public_key_armored, fingerprint, plaintext, *options)

        await submit_foreign(sb, encrypt, 2)
