"""The sandbox's decryptor: what a provider must accept from real clients, and nothing more.

The sandbox decrypts every ``/Invoice/secure`` request. PGPy could, but it rebuilds and
re-validates the RSA private key for every message (~250 ms for RSA-3072), and pulls in
ciphers no client sends. :class:`Decryptor` parses the secret key once into
``cryptography`` key objects, then each message costs one private-key operation plus
AES: about 0.8 ms for RSA-3072, 0.1 ms for Curve25519.

Accepted, because GnuPG, Sequoia and this library send it: PKESK v3 (RSA,
ECDH on Curve25519 and NIST P-256/384/521, also with a hidden recipient), SEIPD v1 with
MDC, AES-128/192/256, uncompressed, ZIP or ZLIB data (GnuPG compresses by default),
partial body lengths, literal data in any format. Refused with a precise error: the old
SED packet (not integrity protected: malleable, EFAIL), AEAD and SEIPD v2, v6 PKESKs,
password-only messages, pre-AES ciphers and BZip2 (offered by no key the sandbox makes).

Framing, armor, CFB and the ECDH KDF are the client's own (:mod:`invoicing_async._pgp`):
one definition for both ends of the wire. Every failure is an :class:`OpenPGPError`
subclass whose message holds no key material and no plaintext, so the sandbox can
answer it as a 400 instead of crashing on hostile input.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import zlib
from typing import Final, TypeAlias

import attrs
from cryptography.hazmat.primitives import keywrap
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, x25519

from invoicing_async._pgp import (
    AES_KEY_SIZES,
    PK_ECDH,
    PK_RSA,
    ArmorError,
    PacketError,
    ProviderKey,
    Reader,
    Tag,
    aes_cfb,
    checksum16,
    dearmor,
    ecdh_kek,
    iter_packets,
)

from ._keys import (
    DecryptionKey,
    InvalidKeyError,
    OpenPGPError,
    load_decryption_keys,
    public_half,
)

__all__ = [
    "Decryptor",
    "IntegrityError",
    "InvalidKeyError",
    "KeyMaterial",
    "MalformedMessageError",
    "MessageTooLargeError",
    "NotIntegrityProtectedError",
    "OpenPGPError",
    "UnsupportedMessageError",
    "WrongKeyError",
    "key_material",
]


class MalformedMessageError(OpenPGPError):
    """The input is not a well-formed OpenPGP message (bad armor, framing, ...)."""


class NotIntegrityProtectedError(OpenPGPError):
    """The message uses a Symmetrically Encrypted Data packet (tag 9): no MDC, malleable."""


class UnsupportedMessageError(OpenPGPError):
    """The message uses a feature deliberately left out (see the module docstring)."""


class WrongKeyError(OpenPGPError):
    """No session key in the message is addressed to one of our keys."""


class IntegrityError(OpenPGPError):
    """Corrupt session key, bad quick check or MDC mismatch: deliberately one error.

    Telling the cases apart would hand out a padding/quick-check oracle.
    """


class MessageTooLargeError(OpenPGPError):
    """The (decompressed) plaintext exceeds the caller's ``max_size``."""


_DEFAULT_MAX_SIZE: Final = 16 * 1024 * 1024
# Legitimate senders never nest compressed packets more than once; quine bombs do.
_MAX_NESTING: Final = 8
_ZERO_KEY_ID: Final = bytes(8)

_SessionKey: TypeAlias = tuple[int, bytes]  # (symmetric algorithm id, key)


def _split_session_key(payload: bytes) -> _SessionKey | None:
    """Split ``algo || key || checksum`` and verify it; ``None`` if invalid.

    A valid checksum with an algorithm left out (Twofish, CAST5 …) is unsupported rather
    than corrupt: the sender chose it.
    """
    if len(payload) < 3 or checksum16(payload[1:-2]) != payload[-2:]:
        return None
    algo, key = payload[0], payload[1:-2]
    size = AES_KEY_SIZES.get(algo)
    if size is None:
        raise UnsupportedMessageError(f"unsupported symmetric algorithm {algo}")
    return (algo, key) if len(key) == size else None


