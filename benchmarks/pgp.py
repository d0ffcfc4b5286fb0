"""1. The PGP stage: microseconds per invoice, library against the raw floor and peers.

For 4 KB and 8 KB invoices (``sample_invoice`` with 10 and 23 lines) and RSA-3072 and
Curve25519 provider keys, single calls are timed with ``perf_counter_ns`` in interleaved
rounds (garbage collector off, warm-up first):

* ``library``: ``ProviderKey.encrypt(body)`` (armored), and ``encrypt_binary``;
* ``floor``: the same message built directly with ``cryptography`` (``_floor.py``),
  armored with the library's own ``armor`` (so the same output format), and unarmored;
* ``PGPy``: ``key.encrypt(PGPMessage.new(body, format="b", compression=Uncompressed))``
  then ``str(message)``: the naive use of the PGP library the client is built on;
* ``gpg``: python-gnupg driving the ``gpg`` binary (a process per call), when both exist.

Every method's output is decrypted once per configuration with the sandbox ``Decryptor``
and compared byte for byte. Target: library (armored) within 2x of the armored floor.
"""

from __future__ import annotations

import shutil
import tempfile

from invoicing_async._doc.pgp import armor, crc24

from ._common import (
    Chart,
    Section,
    Settings,
    fmt,
    interleaved_timings,
    invoice_json,
    keypair,
    median,
    percentile,
    provider_key,
    quiet_warnings,
)
from ._floor import FloorRecipient, encrypt_armored, encrypt_binary

NAME = "pgp"
CONFIGS = [("rsa3072", "RSA-3072"), ("cv25519", "Curve25519")]
SIZES = [(10, "4 KB"), (23, "8 KB")]


def _pgpy_encryptor(public_armored: str):
    with quiet_warnings():
        import pgpy  # noqa: PLC0415
        from pgpy.constants import CompressionAlgorithm, SymmetricKeyAlgorithm  # noqa: PLC0415

        key, _ = pgpy.PGPKey.from_blob(public_armored)

    def encrypt(body: bytes) -> bytes:
        with quiet_warnings():
            message = pgpy.PGPMessage.new(
                body, format="b", compression=CompressionAlgorithm.Uncompressed
            )
            encrypted = key.encrypt(message, cipher=SymmetricKeyAlgorithm.AES256)
            return str(encrypted).encode("ascii")

    return encrypt


class _Gpg:
    """python-gnupg with a throw-away home directory, or why it cannot run."""

    def __init__(self) -> None:
        self.why_not = ""
        self._home: tempfile.TemporaryDirectory[str] | None = None
        try:
            import gnupg  # noqa: PLC0415
        except ImportError:
            self.why_not = "python-gnupg is not installed (pip install python-gnupg)"
            return
        if shutil.which("gpg") is None:
            self.why_not = "the gpg binary is not installed"
            return
        self._home = tempfile.TemporaryDirectory(prefix="bench-gpg-")
        self.gpg = gnupg.GPG(gnupghome=self._home.name)
        self.version = ".".join(map(str, self.gpg.version or ()))

    def encryptor(self, public_armored: str):
        imported = self.gpg.import_keys(public_armored)
        fingerprint = imported.fingerprints[0]
        gpg = self.gpg

        def encrypt(body: bytes) -> bytes:
            result = gpg.encrypt(
                body,
                fingerprint,
                armor=True,
                always_trust=True,
                extra_args=["--cipher-algo", "AES256", "--compress-algo", "none"],
            )
            if not result.ok:
                raise RuntimeError(f"gpg failed: {result.status}")
            return result.data

        return encrypt

    def close(self) -> None:
        if self._home is not None:
            self._home.cleanup()


