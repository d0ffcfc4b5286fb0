# Copyright (c) 2026 the invoicing_async developers. MIT License.
"""A test-only forger of v4 certificates: correctly signed, with any self-signature wanted.

A helper module, not a test module. Real tools refuse to make most of what validation must
be tested against (a SHA-1 revocation made today, a revocation dated next week, a binding
older than its key, a subkey revocation filed under the user id); this writes them, and
signs them properly, so that a verdict is about the rule and not about a broken signature.

Key material comes from the sandbox's own writers (``invoicing_sandbox._keys``: RSA,
Ed25519 and Curve25519 packets), made once per process and re-dated by rewriting the
creation time in the packet body; framing and armor are the package's. Signatures are
written here because they need what the sandbox's writer does not offer: any hash, any
date, any subpacket, or none.

:class:`Cert` collects packets in order; its methods append a component and its
self-signature, and :meth:`Cert.raw` / :meth:`Cert.signature` put anything anywhere::

    primary = key("ed25519", T0)
    sub = key("cv25519", T0)
    cert = Cert(primary).user_id().subkey(sub).revoke_subkey(sub, hash_id=SHA1, created=NOW)
    cert.armored()
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import time
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from invoicing_async._doc.pgp import Tag, armor, key_hash_prefix, mpi, packet
from invoicing_sandbox._keys import _ed25519, _rsa, _subpacket, _x25519
from invoicing_sandbox._pgp._secret import _decryption_key

if TYPE_CHECKING:
    from collections.abc import Callable

NOW = int(time.time())
DAY = 86400
#: When forged keys are made: a year ago, so that signatures may be dated before and after.
T0 = NOW - 365 * DAY

MD5, SHA1, SHA256, SHA512 = 1, 2, 8, 10
_HASH_NAMES = {MD5: "md5", SHA1: "sha1", SHA256: "sha256", SHA512: "sha512"}
_HASH_CLASSES = {MD5: hashes.MD5, SHA1: hashes.SHA1, SHA256: hashes.SHA256, SHA512: hashes.SHA512}

# Signature types (RFC 9580 §5.2.1).
POSITIVE_CERTIFICATION = 0x13
SUBKEY_BINDING = 0x18
DIRECT_KEY = 0x1F
KEY_REVOCATION = 0x20
SUBKEY_REVOCATION = 0x28
CERTIFICATION_REVOCATION = 0x30
# Reasons for revocation.
NO_REASON, SUPERSEDED, COMPROMISED, RETIRED = 0, 1, 2, 3
# Key flags.
CERTIFY_SIGN, ENCRYPT = 0x03, 0x0C


@dataclasses.dataclass(frozen=True)
class Key:
    """A key packet body and a way to sign with it (any hash)."""

    body: bytes
    sign: Callable[[int, bytes], bytes] | None

    @property
    def fingerprint(self) -> str:
        """40 upper-case hex digits."""
        return hashlib.sha1(key_hash_prefix(self.body)).hexdigest().upper()  # noqa: S324

    @property
    def key_id(self) -> bytes:
        """The last eight octets of the fingerprint."""
        return bytes.fromhex(self.fingerprint)[-8:]

    @property
    def algorithm(self) -> int:
        """The public-key algorithm id."""
        return self.body[5]

    def redated(self, created: int) -> Key:
        """The same key material with another creation time (a different key to OpenPGP)."""
        return Key(self.body[:1] + created.to_bytes(4, "big") + self.body[5:], self.sign)

    def with_body(self, body: bytes) -> Key:
        """The same signer with another packet body (trailing octets, a bad point …)."""
        return Key(body, self.sign)


def _rsa_signer(secret: bytes) -> Callable[[int, bytes], bytes]:
    private = _decryption_key(secret).private_key

    def sign(hash_id: int, digest: bytes) -> bytes:
        algorithm = _HASH_CLASSES[hash_id]()
        return mpi(private.sign(digest, padding.PKCS1v15(), Prehashed(algorithm)))  # type: ignore[union-attr, call-arg]

    return sign


@functools.cache
def _material(kind: str, slot: int) -> Key:
    """Key material of ``kind`` (``rsa2048``, ``ed25519``, ``cv25519``), made once per slot."""
    if kind == "rsa2048":
        made = _rsa(2048, T0)
        return Key(made.public, _rsa_signer(made.secret))
    if kind == "ed25519":
        made = _ed25519(T0)
        ed_sign = made.sign
        assert ed_sign is not None
        return Key(made.public, lambda _hash_id, digest: ed_sign(digest))
    made = _x25519(T0)
    return Key(made.public, None)


def key(kind: str, created: int = T0, slot: int = 0) -> Key:
    """A key of ``kind`` created at ``created``; ``slot`` tells keys of one kind apart."""
    return _material(kind, slot).redated(created)


@functools.lru_cache(maxsize=64)
def _hashed(hash_id: int, subject: bytes) -> hashlib._Hash:
    """The hash state after ``subject`` (many signatures over one large subject)."""
    return hashlib.new(_HASH_NAMES[hash_id], subject)


def user_id_subject(uid: bytes) -> bytes:
    """A user id as certifications hash it."""
    return b"\xb4" + len(uid).to_bytes(4, "big") + uid


def signature(
    signer: Key,
    sig_type: int,
    subject: bytes,
    *,
    created: int,
    hash_id: int = SHA256,
    key_expires: int | None = None,
    expires: int | None = None,
    flags: int | None = None,
    reason: int | None = None,
    primary_user_id: bool = False,
    issuer: bool = True,
    bad: bool = False,
) -> bytes:
    """A v4 signature packet body by ``signer`` over ``subject`` (already framed).

    ``key_expires``/``expires`` are seconds after the key's/signature's creation;
    ``bad`` spoils the signature material (the two-octet digest prefix stays right, so only
    the public-key operation can tell).
    """
    assert signer.sign is not None, "this key cannot sign"
    hashed = _subpacket(2, created.to_bytes(4, "big"))
    if key_expires is not None:
        hashed += _subpacket(9, key_expires.to_bytes(4, "big"))
    if expires is not None:
        hashed += _subpacket(3, expires.to_bytes(4, "big"))
    if flags is not None:
        hashed += _subpacket(27, bytes((flags,)))
    if primary_user_id:
        hashed += _subpacket(25, b"\x01")
    if reason is not None:
        hashed += _subpacket(29, bytes((reason,)) + b"forged")
    if issuer:
        hashed += _subpacket(33, b"\x04" + bytes.fromhex(signer.fingerprint))
    head = bytes((4, sig_type, signer.algorithm, hash_id)) + len(hashed).to_bytes(2, "big")
    head += hashed
    digest = _hashed(hash_id, subject).copy()
    digest.update(head + b"\x04\xff" + len(head).to_bytes(4, "big"))
    value = digest.digest()
    unhashed = _subpacket(16, signer.key_id) if issuer else b""
    material = signer.sign(hash_id, hashlib.sha256(value).digest() if bad else value)
    return head + len(unhashed).to_bytes(2, "big") + unhashed + value[:2] + material


@dataclasses.dataclass
class Cert:
    """A certificate being forged: packets in file order, written by the methods below."""

    primary: Key
    packets: list[tuple[int, bytes]] = dataclasses.field(default_factory=list)
    uid: bytes = b"Forged Provider <forged@provider.test>"

    def __post_init__(self) -> None:
        self.packets.append((Tag.PUBLIC_KEY, self.primary.body))

    # --- subjects ---------------------------------------------------------------------------

    def key_subject(self) -> bytes:
        """What direct-key signatures and key revocations sign."""
        return key_hash_prefix(self.primary.body)

    def uid_subject(self, uid: bytes | None = None) -> bytes:
        """What a certification of ``uid`` (default: the forger's) signs."""
        return self.key_subject() + user_id_subject(uid or self.uid)

    def subkey_subject(self, sub: Key) -> bytes:
        """What a binding or revocation of ``sub`` signs."""
        return self.key_subject() + key_hash_prefix(sub.body)

    # --- packets ----------------------------------------------------------------------------

    def raw(self, tag: int, body: bytes) -> Cert:
        """Any packet, here."""
        self.packets.append((tag, body))
        return self

    def signature(self, sig_type: int, subject: bytes, **options: object) -> Cert:
        """A signature by the primary key over ``subject``, here (``created`` defaults to T0)."""
        options.setdefault("created", T0)
        return self.raw(Tag.SIGNATURE, signature(self.primary, sig_type, subject, **options))  # type: ignore[arg-type]

    def user_id(self, uid: bytes | None = None, **options: object) -> Cert:
        """A user id and its positive certification (flags certify+sign, primary)."""
        options.setdefault("flags", CERTIFY_SIGN)
        options.setdefault("primary_user_id", True)
        self.raw(Tag.USER_ID, uid or self.uid)
        return self.signature(POSITIVE_CERTIFICATION, self.uid_subject(uid), **options)

    def direct_key(self, **options: object) -> Cert:
        """A direct-key signature, here."""
        return self.signature(DIRECT_KEY, self.key_subject(), **options)

    def revoke_key(self, **options: object) -> Cert:
        """A key revocation, here."""
        return self.signature(KEY_REVOCATION, self.key_subject(), **options)

    def revoke_user_id(self, uid: bytes | None = None, **options: object) -> Cert:
        """A certification revocation of ``uid``, here."""
        return self.signature(CERTIFICATION_REVOCATION, self.uid_subject(uid), **options)

    def subkey(self, sub: Key, *, bound: bool = True, **options: object) -> Cert:
        """A subkey packet and (``bound``) its binding (flags: encrypt)."""
        options.setdefault("flags", ENCRYPT)
        options.setdefault("created", int.from_bytes(sub.body[1:5], "big"))
        self.raw(Tag.PUBLIC_SUBKEY, sub.body)
        return self.bind(sub, **options) if bound else self

    def bind(self, sub: Key, **options: object) -> Cert:
        """A binding signature of ``sub``, here (wherever that is)."""
        options.setdefault("flags", ENCRYPT)
        return self.signature(SUBKEY_BINDING, self.subkey_subject(sub), **options)

    def revoke_subkey(self, sub: Key, **options: object) -> Cert:
        """A subkey revocation of ``sub``, here (wherever that is)."""
        return self.signature(SUBKEY_REVOCATION, self.subkey_subject(sub), **options)

    # --- output -----------------------------------------------------------------------------

    def binary(self) -> bytes:
        """The certificate, binary."""
        return b"".join(packet(tag, body) for tag, body in self.packets)

    def armored(self) -> str:
        """The certificate, ASCII-armored."""
        return armor(self.binary(), "PUBLIC KEY BLOCK").decode("ascii")
