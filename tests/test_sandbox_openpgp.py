"""Tests for the sandbox's OpenPGP key generation and fast decryptor.

Messages come from three independent producers: PGPy, GnuPG (when
installed) and a tiny hand-rolled SEIPD builder in this file, which lets the
tests reach framing and plaintext corner cases neither tool emits.
"""

from __future__ import annotations

import bz2
import contextlib
import hashlib
import os
import random
import shutil
import subprocess
import tempfile
import warnings
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invoicing_async.sandbox._openpgp import (
    _CFB,
    Decryptor,
    IntegrityError,
    InvalidKeyError,
    MalformedMessageError,
    MessageTooLargeError,
    NotIntegrityProtectedError,
    OpenPGPError,
    SandboxKeyPair,
    UnsupportedMessageError,
    WrongKeyError,
    _iter_packets,
    generate_keypair,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import pgpy
    from pgpy.constants import (
        CompressionAlgorithm,
        EllipticCurveOID,
        HashAlgorithm,
        KeyFlags,
        PubKeyAlgorithm,
        SignatureType,
        SymmetricKeyAlgorithm,
    )

if TYPE_CHECKING:
    from collections.abc import Iterator

GPG = shutil.which("gpg")
PAYLOAD = b'{"invoice": "INV-001", "lines": [{"sku": "A", "qty": 3}], "note": "\xc3\xa9\x00\xff"}'


# --------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """PGPy warns about deprecated cryptography APIs; keep -W error runs clean."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def pgpy_encrypt(
    public_armored: str,
    data: bytes,
    *,
    compression: CompressionAlgorithm | None = None,
    **prefs: object,
) -> bytes:
    """Encrypt ``data`` to the key with PGPy and return the binary message."""
    with quiet():
        key, _ = pgpy.PGPKey.from_blob(public_armored)
        kwargs = {} if compression is None else {"compression": compression}
        message = pgpy.PGPMessage.new(data, format="b", **kwargs)
        return bytes(key.encrypt(message, **prefs))


def armor(binary: bytes) -> str:
    """ASCII-armor a binary message the way PGPy does."""
    with quiet():
        return str(pgpy.PGPMessage.from_blob(binary))


def packets(binary: bytes) -> list[tuple[int, bytes]]:
    return list(_iter_packets(binary))


def _new_length(length: int) -> bytes:
    if length < 192:
        return bytes([length])
    if length < 8384:
        length -= 192
        return bytes([(length >> 8) + 192, length & 0xFF])
    return b"\xff" + length.to_bytes(4, "big")


def _partial(tag: int, body: bytes) -> bytes:
    out = bytearray([0xC0 | tag])
    rest = body
    while len(rest) > 512:
        out += b"\xe9" + rest[:512]  # 2**9-octet partial chunk
        rest = rest[512:]
    return bytes(out + _new_length(len(rest)) + rest)


_HEADERS = {
    "new": lambda tag, n: bytes([0xC0 | tag]) + _new_length(n),
    "five": lambda tag, n: bytes([0xC0 | tag, 0xFF]) + n.to_bytes(4, "big"),
    "old1": lambda tag, n: bytes([0x80 | (tag << 2), n]),
    "old2": lambda tag, n: bytes([0x80 | (tag << 2) | 1]) + n.to_bytes(2, "big"),
    "old": lambda tag, n: bytes([0x80 | (tag << 2) | 2]) + n.to_bytes(4, "big"),
    "indeterminate": lambda tag, _: bytes([0x80 | (tag << 2) | 3]),
}


def packet(tag: int, body: bytes, style: str = "new") -> bytes:
    """Frame a packet; ``style`` picks one of the header encodings to exercise."""
    if style == "partial":
        return _partial(tag, body)
    return _HEADERS[style](tag, len(body)) + body


def literal(data: bytes, fmt: bytes = b"b", name: bytes = b"") -> bytes:
    return packet(11, fmt + bytes([len(name)]) + name + b"\x00\x00\x00\x00" + data)


def compressed(algo: int, inner: bytes) -> bytes:
    if algo == 1:
        deflate = zlib.compressobj(wbits=-15)
        body = deflate.compress(inner) + deflate.flush()
    elif algo == 2:
        body = zlib.compress(inner)
    elif algo == 3:
        body = bz2.compress(inner)
    else:
        body = inner
    return packet(8, bytes([algo]) + body)


def seipd(session_key: bytes, inner: bytes, *, mdc: bool = True, quick: bool = True) -> bytes:
    """Build a SEIPD v1 packet body around ``inner`` (AES, zero-IV CFB, MDC)."""
    prefix = bytearray(os.urandom(16))
    prefix += prefix[-2:] if quick else bytes([prefix[-2] ^ 1, prefix[-1]])
    plain = bytes(prefix) + inner + b"\xd3\x14"
    digest = hashlib.sha1(plain, usedforsecurity=False).digest()
    plain += digest if mdc else bytes(20)
    encryptor = Cipher(algorithms.AES(session_key), _CFB(bytes(16))).encryptor()
    return b"\x01" + encryptor.update(plain) + encryptor.finalize()


