"""The provider's public key: parsed and verified with PGPy, the encryption subkey chosen here.

PGPy reads the key and checks the mathematics of its signatures (user id
certifications, subkey bindings, revocations). Everything PGPy would decide by policy is
decided here instead, because PGPy picks the first subkey with an encryption flag,
ignoring expiry and revocation, and does not check an expired primary key. The rule: the
newest subkey whose binding signature verifies, with an encryption flag, not expired, not
revoked, of an algorithm messages can be built for.

The key material itself (RSA numbers, ECDH points and KDF parameters) is read with the
package's own packet parser, which the message composer builds its recipient from. PGPy's
internals are used only where it has no public view: a subkey's unfiltered signatures,
and a signature check without PGPy's expiry policy.

This is the only module that imports PGPy.
"""

from __future__ import annotations

import datetime as dt
import functools
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from cryptography.hazmat.primitives import hashes

from invoicing_async._errors import ProviderKeyError

from ._armor import ArmorError, armor, dearmor
from ._compose import Recipient, encrypt_message, recipient_for
from ._packets import (
    PK_DSA,
    PK_ELGAMAL,
    PK_RSA,
    PacketError,
    PublicKey,
    Reader,
    Tag,
    iter_packets,
    read_public_key,
)

if TYPE_CHECKING:
    import os
    from collections.abc import Iterator

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import pgpy
    from pgpy.constants import KeyFlags, SignatureType

__all__ = ["ProviderKey"]

_ENCRYPT_FLAGS = frozenset({KeyFlags.EncryptCommunications, KeyFlags.EncryptStorage})
_CERTIFICATIONS = frozenset(
    {
        SignatureType.Generic_Cert,
        SignatureType.Persona_Cert,
        SignatureType.Casual_Cert,
        SignatureType.Positive_Cert,
    }
)


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence PGPy's own warnings (TODO notes, CFB deprecation) around PGPy calls only."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _fail(reason: str, message: str) -> ProviderKeyError:
    return ProviderKeyError(message, reason=reason)


def _hex(fingerprint: Any) -> str:
    return "".join(str(fingerprint).split()).upper()


def _verified(primary: Any, subject: Any, signature: Any) -> bool:
    """Check the signature cryptographically, and nothing else.

    ``PGPKey.verify`` also applies PGPy's policy, and fails every signature of a key that
    has since expired; expiry, revocation and algorithm policy are decided here instead,
    so only the mathematics is asked of PGPy.
    """
    try:
        with _quiet():
            digest = getattr(hashes, signature.hash_algorithm.name)()
            verified = primary._key.verify(  # noqa: SLF001
                signature.hashdata(subject), signature.__sig__, digest
            )
    except Exception:  # noqa: BLE001  (PGPy raises many types for broken signatures)
        return False
    return verified is True


def _newest_verified(primary: Any, subject: Any, signatures: list[Any]) -> Any | None:
    for signature in sorted(signatures, key=lambda s: s.created, reverse=True):
        if _verified(primary, subject, signature):
            return signature
    return None


def _signatures(primary: Any, subject: Any, *kinds: Any) -> list[Any]:
    """``subject``'s signatures of the types ``kinds`` made by the primary key."""
    return [
        s
        for s in subject._signatures  # noqa: SLF001  (PGPy exposes no unfiltered view)
        if s.type in kinds and s.signer == primary.fingerprint.keyid
    ]


def _expiry(created: dt.datetime, signature: Any) -> dt.datetime | None:
    lifetime = signature.key_expiration if signature is not None else None
    if not lifetime:  # absent, or 0: never expires
        return None
    return created + lifetime  # type: ignore[no-any-return]


def _public_keys(binary: bytes) -> dict[str, PublicKey]:
    """Every v4 public (sub)key packet in ``binary``, by fingerprint."""
    keys: dict[str, PublicKey] = {}
    for tag, body in iter_packets(binary):
        if tag in (Tag.PUBLIC_KEY, Tag.PUBLIC_SUBKEY):
            try:
                key = read_public_key(Reader(body))
            except PacketError:
                continue  # an algorithm we do not know: PGPy's verdict stands
            keys[key.fingerprint.hex().upper()] = key
    return keys


@attrs.frozen
class _Choice:
    fingerprint: str
    algorithm: str
    recipient: Recipient


def _verdict(
    primary: Any, subkey: Any, fields: PublicKey | None, now: dt.datetime
) -> _Choice | tuple[str, str]:
    """The subkey as the recipient, or why not: ``(kind of problem, description)``."""
    fingerprint = _hex(subkey.fingerprint)
    described = f"{fields.description if fields else subkey.key_algorithm.name} {fingerprint}"
    binding = _newest_verified(
        primary, subkey, _signatures(primary, subkey, SignatureType.Subkey_Binding)
    )
    if binding is None:
        return "problem", f"{described}: no valid binding signature"
    flags = frozenset(binding.key_flags)
    if not flags & _ENCRYPT_FLAGS and (flags or not subkey.key_algorithm.can_encrypt):
        return "problem", f"{described}: not an encryption key"
    revocations = _signatures(primary, subkey, SignatureType.SubkeyRevocation)
    if _newest_verified(primary, subkey, revocations) is not None:
        return "problem", f"{described}: revoked"
    expires = _expiry(subkey.created, binding)
    if expires is not None and expires <= now:
        return "problem", f"{described}: expired {expires:%Y-%m-%d}"
    if fields is None:
        return "unsupported", described
    if fields.algorithm in PK_RSA and fields.bits < 2048:
        return "weak", described
    try:
        return _Choice(fingerprint, fields.description, recipient_for(fields))
    except PacketError:
        return "unsupported", described


