# Copyright (c) 2026 the invoicing_async developers. MIT License.
"""Independent OpenPGP implementations as test peers: keys they make, messages they decrypt.

A helper module, not a test module. Peers: GnuPG (``gpg``), Sequoia (``sq`` and the
``pysequoia`` bindings), OpenPGP.js (npm ``openpgp`` run with the system's ``node``), RNP
(``rnpkeys``/``rnp``) and Bouncy Castle (``libbcpg-java``, a small Java program compiled
with ``javac`` into a temporary folder at first use). Each is driven in batches, once per
test session (key generation is slow), from a temporary folder removed at exit.

Every peer answers :meth:`Peer.generate` (standard key kinds: ``rsa2048``, ``rsa3072``,
``rsa4096``, ``cv25519``, ``p256``, ``p384``, ``p521`` — the ones it can make) and
:meth:`Peer.decrypt` (a batch of messages for its own secret keys). A missing peer skips
the calling test with the reason (``.ci/run`` installs them all, so CI skips nothing).

:func:`gnupg_choice` is the oracle for subkey choice: the key id GnuPG encrypts to.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import ClassVar

import keyfactory as kf
import pytest

from invoicing_async._doc.pgp import Tag, dearmor, iter_packets

KINDS = ("rsa2048", "rsa3072", "rsa4096", "cv25519", "p256", "p384", "p521")
#: ``ProviderKey.algorithm`` expected for each kind.
ALGORITHMS = {
    "rsa2048": "RSA-2048",
    "rsa3072": "RSA-3072",
    "rsa4096": "RSA-4096",
    "cv25519": "Curve25519",
    "p256": "NIST P-256",
    "p384": "NIST P-384",
    "p521": "NIST P-521",
}
HERE = Path(__file__).parent / "peers"
NPM_PREFIX = Path(
    os.environ.get("OPENPGPJS_PREFIX", Path.home() / ".cache" / "invoicing-async-npm")
)
BC_JARS = [Path("/usr/share/java/bcprov.jar"), Path("/usr/share/java/bcpg.jar")]
_ENV = {**os.environ, "LC_ALL": "C", "LANG": "C", "OPENPGP_PREFIX": str(NPM_PREFIX)}


@dataclasses.dataclass(frozen=True)
class PeerKey:
    """A key a peer made: public and secret armor."""

    peer: str
    kind: str
    public: str
    secret: str


@functools.cache
def _root() -> Path:
    return Path(tempfile.mkdtemp(prefix="peers-", dir=kf._root()))


def _dir(name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_root()))


def _run(command: list[str], *, stdin: bytes | None = None, timeout: float = 300) -> bytes:
    proc = subprocess.run(
        command, input=stdin, capture_output=True, env=_ENV, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[:3])} failed ({proc.returncode}):\n"
            + proc.stderr.decode(errors="replace")[-2000:]
        )
    return proc.stdout


class Peer:
    """An OpenPGP implementation driven by the tests."""

    name = ""
    kinds: tuple[str, ...] = KINDS

    def missing(self) -> str | None:
        """Why the peer cannot run here, or None."""
        raise NotImplementedError

    def require(self) -> None:
        """Skip the calling test if the peer is missing."""
        reason = self.missing()
        if reason is not None:
            pytest.skip(reason)

    def generate(self, kind: str) -> PeerKey:
        """A key of a standard ``kind``, made once per session."""
        self.require()
        return self._generated()[kind]

    @functools.cache  # noqa: B019  (peers are module-level singletons)
    def _generated(self) -> dict[str, PeerKey]:
        return self._generate(self.kinds)

    def _generate(self, kinds: tuple[str, ...]) -> dict[str, PeerKey]:
        raise NotImplementedError

    def decrypt(self, jobs: list[tuple[str, bytes]]) -> list[bytes]:
        """The plaintext of each ``(secret key armor, message)``."""
        self.require()
        return self._decrypt(jobs)

    def _decrypt(self, jobs: list[tuple[str, bytes]]) -> list[bytes]:
        raise NotImplementedError


# --- GnuPG and sq ---------------------------------------------------------------------------


class GnuPG(Peer):
    name = "gnupg"
    _ALGOS: ClassVar[dict[str, tuple[str, ...]]] = {
        "cv25519": ("ed25519", "cv25519"),
        "p256": ("nistp256",) * 2,
    }
    _ALGOS |= {"p384": ("nistp384",) * 2, "p521": ("nistp521",) * 2}

    def missing(self) -> str | None:
        return None if kf.GPG else "GnuPG (gpg) is not installed"

    def _generate(self, kinds: tuple[str, ...]) -> dict[str, PeerKey]:
        keys = {}
        for kind in kinds:
            primary, sub = self._ALGOS.get(kind, (kind, kind))
            home = kf._new_home(f"gpg-{kind}")
            fpr = kf._gen(home, kf._uid(f"gpg_{kind}"), primary, "cert,sign", "never", faked=None)
            kf._addkey(home, fpr, sub, "encr", "never", faked=None)
            public = kf._export(home, fpr).decode()
            secret = kf._export(home, fpr, secret=True).decode()
            keys[kind] = PeerKey(self.name, kind, public, secret)
        return keys

    def _decrypt(self, jobs: list[tuple[str, bytes]]) -> list[bytes]:
        return [kf.gpg_decrypt(secret, message) for secret, message in jobs]


class Sequoia(Peer):
    name = "sq"
    kinds = ("rsa3072", "rsa4096", "cv25519")  # the cipher suites sq (0.27) offers
    _SUITES: ClassVar[dict[str, str]] = {
        "rsa3072": "rsa3k",
        "rsa4096": "rsa4k",
        "cv25519": "cv25519",
    }

    def missing(self) -> str | None:
        return None if kf.SQ else "Sequoia (sq) is not installed"

    def _generate(self, kinds: tuple[str, ...]) -> dict[str, PeerKey]:
        keys = {}
        for kind in kinds:
            path = _dir(f"sq-{kind}") / "key.asc"
            kf._sq(
                "key",
                "generate",
                "--userid",
                kf._uid(f"sq_{kind}"),
                "--export",
                str(path),
                "--cipher-suite",
                self._SUITES[kind],
            )
            secret = path.read_text()
            public = kf._sq("key", "extract-cert", str(path)).decode()
            keys[kind] = PeerKey(self.name, kind, public, secret)
        return keys

    def _decrypt(self, jobs: list[tuple[str, bytes]]) -> list[bytes]:
        return [kf.sq_decrypt(secret, message) for secret, message in jobs]


class PySequoia(Peer):
    name = "pysequoia"
    _SUITES: ClassVar[dict[str, str]] = {
        "rsa2048": "RSA2k",
        "rsa3072": "RSA3k",
        "rsa4096": "RSA4k",
        "cv25519": "Cv25519",
    }
    _SUITES |= {"p256": "P256", "p384": "P384", "p521": "P521"}

    def missing(self) -> str | None:
        try:
            import pysequoia  # noqa: F401, PLC0415
        except ImportError:
            return "pysequoia is not installed (pip install -e '.[test]')"
        return None

    def _generate(self, kinds: tuple[str, ...]) -> dict[str, PeerKey]:
        import pysequoia  # noqa: PLC0415

        keys = {}
        for kind in kinds:
            suite = getattr(pysequoia.CipherSuite, self._SUITES[kind])
            tsk = pysequoia.Tsk.generate(user_id=kf._uid(f"pysq_{kind}"), cipher_suite=suite)
            public = str(tsk.extract_certificate())
            keys[kind] = PeerKey(self.name, kind, public, str(tsk))
        return keys

    def _decrypt(self, jobs: list[tuple[str, bytes]]) -> list[bytes]:
        import pysequoia  # noqa: PLC0415

        out = []
        for secret, message in jobs:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                decryptor = pysequoia.Tsk.from_bytes(secret.encode()).decryptor()
            out.append(bytes(pysequoia.decrypt(message, decryptor=decryptor).bytes))
        return out


# --- OpenPGP.js -----------------------------------------------------------------------------


class OpenPGPjs(Peer):
    name = "openpgpjs"

    def missing(self) -> str | None:
        if shutil.which("node") is None:
            return "node is not installed (OpenPGP.js peer)"
        if not (NPM_PREFIX / "node_modules" / "openpgp").is_dir():
            return f"OpenPGP.js is not installed (npm install --prefix {NPM_PREFIX} openpgp@6)"
        return None

    def run(self, jobs: list[dict[str, object]]) -> list[dict[str, str]]:
        """Run ``jobs`` (see ``tests/peers/openpgp_peer.mjs``) in one node process."""
        self.require()
        node = shutil.which("node")
        assert node is not None
        out = _run(
            [node, str(HERE / "openpgp_peer.mjs")],
            stdin=json.dumps(jobs).encode(),
        )
        return json.loads(out)

    def _generate(self, kinds: tuple[str, ...]) -> dict[str, PeerKey]:
        results = self.run([{"op": "generate", "kind": kind} for kind in kinds])
        keys = {}
        for kind, result in zip(kinds, results, strict=True):
            if not result["ok"]:
                raise RuntimeError(f"OpenPGP.js could not make {kind}: {result['error']}")
            keys[kind] = PeerKey(self.name, kind, result["public"], result["secret"])
        return keys

    def _decrypt(self, jobs: list[tuple[str, bytes]]) -> list[bytes]:
        results = self.run([{"op": "decrypt", "secret": s, "message": m.decode()} for s, m in jobs])
        out = []
        for result in results:
            if not result["ok"]:
                raise RuntimeError(f"OpenPGP.js could not decrypt: {result['error']}")
            out.append(base64.b64decode(result["plaintext"]))
        return out


# --- RNP ------------------------------------------------------------------------------------


class RNP(Peer):
    name = "rnp"
    _EXPERT: ClassVar[dict[str, str]] = {
        "cv25519": "22\n",
        "p256": "19\n1\n",
        "p384": "19\n2\n",
        "p521": "19\n3\n",
    }

    def missing(self) -> str | None:
        if shutil.which("rnpkeys") is None or shutil.which("rnp") is None:
            return "RNP (rnp, rnpkeys) is not installed"
        return None

    def expert(self, name: str, answers: str) -> PeerKey:
        """A key made with ``rnpkeys --generate-key --expert``, answering its questions."""
        self.require()
        home = _dir(f"rnp-{name}")
        uid = kf._uid(f"rnp_{name}")
        common = ["--homedir", str(home), "--password", "", "--notty"]
        _run(
            ["rnpkeys", *common, "--generate-key", "--expert", "--userid", uid],
            stdin=answers.encode(),
        )
        public = _run(["rnpkeys", *common, "--export-key", uid]).decode()
        secret = _run(["rnpkeys", *common, "--export-key", "--secret", uid]).decode()
        return PeerKey(self.name, name, public, secret)

    def _generate(self, kinds: tuple[str, ...]) -> dict[str, PeerKey]:
        return {k: self.expert(k, self._EXPERT.get(k, f"1\n{k[3:]}\n")) for k in kinds}

    def _decrypt(self, jobs: list[tuple[str, bytes]]) -> list[bytes]:
        out = []
        for secret, message in jobs:
            folder = _dir("rnp-decrypt")
            (folder / "key.asc").write_text(secret)
            (folder / "message.asc").write_bytes(message)
            _run(
                [
                    "rnp",
                    "--keyfile",
                    str(folder / "key.asc"),
                    "--password",
                    "",
                    "--notty",
                    "--decrypt",
                    str(folder / "message.asc"),
                    "--output",
                    str(folder / "plain"),
                ]
            )
            out.append((folder / "plain").read_bytes())
        return out


# --- Bouncy Castle --------------------------------------------------------------------------


class BouncyCastle(Peer):
    name = "bouncycastle"

    def missing(self) -> str | None:
        if shutil.which("javac") is None or shutil.which("java") is None:
            return "a JDK (java, javac) is not installed (Bouncy Castle peer)"
        if not all(jar.exists() for jar in BC_JARS):
            return "Bouncy Castle (libbcpg-java, libbcprov-java) is not installed"
        return None

    @functools.cached_property
    def classes(self) -> Path:
        """The peer program, compiled once per session."""
        folder = _dir("bc-classes")
        _run(["javac", "-d", str(folder), "-cp", self._classpath(), str(HERE / "BcPeer.java")])
        return folder

    def _classpath(self, *extra: Path) -> str:
        return os.pathsep.join(str(p) for p in (*BC_JARS, *extra))

    def run(self, jobs: list[list[str]]) -> None:
        """Run the tab-separated ``jobs`` (see ``tests/peers/BcPeer.java``) in one JVM."""
        self.require()
        jobfile = _dir("bc-jobs") / "jobs"
        jobfile.write_text("".join("\t".join(job) + "\n" for job in jobs))
        _run(["java", "-cp", self._classpath(self.classes), "BcPeer", str(jobfile)])

    def make(
        self,
        name: str,
        kind: str,
        subkeys: list[tuple[str, int, int]],
        *,
        created: int | None = None,
        hash_id: int = 8,
    ) -> PeerKey:
        """One key: ``subkeys`` are ``(kind, created, lifetime)``; times in epoch seconds."""
        out = _dir(f"bc-{name}") / "key"
        when = created if created is not None else int(time.time()) - 86400
        subs = [f"{k}@{c}@{life}" for k, c, life in subkeys]
        self.run([["generate", str(out), kind, str(when), str(hash_id), *subs]])
        return PeerKey(
            self.name,
            name,
            out.with_suffix(".pub").read_text(),
            out.with_suffix(".sec").read_text(),
        )

    def _generate(self, kinds: tuple[str, ...]) -> dict[str, PeerKey]:
        when = int(time.time()) - 86400
        folder = _dir("bc-keys")
        self.run([["generate", str(folder / k), k, str(when), "8", f"{k}@{when}@0"] for k in kinds])
        return {
            k: PeerKey(
                self.name, k, (folder / f"{k}.pub").read_text(), (folder / f"{k}.sec").read_text()
            )
            for k in kinds
        }

    def _decrypt(self, jobs: list[tuple[str, bytes]]) -> list[bytes]:
        folder = _dir("bc-decrypt")
        lines = []
        for i, (secret, message) in enumerate(jobs):
            (folder / f"{i}.sec").write_text(secret)
            (folder / f"{i}.msg").write_bytes(message)
            lines.append(
                [
                    "decrypt",
                    str(folder / f"{i}.sec"),
                    str(folder / f"{i}.msg"),
                    str(folder / f"{i}.out"),
                ]
            )
        self.run(lines)
        return [(folder / f"{i}.out").read_bytes() for i in range(len(jobs))]


PEERS: dict[str, Peer] = {
    peer.name: peer
    for peer in (GnuPG(), Sequoia(), PySequoia(), OpenPGPjs(), RNP(), BouncyCastle())
}


# --- GnuPG and Sequoia as oracles of subkey choice -------------------------------------------


def _pkesk_key_id(body: bytes) -> str:
    """The key id a PKESK v3 names, or (v6, as newer Sequoia writes) its v4 fingerprint's."""
    if body[0] == 6:  # version, length, key version, fingerprint
        return body[3 : 2 + body[1]][-8:].hex().upper()
    return body[1:9].hex().upper()


