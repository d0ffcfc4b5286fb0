# Copyright (c) 2026 the invoicing_async developers. MIT License.
"""Build OpenPGP provider public keys (and their secrets) for tests.

This is a helper module, not a test module.  Keys are made with GnuPG (the
independent peer implementation), with Sequoia ``sq`` where that adds value,
and by hand (raw packets) where no installed tool can make them (v5/v6 keys,
corrupted binding signatures, reordered subkeys).

Every factory is cached for the whole test session (``functools.cache``):
key generation is slow.  Factories that need ``gpg``/``sq`` call
:func:`pytest.skip` when the binary is missing, so tests using them skip
cleanly.

Public API
----------
Key factories, each returning a :class:`GeneratedKey` (``.armored`` is the
armored public key, ``.secret`` the armored secret key when there is one,
``.expected_subkey`` the fingerprint a correct implementation must choose):

* valid: :func:`rsa3072`, :func:`rsa4096`, :func:`cv25519`, :func:`nistp256`,
  :func:`rsa_primary_encrypts`, :func:`sq_cv25519`, :func:`sq_rsa3072`,
  :func:`sq_storage_only`, :func:`sq_transport_only`
* subkey choice: :func:`newest_subkey_expired`, :func:`several_valid_subkeys`,
  :func:`newest_subkey_revoked`, :func:`newest_first_in_file`,
  :func:`bad_binding_newest`
* rejected: :func:`expired_primary`, :func:`revoked_primary`,
  :func:`all_subkeys_expired`, :func:`only_subkey_revoked`, :func:`sign_only`,
  :func:`sign_subkey_only`, :func:`bad_binding_only`, :func:`rsa1024`,
  :func:`rsa3072_weak_subkey`, :func:`dsa_elgamal`, :func:`dsa_rsa`,
  :func:`ed25519_elgamal`

Blob factories returning ``str``/``bytes`` (not keys, or not usable keys):
:func:`secret_key_block`, :func:`v6_ed25519`, :func:`v6_x25519`,
:func:`v5_eddsa`, :func:`garbage`, :func:`pgp_message`, :func:`empty`,
:func:`bad_armor`, :func:`truncated_key`, :func:`binary_public`.

Peers: :func:`gpg_decrypt`, :func:`gpg_decrypt_status`,
:func:`gpg_list_packets`, :func:`sq_decrypt`, :func:`require_gpg`,
:func:`require_sq`.
"""

from __future__ import annotations

import atexit
import base64
import dataclasses
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "GeneratedKey",
    "GpgDecryption",
    "SubkeyInfo",
    "all_subkeys_expired",
    "armor",
    "bad_armor",
    "bad_binding_newest",
    "bad_binding_only",
    "binary_public",
    "cv25519",
    "dsa_elgamal",
    "dsa_rsa",
    "ed25519_elgamal",
    "empty",
    "expired_primary",
    "export_binary",
    "garbage",
    "gpg_decrypt",
    "gpg_decrypt_status",
    "gpg_list_packets",
    "newest_first_in_file",
    "newest_subkey_expired",
    "newest_subkey_revoked",
    "nistp256",
    "only_subkey_revoked",
    "pgp_message",
    "require_gpg",
    "require_sq",
    "revoked_primary",
    "rsa1024",
    "rsa3072",
    "rsa3072_weak_subkey",
    "rsa4096",
    "rsa_primary_encrypts",
    "secret_key_block",
    "several_valid_subkeys",
    "sign_only",
    "sign_subkey_only",
    "sq_cv25519",
    "sq_decrypt",
    "sq_rsa3072",
    "sq_storage_only",
    "sq_transport_only",
    "truncated_key",
    "v5_eddsa",
    "v6_ed25519",
    "v6_x25519",
]

GPG = shutil.which("gpg")
SQ = shutil.which("sq")

_ENV = {**os.environ, "LC_ALL": "C", "LANG": "C"}
_ENV.pop("GNUPGHOME", None)

# Faked creation times (gpg --faked-system-time) giving a strict, well
# separated order of creation, all in the past.
T2019 = "20190101T000000"
T2020 = "20200101T000000"
T2021 = "20210101T000000"
T2022 = "20220101T000000"


# --------------------------------------------------------------------------
# data model
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SubkeyInfo:
    """One key (primary or subkey) as GnuPG lists it (``--with-colons``)."""

    fingerprint: str
    algorithm: int
    length: int
    created: int
    expires: int | None
    capabilities: str
    validity: str

    @property
    def keyid(self) -> str:
        """The 16-hex-digit long key id."""
        return self.fingerprint[-16:]


