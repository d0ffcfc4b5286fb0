"""The provider's public key: parsed, verified and its encryption subkey chosen here.

The key is read with the package's own parser (:mod:`._certs`) and its signatures checked
with ``cryptography`` (:mod:`._sigs`), so what another implementation writes and this one
does not know never makes a key unreadable: an unknown hash id in a preference list, an
unknown subpacket, a subkey of an algorithm added after this was written (RFC 9580's
X25519) are skipped, as GnuPG skips them, and the choice is made among the rest.

The rule, GnuPG's: the newest subkey (by creation time) whose newest valid binding
signature gives it an encryption flag, that is not expired, not revoked, not created in
the future (beyond :data:`~._sigs.CLOCK_SKEW`), and of an algorithm messages can be built
for (RSA of 2048 bits or more; ECDH on Curve25519 or NIST P-256/384/521). A lone RSA
primary key certified for encryption takes the role when no subkey does. The signature
hash policy is Sequoia's standard policy (see :mod:`._sigs`).

A refusal is a :class:`~invoicing_async.ProviderKeyError` whose ``reason`` names the
problem truthfully and whose message says what to ask the provider for.
"""

from __future__ import annotations

import datetime as dt
import functools
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._errors import ProviderKeyError

from ._armor import ArmorError, armor, dearmor
from ._certs import Certificate, Component, KeyPacket, parse_certificate
from ._compose import Recipient, encrypt_message, recipient_for
from ._packets import (
    PK_DSA,
    PK_ECDH,
    PK_ELGAMAL,
    PK_RSA,
    PK_X448,
    PK_X25519,
    PacketError,
    PublicKey,
    Tag,
    iter_packets,
)
from ._sigs import (
    CLOCK_SKEW,
    Signature,
    SigType,
    can_verify,
    hash_refusal,
    key_subject,
    user_id_subject,
    verify,
)

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable

__all__ = ["ProviderKey"]

_ENCRYPT_FLAGS = 0x04 | 0x08  # encrypt communications, encrypt storage
_CAN_ENCRYPT = frozenset({*PK_RSA, PK_ELGAMAL, PK_ECDH, PK_X25519, PK_X448})
_SUPPORTED = "RSA (2048 bits or more) or ECDH (Curve25519, NIST P-256, P-384 or P-521)"
_ASK = f"ask the provider for a v4 key with an {_SUPPORTED} encryption subkey"


def _fail(reason: str, message: str) -> ProviderKeyError:
    return ProviderKeyError(message, reason=reason)


@attrs.frozen
class _Valid:
    """The newest valid signature among candidates, or the policy refusal that hid one."""

    signature: Signature | None
    #: A signature that verifies but whose hash the policy refuses (when none is valid).
    refused: Signature | None = None


def _newest_valid(
    signer: PublicKey,
    signatures: Iterable[Signature],
    subjects: tuple[bytes, ...],
    now: dt.datetime,
) -> _Valid:
    refused: Signature | None = None
    for signature in sorted(signatures, key=lambda s: s.created, reverse=True):
        if not signature.alive(now) or signature.unknown_critical is not None:
            continue
        if hash_refusal(signature) is not None:
            if refused is None and verify(signer, signature, *subjects) is not False:
                refused = signature
            continue
        if verify(signer, signature, *subjects) is True:
            return _Valid(signature)
    return _Valid(None, refused)


def _of_type(component: Component | Certificate, *kinds: int) -> list[Signature]:
    return [s for s in component.signatures if s.type in kinds]


def _date(moment: dt.datetime) -> str:
    return f"{moment:%Y-%m-%d}"


@attrs.frozen
class _Choice:
    fingerprint: str
    algorithm: str
    recipient: Recipient


def _lapsed(
    primary: PublicKey, subkey: Component, binding: Signature, now: dt.datetime
) -> str | None:
    """``revoked`` or ``expired <date>`` if the bound subkey is no longer valid."""
    packet = subkey.key
    assert packet is not None  # noqa: S101  (subkeys always carry their packet)
    subjects = (key_subject(primary), key_subject(packet.body))
    revocations = _of_type(subkey, SigType.SUBKEY_REVOCATION)
    if _newest_valid(primary, revocations, subjects, now).signature is not None:
        return "revoked"
    if binding.key_lifetime:
        expires = packet.created + dt.timedelta(seconds=binding.key_lifetime)
        if expires <= now:
            return f"expired {_date(expires)}"
    return None


