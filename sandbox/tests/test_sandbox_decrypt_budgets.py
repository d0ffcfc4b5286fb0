"""The sandbox's decryptor on hostile messages: budgets for the whole message.

The sandbox runs as a service decrypting untrusted input. Each crafted message below once
cost seconds to minutes of CPU or fifty times its size in memory (issue 18); now each is
refused with the decryptor's typed error before the work is done. Time is not asserted
(the machine is shared); what is asserted is the work: private-key operations counted,
and the peak of Python's memory measured with ``tracemalloc`` against a generous bound.
"""

from __future__ import annotations

import os
import tracemalloc
import zlib

import messagefactory as mf
import pytest
from messagefactory import compressed, literal, packet

from invoicing_async._doc.pgp import mpi
from invoicing_sandbox._pgp import (
    Decryptor,
    MalformedMessageError,
    MessageTooLargeError,
    UnsupportedMessageError,
)
from invoicing_sandbox._pgp import _decrypt as decrypt_module
from invoicing_sandbox._pgp._decrypt import MAX_NESTING, MAX_OTHER_PACKETS, MAX_PKESKS

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def cv() -> tuple[mf.Crafted, Decryptor]:
    return mf.crafted(), mf.decryptor("cv25519")


@pytest.fixture(scope="module")
def rsa() -> tuple[mf.Crafted, Decryptor]:
    return mf.Crafted(mf.keypair("rsa3072").public_armored), mf.decryptor("rsa3072")


