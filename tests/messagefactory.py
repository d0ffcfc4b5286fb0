"""Build OpenPGP messages and key pairs for the decryptor's tests.

A helper module, not a test module. Messages come from independent producers (PGPy,
GnuPG through :class:`GnuPG`) and from a small hand-rolled builder here (:func:`packet`
with every header encoding, :func:`literal`, :func:`compressed`, :func:`seipd`,
:class:`Crafted`), which reaches framing and plaintext corner cases no tool emits.
Key pairs and decryptors are cached for the session (RSA-3072 takes about a second).
"""

from __future__ import annotations

import bz2
import contextlib
import functools
import hashlib
import os
import subprocess
import warnings
import zlib
from typing import TYPE_CHECKING

from invoicing_async._doc.pgp import aes_cfb, iter_packets
from invoicing_sandbox import SandboxKeyPair, generate_keypair
from invoicing_sandbox._pgp import Decryptor

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import pgpy
    from pgpy.constants import (
        CompressionAlgorithm,
        EllipticCurveOID,
        KeyFlags,
        PubKeyAlgorithm,
        SymmetricKeyAlgorithm,
    )

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PAYLOAD = b'{"invoice": "INV-001", "lines": [{"sku": "A", "qty": 3}], "note": "\xc3\xa9\x00\xff"}'


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """PGPy warns about deprecated cryptography APIs; keep -W error runs clean."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def pgpy_encrypt(
    public_armored: str,
    data: bytes,
    *,
    compression: CompressionAlgorithm | None = None,
    **prefs: object,
) -> bytes:
    """Encrypt ``data`` to the key with PGPy and return the binary message."""
    with quiet():
        key, _ = pgpy.PGPKey.from_blob(public_armored)
        kwargs = {} if compression is None else {"compression": compression}
        message = pgpy.PGPMessage.new(data, format="b", **kwargs)
        return bytes(key.encrypt(message, **prefs))


def pgpy_armor(binary: bytes) -> str:
    """ASCII-armor a binary message the way PGPy does."""
    with quiet():
        return str(pgpy.PGPMessage.from_blob(binary))


def packets(binary: bytes) -> list[tuple[int, bytes]]:
    """``(tag, body)`` of every packet (the package's own reader)."""
    return list(iter_packets(binary))


def _new_length(length: int) -> bytes:
    if length < 192:
        return bytes([length])
    if length < 8384:
        length -= 192
        return bytes([(length >> 8) + 192, length & 0xFF])
    return b"\xff" + length.to_bytes(4, "big")


def _partial(tag: int, body: bytes) -> bytes:
    out = bytearray([0xC0 | tag])
    rest = body
    while len(rest) > 512:
        out += b"\xe9" + rest[:512]  # 2**9-octet partial chunk
        rest = rest[512:]
    return bytes(out + _new_length(len(rest)) + rest)


_HEADERS = {
    "new": lambda tag, n: bytes([0xC0 | tag]) + _new_length(n),
    "five": lambda tag, n: bytes([0xC0 | tag, 0xFF]) + n.to_bytes(4, "big"),
    "old1": lambda tag, n: bytes([0x80 | (tag << 2), n]),
    "old2": lambda tag, n: bytes([0x80 | (tag << 2) | 1]) + n.to_bytes(2, "big"),
    "old": lambda tag, n: bytes([0x80 | (tag << 2) | 2]) + n.to_bytes(4, "big"),
    "indeterminate": lambda tag, _: bytes([0x80 | (tag << 2) | 3]),
}


def packet(tag: int, body: bytes, style: str = "new") -> bytes:
    """Frame a packet; ``style`` picks one of the header encodings to exercise."""
    if style == "partial":
        return _partial(tag, body)
    return _HEADERS[style](tag, len(body)) + body


def literal(data: bytes, fmt: bytes = b"b", name: bytes = b"") -> bytes:
    """A literal data packet holding ``data``."""
    return packet(11, fmt + bytes([len(name)]) + name + b"\x00\x00\x00\x00" + data)


def compressed(algo: int, inner: bytes) -> bytes:
    """A compressed data packet: 0 stored, 1 ZIP, 2 ZLIB, 3 BZip2."""
    if algo == 1:
        deflate = zlib.compressobj(wbits=-15)
        body = deflate.compress(inner) + deflate.flush()
    elif algo == 2:
        body = zlib.compress(inner)
    elif algo == 3:
        body = bz2.compress(inner)
    else:
        body = inner
    return packet(8, bytes([algo]) + body)


def seipd(session_key: bytes, inner: bytes, *, mdc: bool = True, quick: bool = True) -> bytes:
    """Build a SEIPD v1 packet body around ``inner`` (AES, zero-IV CFB, MDC)."""
    prefix = bytearray(os.urandom(16))
    prefix += prefix[-2:] if quick else bytes([prefix[-2] ^ 1, prefix[-1]])
    plain = bytes(prefix) + inner + b"\xd3\x14"
    digest = hashlib.sha1(plain, usedforsecurity=False).digest()
    plain += digest if mdc else bytes(20)
    encryptor = aes_cfb(session_key).encryptor()
    return b"\x01" + encryptor.update(plain) + encryptor.finalize()


class Crafted:
    """PKESK packets for a session key we know, so tests can build any SEIPD."""

    def __init__(self, public_armored: str) -> None:
        self.session_key = os.urandom(32)
        binary = pgpy_encrypt(
            public_armored,
            b"unused",
            sessionkey=self.session_key,
            cipher=SymmetricKeyAlgorithm.AES256,
        )
        self.pkesks = b"".join(packet(tag, body) for tag, body in packets(binary) if tag == 1)

    def message(self, inner: bytes, **kwargs: bool) -> bytes:
        """Return PKESKs + a SEIPD around ``inner`` (see :func:`seipd` kwargs)."""
        return self.pkesks + packet(18, seipd(self.session_key, inner, **kwargs))


@functools.cache
def keypair(algorithm: str) -> SandboxKeyPair:
    """A fresh sandbox key pair per algorithm, made once per session."""
    return generate_keypair(algorithm)  # type: ignore[arg-type]


@functools.cache
def decryptor(algorithm: str) -> Decryptor:
    """The decryptor of :func:`keypair`."""
    return Decryptor(keypair(algorithm).private_armored)


def nist_pair(curve: EllipticCurveOID) -> tuple[str, str]:
    """A PGPy-made ECDSA key with an ECDH subkey on a NIST ``curve``: (public, secret) armor."""
    with quiet():
        primary = pgpy.PGPKey.new(PubKeyAlgorithm.ECDSA, curve)
        primary.add_uid(
            pgpy.PGPUID.new("nist"),
            usage={KeyFlags.Certify, KeyFlags.Sign},
            ciphers=[SymmetricKeyAlgorithm.AES256],
        )
        primary.add_subkey(
            pgpy.PGPKey.new(PubKeyAlgorithm.ECDH, curve),
            usage={KeyFlags.EncryptCommunications, KeyFlags.EncryptStorage},
        )
        return str(primary.pubkey), str(primary)


@functools.cache
def crafted() -> Crafted:
    """PKESKs to the Curve25519 :func:`keypair` for a known session key."""
    return Crafted(keypair("cv25519").public_armored)


class GnuPG:
    """Minimal driver for a throwaway GnuPG home."""

    def __init__(self, binary: str, home: Path) -> None:
        self.binary = binary
        self.home = home

    def run(self, *args: str, stdin: bytes = b"") -> bytes:
        """Run gpg in this home, assert success and return stdout."""
        result = subprocess.run(
            [self.binary, "--batch", "--no-tty", "--homedir", str(self.home), *args],
            input=stdin,
            capture_output=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        return result.stdout

    def import_key(self, armored: str) -> None:
        """Import an armored key."""
        self.run("--import", stdin=armored.encode())

    def encrypt(self, recipient: str, data: bytes, *options: str) -> bytes:
        """Encrypt ``data`` to ``recipient`` with default settings plus ``options``."""
        return self.run(
            "--trust-model", "always", "--encrypt", "-r", recipient, *options, stdin=data
        )


def fingerprint(public_armored: str) -> str:
    """The primary key's fingerprint, as PGPy reads it."""
    with quiet():
        key, _ = pgpy.PGPKey.from_blob(public_armored)
    return str(key.fingerprint).replace(" ", "")
