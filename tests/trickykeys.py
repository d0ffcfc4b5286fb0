# Copyright (c) 2026 the invoicing_async developers. MIT License.
"""Tricky provider keys made by several peers, and the verdict each must get.

A helper module, not a test module. Each :class:`Tricky` case is a key some peer made
(GnuPG, OpenPGP.js, Bouncy Castle) with what makes subkey choice hard: expired, revoked or
future subkeys, several encryption subkeys, re-bound expiry, corrupted bindings,
unknown-algorithm subkeys, refused hashes. The library's verdict must agree with GnuPG's
(:func:`peerfactory.gnupg_choice`) unless the case names a documented policy difference
(``policy``), in which case the library's refusal reason is ``reason``.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import TYPE_CHECKING

import keyfactory as kf
import peerfactory as pf

from invoicing_async._doc.pgp import dearmor

if TYPE_CHECKING:
    from collections.abc import Callable

T2020, T2021, T2022 = 1577836800, 1609459200, 1640995200  # 1 January, UTC
T2024 = 1704067200
T2099 = 4070908800


@dataclasses.dataclass(frozen=True)
class Tricky:
    """A tricky key and the verdict it must get."""

    name: str
    make: Callable[[], str]
    #: Our refusal reason where GnuPG's verdict differs by a documented policy.
    reason: str | None = None
    #: The documented policy that makes the difference (README / ``_pgp._sigs``).
    policy: str | None = None


# --- OpenPGP.js ------------------------------------------------------------------------------


@functools.cache
def _js_batch() -> dict[str, pf.PeerKey]:
    peer = pf.PEERS["openpgpjs"]
    assert isinstance(peer, pf.OpenPGPjs)
    jobs: dict[str, dict[str, object]] = {
        "default": {},
        "several": {
            "kind": "cv25519",
            "created": T2020,
            "subkeys": [{}, {"created": T2021}, {"created": T2022}],
        },
        "expired-newest": {
            "kind": "cv25519",
            "created": T2020,
            "subkeys": [{}, {"created": T2022, "expires": 3600}],
        },
        "revoked-newest": {
            "kind": "rsa2048",
            "created": T2020,
            "subkeys": [{}, {"created": T2022}],
            "revoke": [1],
        },
        "future-subkey": {"kind": "cv25519", "created": T2020, "subkeys": [{}, {"created": T2099}]},
        "x25519-beside-cv25519": {
            "kind": "cv25519",
            "created": T2020,
            "subkeys": [{}, {"created": T2022, "kind": "x25519"}],
        },
        "x25519-only": {"kind": "x25519"},
        "x448-only": {"kind": "x448"},
    }
    results = peer.run([{"op": "generate", **job} for job in jobs.values()])
    keys = {}
    for name, result in zip(jobs, results, strict=True):
        if not result["ok"]:
            raise RuntimeError(f"OpenPGP.js could not make {name}: {result['error']}")
        keys[name] = pf.PeerKey("openpgpjs", name, result["public"], result["secret"])
    return keys


def js(name: str) -> Callable[[], str]:
    """The public key of OpenPGP.js case ``name``."""

    def make() -> str:
        pf.PEERS["openpgpjs"].require()
        return _js_batch()[name].public

    make.__name__ = f"js_{name}"
    return make


def js_corrupted_newest() -> str:
    """OpenPGP.js's three-subkey key with the newest subkey's binding corrupted."""
    pf.PEERS["openpgpjs"].require()
    _, binary = dearmor(_js_batch()["several"].public.encode())
    return kf._with_bad_binding(binary, 3)


# --- RNP -------------------------------------------------------------------------------------


def rnp(name: str, answers: str) -> Callable[[], str]:
    """An RNP key made with ``--expert`` and ``answers`` (once per session)."""

    @functools.cache
    def make() -> str:
        peer = pf.PEERS["rnp"]
        assert isinstance(peer, pf.RNP)
        return peer.expert(name, answers).public

    make.__name__ = f"rnp_{name}"
    return make


# --- Bouncy Castle ---------------------------------------------------------------------------


def bc(
    name: str, kind: str, subkeys: list[tuple[str, int, int]], **options: int
) -> Callable[[], str]:
    """A Bouncy Castle key (made once per session)."""

    @functools.cache
    def make() -> str:
        peer = pf.PEERS["bouncycastle"]
        assert isinstance(peer, pf.BouncyCastle)
        peer.require()
        return peer.make(name, kind, subkeys, **options).public

    make.__name__ = f"bc_{name}"
    return make


# --- GnuPG -----------------------------------------------------------------------------------


@functools.cache
def gpg_future_subkey() -> str:
    """GnuPG key with a current subkey and one created (and bound) in 2099."""
    home = kf._new_home("future_subkey")
    fpr = kf._gen(home, kf._uid("future_subkey"), "ed25519", "cert,sign", "never", faked=kf.T2020)
    kf._addkey(home, fpr, "cv25519", "encr", "never", faked=kf.T2021)
    kf._addkey(home, fpr, "cv25519", "encr", "never", faked="20990101T000000")
    return kf._export(home, fpr).decode()


@functools.cache
def _gpg_rebound(expire: str) -> str:
    home = kf._new_home("rebound")
    fpr = kf._gen(home, kf._uid("rebound"), "ed25519", "cert,sign", "never", faked=kf.T2019)
    kf._addkey(home, fpr, "cv25519", "encr", "never", faked=kf.T2020)
    kf._addkey(home, fpr, "cv25519", "encr", "2021-06-01", faked=kf.T2021)
    _, subkeys = kf._listing(home, fpr)
    kf._gpg(home, "--quick-set-expire", fpr, expire, subkeys[1].fingerprint, faked=kf.T2022)
    return kf._export(home, fpr).decode()


def gpg_rebound_extended() -> str:
    """The newest subkey expired in 2021, then re-bound in 2022 with no expiry: usable."""
    return _gpg_rebound("0")


def gpg_rebound_shortened() -> str:
    """The newest subkey re-bound in 2022 to expire 2022-06-01: the older one is chosen."""
    return _gpg_rebound("2022-06-01")


@functools.cache
def gpg_sha1_since_cutoff() -> str:
    """A GnuPG key made in 2024 whose self-signatures all use SHA-1."""
    home = kf._new_home("sha1")
    fpr = kf._gen(home, kf._uid("sha1"), "rsa3072", "cert,sign", "never", faked="20240101T000000")
    kf._gpg(
        home,
        "--cert-digest-algo",
        "SHA1",
        "--quick-add-key",
        fpr,
        "rsa3072",
        "encr",
        "never",
        faked="20240101T000000",
    )
    kf._gpg(
        home,
        "--cert-digest-algo",
        "SHA1",
        "--quick-set-primary-uid",
        fpr,
        kf._uid("sha1"),
        faked="20240102T000000",
    )
    return kf._export(home, fpr).decode()


def _gpg(factory: Callable[[], kf.GeneratedKey]) -> Callable[[], str]:
    def make() -> str:
        return factory().armored

    make.__name__ = f"gpg_{factory.__name__}"
    return make


_SHA1 = "SHA-1 self-signatures made since 2023-02-01 are refused (Sequoia's standard policy)"
_CURVES = "ECDH is supported on Curve25519 and NIST P-256/384/521 only"
_ECDSA_HASH = (
    "GnuPG refuses ECDSA signatures whose hash is shorter than the curve (Bouncy Castle signs "
    "P-384/P-521 keys with SHA-256); the signature is valid, and Sequoia and OpenPGP.js accept it"
)

CORPUS = [
    # GnuPG
    Tricky("gpg-newest-expired", _gpg(kf.newest_subkey_expired)),
    Tricky("gpg-several-valid", _gpg(kf.several_valid_subkeys)),
    Tricky("gpg-newest-revoked", _gpg(kf.newest_subkey_revoked)),
    Tricky("gpg-newest-stored-first", _gpg(kf.newest_first_in_file)),
    Tricky("gpg-newest-bad-binding", _gpg(kf.bad_binding_newest)),
    Tricky("gpg-all-expired", _gpg(kf.all_subkeys_expired), "no_encryption_subkey"),
    Tricky("gpg-only-revoked", _gpg(kf.only_subkey_revoked), "no_encryption_subkey"),
    Tricky("gpg-only-bad-binding", _gpg(kf.bad_binding_only), "no_encryption_subkey"),
    Tricky("gpg-future-subkey", gpg_future_subkey),
    Tricky("gpg-rebound-extended", gpg_rebound_extended),
    Tricky("gpg-rebound-shortened", gpg_rebound_shortened),
    Tricky("gpg-sha1-since-2023", gpg_sha1_since_cutoff, "weak_hash", _SHA1),
    # OpenPGP.js
    Tricky("js-default", js("default")),
    Tricky("js-several", js("several")),
    Tricky("js-expired-newest", js("expired-newest")),
    Tricky("js-revoked-newest", js("revoked-newest")),
    Tricky("js-future-subkey", js("future-subkey")),
    Tricky("js-corrupted-newest", js_corrupted_newest),
    Tricky("js-x25519-beside-cv25519", js("x25519-beside-cv25519")),
    Tricky("js-x25519-only", js("x25519-only"), "unsupported_algorithm"),
    Tricky("js-x448-only", js("x448-only"), "unsupported_algorithm"),
    # RNP
    Tricky("rnp-brainpool", rnp("brainpool", "19\n4\n"), "unsupported_algorithm", _CURVES),
    Tricky("rnp-secp256k1", rnp("secp256k1", "19\n7\n"), "unsupported_algorithm", _CURVES),
    # Bouncy Castle
    Tricky(
        "bc-several", bc("several", "p256", [("p256", T2021, 0), ("p256", T2022, 0)], created=T2020)
    ),
    Tricky(
        "bc-expired-newest",
        bc("expired", "rsa2048", [("rsa2048", T2021, 0), ("rsa2048", T2022, 3600)], created=T2020),
    ),
    Tricky(
        "bc-future-subkey",
        bc("future", "cv25519", [("cv25519", T2021, 0), ("cv25519", T2099, 0)], created=T2020),
    ),
    Tricky(
        "bc-sha1-2020",
        bc("sha1-2020", "rsa2048", [("rsa2048", T2020, 0)], created=T2020, hash_id=2),
    ),
    Tricky(
        "bc-sha1-2024",
        bc("sha1-2024", "rsa2048", [("rsa2048", T2024, 0)], created=T2024, hash_id=2),
        "weak_hash",
        _SHA1,
    ),
    Tricky(
        "bc-p384-sha256", bc("p384", "p384", [("p384", T2022, 0)], created=T2022), None, _ECDSA_HASH
    ),
]

CORPUS_BY_NAME = {case.name: case for case in CORPUS}


@functools.cache
def bc_future_primary() -> str:
    """A Bouncy Castle key whose primary key (and everything else) is dated 2099."""
    return bc("future-primary", "rsa2048", [("rsa2048", T2099, 0)], created=T2099)()


@functools.cache
def bc_minutes_ahead() -> str:
    """A Bouncy Castle key dated ten minutes in the future (within the clock skew)."""
    ahead = int(time.time()) + 600
    return bc("ahead", "rsa2048", [("rsa2048", ahead, 0)], created=ahead)()
