# Copyright (c) 2026 the invoicing_async developers. MIT License.
"""Forged provider keys, one per validation rule, and the verdict the library must give.

A helper module, not a test module. Every case is built by :mod:`forger` (correctly signed
v4 certificates) and names the defect of issue 18 it shows (``defect``; None for a rule
kept from before) and the library's verdict (``expect``: ``"sub:<name>"`` for the subkey
messages must go to, else the refusal reason). ``later`` judges the key again at another
time (validity is a property of now), with the verdict then. ``stricter`` documents where
the library refuses what GnuPG or Sequoia accepts, with the rule that makes it.

``tests/test_pgp_validity.py`` checks the library's verdicts alone;
``tests/system/test_key_verdicts.py`` asks GnuPG, ``sq`` and pysequoia about the same bytes.
"""

from __future__ import annotations

import dataclasses
import functools
from contextlib import nullcontext
from typing import TYPE_CHECKING
from unittest import mock

import forger as fg
from forger import DAY, NOW, SHA1, T0, Cert, key

from invoicing_async import ProviderKey, ProviderKeyError
from invoicing_async._doc.pgp import Tag, iter_packets, mpi

if TYPE_CHECKING:
    from collections.abc import Callable

HOUR = 3600


@dataclasses.dataclass(frozen=True)
class Made:
    """A forged key: its bytes and the fingerprints of its subkeys by name."""

    data: bytes
    subkeys: dict[str, str]

    def expected(self, verdict: str) -> str:
        """A verdict with ``sub:<name>`` turned into that subkey's key id."""
        return self.subkeys[verdict[4:]][-16:] if verdict.startswith("sub:") else verdict

    def named(self, verdict: str | None) -> str:
        """A key id as the subkey's name (``sub:<name>``), for messages."""
        names = {fingerprint[-16:]: name for name, fingerprint in self.subkeys.items()}
        return f"sub:{names[verdict]}" if verdict in names else str(verdict)


@dataclasses.dataclass(frozen=True)
class Forged:
    """A forged key and the verdicts it must get."""

    name: str
    defect: int | None
    build: Callable[[], Made]
    expect: str
    #: ``(seconds from now, verdict then)``: the key judged again later.
    later: tuple[int, str] | None = None
    #: Where the library refuses what a peer accepts: the peer and the rule.
    stricter: str | None = None
    #: The peer's verdict depends on the key material (random per run), so the
    #: difference in ``stricter`` shows in some runs only.
    varies: bool = False

    @functools.cached_property
    def made(self) -> Made:
        """The forged key (built once)."""
        return self.build()

    @property
    def at_later(self) -> int:
        """When the key is judged again (``later``)."""
        assert self.later is not None
        return NOW + self.later[0]


def verdict(made: Made, *, at: float | None = None) -> str:
    """The library's verdict: the key id (16 hex digits) a message goes to, or the refusal
    reason. ``at``: the clock when encrypting (the key is loaded now).
    """
    try:
        provider_key = ProviderKey.from_armored(made.data)
        with mock.patch("time.time", return_value=at) if at is not None else nullcontext():
            message = provider_key.encrypt_binary(b"forged")
    except ProviderKeyError as refusal:
        return refusal.reason
    (pkesk,) = [body for tag, body in iter_packets(message) if tag == Tag.PKESK]
    return pkesk[1:9].hex().upper()


def _made(cert: Cert, **subkeys: fg.Key) -> Made:
    return Made(cert.binary(), {name: sub.fingerprint for name, sub in subkeys.items()})


def _primary(kind: str = "ed25519") -> fg.Key:
    return key(kind)


# Two encryption subkeys: A made with the primary key, B (the newest) a day later.
def _a(kind: str = "cv25519") -> fg.Key:
    return key(kind, T0, slot=1)


def _b(kind: str = "cv25519") -> fg.Key:
    return key(kind, T0 + DAY, slot=2)


def _two(primary: str = "ed25519", sub: str = "cv25519") -> tuple[Cert, fg.Key, fg.Key]:
    a, b = _a(sub), _b(sub)
    return Cert(_primary(primary)).user_id().subkey(a).subkey(b), a, b


# --- builders ------------------------------------------------------------------------------