class Crafted:
    """PKESK packets for a session key we know, so tests can build any SEIPD."""

    def __init__(self, public_armored: str) -> None:
        self.session_key = os.urandom(32)
        binary = pgpy_encrypt(
            public_armored,
            b"unused",
            sessionkey=self.session_key,
            cipher=SymmetricKeyAlgorithm.AES256,
        )
        self.pkesks = b"".join(packet(tag, body) for tag, body in packets(binary) if tag == 1)

    def message(self, inner: bytes, **kwargs: bool) -> bytes:
        """Return PKESKs + a SEIPD around ``inner`` (see :func:`seipd` kwargs)."""
        return self.pkesks + packet(18, seipd(self.session_key, inner, **kwargs))


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def rsa_pair() -> SandboxKeyPair:
    return generate_keypair("rsa3072")


@pytest.fixture(scope="session")
def cv_pair() -> SandboxKeyPair:
    return generate_keypair("cv25519")


@pytest.fixture(scope="session")
def rsa_decryptor(rsa_pair):
    return Decryptor(rsa_pair.private_armored)


@pytest.fixture(scope="session")
def cv_decryptor(cv_pair):
    return Decryptor(cv_pair.private_armored)


@pytest.fixture(scope="session", params=["rsa3072", "cv25519"])
def pair_and_decryptor(request, rsa_pair, rsa_decryptor, cv_pair, cv_decryptor):
    if request.param == "rsa3072":
        return rsa_pair, rsa_decryptor
    return cv_pair, cv_decryptor


@pytest.fixture(scope="session")
def crafted(cv_pair) -> Crafted:
    return Crafted(cv_pair.public_armored)


@pytest.fixture
def gnupg() -> Iterator[GnuPG]:
    if GPG is None:
        pytest.skip("gpg is not installed")
    # Short path: gpg-agent's socket path must fit in sun_path.
    home = tempfile.mkdtemp(prefix="gpg-", dir="/tmp")
    Path(home).chmod(0o700)
    try:
        yield GnuPG(GPG, Path(home))
    finally:
        subprocess.run(
            ["gpgconf", "--homedir", home, "--kill", "all"], capture_output=True, check=False
        )
        shutil.rmtree(home, ignore_errors=True)


