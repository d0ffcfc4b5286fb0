"""The provider's public key: parsed, validated, and ready to encrypt to.

The key is read with the package's own parser (:mod:`._certs`), which signatures count
is decided in one place (:mod:`._validity`) and their mathematics checked with
``cryptography`` (:mod:`._verify`), so what another implementation writes and this one
does not know never makes a key unreadable: an unknown hash id in a preference list, an
unknown subpacket, a subkey of an algorithm added after this was written (RFC 9580's
X25519) are skipped, as GnuPG skips them, and the choice is made among the rest
(:mod:`._choice`, GnuPG's rule: the newest usable encryption subkey).

Validity is a property of *now*: every usable subkey is kept, newest first, with the
instant it stops being valid (its expiry, the primary key's, a revocation dated ahead).
Each :meth:`ProviderKey.encrypt` compares the clock with the first one's deadline (one
comparison) and moves on to the next subkey, as GnuPG would choose it then, or refuses
with ``expired`` when none is left.

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

from invoicing_async._core.errors import ProviderKeyError

from ._armor import ArmorError, armor, dearmor
from ._certs import Certificate, KeyPacket, parse_certificate
from ._choice import ASK, RESIGN, Choice, choices, date, fail, primary_choice
from ._compose import encrypt_message
from ._packets import PK_DSA, PK_ELGAMAL, PK_RSA, PacketError, PublicKey, Tag, iter_packets
from ._sigs import CLOCK_SKEW
from ._validity import PrimaryStanding, Validity
from ._verify import Verifier, can_verify

if TYPE_CHECKING:
    import os

__all__ = ["ProviderKey"]

_AGAIN = "ask the provider for its public key again, as its OpenPGP software exports it"


def _binary_public_key(data: bytes) -> bytes:
    """The binary key in ``data`` (armored or not), refused early if it is no v4 public key."""
    try:
        kind, binary = dearmor(data)
    except ArmorError as exc:
        raise fail("unreadable", f"not an OpenPGP key ({exc})") from None
    if kind is not None and "PRIVATE KEY" in kind:
        raise fail("secret_key", "this is a secret key: give the provider's PUBLIC key")
    if kind is not None and "PUBLIC KEY" not in kind:
        raise fail("unreadable", f"expected a PGP PUBLIC KEY BLOCK, found a PGP {kind}")
    try:
        tag, body = next(iter_packets(binary))
    except (PacketError, StopIteration):
        raise fail("unreadable", "not an OpenPGP key (no packet found)") from None
    if tag in (Tag.SECRET_KEY, Tag.SECRET_SUBKEY):
        raise fail("secret_key", "this is a secret key: give the provider's PUBLIC key")
    if tag != Tag.PUBLIC_KEY:
        raise fail("unreadable", f"not an OpenPGP public key (first packet has tag {tag})")
    version = body[0] if body else None
    if version in (5, 6):
        raise fail(
            "unsupported_version",
            f"v{version} keys (RFC 9580) are not supported; ask the provider for a v4 key",
        )
    return binary


def _check_primary(packet: KeyPacket, pin: str | None, now: dt.datetime) -> PublicKey:
    """The primary key's fields; refused if it is not the pinned one, unusable or weak."""
    if packet.problem is not None:
        raise fail(
            "malformed",
            f"the primary key packet is malformed: {packet.problem}; {_AGAIN}",
        )
    fingerprint = packet.fingerprint
    if pin is not None:
        wanted = pin.replace(" ", "").upper()
        if wanted != fingerprint:
            raise fail(
                "fingerprint_mismatch",
                f"the key's fingerprint {fingerprint} does not match the pinned {wanted}",
            )
    if packet.version != 4:
        raise fail("unsupported_version", f"v{packet.version} keys are not supported")
    fields = packet.key
    if fields is None or fields.algorithm in (PK_DSA, PK_ELGAMAL) or not can_verify(fields):
        raise fail(
            "unsupported_algorithm",
            f"{packet.description} primary keys are not supported (key {fingerprint}); "
            "ask the provider for a key whose primary is RSA, EdDSA or ECDSA on a NIST curve",
        )
    if fields.algorithm in PK_RSA and fields.bits < 2048:
        raise fail(
            "weak_rsa",
            f"RSA-{fields.bits} is under 2048 bits (key {fingerprint}); {ASK}",
        )
    if packet.created > now + CLOCK_SKEW:
        raise fail(
            "not_yet_valid",
            f"the key {fingerprint} is dated {date(packet.created)}, in the future: "
            "check this machine's clock, or ask the provider for a key dated correctly",
        )
    return fields


def _primary_standing(cert: Certificate, validity: Validity, now: dt.datetime) -> PrimaryStanding:
    """The primary key's standing, refused if the key itself is not valid now."""
    fingerprint = cert.primary.fingerprint
    if validity.revocation() is not None:
        raise fail("revoked", f"the key {fingerprint} is revoked; ask the provider for its new key")
    standing = validity.primary()
    refusal = standing.refusal
    if not standing.current and refusal is not None and refusal.reason == "weak_hash":
        raise fail(
            "weak_hash",
            f"the key {fingerprint} is certified only by signatures the policy refuses "
            f"({refusal.detail}); {RESIGN}",
        )
    if not standing.current and refusal is not None and refusal.reason == "not_yet_valid":
        raise fail(
            "not_yet_valid",
            f"the key {fingerprint} is certified only by {refusal.detail}: check this "
            "machine's clock, or ask the provider for a key dated correctly",
        )
    if not standing.current:
        why = f" ({refusal.detail})" if refusal is not None else ""
        raise fail(
            "no_self_signature",
            f"the key {fingerprint} has no valid self-signature: no user id certification "
            f"and no direct-key signature by the key itself counts{why}; ask the provider "
            "for its complete public key",
        )
    if standing.expires is not None and standing.expires <= now:
        raise fail(
            "expired",
            f"the key {fingerprint} expired on {date(standing.expires)}; "
            "ask the provider for a renewed key (or the same key with a new expiry date)",
        )
    return standing