@dataclasses.dataclass(frozen=True)
class GeneratedKey:
    """A test key: armored public key plus what tests need to check it."""

    name: str
    armored: str
    """The public key (certificate), ASCII armor."""
    secret: str | None
    """The secret key, ASCII armor (None when not available)."""
    primary: SubkeyInfo
    subkeys: tuple[SubkeyInfo, ...]
    expected_subkey: str | None
    """Fingerprint of the encryption key a correct implementation chooses."""
    expected_algorithm: str | None
    """Expected ``ProviderKey.algorithm`` of the chosen encryption key."""
    homedir: Path | None
    """A GnuPG home holding the secret key (for decryption)."""

    @property
    def fingerprint(self) -> str:
        """The primary key fingerprint (40 upper-case hex digits)."""
        return self.primary.fingerprint

    @property
    def expires_at(self) -> int | None:
        """Primary key expiry, seconds since the epoch (None: never)."""
        return self.primary.expires


# --------------------------------------------------------------------------
# availability
# --------------------------------------------------------------------------


def require_gpg() -> str:
    """Return the gpg path, or skip the calling test if gpg is missing."""
    if GPG is None:
        pytest.skip("GnuPG (gpg) is not installed")
    return GPG


def require_sq() -> str:
    """Return the sq path, or skip the calling test if sq is missing."""
    if SQ is None:
        pytest.skip("Sequoia (sq) is not installed")
    return SQ


# --------------------------------------------------------------------------
# workspace: one temp root per session, one GnuPG home per key
# --------------------------------------------------------------------------

_HOMEDIRS: list[Path] = []


@functools.cache
def _root() -> Path:
    # GnuPG may put its agent socket in the home dir: keep the path short.
    root = Path(tempfile.mkdtemp(prefix="kf-"))
    atexit.register(_cleanup, root)
    return root


def _cleanup(root: Path) -> None:
    gpgconf = shutil.which("gpgconf")
    for home in _HOMEDIRS:
        if gpgconf:
            subprocess.run(
                [gpgconf, "--homedir", str(home), "--kill", "all"],
                env=_ENV,
                capture_output=True,
                check=False,
            )
    shutil.rmtree(root, ignore_errors=True)


def _new_home(name: str) -> Path:
    """Make a fresh GnuPG home (skipping the test first if gpg is missing)."""
    require_gpg()
    home = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_root()))  # mode 0700
    _HOMEDIRS.append(home)
    return home


_GENERATES = {"--quick-gen-key", "--quick-add-key", "--quick-generate-key"}


