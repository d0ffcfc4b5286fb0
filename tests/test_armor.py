"""The PGP stage's own armor: the folded CRC24 equals the textbook bit-by-bit CRC."""

from __future__ import annotations

import base64

from hypothesis import given, settings
from hypothesis import strategies as st
from keyfactory import _crc24 as reference_crc24  # RFC 4880 section 6.1, bit by bit

from invoicing_async._crypto import armor, crc24


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