class GnuPG:
    """Minimal driver for a throwaway GnuPG home."""

    def __init__(self, binary: str, home: Path) -> None:
        self.binary = binary
        self.home = home

    def run(self, *args: str, stdin: bytes = b"") -> bytes:
        """Run gpg in this home, assert success and return stdout."""
        result = subprocess.run(
            [self.binary, "--batch", "--no-tty", "--homedir", str(self.home), *args],
            input=stdin,
            capture_output=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        return result.stdout

    def import_key(self, armored: str) -> None:
        """Import an armored key."""
        self.run("--import", stdin=armored.encode())

    def encrypt(self, recipient: str, data: bytes, *options: str) -> bytes:
        """Encrypt ``data`` to ``recipient`` with default settings plus ``options``."""
        return self.run(
            "--trust-model", "always", "--encrypt", "-r", recipient, *options, stdin=data
        )


def fingerprint(public_armored: str) -> str:
    with quiet():
        key, _ = pgpy.PGPKey.from_blob(public_armored)
    return str(key.fingerprint).replace(" ", "")


# --------------------------------------------------------------------------- key generation


@pytest.mark.parametrize("algorithm", ["rsa2048", "cv25519"])
def test_generated_key_layout(algorithm):
    """Generated keys have the documented layout.

    A certify+sign primary with the requested user id, AES256/SHA256/ZLIB-first
    preferences, no expiry, and one encryption subkey.
    """
    pair = generate_keypair(algorithm, user_id="Test Provider <t@invoicing.invalid>")
    assert pair.algorithm == algorithm
    assert pair.public_armored.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert pair.private_armored.startswith("-----BEGIN PGP PRIVATE KEY BLOCK-----")
    with quiet():
        key, _ = pgpy.PGPKey.from_blob(pair.private_armored)
        public, _ = pgpy.PGPKey.from_blob(pair.public_armored)
        assert public.is_public
        assert not key.is_protected
        uid = key.userids[0]
        assert uid.userid == "Test Provider <t@invoicing.invalid>"
        sig = uid.selfsig
        assert sig.key_flags == {KeyFlags.Certify, KeyFlags.Sign}
        assert sig.cipherprefs == [SymmetricKeyAlgorithm.AES256]
        assert sig.hashprefs == [HashAlgorithm.SHA256]
        assert sig.compprefs == [
            CompressionAlgorithm.ZLIB,
            CompressionAlgorithm.ZIP,
            CompressionAlgorithm.Uncompressed,
        ]
        assert key.expires_at is None
        subkeys = list(key.subkeys.values())
        assert len(subkeys) == 1
        (subkey,) = subkeys
        # RSA subkeys also carry a 0x19 back-signature; find the 0x18 binding.
        binding = next(
            sig for sig in subkey._signatures if sig.type == SignatureType.Subkey_Binding
        )
        assert binding.key_flags == {KeyFlags.EncryptCommunications, KeyFlags.EncryptStorage}
        expected = (
            PubKeyAlgorithm.ECDH if algorithm == "cv25519" else PubKeyAlgorithm.RSAEncryptOrSign
        )
        assert subkey.key_algorithm == expected
        assert subkey.expires_at is None
    assert subkey.fingerprint.keyid in Decryptor(pair.private_armored).key_ids


def test_keypair_repr_hides_private_key(cv_pair, cv_decryptor):
    """Neither SandboxKeyPair nor Decryptor reveal secret key material in repr()."""
    assert "PRIVATE" not in repr(cv_pair)
    assert cv_pair.private_armored.splitlines()[2] not in repr(cv_pair)
    assert "cv25519" in repr(cv_pair)
    assert repr(cv_decryptor).startswith("Decryptor(key_ids=")


def test_generate_keypair_rejects_unknown_algorithm():
    """An algorithm outside the Literal is a programming error (ValueError)."""
    with pytest.raises(ValueError, match="unsupported algorithm"):
        generate_keypair("dsa1024")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize(
    "data", [PAYLOAD, b"", bytes(range(256)) * 40, os.urandom(70_000)], ids=len
)
def test_pgpy_round_trip(pair_and_decryptor, data):
    """PGPy's own messages decrypt byte-exact, both binary and armored.

    They are made by key.encrypt(PGPMessage.new(data, format='b')).
    """
    pair, decryptor = pair_and_decryptor
    binary = pgpy_encrypt(pair.public_armored, data)
    assert decryptor.decrypt(binary) == data
    assert decryptor.decrypt(armor(binary).encode()) == data


@pytest.mark.parametrize(
    "compression",
    [
        CompressionAlgorithm.Uncompressed,
        CompressionAlgorithm.ZIP,
        CompressionAlgorithm.ZLIB,
        CompressionAlgorithm.BZ2,
    ],
)
def test_pgpy_compression_variants(cv_pair, cv_decryptor, compression):
    """Uncompressed, ZIP, ZLIB and BZip2 compressed data packets are all inflated."""
    data = PAYLOAD * 50
    binary = pgpy_encrypt(cv_pair.public_armored, data, compression=compression)
    assert cv_decryptor.decrypt(binary) == data


@pytest.mark.parametrize(
    "cipher",
    [
        SymmetricKeyAlgorithm.AES128,
        SymmetricKeyAlgorithm.AES192,
        SymmetricKeyAlgorithm.AES256,
        SymmetricKeyAlgorithm.CAST5,
        SymmetricKeyAlgorithm.TripleDES,
        SymmetricKeyAlgorithm.Blowfish,
        SymmetricKeyAlgorithm.Camellia128,
        SymmetricKeyAlgorithm.Camellia256,
    ],
    ids=lambda c: c.name,
)
def test_pgpy_symmetric_algorithms(cv_pair, cv_decryptor, cipher):
    """Session keys for AES-128/192/256 and the legacy ciphers GnuPG may pick decrypt."""
    try:
        binary = pgpy_encrypt(cv_pair.public_armored, PAYLOAD, cipher=cipher)
    except Exception as exc:
        pytest.skip(f"PGPy/OpenSSL cannot encrypt with {cipher.name}: {exc}")
    assert cv_decryptor.decrypt(binary) == PAYLOAD


@pytest.mark.parametrize(
    "curve",
    [EllipticCurveOID.NIST_P256, EllipticCurveOID.NIST_P384, EllipticCurveOID.NIST_P521],
    ids=lambda c: c.name,
)
def test_nist_ecdh_round_trip(curve):
    """ECDH subkeys on NIST P-256/384/521 (uncompressed points, SHA-2 KDF) work."""
    with quiet():
        primary = pgpy.PGPKey.new(PubKeyAlgorithm.ECDSA, curve)
        primary.add_uid(
            pgpy.PGPUID.new("nist"),
            usage={KeyFlags.Certify, KeyFlags.Sign},
            ciphers=[SymmetricKeyAlgorithm.AES256],
        )
        primary.add_subkey(
            pgpy.PGPKey.new(PubKeyAlgorithm.ECDH, curve),
            usage={KeyFlags.EncryptCommunications, KeyFlags.EncryptStorage},
        )
        public_armored = str(primary.pubkey)
        private_armored = str(primary)
    decryptor = Decryptor(private_armored)
    assert decryptor.decrypt(pgpy_encrypt(public_armored, PAYLOAD)) == PAYLOAD


def test_decrypts_twenty_rsa3072_messages(rsa_pair, rsa_decryptor):
    """Speed sanity (not timed): one Decryptor handles a burst of RSA-3072 messages."""
    messages = [pgpy_encrypt(rsa_pair.public_armored, b"%d" % i) for i in range(20)]
    assert [rsa_decryptor.decrypt(m) for m in messages] == [b"%d" % i for i in range(20)]


def test_decryptor_accepts_bytes_and_binary_keys(cv_pair):
    """The secret key may be given as str, armored bytes or binary bytes."""
    with quiet():
        key, _ = pgpy.PGPKey.from_blob(cv_pair.private_armored)
        binary_key = bytes(key)
    message = pgpy_encrypt(cv_pair.public_armored, PAYLOAD)
    for form in (cv_pair.private_armored, cv_pair.private_armored.encode(), binary_key):
        assert Decryptor(form).decrypt(message) == PAYLOAD


# --------------------------------------------------------------------------- framing & armor


@pytest.mark.parametrize(
    ("pkesk_style", "seipd_style"),
    [
        ("old1", "new"),
        ("old2", "five"),
        ("old", "partial"),
        ("five", "new"),
        ("new", "partial"),
    ],
)
def test_outer_packet_framings(cv_pair, cv_decryptor, pkesk_style, seipd_style):
    """Every header encoding on the outer packets is understood.

    Old-format (1/2/4-octet) headers on the PKESK, new-format (1/2-octet,
    5-octet, partial) on the SEIPD packet.  (Tag 18 does not fit old-format
    headers; indeterminate lengths are covered inside the plaintext and by
    GnuPG's compressed packets.)
    """
    data = os.urandom(3000)
    parsed = packets(pgpy_encrypt(cv_pair.public_armored, data))
    assert [tag for tag, _ in parsed] == [1, 18]
    reframed = packet(*parsed[0], style=pkesk_style) + packet(*parsed[1], style=seipd_style)
    assert cv_decryptor.decrypt(reframed) == data


@pytest.mark.parametrize(
    "transform",
    [
        pytest.param(lambda s: s.replace("\n", "\r\n"), id="crlf"),
        pytest.param(
            lambda s: "\n".join(line for line in s.splitlines() if not line.startswith("=")),
            id="no-crc",
        ),
        pytest.param(
            lambda s: s.replace(
                "-----BEGIN PGP MESSAGE-----\n",
                "-----BEGIN PGP MESSAGE-----\nVersion: Test 1.0\nComment: hi\n",
            ),
            id="headers",
        ),
        pytest.param(lambda s: "\n\n  " + s + "\n\n", id="surrounding-whitespace"),
    ],
)
def test_armor_variants(cv_pair, cv_decryptor, transform):
    """Armor with CRLF, without the CRC24 line, with headers, or padded by blanks decodes."""
    text = armor(pgpy_encrypt(cv_pair.public_armored, PAYLOAD))
    assert cv_decryptor.decrypt(transform(text).encode()) == PAYLOAD


def test_wrong_armor_block_is_malformed(cv_pair, cv_decryptor):
    """A public-key block (or broken base64) passed as a message is MalformedMessageError."""
    with pytest.raises(MalformedMessageError):
        cv_decryptor.decrypt(cv_pair.public_armored.encode())
    with pytest.raises(MalformedMessageError):
        cv_decryptor.decrypt(b"-----BEGIN PGP MESSAGE-----\n\n!!!!\n-----END PGP MESSAGE-----\n")
    with pytest.raises(MalformedMessageError):
        cv_decryptor.decrypt(b"-----BEGIN PGP MESSAGE-----\n\nAAAA\n")


def test_wildcard_key_id(cv_pair, cv_decryptor, rsa_pair):
    """A PKESK with an all-zero (hidden) key id is tried on every key.

    If none of our keys fits, the result is WrongKeyError.
    """
    parsed = packets(pgpy_encrypt(cv_pair.public_armored, PAYLOAD))
    pkesk = parsed[0][1]
    hidden = packet(1, pkesk[:1] + bytes(8) + pkesk[9:]) + packet(18, parsed[1][1])
    assert cv_decryptor.decrypt(hidden) == PAYLOAD

    other = packets(pgpy_encrypt(rsa_pair.public_armored, PAYLOAD))
    pkesk = other[0][1]
    hidden = packet(1, pkesk[:1] + bytes(8) + pkesk[9:]) + packet(18, other[1][1])
    with pytest.raises(WrongKeyError):
        cv_decryptor.decrypt(hidden)


def test_multiple_recipients(cv_pair, rsa_pair, rsa_decryptor):
    """With PKESKs for several recipients, the one addressed to us is used."""
    other = packets(pgpy_encrypt(cv_pair.public_armored, b"x"))[0]
    ours = packets(pgpy_encrypt(rsa_pair.public_armored, PAYLOAD))
    message = packet(*other) + packet(*ours[0]) + packet(*ours[1])
    assert rsa_decryptor.decrypt(message) == PAYLOAD


# --------------------------------------------------------------------------- plaintext layer


@pytest.mark.parametrize(
    "inner",
    [
        pytest.param(literal(PAYLOAD, b"t", b"invoice.json"), id="text-literal"),
        pytest.param(literal(PAYLOAD, b"u"), id="utf8-literal"),
        pytest.param(literal(PAYLOAD, b"m"), id="mime-literal"),
        pytest.param(
            compressed(3, compressed(2, compressed(1, literal(PAYLOAD)))), id="nested-compression"
        ),
        pytest.param(compressed(0, literal(PAYLOAD)), id="stored-compression"),
        pytest.param(
            packet(4, b"\x03\x00\x08\x16" + bytes(8) + b"\x01")
            + literal(PAYLOAD)
            + packet(2, b"\x04\x00" + bytes(10)),
            id="one-pass-signed",
        ),
        pytest.param(
            packet(10, b"PGP") + packet(2, b"\x04" + bytes(11)) + literal(PAYLOAD),
            id="marker-and-signature",
        ),
        pytest.param(packet(11, b"b\x00\x00\x00\x00\x00" + PAYLOAD, "partial"), id="partial"),
        pytest.param(
            packet(11, b"b\x00\x00\x00\x00\x00" + PAYLOAD, "indeterminate"),
            id="indeterminate-literal",
        ),
        pytest.param(
            packet(8, b"\x02" + zlib.compress(literal(PAYLOAD)), "indeterminate"),
            id="indeterminate-compressed",
        ),
    ],
)
def test_plaintext_structures(crafted, cv_decryptor, inner):
    """Literal data is found and returned unchanged whatever surrounds it.

    Formats b/t/u/m, nested compression, signatures, marker packets, partial
    and indeterminate lengths.
    """
    assert cv_decryptor.decrypt(crafted.message(inner)) == PAYLOAD


def test_partial_literal_body_round_trips(crafted, cv_decryptor):
    """A literal packet streamed in partial chunks is reassembled byte-exact."""
    data = os.urandom(5000)
    inner = packet(11, b"b\x00\x00\x00\x00\x00" + data, "partial")
    assert cv_decryptor.decrypt(crafted.message(inner)) == data


@pytest.mark.parametrize(
    ("inner", "error"),
    [
        pytest.param(literal(b"a") + literal(b"b"), MalformedMessageError, id="two-literals"),
        pytest.param(packet(2, b"\x04" + bytes(11)), MalformedMessageError, id="no-literal"),
        pytest.param(packet(13, b"uid") + literal(b"a"), MalformedMessageError, id="user-id"),
        pytest.param(packet(8, b"\x63abc"), UnsupportedMessageError, id="compression-99"),
        pytest.param(
            packet(8, b"\x02" + zlib.compress(literal(PAYLOAD))[:-6]),
            MalformedMessageError,
            id="truncated-zlib",
        ),
        pytest.param(packet(8, b"\x03garbage"), MalformedMessageError, id="corrupt-bzip2"),
        pytest.param(packet(8, b""), MalformedMessageError, id="empty-compressed"),
        pytest.param(literal(b"a")[:-2], MalformedMessageError, id="truncated-literal"),
    ],
)
def test_malformed_plaintext(crafted, cv_decryptor, inner, error):
    """Structural problems inside correctly encrypted data raise specific errors."""
    with pytest.raises(error):
        cv_decryptor.decrypt(crafted.message(inner))


def test_deeply_nested_compression_refused(crafted, cv_decryptor):
    """Compressed packets nested beyond a small depth are refused (quine-bomb guard)."""
    inner = literal(b"x")
    for _ in range(12):
        inner = compressed(0, inner)
    with pytest.raises(MalformedMessageError, match="nested"):
        cv_decryptor.decrypt(crafted.message(inner))


def test_decompression_bomb_refused(crafted, cv_decryptor):
    """Output beyond max_size raises MessageTooLargeError (default cap 16 MiB)."""
    bomb = compressed(2, literal(bytes(20 * 1024 * 1024)))
    assert len(bomb) < 100_000
    with pytest.raises(MessageTooLargeError):
        cv_decryptor.decrypt(crafted.message(bomb))
    small = compressed(1, literal(bytes(10_000)))
    with pytest.raises(MessageTooLargeError):
        cv_decryptor.decrypt(crafted.message(small), max_size=9_999)
    assert cv_decryptor.decrypt(crafted.message(small), max_size=10_000) == bytes(10_000)


def test_uncompressed_literal_over_limit_refused(crafted, cv_decryptor):
    """An uncompressed literal larger than max_size is refused too."""
    with pytest.raises(MessageTooLargeError):
        cv_decryptor.decrypt(crafted.message(literal(bytes(500))), max_size=100)
    with pytest.raises(MessageTooLargeError):
        cv_decryptor.decrypt(bytes(10_000_000), max_size=1000)
    with pytest.raises(ValueError, match="max_size"):
        cv_decryptor.decrypt(b"", max_size=-1)


# --------------------------------------------------------------------------- refusal


def test_sed_packet_refused(crafted, cv_decryptor):
    """A Symmetrically Encrypted Data packet (tag 9, no MDC) is refused.

    NotIntegrityProtectedError, whether or not a valid PKESK precedes it.
    """
    sed_body = seipd(crafted.session_key, literal(PAYLOAD))[1:]
    with pytest.raises(NotIntegrityProtectedError):
        cv_decryptor.decrypt(crafted.pkesks + packet(9, sed_body))
    with pytest.raises(NotIntegrityProtectedError):
        cv_decryptor.decrypt(packet(9, sed_body, "old"))


@pytest.mark.parametrize(
    ("tail", "error"),
    [
        pytest.param(
            packet(20, b"\x01\x09\x02\x10" + bytes(40)), UnsupportedMessageError, id="aead"
        ),
        pytest.param(packet(18, b"\x02" + bytes(40)), UnsupportedMessageError, id="seipd-v2"),
        pytest.param(packet(18, b""), UnsupportedMessageError, id="seipd-empty"),
        pytest.param(literal(PAYLOAD), UnsupportedMessageError, id="plaintext"),
        pytest.param(b"", MalformedMessageError, id="no-data-packet"),
        pytest.param(packet(13, b"uid"), MalformedMessageError, id="user-id"),
    ],
)
def test_unsupported_envelopes(crafted, cv_decryptor, tail, error):
    """AEAD (tag 20), SEIPD v2, unencrypted and odd envelopes are refused specifically."""
    with pytest.raises(error):
        cv_decryptor.decrypt(crafted.pkesks + tail)


def test_v6_pkesk_and_password_only_unsupported(crafted, cv_decryptor):
    """Only a v6 PKESK or a password SKESK for the session key is unsupported."""
    body = packet(18, seipd(crafted.session_key, literal(PAYLOAD)))
    with pytest.raises(UnsupportedMessageError, match="PKESK"):
        cv_decryptor.decrypt(packet(1, b"\x06" + bytes(40)) + body)
    with pytest.raises(UnsupportedMessageError, match="password"):
        cv_decryptor.decrypt(packet(3, b"\x04\x09\x03\x08" + bytes(9)) + body)


@pytest.mark.parametrize("where", ["middle", "mdc", "prefix", "last"])
def test_flipped_ciphertext_byte(pair_and_decryptor, where):
    """Flipping any ciphertext byte of the SEIPD packet is IntegrityError (MDC/quick check)."""
    pair, decryptor = pair_and_decryptor
    parsed = packets(pgpy_encrypt(pair.public_armored, PAYLOAD * 4))
    body = bytearray(parsed[-1][1])
    index = {"middle": len(body) // 2, "mdc": len(body) - 10, "prefix": 3, "last": -1}[where]
    body[index] ^= 0x01
    message = packet(*parsed[0]) + packet(18, bytes(body))
    with pytest.raises(IntegrityError):
        decryptor.decrypt(message)


def test_bad_mdc_or_quick_check(crafted, cv_decryptor):
    """Hand-built SEIPD with a wrong MDC or wrong quick-check bytes is IntegrityError."""
    with pytest.raises(IntegrityError):
        cv_decryptor.decrypt(crafted.message(literal(PAYLOAD), mdc=False))
    with pytest.raises(IntegrityError):
        cv_decryptor.decrypt(crafted.message(literal(PAYLOAD), quick=False))


def test_corrupt_session_key_is_integrity_error(pair_and_decryptor):
    """A PKESK addressed to us whose encrypted session key is damaged is IntegrityError."""
    pair, decryptor = pair_and_decryptor
    parsed = packets(pgpy_encrypt(pair.public_armored, PAYLOAD))
    pkesk = bytearray(parsed[0][1])
    pkesk[-5] ^= 0x40
    with pytest.raises(IntegrityError):
        decryptor.decrypt(packet(1, bytes(pkesk)) + packet(*parsed[1]))


def test_message_for_another_key(cv_pair, rsa_decryptor, rsa_pair, cv_decryptor):
    """A message encrypted to a different key raises WrongKeyError."""
    with pytest.raises(WrongKeyError):
        rsa_decryptor.decrypt(pgpy_encrypt(cv_pair.public_armored, PAYLOAD))
    with pytest.raises(WrongKeyError):
        cv_decryptor.decrypt(pgpy_encrypt(rsa_pair.public_armored, PAYLOAD))


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes(cv_decryptor, seed):
    """Random bytes raise an OpenPGPError subclass."""
    data = random.Random(seed).randbytes(200)
    with pytest.raises(OpenPGPError):
        cv_decryptor.decrypt(data)


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"garbage", id="garbage"),
        pytest.param("caf\u00e9", id="non-ascii"),
        pytest.param(b"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n!!\n", id="bad-armor"),
    ],
)
def test_invalid_keys(key):
    """Unusable secret key input raises InvalidKeyError (an OpenPGPError)."""
    with pytest.raises(InvalidKeyError):
        Decryptor(key)


