"""Which key messages go to: the provider key's encryption subkeys, ranked as GnuPG ranks.

The newest subkey (by creation time) whose current binding signature gives it an
encryption flag, that is not expired, not revoked, not created in the future (beyond
:data:`~._sigs.CLOCK_SKEW`), well formed, and of an algorithm messages can be built for
(RSA of 2048 bits or more; ECDH on Curve25519 or NIST P-256/384/521). A lone RSA primary
key certified for encryption takes the role when no subkey does. Which signatures count
is :mod:`._validity`'s to say; here their verdicts become a ranked list of
:class:`Choice`, each with the instant it stops being valid, or the refusal naming why
no subkey can be used.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from typing import TYPE_CHECKING

import attrs

from invoicing_async._core.errors import ProviderKeyError

from ._compose import InvalidKeyMaterialError, Recipient, recipient_for
from ._packets import PK_ECDH, PK_ELGAMAL, PK_RSA, PK_X448, PK_X25519, PacketError
from ._sigs import CLOCK_SKEW

if TYPE_CHECKING:
    from ._certs import Certificate, KeyPacket
    from ._sigs import Signature
    from ._validity import PrimaryStanding, SubkeyStanding, Validity

__all__ = ["ASK", "RESIGN", "Choice", "choices", "date", "fail", "primary_choice"]

_ENCRYPT_FLAGS = 0x04 | 0x08  # encrypt communications, encrypt storage
_CAN_ENCRYPT = frozenset({*PK_RSA, PK_ELGAMAL, PK_ECDH, PK_X25519, PK_X448})
_SUPPORTED = "RSA (2048 bits or more) or ECDH (Curve25519, NIST P-256, P-384 or P-521)"
ASK = f"ask the provider for a v4 key with an {_SUPPORTED} encryption subkey"
RESIGN = "ask the provider to re-sign the key with SHA-256 or stronger"
# What makes no subkey usable, in the order a refusal names it: (reason, message start).
_REFUSALS = {
    "weak": ("weak_rsa", "the encryption subkey is RSA under 2048 bits"),
    "malformed": ("malformed", "the encryption subkeys are malformed"),
    "unsupported": (
        "unsupported_algorithm",
        "the only encryption subkeys use algorithms this library does not support",
    ),
    "weak_hash": ("weak_hash", "no encryption subkey is bound by an acceptable signature"),
}


def fail(reason: str, message: str) -> ProviderKeyError:
    """The refusal to raise: a ProviderKeyError with its reason code."""
    return ProviderKeyError(message, reason=reason)


def date(moment: dt.datetime) -> str:
    """A day, for messages."""
    return f"{moment:%Y-%m-%d}"


@attrs.frozen
class Choice:
    """A key messages can go to, and until when (POSIX timestamp, ``inf``: no end)."""

    fingerprint: str
    algorithm: str
    recipient: Recipient
    deadline: float


def _encrypts(flags: int | None, algorithm: int) -> bool:
    """Whether key flags (or, without any, the algorithm) allow encryption."""
    return algorithm in _CAN_ENCRYPT if flags is None else bool(flags & _ENCRYPT_FLAGS)


def _says_encrypts(algorithm: int, binding: Signature) -> bool:
    """Whether a binding signature makes a subkey of ``algorithm`` an encryption key."""
    return _encrypts(binding.key_flags, algorithm)


def _packet_problem(packet: KeyPacket, described: str, now: dt.datetime) -> tuple[str, str] | None:
    """Why the subkey's packet itself rules it out, or None."""
    if packet.problem is not None:
        return "malformed", f"{described}: {packet.problem}"
    if packet.version != 4:
        return "problem", f"{described}: a v{packet.version} subkey in a v4 key"
    if packet.created > now + CLOCK_SKEW:
        return "problem", f"{described}: created in the future ({date(packet.created)})"
    return None