def baseline_ed25519() -> Made:
    enc = _a()
    return _made(Cert(_primary()).user_id().subkey(enc), enc=enc)


def baseline_rsa() -> Made:
    enc = _a("rsa2048")
    return _made(Cert(_primary("rsa2048")).user_id().subkey(enc), enc=enc)


def sha1_revoked_only_subkey() -> Made:
    enc = _a("rsa2048")
    cert = Cert(_primary("rsa2048")).user_id().subkey(enc)
    return _made(cert.revoke_subkey(enc, hash_id=SHA1, created=NOW - 10 * DAY), enc=enc)


def sha1_revoked_key() -> Made:
    enc = _a("rsa2048")
    cert = Cert(_primary("rsa2048")).revoke_key(hash_id=SHA1, created=NOW - 10 * DAY)
    return _made(cert.user_id().subkey(enc), enc=enc)


def sha1_revoked_newest_subkey() -> Made:
    cert, a, b = _two("rsa2048", "rsa2048")
    return _made(cert.revoke_subkey(b, hash_id=SHA1, created=NOW - 10 * DAY), a=a, b=b)


def md5_revoked_only_subkey() -> Made:
    enc = _a("rsa2048")
    cert = Cert(_primary("rsa2048")).user_id().subkey(enc)
    return _made(cert.revoke_subkey(enc, hash_id=fg.MD5, created=NOW - 10 * DAY), enc=enc)


def future_compromised_key() -> Made:
    enc = _a()
    cert = Cert(_primary()).revoke_key(reason=fg.COMPROMISED, created=NOW + 10 * DAY)
    return _made(cert.user_id().subkey(enc), enc=enc)


def future_unreasoned_subkey_revocation() -> Made:
    enc = _a()
    cert = Cert(_primary()).user_id().subkey(enc).revoke_subkey(enc, created=NOW + 10 * DAY)
    return _made(cert, enc=enc)


def future_superseded_newest_subkey() -> Made:
    cert, a, b = _two()
    cert.revoke_subkey(b, reason=fg.SUPERSEDED, created=NOW + 10 * DAY)
    return _made(cert, a=a, b=b)


def no_user_id() -> Made:
    enc = _a()
    return _made(Cert(_primary()).subkey(enc), enc=enc)


def expired_user_id_stripped() -> Made:
    """A key expired on its user id certification, the user id and certification cut off."""
    enc = _a()
    whole = Cert(_primary()).user_id(key_expires=30 * DAY).subkey(enc)
    stripped = Cert(whole.primary)
    stripped.packets += whole.packets[3:]
    return _made(stripped, enc=enc)


def bad_certification_only() -> Made:
    enc = _a()
    return _made(Cert(_primary()).user_id(bad=True).subkey(enc), enc=enc)


def direct_key_expired() -> Made:
    enc = _a()
    cert = Cert(_primary()).direct_key(key_expires=30 * DAY).user_id().subkey(enc)
    return _made(cert, enc=enc)


def user_id_expired_direct_key_not() -> Made:
    enc = _a()
    cert = Cert(_primary()).direct_key().user_id(key_expires=30 * DAY).subkey(enc)
    return _made(cert, enc=enc)


def second_user_id_expired() -> Made:
    enc = _a()
    cert = Cert(_primary()).user_id()
    cert.user_id(b"Second <second@provider.test>", key_expires=30 * DAY, created=T0 + DAY)
    return _made(cert.subkey(enc), enc=enc)


def subkey_revocation_under_user_id() -> Made:
    a, b = _a(), _b()
    cert = Cert(_primary()).user_id().revoke_subkey(b, created=T0 + 2 * DAY)
    return _made(cert.subkey(a).subkey(b), a=a, b=b)


def only_subkey_revocation_under_user_id() -> Made:
    enc = _a()
    cert = Cert(_primary()).user_id().revoke_subkey(enc, created=T0 + DAY).subkey(enc)
    return _made(cert, enc=enc)


def binding_under_older_subkey() -> Made:
    a, b = _a(), _b()
    cert = Cert(_primary()).user_id().subkey(a).bind(b, created=T0 + DAY)
    return _made(cert.subkey(b, bound=False), a=a, b=b)


