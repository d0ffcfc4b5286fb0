"""OpenPGP key generation and fast message decryption for the embedded sandbox.

The sandbox is an in-process fake of the e-invoicing provider.  Clients send it
invoice JSON encrypted to the provider's OpenPGP key, so the sandbox has to
decrypt every request.  PGPy can do that, but it rebuilds (and re-validates)
the RSA private key from its MPIs for *every* message, which costs ~250 ms for
RSA-3072 and would make the sandbox unusably slow in test suites.

This module therefore splits the work in two:

* :func:`generate_keypair` uses PGPy once to mint a GnuPG-compatible key pair
  (user id, self-signature, one encryption subkey).  Speed does not matter
  here and PGPy gets the signature plumbing right.
* :class:`Decryptor` parses the secret key *once* with a small parser of its
  own, turns each decryption-capable (sub)key into a ready-to-use
  ``cryptography`` private key object and then decrypts messages without
  touching PGPy at all: packet framing, PKESK v3 (RSA and ECDH), SEIPD v1 with
  MDC, decompression and the literal data packet.

Only what a provider receiving encrypted documents needs is implemented; in
particular every failure surfaces as an :class:`OpenPGPError` subclass so the
sandbox can map it to an API error instead of crashing with a stray
``IndexError`` on hostile input.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import hashlib
import hmac
import importlib
import math
import warnings
import zlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import attrs
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, keywrap, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, x25519
from cryptography.hazmat.primitives.ciphers import Cipher, CipherAlgorithm, algorithms
from cryptography.utils import CryptographyDeprecationWarning

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.modes import ModeWithInitializationVector

__all__ = [
    "Decryptor",
    "IntegrityError",
    "InvalidKeyError",
    "MalformedMessageError",
    "MessageTooLargeError",
    "NotIntegrityProtectedError",
    "OpenPGPError",
    "SandboxKeyPair",
    "UnsupportedMessageError",
    "WrongKeyError",
    "generate_keypair",
]


# --------------------------------------------------------------------------- errors


class OpenPGPError(Exception):
    """Base class of every error raised while handling OpenPGP data.

    The message is a short human-readable reason.  It never contains key
    material or decrypted data, so it is safe to echo back to an API client.
    """


class MalformedMessageError(OpenPGPError):
    """The input is not a well-formed OpenPGP message (bad armor, framing, ...)."""


class NotIntegrityProtectedError(OpenPGPError):
    """The message uses a Symmetrically Encrypted Data packet (tag 9) without MDC.

    Such messages are malleable (EFAIL); real providers refuse them, and so
    does the sandbox, to catch clients configured with legacy settings.
    """


class UnsupportedMessageError(OpenPGPError):
    """The message uses a feature this implementation deliberately lacks.

    Examples: SEIPD v2 / AEAD packets, v6 PKESKs, unknown ciphers, password
    (SKESK-only) encryption, or a message that is not encrypted at all.
    """


class WrongKeyError(OpenPGPError):
    """No session key in the message is addressed to one of our keys."""


class IntegrityError(OpenPGPError):
    """Decryption failed: corrupt session key, bad quick check or MDC mismatch.

    The cases are deliberately not distinguished to avoid handing out a
    padding/quick-check oracle.
    """


class MessageTooLargeError(OpenPGPError):
    """The (decompressed) plaintext exceeds the caller's ``max_size``."""


class InvalidKeyError(OpenPGPError):
    """The secret key given to :class:`Decryptor` is unusable."""


# --------------------------------------------------------------------------- constants

_DEFAULT_MAX_SIZE: Final = 16 * 1024 * 1024
# Nesting limit for compressed packets: legitimate senders never nest more than
# once, while quine-style bombs rely on deep nesting.
_MAX_NESTING: Final = 8

_TAG_PKESK: Final = 1
_TAG_SIGNATURE: Final = 2
_TAG_SKESK: Final = 3
_TAG_ONE_PASS_SIG: Final = 4
_TAG_SECRET_KEY: Final = 5
_TAG_SECRET_SUBKEY: Final = 7
_TAG_COMPRESSED: Final = 8
_TAG_SED: Final = 9
_TAG_MARKER: Final = 10
_TAG_LITERAL: Final = 11
_TAG_SEIPD: Final = 18
_TAG_AEAD: Final = 20

# Only these packet types may use partial body lengths (RFC 4880 4.2.2.4).
_PARTIAL_OK: Final = frozenset({_TAG_COMPRESSED, _TAG_SED, _TAG_LITERAL, _TAG_SEIPD, _TAG_AEAD})

_PK_RSA: Final = frozenset({1, 2})
_PK_ECDH: Final = 18
_PK_EDDSA: Final = 22
_PK_ECDSA: Final = 19
_PK_DSA: Final = 17
_PK_ELGAMAL: Final = 16