def _rsa_session_key(key: DecryptionKey, reader: Reader) -> _SessionKey | None:
    """RSA: PKCS#1 v1.5, then ``algo || key || checksum``.

    OpenSSL's implicit rejection answers bad padding with a random message instead of
    an error; the checksum and length checks then fail, as they should.
    """
    assert isinstance(key.private_key, rsa.RSAPrivateKey)  # noqa: S101  (chosen by the caller)
    ciphertext = reader.mpi_bytes()
    if len(ciphertext) > key.modulus_bytes:
        return None
    try:
        padded = ciphertext.rjust(key.modulus_bytes, b"\x00")
        payload = key.private_key.decrypt(padded, padding.PKCS1v15())
    except ValueError:
        return None
    return _split_session_key(payload)


def _ecdh_session_key(key: DecryptionKey, reader: Reader) -> _SessionKey | None:
    """ECDH (RFC 6637): shared secret, KDF, AES key unwrap, PKCS#5 unpadding."""
    ephemeral = reader.mpi_bytes()
    wrapped = reader.take(reader.byte())
    private_key = key.private_key
    try:
        if isinstance(private_key, x25519.X25519PrivateKey):
            if len(ephemeral) != 33 or ephemeral[0] != 0x40:
                return None
            shared = private_key.exchange(x25519.X25519PublicKey.from_public_bytes(ephemeral[1:]))
        elif isinstance(private_key, ec.EllipticCurvePrivateKey):
            peer = ec.EllipticCurvePublicKey.from_encoded_point(private_key.curve, ephemeral)
            shared = private_key.exchange(ec.ECDH(), peer)
        else:
            return None
        padded = keywrap.aes_key_unwrap(ecdh_kek(shared, key.kdf_param, key.kdf), wrapped)
    except (keywrap.InvalidUnwrap, ValueError):  # a bad point, an all-zero X25519 output
        return None
    pad = padded[-1] if padded else 0
    if not 1 <= pad <= min(8, len(padded)) or padded[-pad:] != bytes([pad]) * pad:
        return None
    return _split_session_key(padded[:-pad])


def _session_key(key: DecryptionKey, pk_algo: int, rest: bytes) -> _SessionKey | None:
    """One PKESK's session key as ``key`` decrypts it, or ``None``."""
    try:
        if pk_algo in PK_RSA and isinstance(key.private_key, rsa.RSAPrivateKey):
            return _rsa_session_key(key, Reader(rest))
        if pk_algo == PK_ECDH and not isinstance(key.private_key, rsa.RSAPrivateKey):
            return _ecdh_session_key(key, Reader(rest))
    except PacketError:
        return None
    return None


def _decompress(algo: int, data: bytes, limit: int) -> bytes:
    """Inflate a Compressed Data body, refusing to produce more than ``limit`` bytes."""
    if algo == 0:
        output = data
    elif algo in (1, 2):
        inflater = zlib.decompressobj(-15 if algo == 1 else 15)
        try:
            output = inflater.decompress(data, limit + 1)
        except zlib.error:
            raise MalformedMessageError("corrupt compressed data") from None
        if len(output) <= limit and not inflater.eof:
            raise MalformedMessageError("truncated compressed data")
    else:
        raise UnsupportedMessageError(f"unsupported compression algorithm {algo}")
    if len(output) > limit:
        raise MessageTooLargeError("decompressed message exceeds size limit")
    return output


def _collect_literals(data: bytes, limit: int, depth: int, found: list[bytes]) -> None:
    """Walk the decrypted packets, appending literal data bodies.

    Signatures, one-pass signatures and marker packets are skipped: the sandbox needs
    the document, not sender authentication.
    """
    for tag, body in iter_packets(data):
        if tag == Tag.LITERAL:
            reader = Reader(body)
            reader.byte()  # format b/t/u/m: the data is returned unchanged regardless
            reader.take(reader.byte())  # file name
            reader.take(4)  # date
            found.append(reader.rest())
        elif tag == Tag.COMPRESSED:
            if depth >= _MAX_NESTING:
                raise MalformedMessageError("compressed packets nested too deeply")
            if not body:
                raise MalformedMessageError("empty compressed data packet")
            _collect_literals(_decompress(body[0], body[1:], limit), limit, depth + 1, found)
        elif tag not in (Tag.SIGNATURE, Tag.ONE_PASS_SIGNATURE, Tag.MARKER):
            raise MalformedMessageError(f"unexpected packet type {tag} in plaintext")
        if len(found) > 1:
            raise MalformedMessageError("more than one literal data packet")


