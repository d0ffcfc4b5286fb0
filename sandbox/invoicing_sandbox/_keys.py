"""The sandbox's own key pair, written with ``cryptography``.

A provider needs a key pair, and the sandbox makes one in the layout ``gpg
--full-generate-key`` produces, so GnuPG, Sequoia and any client library accept it: a
v4 certify+sign primary key (RSA or Ed25519) carrying the user id, a positive
certification with the preferences (AES-256; SHA-256; ZLIB, ZIP, uncompressed: ZLIB
first as GnuPG does, so a default ``gpg --encrypt`` compresses) and the MDC feature, and
one encryption subkey (RSA or Curve25519) bound with a SHA-256 signature. No expiry:
sandbox keys live as long as the test that uses them.

The keys are written with the client's own packet writer (through
:mod:`invoicing_async._for_sandbox`), and the sandbox reads the same packets back with the
same parser, in :mod:`._pgp._secret`, into ``cryptography`` private key objects built
once. Secret key material never appears in a ``repr`` or an error message.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

import attrs
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa, x25519
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from invoicing_async import ProviderKey
from invoicing_async._for_sandbox import (
    CURVES,
    PK_ECDH,
    PK_EDDSA,
    Reader,
    Tag,
    armor,
    checksum16,
    dearmor,
    encode_length,
    iter_packets,
    key_hash_prefix,
    mpi,
    packet,
    read_public_key,
)

from ._pgp import Decryptor

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "Algorithm",
    "KeyMaterial",
    "SandboxKeyPair",
    "cached_keypair",
    "generate_keypair",
    "key_material",
    "public_half",
]


Algorithm: TypeAlias = Literal["rsa3072", "rsa2048", "cv25519"]


@attrs.frozen
class SandboxKeyPair:
    """A freshly generated provider key pair, both halves ASCII-armored.

    ``private_armored`` is left out of ``repr``: a log line or an assertion failure never
    prints the secret key.
    """

    public_armored: str
    private_armored: str = attrs.field(repr=False)
    algorithm: str


# --- writing keys --------------------------------------------------------------------------

_OIDS: Final = {name: oid for oid, (name, _) in CURVES.items()}
_RSA_BITS: Final = {"rsa3072": 3072, "rsa2048": 2048}
_SHA256: Final = 8
_POSITIVE_CERTIFICATION: Final = 0x13
_SUBKEY_BINDING: Final = 0x18


def _subpacket(kind: int, data: bytes) -> bytes:
    return encode_length(len(data) + 1) + bytes((kind,)) + data


# Hashed subpackets of the user id's self-signature: key flags certify+sign, preferred
# AES-256, SHA-256 and ZLIB/ZIP/none, features MDC, primary user id.
_USER_ID_SUBPACKETS: Final = b"".join(
    (
        _subpacket(27, b"\x03"),
        _subpacket(11, b"\x09"),
        _subpacket(21, bytes((_SHA256,))),
        _subpacket(22, b"\x02\x01\x00"),
        _subpacket(30, b"\x01"),
        _subpacket(25, b"\x01"),
    )
)
_BINDING_SUBPACKETS: Final = _subpacket(27, b"\x0c")  # encrypt communications and storage


@attrs.frozen
class _NewKey:
    public: bytes  # the public key packet body
    secret: bytes = attrs.field(repr=False)  # the secret key packet body
    sign: Callable[[bytes], bytes] | None = None  # SHA-256 digest -> signature MPIs


def _key_bodies(
    algorithm: int, created: int, material: bytes, secret_mpis: bytes
) -> tuple[bytes, bytes]:
    public = bytes((4,)) + created.to_bytes(4, "big") + bytes((algorithm,)) + material
    return public, public + b"\x00" + secret_mpis + checksum16(secret_mpis)


def _rsa(bits: int, created: int) -> _NewKey:
    key = rsa.generate_private_key(65537, bits)
    numbers = key.private_numbers()
    p, q = sorted((numbers.p, numbers.q))  # OpenPGP wants p < q and u = p^-1 mod q
    public_numbers = numbers.public_numbers
    public, secret = _key_bodies(
        1,
        created,
        mpi(public_numbers.n) + mpi(public_numbers.e),
        mpi(numbers.d) + mpi(p) + mpi(q) + mpi(pow(p, -1, q)),
    )

    def sign(digest: bytes) -> bytes:
        return mpi(key.sign(digest, padding.PKCS1v15(), Prehashed(hashes.SHA256())))

    return _NewKey(public, secret, sign)


def _ed25519(created: int) -> _NewKey:
    key = ed25519.Ed25519PrivateKey.generate()
    oid = _OIDS["Ed25519"]
    point = b"\x40" + key.public_key().public_bytes_raw()
    material = bytes((len(oid),)) + oid + mpi(point)
    public, secret = _key_bodies(PK_EDDSA, created, material, mpi(key.private_bytes_raw()))

    def sign(digest: bytes) -> bytes:
        signature = key.sign(digest)  # legacy EdDSA signs the digest: MPIs R and S
        return mpi(signature[:32]) + mpi(signature[32:])

    return _NewKey(public, secret, sign)


def _x25519(created: int) -> _NewKey:
    scalar = bytearray(os.urandom(32))
    scalar[0] &= 248  # clamped, as GnuPG stores it
    scalar[31] = scalar[31] & 127 | 64
    key = x25519.X25519PrivateKey.from_private_bytes(bytes(scalar))
    oid = _OIDS["Curve25519"]
    point = b"\x40" + key.public_key().public_bytes_raw()
    kdf = b"\x03\x01\x08\x07"  # SHA-256 and AES-128 key wrap, GnuPG's choice for Curve25519
    material = bytes((len(oid),)) + oid + mpi(point) + kdf
    # The scalar is stored as a big-endian MPI: the native little-endian bytes reversed.
    public, secret = _key_bodies(PK_ECDH, created, material, mpi(bytes(reversed(scalar))))
    return _NewKey(public, secret)


def _signature(signer: _NewKey, kind: int, hashed: bytes, subpackets: bytes, created: int) -> bytes:
    """A v4 signature (RFC 4880 §5.2.3) by ``signer`` over ``hashed``, SHA-256."""
    assert signer.sign is not None  # noqa: S101  (only primaries sign, and they can)
    fingerprint = read_public_key(Reader(signer.public)).fingerprint
    area = _subpacket(2, created.to_bytes(4, "big")) + subpackets
    area += _subpacket(33, b"\x04" + fingerprint)
    head = bytes((4, kind, signer.public[5], _SHA256)) + len(area).to_bytes(2, "big") + area
    digest = hashlib.sha256(hashed + head + b"\x04\xff" + len(head).to_bytes(4, "big")).digest()
    unhashed = _subpacket(16, fingerprint[-8:])  # the issuer key id, for older readers
    return head + len(unhashed).to_bytes(2, "big") + unhashed + digest[:2] + signer.sign(digest)


def generate_keypair(
    algorithm: Algorithm = "rsa3072",
    *,
    user_id: str = "Sandbox Provider <sandbox@invoicing.invalid>",
) -> SandboxKeyPair:
    """Generate an unprotected provider key pair (the layout is in the module docstring)."""
    created = int(time.time())
    if algorithm == "cv25519":
        primary, subkey = _ed25519(created), _x25519(created)
    elif algorithm in _RSA_BITS:
        primary, subkey = _rsa(_RSA_BITS[algorithm], created), _rsa(_RSA_BITS[algorithm], created)
    else:
        raise ValueError(f"unsupported algorithm {algorithm!r}")
    uid = user_id.encode("utf-8")
    certified = key_hash_prefix(primary.public) + b"\xb4" + len(uid).to_bytes(4, "big") + uid
    certification = _signature(
        primary, _POSITIVE_CERTIFICATION, certified, _USER_ID_SUBPACKETS, created
    )
    bound = key_hash_prefix(primary.public) + key_hash_prefix(subkey.public)
    binding = _signature(primary, _SUBKEY_BINDING, bound, _BINDING_SUBPACKETS, created)
    user = packet(Tag.USER_ID, uid) + packet(Tag.SIGNATURE, certification)
    bind = packet(Tag.SIGNATURE, binding)
    public = (
        packet(Tag.PUBLIC_KEY, primary.public)
        + user
        + packet(Tag.PUBLIC_SUBKEY, subkey.public)
        + bind
    )
    secret = (
        packet(Tag.SECRET_KEY, primary.secret)
        + user
        + packet(Tag.SECRET_SUBKEY, subkey.secret)
        + bind
    )
    return SandboxKeyPair(
        public_armored=armor(public, "PUBLIC KEY BLOCK").decode("ascii"),
        private_armored=armor(secret, "PRIVATE KEY BLOCK").decode("ascii"),
        algorithm=algorithm,
    )


@functools.cache
def cached_keypair(algorithm: Algorithm = "rsa3072") -> SandboxKeyPair:
    """A key pair per algorithm, generated once per process (RSA-3072 takes ~1 s).

    Every sandbox in a process shares it unless given ``key_file``; tests need a
    provider key, not a fresh one each.
    """
    return generate_keypair(algorithm)


_PUBLIC_TAGS: Final = {Tag.SECRET_KEY: Tag.PUBLIC_KEY, Tag.SECRET_SUBKEY: Tag.PUBLIC_SUBKEY}
_CERTIFICATE_TAGS: Final = frozenset({Tag.USER_ID, Tag.USER_ATTRIBUTE, Tag.SIGNATURE})


def public_half(private_armored: str) -> str:
    """The armored certificate of a secret key: its packets with the secrets cut off.

    :raises ValueError: when the data holds no secret key (a public key cannot decrypt).
    """
    _, binary = dearmor(private_armored.encode("ascii"))
    packets = list(iter_packets(binary))
    if not packets or packets[0][0] != Tag.SECRET_KEY:
        raise ValueError("key_file must hold a secret key (the sandbox decrypts with it)")
    public = b"".join(
        packet(_PUBLIC_TAGS[tag], read_public_key(Reader(body)).body)
        if tag in _PUBLIC_TAGS
        else packet(tag, body)
        for tag, body in packets
        if tag in _PUBLIC_TAGS or tag in _CERTIFICATE_TAGS
    )
    return armor(public, "PUBLIC KEY BLOCK").decode("ascii")


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