def run(settings: Settings) -> Section:
    from invoicing_sandbox._pgp import Decryptor  # noqa: PLC0415

    section = Section(
        NAME,
        "PGP stage: µs per invoice (median / p90 of single calls)",
        [
            "Key",
            "Size",
            "Method",
            "median µs",
            "p90 µs",
            "runs",
            "÷ floor (same format)",
            "÷ no-armor floor",
            "Target (lib ÷ floor < 2x)",
        ],
    )
    fast_runs = settings.n(3000, 300)
    slow_runs = settings.n(300, 20)
    gpg_runs = settings.n(60, 5)
    rounds = settings.n(10, 2)
    gpg = _Gpg()
    chart_labels: list[str] = []
    chart: dict[str, list[float]] = {}
    try:
        for algorithm, key_name in CONFIGS:
            pair = keypair(algorithm)
            key = provider_key(algorithm)
            recipient = FloorRecipient.from_armored(pair.public_armored)
            decryptor = Decryptor(pair.private_armored)
            pgpy_encrypt = _pgpy_encryptor(pair.public_armored)
            gpg_encrypt = gpg.encryptor(pair.public_armored) if not gpg.why_not else None
            for lines, size_name in SIZES:
                body = invoice_json(1, lines)
                methods = {
                    "library encrypt()": lambda b=body, k=key: k.encrypt(b),
                    "floor, armored": lambda b=body, r=recipient: encrypt_armored(r, b),
                    "library encrypt_binary()": lambda b=body, k=key: k.encrypt_binary(b),
                    "floor, no armor": lambda b=body, r=recipient: encrypt_binary(r, b),
                    "naive PGPy": lambda b=body, e=pgpy_encrypt: e(b),
                }
                runs = dict.fromkeys(methods, fast_runs)
                runs["naive PGPy"] = slow_runs
                if gpg_encrypt is not None:
                    methods["gpg (python-gnupg)"] = lambda b=body, e=gpg_encrypt: e(b)
                    runs["gpg (python-gnupg)"] = gpg_runs
                for name, call in methods.items():
                    if decryptor.decrypt(call()) != body:  # type: ignore[arg-type]
                        raise AssertionError(f"{name} output does not decrypt to the input")
                samples = interleaved_timings(methods, runs, rounds=rounds)
                medians = {name: median(values) / 1000 for name, values in samples.items()}
                binary = key.encrypt_binary(body)
                parts = interleaved_timings(
                    {"armor()": lambda m=binary: armor(m), "crc24()": lambda m=binary: crc24(m)},
                    dict.fromkeys(["armor()", "crc24()"], fast_runs),
                    rounds=rounds,
                )
                same_format = {
                    "library encrypt_binary()": "floor, no armor",
                    "floor, no armor": "floor, no armor",
                }
                label = f"{key_name} {size_name}"
                chart_labels.append(label)
                for name, values in samples.items():
                    chart.setdefault(name, []).append(medians[name])
                    floor = medians[same_format.get(name, "floor, armored")]
                    ratio = medians[name] / floor
                    target = ""
                    if name == "library encrypt()":
                        target = section.check(
                            f"PGP {label}: library ÷ floor", ratio, 2.0, higher=False
                        )
                    section.rows.append(
                        [
                            key_name,
                            size_name,
                            name,
                            fmt(medians[name]),
                            fmt(percentile(values, 90) / 1000),
                            str(len(values)),
                            f"{ratio:.2f}x",
                            f"{medians[name] / medians['floor, no armor']:.2f}x",
                            target,
                        ]
                    )
                for name, values in parts.items():
                    section.rows.append(
                        [
                            key_name,
                            size_name,
                            f"  of which library {name}",
                            fmt(median(values) / 1000),
                            fmt(percentile(values, 90) / 1000),
                            str(len(values)),
                            "",
                            "",
                            "",
                        ]
                    )
    finally:
        gpg.close()
    section.notes += [
        (
            "Every method's output was decrypted with the sandbox Decryptor and compared byte "
            "for byte once per configuration (all matched)."
        ),
        (
            "The armored floor reuses invoicing_async._doc.pgp.armor (base64 + CRC24) so that it "
            "writes the same format; 'floor, no armor' is the binary message only."
        ),
        (
            "naive PGPy: PGPMessage.new(body, format='b', compression=Uncompressed) + "
            "key.encrypt(cipher=AES256) + str(); PGPy's default would add ZIP compression."
        ),
        (
            "'÷ floor (same format)': armored methods against the armored floor, binary ones "
            "against the binary floor. 'of which' rows time the library's armor() and crc24() "
            "alone on the same binary message."
        ),
    ]
    if gpg.why_not:
        section.notes.append(f"gpg skipped: {gpg.why_not}.")
    else:
        section.notes.append(
            f"gpg {gpg.version} via python-gnupg: includes starting a gpg process per call."
        )
    section.charts.append(
        Chart("PGP encryption per invoice", "µs (median, log scale)", chart_labels, chart, log=True)
    )
    return section
