# Copyright (c) 2026 the invoicing_async developers. MIT License.
"""Mutated real keys: loading succeeds or raises ProviderKeyError, and so does encrypting.

Keys the interop peers make (GnuPG, Sequoia, pysequoia, OpenPGP.js, RNP, Bouncy Castle),
keys :mod:`keyfactory` makes with GnuPG and ``sq``, and the forged ones of
:mod:`forgedkeys`, mutated one to three times: a bit flipped, the tail cut, a packet
duplicated, two packets swapped, a packet removed, packets of another key spliced in,
random octets inserted; binary or armored. Whatever comes out, ``ProviderKey`` either
loads it or raises :class:`~invoicing_async.ProviderKeyError` with a documented reason,
and a loaded key's ``encrypt()`` either encrypts or raises ``ProviderKeyError``: nothing
else escapes, nothing hangs (each example has a deadline). The examples are derived from
a fixed seed (``derandomize``) with no example database, so every run tries the same ones.
"""

from __future__ import annotations

import datetime as dt
import functools

import forgedkeys as fk
import keyfactory as kf
import peerfactory as pf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_pgp_keys import REASONS

from invoicing_async import ProviderKey, ProviderKeyError
from invoicing_async._doc.pgp import PacketError, armor, dearmor, iter_packets, packet

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=dt.timedelta(seconds=3),  # a key loads in about a millisecond
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_SMALL_FORGED = [c for c in fk.CASES if c.defect != 9 and "oversized" not in c.name]


@functools.cache
def forged_corpus() -> tuple[bytes, ...]:
    """The forged keys (no peer needed), binary."""
    return tuple(case.made.data for case in _SMALL_FORGED)


@functools.cache
def peer_corpus() -> tuple[bytes, ...]:
    """Keys every installed peer makes, binary (skips when a peer is missing)."""
    armored = [
        pf.PEERS[name].generate(kind).public for name in pf.PEERS for kind in pf.PEERS[name].kinds
    ]
    armored += [
        factory().armored
        for factory in (
            kf.rsa3072,
            kf.cv25519,
            kf.nistp256,
            kf.sq_cv25519,
            kf.newest_subkey_revoked,
        )
    ]
    return tuple(dearmor(text.encode())[1] for text in armored)


def _packets(data: bytes) -> list[bytes]:
    """The packets of ``data`` re-framed; none when a mutation broke the framing."""
    try:
        return [packet(tag, body) for tag, body in iter_packets(data)]
    except PacketError:
        return []


@st.composite
def mutated(draw: st.DrawFn, source: str) -> bytes:
    """A key of the ``source`` corpus mutated one to three times, binary or armored."""
    corpus = forged_corpus() if source == "forged" else peer_corpus()
    data = draw(st.sampled_from(corpus))
    for _ in range(draw(st.integers(1, 3))):
        packets = _packets(data)
        kind = draw(st.sampled_from(["flip", "cut", "insert"] + ["packets"] * bool(packets)))
        where = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "packets":
            data = b"".join(_change_packets(draw, packets, corpus))
        elif kind == "flip" and data:
            bit = 1 << draw(st.integers(0, 7))
            data = data[:where] + bytes((data[where] ^ bit,)) + data[where + 1 :]
        elif kind == "cut":
            data = data[:where]
        else:
            data = data[:where] + draw(st.binary(min_size=1, max_size=16)) + data[where:]
    return armor(data, "PUBLIC KEY BLOCK") if draw(st.booleans()) else data


def _change_packets(
    draw: st.DrawFn, packets: list[bytes], corpus: tuple[bytes, ...]
) -> list[bytes]:
    """Duplicate, swap, strip or splice packets."""
    index = draw(st.integers(0, len(packets) - 1))
    other = draw(st.integers(0, len(packets) - 1))
    operation = draw(st.sampled_from(["duplicate", "swap", "strip", "splice"]))
    if operation == "duplicate":
        packets.insert(other, packets[index])
    elif operation == "swap":
        packets[index], packets[other] = packets[other], packets[index]
    elif operation == "strip":
        del packets[index]
    else:
        foreign = _packets(draw(st.sampled_from(corpus))) or [b""]
        start = draw(st.integers(0, len(foreign) - 1))
        packets[index:index] = foreign[start : start + draw(st.integers(1, 3))]
    return packets


def _judge(blob: bytes) -> None:
    """Load ``blob`` and encrypt to it: only ProviderKeyError may escape, with a known reason."""
    refusal: ProviderKeyError | None = None
    try:
        key = ProviderKey.from_armored(blob)
        assert repr(key)
        assert key.armored.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
        key.encrypt(b'{"fuzz": true}')
        key.encrypt_binary(b"")
    except ProviderKeyError as exc:
        refusal = exc
    if refusal is not None:
        assert refusal.reason in REASONS, refusal.reason
        assert str(refusal).strip()


@pytest.fixture(scope="module")
def forged() -> None:
    """The forged corpus, made before the examples (outside their deadline)."""
    forged_corpus()


@pytest.fixture(scope="module")
def peers() -> None:
    """The peers' corpus, made (or skipped) before the examples."""
    peer_corpus()


@settings(FUZZ, max_examples=1000)
@given(st.data())
def test_mutated_forged_keys_load_or_are_refused(forged, data: st.DataObject):
    """Mutated forged keys (every validation rule's key) never raise anything else."""
    _judge(data.draw(mutated("forged")))


@pytest.mark.interop
@settings(FUZZ, max_examples=600)
@given(st.data())
def test_mutated_peer_keys_load_or_are_refused(peers, data: st.DataObject):
    """Mutated keys of every interop peer and of keyfactory never raise anything else."""
    _judge(data.draw(mutated("peers")))
