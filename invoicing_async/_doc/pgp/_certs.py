"""A transferable public key (RFC 9580 §10.1) split into its parts, tolerantly.

The primary key, its user ids and its subkeys, each with the signatures that follow it
in the file (where a signature *belongs* is decided by what it verifies against, in
:mod:`._validity`). What cannot be understood is kept as "not understood" rather than
refused, as GnuPG does: a subkey of an algorithm nothing here reads (RFC 9580's X25519,
a future algorithm) is a :class:`KeyPacket` without ``key``; a signature packet that is
malformed or of another version is skipped, and so is a user id of :data:`MAX_USER_ID`
octets or more (Sequoia's limit). A key packet that is *malformed* (its known
algorithm's fields truncated, octets left over after them, or more than the 65,535
octets a v4 fingerprint covers) carries the ``problem``: such a primary key is refused,
such a subkey is never used. Only a broken framing or an unreadable primary key packet
makes the whole certificate unreadable (:class:`PacketError`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
from typing import Final

import attrs

from ._packets import (
    MAX_KEY_PACKET,
    PacketError,
    PublicKey,
    Reader,
    Tag,
    UnknownAlgorithmError,
    iter_packets,
    key_hash_prefix,
    packet,
    read_public_key,
)
from ._sigs import Signature, parse_signature

__all__ = [
    "MAX_USER_ID",
    "Certificate",
    "Component",
    "KeyPacket",
    "parse_certificate",
    "read_key_packet",
]

# Packets a certificate may carry that say nothing about it here.
_IGNORED = frozenset({Tag.TRUST, Tag.MARKER})
#: User id packets this long or longer are skipped, as Sequoia skips them (GnuPG skips
#: those over 2 KiB): a key whose only user id is one has no self-signature.
MAX_USER_ID: Final = 32 * 1024


@attrs.frozen
class KeyPacket:
    """A key packet: its fixed fields always, its public key when it can be read."""

    body: bytes
    version: int
    created: dt.datetime
    algorithm: int
    #: The parsed public key; None for an algorithm (or version) nothing here reads, or a
    #: malformed packet.
    key: PublicKey | None
    #: Why the packet is malformed (None: it is not).
    problem: str | None = None
    #: The v4 fingerprint, 40 upper-case hex digits ("" when the packet is too long to
    #: have one).
    fingerprint: str = attrs.field(init=False)

    @fingerprint.default
    def _fingerprint(self) -> str:
        if self.key is not None:
            return self.key.fingerprint.hex().upper()
        if len(self.body) > MAX_KEY_PACKET:
            return ""
        digest = hashlib.sha1(key_hash_prefix(self.body), usedforsecurity=False)
        return digest.hexdigest().upper()

    @property
    def description(self) -> str:
        """``RSA-3072``, ``Curve25519``, ``X25519``, ``algorithm 99`` …, for messages."""
        if self.key is not None:
            return self.key.description
        return f"public-key algorithm {self.algorithm}"


@attrs.frozen
class Component:
    """A user id, user attribute or subkey, and the signatures that follow it."""

    tag: int
    body: bytes
    signatures: tuple[Signature, ...]
    #: The subkey's packet (None for user ids and attributes).
    key: KeyPacket | None = None


@attrs.frozen
class Certificate:
    """A v4 certificate: the primary key and its components."""

    primary: KeyPacket
    #: Signatures directly after the primary key (direct-key signatures, revocations).
    signatures: tuple[Signature, ...]
    user_ids: tuple[Component, ...]
    subkeys: tuple[Component, ...]
    #: The certificate's packets re-framed (trust and marker packets left out).
    binary: bytes


def read_key_packet(body: bytes) -> KeyPacket:
    """A key packet's fixed fields, and its public key if the algorithm is known."""
    reader = Reader(body)
    version = reader.byte()
    created = dt.datetime.fromtimestamp(reader.uint(4), dt.timezone.utc)
    algorithm = reader.byte()
    key: PublicKey | None = None
    problem: str | None = None
    if len(body) > MAX_KEY_PACKET:
        problem = f"a key packet of {len(body)} octets (a v4 key has at most {MAX_KEY_PACKET})"
    elif version == 4:
        fields = Reader(body)
        try:
            key = read_public_key(fields)
        except UnknownAlgorithmError:
            pass
        except PacketError:
            problem = "a key packet whose public key fields are truncated"
        else:
            if fields.remaining:
                key, problem = None, f"{fields.remaining} octets after the public key fields"
    return KeyPacket(body, version, created, algorithm, key, problem)


def _signatures(bodies: list[bytes]) -> tuple[Signature, ...]:
    signatures: list[Signature] = []
    for body in bodies:
        try:
            signature = parse_signature(body)
        except PacketError:
            continue  # a malformed signature is no signature, as GnuPG treats it
        if signature is not None:
            signatures.append(signature)
    return tuple(signatures)


def parse_certificate(binary: bytes) -> Certificate:
    """The first certificate in ``binary`` (whose first packet must be a public key).

    :class:`PacketError` when the framing or the primary key cannot be read.
    """
    packets = [(tag, body) for tag, body in iter_packets(binary) if tag not in _IGNORED]
    if not packets or packets[0][0] != Tag.PUBLIC_KEY:
        raise PacketError("the first packet is not a public key")
    primary = read_key_packet(packets[0][1])
    groups: list[tuple[int, bytes, list[bytes], KeyPacket | None]] = [
        (Tag.PUBLIC_KEY, packets[0][1], [], primary)
    ]
    kept = [packets[0]]
    for tag, body in packets[1:]:
        if tag == Tag.PUBLIC_KEY:
            break  # a second certificate: only the first is the provider's key
        kept.append((tag, body))
        if tag == Tag.SIGNATURE:
            groups[-1][2].append(body)
        elif tag == Tag.USER_ATTRIBUTE or (tag == Tag.USER_ID and len(body) < MAX_USER_ID):
            groups.append((tag, body, [], None))
        elif tag == Tag.PUBLIC_SUBKEY:
            # not even the fixed fields: skipped like an unknown packet
            with contextlib.suppress(PacketError):
                groups.append((tag, body, [], read_key_packet(body)))
        # other packets (unknown tags) are skipped with what follows them kept in place
    user_ids: list[Component] = []
    subkeys: list[Component] = []
    for tag, body, signatures, key in groups[1:]:
        component = Component(tag, body, _signatures(signatures), key)
        (subkeys if tag == Tag.PUBLIC_SUBKEY else user_ids).append(component)
    return Certificate(
        primary,
        _signatures(groups[0][2]),
        tuple(user_ids),
        tuple(subkeys),
        b"".join(packet(tag, body) for tag, body in kept),
    )