def _pkesk_key_ids(message: bytes) -> frozenset[str]:
    return frozenset(_pkesk_key_id(body) for tag, body in iter_packets(message) if tag == Tag.PKESK)


def gnupg_choice(public: str, *, at: int | None = None) -> str | None:
    """The key id (16 upper-case hex digits) GnuPG encrypts to for ``public``, or None
    when GnuPG refuses to encrypt to it (or cannot import it). ``at``: GnuPG's clock
    (``--faked-system-time``, seconds since the epoch) instead of now.
    """
    gpg = kf.require_gpg()
    home = kf._new_home("oracle")
    _, binary = dearmor(public.encode())
    clock = [] if at is None else ["--faked-system-time", f"{at}!"]
    imported = subprocess.run(
        [
            gpg,
            "--homedir",
            str(home),
            "--batch",
            *clock,
            "--import",
            "--import-options",
            "import-show",
            "--with-colons",
        ],
        input=binary,
        capture_output=True,
        env=_ENV,
        check=False,
    )
    fingerprints = [
        line.split(":")[9] for line in imported.stdout.decode().splitlines() if line[:4] == "fpr:"
    ]
    if not fingerprints:
        return None
    proc = subprocess.run(
        [
            gpg,
            "--homedir",
            str(home),
            "--batch",
            *clock,
            "--trust-model",
            "always",
            "--encrypt",
            "--recipient",
            fingerprints[0],
        ],
        input=b"oracle",
        capture_output=True,
        env=_ENV,
        check=False,
    )
    if proc.returncode != 0:
        return None
    (chosen,) = _pkesk_key_ids(proc.stdout)  # GnuPG encrypts to one key
    return chosen


