"""Packet framing shared by every writer and reader: lengths, headers, MPIs, key packets.

The hand-rolled framings of :mod:`messagefactory` (written independently of the package)
are read back here; the decryptor's tests cover the same framings inside messages.
"""

from __future__ import annotations

import messagefactory as mf
import pytest
from hypothesis import given
from hypothesis import strategies as st
from messagefactory import packet as reference_packet

from invoicing_async import ProviderKey
from invoicing_async._doc.pgp import (
    PacketError,
    Reader,
    Tag,
    checksum16,
    dearmor,
    encode_length,
    iter_packets,
    mpi,
    packet,
    read_public_key,
)


@pytest.mark.parametrize(
    ("length", "encoded"),
    [
        (0, "00"),
        (191, "bf"),
        (192, "c000"),
        (8383, "dfff"),
        (8384, "ff000020c0"),
        (100_000, "ff000186a0"),
    ],
)
def test_new_format_lengths_at_their_boundaries(length, encoded):
    """One octet below 192, two up to 8383, five beyond (RFC 4880 §4.2.2)."""
    assert encode_length(length).hex() == encoded


@given(st.integers(0, 63), st.binary(max_size=9000))
def test_written_packets_read_back(tag, body):
    """Whatever is framed with packet() is read back by iter_packets() unchanged."""
    tag = max(tag, 1)
    assert list(iter_packets(packet(tag, body) + packet(tag, body))) == [(tag, body)] * 2


@pytest.mark.parametrize("style", ["new", "five", "old1", "old2", "old", "indeterminate"])
def test_every_header_encoding_is_read(style):
    """Old-format 1/2/4-octet and indeterminate lengths, new-format 1/2/5-octet."""
    body = bytes(range(200))
    assert list(iter_packets(reference_packet(Tag.LITERAL, body, style))) == [(Tag.LITERAL, body)]


def test_partial_body_lengths_are_joined():
    """Partial chunks (as GnuPG streams) make one body, on the packets that allow them."""
    body = bytes(range(256)) * 9
    framed = reference_packet(Tag.SEIPD, body, "partial")
    assert list(iter_packets(framed)) == [(Tag.SEIPD, body)]
    forbidden = reference_packet(Tag.PKESK, body, "partial")
    with pytest.raises(PacketError, match="partial"):
        list(iter_packets(forbidden))


@pytest.mark.parametrize(
    "data",
    [b"\x41\x00", b"\xc0\x00", b"\xcb\x05abc", b"\xcb", b"\xcb\xff\x00\x00"],
    ids=["no-high-bit", "tag-0", "short-body", "no-length", "short-length"],
)
def test_bad_framing_is_a_packet_error(data):
    """A header without its high bit, tag 0 or a body cut short raise PacketError."""
    with pytest.raises(PacketError):
        list(iter_packets(data))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "0000"), (1, "000101"), (255, "0008ff"), (256, "00090100"), (b"\x00\x00\x7f", "00077f")],
)
def test_mpis(value, encoded):
    """An MPI is the bit count and the big-endian value without leading zeros."""
    assert mpi(value).hex() == encoded
    reader = Reader(mpi(value))
    as_int = value if isinstance(value, int) else int.from_bytes(value, "big")
    assert reader.mpi() == as_int
    assert reader.remaining == 0


def test_reader_refuses_to_read_past_the_end():
    """Every read beyond the data raises PacketError, never IndexError."""
    reader = Reader(b"\x01\x02")
    assert reader.byte() == 1
    with pytest.raises(PacketError):
        reader.take(2)
    with pytest.raises(PacketError):
        Reader(b"").byte()
    with pytest.raises(PacketError):
        Reader(b"\x00\x10\x01").mpi()


def test_checksum16():
    """The two-octet sum of all octets, modulo 65536."""
    assert checksum16(b"") == b"\x00\x00"
    assert checksum16(b"\xff" * 258) == (255 * 258 % 65536).to_bytes(2, "big")


@pytest.mark.parametrize(
    ("algorithm", "names"),
    [("rsa3072", ("RSA-3072", "RSA-3072")), ("cv25519", ("Ed25519", "Curve25519"))],
)
def test_key_packets_are_read(algorithm, names):
    """Public key packets give their algorithm and a v4 fingerprint equal to PGPy's."""
    pair = mf.keypair(algorithm)
    _, binary = dearmor(pair.public_armored.encode())
    keys = [
        read_public_key(Reader(body))
        for tag, body in iter_packets(binary)
        if tag in (Tag.PUBLIC_KEY, Tag.PUBLIC_SUBKEY)
    ]
    assert tuple(key.description for key in keys) == names
    provider = ProviderKey.from_armored(pair.public_armored)
    assert [key.fingerprint.hex().upper() for key in keys] == [
        provider.fingerprint,
        provider.subkey_fingerprint,
    ]
    assert keys[1].key_id == keys[1].fingerprint[-8:]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"\x05" + bytes(5), "version 5"),
        (b"\x04" + bytes(4) + b"\x63" + bytes(32), "algorithm 99"),
        (b"\x04" + bytes(4) + b"\x19" + bytes(31), "truncated"),
        (b"\x04" + bytes(4) + b"\x01\x08\x00", "truncated"),
    ],
    ids=["v5", "unknown-algorithm", "truncated-x25519", "truncated"],
)
def test_unreadable_key_packets(body, reason):
    """Other key versions, algorithms not known here and truncated keys are PacketError."""
    with pytest.raises(PacketError, match=reason):
        read_public_key(Reader(body))


@pytest.mark.parametrize(
    ("algorithm", "size", "name"),
    [(25, 32, "X25519"), (26, 56, "X448"), (27, 32, "Ed25519"), (28, 57, "Ed448")],
)
def test_rfc9580_native_keys_are_read(algorithm, size, name):
    """RFC 9580's X25519/X448/Ed25519/Ed448 keys in v4 packets are read (fixed-size keys),
    so a key carrying one can name it instead of being unreadable.
    """
    body = b"\x04" + bytes(4) + bytes((algorithm,)) + bytes(range(size))
    key = read_public_key(Reader(body))
    assert (key.algorithm, key.mpis, key.description) == (algorithm, (bytes(range(size)),), name)
