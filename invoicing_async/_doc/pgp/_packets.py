"""OpenPGP packet framing and wire constants, shared by every writer and reader.

The client writes messages (:mod:`._compose`), the sandbox reads them and writes its
own keys; all of them frame packets, encode MPIs and parse key packets here, so there
is one definition of each encoding to get right:

* writing uses new-format headers only (RFC 4880 §4.2.2), as every current
  implementation does;
* reading accepts what peers send: old-format headers (1/2/4-octet and indeterminate
  lengths) and new-format ones including partial body lengths, which GnuPG uses when it
  streams. Every read past the end raises :class:`PacketError`, never ``IndexError``:
  the sandbox reads hostile input.

Partial body lengths are bounded so that reading costs a small multiple of the input in
memory and time: the first partial chunk of a packet must be at least 512 octets (RFC 4880
§4.2.2.4, RFC 9580 §4.2.1.4), at most :data:`MAX_SMALL_CHUNKS` later partial chunks of a
packet may be shorter than that (a streaming writer's tail), and the chunks are gathered
in one buffer rather than a list of small objects.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

import attrs
from cryptography.hazmat.primitives.asymmetric import ec

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "CURVES",
    "MAX_KEY_PACKET",
    "MAX_SMALL_CHUNKS",
    "OTHER_CURVES",
    "PK_DSA",
    "PK_ECDH",
    "PK_ECDSA",
    "PK_ED448",
    "PK_ED25519",
    "PK_EDDSA",
    "PK_ELGAMAL",
    "PK_RSA",
    "PK_X448",
    "PK_X25519",
    "PacketError",
    "PublicKey",
    "Reader",
    "Tag",
    "UnknownAlgorithmError",
    "checksum16",
    "encode_length",
    "iter_packets",
    "key_hash_prefix",
    "mpi",
    "packet",
    "read_public_key",
]


class Tag:
    """Packet tags (RFC 4880 §4.3, RFC 9580 §5)."""

    PKESK: Final = 1
    SIGNATURE: Final = 2
    SKESK: Final = 3
    ONE_PASS_SIGNATURE: Final = 4
    SECRET_KEY: Final = 5
    PUBLIC_KEY: Final = 6
    SECRET_SUBKEY: Final = 7
    COMPRESSED: Final = 8
    SED: Final = 9
    MARKER: Final = 10
    LITERAL: Final = 11
    TRUST: Final = 12
    USER_ID: Final = 13
    PUBLIC_SUBKEY: Final = 14
    USER_ATTRIBUTE: Final = 17
    SEIPD: Final = 18
    AEAD: Final = 20


# Only these packets may use partial body lengths (RFC 4880 §4.2.2.4).
_PARTIAL_OK: Final = frozenset({Tag.COMPRESSED, Tag.SED, Tag.LITERAL, Tag.SEIPD, Tag.AEAD})
# "The first partial length MUST be at least 512 octets long."
_MIN_FIRST_PARTIAL: Final = 512
#: Partial chunks under 512 octets a packet may have after its first one (writers that
#: flush in powers of two end a stream with a few; 1-octet chunks are a memory attack).
MAX_SMALL_CHUNKS: Final = 32
#: The longest key packet a v4 fingerprint can cover (its length is hashed in 2 octets).
MAX_KEY_PACKET: Final = 0xFFFF

#: Public-key algorithm ids (RFC 4880 §9.1, RFC 6637).
PK_RSA: Final = frozenset({1, 2, 3})
PK_ELGAMAL: Final = 16
PK_DSA: Final = 17
PK_ECDH: Final = 18
PK_ECDSA: Final = 19
PK_EDDSA: Final = 22
#: RFC 9580's native Bernstein-curve algorithms: their keys are fixed-size octet strings.
PK_X25519: Final = 25
PK_X448: Final = 26
PK_ED25519: Final = 27
PK_ED448: Final = 28
_NATIVE_SIZES: Final = {PK_X25519: 32, PK_X448: 56, PK_ED25519: 32, PK_ED448: 57}
_ALGORITHM_NAMES: Final = {
    PK_ELGAMAL: "ElGamal",
    PK_DSA: "DSA",
    PK_ECDH: "ECDH",
    PK_ECDSA: "ECDSA",
    PK_EDDSA: "EdDSA",
    PK_X25519: "X25519",
    PK_X448: "X448",
    PK_ED25519: "Ed25519",
    PK_ED448: "Ed448",
}

#: Curve OIDs as keys carry them (without the length octet): name, and the
#: ``cryptography`` curve for the NIST ones (``None``: a Bernstein curve).
CURVES: Final[dict[bytes, tuple[str, ec.EllipticCurve | None]]] = {
    bytes.fromhex("2b060104019755010501"): ("Curve25519", None),
    bytes.fromhex("2b06010401da470f01"): ("Ed25519", None),
    bytes.fromhex("2a8648ce3d030107"): ("NIST P-256", ec.SECP256R1()),
    bytes.fromhex("2b81040022"): ("NIST P-384", ec.SECP384R1()),
    bytes.fromhex("2b81040023"): ("NIST P-521", ec.SECP521R1()),
}
#: Curves keys may carry that nothing here encrypts to: named in refusals only.
OTHER_CURVES: Final = {
    bytes.fromhex("2b2403030208010107"): "brainpoolP256r1",
    bytes.fromhex("2b240303020801010b"): "brainpoolP384r1",
    bytes.fromhex("2b240303020801010d"): "brainpoolP512r1",
    bytes.fromhex("2b8104000a"): "secp256k1",
    bytes.fromhex("2b656f"): "Curve448",
    bytes.fromhex("2b6571"): "Ed448",
}


class PacketError(ValueError):
    """Malformed OpenPGP data: truncated, bad header, unknown key layout."""


class UnknownAlgorithmError(PacketError):
    """A key of a public-key algorithm nothing here reads (its layout is unknown)."""


def encode_length(length: int) -> bytes:
    """A new-format body length: 1, 2 or 5 octets (also the subpacket length encoding)."""
    if length < 192:
        return bytes((length,))
    if length < 8384:
        length -= 192
        return bytes(((length >> 8) + 192, length & 0xFF))
    return b"\xff" + length.to_bytes(4, "big")


def packet(tag: int, body: bytes) -> bytes:
    """A new-format packet header (RFC 4880 §4.2.2) followed by ``body``."""
    return bytes((0xC0 | tag,)) + encode_length(len(body)) + body


def mpi(value: bytes | int) -> bytes:
    """A multiprecision integer: bit count, then the big-endian bytes without leading zeros."""
    if isinstance(value, int):
        value = value.to_bytes((value.bit_length() + 7) // 8, "big")
    value = value.lstrip(b"\x00")
    bits = (len(value) - 1) * 8 + value[0].bit_length() if value else 0
    return bits.to_bytes(2, "big") + value


def checksum16(data: bytes) -> bytes:
    """OpenPGP's two-octet additive checksum (of session keys and secret key MPIs)."""
    return (sum(data) & 0xFFFF).to_bytes(2, "big")