def test_public_key_and_protected_key_refused(cv_pair):
    """A public key, or a passphrase-protected secret key, cannot build a Decryptor."""
    with pytest.raises(InvalidKeyError, match="no usable"):
        Decryptor(cv_pair.public_armored)
    with quiet():
        key, _ = pgpy.PGPKey.from_blob(cv_pair.private_armored)
        key.protect("pw", SymmetricKeyAlgorithm.AES256, HashAlgorithm.SHA256)
        protected = str(key)
    with pytest.raises(InvalidKeyError, match="protected"):
        Decryptor(protected)


def test_corrupt_secret_key_checksum(cv_pair):
    """A damaged secret MPI is caught by the secret-key checksum."""
    with quiet():
        key, _ = pgpy.PGPKey.from_blob(cv_pair.private_armored)
        binary = bytearray(bytes(key))
    subkey_body = next(body for tag, body in packets(bytes(binary)) if tag == 7)
    end = binary.find(subkey_body) + len(subkey_body)
    binary[end - 3] ^= 0x01  # last byte of the secret MPI, before the checksum
    with pytest.raises(InvalidKeyError, match="checksum"):
        Decryptor(bytes(binary))


def _mpi(value: int) -> bytes:
    return value.bit_length().to_bytes(2, "big") + value.to_bytes(
        (value.bit_length() + 7) // 8, "big"
    )