def _decrypt_seipd(key: bytes, ciphertext: bytes) -> bytes | None:
    """The plaintext of a SEIPD v1 body (after its version octet); ``None`` if not authentic."""
    if len(ciphertext) < 16 + 2 + 22:
        return None
    decryptor = aes_cfb(key).decryptor()
    plaintext = decryptor.update(ciphertext) + decryptor.finalize()
    quick_ok = plaintext[14:16] == plaintext[16:18]
    mdc = hashlib.sha1(plaintext[:-20], usedforsecurity=False).digest()
    if not (
        quick_ok and plaintext[-22:-20] == b"\xd3\x14" and hmac.compare_digest(mdc, plaintext[-20:])
    ):
        return None
    return plaintext[18:-22]


_NOT_ENCRYPTED: Final = (UnsupportedMessageError, "message is not encrypted")
# Outer packets refused outright, before spending any private-key operation.
_OUTER_REFUSALS: Final[dict[int, tuple[type[OpenPGPError], str]]] = {
    Tag.SED: (
        NotIntegrityProtectedError,
        "message is not integrity protected (SED packet without MDC)",
    ),
    Tag.AEAD: (UnsupportedMessageError, "AEAD encrypted data packets are not supported"),
    Tag.LITERAL: _NOT_ENCRYPTED,
    Tag.COMPRESSED: _NOT_ENCRYPTED,
    Tag.ONE_PASS_SIGNATURE: _NOT_ENCRYPTED,
    Tag.SIGNATURE: _NOT_ENCRYPTED,
}


def _parse_envelope(binary: bytes) -> tuple[list[bytes], bytes, bool]:
    """``(PKESK bodies, SEIPD v1 ciphertext after its version octet, saw an SKESK)``."""
    pkesks: list[bytes] = []
    encrypted: bytes | None = None
    saw_skesk = False
    for tag, body in iter_packets(binary):
        if encrypted is not None:
            raise MalformedMessageError("trailing data after encrypted data packet")
        refusal = _OUTER_REFUSALS.get(tag)
        if refusal is not None:
            raise refusal[0](refusal[1])
        if tag == Tag.PKESK:
            pkesks.append(body)
        elif tag == Tag.SEIPD:
            encrypted = body
        elif tag == Tag.SKESK:
            saw_skesk = True
        elif tag != Tag.MARKER:
            raise MalformedMessageError(f"unexpected packet type {tag}")
    if encrypted is None:
        raise MalformedMessageError("no encrypted data packet")
    if not encrypted or encrypted[0] != 1:
        raise UnsupportedMessageError("only SEIPD version 1 is supported")
    return pkesks, encrypted[1:], saw_skesk


