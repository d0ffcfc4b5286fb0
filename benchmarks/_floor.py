"""The raw floor: the library's message built directly with ``cryptography``.

Same output format as ``ProviderKey.encrypt``: PKESK v3 (RSA PKCS#1 v1.5, or ECDH
Curve25519 with the RFC 6637 KDF and AES key wrap) carrying a fresh AES-256 session key,
then SEIPD v1 (SHA-1 MDC) around a binary literal packet, no compression. Everything that
does not depend on the message (public key objects, key ids, KDF parameters, padding
objects) is prepared once from PGPy's parse of the key, independently of the library's
own key loading; per message only the unavoidable work is done, with as little Python as
possible. :func:`encrypt_armored` reuses the library's ``armor`` (base64 plus CRC24) so
that both produce the same bytes format: the floor for the armor step is the library's.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import padding, rsa, x25519
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.keywrap import aes_key_wrap

from invoicing_async._doc.pgp import armor

from ._common import quiet_warnings

try:
    from cryptography.hazmat.decrepit.ciphers.modes import CFB
except ImportError:  # older cryptography
    from cryptography.hazmat.primitives.ciphers.modes import CFB

_ZERO_IV = bytes(16)
_PKCS1 = padding.PKCS1v15()
_MDC_HEADER = b"\xd3\x14"
_LITERAL_HEAD = b"b\x00\x00\x00\x00\x00"  # binary, no file name, date 0
_CURVE25519_OID = bytes.fromhex("0a2b060104019755010501")
_KDF_HASHES = {8: hashlib.sha256, 9: hashlib.sha384, 10: hashlib.sha512}
_KEK_SIZES = {7: 16, 8: 24, 9: 32}


def _header(tag: int, length: int) -> bytes:
    """New-format packet header."""
    if length < 192:
        return bytes((0xC0 | tag, length))
    if length < 8384:
        length -= 192
        return bytes((0xC0 | tag, (length >> 8) + 192, length & 0xFF))
    return bytes((0xC0 | tag, 0xFF)) + length.to_bytes(4, "big")


@dataclass(frozen=True)
class FloorRecipient:
    """What the floor needs of the provider key, prepared once."""

    key_id: bytes
    rsa: rsa.RSAPublicKey | None = None
    x25519: x25519.X25519PublicKey | None = None
    kdf_param: bytes = b""
    kdf_hash: object = None
    kek_size: int = 0

    @classmethod
    def from_armored(cls, public_armored: str) -> FloorRecipient:
        """Read the (single) encryption subkey with PGPy, as any tool would."""
        with quiet_warnings():
            import pgpy  # noqa: PLC0415

            primary, _ = pgpy.PGPKey.from_blob(public_armored)
            subkey = next(iter(primary.subkeys.values()))
            material = subkey._key.keymaterial  # noqa: SLF001
            key_id = bytes.fromhex(subkey.fingerprint.keyid)
            if hasattr(material, "n"):
                public = rsa.RSAPublicNumbers(int(material.e), int(material.n)).public_key()
                return cls(key_id, rsa=public)
            fingerprint = bytes.fromhex("".join(str(subkey.fingerprint).split()))
            halg, encalg = int(material.kdf.halg), int(material.kdf.encalg)
            kdf_param = (
                _CURVE25519_OID
                + b"\x12\x03\x01"
                + bytes((halg, encalg))
                + b"Anonymous Sender    "
                + fingerprint
            )
            return cls(
                key_id,
                x25519=x25519.X25519PublicKey.from_public_bytes(bytes(material.p.x)),
                kdf_param=kdf_param,
                kdf_hash=_KDF_HASHES[halg],
                kek_size=_KEK_SIZES[encalg],
            )


def encrypt_binary(recipient: FloorRecipient, data: bytes) -> bytes:
    """The binary OpenPGP message, built with the minimum of Python."""
    session_key = os.urandom(32)
    prefix = os.urandom(16)
    plaintext = (
        prefix + prefix[14:] + _header(11, len(data) + 6) + _LITERAL_HEAD + data + _MDC_HEADER
    )
    plaintext += hashlib.sha1(plaintext).digest()  # noqa: S324
    encryptor = Cipher(algorithms.AES256(session_key), CFB(_ZERO_IV)).encryptor()
    ciphertext = encryptor.update(plaintext) + encryptor.finalize()
    block = b"\x09" + session_key + (sum(session_key) & 0xFFFF).to_bytes(2, "big")
    if recipient.rsa is not None:
        encrypted = recipient.rsa.encrypt(block, _PKCS1)
        if not encrypted[0]:  # an MPI has no leading zero octets
            encrypted = encrypted.lstrip(b"\x00")
        bits = (len(encrypted) - 1) * 8 + encrypted[0].bit_length()
        pkesk = b"\x03" + recipient.key_id + b"\x01" + bits.to_bytes(2, "big") + encrypted
    else:
        ephemeral = x25519.X25519PrivateKey.generate()
        shared = ephemeral.exchange(recipient.x25519)  # type: ignore[arg-type]
        kek = recipient.kdf_hash(b"\x00\x00\x00\x01" + shared + recipient.kdf_param)  # type: ignore[operator]
        block += b"\x05" * 5  # 35 octets padded to 40 (PKCS#5)
        wrapped = aes_key_wrap(kek.digest()[: recipient.kek_size], block)
        pkesk = (
            b"\x03"
            + recipient.key_id
            + b"\x12\x01\x07\x40"
            + ephemeral.public_key().public_bytes_raw()
            + bytes((len(wrapped),))
            + wrapped
        )
    return _header(1, len(pkesk)) + pkesk + _header(18, len(ciphertext) + 1) + b"\x01" + ciphertext


def encrypt_armored(recipient: FloorRecipient, data: bytes) -> bytes:
    """:func:`encrypt_binary` in ASCII armor (the library's ``armor``: same format)."""
    return armor(encrypt_binary(recipient, data))