def _read_mpi(body: bytes, offset: int) -> tuple[int, int]:
    size = (int.from_bytes(body[offset : offset + 2], "big") + 7) // 8
    end = offset + 2 + size
    return int.from_bytes(body[offset + 2 : end], "big"), end


@pytest.mark.parametrize("tamper", ["d", "p"])
def test_inconsistent_rsa_secret_key(rsa_pair, tamper):
    """An RSA secret key whose MPIs do not fit together is InvalidKeyError.

    The checksum is correct; the cheap p*q == n and e*d == 1 checks catch it.
    """
    with quiet():
        key, _ = pgpy.PGPKey.from_blob(rsa_pair.private_armored)
        binary = bytes(key)
    body = next(body for tag, body in packets(binary) if tag == 7)
    offset = 6
    _, offset = _read_mpi(body, offset)  # n
    _, offset = _read_mpi(body, offset)  # e
    public, offset = body[:offset], offset + 1  # skip s2k usage octet
    secrets = []
    for _ in range(4):
        value, offset = _read_mpi(body, offset)
        secrets.append(value)
    index = "dpqu".index(tamper)
    secrets[index] += 2
    secret = b"".join(_mpi(v) for v in secrets)
    forged = public + b"\x00" + secret + (sum(secret) & 0xFFFF).to_bytes(2, "big")
    with pytest.raises(InvalidKeyError):
        Decryptor(packet(7, forged))