def _verdict(primary: PublicKey, subkey: Component, now: dt.datetime) -> _Choice | tuple[str, str]:
    """The subkey as the recipient, or why not: ``(kind of problem, description)``."""
    packet = subkey.key
    assert packet is not None  # noqa: S101  (subkeys always carry their packet)
    described = f"{packet.description} subkey {packet.fingerprint}"
    if packet.version != 4:
        return "problem", f"{described}: a v{packet.version} subkey in a v4 key"
    if packet.created > now + CLOCK_SKEW:
        return "problem", f"{described}: created in the future ({_date(packet.created)})"
    subjects = (key_subject(primary), key_subject(packet.body))
    found = _newest_valid(primary, _of_type(subkey, SigType.SUBKEY_BINDING), subjects, now)
    binding = found.signature or found.refused
    if binding is None:
        return "problem", f"{described}: no valid binding signature"
    flags = binding.key_flags
    if (flags is None and packet.algorithm not in _CAN_ENCRYPT) or (
        flags is not None and not flags & _ENCRYPT_FLAGS
    ):
        return "problem", f"{described}: not an encryption key"
    if found.signature is None:
        return "weak_hash", f"{described}: its binding signature's {hash_refusal(binding)}"
    problem = _lapsed(primary, subkey, binding, now)
    if problem is not None:
        return "problem", f"{described}: {problem}"
    if packet.key is None:
        return "unsupported", described
    if packet.key.algorithm in PK_RSA and packet.key.bits < 2048:
        return "weak", described
    try:
        return _Choice(packet.fingerprint, packet.description, recipient_for(packet.key))
    except PacketError:
        return "unsupported", described


def _choose_subkey(primary: PublicKey, cert: Certificate, now: dt.datetime) -> _Choice:
    """The newest usable encryption subkey, or a ProviderKeyError saying why none is."""
    found: dict[str, list[str]] = {"problem": [], "weak": [], "unsupported": [], "weak_hash": []}
    subkeys = sorted(cert.subkeys, key=lambda c: c.key.created if c.key else now, reverse=True)
    for subkey in subkeys:
        verdict = _verdict(primary, subkey, now)
        if isinstance(verdict, _Choice):
            return verdict
        found[verdict[0]].append(verdict[1])
    if found["weak"]:
        raise _fail(
            "weak_rsa",
            f"the encryption subkey is RSA under 2048 bits ({found['weak'][0]}); {_ASK}",
        )
    if found["unsupported"]:
        raise _fail(
            "unsupported_algorithm",
            "the only encryption subkeys use algorithms this library does not support "
            f"({'; '.join(found['unsupported'])}); {_ASK}",
        )
    if found["weak_hash"]:
        raise _fail(
            "weak_hash",
            f"no encryption subkey is bound by an acceptable signature ({found['weak_hash'][0]});"
            " ask the provider to re-sign the key with SHA-256 or stronger",
        )
    detail = "; ".join(found["problem"]) if found["problem"] else "the key has no subkeys"
    raise _fail("no_encryption_subkey", f"no usable encryption subkey ({detail}); {_ASK}")


def _binary_public_key(data: bytes) -> bytes:
    """The binary key in ``data`` (armored or not), refused early if it is no v4 public key."""
    try:
        kind, binary = dearmor(data)
    except ArmorError as exc:
        raise _fail("unreadable", f"not an OpenPGP key ({exc})") from None
    if kind is not None and "PRIVATE KEY" in kind:
        raise _fail("secret_key", "this is a secret key: give the provider's PUBLIC key")
    if kind is not None and "PUBLIC KEY" not in kind:
        raise _fail("unreadable", f"expected a PGP PUBLIC KEY BLOCK, found a PGP {kind}")
    try:
        tag, body = next(iter_packets(binary))
    except (PacketError, StopIteration):
        raise _fail("unreadable", "not an OpenPGP key (no packet found)") from None
    if tag in (Tag.SECRET_KEY, Tag.SECRET_SUBKEY):
        raise _fail("secret_key", "this is a secret key: give the provider's PUBLIC key")
    if tag != Tag.PUBLIC_KEY:
        raise _fail("unreadable", f"not an OpenPGP public key (first packet has tag {tag})")
    version = body[0] if body else None
    if version in (5, 6):
        raise _fail(
            "unsupported_version",
            f"v{version} keys (RFC 9580) are not supported; ask the provider for a v4 key",
        )
    return binary