def sq_choice(public: bytes, *, at: int | None = None) -> frozenset[str] | None:
    """The key ids ``sq encrypt`` encrypts to for ``public`` (every valid encryption
    subkey: Sequoia encrypts to all of them), or None when it refuses. ``at``: the time
    it judges the key at (``--time``) instead of now.
    """
    sq = kf.require_sq()
    folder = _dir("sq-oracle")
    (folder / "cert.pgp").write_bytes(public)
    clock = [] if at is None else ["--time", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))]
    proc = subprocess.run(
        [sq, "encrypt", "--binary", *clock, "--recipient-cert", str(folder / "cert.pgp")],
        input=b"oracle",
        capture_output=True,
        env=_ENV,
        check=False,
    )
    return _pkesk_key_ids(proc.stdout) if proc.returncode == 0 else None


def pysequoia_choice(public: bytes) -> frozenset[str] | None:
    """The key ids pysequoia encrypts to for ``public`` now, or None when it refuses."""
    PEERS["pysequoia"].require()
    import pysequoia  # noqa: PLC0415

    try:
        cert = pysequoia.Cert.from_bytes(public)
        message = pysequoia.encrypt(b"oracle", recipients=[cert], armor=False)
    except Exception:  # any refusal is a verdict
        return None
    return _pkesk_key_ids(bytes(message))