# --------------------------------------------------------------------------- fuzz


@pytest.fixture(scope="module")
def fuzz_corpus(cv_pair, rsa_pair) -> list[bytes]:
    cv_binary = pgpy_encrypt(cv_pair.public_armored, PAYLOAD * 3)
    rsa_binary = pgpy_encrypt(rsa_pair.public_armored, PAYLOAD)
    return [cv_binary, armor(cv_binary).encode(), rsa_binary]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=600))
def test_fuzz_random_bytes_only_raise_openpgp_errors(cv_decryptor, data):
    """Arbitrary bytes never escape as anything but OpenPGPError."""
    with contextlib.suppress(OpenPGPError):
        cv_decryptor.decrypt(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_mutated_messages_only_raise_openpgp_errors(
    fuzz_corpus, cv_decryptor, rsa_decryptor, data
):
    """Mutated valid messages decrypt or raise OpenPGPError, nothing else.

    Mutations: flipped, set, inserted, deleted or truncated bytes.
    """
    index = data.draw(st.integers(0, len(fuzz_corpus) - 1))
    message = bytearray(fuzz_corpus[index])
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(message) - 1))
        action = data.draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        if action == "flip":
            message[position] ^= 1 << data.draw(st.integers(0, 7))
        elif action == "set":
            message[position] = data.draw(st.integers(0, 255))
        elif action == "insert":
            message[position:position] = data.draw(st.binary(min_size=1, max_size=8))
        elif action == "delete":
            del message[position]
        else:
            del message[position:]
        if not message:
            message = bytearray(b"\x00")
    decryptor = rsa_decryptor if index == 2 else cv_decryptor
    with contextlib.suppress(OpenPGPError):
        decryptor.decrypt(bytes(message))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inner=st.binary(max_size=300))