def _check_primary(packet: KeyPacket, pin: str | None, now: dt.datetime) -> PublicKey:
    """The primary key's fields; refused if it is not the pinned one, unusable or weak."""
    fingerprint = packet.fingerprint
    if pin is not None:
        wanted = pin.replace(" ", "").upper()
        if wanted != fingerprint:
            raise _fail(
                "fingerprint_mismatch",
                f"the key's fingerprint {fingerprint} does not match the pinned {wanted}",
            )
    if packet.version != 4:
        raise _fail("unsupported_version", f"v{packet.version} keys are not supported")
    fields = packet.key
    if fields is None or fields.algorithm in (PK_DSA, PK_ELGAMAL) or not can_verify(fields):
        raise _fail(
            "unsupported_algorithm",
            f"{packet.description} primary keys are not supported (key {fingerprint}); "
            "ask the provider for a key whose primary is RSA, EdDSA or ECDSA on a NIST curve",
        )
    if fields.algorithm in PK_RSA and fields.bits < 2048:
        raise _fail(
            "weak_rsa",
            f"RSA-{fields.bits} is under 2048 bits (key {fingerprint}); {_ASK}",
        )
    if packet.created > now + CLOCK_SKEW:
        raise _fail(
            "not_yet_valid",
            f"the key {fingerprint} is dated {_date(packet.created)}, in the future: "
            "check this machine's clock, or ask the provider for a key dated correctly",
        )
    return fields


def _self_signature(primary: PublicKey, cert: Certificate, now: dt.datetime) -> _Valid:
    """The primary key's current self-signature: its primary user id's, else direct-key."""
    subject = key_subject(primary)
    certified: list[tuple[bool, dt.datetime, Signature]] = []
    refused: Signature | None = None
    for user in cert.user_ids:
        subjects = (subject, user_id_subject(user.tag, user.body))
        found = _newest_valid(primary, _of_type(user, *SigType.CERTIFICATIONS), subjects, now)
        refused = refused or found.refused
        if found.signature is None:
            continue
        revoked = _of_type(user, SigType.CERTIFICATION_REVOCATION)
        revocation = _newest_valid(primary, revoked, subjects, now).signature
        if revocation is None or revocation.created < found.signature.created:
            certified.append(
                (found.signature.primary_user_id, found.signature.created, found.signature)
            )
    if certified:
        return _Valid(max(certified, key=lambda entry: entry[:2])[2])
    direct = _newest_valid(primary, _of_type(cert, SigType.DIRECT_KEY), (subject,), now)
    return direct if direct.signature is not None else _Valid(None, refused or direct.refused)