@pytest.fixture
def private_key_operations(monkeypatch) -> list[int]:
    """Every session key the decryptor tries to recover (one private-key operation each)."""
    calls: list[int] = []
    original = decrypt_module._session_key

    def counted(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(decrypt_module, "_session_key", counted)
    return calls


def _peak(call) -> tuple[BaseException | None, int]:
    """Run ``call``; what it raised, and the peak of traced memory meanwhile (octets)."""
    tracemalloc.start()
    try:
        call()
    except Exception as exc:  # the caller asserts which
        raised: BaseException | None = exc
    else:
        raised = None
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return raised, peak


def _deflate(data: bytes) -> bytes:
    return packet(8, b"\x02" + zlib.compress(data, 9))


# --------------------------------------------------------------------------- decompression


def test_sibling_compressed_packets_share_one_budget(cv):
    """Two compressed packets side by side, each inflating to 60% of the budget: the second
    is refused (each alone was within the old per-packet limit).
    """
    crafted, decryptor = cv
    budget = MIB + 65536  # max_size=1 MiB and its room for headers
    filler = packet(2, bytes(int(budget * 0.6)))  # a signature packet: skipped, not kept
    message = crafted.message(_deflate(filler) * 2 + literal(b"{}"))
    raised, peak = _peak(lambda: decryptor.decrypt(message, max_size=MIB))
    assert isinstance(raised, MessageTooLargeError), raised
    assert peak < 8 * MIB, f"peak {peak:,} octets"


def test_nested_compressed_packets_share_one_budget(cv):
    """A compressed packet inside another, each level inflating to 60% of the budget:
    refused, the nested one spending what the outer one left.
    """
    crafted, decryptor = cv
    budget = MIB + 65536
    inner = _deflate(packet(2, bytes(int(budget * 0.6))))
    outer = _deflate(inner + packet(2, bytes(int(budget * 0.6) - len(inner))))
    raised, _ = _peak(lambda: decryptor.decrypt(crafted.message(outer), max_size=MIB))
    assert isinstance(raised, MessageTooLargeError), raised


def test_a_bomb_of_tiny_packets_stops_at_the_packet_budget(cv):
    """Compressed packets inflating to a million empty marker packets each: refused at the
    33rd packet beside the literal data, not parsed a million times over.
    """
    crafted, decryptor = cv
    markers = _deflate(packet(10, b"") * 500_000)
    message = crafted.message(markers * 8 + literal(b"{}"))
    assert len(message) < 64 * 1024
    raised, peak = _peak(lambda: decryptor.decrypt(message))
    assert isinstance(raised, MalformedMessageError), raised
    assert "too many packets" in str(raised)
    assert peak < 16 * MIB, f"peak {peak:,} octets"


def test_nesting_is_bounded(cv):
    """Compressed packets nested one deeper than MAX_NESTING are refused."""
    crafted, decryptor = cv
    inner = literal(b"{}")
    for _ in range(MAX_NESTING):
        inner = compressed(0, inner)
    assert decryptor.decrypt(crafted.message(inner)) == b"{}"
    with pytest.raises(MalformedMessageError, match="nested"):
        decryptor.decrypt(crafted.message(compressed(0, inner)))


def test_signed_messages_stay_within_the_packet_budget(cv):
    """A one-pass signed message (one-pass signature, literal, signature) and markers up to
    the budget decrypt.
    """
    crafted, decryptor = cv
    one_pass = packet(4, b"\x03\x00\x08\x16" + bytes(8) + b"\x01")
    signature = packet(2, b"\x04\x00" + bytes(10))
    markers = packet(10, b"PGP") * (MAX_OTHER_PACKETS - 2)
    inner = markers + one_pass + literal(b"{}") + signature
    assert decryptor.decrypt(crafted.message(inner)) == b"{}"
    with pytest.raises(MalformedMessageError, match="too many packets"):
        decryptor.decrypt(crafted.message(packet(10, b"PGP") + inner))


# --------------------------------------------------------------------------- PKESKs


def _junk_pkesk(value: int) -> bytes:
    """A wildcard (hidden recipient) RSA PKESK holding a tiny ciphertext."""
    return packet(1, b"\x03" + bytes(8) + b"\x01" + mpi(value))


def test_fifty_thousand_pkesks_cost_no_private_key_operation(rsa, private_key_operations):
    """50,000 tiny wildcard RSA PKESKs (45 s of RSA-3072 operations before) are refused
    while the envelope is read, before any private-key operation.
    """
    crafted, decryptor = rsa
    message = b"".join(_junk_pkesk(n + 2) for n in range(50_000)) + crafted.message(b"")
    raised, peak = _peak(lambda: decryptor.decrypt(message))
    assert isinstance(raised, UnsupportedMessageError), raised
    assert f"more than {MAX_PKESKS}" in str(raised)
    assert private_key_operations == []
    assert peak < 8 * len(message), f"peak {peak:,} octets for {len(message):,}"


def test_the_first_session_key_that_decrypts_ends_the_search(rsa, private_key_operations):
    """Our PKESK first, then junk up to the cap: one private-key operation. Junk first, ours
    last: one per junk PKESK and key (a hidden recipient is tried with every key), then ours.
    """
    crafted, decryptor = rsa
    junk = b"".join(_junk_pkesk(n + 2) for n in range(MAX_PKESKS - 1))
    body = crafted.message(literal(b"{}"))
    assert decryptor.decrypt(body[: len(crafted.pkesks)] + junk + body[len(crafted.pkesks) :])
    assert len(private_key_operations) == 1
    private_key_operations.clear()
    assert decryptor.decrypt(junk + body) == b"{}"
    assert len(private_key_operations) == (MAX_PKESKS - 1) * len(decryptor.key_ids) + 1
    private_key_operations.clear()
    with pytest.raises(UnsupportedMessageError):
        decryptor.decrypt(_junk_pkesk(1) + junk + body)
    assert private_key_operations == []


def test_marker_packets_before_the_encrypted_data_are_bounded(cv):
    """A million marker packets in front of the message are refused after a few."""
    crafted, decryptor = cv
    message = packet(10, b"PGP") * 1_000_000 + crafted.message(literal(b"{}"))
    with pytest.raises(MalformedMessageError, match="too many packets"):
        decryptor.decrypt(message)


# --------------------------------------------------------------------------- partial lengths


def _partial(tag: int, body: bytes, first: int, then: int) -> bytes:
    """``body`` in a first partial chunk of 2**first octets, then chunks of 2**then."""
    out = [bytes((0xC0 | tag, 0xE0 | first)), body[: 1 << first]]
    position, size = 1 << first, 1 << then
    while len(body) - position > size:
        out += [bytes((0xE0 | then,)), body[position : position + size]]
        position += size
    out.append(packet(tag, body[position:])[1:])  # the last chunk: a definite length
    return b"".join(out)


def test_one_octet_partial_chunks_are_refused_in_small_memory(cv):
    """A 2 MiB message in one-octet partial chunks (once 50 times its size in memory) is
    refused: after the first 512-octet chunk only a few small ones are allowed.
    """
    crafted, decryptor = cv
    seipd_body = mf.seipd(crafted.session_key, literal(os.urandom(MIB)))
    message = crafted.pkesks + _partial(18, seipd_body, 9, 0)
    raised, peak = _peak(lambda: decryptor.decrypt(message))
    assert isinstance(raised, MalformedMessageError), raised
    assert "small partial" in str(raised)
    assert peak < 2 * len(message), f"peak {peak:,} octets for {len(message):,}"


def test_a_first_partial_chunk_under_512_octets_is_refused(cv):
    """RFC 4880 §4.2.2.4: the first partial length must be at least 512 octets."""
    crafted, decryptor = cv
    seipd_body = mf.seipd(crafted.session_key, literal(bytes(4096)))
    with pytest.raises(MalformedMessageError, match="first partial"):
        decryptor.decrypt(crafted.pkesks + _partial(18, seipd_body, 8, 9))


def test_a_large_stream_in_512_octet_chunks_decrypts_in_a_few_times_its_size(cv):
    """8 MiB streamed in 512-octet partial chunks (outer packet and literal) decrypts, with
    memory a small multiple of the message.
    """
    crafted, decryptor = cv
    data = os.urandom(8 * MIB)
    inner = _partial(11, b"b\x00\x00\x00\x00\x00" + data, 9, 9)
    message = crafted.pkesks + _partial(18, mf.seipd(crafted.session_key, inner), 9, 9)
    result: list[bytes] = []
    raised, peak = _peak(lambda: result.append(decryptor.decrypt(message)))
    assert raised is None
    assert result == [data]
    assert peak < 6 * len(message), f"peak {peak:,} octets for {len(message):,}"