def test_fuzz_decrypted_plaintext_only_raises_openpgp_errors(crafted, cv_decryptor, inner):
    """Arbitrary (authentic) plaintext inside a valid SEIPD only raises OpenPGPError."""
    with contextlib.suppress(OpenPGPError):
        cv_decryptor.decrypt(crafted.message(inner))


# --------------------------------------------------------------------------- GnuPG interop

GPG_VARIANTS = [
    pytest.param((), id="default"),
    pytest.param(("--armor",), id="armor"),
    pytest.param(("--compress-algo", "none"), id="compress-none"),
    pytest.param(("-z", "0"), id="z0"),
    pytest.param(("--compress-algo", "bzip2"), id="bzip2"),
    pytest.param(("--compress-algo", "zip"), id="zip"),
    pytest.param(("--throw-keyids",), id="throw-keyids"),
    pytest.param(("--cipher-algo", "AES128"), id="aes128"),
    pytest.param(("--cipher-algo", "CAST5"), id="cast5"),
    pytest.param(("--cipher-algo", "CAMELLIA256"), id="camellia256"),
]


@pytest.mark.interop
@pytest.mark.parametrize("options", GPG_VARIANTS)
def test_gnupg_encrypts_decryptor_decrypts(gnupg, pair_and_decryptor, options):
    """GnuPG encrypts to the generated public key; Decryptor returns the exact bytes.

    Data is streamed from stdin, so gpg uses partial body lengths.
    """
    pair, decryptor = pair_and_decryptor
    gnupg.import_key(pair.public_armored)
    data = (PAYLOAD * 3000)[:150_000] + os.urandom(2000)
    encrypted = gnupg.encrypt(fingerprint(pair.public_armored), data, *options)
    if "--armor" in options:
        assert encrypted.startswith(b"-----BEGIN PGP MESSAGE-----")
    else:
        seipd_header = encrypted[len(b"".join(packet(t, b) for t, b in packets(encrypted)[:-1])) :]
        assert seipd_header[0] == 0xD2  # new-format tag 18
        if options in {(), ("--throw-keyids",), ("--cipher-algo", "AES128")}:
            assert 224 <= seipd_header[1] < 255, "expected a partial body length"
    assert decryptor.decrypt(encrypted) == data