_OID_CV25519: Final = bytes.fromhex("2b060104019755010501")
_OID_P256: Final = bytes.fromhex("2a8648ce3d030107")
_OID_P384: Final = bytes.fromhex("2b81040022")
_OID_P521: Final = bytes.fromhex("2b81040023")
_NIST_CURVES: Final[dict[bytes, ec.EllipticCurve]] = {
    _OID_P256: ec.SECP256R1(),
    _OID_P384: ec.SECP384R1(),
    _OID_P521: ec.SECP521R1(),
}

_KDF_HASHES: Final[dict[int, Callable[[], hashes.HashAlgorithm]]] = {
    8: hashes.SHA256,
    9: hashes.SHA384,
    10: hashes.SHA512,
}
_KEK_SIZES: Final[dict[int, int]] = {7: 16, 8: 24, 9: 32}

_ANONYMOUS_SENDER: Final = b"Anonymous Sender    "
_MDC_HEADER: Final = b"\xd3\x14"
_ZERO_KEY_ID: Final = bytes(8)

_MESSAGE_LABEL: Final = b"PGP MESSAGE"
_PRIVATE_KEY_LABEL: Final = b"PGP PRIVATE KEY BLOCK"
# Accepted when loading keys only so that a public key yields the clearer
# "no usable secret key" error instead of an armor error.
_PUBLIC_KEY_LABEL: Final = b"PGP PUBLIC KEY BLOCK"


# --------------------------------------------------------------------------- ciphers


def _load_cfb() -> Callable[[bytes], ModeWithInitializationVector]:
    """Return a factory for CFB mode objects, preferring the non-deprecated home.

    Recent ``cryptography`` releases moved CFB to ``hazmat.decrepit`` and
    warn on every use of the old ``hazmat.primitives`` name; older releases
    supported by the project (>=42) only have the old name.  The project runs its tests
    with ``-W error``, so the fallback silences exactly that warning around
    exactly that call.
    """
    try:
        decrepit: Any = importlib.import_module("cryptography.hazmat.decrepit.ciphers.modes")
        cfb_class: Callable[[bytes], ModeWithInitializationVector] = decrepit.CFB
    except (ImportError, AttributeError):  # pragma: no cover - old cryptography
        primitives: Any = importlib.import_module("cryptography.hazmat.primitives.ciphers.modes")
        legacy_cfb: Callable[[bytes], ModeWithInitializationVector] = primitives.CFB

        def make_legacy(iv: bytes) -> ModeWithInitializationVector:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CryptographyDeprecationWarning)
                return legacy_cfb(iv)

        return make_legacy
    return cfb_class


def _legacy_algorithm(name: str) -> Callable[[bytes], CipherAlgorithm] | None:
    """Look up a pre-AES block cipher, preferring ``hazmat.decrepit``.

    Returns ``None`` when this ``cryptography``/OpenSSL build lacks it; such
    messages are then reported as unsupported instead of crashing.
    """
    for module_name in (
        "cryptography.hazmat.decrepit.ciphers.algorithms",
        "cryptography.hazmat.primitives.ciphers.algorithms",
    ):
        try:
            module: Any = importlib.import_module(module_name)
        except ImportError:  # pragma: no cover - old cryptography
            continue
        # Accessing a moved class on the primitives module warns; ignore it
        # only for that lookup.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CryptographyDeprecationWarning)
            factory: Callable[[bytes], CipherAlgorithm] | None = getattr(module, name, None)
        if factory is not None:
            return factory
    return None  # pragma: no cover


_CFB: Final = _load_cfb()

# OpenPGP symmetric algorithm id -> (constructor, key size, block size).
_CipherSpec: TypeAlias = tuple[Callable[[bytes], CipherAlgorithm], int, int]


def _build_cipher_table() -> dict[int, _CipherSpec]:
    """Map OpenPGP cipher ids to ``cryptography`` constructors we can use."""
    table: dict[int, _CipherSpec] = {
        7: (algorithms.AES, 16, 16),
        8: (algorithms.AES, 24, 16),
        9: (algorithms.AES, 32, 16),
    }
    legacy: list[tuple[int, str, int, int]] = [
        (1, "IDEA", 16, 8),
        (2, "TripleDES", 24, 8),
        (3, "CAST5", 16, 8),
        (4, "Blowfish", 16, 8),
        (11, "Camellia", 16, 16),
        (12, "Camellia", 24, 16),
        (13, "Camellia", 32, 16),
    ]
    for algo_id, name, key_size, block_size in legacy:
        factory = _legacy_algorithm(name)
        if factory is not None:
            table[algo_id] = (factory, key_size, block_size)
    return table


_CIPHERS: Final = _build_cipher_table()


