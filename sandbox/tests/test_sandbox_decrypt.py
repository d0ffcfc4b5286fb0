"""The sandbox's decryptor: what it accepts, and what it refuses with which error.

Messages come from PGPy and from the hand-rolled builder in :mod:`messagefactory`
(GnuPG and Sequoia messages are in ``tests/system/test_interop.py``).
"""

from __future__ import annotations

import contextlib
import os
import random
import warnings
import zlib

import messagefactory as mf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from messagefactory import (
    PAYLOAD,
    compressed,
    literal,
    packet,
    packets,
    pgpy_armor,
    pgpy_encrypt,
    quiet,
    seipd,
)

from invoicing_sandbox._pgp import (
    Decryptor,
    IntegrityError,
    MalformedMessageError,
    MessageTooLargeError,
    NotIntegrityProtectedError,
    OpenPGPError,
    UnsupportedMessageError,
    WrongKeyError,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import pgpy
    from pgpy.constants import (
        CompressionAlgorithm,
        EllipticCurveOID,
        SymmetricKeyAlgorithm,
    )


@pytest.fixture(scope="session")
def rsa_pair():
    return mf.keypair("rsa3072")


@pytest.fixture(scope="session")
def cv_pair():
    return mf.keypair("cv25519")


@pytest.fixture(scope="session")
def rsa_decryptor():
    return mf.decryptor("rsa3072")


@pytest.fixture(scope="session")
def cv_decryptor():
    return mf.decryptor("cv25519")


@pytest.fixture(scope="session", params=["rsa3072", "cv25519"])
def pair_and_decryptor(request):
    return mf.keypair(request.param), mf.decryptor(request.param)


@pytest.fixture(scope="session")
def crafted():
    return mf.crafted()


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
    assert decryptor.decrypt(pgpy_armor(binary).encode()) == data


@pytest.mark.parametrize(
    "compression",
    [
        CompressionAlgorithm.Uncompressed,
        CompressionAlgorithm.ZIP,
        CompressionAlgorithm.ZLIB,
    ],
)
def test_pgpy_compression_variants(cv_pair, cv_decryptor, compression):
    """Uncompressed, ZIP and ZLIB compressed data packets are all inflated."""
    data = PAYLOAD * 50
    binary = pgpy_encrypt(cv_pair.public_armored, data, compression=compression)
    assert cv_decryptor.decrypt(binary) == data


def test_bzip2_compression_is_unsupported(cv_pair, cv_decryptor):
    """BZip2 (which no key the sandbox makes offers) is refused as UnsupportedMessageError."""
    data = PAYLOAD * 50
    binary = pgpy_encrypt(cv_pair.public_armored, data, compression=CompressionAlgorithm.BZ2)
    with pytest.raises(UnsupportedMessageError, match="compression algorithm 3"):
        cv_decryptor.decrypt(binary)


@pytest.mark.parametrize(
    "cipher",
    [
        SymmetricKeyAlgorithm.AES128,
        SymmetricKeyAlgorithm.AES192,
        SymmetricKeyAlgorithm.AES256,
    ],
    ids=lambda c: c.name,
)
def test_pgpy_symmetric_algorithms(cv_pair, cv_decryptor, cipher):
    """Session keys for AES-128/192/256 decrypt."""
    binary = pgpy_encrypt(cv_pair.public_armored, PAYLOAD, cipher=cipher)
    assert cv_decryptor.decrypt(binary) == PAYLOAD


@pytest.mark.parametrize(
    "cipher",
    [
        SymmetricKeyAlgorithm.CAST5,
        SymmetricKeyAlgorithm.TripleDES,
        SymmetricKeyAlgorithm.Blowfish,
        SymmetricKeyAlgorithm.Camellia128,
        SymmetricKeyAlgorithm.Camellia256,
    ],
    ids=lambda c: c.name,
)
def test_pre_aes_ciphers_are_unsupported(cv_pair, cv_decryptor, cipher):
    """A session key for a cipher the provider's key does not offer is UnsupportedMessageError.

    The checksum of the session key is valid: the sender chose the cipher, the message
    is not corrupt.
    """
    try:
        binary = pgpy_encrypt(cv_pair.public_armored, PAYLOAD, cipher=cipher)
    except Exception as exc:
        pytest.skip(f"PGPy/OpenSSL cannot encrypt with {cipher.name}: {exc}")
    with pytest.raises(UnsupportedMessageError, match=f"symmetric algorithm {int(cipher)}"):
        cv_decryptor.decrypt(binary)


@pytest.mark.parametrize(
    "curve",
    [EllipticCurveOID.NIST_P256, EllipticCurveOID.NIST_P384, EllipticCurveOID.NIST_P521],
    ids=lambda c: c.name,
)
def test_nist_ecdh_round_trip(curve):
    """ECDH subkeys on NIST P-256/384/521 (uncompressed points, SHA-2 KDF) work."""
    public_armored, private_armored = mf.nist_pair(curve)
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
    text = pgpy_armor(pgpy_encrypt(cv_pair.public_armored, PAYLOAD))
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
            compressed(2, compressed(1, compressed(0, literal(PAYLOAD)))), id="nested-compression"
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
        pytest.param(packet(8, b"\x02garbage"), MalformedMessageError, id="corrupt-zlib"),
        pytest.param(packet(8, b"\x03garbage"), UnsupportedMessageError, id="bzip2"),
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


# --------------------------------------------------------------------------- fuzz


@pytest.fixture(scope="module")
def fuzz_corpus(cv_pair, rsa_pair) -> list[bytes]:
    cv_binary = pgpy_encrypt(cv_pair.public_armored, PAYLOAD * 3)
    rsa_binary = pgpy_encrypt(rsa_pair.public_armored, PAYLOAD)
    return [cv_binary, pgpy_armor(cv_binary).encode(), rsa_binary]


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
