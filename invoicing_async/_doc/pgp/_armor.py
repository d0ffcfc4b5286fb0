"""ASCII armor (RFC 4880 §6): the one writer and the one reader of the package.

The writer is on the hot path: every document the client encrypts is armored, and a
bit-by-bit pure-Python CRC24 would cost more than the encryption. :func:`crc24` computes
the same checksum by folding polynomials over Python's big integers, which does the
per-bit work in C (``python -m benchmarks --only pgp`` measures the stage).

The reader (:func:`dearmor`) serves both the key loader and the sandbox's decryptor, so
both accept the same inputs: text before the armor, CRLF line endings, armor headers, a
missing CRC line. The CRC is not verified (RFC 9580 §6.1: receivers must not reject on
it; signatures and the MDC protect what matters).
"""

from __future__ import annotations

import base64
import binascii
import functools

__all__ = ["ArmorError", "armor", "crc24", "dearmor"]

_CRC24_INIT = 0xB704CE
_CRC24_POLY = 0x1864CFB
_BEGIN = b"-----BEGIN PGP "
_END = b"-----END PGP "


class ArmorError(ValueError):
    """The data looks armored but is not well-formed armor (the message says how)."""


def _mulmod(a: int, b: int) -> int:
    """Multiply two polynomials over GF(2) modulo the CRC24 polynomial."""
    result = 0
    while b:
        if b & 1:
            result ^= a
        b >>= 1
        a <<= 1
        if a & 0x1000000:
            a ^= _CRC24_POLY
    return result


def _xpow(k: int) -> int:
    """x^k mod P, by squaring and multiplying."""
    result, base = 1, 2
    while k:
        if k & 1:
            result = _mulmod(result, base)
        base = _mulmod(base, base)
        k >>= 1
    return result


@functools.lru_cache(maxsize=64)
def _fold(j: int) -> tuple[int, tuple[int, ...], int]:
    """Where to fold a value of 2^j..2^(j+1) bits: (k, set bits of x^k mod P, k-bit mask).

    Any k near 2^j halves the value; among the candidates, the one whose multiplier
    x^k mod P has the fewest set bits costs the fewest big-integer shifts (about 6
    instead of 12).
    """
    top = 1 << j
    low = max(25, top - min(63, top // 4))
    best_k, best_bits = top, _xpow(top)
    power = _xpow(low)
    for k in range(low, top + 1):
        if power.bit_count() < best_bits.bit_count():
            best_k, best_bits = k, power
        power = _mulmod(power, 2)
    return best_k, tuple(b for b in range(24) if best_bits >> b & 1), (1 << best_k) - 1


def crc24(data: bytes) -> int:
    """The OpenPGP armor checksum (RFC 4880 §6.1) of ``data``.

    The CRC is the remainder of ``init·x^8n + M(x)·x^24`` modulo the CRC polynomial. The
    message is read as one big integer and folded roughly in halves: the top part ``H``
    over ``x^k`` is replaced by ``H·(x^k mod P)``, a carry-less product by a 24-bit
    constant done with a few big-integer shifts and XORs. That runs in C, about ten times
    faster than a byte-table loop in Python.
    """
    n = len(data)
    value = (_CRC24_INIT << (8 * n)) ^ (int.from_bytes(data, "big") << 24)
    nbits = 8 * n + 24
    while nbits > 48:
        half, bits, mask = _fold((nbits - 1).bit_length() - 1)
        high = value >> half
        value &= mask
        for bit in bits:
            value ^= high << bit
        nbits = max(half, nbits - half + 24)
    for bit in range(nbits - 1, 23, -1):
        if value >> bit & 1:
            value ^= _CRC24_POLY << (bit - 24)
    return value


def armor(data: bytes, kind: str = "MESSAGE") -> bytes:
    """ASCII-armor ``data`` (64-column base64 and CRC24), as GnuPG and PGPy write it."""
    encoded = base64.b64encode(data)
    lines = [encoded[i : i + 64] for i in range(0, len(encoded), 64)]
    checksum = base64.b64encode(crc24(data).to_bytes(3, "big"))
    header = f"-----BEGIN PGP {kind}-----\n\n".encode("ascii")
    footer = f"\n={checksum.decode('ascii')}\n-----END PGP {kind}-----\n".encode("ascii")
    return header + b"\n".join(lines) + footer


def dearmor(data: bytes) -> tuple[str | None, bytes]:
    """The block type (``MESSAGE``, ``PUBLIC KEY BLOCK`` …) and binary content of ``data``.

    Binary OpenPGP (its first octet has the high bit set, as every packet header does)
    is returned unchanged with the type ``None``. Anything else must hold an armored
    block, possibly after other text; :class:`ArmorError` says what is wrong with it.
    """
    if data[:1] and data[0] & 0x80:
        return None, data
    start = data.find(_BEGIN)
    if start < 0:
        raise ArmorError("no OpenPGP data (neither binary packets nor an armor header line)")
    lines = data[start:].splitlines()
    header = lines[0].rstrip()
    if not header.endswith(b"-----") or len(header) <= len(_BEGIN) + 5:
        raise ArmorError("malformed armor header line")
    kind = header[len(_BEGIN) : -5].decode("ascii", "replace")
    body: list[bytes] = []
    in_headers = True
    for line in lines[1:]:
        stripped = line.strip()
        if stripped.startswith(_END):
            break
        if in_headers and b":" in stripped:
            continue  # an armor header ("Version: …"); ':' is not base64
        in_headers = False
        if stripped.startswith(b"=") and len(stripped) == 5:
            continue  # the CRC line
        body.append(stripped)
    else:
        raise ArmorError("missing armor tail line")
    try:
        return kind, base64.b64decode(b"".join(body), validate=True)
    except (binascii.Error, ValueError):
        raise ArmorError("invalid base64 in armor") from None