def _cfb_decrypt(algo_id: int, key: bytes, data: bytes) -> bytes:
    """OpenPGP CFB as used by SEIPD v1: plain CFB with an all-zero IV.

    (Only the MDC-less SED packet needs the "resync" variant, and we refuse
    that packet anyway.)
    """
    spec = _CIPHERS.get(algo_id)
    if spec is None:
        raise UnsupportedMessageError(f"unsupported symmetric algorithm {algo_id}")
    factory, _, block_size = spec
    try:
        decryptor = Cipher(factory(key), _CFB(bytes(block_size))).decryptor()
        return decryptor.update(data) + decryptor.finalize()
    except (UnsupportedAlgorithm, ValueError) as exc:
        # e.g. an OpenSSL 3 build without the legacy provider for CAST5/IDEA.
        raise UnsupportedMessageError(f"symmetric algorithm {algo_id} not available") from exc


# --------------------------------------------------------------------------- framing


class _Reader:
    """Bounds-checked cursor over a byte string.

    Every read past the end raises :class:`MalformedMessageError`, which is
    how hostile/truncated input is kept from surfacing as ``IndexError``.
    """

    __slots__ = ("_data", "pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.pos = 0

    @property
    def remaining(self) -> int:
        return len(self._data) - self.pos

    def byte(self) -> int:
        if self.pos >= len(self._data):
            raise MalformedMessageError("truncated data")
        value = self._data[self.pos]
        self.pos += 1
        return value

    def take(self, count: int) -> bytes:
        end = self.pos + count
        if count < 0 or end > len(self._data):
            raise MalformedMessageError("truncated data")
        chunk = self._data[self.pos : end]
        self.pos = end
        return chunk

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size), "big")

    def mpi_bytes(self) -> bytes:
        """Read an OpenPGP MPI and return its magnitude bytes (big-endian)."""
        bits = self.uint(2)
        return self.take((bits + 7) // 8)

    def mpi(self) -> int:
        return int.from_bytes(self.mpi_bytes(), "big")

    def rest(self) -> bytes:
        return self.take(self.remaining)


def _iter_packets(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Yield ``(tag, body)`` for each packet, handling every length encoding.

    Supports old-format headers (1/2/4-octet and indeterminate lengths) and
    new-format headers including partial body lengths, which GnuPG uses when
    it streams.  Partial chunks are reassembled into one body.
    """
    reader = _Reader(data)
    while reader.remaining:
        header = reader.byte()
        if not header & 0x80:
            raise MalformedMessageError("invalid packet header")
        if header & 0x40:
            tag = header & 0x3F
            chunks: list[bytes] = []
            while True:
                first = reader.byte()
                if first < 192:
                    chunks.append(reader.take(first))
                    break
                if first < 224:
                    length = ((first - 192) << 8) + reader.byte() + 192
                    chunks.append(reader.take(length))
                    break
                if first == 255:
                    chunks.append(reader.take(reader.uint(4)))
                    break
                if tag not in _PARTIAL_OK:
                    raise MalformedMessageError("partial length on a packet that forbids it")
                chunks.append(reader.take(1 << (first & 0x1F)))
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        else:
            tag = (header >> 2) & 0x0F
            length_type = header & 0x03
            body = reader.rest() if length_type == 3 else reader.take(reader.uint(1 << length_type))
        if tag == 0:
            raise MalformedMessageError("reserved packet tag 0")
        yield tag, body


def _dearmor(data: bytes, label: bytes) -> bytes:
    """Decode ASCII armor of the given block type into binary.

    Accepts LF and CRLF line endings, optional armor headers and an optional
    CRC24 line.  The CRC24 is *not* verified: RFC 9580 section 6.1 says
    receivers must not reject on it, the MDC already protects the payload,
    and a pure-Python CRC would cost more than the RSA operation.
    """
    lines = data.strip().splitlines()
    begin = b"-----BEGIN " + label + b"-----"
    end = b"-----END " + label + b"-----"
    if not lines or lines[0].strip() != begin:
        raise MalformedMessageError("unexpected armor header line")
    try:
        end_index = next(i for i, line in enumerate(lines) if line.strip() == end)
    except StopIteration:
        raise MalformedMessageError("missing armor tail line") from None
    body = lines[1:end_index]
    index = 0
    # Armor headers ("Key: value") precede a blank line; ':' is not base64.
    while index < len(body) and b":" in body[index]:
        index += 1
    payload: list[bytes] = []
    for line in body[index:]:
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(b"=") and len(stripped) == 5:
            break  # CRC24 line; see docstring.
        payload.append(stripped)
    try:
        return base64.b64decode(b"".join(payload), validate=True)
    except (binascii.Error, ValueError):
        raise MalformedMessageError("invalid base64 in armor") from None


def _to_binary(data: bytes, *labels: bytes) -> bytes:
    """Return the binary form of ``data``, de-armoring it if it looks armored.

    ``labels`` are the armor block types accepted (the first line decides).
    """
    stripped = data.lstrip()
    if not stripped.startswith(b"-----BEGIN "):
        return data
    for label in labels:
        if stripped.startswith(b"-----BEGIN " + label + b"-----"):
            return _dearmor(stripped, label)
    raise MalformedMessageError("unexpected armor block type")


# --------------------------------------------------------------------------- keys


@attrs.frozen
class _DecryptionKey:
    """A decryption-capable (sub)key with its ``cryptography`` object pre-built."""

    key_id: bytes
    fingerprint: bytes
    algorithm: int
    private_key: rsa.RSAPrivateKey | x25519.X25519PrivateKey | ec.EllipticCurvePrivateKey
    modulus_bytes: int = 0
    curve_oid: bytes = b""
    kdf_params: bytes = b""

    def __repr__(self) -> str:
        return f"_DecryptionKey(key_id={self.key_id.hex().upper()}, algorithm={self.algorithm})"


def _secret_checksum_ok(secret: bytes, checksum: bytes) -> bool:
    """Check OpenPGP's 16-bit additive checksum (secret MPIs, session keys)."""
    return (sum(secret) & 0xFFFF).to_bytes(2, "big") == checksum


class _UnusableKeyError(Exception):
    """Internal: this (sub)key cannot decrypt; the message says why.

    Not an error for the whole key file: a transferable secret key normally
    mixes signing and encryption (sub)keys and we only want the latter.
    """


def _read_secret_mpis(reader: _Reader, body: bytes, count: int) -> list[int]:
    """Read ``count`` unprotected secret MPIs and verify the trailing checksum."""
    if reader.byte() != 0:
        raise _UnusableKeyError("secret key is passphrase-protected or a stub")
    start = reader.pos
    values = [reader.mpi() for _ in range(count)]
    if not _secret_checksum_ok(body[start : reader.pos], reader.take(2)):
        raise InvalidKeyError("secret key checksum mismatch")
    return values


def _fingerprint(public_body: bytes) -> bytes:
    """V4 fingerprint: SHA-1 over the public key packet in old-format framing."""
    framed = b"\x99" + len(public_body).to_bytes(2, "big") + public_body
    return hashlib.sha1(framed, usedforsecurity=False).digest()


def _parse_secret_key(body: bytes) -> _DecryptionKey:
    """Parse a v4 secret (sub)key packet into a ready-to-use decryption key.

    Raises :class:`_UnusableKeyError` if this particular key cannot decrypt
    (signing-only algorithm, protected, GnuPG stub, ...), and
    ``MalformedMessageError``/``InvalidKeyError`` for corrupt data.
    """
    reader = _Reader(body)
    version = reader.byte()
    if version != 4:
        raise _UnusableKeyError(f"unsupported key version {version}")
    reader.take(4)  # creation time
    algo = reader.byte()
    try:
        if algo in _PK_RSA:
            n = reader.mpi()
            e = reader.mpi()
            fingerprint = _fingerprint(body[: reader.pos])
            d, p, q, _ = _read_secret_mpis(reader, body, 4)
            # cryptography's own validation (primality tests) costs ~250 ms for
            # RSA-3072, i.e. the very per-message cost this module avoids; these
            # two checks catch corrupt or mismatched keys for a fraction of it.
            if p * q != n or (e * d) % math.lcm(p - 1, q - 1) != 1:
                raise InvalidKeyError("inconsistent RSA secret key")
            # OpenPGP stores u = p^-1 mod q; cryptography wants q^-1 mod p,
            # so all CRT values are recomputed.
            numbers = rsa.RSAPrivateNumbers(
                p=p,
                q=q,
                d=d,
                dmp1=rsa.rsa_crt_dmp1(d, p),
                dmq1=rsa.rsa_crt_dmq1(d, q),
                iqmp=rsa.rsa_crt_iqmp(p, q),
                public_numbers=rsa.RSAPublicNumbers(e, n),
            )
            return _DecryptionKey(
                fingerprint[-8:],
                fingerprint,
                algo,
                numbers.private_key(unsafe_skip_rsa_key_validation=True),
                modulus_bytes=(n.bit_length() + 7) // 8,
            )
        if algo == _PK_ECDH:
            curve_oid = reader.take(reader.byte())
            point = reader.mpi_bytes()
            kdf_params = reader.take(1)
            kdf_params += reader.take(kdf_params[0])
            fingerprint = _fingerprint(body[: reader.pos])
            (secret,) = _read_secret_mpis(reader, body, 1)
            return _DecryptionKey(
                fingerprint[-8:],
                fingerprint,
                algo,
                _ecdh_private_key(curve_oid, point, kdf_params, secret),
                curve_oid=curve_oid,
                kdf_params=kdf_params,
            )
    except (ValueError, OverflowError, ZeroDivisionError, UnsupportedAlgorithm):
        raise InvalidKeyError("invalid secret key parameters") from None
    if algo in (_PK_EDDSA, _PK_ECDSA, _PK_DSA):
        raise _UnusableKeyError("signing-only key")
    raise _UnusableKeyError(f"unsupported public key algorithm {algo}")


def _ecdh_private_key(
    curve_oid: bytes, point: bytes, kdf_params: bytes, secret: int
) -> x25519.X25519PrivateKey | ec.EllipticCurvePrivateKey:
    """Build the ECDH private key and prove it matches the public point.

    The match check turns an encoding mistake (notably the cv25519 byte
    order) into a clear error at load time instead of "wrong key" later.
    """
    if len(kdf_params) != 4 or kdf_params[0] != 3 or kdf_params[1] != 1:
        raise _UnusableKeyError("unsupported ECDH KDF parameters")
    if kdf_params[2] not in _KDF_HASHES or kdf_params[3] not in _KEK_SIZES:
        raise _UnusableKeyError("unsupported ECDH KDF algorithms")
    if curve_oid == _OID_CV25519:
        # OpenPGP stores the X25519 scalar as a big-endian MPI, i.e. the
        # byte-reverse of the native little-endian encoding.
        x_key = x25519.X25519PrivateKey.from_private_bytes(secret.to_bytes(32, "little"))
        if point != b"\x40" + x_key.public_key().public_bytes_raw():
            raise InvalidKeyError("cv25519 secret does not match public key")
        return x_key
    curve = _NIST_CURVES.get(curve_oid)
    if curve is None:
        raise _UnusableKeyError("unsupported ECDH curve")
    ec_key = ec.derive_private_key(secret, curve)
    public_point = ec_key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    if point != public_point:
        raise InvalidKeyError("ECDH secret does not match public key")
    return ec_key


def _load_keys(private_armored: str | bytes) -> dict[bytes, _DecryptionKey]:
    if isinstance(private_armored, str):
        try:
            raw = private_armored.encode("ascii")
        except UnicodeEncodeError:
            raise InvalidKeyError("armored key must be ASCII") from None
    else:
        raw = bytes(private_armored)
    keys: dict[bytes, _DecryptionKey] = {}
    reasons: list[str] = []
    try:
        binary = _to_binary(raw, _PRIVATE_KEY_LABEL, _PUBLIC_KEY_LABEL)
        for tag, body in _iter_packets(binary):
            if tag not in (_TAG_SECRET_KEY, _TAG_SECRET_SUBKEY):
                continue
            try:
                parsed = _parse_secret_key(body)
            except _UnusableKeyError as exc:
                reasons.append(str(exc))
            else:
                keys[parsed.key_id] = parsed
    except MalformedMessageError as exc:
        raise InvalidKeyError(f"malformed secret key: {exc}") from None
    if not keys:
        detail = f" ({'; '.join(sorted(set(reasons)))})" if reasons else ""
        raise InvalidKeyError(f"no usable decryption secret key found{detail}")
    return keys


# --------------------------------------------------------------------------- session keys


_SessionKey: TypeAlias = tuple[int, bytes]  # (symmetric algorithm id, key)


def _split_session_key(payload: bytes) -> _SessionKey | None:
    """Split ``algo || key || checksum`` and verify it; ``None`` if invalid.

    A valid checksum with an algorithm we lack (e.g. Twofish) is reported as
    unsupported rather than as corruption, since the sender chose it.
    """
    if len(payload) < 3 or not _secret_checksum_ok(payload[1:-2], payload[-2:]):
        return None
    algo = payload[0]
    spec = _CIPHERS.get(algo)
    if spec is None:
        raise UnsupportedMessageError(f"unsupported symmetric algorithm {algo}")
    key = payload[1:-2]
    if len(key) != spec[1]:
        return None
    return algo, key


def _rsa_session_key(
    private_key: rsa.RSAPrivateKey, modulus_bytes: int, reader: _Reader
) -> tuple[int, bytes] | None:
    """RSA PKESK: PKCS#1 v1.5 decrypt, then ``algo || key || checksum``.

    OpenSSL's implicit rejection returns a random message instead of raising
    on bad padding; the checksum/length checks then fail in constant-ish
    time, which is exactly what we want.
    """
    ciphertext = reader.mpi_bytes()
    if len(ciphertext) > modulus_bytes:
        return None
    try:
        payload = private_key.decrypt(ciphertext.rjust(modulus_bytes, b"\x00"), padding.PKCS1v15())
    except ValueError:
        return None
    return _split_session_key(payload)


def _ecdh_shared_secret(
    private_key: x25519.X25519PrivateKey | ec.EllipticCurvePrivateKey, ephemeral: bytes
) -> bytes | None:
    """Compute Z (RFC 6637 section 8) from the sender's ephemeral point."""
    try:
        if isinstance(private_key, x25519.X25519PrivateKey):
            # Curve25519 points carry the 0x40 "native encoding" prefix.
            if len(ephemeral) != 33 or ephemeral[0] != 0x40:
                return None
            peer = x25519.X25519PublicKey.from_public_bytes(ephemeral[1:])
            return private_key.exchange(peer)
        public = ec.EllipticCurvePublicKey.from_encoded_point(private_key.curve, ephemeral)
        return private_key.exchange(ec.ECDH(), public)
    except ValueError:  # invalid point, or all-zero X25519 output
        return None


def _ecdh_session_key(
    key: _DecryptionKey,
    private_key: x25519.X25519PrivateKey | ec.EllipticCurvePrivateKey,
    reader: _Reader,
) -> tuple[int, bytes] | None:
    """ECDH PKESK (RFC 6637): KDF over Z and the recipient, AES key unwrap, unpad."""
    ephemeral = reader.mpi_bytes()
    wrapped = reader.take(reader.byte())
    shared = _ecdh_shared_secret(private_key, ephemeral)
    if shared is None:
        return None
    param = (
        bytes([len(key.curve_oid)])
        + key.curve_oid
        + bytes([_PK_ECDH])
        + key.kdf_params
        + _ANONYMOUS_SENDER
        + key.fingerprint
    )
    digest = hashes.Hash(_KDF_HASHES[key.kdf_params[2]]())
    digest.update(b"\x00\x00\x00\x01" + shared + param)
    kek = digest.finalize()[: _KEK_SIZES[key.kdf_params[3]]]
    try:
        padded = keywrap.aes_key_unwrap(kek, wrapped)
    except (keywrap.InvalidUnwrap, ValueError):
        return None
    # PKCS#5 padding to a multiple of 8 bytes.
    pad = padded[-1] if padded else 0
    if not 1 <= pad <= min(8, len(padded)) or padded[-pad:] != bytes([pad]) * pad:
        return None
    return _split_session_key(padded[:-pad])


def _recover_session_keys(
    keys: list[_DecryptionKey], pk_algo: int, rest: bytes
) -> list[_SessionKey]:
    """Try one PKESK's encrypted session key against each of ``keys``."""
    found: list[_SessionKey] = []
    for key in keys:
        reader = _Reader(rest)
        private_key = key.private_key
        try:
            if isinstance(private_key, rsa.RSAPrivateKey):
                result = (
                    _rsa_session_key(private_key, key.modulus_bytes, reader)
                    if pk_algo in _PK_RSA
                    else None
                )
            else:
                result = (
                    _ecdh_session_key(key, private_key, reader) if pk_algo == _PK_ECDH else None
                )
        except MalformedMessageError:
            result = None
        if result is not None:
            found.append(result)
    return found


# --------------------------------------------------------------------------- plaintext


def _decompress(algo: int, data: bytes, limit: int) -> bytes:
    """Inflate a Compressed Data body, refusing to produce more than ``limit`` bytes."""
    if algo == 0:
        output = data
    elif algo in (1, 2, 3):
        try:
            if algo == 3:
                bz = bz2.BZ2Decompressor()
                output = bz.decompress(data, max_length=limit + 1)
                finished = bz.eof
            else:
                z = zlib.decompressobj(-15 if algo == 1 else 15)
                output = z.decompress(data, limit + 1)
                finished = z.eof
        except (zlib.error, OSError, EOFError, ValueError):
            raise MalformedMessageError("corrupt compressed data") from None
        if len(output) <= limit and not finished:
            raise MalformedMessageError("truncated compressed data")
    else:
        raise UnsupportedMessageError(f"unsupported compression algorithm {algo}")
    if len(output) > limit:
        raise MessageTooLargeError("decompressed message exceeds size limit")
    return output


def _collect_literals(data: bytes, limit: int, depth: int, found: list[bytes]) -> None:
    """Walk the decrypted packet sequence, appending literal data bodies.

    Signatures, one-pass signatures and marker packets are skipped: the
    sandbox only needs the document, not sender authentication.
    """
    for tag, body in _iter_packets(data):
        if tag == _TAG_LITERAL:
            reader = _Reader(body)
            reader.byte()  # format b/t/u/m: data returned unchanged regardless
            reader.take(reader.byte())  # file name
            reader.take(4)  # date
            found.append(reader.rest())
        elif tag == _TAG_COMPRESSED:
            if depth >= _MAX_NESTING:
                raise MalformedMessageError("compressed packets nested too deeply")
            if not body:
                raise MalformedMessageError("empty compressed data packet")
            inner = _decompress(body[0], body[1:], limit)
            _collect_literals(inner, limit, depth + 1, found)
        elif tag in (_TAG_SIGNATURE, _TAG_ONE_PASS_SIG, _TAG_MARKER):
            continue
        else:
            raise MalformedMessageError(f"unexpected packet type {tag} in plaintext")
        if len(found) > 1:
            raise MalformedMessageError("more than one literal data packet")


def _decrypt_seipd(algo: int, key: bytes, ciphertext: bytes) -> bytes | None:
    """Decrypt a SEIPD v1 body (after the version byte); ``None`` on integrity failure."""
    block_size = _CIPHERS[algo][2]
    if len(ciphertext) < block_size + 2 + 22:
        return None
    plaintext = _cfb_decrypt(algo, key, ciphertext)
    quick_ok = plaintext[block_size - 2 : block_size] == plaintext[block_size : block_size + 2]
    mdc_expected = hashlib.sha1(plaintext[:-20], usedforsecurity=False).digest()
    mdc_ok = plaintext[-22:-20] == _MDC_HEADER and hmac.compare_digest(
        mdc_expected, plaintext[-20:]
    )
    if not (quick_ok and mdc_ok):
        return None
    return plaintext[block_size + 2 : -22]


_NOT_ENCRYPTED: Final = (UnsupportedMessageError, "message is not encrypted")
# Outer packets refused outright, before spending any private-key operation.
_OUTER_REFUSALS: Final[dict[int, tuple[type[OpenPGPError], str]]] = {
    _TAG_SED: (
        NotIntegrityProtectedError,
        "message is not integrity protected (SED packet without MDC)",
    ),
    _TAG_AEAD: (UnsupportedMessageError, "AEAD encrypted data packets are not supported"),
    _TAG_LITERAL: _NOT_ENCRYPTED,
    _TAG_COMPRESSED: _NOT_ENCRYPTED,
    _TAG_ONE_PASS_SIG: _NOT_ENCRYPTED,
    _TAG_SIGNATURE: _NOT_ENCRYPTED,
}


def _parse_envelope(binary: bytes) -> tuple[list[bytes], bytes, bool]:
    """Split a message into its PKESK bodies and the SEIPD v1 ciphertext.

    Returns ``(pkesks, ciphertext_after_version_byte, saw_skesk)``.  Refuses
    SED (no MDC) and AEAD/v2 packets up front, before any private-key work.
    """
    pkesks: list[bytes] = []
    encrypted: bytes | None = None
    saw_skesk = False
    for tag, body in _iter_packets(binary):
        if encrypted is not None:
            raise MalformedMessageError("trailing data after encrypted data packet")
        refusal = _OUTER_REFUSALS.get(tag)
        if refusal is not None:
            raise refusal[0](refusal[1])
        if tag == _TAG_PKESK:
            pkesks.append(body)
        elif tag == _TAG_SEIPD:
            encrypted = body
        elif tag == _TAG_SKESK:
            saw_skesk = True
        elif tag != _TAG_MARKER:
            raise MalformedMessageError(f"unexpected packet type {tag}")
    if encrypted is None:
        raise MalformedMessageError("no encrypted data packet")
    if not encrypted or encrypted[0] != 1:
        raise UnsupportedMessageError("only SEIPD version 1 is supported")
    return pkesks, encrypted[1:], saw_skesk


# --------------------------------------------------------------------------- public API


@attrs.frozen
class SandboxKeyPair:
    """A freshly generated provider key pair, both halves ASCII-armored.

    ``private_armored`` is excluded from ``repr`` so that logging or an
    assertion failure never prints the secret key.
    """

    public_armored: str
    private_armored: str = attrs.field(repr=False)
    algorithm: str


Algorithm: TypeAlias = Literal["rsa3072", "rsa2048", "cv25519"]


def generate_keypair(
    algorithm: Algorithm = "rsa3072",
    *,
    user_id: str = "Sandbox Provider <sandbox@invoicing.invalid>",
) -> SandboxKeyPair:
    """Generate an unprotected provider key pair with PGPy.

    Layout mirrors what ``gpg --full-generate-key`` produces so GnuPG (and
    any client library) accepts it: a certify+sign primary key carrying the
    user id and its preferences, plus one encryption subkey.  Preferences:
    AES256, SHA256, ZLIB/ZIP/uncompressed (ZLIB first, as GnuPG does, so
    default ``gpg --encrypt`` compresses).  No expiration: sandbox keys live
    as long as the test fixture.
    """
    with warnings.catch_warnings():
        # PGPy touches deprecated cryptography APIs and warns about its own
        # preferences; neither is actionable here and tests run with -W error.
        warnings.simplefilter("ignore")
        # Imported lazily: PGPy is only needed to mint keys, never to decrypt,
        # and importing it emits deprecation warnings we must contain here.
        import pgpy  # noqa: PLC0415
        from pgpy.constants import (  # noqa: PLC0415
            CompressionAlgorithm,
            EllipticCurveOID,
            HashAlgorithm,
            KeyFlags,
            PubKeyAlgorithm,
            SymmetricKeyAlgorithm,
        )

        if algorithm == "cv25519":
            primary = pgpy.PGPKey.new(PubKeyAlgorithm.EdDSA, EllipticCurveOID.Ed25519)
            subkey = pgpy.PGPKey.new(PubKeyAlgorithm.ECDH, EllipticCurveOID.Curve25519)
        elif algorithm in ("rsa3072", "rsa2048"):
            bits = 3072 if algorithm == "rsa3072" else 2048
            primary = pgpy.PGPKey.new(PubKeyAlgorithm.RSAEncryptOrSign, bits)
            subkey = pgpy.PGPKey.new(PubKeyAlgorithm.RSAEncryptOrSign, bits)
        else:
            raise ValueError(f"unsupported algorithm {algorithm!r}")

        # PGPUID.new(name) with no comment/email keeps the user id verbatim.
        uid = pgpy.PGPUID.new(user_id)
        primary.add_uid(
            uid,
            usage={KeyFlags.Certify, KeyFlags.Sign},
            hashes=[HashAlgorithm.SHA256],
            ciphers=[SymmetricKeyAlgorithm.AES256],
            compression=[
                CompressionAlgorithm.ZLIB,
                CompressionAlgorithm.ZIP,
                CompressionAlgorithm.Uncompressed,
            ],
            primary=True,
        )
        primary.add_subkey(subkey, usage={KeyFlags.EncryptCommunications, KeyFlags.EncryptStorage})
        public_armored = str(primary.pubkey)
        private_armored = str(primary)
    return SandboxKeyPair(
        public_armored=public_armored, private_armored=private_armored, algorithm=algorithm
    )


class Decryptor:
    """Decrypts OpenPGP messages addressed to one secret key, fast.

    All expensive work (parsing, building and validating ``cryptography``
    key objects) happens once in ``__init__``; :meth:`decrypt` then costs one
    private-key operation plus symmetric crypto.  Instances are immutable
    after construction and safe to share between threads/tasks.
    """

    __slots__ = ("_keys",)

    def __init__(self, private_armored: str | bytes) -> None:
        """Load every decryption-capable (sub)key from an unprotected secret key.

        Raises :class:`InvalidKeyError` if the data holds no usable key.
        """
        self._keys: dict[bytes, _DecryptionKey] = _load_keys(private_armored)

    @property
    def key_ids(self) -> frozenset[str]:
        """Upper-case hex key ids of the keys this decryptor can use."""
        return frozenset(key_id.hex().upper() for key_id in self._keys)

    def __repr__(self) -> str:
        return f"Decryptor(key_ids={sorted(self.key_ids)!r})"

    def decrypt(self, data: bytes, *, max_size: int = _DEFAULT_MAX_SIZE) -> bytes:
        """Decrypt an armored or binary OpenPGP message and return the literal data.

        ``max_size`` bounds the returned plaintext and every decompression
        step (decompression-bomb guard).  Any problem with ``data`` raises an
        :class:`OpenPGPError` subclass; nothing else escapes for bad input.
        """
        if max_size < 0:
            raise ValueError("max_size must be non-negative")
        # Room for packet headers around the literal data inside compression.
        limit = max_size + max(65536, max_size // 8)
        # Cheap early refusal: armor inflates by 4/3 and compression can only
        # shrink realistic payloads, so anything this big cannot fit.
        if len(data) > 4 * limit:
            raise MessageTooLargeError("message exceeds size limit")
        pkesks, encrypted, saw_skesk = _parse_envelope(_to_binary(bytes(data), _MESSAGE_LABEL))

        candidates, addressed = self._session_keys(pkesks, saw_skesk=saw_skesk)
        for algo, key in candidates:
            plaintext = _decrypt_seipd(algo, key, encrypted)
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
        """Recover candidate session keys from the PKESK packets.

        Returns the candidates and whether any PKESK named one of our key ids
        explicitly (which turns a later failure into ``IntegrityError``
        rather than ``WrongKeyError``).  Wildcard (all-zero) key ids are tried
        against every key, as the recipient is hidden by design.
        """
        candidates: list[_SessionKey] = []
        addressed = wildcard = unsupported = False
        for body in pkesks:
            reader = _Reader(body)
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
            pk_algo = reader.byte()
            candidates.extend(_recover_session_keys(keys, pk_algo, reader.rest()))
        if candidates:
            return candidates, addressed
        if addressed:
            raise IntegrityError("decryption failed: message is corrupt")
        if wildcard or not (unsupported or saw_skesk):
            raise WrongKeyError("message is not encrypted to this key")
        if unsupported:
            raise UnsupportedMessageError("unsupported PKESK version")
        raise UnsupportedMessageError("password-encrypted messages are not supported")