def key_revocation_at_the_end() -> Made:
    enc = _a()
    cert = Cert(_primary()).user_id().subkey(enc).revoke_key(created=T0 + DAY)
    return _made(cert, enc=enc)


def certification_after_the_subkey() -> Made:
    enc = _a()
    cert = Cert(_primary())
    cert.raw(Tag.USER_ID, cert.uid).subkey(enc)
    cert.signature(fg.POSITIVE_CERTIFICATION, cert.uid_subject(), flags=fg.CERTIFY_SIGN)
    return _made(cert, enc=enc)


def binding_older_than_the_keys() -> Made:
    enc = _a()
    return _made(Cert(_primary()).user_id().subkey(enc, created=T0 - DAY), enc=enc)


def certification_older_than_the_key() -> Made:
    enc = _a()
    return _made(Cert(_primary()).user_id(created=T0 - DAY).subkey(enc), enc=enc)


def newest_binding_older_than_its_subkey() -> Made:
    a, b = _a(), key("cv25519", T0 + 10 * DAY, slot=2)
    cert = Cert(_primary()).user_id().subkey(a).subkey(b, created=T0 + 5 * DAY)
    return _made(cert, a=a, b=b)


def newest_binding_in_the_future() -> Made:
    a, b = _a(), _b()
    cert = Cert(_primary()).user_id().subkey(a).subkey(b, created=NOW + 10 * DAY)
    return _made(cert, a=a, b=b)


def soft_revoked_then_rebound() -> Made:
    enc = _a()
    cert = Cert(_primary()).user_id().subkey(enc)
    cert.revoke_subkey(enc, reason=fg.SUPERSEDED, created=T0 + 10 * DAY)
    return _made(cert.bind(enc, created=T0 + 20 * DAY), enc=enc)


def revoked_only_user_id() -> Made:
    enc = _a()
    cert = Cert(_primary()).user_id().revoke_user_id(reason=32, created=T0 + DAY)
    return _made(cert.subkey(enc), enc=enc)


def newest_subkey_expires_soon() -> Made:
    a, b = _a(), _b()
    lifetime = NOW + HOUR - (T0 + DAY)
    cert = Cert(_primary()).user_id().subkey(a).subkey(b, key_expires=lifetime)
    return _made(cert, a=a, b=b)


def only_subkey_expires_soon() -> Made:
    enc = _a()
    cert = Cert(_primary()).user_id().subkey(enc, key_expires=NOW + HOUR - T0)
    return _made(cert, enc=enc)


_PAD = bytes(70_000)


def primary_oversized() -> Made:
    primary, enc = _primary(), _a()
    cert = Cert(primary).user_id().subkey(enc)
    cert.packets[0] = (Tag.PUBLIC_KEY, primary.body + _PAD)
    return _made(cert, enc=enc)


def subkey_oversized() -> Made:
    enc = _a()
    cert = Cert(_primary()).user_id().subkey(enc)
    cert.packets[3] = (Tag.PUBLIC_SUBKEY, enc.body + _PAD)
    return _made(cert, enc=enc)


def primary_trailing_octets() -> Made:
    primary, enc = _primary(), _a()
    cert = Cert(primary).user_id().subkey(enc)
    cert.packets[0] = (Tag.PUBLIC_KEY, primary.body + b"\x01\x02\x03")
    return _made(cert, enc=enc)


def subkey_trailing_octets() -> Made:
    enc = _a()
    cert = Cert(_primary()).user_id().subkey(enc)
    cert.packets[3] = (Tag.PUBLIC_SUBKEY, enc.body + b"\x01\x02\x03")
    return _made(cert, enc=enc)


def small_order_curve25519() -> Made:
    honest = _a()
    # version, created, algorithm, OID (length 10), then the point's MPI (2 + 33 octets)
    start = 1 + 4 + 1 + 1 + 10
    weak = honest.with_body(
        honest.body[:start] + mpi(b"\x40" + bytes(32)) + honest.body[start + 35 :]
    )
    return _made(Cert(_primary()).user_id().subkey(weak), enc=weak)


def oversized_user_id() -> Made:
    """The only user id is 32 KiB long: more than Sequoia (32 KiB) or GnuPG (2 KiB) read."""
    enc = _a()
    return _made(Cert(_primary(), uid=b"U" * 32 * 1024).user_id().subkey(enc), enc=enc)


