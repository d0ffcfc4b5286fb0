"""ASCII armor: the folded CRC24 equals the textbook bit-by-bit CRC; one reader for all."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from keyfactory import _crc24 as reference_crc24  # RFC 4880 section 6.1, bit by bit

from invoicing_async._doc.pgp import ArmorError, armor, crc24, dearmor


@settings(max_examples=300)
@given(st.binary(max_size=3000))
def test_crc24_matches_the_reference(data):
    """Folding big integers gives exactly the RFC's CRC24, for any input."""
    assert crc24(data) == reference_crc24(data)


def test_crc24_at_fold_boundaries():
    """Lengths around every power of two (where the fold point changes) agree too."""
    for size in (0, 1, 2, 3, 5, 6, 7, 8, 9, 63, 64, 65, 511, 512, 513, 4095, 4096, 4097, 16385):
        data = bytes((i * 37 + size) % 256 for i in range(size))
        assert crc24(data) == reference_crc24(data), size


def test_armor_layout():
    """Armor is 64-column base64 with the checksum line, as GnuPG writes it."""
    data = bytes(range(256)) * 3
    text = armor(data).decode()
    lines = text.splitlines()
    assert lines[0] == "-----BEGIN PGP MESSAGE-----"
    assert lines[1] == ""
    assert lines[-1] == "-----END PGP MESSAGE-----"
    body = lines[2:-2]
    assert all(len(line) == 64 for line in body[:-1])
    assert base64.b64decode("".join(body)) == data
    assert lines[-2] == "=" + base64.b64encode(reference_crc24(data).to_bytes(3, "big")).decode()


def test_dearmor_reads_what_armor_writes():
    """dearmor(armor(x)) gives back the block type and x, for any kind of block."""
    data = bytes(range(256)) * 5
    assert dearmor(armor(data)) == ("MESSAGE", data)
    assert dearmor(armor(data, "PUBLIC KEY BLOCK")) == ("PUBLIC KEY BLOCK", data)


def test_dearmor_passes_binary_through():
    """Binary OpenPGP (first octet with the high bit set) is returned unchanged, type None."""
    binary = b"\xc1\x03abc"
    assert dearmor(binary) == (None, binary)


def test_dearmor_accepts_what_people_paste():
    """Text before the armor, CRLF line ends, armor headers, indentation and a missing
    or wrong CRC line are all accepted (the CRC is not checked: RFC 9580 §6.1).
    """
    data = b"invoice \x00\xff" * 20
    text = armor(data).decode()
    lines = text.splitlines()
    variants = [
        "Here is our key:\n\n" + text,
        text.replace("\n", "\r\n"),
        text.replace("-----\n\n", "-----\nVersion: X 1.0\nComment: a: b\n\n", 1),
        "\n".join(line for line in lines if not line.startswith("=")),
        "\n".join("  " + line for line in lines),
        text.replace(lines[-2], "=AAAA"),
    ]
    for variant in variants:
        assert dearmor(variant.encode()) == ("MESSAGE", data), variant


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "no OpenPGP data"),
        (b"plain text, no armor", "no OpenPGP data"),
        (b"-----BEGIN PGP MESSAGE\n\nAAAA\n-----END PGP MESSAGE-----\n", "header line"),
        (b"-----BEGIN PGP MESSAGE-----\n\nAAAA\n", "tail line"),
        (b"-----BEGIN PGP MESSAGE-----\n\n!!!!\n-----END PGP MESSAGE-----\n", "base64"),
    ],
    ids=["empty", "text", "bad-header", "no-tail", "bad-base64"],
)
def test_dearmor_says_what_is_wrong(data, reason):
    """Text that is no armor, or broken armor, raises ArmorError saying what is wrong."""
    with pytest.raises(ArmorError, match=reason):
        dearmor(data)
