"""Interoperability with every peer: GnuPG, Sequoia (sq, pysequoia), OpenPGP.js, RNP, Bouncy Castle.

* keys each peer makes (RSA-2048/3072/4096, Curve25519, NIST P-256/384/521, as far as the
  peer offers them) load, and the subkey chosen is that peer's encryption subkey;
* every peer decrypts the library's messages to its keys byte-exact (empty, a 4 KB Greek
  JSON invoice, 200 KB of binary);
* on tricky keys made by several peers (:mod:`trickykeys`) the library's verdict agrees
  with GnuPG's choice, or differs only by a documented policy.

Peers are driven in batches, once per session (:mod:`peerfactory`); a missing peer skips
with the reason, and ``.ci/run`` installs them all.
"""

from __future__ import annotations

import functools
import json
import random

import peerfactory as pf
import pytest
import trickykeys as tk

from invoicing_async import ProviderKey, ProviderKeyError

pytestmark = pytest.mark.interop


def _greek_invoice() -> bytes:
    lines = [
        {
            "Γραμμή": i,
            "Περιγραφή": f"Υπηρεσίες λογιστικής υποστήριξης {i}, Θεσσαλονίκη «ειδική» τιμή",
            "Τιμή": "1234.56 €",
            "Ποσότητα": i % 7 + 1,
        }
        for i in range(20)
    ]
    document = {
        "Εκδότης": {"Επωνυμία": "Ωμέγα Ανώνυμη Εταιρεία", "ΑΦΜ": "EL094019245"},
        "Γραμμές": lines,
    }
    return json.dumps(document, ensure_ascii=False).encode()


PAYLOADS = {
    "empty": b"",
    "greek-json-4k": _greek_invoice(),
    "binary-200k": random.Random(13).randbytes(200 * 1024),
}
PEER_KINDS = [
    pytest.param(name, kind, id=f"{name}-{kind}")
    for name, peer in pf.PEERS.items()
    for kind in peer.kinds
]


def test_the_payloads_are_what_they_claim():
    """The JSON payload is about 4 KB of Greek text; the large one is 200 KB."""
    assert 3500 < len(PAYLOADS["greek-json-4k"]) < 5000
    assert "Θεσσαλονίκη".encode() in PAYLOADS["greek-json-4k"]
    assert len(PAYLOADS["binary-200k"]) == 200 * 1024


@pytest.mark.parametrize(("peer", "kind"), PEER_KINDS)
def test_peer_made_key_loads(peer, kind):
    """A key the peer made loads; the algorithm is the kind asked for; the chosen subkey is
    one of the key's own subkeys (the peer then decrypts to it, below).
    """
    made = pf.PEERS[peer].generate(kind)
    key = ProviderKey.from_armored(made.public)
    assert key.algorithm == pf.ALGORITHMS[kind]
    assert key.subkey_fingerprint != key.fingerprint


@functools.cache
def _decrypted(peer: str) -> dict[tuple[str, str], bytes]:
    """Every payload encrypted by the library to every key of ``peer``, decrypted by it."""
    keys = {kind: pf.PEERS[peer].generate(kind) for kind in pf.PEERS[peer].kinds}
    cases = [(kind, name) for kind in keys for name in PAYLOADS]
    jobs = [
        (keys[kind].secret, ProviderKey.from_armored(keys[kind].public).encrypt(PAYLOADS[name]))
        for kind, name in cases
    ]
    return dict(zip(cases, pf.PEERS[peer].decrypt(jobs), strict=True))


@pytest.mark.parametrize("payload", list(PAYLOADS))
@pytest.mark.parametrize(("peer", "kind"), PEER_KINDS)
def test_peer_decrypts_the_library_message_byte_exact(peer, kind, payload):
    """The peer decrypts what the library encrypted to the peer's own key, byte for byte."""
    pf.PEERS[peer].require()
    assert _decrypted(peer)[kind, payload] == PAYLOADS[payload]


def _ours(public: str) -> tuple[str | None, str | None]:
    try:
        return ProviderKey.from_armored(public).subkey_fingerprint[-16:], None
    except ProviderKeyError as refusal:
        return None, refusal.reason


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in tk.CORPUS])
def test_tricky_key_verdict_agrees_with_gnupg(case: tk.Tricky):
    """On tricky keys made by several peers, the subkey chosen (or the refusal) is GnuPG's,
    except where a documented policy differs; then the refusal reason is the policy's.
    """
    public = case.make()
    chosen, reason = _ours(public)
    gnupg = pf.gnupg_choice(public)
    if case.policy is None:
        assert chosen == gnupg, f"ours {chosen} ({reason}), GnuPG {gnupg}"
    else:
        assert chosen != gnupg, f"{case.name}: the documented difference no longer exists"
    if chosen is None:
        assert reason == case.reason