def huge_user_attribute(size: int = 512 * 1024, bad: int = 600) -> Made:
    """A user attribute of ``size`` octets under ``bad`` spoiled certifications and a good one.

    Every spoiled one carries the right two-octet digest prefix, so each is hashed and
    checked; hashing the attribute again for each made loading quadratic.
    """
    enc = _a()
    cert = Cert(_primary()).user_id()
    attribute = b"\x01" + bytes(size)
    subject = cert.key_subject() + b"\xd1" + len(attribute).to_bytes(4, "big") + attribute
    cert.raw(Tag.USER_ATTRIBUTE, attribute)
    cert.signature(fg.POSITIVE_CERTIFICATION, subject)
    for number in range(bad):
        cert.signature(fg.POSITIVE_CERTIFICATION, subject, created=T0 + 1 + number, bad=True)
    return _made(cert.subkey(enc), enc=enc)


def spoiled_certifications() -> Made:
    """1,100 spoiled certifications (right digest prefix, wrong mathematics) on a small user
    attribute: more failed public-key operations than a key may cost.
    """
    return huge_user_attribute(1024, 1100)


_EVERY_HASH = (
    "a revocation counts in any hash that verifies (rule 4); GnuPG and Sequoia ignore MD5 "
    "signatures, Sequoia 1.x also SHA-1 key revocations made since its cut-off"
)
_TIMELESS = (
    "a hard revocation counts whatever its date (rule 4), as GnuPG does; Sequoia (sq 0.27, "
    "pysequoia) ignores one dated in the future"
)
_REHOMED = (
    "a signature counts where it verifies (rule 2), as GnuPG's 'signatures reordered'; "
    "Sequoia does not move a key revocation found after a subkey"
)
_SOFT_STAYS = (
    "a soft revocation is not undone by a newer binding (rule 4), as GnuPG; Sequoia lets "
    "the newer binding win"
)
_SOFT_FROM_ITS_DATE = (
    "not stricter, a documented choice: a soft revocation counts from its date on (rule "
    "4, as Sequoia, which encrypts to both subkeys until then); GnuPG applies one dated "
    "ahead at once and picks the older subkey"
)
_OLDER_THAN_SUBKEY = (
    "a binding older than the subkey it binds does not count (rule 3); GnuPG compares it "
    "with the primary key only and picks that subkey (Sequoia encrypts to both)"
)
_FUTURE_BINDING = (
    "a binding dated in the future does not count yet (rule 3), as Sequoia; GnuPG uses it"
)
_MALFORMED = (
    "a key packet with octets after its fields, or longer than a v4 fingerprint covers, is "
    "malformed (as Sequoia); GnuPG reads the fields and uses the key"
)
_OVERSIZED_PRIMARY = (
    "a primary key packet longer than a v4 fingerprint covers is malformed (as Sequoia); "
    "GnuPG 2.2 drops the user id of most such keys (then refuses the key) but uses about one "
    "in twenty, depending on the key material"
)
_SPOILED = (
    "more than 1,024 self-signatures that carry the right digest prefix and do not verify "
    "make a key malformed (rule 2: a bound on public-key operations); GnuPG and Sequoia "
    "check them all and use the good one"
)
_SMALL_ORDER = (
    "a Curve25519 point of small order cannot receive messages (every sender's shared "
    "secret is zero); GnuPG and Sequoia encrypt to it"
)

