# Copyright (c) 2026 the invoicing_async developers. MIT License.
"""Loading and validating the provider's OpenPGP public key (``ProviderKey``).

The corpus comes from :mod:`keyfactory` (keys made by GnuPG and Sequoia, plus
hand-built packets).  Cases that need ``gpg``/``sq`` skip when it is missing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path

import keyfactory as kf
import peerfactory as pf
import pytest
import trickykeys as tk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invoicing_async import ProviderKey, ProviderKeyError
from invoicing_async._doc.pgp import Tag, dearmor, iter_packets
from invoicing_async._doc.pgp._sigs import _subpackets

REASONS = frozenset(
    {
        "unreadable",
        "secret_key",
        "unsupported_version",
        "expired",
        "revoked",
        "no_encryption_subkey",
        "weak_rsa",
        "unsupported_algorithm",
        "fingerprint_mismatch",
        "weak_hash",
        "not_yet_valid",
        "no_self_signature",
        "malformed",
    }
)

interop = pytest.mark.interop


# --------------------------------------------------------------------------
# how the key reaches the library
# --------------------------------------------------------------------------


def _as_str(data: str | bytes, tmp_path: Path) -> ProviderKey:
    text = data.decode() if isinstance(data, bytes) else data
    return ProviderKey.from_armored(text)


def _as_bytes(data: str | bytes, tmp_path: Path) -> ProviderKey:
    raw = data.encode() if isinstance(data, str) else data
    return ProviderKey.from_armored(raw)


def _as_file(data: str | bytes, tmp_path: Path) -> ProviderKey:
    path = tmp_path / "provider.asc"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return ProviderKey.from_file(path)


LOADERS = [
    pytest.param(_as_str, id="armored-str"),
    pytest.param(_as_bytes, id="armored-bytes"),
    pytest.param(_as_file, id="file"),
]

Loader = Callable[[str | bytes, Path], ProviderKey]


# --------------------------------------------------------------------------
# verdicts
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Rejected:
    """A blob the library must refuse, and the reason it must give."""

    make: Callable[[], str | bytes]
    reason: str
    key: Callable[[], kf.GeneratedKey] | None = None
    """The generated key behind the blob (for its fingerprint), if any."""


def _key_case(
    factory: Callable[[], kf.GeneratedKey], reason: str, *, ident: str | None = None
) -> pytest.ParameterSet:
    return pytest.param(
        Rejected(lambda: factory().armored, reason, factory),
        id=f"{reason}-{ident or factory.__name__}",
        marks=interop,
    )


def _blob_case(
    make: Callable[[], str | bytes], reason: str, *, needs_peer: bool = False
) -> pytest.ParameterSet:
    return pytest.param(
        Rejected(make, reason),
        id=f"{reason}-{make.__name__}",
        marks=[interop] if needs_peer else [],
    )


def _sq_secret() -> str:
    secret = kf.sq_cv25519().secret
    assert secret is not None
    return secret


def _binary_secret() -> bytes:
    return kf.export_binary(kf.cv25519(), secret=True)


REJECTED = [
    _blob_case(kf.garbage, "unreadable"),
    _blob_case(kf.empty, "unreadable"),
    _blob_case(kf.bad_armor, "unreadable"),
    _blob_case(kf.truncated_key, "unreadable", needs_peer=True),
    _blob_case(kf.pgp_message, "unreadable", needs_peer=True),
    _blob_case(kf.secret_key_block, "secret_key", needs_peer=True),
    _blob_case(_sq_secret, "secret_key", needs_peer=True),
    _blob_case(kf.v6_ed25519, "unsupported_version"),
    _blob_case(kf.v6_x25519, "unsupported_version"),
    _blob_case(kf.v5_eddsa, "unsupported_version"),
    _key_case(kf.expired_primary, "expired"),
    _key_case(kf.revoked_primary, "revoked"),
    _key_case(kf.all_subkeys_expired, "no_encryption_subkey"),
    _key_case(kf.only_subkey_revoked, "no_encryption_subkey"),
    _key_case(kf.sign_only, "no_encryption_subkey"),
    _key_case(kf.sign_subkey_only, "no_encryption_subkey"),
    _key_case(kf.bad_binding_only, "no_encryption_subkey"),
    _key_case(kf.rsa1024, "weak_rsa"),
    _key_case(kf.rsa3072_weak_subkey, "weak_rsa"),
    _key_case(kf.dsa_elgamal, "unsupported_algorithm"),
    _key_case(kf.dsa_rsa, "unsupported_algorithm"),
    _key_case(kf.ed25519_elgamal, "unsupported_algorithm"),
]


@pytest.mark.parametrize("case", REJECTED)
@pytest.mark.parametrize("load", LOADERS)
def test_unusable_key_is_rejected_with_its_reason(case: Rejected, load: Loader, tmp_path):
    """Every unusable key is refused with ProviderKeyError and the contract's reason code.

    Checked for armored text, armored bytes and a file, with a human message.
    """
    data = case.make()
    with pytest.raises(ProviderKeyError) as info:
        load(data, tmp_path)
    assert info.value.reason == case.reason, str(info.value)
    assert str(info.value).strip(), "the error must say why in a sentence"


@pytest.mark.parametrize(
    "case",
    [p for p in REJECTED if getattr(p.values[0], "reason", None) in {"expired", "revoked"}],
)
def test_expired_or_revoked_error_names_the_fingerprint(case: Rejected):
    """The message for an expired or revoked key includes the primary fingerprint."""
    assert case.key is not None
    key = case.key()
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_armored(key.armored)
    assert key.fingerprint in _compact(str(info.value))


@interop
def test_binary_secret_key_is_rejected(tmp_path):
    """An unarmored secret key (bytes or file) is refused with reason 'secret_key'."""
    for load in (_as_bytes, _as_file):
        with pytest.raises(ProviderKeyError) as info:
            load(_binary_secret(), tmp_path)
        assert info.value.reason == "secret_key", str(info.value)


def test_missing_file_is_unreadable(tmp_path):
    """from_file on a path that does not exist raises ProviderKeyError('unreadable')."""
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_file(tmp_path / "no-such-key.asc")
    assert info.value.reason == "unreadable"
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_file(str(tmp_path / "no-such-key.asc"))
    assert info.value.reason == "unreadable"


def test_directory_is_unreadable(tmp_path):
    """from_file on a directory raises ProviderKeyError('unreadable'), not an OSError."""
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_file(tmp_path)
    assert info.value.reason == "unreadable"


def test_empty_file_is_unreadable(tmp_path):
    """An empty key file raises ProviderKeyError('unreadable')."""
    path = tmp_path / "empty.asc"
    path.write_bytes(b"")
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_file(path)
    assert info.value.reason == "unreadable"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=600), st.text(max_size=600)))
def test_arbitrary_input_only_ever_raises_provider_key_error(data: bytes | str):
    """Arbitrary bytes or text never crash the loader with anything but ProviderKeyError."""
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_armored(data)
    assert info.value.reason in REASONS


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=1, max_size=64), st.integers(min_value=0))
def test_corrupted_armor_body_raises_provider_key_error(noise: bytes, where: int):
    """Splicing random bytes into a valid v6-looking armor body only raises ProviderKeyError."""
    body = bytearray(kf.v6_x25519().encode())
    start = body.index(b"\n\n") + 2
    pos = start + where % (len(body) - start)
    blob = bytes(body[:pos]) + noise + bytes(body[pos:])
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_armored(blob)
    assert info.value.reason in REASONS


# --------------------------------------------------------------------------
# valid keys
# --------------------------------------------------------------------------

VALID = [
    pytest.param(f, id=f.__name__, marks=interop)
    for f in (
        kf.rsa3072,
        kf.rsa4096,
        kf.cv25519,
        kf.nistp256,
        kf.rsa_primary_encrypts,
        kf.sq_cv25519,
        kf.sq_rsa3072,
        kf.sq_storage_only,
        kf.sq_transport_only,
    )
]


def _compact(text: str) -> str:
    return text.replace(" ", "").upper()


def _describe(key: kf.GeneratedKey) -> str:
    rows = [f"primary {key.fingerprint}"]
    rows += [
        f"sub {s.fingerprint} created={s.created} expires={s.expires} "
        f"caps={s.capabilities} gpg-validity={s.validity}"
        for s in key.subkeys
    ]
    return f"{key.name}: " + "; ".join(rows)


@pytest.mark.parametrize("factory", VALID)
@pytest.mark.parametrize("load", LOADERS)
def test_valid_key_loads_with_expected_properties(factory, load: Loader, tmp_path):
    """A usable key loads; fingerprint, encryption subkey, algorithm and expiry are right."""
    expected = factory()
    key = load(expected.armored, tmp_path)
    assert key.fingerprint == expected.fingerprint
    assert key.subkey_fingerprint == expected.expected_subkey, _describe(expected)
    assert key.algorithm == expected.expected_algorithm
    if expected.expires_at is None:
        assert key.expires_at is None
    else:
        assert key.expires_at == dt.datetime.fromtimestamp(expected.expires_at, dt.timezone.utc)
        assert key.expires_at.utcoffset() == dt.timedelta(0)


@pytest.mark.parametrize("factory", VALID)
def test_fingerprints_are_40_upper_hex(factory):
    """The fingerprint and subkey_fingerprint are 40 upper-case hex digits without spaces."""
    key = ProviderKey.from_armored(factory().armored)
    for value in (key.fingerprint, key.subkey_fingerprint):
        assert len(value) == 40
        assert value == value.upper()
        assert all(c in "0123456789ABCDEF" for c in value)


@pytest.mark.parametrize("factory", VALID)
def test_armored_round_trips(factory):
    """key.armored is a public key block that loads again to the same key."""
    key = ProviderKey.from_armored(factory().armored)
    assert key.armored.lstrip().startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert "PRIVATE KEY" not in key.armored
    again = ProviderKey.from_armored(key.armored)
    assert again.fingerprint == key.fingerprint
    assert again.subkey_fingerprint == key.subkey_fingerprint
    assert again.algorithm == key.algorithm
    assert again.expires_at == key.expires_at


@pytest.mark.parametrize("factory", VALID)
def test_repr_contains_fingerprint(factory):
    """repr(ProviderKey) shows the primary fingerprint (and holds no key material)."""
    expected = factory()
    key = ProviderKey.from_armored(expected.armored)
    assert expected.fingerprint in _compact(repr(key))
    assert "BEGIN PGP" not in repr(key)


@interop
def test_binary_key_is_accepted():
    """An unarmored (binary) public key given as bytes loads like the armored one."""
    expected = kf.cv25519()
    key = ProviderKey.from_armored(kf.binary_public())
    assert key.fingerprint == expected.fingerprint
    assert key.subkey_fingerprint == expected.expected_subkey


@interop
def test_binary_key_file_is_accepted(tmp_path):
    """A binary public key file (gpg --export without --armor) loads via from_file."""
    path = tmp_path / "provider.gpg"
    path.write_bytes(kf.binary_public())
    assert ProviderKey.from_file(os.fspath(path)).fingerprint == kf.cv25519().fingerprint


@interop
def test_armor_with_crlf_line_endings_is_accepted():
    """An armored key with CRLF line endings (as from a Windows download) loads."""
    expected = kf.cv25519()
    key = ProviderKey.from_armored(expected.armored.replace("\n", "\r\n"))
    assert key.fingerprint == expected.fingerprint


# --------------------------------------------------------------------------
# choice of the encryption subkey
# --------------------------------------------------------------------------

CHOICE = [
    pytest.param(kf.newest_subkey_expired, id="newest-expired->older-valid", marks=interop),
    pytest.param(kf.several_valid_subkeys, id="several-valid->newest", marks=interop),
    pytest.param(kf.newest_subkey_revoked, id="newest-revoked->older-valid", marks=interop),
    pytest.param(kf.newest_first_in_file, id="newest-stored-first->newest", marks=interop),
    pytest.param(kf.bad_binding_newest, id="newest-bad-binding->older-valid", marks=interop),
]


@pytest.mark.parametrize("factory", CHOICE)
def test_encryption_subkey_is_newest_usable_one(factory):
    """The chosen subkey is the newest one with a good binding, encrypt flag, unexpired, unrevoked.

    The expected fingerprint is what GnuPG (``--with-colons``) lists for that subkey.
    """
    expected = factory()
    key = ProviderKey.from_armored(expected.armored)
    assert key.fingerprint == expected.fingerprint
    assert key.subkey_fingerprint == expected.expected_subkey, _describe(expected)
    assert key.algorithm == expected.expected_algorithm


@interop
def test_primary_is_used_when_it_is_the_encryption_key():
    """A lone primary with the encrypt flag is itself the encryption key."""
    expected = kf.rsa_primary_encrypts()
    key = ProviderKey.from_armored(expected.armored)
    assert key.subkey_fingerprint == key.fingerprint == expected.fingerprint
    assert key.algorithm == "RSA-3072"


# --------------------------------------------------------------------------
# fingerprint pin
# --------------------------------------------------------------------------


def _spaced_lower(fpr: str) -> str:
    groups = [fpr[i : i + 4] for i in range(0, 40, 4)]
    return (" ".join(groups[:5]) + "  " + " ".join(groups[5:])).lower()


@interop
@pytest.mark.parametrize(
    "pin",
    [
        pytest.param(lambda f: f, id="upper"),
        pytest.param(str.lower, id="lower"),
        pytest.param(_spaced_lower, id="lower-spaced-like-gpg"),
        pytest.param(lambda f: " ".join(f[i : i + 4] for i in range(0, 40, 4)), id="spaced"),
    ],
)
def test_matching_pin_is_accepted(pin, tmp_path):
    """A pin equal to the primary fingerprint loads, whatever its case and spacing."""
    expected = kf.rsa3072()
    pinned = pin(expected.fingerprint)
    key = ProviderKey.from_armored(expected.armored, fingerprint=pinned)
    assert key.fingerprint == expected.fingerprint
    path = tmp_path / "k.asc"
    path.write_text(expected.armored)
    assert ProviderKey.from_file(path, fingerprint=pinned).fingerprint == expected.fingerprint


@interop
@pytest.mark.parametrize(
    "other",
    [
        pytest.param(lambda: kf.cv25519().fingerprint, id="another-key"),
        pytest.param(lambda: kf.rsa3072().expected_subkey, id="own-subkey"),
        pytest.param(lambda: kf.rsa3072().fingerprint[:-1] + "0", id="last-digit-off"),
    ],
)
def test_mismatching_pin_is_rejected(other, tmp_path):
    """A pin other than the primary fingerprint (even the key's own subkey) is a mismatch.

    The message names the key's actual fingerprint.
    """
    expected = kf.rsa3072()
    pin = other()
    if pin == expected.fingerprint:  # pragma: no cover - the last digit was already 0
        pin = pin[:-1] + "1"
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_armored(expected.armored, fingerprint=_spaced_lower(pin))
    assert info.value.reason == "fingerprint_mismatch"
    assert expected.fingerprint in _compact(str(info.value))
    path = tmp_path / "k.asc"
    path.write_text(expected.armored)
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_file(path, fingerprint=pin)
    assert info.value.reason == "fingerprint_mismatch"


# --------------------------------------------------------------------------
# keys other implementations make (issue 13)
# --------------------------------------------------------------------------


def _hash_preferences(armored: str) -> set[int]:
    """Every hash id listed in a preferred-hash subpacket (type 21) of the key's signatures."""
    found: set[int] = set()
    for tag, body in iter_packets(dearmor(armored.encode())[1]):
        if tag == Tag.SIGNATURE and body[0] == 4:
            hashed = body[6 : 6 + int.from_bytes(body[4:6], "big")]
            for _, kind, data in _subpackets(hashed):
                if kind == 21:
                    found |= set(data)
    return found


@interop
def test_openpgpjs_default_key_with_sha3_preferences_loads():
    """An OpenPGP.js 6 key made with default options (SHA3-256/512, ids 12 and 14, among its
    preferred hashes) loads, and messages go to its Curve25519 subkey as GnuPG's would.
    """
    public = tk.js("default")()
    assert {12, 14} <= _hash_preferences(public)
    key = ProviderKey.from_armored(public)
    assert key.algorithm == "Curve25519"
    assert key.subkey_fingerprint[-16:] == pf.gnupg_choice(public)


@interop
def test_unknown_algorithm_subkey_is_skipped():
    """A key with a Curve25519 subkey and a newer RFC 9580 X25519 (algorithm 25) subkey, made
    by OpenPGP.js, is usable: the unknown subkey is skipped, the Curve25519 one chosen.
    """
    public = tk.js("x25519-beside-cv25519")()
    key = ProviderKey.from_armored(public)
    assert key.algorithm == "Curve25519"
    assert key.subkey_fingerprint[-16:] == pf.gnupg_choice(public)


@interop
@pytest.mark.parametrize(
    "make",
    [tk.gpg_future_subkey, tk.js("future-subkey"), tk.CORPUS_BY_NAME["bc-future-subkey"].make],
    ids=["gnupg", "openpgpjs", "bouncycastle"],
)
def test_subkey_created_in_the_future_is_not_chosen(make):
    """A subkey whose creation time and binding lie in 2099 is not valid yet: the current
    subkey is chosen (as GnuPG, OpenPGP.js and RNP do), whoever made the key.
    """
    public = make()
    key = ProviderKey.from_armored(public)
    assert key.subkey_fingerprint[-16:] == pf.gnupg_choice(public)
    later = ProviderKey.from_armored(public)._choices  # the same choice every time
    assert later == key._choices


@interop
@pytest.mark.parametrize(
    ("make", "named"),
    [
        (tk.js("x25519-only"), "X25519"),
        (tk.js("x448-only"), "X448"),
        (tk.CORPUS_BY_NAME["rnp-brainpool"].make, "brainpoolP256r1"),
        (tk.CORPUS_BY_NAME["rnp-secp256k1"].make, "secp256k1"),
    ],
    ids=["openpgpjs-x25519", "openpgpjs-x448", "rnp-brainpool", "rnp-secp256k1"],
)
def test_well_formed_key_with_unsupported_encryption_algorithm(make, named):
    """A well-formed v4 key whose only encryption subkeys use algorithms the library does not
    support is 'unsupported_algorithm' naming the algorithm, not 'unreadable'.
    """
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_armored(make())
    assert info.value.reason == "unsupported_algorithm", str(info.value)
    assert named in str(info.value)
    assert "ask the provider" in str(info.value)


@interop
@pytest.mark.parametrize(
    "make",
    [tk.gpg_sha1_since_cutoff, tk.CORPUS_BY_NAME["bc-sha1-2024"].make],
    ids=["gnupg", "bouncycastle"],
)
def test_self_signatures_only_in_a_refused_hash_say_so(make):
    """A key made in 2024 whose self-signatures all use SHA-1 is refused as 'weak_hash' with
    the policy in the message, not as a key without a valid binding.
    """
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_armored(make())
    assert info.value.reason == "weak_hash", str(info.value)
    assert "SHA-1" in str(info.value)
    assert "2023-02-01" in str(info.value)


@interop
def test_sha1_self_signatures_before_the_cutoff_still_count():
    """SHA-1 self-signatures made before 2023-02-01 are accepted (Sequoia's policy too)."""
    public = tk.CORPUS_BY_NAME["bc-sha1-2020"].make()
    assert ProviderKey.from_armored(public).algorithm == "RSA-2048"


@interop
def test_primary_key_created_in_the_future_is_not_valid_yet():
    """A key created in 2099 is refused as 'not_yet_valid' (check the clock, or the key)."""
    with pytest.raises(ProviderKeyError) as info:
        ProviderKey.from_armored(tk.bc_future_primary())
    assert info.value.reason == "not_yet_valid", str(info.value)
    assert "2099" in str(info.value)


@interop
def test_key_a_few_minutes_ahead_is_within_the_clock_skew():
    """A key dated ten minutes ahead (a provider's clock running fast) loads: 30 minutes of
    clock skew are allowed, as Sequoia allows.
    """
    assert ProviderKey.from_armored(tk.bc_minutes_ahead()).algorithm == "RSA-2048"