def key_hash_prefix(body: bytes) -> bytes:
    """A v4 key packet body as fingerprints and signatures hash it (old-format framing).

    :class:`PacketError` for a body over 65,535 octets, which no v4 fingerprint covers.
    """
    if len(body) > MAX_KEY_PACKET:
        raise PacketError(f"a key packet of {len(body)} octets (at most {MAX_KEY_PACKET})")
    return b"\x99" + len(body).to_bytes(2, "big") + body


class Reader:
    """Bounds-checked cursor over bytes: reading past the end raises :class:`PacketError`."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    @property
    def remaining(self) -> int:
        """Octets not read yet."""
        return len(self.data) - self.pos

    def byte(self) -> int:
        """One octet."""
        if self.pos >= len(self.data):
            raise PacketError("truncated data")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def take(self, count: int) -> bytes:
        """The next ``count`` octets."""
        end = self.pos + count
        if count < 0 or end > len(self.data):
            raise PacketError("truncated data")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def uint(self, size: int) -> int:
        """A big-endian unsigned integer of ``size`` octets."""
        return int.from_bytes(self.take(size), "big")

    def mpi_bytes(self) -> bytes:
        """An MPI's magnitude, big-endian."""
        return self.take((self.uint(2) + 7) // 8)

    def mpi(self) -> int:
        """An MPI's value."""
        return int.from_bytes(self.mpi_bytes(), "big")

    def rest(self) -> bytes:
        """Everything not read yet."""
        return self.take(self.remaining)


def _definite_length(reader: Reader, first: int) -> int | None:
    """A new-format length from its first octet on; None for a partial length."""
    if first < 192:
        return first
    if first < 224:
        return ((first - 192) << 8) + reader.byte() + 192
    if first == 255:
        return reader.uint(4)
    return None


def _new_format_body(reader: Reader, tag: int) -> bytes:
    """A new-format packet's body: one definite length, or partial chunks joined."""
    first = reader.byte()
    length = _definite_length(reader, first)
    if length is not None:
        return reader.take(length)
    if tag not in _PARTIAL_OK:
        raise PacketError("partial length on a packet that forbids it")
    chunk = 1 << (first & 0x1F)
    if chunk < _MIN_FIRST_PARTIAL:
        raise PacketError("a first partial body chunk under 512 octets")
    body = bytearray(reader.take(chunk))
    small = 0
    while True:
        first = reader.byte()
        length = _definite_length(reader, first)
        if length is not None:
            body += reader.take(length)
            return bytes(body)
        chunk = 1 << (first & 0x1F)
        if chunk < _MIN_FIRST_PARTIAL:
            small += 1
            if small > MAX_SMALL_CHUNKS:
                raise PacketError("too many small partial body chunks")
        body += reader.take(chunk)


def iter_packets(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(tag, body)`` of each packet in ``data``, with every length encoding understood.

    Partial body chunks are joined into one body.
    """
    reader = Reader(data)
    while reader.remaining:
        header = reader.byte()
        if not header & 0x80:
            raise PacketError("invalid packet header")
        if header & 0x40:
            tag = header & 0x3F
            body = _new_format_body(reader, tag)
        else:
            tag = (header >> 2) & 0x0F
            length_type = header & 0x03
            body = reader.rest() if length_type == 3 else reader.take(reader.uint(1 << length_type))
        if tag == 0:
            raise PacketError("reserved packet tag 0")
        yield tag, body


@attrs.frozen
class PublicKey:
    """The public part of a v4 key packet (primary or subkey, public or secret)."""

    #: The public key packet body: what fingerprints and signatures hash.
    body: bytes
    algorithm: int
    #: The algorithm's public MPIs (RSA: n, e; DSA: p, q, g, y; EC: the point; RFC 9580's
    #: X25519, X448, Ed25519, Ed448: the raw key octets).
    mpis: tuple[bytes, ...]
    #: The curve OID of an EC key (without its length octet).
    oid: bytes = b""
    #: ECDH's KDF parameters with their length octet: ``03 01 hash cipher``.
    kdf: bytes = b""
    #: The v4 fingerprint (RFC 4880 §12.2): SHA-1 of the framed public key, computed once.
    fingerprint: bytes = attrs.field(init=False, repr=False, eq=False)

    @fingerprint.default
    def _fingerprint(self) -> bytes:
        return hashlib.sha1(key_hash_prefix(self.body), usedforsecurity=False).digest()

    @property
    def key_id(self) -> bytes:
        """The key id: the fingerprint's last eight octets."""
        return self.fingerprint[-8:]

    @property
    def description(self) -> str:
        """``RSA-3072``, ``Curve25519``, ``DSA`` …, for messages."""
        if self.algorithm in PK_RSA:
            return f"RSA-{self.bits}"
        if self.oid in CURVES:
            return CURVES[self.oid][0]
        if self.oid:
            return OTHER_CURVES.get(self.oid, f"curve {self.oid.hex()}")
        return _ALGORITHM_NAMES.get(self.algorithm, f"algorithm {self.algorithm}")

    @property
    def bits(self) -> int:
        """The RSA modulus size in bits (0 for other algorithms)."""
        if self.algorithm not in PK_RSA:
            return 0
        return int.from_bytes(self.mpis[0], "big").bit_length()


# How many MPIs follow the fixed fields of each non-EC algorithm's public key.
_MPI_COUNTS: Final = {1: 2, 2: 2, 3: 2, PK_ELGAMAL: 3, PK_DSA: 4}


def read_public_key(reader: Reader) -> PublicKey:
    """Read a v4 public key from ``reader`` (which then stands at any secret part)."""
    start = reader.pos
    version = reader.byte()
    if version != 4:
        raise PacketError(f"unsupported key version {version}")
    reader.take(4)  # creation time
    algorithm = reader.byte()
    oid = kdf = b""
    if algorithm in _MPI_COUNTS:
        mpis = tuple(reader.mpi_bytes() for _ in range(_MPI_COUNTS[algorithm]))
    elif algorithm in _NATIVE_SIZES:
        mpis = (reader.take(_NATIVE_SIZES[algorithm]),)
    elif algorithm in (PK_ECDH, PK_ECDSA, PK_EDDSA):
        oid = reader.take(reader.byte())
        mpis = (reader.mpi_bytes(),)
        if algorithm == PK_ECDH:
            kdf = reader.take(1)
            kdf += reader.take(kdf[0])
    else:
        raise UnknownAlgorithmError(f"unsupported public key algorithm {algorithm}")
    return PublicKey(reader.data[start : reader.pos], algorithm, mpis, oid, kdf)
