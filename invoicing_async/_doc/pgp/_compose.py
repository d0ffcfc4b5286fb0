"""The message composer: one document in, one standard OpenPGP message out.

Built directly with ``cryptography`` (no cipher table rebuilt per call, no fingerprint
recomputed), a message costs little more than its public-key operation. The output is
the message PGPy and GnuPG produce:

* a PKESK v3 packet: RSA (EME-PKCS1-v1_5) or ECDH (RFC 6637: Curve25519 or NIST curves,
  KDF and AES key wrap) carrying a fresh AES-256 session key;
* a SEIPD v1 packet (integrity protected: SHA-1 MDC) holding a literal data packet in
  binary mode (``b``), so the provider receives the JSON byte-exact; no compression.

The pieces both directions need (OpenPGP's CFB, the ECDH KDF) are defined here once;
the sandbox's decryptor imports them through :mod:`invoicing_async._for_sandbox`.
"""

from __future__ import annotations

import hashlib
import os
from typing import Final

import attrs
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization as _serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, x25519
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.keywrap import aes_key_wrap

from ._packets import CURVES, PK_ECDH, PK_RSA, PacketError, PublicKey, Tag, checksum16, mpi, packet

try:  # cryptography >= 47 keeps CFB here; the old location warns on use.
    from cryptography.hazmat.decrepit.ciphers.modes import CFB
except ImportError:  # pragma: no cover - cryptography 42-46 (the supported range)
    from cryptography.hazmat.primitives.ciphers.modes import CFB

__all__ = [
    "AES_KEY_SIZES",
    "KDF_HASHES",
    "InvalidKeyMaterialError",
    "Recipient",
    "aes_cfb",
    "ecdh_kdf_param",
    "ecdh_kek",
    "encrypt_message",
    "recipient_for",
]

_AES256: Final = 9
#: OpenPGP's AES ids and key sizes: the session ciphers and the ECDH key-wrap ciphers.
AES_KEY_SIZES: Final = {7: 16, 8: 24, 9: 32}
#: Hashes an ECDH key may ask its KDF to use.
KDF_HASHES: Final[dict[int, type[hashes.HashAlgorithm]]] = {
    8: hashes.SHA256,
    9: hashes.SHA384,
    10: hashes.SHA512,
}


class InvalidKeyMaterialError(PacketError):
    """A key of a supported algorithm whose public numbers or point are not valid."""


def aes_cfb(key: bytes) -> Cipher[CFB]:
    """AES in OpenPGP's CFB as SEIPD v1 uses it: plain CFB, all-zero IV.

    (Only the old SED packet needs the "resync" variant, and nobody here writes or
    accepts it.)
    """
    return Cipher(algorithms.AES(key), CFB(bytes(16)))


def ecdh_kdf_param(oid: bytes, kdf: bytes, fingerprint: bytes) -> bytes:
    """The KDF's "Param" (RFC 6637 §8): curve, algorithm, KDF ids, sender, recipient."""
    return (
        bytes((len(oid),)) + oid + bytes((PK_ECDH,)) + kdf + b"Anonymous Sender    " + fingerprint
    )


def ecdh_kek(shared: bytes, param: bytes, kdf: bytes) -> bytes:
    """The key-encryption key: ``Hash(00000001 || Z || Param)`` cut to the AES key size."""
    digest = hashes.Hash(KDF_HASHES[kdf[2]]())
    digest.update(b"\x00\x00\x00\x01" + shared + param)
    return digest.finalize()[: AES_KEY_SIZES[kdf[3]]]


def _session_key_block(key: bytes) -> bytes:
    return bytes((_AES256,)) + key + checksum16(key)


@attrs.frozen
class _RSARecipient:
    key_id: bytes
    public_key: rsa.RSAPublicKey

    def pkesk(self, session_key: bytes) -> bytes:
        encrypted = self.public_key.encrypt(_session_key_block(session_key), padding.PKCS1v15())
        return b"\x03" + self.key_id + b"\x01" + mpi(encrypted)