def _binding_problem(
    standing: SubkeyStanding, packet: KeyPacket, described: str, now: dt.datetime
) -> tuple[str, str] | None:
    """Why the subkey's signatures rule it out now, or None.

    Unbound, not for encryption, bound only by signatures that do not count, revoked,
    expired.
    """
    if not standing.wanted:
        not_for = "not an encryption key" if standing.bound else "no valid binding signature"
        return "problem", f"{described}: {not_for}"
    refusal = standing.refusal
    binding = standing.binding or (refusal.signature if refusal is not None else None)
    if binding is None:
        return "problem", f"{described}: no valid binding signature"
    if not _encrypts(binding.key_flags, packet.algorithm):
        return "problem", f"{described}: not an encryption key"
    if standing.binding is None and refusal is not None:
        kind = "weak_hash" if refusal.reason == "weak_hash" else "problem"
        return kind, f"{described}: its binding signature is {refusal.detail}"
    if standing.revocation is not None:
        return "problem", f"{described}: revoked"
    if binding.key_lifetime:
        expires = packet.created + dt.timedelta(seconds=binding.key_lifetime)
        if expires <= now:
            return "problem", f"{described}: expired {date(expires)}"
    return None


def _verdict(
    standing: SubkeyStanding, described: str, deadline: float, now: dt.datetime
) -> Choice | tuple[str, str]:
    """The subkey as a recipient, or why not: ``(kind of problem, description)``."""
    packet = standing.component.key
    assert packet is not None  # noqa: S101  (subkeys always carry their packet)
    problem = _binding_problem(standing, packet, described, now)
    if problem is not None:
        return problem
    if packet.key is None:
        return "unsupported", described
    if packet.key.algorithm in PK_RSA and packet.key.bits < 2048:
        return "weak", described
    try:
        recipient = recipient_for(packet.key)
    except InvalidKeyMaterialError as exc:
        return "malformed", f"{described}: {exc}"
    except PacketError:
        return "unsupported", described
    until = min(deadline, standing.deadline)
    return Choice(packet.fingerprint, packet.description, recipient, until)


def choices(
    validity: Validity, cert: Certificate, deadline: float, now: dt.datetime
) -> list[Choice]:
    """The usable encryption subkeys, newest first; a ProviderKeyError says why none is.

    Each one after the first is kept only if it outlives those before it (it takes over
    when they expire); the search stops at one that never expires.
    """
    found: dict[str, list[str]] = {kind: [] for kind in ("problem", *_REFUSALS)}
    choices: list[Choice] = []
    subkeys = [(n, c.key) for n, c in enumerate(cert.subkeys) if c.key is not None]
    for number, packet in sorted(subkeys, key=lambda entry: entry[1].created, reverse=True):
        described = f"{packet.description} subkey {packet.fingerprint or '(no fingerprint)'}"
        verdict = _packet_problem(packet, described, now) or _verdict(
            validity.subkey(number, functools.partial(_says_encrypts, packet.algorithm)),
            described,
            deadline,
            now,
        )
        if not isinstance(verdict, Choice):
            found[verdict[0]].append(verdict[1])
        elif not choices or verdict.deadline > choices[-1].deadline:
            choices.append(verdict)
            if verdict.deadline == math.inf:
                break
    if choices:
        return choices
    for kind, (reason, start) in _REFUSALS.items():
        if found[kind]:
            advice = RESIGN if kind == "weak_hash" else ASK
            raise fail(reason, f"{start} ({'; '.join(found[kind])}); {advice}")
    detail = "; ".join(found["problem"]) if found["problem"] else "the key has no subkeys"
    raise fail("no_encryption_subkey", f"no usable encryption subkey ({detail}); {ASK}")


def primary_choice(
    primary: KeyPacket, standing: PrimaryStanding, refusal: ProviderKeyError
) -> Choice:
    """An RSA primary key certified for encryption as the recipient, or ``refusal``.

    Every current self-signature that sets key flags must allow encryption.
    """
    flags = [s.key_flags for s in standing.current if s.key_flags is not None]
    fields = primary.key
    if not (fields and fields.algorithm in PK_RSA and flags):
        raise refusal
    if not all(f & _ENCRYPT_FLAGS for f in flags):
        raise refusal
    try:
        recipient = recipient_for(fields)
    except PacketError:
        raise refusal from None
    return Choice(primary.fingerprint, fields.description, recipient, standing.deadline)