@pytest.mark.interop
def test_gnupg_twofish_is_unsupported(gnupg, cv_pair, cv_decryptor):
    """A cipher we do not implement (Twofish) is UnsupportedMessageError."""
    gnupg.import_key(cv_pair.public_armored)
    encrypted = gnupg.encrypt(
        fingerprint(cv_pair.public_armored), PAYLOAD, "--cipher-algo", "TWOFISH"
    )
    with pytest.raises(UnsupportedMessageError):
        cv_decryptor.decrypt(encrypted)


@pytest.mark.interop
def test_gnupg_decrypts_pgpy_message_with_generated_private_key(gnupg, pair_and_decryptor):
    """GnuPG imports the generated secret key and decrypts a PGPy message for it.

    This proves the key pair is sane outside our own code.
    """
    pair, _ = pair_and_decryptor
    gnupg.import_key(pair.private_armored)
    message = armor(pgpy_encrypt(pair.public_armored, PAYLOAD))
    assert gnupg.run("--decrypt", stdin=message.encode()) == PAYLOAD


@pytest.mark.interop
@pytest.mark.parametrize("algo", ["cv25519", "rsa2048"])
def test_gnupg_generated_secret_key(gnupg, algo):
    """Decryptor loads a secret key generated and exported by GnuPG itself.

    That covers GnuPG's own MPI/scalar encodings; gpg then encrypts to it.
    """
    primary = "ed25519" if algo == "cv25519" else "rsa2048"
    uid = f"GnuPG {algo} <{algo}@invoicing.invalid>"
    loopback = ("--pinentry-mode", "loopback", "--passphrase", "")
    gnupg.run(*loopback, "--quick-generate-key", uid, primary, "cert", "never")
    fpr = next(
        line.split(":")[9]
        for line in gnupg.run("--with-colons", "--list-keys", uid).decode().splitlines()
        if line.startswith("fpr:")
    )
    gnupg.run(*loopback, "--quick-add-key", fpr, algo, "encr", "never")
    secret = gnupg.run(*loopback, "--armor", "--export-secret-keys", fpr)
    decryptor = Decryptor(secret)
    listing = gnupg.run("--with-colons", "--list-keys", fpr).decode().splitlines()
    subkey_id = next(line.split(":")[4] for line in listing if line.startswith("sub:"))
    assert subkey_id in decryptor.key_ids
    data = os.urandom(5000)
    assert decryptor.decrypt(gnupg.encrypt(fpr, data)) == data
