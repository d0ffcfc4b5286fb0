"""Signatures on keys: parsed defensively, and the policy on their hashes and revocations.

Only what a key's self-signatures say matters here (creation and expiry times, key
flags, the issuer, a revocation's reason); everything else in a signature is skipped
without being understood, as GnuPG and Sequoia skip it: an unknown hash id in a
*preference list*, an unknown notation or subpacket never makes a key unreadable. What
does make a binding signature unusable, as RFC 9580 §5.2.3.7 asks: a *critical*
subpacket this module does not understand.

The hash policy follows Sequoia's standard policy for signatures that need only second
pre-image resistance (self-signatures and binding signatures, which the key's owner
makes over data an attacker does not choose):

* MD5 and RIPEMD-160 are refused, whatever the signature's date (Sequoia's cut-offs for
  them are 2004-02-01 and 2013-02-01);
* SHA-1 is refused for signatures created on or after 2023-02-01 (Sequoia's cut-off);
  older SHA-1 self-signatures still count;
* SHA-224, SHA-256, SHA-384, SHA-512, SHA3-256 and SHA3-512 are accepted;
* any other hash id makes the signature unverifiable (skipped).

Revocations are not held to it (:func:`hash_refusal` is for bindings only): a revocation
that verifies counts in any hash, because refusing one would make what it revokes valid
again. Sequoia relaxes its policy for revocations the same way (by years), GnuPG does not
check hashes at all. The mathematics is :mod:`._verify`'s.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Final

import attrs

from ._packets import PK_DSA, PK_ECDSA, PK_ED448, PK_ED25519, PK_EDDSA, PK_RSA, PacketError, Reader

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "CLOCK_SKEW",
    "HASHES",
    "HASH_NAMES",
    "SHA1_CUTOFF",
    "SigType",
    "Signature",
    "hash_refusal",
    "parse_signature",
]

#: How far in the future a key or signature may be dated and still count (clock skew
#: between the provider's machine and ours). Sequoia allows the same 30 minutes.
CLOCK_SKEW: Final = dt.timedelta(minutes=30)
#: SHA-1 self-signatures made on or after this instant are refused (Sequoia's date).
SHA1_CUTOFF: Final = dt.datetime(2023, 2, 1, tzinfo=dt.timezone.utc)

#: Hash ids (RFC 9580 §9.5) and their names for messages.
HASH_NAMES: Final = {
    1: "MD5",
    2: "SHA-1",
    3: "RIPEMD-160",
    8: "SHA-256",
    9: "SHA-384",
    10: "SHA-512",
    11: "SHA-224",
    12: "SHA3-256",
    14: "SHA3-512",
}
#: Hash ids -> the name hashlib and ``cryptography`` know them by (RIPEMD-160 may be
#: missing from both: its signatures are then "cannot be checked").
HASHES: Final = {
    1: "MD5",
    2: "SHA1",
    3: "RIPEMD160",
    8: "SHA256",
    9: "SHA384",
    10: "SHA512",
    11: "SHA224",
    12: "SHA3_256",
    14: "SHA3_512",
}
_MD5: Final = 1
_SHA1: Final = 2
_RIPEMD160: Final = 3


class SigType:
    """Signature types (RFC 9580 §5.2.1) that matter for a key."""

    CERTIFICATIONS: Final = frozenset({0x10, 0x11, 0x12, 0x13})
    SUBKEY_BINDING: Final = 0x18
    DIRECT_KEY: Final = 0x1F
    KEY_REVOCATION: Final = 0x20
    SUBKEY_REVOCATION: Final = 0x28
    CERTIFICATION_REVOCATION: Final = 0x30
    REVOCATIONS: Final = frozenset({KEY_REVOCATION, SUBKEY_REVOCATION, CERTIFICATION_REVOCATION})


# Subpacket types (RFC 9580 §5.2.3.7) read here, and those safe to ignore even when
# marked critical (their meaning does not change whether a key may receive messages).
_CREATED: Final = 2
_SIG_EXPIRES: Final = 3
_KEY_EXPIRES: Final = 9
_ISSUER: Final = 16
_KEY_FLAGS: Final = 27
_ISSUER_FINGERPRINT: Final = 33
_PRIMARY_USER_ID: Final = 25
_REVOCATION_REASON: Final = 29
# Reasons for revocation (RFC 9580 §5.2.3.31) that say the key material is still sound:
# superseded, retired, user id no longer valid. Every other reason, and none, is "hard".
_SOFT_REASONS: Final = frozenset({1, 3, 32})
_UNDERSTOOD: Final = frozenset(
    {2, 3, 4, 5, 7, 9, 11, 12, 16, 21, 22, 23, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 39}
)


@attrs.frozen
class Signature:
    """A v4 signature packet as a key's validity needs it."""

    type: int
    pk_algorithm: int
    hash_algorithm: int
    #: Everything the signature hashes from its own packet (version to hashed area).
    hashed: bytes
    left16: bytes
    #: The signature material: MPIs (RSA, DSA, ECDSA, legacy EdDSA) or raw octets.
    material: tuple[bytes, ...]
    created: dt.datetime
    #: Seconds after ``created`` the signature stops counting (None: never).
    lifetime: int | None = None
    #: Seconds after the *key's* creation the key expires (None or 0: never).
    key_lifetime: int | None = None
    #: The first octet of the key flags, or None without a key flags subpacket.
    key_flags: int | None = None
    #: The issuer's key id (from an issuer or issuer fingerprint subpacket), if given.
    issuer: bytes | None = None
    primary_user_id: bool = False
    #: A critical subpacket this module does not understand (the signature is unusable).
    unknown_critical: int | None = None
    #: The reason-for-revocation code, or None without that subpacket.
    revocation_reason: int | None = None

    @property
    def hash_name(self) -> str:
        """``SHA-256``, ``RIPEMD-160``, ``hash 99`` …, for messages."""
        return HASH_NAMES.get(self.hash_algorithm, f"hash {self.hash_algorithm}")

    @property
    def expires(self) -> dt.datetime | None:
        """When the signature stops counting (its own expiry), or None."""
        return self.created + dt.timedelta(seconds=self.lifetime) if self.lifetime else None

    @property
    def hard(self) -> bool:
        """A revocation that counts whatever its date: no reason, or not a "soft" one."""
        return self.revocation_reason not in _SOFT_REASONS

    @property
    def identity(self) -> tuple[bytes, bytes, tuple[bytes, ...]]:
        """What makes two packets the same signature (a duplicate is checked once)."""
        return self.hashed, self.left16, self.material

    def alive(self, now: dt.datetime) -> bool:
        """Created by ``now`` (give or take the clock skew) and not expired at ``now``."""
        if self.created > now + CLOCK_SKEW:
            return False
        expires = self.expires
        return expires is None or now < expires