@attrs.frozen
class _ECDHRecipient:
    key_id: bytes
    curve: ec.EllipticCurve | None  # None: Curve25519
    point: bytes  # the recipient's public point as OpenPGP encodes it (0x40|x or 0x04|x|y)
    kdf: bytes
    kdf_param: bytes

    def pkesk(self, session_key: bytes) -> bytes:
        if self.curve is None:
            ephemeral = x25519.X25519PrivateKey.generate()
            shared = ephemeral.exchange(x25519.X25519PublicKey.from_public_bytes(self.point[1:]))
            public = b"\x40" + ephemeral.public_key().public_bytes_raw()
        else:
            peer = ec.EllipticCurvePublicKey.from_encoded_point(self.curve, self.point)
            ec_ephemeral = ec.generate_private_key(self.curve)
            shared = ec_ephemeral.exchange(ec.ECDH(), peer)
            public = ec_ephemeral.public_key().public_bytes(
                _serialization.Encoding.X962, _serialization.PublicFormat.UncompressedPoint
            )
        kek = ecdh_kek(shared, self.kdf_param, self.kdf)
        block = _session_key_block(session_key)
        pad = 8 - len(block) % 8
        wrapped = aes_key_wrap(kek, block + bytes((pad,)) * pad)
        return b"\x03" + self.key_id + b"\x12" + mpi(public) + bytes((len(wrapped),)) + wrapped


Recipient = _RSARecipient | _ECDHRecipient


_P25519: Final = 2**255 - 19
# The u-coordinates of the Curve25519 (and twist) points of small order, as libsodium
# lists them: with any of them every sender's shared secret is all zeros, which
# cryptography refuses at the exchange.
_SMALL_ORDER: Final = frozenset(
    {
        0,
        1,
        _P25519 - 1,
        325606250916557431795983626356110631294008115727848805560023387167927233504,
        39382357235489614581723060781553021112529911719440698176882885853963445705823,
    }
)


def _small_order(raw: bytes) -> bool:
    """Whether a Curve25519 public key (32 octets, little-endian u) is of small order."""
    u = int.from_bytes(raw, "little") & ((1 << 255) - 1)  # RFC 7748 ignores the top bit
    return u % _P25519 in _SMALL_ORDER


def recipient_for(key: PublicKey) -> Recipient:
    """What messages to ``key`` are built with; :class:`PacketError` says why not."""
    if key.algorithm in PK_RSA:
        n, e = (int.from_bytes(value, "big") for value in key.mpis)
        try:
            return _RSARecipient(key.key_id, rsa.RSAPublicNumbers(e, n).public_key())
        except ValueError:
            raise InvalidKeyMaterialError(
                f"the {key.description} key's public numbers are invalid"
            ) from None
    if key.algorithm != PK_ECDH or key.oid not in CURVES:
        raise PacketError(f"{key.description} keys cannot receive messages here")
    name, curve = CURVES[key.oid]
    kdf = key.kdf
    if len(kdf) != 4 or kdf[:2] != b"\x03\x01" or kdf[2] not in KDF_HASHES:
        raise PacketError(f"the {name} key asks for an unsupported KDF ({kdf.hex()})")
    if kdf[3] not in AES_KEY_SIZES:
        raise PacketError(f"the {name} key asks for an unsupported key wrap ({kdf.hex()})")
    (point,) = key.mpis
    invalid = f"the {name} key's public point is invalid"
    if curve is None and (len(point) != 33 or point[0] != 0x40 or name != "Curve25519"):
        raise InvalidKeyMaterialError(invalid)
    if curve is None and _small_order(point[1:]):
        raise InvalidKeyMaterialError(f"{invalid} (a point of small order)")
    try:
        if curve is None:
            x25519.X25519PublicKey.from_public_bytes(point[1:])
        else:
            ec.EllipticCurvePublicKey.from_encoded_point(curve, point)
    except ValueError:
        raise InvalidKeyMaterialError(invalid) from None
    param = ecdh_kdf_param(key.oid, kdf, key.fingerprint)
    return _ECDHRecipient(key.key_id, curve, point, kdf, param)


def encrypt_message(recipient: Recipient, data: bytes) -> bytes:
    """The binary OpenPGP message: PKESK v3, then SEIPD v1 around a literal packet."""
    session_key = os.urandom(32)
    prefix = os.urandom(16)
    literal = packet(Tag.LITERAL, b"b\x00\x00\x00\x00\x00" + data)
    plaintext = prefix + prefix[-2:] + literal + b"\xd3\x14"
    plaintext += hashlib.sha1(plaintext).digest()  # noqa: S324  (the MDC is SHA-1 by definition)
    encryptor = aes_cfb(session_key).encryptor()
    ciphertext = encryptor.update(plaintext) + encryptor.finalize()
    return packet(Tag.PKESK, recipient.pkesk(session_key)) + packet(Tag.SEIPD, b"\x01" + ciphertext)