def _gpg(
    home: Path,
    *args: str,
    faked: str | None = None,
    stdin: bytes | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    cmd = [
        require_gpg(),
        "--homedir",
        str(home),
        "--batch",
        "--no-tty",
        "--pinentry-mode",
        "loopback",
        "--passphrase",
        "",
    ]
    if faked is not None:
        cmd += ["--faked-system-time", faked]
    cmd += list(args)
    proc = subprocess.run(cmd, input=stdin, capture_output=True, env=_ENV, check=False)
    tries = 1
    while check and proc.returncode != 0 and tries < 3 and _GENERATES & set(args):
        # Key generation through gpg-agent occasionally fails on a loaded machine
        # (ElGamal primes take long); a second try succeeds.
        tries += 1
        proc = subprocess.run(cmd, input=stdin, capture_output=True, env=_ENV, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"gpg {' '.join(args)} failed ({proc.returncode}):\n"
            + proc.stderr.decode(errors="replace")
        )
    return proc


def _sq(*args: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(
        [require_sq(), *args], input=stdin, capture_output=True, env=_ENV, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"sq {' '.join(args)} failed ({proc.returncode}):\n"
            + proc.stderr.decode(errors="replace")
        )
    return proc.stdout


def _listing(home: Path, fpr: str) -> tuple[SubkeyInfo, tuple[SubkeyInfo, ...]]:
    out = _gpg(home, "--with-colons", "--fixed-list-mode", "--list-keys", fpr)
    rows = [line.split(":") for line in out.stdout.decode().splitlines()]
    keys: list[SubkeyInfo] = []
    pending: list[str] | None = None
    for row in rows:
        if row[0] in ("pub", "sub"):
            pending = row
        elif row[0] == "fpr" and pending is not None:
            keys.append(
                SubkeyInfo(
                    fingerprint=row[9].upper(),
                    algorithm=int(pending[3]),
                    length=int(pending[2]),
                    created=int(pending[5]),
                    expires=int(pending[6]) if pending[6] else None,
                    capabilities=pending[11],
                    validity=pending[1],
                )
            )
            pending = None
    if not keys:
        raise RuntimeError(f"gpg lists no key {fpr}")
    return keys[0], tuple(keys[1:])


def _gen(home: Path, uid: str, algo: str, usage: str, expire: str, *, faked: str | None) -> str:
    """``--quick-gen-key``; return the new primary fingerprint.

    A faked time is frozen ("!") for the primary key: a faked clock otherwise runs on,
    and a slow generation would date the primary a second after a subkey added later
    at the same faked time, which gpg refuses ("Time conflict").
    """
    proc = _gpg(
        home,
        "--status-fd",
        "1",
        "--quick-gen-key",
        uid,
        algo,
        usage,
        expire,
        faked=None if faked is None else f"{faked}!",
    )
    for line in proc.stdout.decode().splitlines():
        if line.startswith("[GNUPG:] KEY_CREATED"):
            return line.split()[3].upper()
    raise RuntimeError("gpg did not report KEY_CREATED")


def _addkey(home: Path, fpr: str, algo: str, usage: str, expire: str, *, faked: str | None) -> None:
    _gpg(home, "--quick-add-key", fpr, algo, usage, expire, faked=faked)


def _revoke_subkey(home: Path, fpr: str, index: int) -> None:
    """Revoke the *index*-th subkey (1-based, gpg listing order)."""
    script = f"key {index}\nrevkey\ny\n0\n\ny\nsave\n".encode()
    _gpg(home, "--command-fd", "0", "--edit-key", fpr, stdin=script)


def _export(home: Path, fpr: str, *, armored: bool = True, secret: bool = False) -> bytes:
    what = "--export-secret-keys" if secret else "--export"
    args = ["--armor", what, fpr] if armored else [what, fpr]
    data = _gpg(home, *args).stdout
    if not data:
        raise RuntimeError(f"gpg exported nothing for {fpr}")
    return data


_ALGO_NAMES = {
    (1, 2048): "RSA-2048",
    (1, 3072): "RSA-3072",
    (1, 4096): "RSA-4096",
}


def _algorithm_name(info: SubkeyInfo, curve: str | None) -> str | None:
    if info.algorithm in (1, 2, 3):
        return _ALGO_NAMES.get((1, info.length), f"RSA-{info.length}")
    return curve


def _make(
    name: str,
    home: Path,
    fpr: str,
    *,
    expected_index: int | None,
    curve: str | None = None,
    armored: str | None = None,
) -> GeneratedKey:
    """Collect a gpg-made key.

    *expected_index*: 0 = the primary is the encryption key; n >= 1 = the n-th
    subkey (gpg listing order, 1-based); None = nothing may be chosen.
    """
    primary, subkeys = _listing(home, fpr)
    if expected_index is None:
        chosen: SubkeyInfo | None = None
    elif expected_index == 0:
        chosen = primary
    else:
        chosen = subkeys[expected_index - 1]
    return GeneratedKey(
        name=name,
        armored=armored if armored is not None else _export(home, fpr).decode(),
        secret=_export(home, fpr, secret=True).decode(),
        primary=primary,
        subkeys=subkeys,
        expected_subkey=chosen.fingerprint if chosen else None,
        expected_algorithm=_algorithm_name(chosen, curve) if chosen else None,
        homedir=home,
    )


def _uid(name: str) -> str:
    return f"Provider {name} <{name.replace('_', '-')}@provider.test>"


# --------------------------------------------------------------------------
# raw packets and armor
# --------------------------------------------------------------------------


def _crc24(data: bytes) -> int:
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def armor(data: bytes, kind: str = "PUBLIC KEY BLOCK") -> str:
    """ASCII-armor *data* (RFC 4880 §6, with CRC-24)."""
    body = base64.b64encode(data).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    crc = base64.b64encode(_crc24(data).to_bytes(3, "big")).decode()
    return "\n".join(
        [f"-----BEGIN PGP {kind}-----", "", *lines, f"={crc}", f"-----END PGP {kind}-----", ""]
    )


def _packets(data: bytes) -> list[tuple[int, bytes]]:
    """Split a binary OpenPGP stream into (tag, body) (definite lengths only)."""
    out: list[tuple[int, bytes]] = []
    pos = 0
    while pos < len(data):
        ctb = data[pos]
        if not ctb & 0x80:
            raise ValueError(f"bad packet header at {pos}")
        if ctb & 0x40:  # new format
            tag = ctb & 0x3F
            first = data[pos + 1]
            if first < 192:
                length, hlen = first, 2
            elif first < 224:
                length, hlen = ((first - 192) << 8) + data[pos + 2] + 192, 3
            elif first == 255:
                length, hlen = int.from_bytes(data[pos + 2 : pos + 6], "big"), 6
            else:
                raise ValueError("partial body lengths are not supported")
        else:  # old format
            tag = (ctb >> 2) & 0x0F
            ltype = ctb & 0x03
            if ltype == 3:
                raise ValueError("indeterminate length is not supported")
            size = 1 << ltype
            length = int.from_bytes(data[pos + 1 : pos + 1 + size], "big")
            hlen = 1 + size
        out.append((tag, data[pos + hlen : pos + hlen + length]))
        pos += hlen + length
    return out


def _packet(tag: int, body: bytes) -> bytes:
    """Encode one packet with a new-format header."""
    n = len(body)
    if n < 192:
        head = bytes([n])
    elif n < 8384:
        n -= 192
        head = bytes([(n >> 8) + 192, n & 0xFF])
    else:
        head = b"\xff" + n.to_bytes(4, "big")
    return bytes([0xC0 | tag]) + head + body


def _join(packets: Sequence[tuple[int, bytes]]) -> bytes:
    return b"".join(_packet(tag, body) for tag, body in packets)


def _corrupt_signature(body: bytes) -> bytes:
    """Flip a bit inside the first signature MPI of a v4 signature packet."""
    if body[0] != 4:
        raise ValueError("only v4 signatures are handled")
    pos = 4
    hashed = int.from_bytes(body[pos : pos + 2], "big")
    pos += 2 + hashed
    unhashed = int.from_bytes(body[pos : pos + 2], "big")
    pos += 2 + unhashed
    pos += 2  # left 16 bits of the hash: keep, so only the real check fails
    pos += 2  # MPI bit count
    target = pos + 5  # well inside the MPI (keeps its bit length)
    mutated = bytearray(body)
    mutated[target] ^= 0x10
    return bytes(mutated)


def _subkey_groups(
    packets: list[tuple[int, bytes]],
) -> tuple[list[tuple[int, bytes]], list[list[tuple[int, bytes]]]]:
    """Split a certificate into its head (primary, uids) and subkey groups."""
    head: list[tuple[int, bytes]] = []
    groups: list[list[tuple[int, bytes]]] = []
    for tag, body in packets:
        if tag == 14:
            groups.append([(tag, body)])
        elif groups:
            groups[-1].append((tag, body))
        else:
            head.append((tag, body))
    return head, groups


def _with_bad_binding(cert: bytes, subkey_index: int) -> str:
    """Armor *cert* with the binding signature of one subkey corrupted."""
    head, groups = _subkey_groups(_packets(cert))
    group = groups[subkey_index - 1]
    for i, (tag, body) in enumerate(group):
        if tag == 2 and body[1] == 0x18:
            group[i] = (tag, _corrupt_signature(body))
            break
    else:
        raise RuntimeError("no subkey binding signature found")
    return armor(_join(head + [p for g in groups for p in g]))


# --------------------------------------------------------------------------
# valid keys
# --------------------------------------------------------------------------


@functools.cache
def rsa3072() -> GeneratedKey:
    """RSA-3072 primary (cert,sign; expires 5 years from now) + RSA-3072 encryption subkey.

    Made at the real time (a relative expiry from a faked past time could
    already have passed).
    """
    home = _new_home("rsa3072")
    fpr = _gen(home, _uid("rsa3072"), "rsa3072", "cert,sign", "5y", faked=None)
    _addkey(home, fpr, "rsa3072", "encr", "never", faked=None)
    return _make("rsa3072", home, fpr, expected_index=1)


@functools.cache
def rsa4096() -> GeneratedKey:
    """RSA-4096 primary + RSA-4096 encryption subkey, no expiry."""
    home = _new_home("rsa4096")
    fpr = _gen(home, _uid("rsa4096"), "rsa4096", "cert,sign", "never", faked=T2020)
    _addkey(home, fpr, "rsa4096", "encr", "never", faked=T2020)
    return _make("rsa4096", home, fpr, expected_index=1)


@functools.cache
def cv25519() -> GeneratedKey:
    """Ed25519 primary + Curve25519 (ECDH) encryption subkey, no expiry."""
    home = _new_home("cv25519")
    fpr = _gen(home, _uid("cv25519"), "ed25519", "cert,sign", "never", faked=T2020)
    _addkey(home, fpr, "cv25519", "encr", "never", faked=T2020)
    return _make("cv25519", home, fpr, expected_index=1, curve="Curve25519")


@functools.cache
def nistp256() -> GeneratedKey:
    """NIST P-256 ECDSA primary + NIST P-256 ECDH encryption subkey."""
    home = _new_home("nistp256")
    fpr = _gen(home, _uid("nistp256"), "nistp256", "cert,sign", "never", faked=T2020)
    _addkey(home, fpr, "nistp256", "encr", "never", faked=T2020)
    return _make("nistp256", home, fpr, expected_index=1, curve="NIST P-256")


@functools.cache
def rsa_primary_encrypts() -> GeneratedKey:
    """Build a lone RSA-3072 primary with sign+encrypt flags and no subkey."""
    home = _new_home("rsa_primary_encrypts")
    fpr = _gen(home, _uid("rsa_primary_encrypts"), "rsa3072", "sign,encr", "never", faked=T2020)
    return _make("rsa_primary_encrypts", home, fpr, expected_index=0)


# --------------------------------------------------------------------------
# subkey choice
# --------------------------------------------------------------------------


@functools.cache
def newest_subkey_expired() -> GeneratedKey:
    """Subkeys: 2020 valid; 2022 expired in 2023 (newest) -> the 2020 one."""
    home = _new_home("newest_subkey_expired")
    fpr = _gen(home, _uid("newest_subkey_expired"), "ed25519", "cert,sign", "never", faked=T2019)
    _addkey(home, fpr, "cv25519", "encr", "never", faked=T2020)
    _addkey(home, fpr, "cv25519", "encr", "2023-01-01", faked=T2022)
    return _make("newest_subkey_expired", home, fpr, expected_index=1, curve="Curve25519")


@functools.cache
def several_valid_subkeys() -> GeneratedKey:
    """Three valid encryption subkeys (2020, 2021, 2022) -> the 2022 one."""
    home = _new_home("several_valid_subkeys")
    fpr = _gen(home, _uid("several_valid_subkeys"), "rsa3072", "cert,sign", "never", faked=T2019)
    _addkey(home, fpr, "rsa3072", "encr", "never", faked=T2020)
    _addkey(home, fpr, "rsa3072", "encr", "never", faked=T2021)
    _addkey(home, fpr, "rsa3072", "encr", "never", faked=T2022)
    return _make("several_valid_subkeys", home, fpr, expected_index=3)


@functools.cache
def newest_subkey_revoked() -> GeneratedKey:
    """Subkeys: 2020 valid; 2022 revoked (newest) -> the 2020 one."""
    home = _new_home("newest_subkey_revoked")
    fpr = _gen(home, _uid("newest_subkey_revoked"), "ed25519", "cert,sign", "never", faked=T2019)
    _addkey(home, fpr, "cv25519", "encr", "never", faked=T2020)
    _addkey(home, fpr, "cv25519", "encr", "never", faked=T2022)
    _revoke_subkey(home, fpr, 2)
    return _make("newest_subkey_revoked", home, fpr, expected_index=1, curve="Curve25519")


@functools.cache
def newest_first_in_file() -> GeneratedKey:
    """Two valid subkeys, the newer (2022) stored FIRST in the file -> the 2022 one.

    Catches implementations that take the last (or first) subkey in file order
    instead of comparing creation times.
    """
    home = _new_home("newest_first_in_file")
    fpr = _gen(home, _uid("newest_first_in_file"), "ed25519", "cert,sign", "never", faked=T2019)
    _addkey(home, fpr, "cv25519", "encr", "never", faked=T2020)
    _addkey(home, fpr, "cv25519", "encr", "never", faked=T2022)
    head, groups = _subkey_groups(_packets(_export(home, fpr, armored=False)))
    reordered = armor(_join(head + [p for g in reversed(groups) for p in g]))
    return _make(
        "newest_first_in_file",
        home,
        fpr,
        expected_index=2,
        curve="Curve25519",
        armored=reordered,
    )


@functools.cache
def bad_binding_newest() -> GeneratedKey:
    """Subkeys 2020 (good) and 2022 whose binding signature is corrupted -> 2020."""
    home = _new_home("bad_binding_newest")
    fpr = _gen(home, _uid("bad_binding_newest"), "rsa3072", "cert,sign", "never", faked=T2019)
    _addkey(home, fpr, "rsa3072", "encr", "never", faked=T2020)
    _addkey(home, fpr, "rsa3072", "encr", "never", faked=T2022)
    bad = _with_bad_binding(_export(home, fpr, armored=False), 2)
    return _make("bad_binding_newest", home, fpr, expected_index=1, armored=bad)


# --------------------------------------------------------------------------
# rejected keys
# --------------------------------------------------------------------------


@functools.cache
def expired_primary() -> GeneratedKey:
    """Primary made 2020, expired 2021-01-01; its subkey itself has no expiry."""
    home = _new_home("expired_primary")
    fpr = _gen(home, _uid("expired_primary"), "ed25519", "cert,sign", "2021-01-01", faked=T2020)
    _addkey(home, fpr, "cv25519", "encr", "never", faked=T2020)
    return _make("expired_primary", home, fpr, expected_index=None)


@functools.cache
def revoked_primary() -> GeneratedKey:
    """Build a cv25519 key whose primary is revoked (gpg's own revocation cert)."""
    home = _new_home("revoked_primary")
    fpr = _gen(home, _uid("revoked_primary"), "ed25519", "cert,sign", "never", faked=T2020)
    _addkey(home, fpr, "cv25519", "encr", "never", faked=T2020)
    rev = (home / "openpgp-revocs.d" / f"{fpr}.rev").read_text()
    # gpg prefixes the armor line with ':' to prevent accidental import.
    rev = rev.replace(
        ":-----BEGIN PGP PUBLIC KEY BLOCK-----", "-----BEGIN PGP PUBLIC KEY BLOCK-----"
    )
    _gpg(home, "--import", stdin=rev.encode())
    return _make("revoked_primary", home, fpr, expected_index=None)


@functools.cache
def all_subkeys_expired() -> GeneratedKey:
    """Build a valid primary with subkeys 2020->2021 and 2021->2022, both expired."""
    home = _new_home("all_subkeys_expired")
    fpr = _gen(home, _uid("all_subkeys_expired"), "ed25519", "cert,sign", "never", faked=T2019)
    _addkey(home, fpr, "cv25519", "encr", "2021-01-01", faked=T2020)
    _addkey(home, fpr, "cv25519", "encr", "2022-01-01", faked=T2021)
    return _make("all_subkeys_expired", home, fpr, expected_index=None)


@functools.cache
def only_subkey_revoked() -> GeneratedKey:
    """Build a valid primary whose only encryption subkey is revoked."""
    home = _new_home("only_subkey_revoked")
    fpr = _gen(home, _uid("only_subkey_revoked"), "ed25519", "cert,sign", "never", faked=T2019)
    _addkey(home, fpr, "cv25519", "encr", "never", faked=T2020)
    _revoke_subkey(home, fpr, 1)
    return _make("only_subkey_revoked", home, fpr, expected_index=None)


@functools.cache
def sign_only() -> GeneratedKey:
    """Build a lone Ed25519 cert+sign primary, no subkey at all."""
    home = _new_home("sign_only")
    fpr = _gen(home, _uid("sign_only"), "ed25519", "cert,sign", "never", faked=T2020)
    return _make("sign_only", home, fpr, expected_index=None)


@functools.cache
def sign_subkey_only() -> GeneratedKey:
    """Ed25519 primary with a signing subkey and an auth subkey, no encryption subkey."""
    home = _new_home("sign_subkey_only")
    fpr = _gen(home, _uid("sign_subkey_only"), "ed25519", "cert", "never", faked=T2020)
    _addkey(home, fpr, "ed25519", "sign", "never", faked=T2020)
    _addkey(home, fpr, "ed25519", "auth", "never", faked=T2020)
    return _make("sign_subkey_only", home, fpr, expected_index=None)


@functools.cache
def bad_binding_only() -> GeneratedKey:
    """RSA-3072 key whose only encryption subkey has a corrupted binding signature."""
    home = _new_home("bad_binding_only")
    fpr = _gen(home, _uid("bad_binding_only"), "rsa3072", "cert,sign", "never", faked=T2019)
    _addkey(home, fpr, "rsa3072", "encr", "never", faked=T2020)
    bad = _with_bad_binding(_export(home, fpr, armored=False), 1)
    return _make("bad_binding_only", home, fpr, expected_index=None, armored=bad)


@functools.cache
def rsa1024() -> GeneratedKey:
    """RSA-1024 primary + RSA-1024 encryption subkey."""
    home = _new_home("rsa1024")
    fpr = _gen(home, _uid("rsa1024"), "rsa1024", "cert,sign", "never", faked=T2020)
    _addkey(home, fpr, "rsa1024", "encr", "never", faked=T2020)
    return _make("rsa1024", home, fpr, expected_index=None)


@functools.cache
def rsa3072_weak_subkey() -> GeneratedKey:
    """RSA-3072 primary whose only encryption subkey is RSA-1024."""
    home = _new_home("rsa3072_weak_subkey")
    fpr = _gen(home, _uid("rsa3072_weak_subkey"), "rsa3072", "cert,sign", "never", faked=T2020)
    _addkey(home, fpr, "rsa1024", "encr", "never", faked=T2020)
    return _make("rsa3072_weak_subkey", home, fpr, expected_index=None)


@functools.cache
def dsa_elgamal() -> GeneratedKey:
    """DSA-2048 primary + ElGamal-2048 encryption subkey (classic gpg 1.x key)."""
    home = _new_home("dsa_elgamal")
    fpr = _gen(home, _uid("dsa_elgamal"), "dsa2048", "cert,sign", "never", faked=T2020)
    _addkey(home, fpr, "elg2048", "encr", "never", faked=T2020)
    return _make("dsa_elgamal", home, fpr, expected_index=None)


@functools.cache
def dsa_rsa() -> GeneratedKey:
    """DSA-2048 primary + RSA-3072 encryption subkey (the DSA primary is the problem)."""
    home = _new_home("dsa_rsa")
    fpr = _gen(home, _uid("dsa_rsa"), "dsa2048", "cert,sign", "never", faked=T2020)
    _addkey(home, fpr, "rsa3072", "encr", "never", faked=T2020)
    return _make("dsa_rsa", home, fpr, expected_index=None)


@functools.cache
def ed25519_elgamal() -> GeneratedKey:
    """Ed25519 primary + ElGamal-2048 encryption subkey (the subkey is the problem)."""
    home = _new_home("ed25519_elgamal")
    fpr = _gen(home, _uid("ed25519_elgamal"), "ed25519", "cert,sign", "never", faked=T2020)
    _addkey(home, fpr, "elg2048", "encr", "never", faked=T2020)
    return _make("ed25519_elgamal", home, fpr, expected_index=None)


# --------------------------------------------------------------------------
# Sequoia-made keys
# --------------------------------------------------------------------------


def _sq_key(name: str, *args: str, curve: str | None) -> GeneratedKey:
    require_sq()
    require_gpg()
    keyfile = Path(tempfile.mkdtemp(prefix=f"{name}-sq-", dir=_root())) / "key.asc"
    _sq(
        "key",
        "generate",
        "--userid",
        _uid(name),
        "--export",
        str(keyfile),
        "--rev-cert",
        str(keyfile.with_suffix(".rev")),
        *args,
    )
    secret = keyfile.read_text()
    cert = _sq("key", "extract-cert", str(keyfile)).decode()
    home = _new_home(name)
    _gpg(home, "--import", stdin=secret.encode())
    fpr = _sq("inspect", str(keyfile)).decode().split("Fingerprint:")[1].split()[0]
    primary, subkeys = _listing(home, fpr)
    encrypting = [s for s in subkeys if "e" in s.capabilities]
    if len(encrypting) != 1:
        raise RuntimeError(f"{name}: expected one encryption subkey, got {encrypting}")
    return GeneratedKey(
        name=name,
        armored=cert,
        secret=secret,
        primary=primary,
        subkeys=subkeys,
        expected_subkey=encrypting[0].fingerprint,
        expected_algorithm=_algorithm_name(encrypting[0], curve),
        homedir=home,
    )


@functools.cache
def sq_cv25519() -> GeneratedKey:
    """``sq key generate`` default: Ed25519 primary, sign/auth/encrypt subkeys, 3y expiry."""
    return _sq_key("sq_cv25519", "--cipher-suite", "cv25519", curve="Curve25519")


@functools.cache
def sq_rsa3072() -> GeneratedKey:
    """``sq key generate --cipher-suite rsa3k``."""
    return _sq_key("sq_rsa3072", "--cipher-suite", "rsa3k", curve=None)


@functools.cache
def sq_storage_only() -> GeneratedKey:
    """Build an sq cv25519 key whose encryption subkey has only EncryptStorage."""
    return _sq_key(
        "sq_storage_only",
        "--can-encrypt",
        "storage",
        "--cannot-sign",
        "--cannot-authenticate",
        curve="Curve25519",
    )


@functools.cache
def sq_transport_only() -> GeneratedKey:
    """Build an sq cv25519 key whose encryption subkey has only EncryptCommunications."""
    return _sq_key(
        "sq_transport_only",
        "--can-encrypt",
        "transport",
        "--cannot-sign",
        "--cannot-authenticate",
        curve="Curve25519",
    )


# --------------------------------------------------------------------------
# blobs that are not (usable) public keys
# --------------------------------------------------------------------------


@functools.cache
def secret_key_block() -> str:
    """Return the secret key export (``--export-secret-keys --armor``) of :func:`cv25519`."""
    secret = cv25519().secret
    assert secret is not None
    return secret


def export_binary(key: GeneratedKey, *, secret: bool = False) -> bytes:
    """Return *key* exported by gpg without armor (public, or secret if asked)."""
    if key.homedir is None:
        raise ValueError(f"{key.name} has no GnuPG home")
    return _export(key.homedir, key.fingerprint, armored=False, secret=secret)


@functools.cache
def binary_public() -> bytes:
    """:func:`cv25519`'s public key, unarmored (binary)."""
    key = cv25519()
    assert key.homedir is not None
    return _export(key.homedir, key.fingerprint, armored=False)


_ED25519_PUB = bytes(range(0x20, 0x40))  # arbitrary 32-byte point encoding


def _v6_key_body(algo: int, material: bytes, created: int = 1_700_000_000) -> bytes:
    """RFC 9580 §5.5.2.3 v6 public key: ver, created, algo, 4-octet len, material."""
    return (
        bytes([6])
        + created.to_bytes(4, "big")
        + bytes([algo])
        + len(material).to_bytes(4, "big")
        + material
    )


@functools.cache
def v6_ed25519() -> str:
    """Build a minimal RFC 9580 v6 Ed25519 (algo 27) public-key packet, armored."""
    return armor(_packet(6, _v6_key_body(27, _ED25519_PUB)))


@functools.cache
def v6_x25519() -> str:
    """Build a v6 Ed25519 primary, a user ID and a v6 X25519 (algo 25) public subkey."""
    uid = _packet(13, b"Provider v6 <v6@provider.test>")
    sub = _packet(14, _v6_key_body(25, bytes(range(0x40, 0x60))))
    return armor(_packet(6, _v6_key_body(27, _ED25519_PUB)) + uid + sub)


@functools.cache
def v5_eddsa() -> str:
    """Build a LibrePGP v5 EdDSA (algo 22, OID Ed25519) public-key packet, armored."""
    oid = bytes.fromhex("2b06010401da470f01")
    point = b"\x40" + hashlib.sha256(b"v5").digest()
    material = bytes([len(oid)]) + oid + (263).to_bytes(2, "big") + point
    body = (
        bytes([5])
        + (1_700_000_000).to_bytes(4, "big")
        + bytes([22])
        + len(material).to_bytes(4, "big")
        + material
    )
    return armor(_packet(6, body))


def garbage() -> str:
    """Plain text that is not OpenPGP at all."""
    return "This is not an OpenPGP key.\nJust some text, € and Αθήνα.\n"


def empty() -> str:
    """Return the empty string."""
    return ""


def bad_armor() -> str:
    """Return a PUBLIC KEY BLOCK armor whose body is not base64 / not OpenPGP."""
    return (
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n"
        "this is !!! not base64 *** at all\n"
        "-----END PGP PUBLIC KEY BLOCK-----\n"
    )


@functools.cache
def truncated_key() -> str:
    """:func:`cv25519`'s public key cut inside the primary key packet, re-armored."""
    return armor(binary_public()[:20])


@functools.cache
def pgp_message() -> str:
    """Return an armored PGP MESSAGE (encrypted to :func:`cv25519`), not a key."""
    key = cv25519()
    assert key.homedir is not None
    proc = _gpg(
        key.homedir,
        "--trust-model",
        "always",
        "--armor",
        "--recipient",
        key.fingerprint,
        "--encrypt",
        stdin=b"not a key",
    )
    return proc.stdout.decode()


# --------------------------------------------------------------------------
# peers: decryption with gpg and sq
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GpgDecryption:
    """Result of ``gpg --decrypt --status-fd``."""

    plaintext: bytes
    status: tuple[str, ...]
    """Status lines without the ``[GNUPG:] `` prefix."""
    stderr: str

    def lines(self, keyword: str) -> list[list[str]]:
        """Return the arguments of every status line with *keyword*."""
        return [s.split()[1:] for s in self.status if s.split()[:1] == [keyword]]


_SECRET_HOMES: dict[str, Path] = {}


def _home_for(source: GeneratedKey | str | os.PathLike[str]) -> Path:
    if isinstance(source, GeneratedKey):
        if source.homedir is None:
            raise ValueError(f"{source.name} has no GnuPG home")
        return source.homedir
    if isinstance(source, str) and "-----BEGIN PGP PRIVATE KEY BLOCK-----" in source:
        if source not in _SECRET_HOMES:
            home = _new_home(f"import-{len(_SECRET_HOMES)}")
            _gpg(home, "--import", stdin=source.encode())
            _SECRET_HOMES[source] = home
        return _SECRET_HOMES[source]
    return Path(source)


def gpg_decrypt_status(
    secret_armored_or_homedir: GeneratedKey | str | os.PathLike[str], message: bytes
) -> GpgDecryption:
    """Decrypt *message* with gpg; return plaintext and status lines.

    The key may be a :class:`GeneratedKey`, an armored secret key (imported
    into a fresh home once) or the path of a GnuPG home.  Raises
    ``RuntimeError`` if gpg fails.
    """
    home = _home_for(secret_armored_or_homedir)
    with tempfile.TemporaryDirectory(dir=_root()) as tmp:
        status_path = Path(tmp) / "status"
        proc = _gpg(
            home, "--status-file", str(status_path), "--decrypt", stdin=message, check=False
        )
        status_raw = status_path.read_bytes() if status_path.exists() else b""
    stderr = proc.stderr.decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"gpg --decrypt failed ({proc.returncode}):\n{stderr}")
    status = tuple(
        line.removeprefix("[GNUPG:] ")
        for line in status_raw.decode(errors="replace").splitlines()
        if line.startswith("[GNUPG:] ")
    )
    return GpgDecryption(plaintext=proc.stdout, status=status, stderr=stderr)


def gpg_decrypt(
    secret_armored_or_homedir: GeneratedKey | str | os.PathLike[str], message: bytes
) -> bytes:
    """Decrypt *message* with gpg and return the plaintext bytes."""
    return gpg_decrypt_status(secret_armored_or_homedir, message).plaintext


def gpg_list_packets(
    secret_armored_or_homedir: GeneratedKey | str | os.PathLike[str], message: bytes
) -> str:
    """``gpg --list-packets`` of *message* (decrypting it, so inner packets show)."""
    home = _home_for(secret_armored_or_homedir)
    proc = _gpg(home, "--list-packets", stdin=message)
    return proc.stdout.decode(errors="replace")


def sq_decrypt(secret_armored: str, message: bytes) -> bytes:
    """Decrypt *message* with ``sq decrypt --recipient-key``."""
    sq = require_sq()
    with tempfile.TemporaryDirectory(dir=_root()) as tmp:
        keyfile = Path(tmp) / "key.asc"
        keyfile.write_text(secret_armored)
        proc = subprocess.run(
            [sq, "decrypt", "--recipient-key", str(keyfile)],
            input=message,
            capture_output=True,
            env=_ENV,
            check=False,
        )
    if proc.returncode != 0:
        raise RuntimeError(
            f"sq decrypt failed ({proc.returncode}):\n" + proc.stderr.decode(errors="replace")
        )
    return proc.stdout