def _choose_subkey(primary: Any, keys: dict[str, PublicKey], now: dt.datetime) -> _Choice:
    """The newest usable encryption subkey, or a ProviderKeyError saying why none is."""
    found: dict[str, list[str]] = {"problem": [], "weak": [], "unsupported": []}
    for subkey in sorted(primary.subkeys.values(), key=lambda k: k.created, reverse=True):
        verdict = _verdict(primary, subkey, keys.get(_hex(subkey.fingerprint)), now)
        if isinstance(verdict, _Choice):
            return verdict
        found[verdict[0]].append(verdict[1])
    if found["weak"]:
        raise _fail(
            "weak_rsa", f"the encryption subkey is RSA under 2048 bits ({found['weak'][0]})"
        )
    if found["unsupported"]:
        raise _fail(
            "unsupported_algorithm",
            f"the encryption subkey uses an unsupported algorithm ({found['unsupported'][0]}); "
            "RSA and ECDH (Curve25519, NIST P-256/384/521) are supported",
        )
    detail = "; ".join(found["problem"]) if found["problem"] else "the key has no subkeys"
    raise _fail("no_encryption_subkey", f"no usable encryption subkey ({detail})")


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


def _check_primary(primary: Any, fields: PublicKey | None, pin: str | None) -> PublicKey:
    """The primary key's fields; refused if it is not the pinned one, weak or revoked."""
    fingerprint = _hex(primary.fingerprint)
    if pin is not None:
        wanted = pin.replace(" ", "").upper()
        if wanted != fingerprint:
            raise _fail(
                "fingerprint_mismatch",
                f"the key's fingerprint {fingerprint} does not match the pinned {wanted}",
            )
    if fields is None:
        raise _fail("unreadable", f"the primary key {fingerprint} cannot be parsed")
    if fields.algorithm in (PK_DSA, PK_ELGAMAL):
        raise _fail(
            "unsupported_algorithm",
            f"{fields.description} keys are not supported (key {fingerprint})",
        )
    if fields.algorithm in PK_RSA and fields.bits < 2048:
        raise _fail("weak_rsa", f"RSA-{fields.bits} is under 2048 bits (key {fingerprint})")
    revocations = _signatures(primary, primary, SignatureType.KeyRevocation)
    if _newest_verified(primary, primary, revocations) is not None:
        raise _fail("revoked", f"the key {fingerprint} is revoked")
    return fields


def _load(data: bytes, pin: str | None, now: dt.datetime) -> ProviderKey:
    binary = _binary_public_key(data)
    try:
        with _quiet():
            primary, _ = pgpy.PGPKey.from_blob(binary)
        keys = _public_keys(binary)
    except Exception as exc:  # noqa: BLE001  (PGPy raises anything on corrupt input)
        raise _fail("unreadable", f"the key cannot be parsed: {str(exc)[:120]}") from None
    if not primary.is_public:
        raise _fail("secret_key", "this is a secret key: give the provider's PUBLIC key")
    fingerprint = _hex(primary.fingerprint)
    fields = _check_primary(primary, keys.get(fingerprint), pin)
    certifications = [
        (uid, signature)
        for uid in primary.userids
        for signature in _signatures(primary, uid, *_CERTIFICATIONS)
    ]
    certifications.sort(key=lambda pair: pair[1].created, reverse=True)
    self_cert = next((s for uid, s in certifications if _verified(primary, uid, s)), None)
    expires_at = _expiry(primary.created, self_cert)
    if expires_at is not None and expires_at <= now:
        raise _fail("expired", f"the key {fingerprint} expired on {expires_at:%Y-%m-%d}")
    try:
        choice = _choose_subkey(primary, keys, now)
    except ProviderKeyError as refusal:
        flags = frozenset(self_cert.key_flags) if self_cert is not None else frozenset()
        if not (fields.algorithm in PK_RSA and flags & _ENCRYPT_FLAGS):
            raise
        # An RSA primary certified for encryption can take the role.
        try:
            choice = _Choice(fingerprint, fields.description, recipient_for(fields))
        except PacketError:
            raise refusal from None
    with _quiet():
        armored = str(primary)
    return ProviderKey(
        fingerprint=fingerprint,
        subkey_fingerprint=choice.fingerprint,
        algorithm=choice.algorithm,
        expires_at=expires_at,
        armored=armored,
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
