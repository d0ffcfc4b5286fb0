"""Which of a key's signatures count, and for what: the one place that decides.

The rules are those GnuPG and Sequoia's standard policy agree on; where they differ, the
stricter one (``tests/system/test_key_verdicts.py`` asks both about forged keys). Each
rule says what it decides; :mod:`._keys` turns the outcome into a recipient or a
:class:`~invoicing_async.ProviderKeyError` with the reason named here.

1. *Who signed.* Only the primary key's own signatures count (issuer, algorithm); others
   (third-party certifications) are skipped before anything is hashed, and a signature
   packet that repeats another is checked once.
2. *Where it belongs.* A signature is checked against the component it follows first;
   one whose digest does not match there is tried against the other components it could
   be about (its type says which: the primary key, the user ids, the subkeys) and belongs
   to the one it matches, as GnuPG's "signatures reordered" and Sequoia do. Placing costs
   a hash each, from the subject's kept hash state; more than
   :data:`MAX_REHOMING_TRIALS` tries make the key ``malformed``. The public-key operation
   comes last, only for a signature whose verdict matters (the newest binding that could
   count, a revocation that would be in force), once; more than
   :data:`MAX_FAILED_CHECKS` signatures that carry the right digest prefix and still do
   not verify (only a forger makes them) make the key ``malformed`` too. Loading costs
   time linear in the key's size, with a bounded number of public-key operations.
3. *Bindings* (user-id certifications, direct-key signatures, subkey bindings) count when
   their hash is accepted by the strict policy (:func:`~._sigs.hash_refusal`: reason
   ``weak_hash``), they carry no critical subpacket not understood, they are not dated
   in the future beyond :data:`~._sigs.CLOCK_SKEW` (``not_yet_valid``), not older than
   the key they bind or the primary key, and not expired. The newest such binding of a
   component is its current one.
4. *Revocations* count in any hash that verifies (a revocation is never weaker than what
   it revokes). A hard one (no reason, "key compromised", any reason but the soft ones)
   counts whatever its date; a soft one (superseded, retired, user id no longer valid)
   from its creation time on (with the clock-skew allowance), and a soft one dated ahead
   makes that time a deadline. A user id is revoked when a revocation is at least as new
   as its newest certification.
5. *A primary key needs a self-signature*: a current user-id certification or direct-key
   signature (``no_self_signature`` otherwise, or ``weak_hash`` / ``not_yet_valid`` when
   that is why none counts).
6. *Expiry comes from every current primary self-signature*: the newest direct-key
   signature and the newest certification of each user id not revoked (of every user id
   when all are); the earliest expiry among them is the key's. So neither a direct-key
   expiry beside a user id without one, nor stripping a user id, revives an expired key.
7. *Validity is a property of now*: every standing carries a ``deadline`` (a POSIX
   timestamp, ``inf`` for none), the first instant its verdict may change: an expiry, a
   signature's own expiry, a soft revocation taking effect. The key re-checks it at use.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import TYPE_CHECKING, Final

import attrs

from ._packets import PacketError
from ._sigs import CLOCK_SKEW, SigType, hash_refusal
from ._verify import Subject, key_subject, user_id_subject

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ._certs import Certificate, Component
    from ._sigs import Signature
    from ._verify import Verifier

__all__ = [
    "MAX_FAILED_CHECKS",
    "MAX_REHOMING_TRIALS",
    "PrimaryStanding",
    "Refusal",
    "SubkeyStanding",
    "Validity",
]

#: Hashes spent trying signatures against components other than the one they follow.
MAX_REHOMING_TRIALS: Final = 65_536
#: Public-key operations that may fail on one key: a signature whose digest prefix
#: matches and whose mathematics does not is a forgery or corruption, never a habit.
MAX_FAILED_CHECKS: Final = 1024

_KEY, _USER_ID, _SUBKEY = 0, 1, 2
# What each signature type is about.
_ABOUT: Final = {
    SigType.DIRECT_KEY: _KEY,
    SigType.KEY_REVOCATION: _KEY,
    **dict.fromkeys(SigType.CERTIFICATIONS, _USER_ID),
    SigType.CERTIFICATION_REVOCATION: _USER_ID,
    SigType.SUBKEY_BINDING: _SUBKEY,
    SigType.SUBKEY_REVOCATION: _SUBKEY,
}
# Why no binding counts, most telling first.
_REASON_ORDER: Final = ("weak_hash", "not_yet_valid", "problem")


@attrs.frozen
class Refusal:
    """Why no binding of a component counts: a reason code, a description, the signature."""

    reason: str
    detail: str
    signature: Signature


@attrs.frozen
class PrimaryStanding:
    """What the primary key's self-signatures say now."""

    #: A key revocation in force, or None.
    revocation: Signature | None
    #: The self-signatures that count now (rule 6); empty when none does.
    current: tuple[Signature, ...]
    #: Why none counts (when ``current`` is empty).
    refusal: Refusal | None
    #: When the key expires (aware), or None.
    expires: dt.datetime | None
    #: The first instant the standing may change (POSIX timestamp, ``inf``: never).
    deadline: float