class Decryptor:
    """Decrypts OpenPGP messages addressed to one secret key, fast.

    All expensive work (parsing, building ``cryptography`` key objects) happens once in
    ``__init__``; :meth:`decrypt` then costs one private-key operation plus AES.
    Immutable after construction: safe to share between threads.
    """

    __slots__ = ("_keys",)

    def __init__(self, private_armored: str | bytes) -> None:
        """Load every decryption-capable (sub)key of an unprotected secret key.

        Raises :class:`InvalidKeyError` if the data holds no usable key.
        """
        self._keys: dict[bytes, DecryptionKey] = load_decryption_keys(private_armored)

    @property
    def key_ids(self) -> frozenset[str]:
        """Upper-case hex key ids of the keys this decryptor can use."""
        return frozenset(key_id.hex().upper() for key_id in self._keys)

    def __repr__(self) -> str:
        return f"Decryptor(key_ids={sorted(self.key_ids)!r})"

    def decrypt(self, data: bytes, *, max_size: int = _DEFAULT_MAX_SIZE) -> bytes:
        """Decrypt an armored or binary OpenPGP message and return the literal data.

        ``max_size`` bounds the returned plaintext and every decompression step (a
        decompression-bomb guard). Any problem with ``data`` raises an
        :class:`OpenPGPError` subclass; nothing else escapes for bad input.
        """
        if max_size < 0:
            raise ValueError("max_size must be non-negative")
        # Room for packet headers around the literal data inside compression.
        limit = max_size + max(65536, max_size // 8)
        # Armor inflates by 4/3 and compression only shrinks realistic payloads.
        if len(data) > 4 * limit:
            raise MessageTooLargeError("message exceeds size limit")
        try:
            return self._decrypt(bytes(data), max_size, limit)
        except (ArmorError, PacketError) as exc:
            raise MalformedMessageError(str(exc)) from None

    def _decrypt(self, data: bytes, max_size: int, limit: int) -> bytes:
        kind, binary = dearmor(data)
        if kind not in (None, "MESSAGE"):
            raise MalformedMessageError(f"unexpected armor block {kind}")
        pkesks, encrypted, saw_skesk = _parse_envelope(binary)
        candidates, addressed = self._session_keys(pkesks, saw_skesk=saw_skesk)
        for _, key in candidates:
            plaintext = _decrypt_seipd(key, encrypted)
            if plaintext is not None:
                break
        else:
            if addressed:
                raise IntegrityError("decryption failed: message is corrupt")
            raise WrongKeyError("message is not encrypted to this key")
        found: list[bytes] = []
        _collect_literals(plaintext, limit, 0, found)
        if not found:
            raise MalformedMessageError("no literal data packet")
        if len(found[0]) > max_size:
            raise MessageTooLargeError("message exceeds size limit")
        return found[0]

    def _session_keys(
        self, pkesks: list[bytes], *, saw_skesk: bool
    ) -> tuple[list[_SessionKey], bool]:
        """Candidate session keys, and whether a PKESK named one of our keys.

        Naming one of our keys turns a later failure into ``IntegrityError`` rather than
        ``WrongKeyError``. A wildcard (all-zero) key id is tried against every key: the
        recipient is hidden by design.
        """
        candidates: list[_SessionKey] = []
        addressed = wildcard = unsupported = False
        for body in pkesks:
            reader = Reader(body)
            if reader.byte() != 3:
                unsupported = True  # v6 (RFC 9580) or unknown
                continue
            key_id = reader.take(8)
            if key_id == _ZERO_KEY_ID:
                wildcard = True
                keys = list(self._keys.values())
            elif key_id in self._keys:
                addressed = True
                keys = [self._keys[key_id]]
            else:
                continue
            pk_algo, rest = reader.byte(), reader.rest()
            candidates.extend(
                found for key in keys if (found := _session_key(key, pk_algo, rest)) is not None
            )
        if candidates:
            return candidates, addressed
        if addressed:
            raise IntegrityError("decryption failed: message is corrupt")
        if wildcard or not (unsupported or saw_skesk):
            raise WrongKeyError("message is not encrypted to this key")
        if unsupported:
            raise UnsupportedMessageError("unsupported PKESK version")
        raise UnsupportedMessageError("password-encrypted messages are not supported")


@attrs.frozen
class KeyMaterial:
    """A sandbox's parsed key pair: its decryptor, and the public half two ways."""

    decryptor: Decryptor
    public_armored: str
    provider_key: ProviderKey


@functools.lru_cache(maxsize=8)
def key_material(private_armored: str, public_armored: str | None) -> KeyMaterial:
    """Parse a secret key once: the decryptor and the public half, shared by sandboxes."""
    decryptor = Decryptor(private_armored)
    if public_armored is None:
        public_armored = public_half(private_armored)
    return KeyMaterial(decryptor, public_armored, ProviderKey.from_armored(public_armored))
