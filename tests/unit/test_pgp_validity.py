# Copyright (c) 2026 the invoicing_async developers. MIT License.
"""Which signatures count, on forged keys: the library's verdicts, now and later.

The keys come from :mod:`forgedkeys` (built by :mod:`forger`, correctly signed); what
GnuPG and Sequoia say about the same bytes is ``tests/system/test_key_verdicts.py``'s.
These tests need no peer.
"""

from __future__ import annotations

import hashlib
import time

import forgedkeys as fk
import forger as fg
import pytest

from invoicing_async import ProviderKey, ProviderKeyError
from invoicing_async._doc.pgp import iter_packets
from invoicing_async._doc.pgp._validity import MAX_REHOMING_TRIALS
from invoicing_async._doc.pgp._verify import Verifier

CASES = [pytest.param(case, id=case.name) for case in fk.CASES]
LATER = [pytest.param(case, id=case.name) for case in fk.CASES if case.later]


@pytest.mark.parametrize("case", CASES)
def test_forged_key_gets_its_verdict(case: fk.Forged):
    """Each forged key is refused with its reason, or encrypted to the subkey it must be."""
    made = case.made
    ours = fk.verdict(made)
    assert ours == made.expected(case.expect), made.named(ours)


@pytest.mark.parametrize("case", LATER)
def test_forged_key_judged_again_later(case: fk.Forged):
    """Validity is a property of now: loaded now, the key encrypts later where it must."""
    assert case.later is not None
    made = case.made
    ours = fk.verdict(made, at=case.at_later)
    assert ours == made.expected(case.later[1]), made.named(ours)


def test_every_defect_of_the_issue_has_a_forged_key():
    """Issue 18's nine key defects each have at least one forged key showing it."""
    assert {case.defect for case in fk.CASES} >= set(range(1, 10))


def test_the_subkey_in_use_moves_on_when_it_expires(monkeypatch):
    """A long-running process: the chosen subkey expires an hour after loading; from then on
    encrypt() and encrypt_binary() use the older one, and the key says so.
    """
    made = fk.CASES_BY_NAME["newest-subkey-expires-soon"].made
    key = ProviderKey.from_armored(made.data)
    assert key.subkey_fingerprint == made.subkeys["b"]
    monkeypatch.setattr(time, "time", lambda: fk.NOW + 2 * fk.HOUR)
    assert key.subkey_fingerprint == made.subkeys["a"]
    assert made.subkeys["a"][-16:] in repr(key)
    assert key.encrypt(b"{}").startswith(b"-----BEGIN PGP MESSAGE-----")


def test_the_last_subkey_expiring_refuses_encryption(monkeypatch):
    """When no subkey is left, encrypt() raises ProviderKeyError('expired') naming the subkey
    and its date; repr() and the attributes still work.
    """
    made = fk.CASES_BY_NAME["only-subkey-expires-soon"].made
    key = ProviderKey.from_armored(made.data)
    assert key.encrypt(b"{}")
    monkeypatch.setattr(time, "time", lambda: fk.NOW + 2 * fk.HOUR)
    for encrypt in (key.encrypt, key.encrypt_binary):
        with pytest.raises(ProviderKeyError) as info:
            encrypt(b"{}")
        assert info.value.reason == "expired"
        assert made.subkeys["enc"] in str(info.value)
    assert key.subkey_fingerprint == made.subkeys["enc"]
    assert repr(key)


def test_a_pin_does_not_revive_a_stripped_key():
    """Stripping the user id of a key that expired on it leaves no self-signature, pinned or
    not: the pin says which key, not that it is valid.
    """
    made = fk.CASES_BY_NAME["expired-user-id-stripped"].made
    pin = ProviderKey.from_armored(fk.baseline_ed25519().data).fingerprint  # same primary
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_armored(made.data, fingerprint=pin)
    assert info.value.reason == "no_self_signature"
    assert "self-signature" in str(info.value)


def test_each_signature_is_checked_once(monkeypatch):
    """A certification and a binding repeated five times each cost one public-key operation
    each: duplicates are recognised before anything is verified.
    """
    made = fk.baseline_ed25519()
    packets = list(iter_packets(made.data))  # key, user id, certification, subkey, binding
    repeated = fg.Cert(fg.key("ed25519"))
    repeated.packets = packets[:2] + [packets[2]] * 5 + [packets[3]] + [packets[4]] * 5
    checks = []
    original = Verifier.check
    monkeypatch.setattr(Verifier, "check", lambda self, *a: checks.append(1) or original(self, *a))
    assert fk.verdict(fk.Made(repeated.binary(), made.subkeys)) == made.expected("sub:enc")
    assert len(checks) == 2


class _CountingHash:
    """A hashlib object that counts the octets it is given."""

    def __init__(self, inner, counter: list[int]) -> None:
        self._inner, self._counter = inner, counter

    def update(self, data: bytes) -> None:
        self._counter[0] += len(data)
        self._inner.update(data)

    def copy(self) -> _CountingHash:
        return _CountingHash(self._inner.copy(), self._counter)

    def digest(self) -> bytes:
        return self._inner.digest()

    def hexdigest(self) -> str:
        return self._inner.hexdigest()


def test_a_large_signed_subject_is_hashed_once(monkeypatch):
    """A 1 MiB user attribute under 200 spoiled certifications (each with the right digest
    prefix, so each is checked): loading hashes about the key's size, not 200 MiB
    (the quadratic cost the issue measured at 0.7 s for 900 KiB and a minute for 8 MiB).
    """
    made = fk.huge_user_attribute(1024 * 1024, 200)
    real_new = hashlib.new
    counter = [0]

    def counting_new(name: str, data: bytes = b"", **options: object) -> _CountingHash:
        counted = _CountingHash(real_new(name, **options), counter)  # type: ignore[arg-type]
        counted.update(data)
        return counted

    monkeypatch.setattr(hashlib, "new", counting_new)
    assert fk.verdict(made) == made.expected("sub:enc")
    assert counter[0] < 2 * len(made.data), f"{counter[0]:,} octets hashed for {len(made.data):,}"


def test_too_many_misplaced_signatures_make_the_key_malformed():
    """Subkey revocations that verify nowhere, filed under the user id, are each tried
    against every subkey; past MAX_REHOMING_TRIALS hashes the key is refused as malformed
    (300 x 300 tries here), so such a key cannot make loading quadratic.
    """
    cert = fg.Cert(fg.key("ed25519")).user_id()
    for number in range(300):
        cert.signature(fg.SUBKEY_REVOCATION, b"no subkey", created=fg.T0 + number)
    for number in range(300):
        cert.subkey(fg.key("cv25519", fg.T0 + number, slot=1))
    assert MAX_REHOMING_TRIALS < 300 * 299
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_armored(cert.binary())
    assert info.value.reason == "malformed"
    assert "misplaced" in str(info.value)