@attrs.frozen
class SubkeyStanding:
    """What a subkey's binding and revocations say now."""

    component: Component
    #: The current binding signature, or None.
    binding: Signature | None
    #: Why no binding counts (when ``binding`` is None and some verified).
    refusal: Refusal | None
    #: A subkey revocation in force, or None (not looked for when the binding is not wanted).
    revocation: Signature | None
    #: The first instant the standing may change (POSIX timestamp, ``inf``: never).
    deadline: float
    #: Whether any binding signature is about this subkey (verified or not).
    bound: bool = True
    #: Whether any of them is one the caller wants (says the subkey encrypts).
    wanted: bool = True


def _subjects(cert: Certificate) -> list[Subject | None]:
    """What signatures on each component are made over: primary, user ids, subkeys."""
    primary = key_subject(cert.primary.body)
    subjects: list[Subject | None] = [Subject(primary)]
    subjects += [Subject(primary, *user_id_subject(c.tag, c.body)) for c in cert.user_ids]
    for component in cert.subkeys:
        packet = component.key
        usable = packet is not None and packet.fingerprint
        subjects.append(Subject(primary, key_subject(component.body)) if usable else None)
    return subjects


def _unfit(signature: Signature, born: dt.datetime, now: dt.datetime) -> Refusal | None:
    """Why a binding signature does not count now (rule 3), or None."""
    if signature.unknown_critical is not None:
        critical = signature.unknown_critical
        return Refusal("problem", f"made with an unknown critical subpacket {critical}", signature)
    refusal = hash_refusal(signature)
    if refusal is not None:
        return Refusal("weak_hash", refusal, signature)
    if signature.created > now + CLOCK_SKEW:
        when = f"{signature.created:%Y-%m-%d %H:%M} UTC"
        return Refusal("not_yet_valid", f"dated {when}, in the future", signature)
    if signature.created < born:
        when = f"{signature.created:%Y-%m-%d %H:%M} UTC"
        return Refusal("problem", f"dated {when}, before the key it binds", signature)
    if not signature.alive(now):
        return Refusal("problem", f"expired on {signature.expires:%Y-%m-%d}", signature)
    return None


def _ends(signature: Signature) -> float:
    expires = signature.expires
    return expires.timestamp() if expires is not None else math.inf


def _most_telling(refusals: Iterable[Refusal]) -> Refusal | None:
    return min(refusals, key=lambda r: _REASON_ORDER.index(r.reason), default=None)