def _subpackets(area: bytes) -> Iterator[tuple[bool, int, bytes]]:
    """``(critical, type, data)`` of each subpacket in a signature's subpacket area."""
    reader = Reader(area)
    while reader.remaining:
        first = reader.byte()
        if first < 192:
            length = first
        elif first < 255:
            length = ((first - 192) << 8) + reader.byte() + 192
        else:
            length = reader.uint(4)
        if length == 0:
            raise PacketError("empty signature subpacket")
        body = reader.take(length)
        yield bool(body[0] & 0x80), body[0] & 0x7F, body[1:]


# Hashed subpackets read here: type -> (field, how its data is read, size it must have).
_FIELDS: Final[dict[int, tuple[str, Callable[[bytes], object], int | None]]] = {
    _CREATED: ("created", lambda data: int.from_bytes(data, "big"), 4),
    _SIG_EXPIRES: ("lifetime", lambda data: int.from_bytes(data, "big"), 4),
    _KEY_EXPIRES: ("key_lifetime", lambda data: int.from_bytes(data, "big"), 4),
    _KEY_FLAGS: ("key_flags", lambda data: data[0] if data else 0, None),
    _PRIMARY_USER_ID: ("primary_user_id", lambda data: data[:1] != b"\x00", None),
    _REVOCATION_REASON: ("revocation_reason", lambda data: data[0] if data else None, None),
}


def _read_subpackets(area: bytes, fields: dict[str, object], *, hashed: bool) -> None:
    for critical, kind, data in _subpackets(area):
        if kind == _ISSUER and len(data) == 8:
            fields.setdefault("issuer", data)
        elif kind == _ISSUER_FINGERPRINT and data[:1] == b"\x04" and len(data) == 21:
            fields["issuer"] = data[-8:]
        elif not hashed:
            continue  # only the issuer may come from the unhashed area
        elif kind in _FIELDS:
            name, read, size = _FIELDS[kind]
            if size is None or len(data) == size:
                fields[name] = read(data)
        elif critical and kind not in _UNDERSTOOD:
            fields.setdefault("unknown_critical", kind)


def parse_signature(body: bytes) -> Signature | None:
    """The v4 signature in a packet body; None for other versions (v3, v5, v6).

    :class:`PacketError` if the packet is malformed.
    """
    reader = Reader(body)
    if reader.byte() != 4:
        return None
    sig_type, pk_algorithm, hash_algorithm = reader.byte(), reader.byte(), reader.byte()
    hashed_area = reader.take(reader.uint(2))
    hashed = body[: reader.pos]
    unhashed_area = reader.take(reader.uint(2))
    left16 = reader.take(2)
    if pk_algorithm == PK_ED25519:
        material: tuple[bytes, ...] = (reader.take(64),)
    elif pk_algorithm == PK_ED448:
        material = (reader.take(114),)
    elif pk_algorithm in PK_RSA:
        material = (reader.mpi_bytes(),)
    elif pk_algorithm in (PK_DSA, PK_ECDSA, PK_EDDSA):
        material = (reader.mpi_bytes(), reader.mpi_bytes())
    else:
        material = (reader.rest(),)  # an algorithm nothing here verifies
    fields: dict[str, object] = {}
    _read_subpackets(hashed_area, fields, hashed=True)
    _read_subpackets(unhashed_area, fields, hashed=False)
    if "created" not in fields:
        raise PacketError("a signature without a creation time")
    created = dt.datetime.fromtimestamp(int(fields.pop("created")), dt.timezone.utc)  # type: ignore[call-overload]
    return Signature(
        sig_type,
        pk_algorithm,
        hash_algorithm,
        hashed,
        left16,
        material,
        created,
        **fields,  # type: ignore[arg-type]
    )


def hash_refusal(signature: Signature) -> str | None:
    """Why the policy refuses the signature's hash, or None if it accepts it."""
    algorithm = signature.hash_algorithm
    if algorithm in (_MD5, _RIPEMD160):
        return f"{signature.hash_name} is refused for signatures"
    if algorithm == _SHA1 and signature.created >= SHA1_CUTOFF:
        return f"SHA-1 is refused for self-signatures made since {SHA1_CUTOFF:%Y-%m-%d}"
    return None
