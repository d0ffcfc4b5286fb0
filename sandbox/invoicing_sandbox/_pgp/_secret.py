"""Secret keys read once into ``cryptography`` objects, for the sandbox's decryptor.

:func:`load_decryption_keys` reads an unprotected secret key (the sandbox's own, or one
GnuPG, Sequoia and others export) into one :class:`DecryptionKey` per
decryption-capable (sub)key, whose ``cryptography`` private key object is built here once:
each message then costs one private-key operation. Secret key material never appears in
a ``repr`` or an error message; every problem is an :class:`InvalidKeyError`, a subclass
of :class:`OpenPGPError`, the base of the decryptor's errors (:mod:`._decrypt`).
"""

from __future__ import annotations

import math
from typing import Final, TypeAlias

import attrs
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa, x25519

from invoicing_async._for_sandbox import (
    AES_KEY_SIZES,
    CURVES,
    KDF_HASHES,
    PK_ECDH,
    PK_RSA,
    ArmorError,
    PacketError,
    PublicKey,
    Reader,
    Tag,
    checksum16,
    dearmor,
    ecdh_kdf_param,
    iter_packets,
    read_public_key,
)

__all__ = ["DecryptionKey", "InvalidKeyError", "OpenPGPError", "load_decryption_keys"]


class OpenPGPError(Exception):
    """Base of the sandbox's OpenPGP errors; the message is safe to echo to a client."""


class InvalidKeyError(OpenPGPError):
    """The secret key given to the sandbox is unusable."""


_SECRET_TAGS: Final = frozenset({Tag.SECRET_KEY, Tag.SECRET_SUBKEY})

PrivateKey: TypeAlias = rsa.RSAPrivateKey | x25519.X25519PrivateKey | ec.EllipticCurvePrivateKey


@attrs.frozen(repr=False)
class DecryptionKey:
    """A decryption-capable (sub)key with its ``cryptography`` object built once."""

    key_id: bytes
    private_key: PrivateKey
    modulus_bytes: int = 0
    kdf: bytes = b""
    kdf_param: bytes = b""

    def __repr__(self) -> str:
        return f"DecryptionKey(key_id={self.key_id.hex().upper()})"


class _UnusableKeyError(Exception):
    """This (sub)key cannot decrypt (a signing key, protected …): skipped, not fatal."""


def _read_secret_mpis(reader: Reader, count: int) -> list[int]:
    """Read ``count`` unprotected secret MPIs and verify the trailing checksum."""
    if reader.byte() != 0:
        raise _UnusableKeyError("secret key is passphrase-protected or a stub")
    start = reader.pos
    values = [reader.mpi() for _ in range(count)]
    if checksum16(reader.data[start : reader.pos]) != reader.take(2):
        raise InvalidKeyError("secret key checksum mismatch")
    return values


def _rsa_key(public: PublicKey, reader: Reader) -> DecryptionKey:
    n, e = (int.from_bytes(value, "big") for value in public.mpis)
    d, p, q, _ = _read_secret_mpis(reader, 4)
    # cryptography's own validation (primality tests) costs ~250 ms for RSA-3072, the
    # per-message cost the decryptor exists to avoid; these checks catch corrupt or
    # mismatched keys for a fraction of it.
    if p * q != n or (e * d) % math.lcm(p - 1, q - 1) != 1:
        raise InvalidKeyError("inconsistent RSA secret key")
    # OpenPGP stores u = p^-1 mod q; cryptography wants q^-1 mod p: recompute all CRT values.
    numbers = rsa.RSAPrivateNumbers(
        p=p,
        q=q,
        d=d,
        dmp1=rsa.rsa_crt_dmp1(d, p),
        dmq1=rsa.rsa_crt_dmq1(d, q),
        iqmp=rsa.rsa_crt_iqmp(p, q),
        public_numbers=rsa.RSAPublicNumbers(e, n),
    )
    private_key = numbers.private_key(unsafe_skip_rsa_key_validation=True)
    return DecryptionKey(public.key_id, private_key, modulus_bytes=(n.bit_length() + 7) // 8)


def _ecdh_key(public: PublicKey, reader: Reader) -> DecryptionKey:
    """Build the ECDH private key and prove it matches the public point.

    The match check turns an encoding mistake (notably Curve25519's byte order) into a
    clear error at load time instead of "wrong key" later.
    """
    kdf = public.kdf
    if len(kdf) != 4 or kdf[:2] != b"\x03\x01" or kdf[2] not in KDF_HASHES:
        raise _UnusableKeyError("unsupported ECDH KDF parameters")
    if kdf[3] not in AES_KEY_SIZES or public.oid not in CURVES:
        raise _UnusableKeyError("unsupported ECDH curve or key wrap")
    (secret,) = _read_secret_mpis(reader, 1)
    curve = CURVES[public.oid][1]
    private_key: PrivateKey
    if curve is None:
        private_key = x25519.X25519PrivateKey.from_private_bytes(secret.to_bytes(32, "little"))
        point = b"\x40" + private_key.public_key().public_bytes_raw()
    else:
        private_key = ec.derive_private_key(secret, curve)
        point = private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
    if public.mpis[0] != point:
        raise InvalidKeyError("ECDH secret does not match public key")
    param = ecdh_kdf_param(public.oid, kdf, public.fingerprint)
    return DecryptionKey(public.key_id, private_key, kdf=kdf, kdf_param=param)


def _decryption_key(body: bytes) -> DecryptionKey:
    """A secret (sub)key packet as a decryption key, or why it is not one."""
    reader = Reader(body)
    try:
        public = read_public_key(reader)
    except PacketError as exc:
        raise _UnusableKeyError(str(exc)) from None
    try:
        if public.algorithm in PK_RSA:
            return _rsa_key(public, reader)
        if public.algorithm == PK_ECDH:
            return _ecdh_key(public, reader)
    except (ValueError, OverflowError, ZeroDivisionError, UnsupportedAlgorithm):
        raise InvalidKeyError("invalid secret key parameters") from None
    raise _UnusableKeyError(f"{public.description} cannot decrypt")


def load_decryption_keys(private_armored: str | bytes) -> dict[bytes, DecryptionKey]:
    """Every decryption-capable (sub)key of an unprotected secret key, by key id.

    :raises InvalidKeyError: when there is none, saying why.
    """
    if isinstance(private_armored, str):
        try:
            private_armored = private_armored.encode("ascii")
        except UnicodeEncodeError:
            raise InvalidKeyError("armored key must be ASCII") from None
    keys: dict[bytes, DecryptionKey] = {}
    reasons: list[str] = []
    try:
        kind, binary = dearmor(bytes(private_armored))
        # A public key is let through to the clearer "no usable secret key" below.
        if kind not in (None, "PRIVATE KEY BLOCK", "PUBLIC KEY BLOCK"):
            raise InvalidKeyError(f"malformed secret key: unexpected armor block {kind}")
        for tag, body in iter_packets(binary):
            if tag in _SECRET_TAGS:
                try:
                    parsed = _decryption_key(body)
                except _UnusableKeyError as exc:
                    reasons.append(str(exc))
                else:
                    keys[parsed.key_id] = parsed
    except (ArmorError, PacketError) as exc:
        raise InvalidKeyError(f"malformed secret key: {exc}") from None
    if not keys:
        detail = f" ({'; '.join(sorted(set(reasons)))})" if reasons else ""
        raise InvalidKeyError(f"no usable decryption secret key found{detail}")
    return keys