def _load(data: bytes, pin: str | None, now: dt.datetime) -> ProviderKey:
    binary = _binary_public_key(data)
    try:
        cert = parse_certificate(binary)
    except PacketError as exc:
        raise fail("unreadable", f"the key cannot be parsed: {exc}") from None
    primary = _check_primary(cert.primary, pin, now)
    try:
        validity = Validity(cert, Verifier(primary), now)
        standing = _primary_standing(cert, validity, now)
        try:
            ranked = choices(validity, cert, standing.deadline, now)
        except ProviderKeyError as refusal:
            ranked = [primary_choice(cert.primary, standing, refusal)]
    except PacketError as exc:
        fingerprint = cert.primary.fingerprint
        raise fail("malformed", f"the key {fingerprint} is malformed: {exc}; {_AGAIN}") from None
    return ProviderKey(
        fingerprint=cert.primary.fingerprint,
        expires_at=standing.expires,
        binary=cert.binary,
        choices=tuple(ranked),
    )


@functools.lru_cache(maxsize=16)
def _load_cached(data: bytes, pin: str | None) -> ProviderKey:
    """Rebuild a key in a worker process once, not once per message."""
    return ProviderKey.from_armored(data, fingerprint=pin)


def _when(deadline: float) -> str:
    return date(dt.datetime.fromtimestamp(deadline, dt.timezone.utc))


@attrs.frozen(repr=False, eq=False)
class ProviderKey:
    """The provider's public key, validated and ready to encrypt documents.

    Build it with :meth:`from_file` or :meth:`from_armored`; both raise
    :class:`~invoicing_async.ProviderKeyError` saying why a key cannot be used. Pass
    ``fingerprint=`` to pin the key you expect (40 hex characters, spaces allowed).

    Instances are immutable, thread-safe and picklable (a process pool rebuilds the key
    once per worker). Validity is checked again at every use: when the subkey messages go
    to expires, the next valid one takes over, and when none is left :meth:`encrypt`
    raises ``ProviderKeyError`` (``expired``).

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.2.0 the encryption subkey's expiry is checked at every use.
    """

    #: Primary key fingerprint, 40 upper-case hex characters.
    fingerprint: str
    #: When the primary key expires (aware, UTC), or ``None``.
    expires_at: dt.datetime | None
    #: The certificate as read (trust and marker packets left out), binary.
    _binary: bytes
    #: Usable encryption keys, newest first, each with its deadline.
    _choices: tuple[Choice, ...]
    # The armor, made at first use (it costs as much as verifying a signature).
    _armor: list[str] = attrs.field(factory=list, init=False)

    @property
    def armored(self) -> str:
        """The public key as ASCII armor."""
        if not self._armor:
            self._armor.append(armor(self._binary, "PUBLIC KEY BLOCK").decode("ascii"))
        return self._armor[0]

    @property
    def subkey_fingerprint(self) -> str:
        """Fingerprint of the subkey messages are encrypted to now.

        The last one chosen when every one has expired.
        """
        return self._current(time.time(), strict=False).fingerprint

    @property
    def algorithm(self) -> str:
        """Algorithm of that subkey, e.g. ``RSA-3072`` or ``Curve25519``."""
        return self._current(time.time(), strict=False).algorithm

    def _current(self, now: float, *, strict: bool = True) -> Choice:
        """The newest choice still valid at ``now``; ProviderKeyError when none is."""
        for choice in self._choices:
            if now < choice.deadline:
                return choice
        last = self._choices[-1]
        if not strict:
            return last
        if self.expires_at is not None and self.expires_at.timestamp() <= last.deadline:
            why = f"the key expired on {date(self.expires_at)}"
        else:
            why = f"its encryption subkey {last.fingerprint} was valid until {_when(last.deadline)}"
        raise fail(
            "expired",
            f"the key {self.fingerprint} can no longer receive messages: {why}; "
            "ask the provider for a renewed key (or the same key with a new expiry date)",
        )

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
            raise fail("unreadable", f"cannot read the key file {path}: {exc.strerror}") from None
        return cls.from_armored(data, fingerprint=fingerprint)

    def encrypt(self, data: bytes) -> bytes:
        """Encrypt ``data`` to the provider: an ASCII-armored OpenPGP message.

        CPU-bound and synchronous; the client runs it off the event loop (or inline, for
        a small document of a single call).
        """
        return armor(self.encrypt_binary(data))

    def encrypt_binary(self, data: bytes) -> bytes:
        """Like :meth:`encrypt`, without the armor (for providers that take binary)."""
        data = bytes(data)
        choice = self._choices[0]
        if time.time() >= choice.deadline:
            choice = self._current(time.time())
        try:
            return encrypt_message(choice.recipient, data)
        except (ValueError, OverflowError) as exc:  # key material no check foresaw
            raise fail(
                "malformed", f"the key {self.fingerprint} cannot receive messages: {exc}"
            ) from None

    def __repr__(self) -> str:
        return (
            f"<ProviderKey {self.fingerprint} encrypting to {self.algorithm} "
            f"subkey {self.subkey_fingerprint[-16:]}>"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProviderKey) and other._binary == self._binary

    def __hash__(self) -> int:
        return hash(self._binary)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_load_cached, (self._binary, self.fingerprint))