def _load(data: bytes, pin: str | None, now: dt.datetime) -> ProviderKey:
    binary = _binary_public_key(data)
    try:
        cert = parse_certificate(binary)
    except PacketError as exc:
        raise _fail("unreadable", f"the key cannot be parsed: {exc}") from None
    fingerprint = cert.primary.fingerprint
    primary = _check_primary(cert.primary, pin, now)
    revocations = _of_type(cert, SigType.KEY_REVOCATION)
    if _newest_valid(primary, revocations, (key_subject(primary),), now).signature is not None:
        raise _fail(
            "revoked", f"the key {fingerprint} is revoked; ask the provider for its new key"
        )
    current = _self_signature(primary, cert, now)
    if current.signature is None and current.refused is not None:
        raise _fail(
            "weak_hash",
            f"the key {fingerprint} is certified only by signatures the policy refuses "
            f"({hash_refusal(current.refused)}); "
            "ask the provider to re-sign the key with SHA-256 or stronger",
        )
    self_sig = current.signature
    expires_at = None
    if self_sig is not None and self_sig.key_lifetime:
        expires_at = cert.primary.created + dt.timedelta(seconds=self_sig.key_lifetime)
    if expires_at is not None and expires_at <= now:
        raise _fail(
            "expired",
            f"the key {fingerprint} expired on {_date(expires_at)}; "
            "ask the provider for a renewed key (or the same key with a new expiry date)",
        )
    try:
        choice = _choose_subkey(primary, cert, now)
    except ProviderKeyError as refusal:
        flags = self_sig.key_flags if self_sig is not None else None
        if not (primary.algorithm in PK_RSA and flags and flags & _ENCRYPT_FLAGS):
            raise
        # An RSA primary certified for encryption can take the role.
        try:
            choice = _Choice(fingerprint, primary.description, recipient_for(primary))
        except PacketError:
            raise refusal from None
    return ProviderKey(
        fingerprint=fingerprint,
        subkey_fingerprint=choice.fingerprint,
        algorithm=choice.algorithm,
        expires_at=expires_at,
        armored=armor(cert.binary, "PUBLIC KEY BLOCK").decode("ascii"),
        recipient=choice.recipient,
    )


@functools.lru_cache(maxsize=16)
def _load_cached(data: bytes, pin: str | None) -> ProviderKey:
    """Rebuild a key in a worker process once, not once per message."""
    return ProviderKey.from_armored(data, fingerprint=pin)


@attrs.frozen(repr=False, eq=False)
class ProviderKey:
    """The provider's public key, validated and ready to encrypt documents.

    Build it with :meth:`from_file` or :meth:`from_armored`; both raise
    :class:`~invoicing_async.ProviderKeyError` saying why a key cannot be used. Pass
    ``fingerprint=`` to pin the key you expect (40 hex characters, spaces allowed).

    Instances are immutable, thread-safe and picklable (a process pool rebuilds the key
    once per worker).

    .. versionadded:: 0.1.0
    """

    #: Primary key fingerprint, 40 upper-case hex characters.
    fingerprint: str
    #: Fingerprint of the subkey messages are encrypted to.
    subkey_fingerprint: str
    #: Algorithm of that subkey, e.g. ``RSA-3072`` or ``Curve25519``.
    algorithm: str
    #: When the primary key expires (aware, UTC), or ``None``.
    expires_at: dt.datetime | None
    #: The public key as ASCII armor.
    armored: str
    _recipient: Recipient

    @classmethod
    def from_armored(cls, data: str | bytes, *, fingerprint: str | None = None) -> ProviderKey:
        """Load a public key from ASCII armor (binary OpenPGP is accepted too)."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        return _load(bytes(data), fingerprint, dt.datetime.now(dt.timezone.utc))

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, fingerprint: str | None = None
    ) -> ProviderKey:
        """Load a public key from a file (armored or binary)."""
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise _fail("unreadable", f"cannot read the key file {path}: {exc.strerror}") from None
        return cls.from_armored(data, fingerprint=fingerprint)

    def encrypt(self, data: bytes) -> bytes:
        """Encrypt ``data`` to the provider: an ASCII-armored OpenPGP message.

        CPU-bound and synchronous (about 0.1 ms for 4 KB with RSA-3072); the client runs
        it off the event loop.
        """
        if self.expires_at is not None and time.time() >= self.expires_at.timestamp():
            raise _fail("expired", f"the key {self.fingerprint} expired on {self.expires_at}")
        return armor(encrypt_message(self._recipient, bytes(data)))

    def encrypt_binary(self, data: bytes) -> bytes:
        """Like :meth:`encrypt`, without the armor (for providers that take binary)."""
        return encrypt_message(self._recipient, bytes(data))

    def __repr__(self) -> str:
        return (
            f"<ProviderKey {self.fingerprint} encrypting to {self.algorithm} "
            f"subkey {self.subkey_fingerprint[-16:]}>"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProviderKey) and other.armored == self.armored

    def __hash__(self) -> int:
        return hash(self.armored)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_load_cached, (self.armored.encode("ascii"), self.fingerprint))