class Validity:
    """A certificate's signatures placed on its components (rules 1 and 2), judged at ``now``.

    Built once per load; :meth:`primary` and :meth:`subkey` verify only what their
    verdict needs, each signature at most once. :class:`PacketError` from any of them
    when a key costs more than a key can (rule 2's budgets).
    """

    def __init__(self, cert: Certificate, verifier: Verifier, now: dt.datetime) -> None:
        self._cert = cert
        self._verifier = verifier
        self._now = now
        # Each component's signatures, with the digest they sign: primary, user ids, subkeys.
        self._placed: list[list[tuple[Signature, bytes]]] = []
        self._verified: dict[int, bool] = {}
        self._failures = 0
        self._place()

    def _place(self) -> None:
        cert = self._cert
        subjects = _subjects(cert)
        users = range(1, 1 + len(cert.user_ids))
        subs = range(users.stop, len(subjects))
        kinds = [_KEY] + [_USER_ID] * len(users) + [_SUBKEY] * len(subs)
        homes = (cert.signatures, *(c.signatures for c in (*cert.user_ids, *cert.subkeys)))
        self._placed = [[] for _ in subjects]
        seen: set[tuple[bytes, bytes, tuple[bytes, ...]]] = set()
        trials = 0
        for home, signatures in enumerate(homes):
            for signature in signatures:
                about = _ABOUT.get(signature.type)
                if about is None or signature.identity in seen:
                    continue
                if not self._verifier.plausible(signature):
                    continue
                seen.add(signature.identity)
                others = {_KEY: range(1), _USER_ID: users, _SUBKEY: subs}[about]
                order = [home] if kinds[home] == about else []
                order += [index for index in others if index != home]
                for index in order:
                    subject = subjects[index]
                    if index != home:
                        trials += 1
                        if trials > MAX_REHOMING_TRIALS:
                            raise PacketError("more misplaced signatures than a key carries")
                    digest = None if subject is None else self._verifier.claims(signature, subject)
                    if digest is not None:
                        self._placed[index].append((signature, digest))
                        break

    def _valid(self, signature: Signature, digest: bytes) -> bool:
        """The public-key check, once per signature.

        :class:`PacketError` past :data:`MAX_FAILED_CHECKS` failures.
        """
        known = self._verified.get(id(signature))
        if known is None:
            known = self._verified[id(signature)] = self._verifier.check(signature, digest)
            self._failures += not known
            if self._failures > MAX_FAILED_CHECKS:
                raise PacketError("more signatures that do not verify than a key carries")
        return known

    def _of(self, index: int, *kinds: int) -> list[tuple[Signature, bytes]]:
        return [entry for entry in self._placed[index] if entry[0].type in kinds]

    def _newest(
        self, entries: list[tuple[Signature, bytes]], born: dt.datetime
    ) -> tuple[Signature | None, Refusal | None]:
        """The newest binding that counts now (rule 3), or the most telling refusal."""
        refused: list[tuple[Refusal, Signature, bytes]] = []
        for signature, digest in sorted(entries, key=lambda e: e[0].created, reverse=True):
            refusal = _unfit(signature, born, self._now)
            if refusal is not None:
                refused.append((refusal, signature, digest))
            elif self._valid(signature, digest):
                return signature, None
        verified = (r for r, s, d in refused if self._valid(s, d))
        return None, _most_telling(verified)

    def _revocation(self, index: int, kind: int) -> tuple[Signature | None, float]:
        """A revocation in force now (rule 4), and when a later soft one starts."""
        later = math.inf
        for signature, digest in self._of(index, kind):
            in_force = signature.hard or signature.created <= self._now + CLOCK_SKEW
            if not self._valid(signature, digest):
                continue
            if in_force:
                return signature, later
            later = min(later, (signature.created - CLOCK_SKEW).timestamp())
        return None, later

    def _user_id_revoked(self, index: int, newest: Signature) -> bool:
        """Whether a revocation in force is at least as new as the newest certification."""
        now = self._now
        return any(
            signature.created >= newest.created
            and (signature.hard or signature.created <= now + CLOCK_SKEW)
            and self._valid(signature, digest)
            for signature, digest in self._of(index, SigType.CERTIFICATION_REVOCATION)
        )

    def revocation(self) -> Signature | None:
        """A key revocation in force now (rule 4), or None."""
        return self._revocation(0, SigType.KEY_REVOCATION)[0]

    def primary(self) -> PrimaryStanding:
        """Rules 4 to 7 for the primary key."""
        born = self._cert.primary.created
        revocation, deadline = self._revocation(0, SigType.KEY_REVOCATION)
        direct, refusal = self._newest(self._of(0, SigType.DIRECT_KEY), born)
        refusals = [refusal] if refusal else []
        certified: list[tuple[Signature, bool]] = []
        for index in range(1, 1 + len(self._cert.user_ids)):
            newest, refusal = self._newest(self._of(index, *SigType.CERTIFICATIONS), born)
            refusals += [refusal] if refusal else []
            if newest is not None:
                certified.append((newest, self._user_id_revoked(index, newest)))
        standing = [c for c, revoked in certified if not revoked] or [c for c, _ in certified]
        current = tuple(([direct] if direct else []) + standing)
        lifetimes = (s.key_lifetime for s in current if s.key_lifetime)
        expires = min((born.timestamp() + lifetime for lifetime in lifetimes), default=math.inf)
        return PrimaryStanding(
            revocation=revocation,
            current=current,
            refusal=None if current else _most_telling(refusals),
            expires=None
            if expires == math.inf
            else dt.datetime.fromtimestamp(expires, dt.timezone.utc),
            deadline=min([deadline, expires, *(_ends(s) for s in current)]),
        )

    def subkey(self, number: int, wanted: Callable[[Signature], bool]) -> SubkeyStanding:
        """Rules 3, 4 and 7 for the ``number``-th subkey.

        Nothing is verified when no binding would be ``wanted`` (a key flag says it is
        not for encryption), and revocations only for a wanted binding.
        """
        component = self._cert.subkeys[number]
        packet = component.key
        assert packet is not None  # noqa: S101  (subkeys always carry their packet)
        index = 1 + len(self._cert.user_ids) + number
        bindings = self._of(index, SigType.SUBKEY_BINDING)
        if not any(wanted(signature) for signature, _ in bindings):
            return SubkeyStanding(
                component, None, None, None, math.inf, bound=bool(bindings), wanted=False
            )
        born = max(packet.created, self._cert.primary.created)
        binding, refusal = self._newest(bindings, born)
        if binding is None or not wanted(binding):
            return SubkeyStanding(component, binding, refusal, None, math.inf)
        revocation, deadline = self._revocation(index, SigType.SUBKEY_REVOCATION)
        deadline = min(deadline, _ends(binding))
        if binding.key_lifetime:
            deadline = min(deadline, packet.created.timestamp() + binding.key_lifetime)
        return SubkeyStanding(component, binding, refusal, revocation, deadline)