CASES = [
    Forged("baseline-ed25519", None, baseline_ed25519, "sub:enc"),
    Forged("baseline-rsa", None, baseline_rsa, "sub:enc"),
    # 1. revocations in SHA-1
    Forged("sha1-revoked-only-subkey", 1, sha1_revoked_only_subkey, "no_encryption_subkey"),
    Forged("sha1-revoked-key", 1, sha1_revoked_key, "revoked", stricter=_EVERY_HASH),
    Forged("sha1-revoked-newest-subkey", 1, sha1_revoked_newest_subkey, "sub:a"),
    Forged(
        "md5-revoked-only-subkey",
        None,
        md5_revoked_only_subkey,
        "no_encryption_subkey",
        stricter=_EVERY_HASH,
    ),
    # 2. hard revocations dated in the future
    Forged("future-compromised-key", 2, future_compromised_key, "revoked", stricter=_TIMELESS),
    Forged(
        "future-unreasoned-subkey-revocation",
        2,
        future_unreasoned_subkey_revocation,
        "no_encryption_subkey",
    ),
    Forged(
        "future-superseded-newest-subkey",
        None,
        future_superseded_newest_subkey,
        "sub:b",
        later=(11 * DAY, "sub:a"),
        stricter=_SOFT_FROM_ITS_DATE,
    ),
    # 3. a primary key needs a self-signature
    Forged("no-user-id", 3, no_user_id, "no_self_signature"),
    Forged("expired-user-id-stripped", 3, expired_user_id_stripped, "no_self_signature"),
    Forged("bad-certification-only", 3, bad_certification_only, "no_self_signature"),
    # 4. expiry from every primary self-signature
    Forged("direct-key-expired", 4, direct_key_expired, "expired"),
    Forged("user-id-expired-direct-key-not", None, user_id_expired_direct_key_not, "expired"),
    Forged("second-user-id-expired", None, second_user_id_expired, "expired"),
    # 5. misplaced signatures re-homed
    Forged("subkey-revocation-under-user-id", 5, subkey_revocation_under_user_id, "sub:a"),
    Forged(
        "only-subkey-revocation-under-user-id",
        5,
        only_subkey_revocation_under_user_id,
        "no_encryption_subkey",
    ),
    Forged("binding-under-older-subkey", 5, binding_under_older_subkey, "sub:b"),
    Forged("key-revocation-at-the-end", 5, key_revocation_at_the_end, "revoked", stricter=_REHOMED),
    Forged("certification-after-the-subkey", None, certification_after_the_subkey, "sub:enc"),
    # 6. self-signatures older than the key they bind
    Forged("binding-older-than-the-keys", 6, binding_older_than_the_keys, "no_encryption_subkey"),
    Forged(
        "certification-older-than-the-key",
        6,
        certification_older_than_the_key,
        "no_self_signature",
    ),
    Forged(
        "newest-binding-older-than-its-subkey",
        6,
        newest_binding_older_than_its_subkey,
        "sub:a",
        stricter=_OLDER_THAN_SUBKEY,
    ),
    Forged(
        "newest-binding-in-the-future",
        None,
        newest_binding_in_the_future,
        "sub:a",
        stricter=_FUTURE_BINDING,
    ),
    Forged(
        "soft-revoked-then-rebound",
        None,
        soft_revoked_then_rebound,
        "no_encryption_subkey",
        stricter=_SOFT_STAYS,
    ),
    Forged("revoked-only-user-id", None, revoked_only_user_id, "sub:enc"),
    # 7. validity at use
    Forged(
        "newest-subkey-expires-soon",
        7,
        newest_subkey_expires_soon,
        "sub:b",
        later=(2 * HOUR, "sub:a"),
    ),
    Forged(
        "only-subkey-expires-soon",
        7,
        only_subkey_expires_soon,
        "sub:enc",
        later=(2 * HOUR, "expired"),
    ),
    # 8. malformed keys
    Forged(
        "primary-oversized",
        8,
        primary_oversized,
        "malformed",
        stricter=_OVERSIZED_PRIMARY,
        varies=True,
    ),
    Forged("subkey-oversized", 8, subkey_oversized, "malformed", stricter=_MALFORMED),
    Forged("primary-trailing-octets", 8, primary_trailing_octets, "malformed", stricter=_MALFORMED),
    Forged("subkey-trailing-octets", 8, subkey_trailing_octets, "malformed", stricter=_MALFORMED),
    Forged("small-order-curve25519", 8, small_order_curve25519, "malformed", stricter=_SMALL_ORDER),
    Forged("oversized-user-id", None, oversized_user_id, "no_self_signature"),
    # 9. linear time
    Forged("huge-user-attribute", 9, huge_user_attribute, "sub:enc"),
    Forged("spoiled-certifications", 9, spoiled_certifications, "malformed", stricter=_SPOILED),
]

CASES_BY_NAME = {case.name: case for case in CASES}
