"""The sandbox's decryptor: what a provider must accept from real clients, and nothing more.

The sandbox decrypts every ``/Invoice/secure`` request. :class:`Decryptor` parses the
secret key once into ``cryptography`` key objects (re-validating an RSA key per message,
as PGPy does, costs far more than decrypting), so each message costs one private-key
operation plus AES, and it reads only what clients send.

Accepted, because GnuPG, Sequoia and this library send it: PKESK v3 (RSA,
ECDH on Curve25519 and NIST P-256/384/521, also with a hidden recipient), SEIPD v1 with
MDC, AES-128/192/256, uncompressed, ZIP or ZLIB data (GnuPG compresses by default),
partial body lengths, literal data in any format. Refused with a precise error: the old
SED packet (not integrity protected: malleable, EFAIL), AEAD and SEIPD v2, v6 PKESKs,
password-only messages, pre-AES ciphers and BZip2 (offered by no key the sandbox makes).

Framing, armor, CFB and the ECDH KDF are the client's own, beside its composer (through
:mod:`invoicing_async._for_sandbox`): one definition for both ends of the wire, while the
decryption code ships in the sandbox alone. Every failure is an :class:`OpenPGPError`
subclass whose message holds no key material and no plaintext, so the sandbox can
answer it as a 400 instead of crashing on hostile input.

The sandbox runs as a service decrypting untrusted input, so a message gets budgets for
the whole of it, each refused early with a typed error and memory a small multiple of
the input:

* at most :data:`MAX_PKESKS` PKESK packets (``UnsupportedMessageError``), GnuPG-like,
  tried in order, stopping at the first session key that decrypts (each costs one
  private-key operation), and at most :data:`MAX_OTHER_PACKETS` SKESK and marker
  packets before the encrypted data (``MalformedMessageError``);
* one decompression budget shared by every compressed packet of the message, siblings
  and nested ones alike (``MessageTooLargeError``), compressed packets nested at most
  :data:`MAX_NESTING` deep, and at most :data:`MAX_OTHER_PACKETS` packets beside the
  literal data inside (``MalformedMessageError``);
* partial body lengths as the client's ``iter_packets`` bounds them: a first chunk of
  512 octets or more, few small chunks after it (``MalformedMessageError``).
"""

from __future__ import annotations

import hashlib
import hmac
import zlib
from typing import Final, TypeAlias

from cryptography.hazmat.primitives import keywrap
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, x25519

from invoicing_async._for_sandbox import (
    AES_KEY_SIZES,
    PK_ECDH,
    PK_RSA,
    ArmorError,
    PacketError,
    Reader,
    Tag,
    aes_cfb,
    checksum16,
    dearmor,
    ecdh_kek,
    iter_packets,
)

from ._secret import DecryptionKey, InvalidKeyError, OpenPGPError, load_decryption_keys

__all__ = [
    "MAX_NESTING",
    "MAX_OTHER_PACKETS",
    "MAX_PKESKS",
    "Decryptor",
    "IntegrityError",
    "InvalidKeyError",
    "MalformedMessageError",
    "MessageTooLargeError",
    "NotIntegrityProtectedError",
    "OpenPGPError",
    "UnsupportedMessageError",
    "WrongKeyError",
]


class MalformedMessageError(OpenPGPError):
    """The input is not a well-formed OpenPGP message (bad armor, framing, ...)."""


class NotIntegrityProtectedError(OpenPGPError):
    """The message uses a Symmetrically Encrypted Data packet (tag 9): no MDC, malleable."""


class UnsupportedMessageError(OpenPGPError):
    """The message uses a feature deliberately left out (see the module docstring)."""


class WrongKeyError(OpenPGPError):
    """No session key in the message is addressed to one of our keys."""


class IntegrityError(OpenPGPError):
    """Corrupt session key, bad quick check or MDC mismatch: deliberately one error.

    Telling the cases apart would hand out a padding/quick-check oracle.
    """


class MessageTooLargeError(OpenPGPError):
    """The (decompressed) plaintext exceeds the caller's ``max_size``."""


_DEFAULT_MAX_SIZE: Final = 16 * 1024 * 1024
#: Compressed packets inside compressed packets: legitimate senders never nest them (a
#: sender compresses once); quine bombs do.
MAX_NESTING: Final = 8
#: PKESK packets a message may carry: each may cost a private-key operation. GnuPG-like
#: (a message to a few dozen recipients); the library writes one.
MAX_PKESKS: Final = 32
#: Packets skipped without use (markers, SKESKs before the encrypted data; signatures,
#: one-pass signatures and markers beside the literal data): a signed message has two.
MAX_OTHER_PACKETS: Final = 32
_ZERO_KEY_ID: Final = bytes(8)

_SessionKey: TypeAlias = tuple[int, bytes]  # (symmetric algorithm id, key)


def _split_session_key(payload: bytes) -> _SessionKey | None:
    """Split ``algo || key || checksum`` and verify it; ``None`` if invalid.

    A valid checksum with an algorithm left out (Twofish, CAST5 …) is unsupported rather
    than corrupt: the sender chose it.
    """
    if len(payload) < 3 or checksum16(payload[1:-2]) != payload[-2:]:
        return None
    algo, key = payload[0], payload[1:-2]
    size = AES_KEY_SIZES.get(algo)
    if size is None:
        raise UnsupportedMessageError(f"unsupported symmetric algorithm {algo}")
    return (algo, key) if len(key) == size else None


def _rsa_session_key(key: DecryptionKey, reader: Reader) -> _SessionKey | None:
    """RSA: PKCS#1 v1.5, then ``algo || key || checksum``.

    OpenSSL's implicit rejection answers bad padding with a random message instead of
    an error; the checksum and length checks then fail, as they should.
    """
    assert isinstance(key.private_key, rsa.RSAPrivateKey)  # noqa: S101  (chosen by the caller)
    ciphertext = reader.mpi_bytes()
    if len(ciphertext) > key.modulus_bytes:
        return None
    try:
        padded = ciphertext.rjust(key.modulus_bytes, b"\x00")
        payload = key.private_key.decrypt(padded, padding.PKCS1v15())
    except ValueError:
        return None
    return _split_session_key(payload)


def _ecdh_session_key(key: DecryptionKey, reader: Reader) -> _SessionKey | None:
    """ECDH (RFC 6637): shared secret, KDF, AES key unwrap, PKCS#5 unpadding."""
    ephemeral = reader.mpi_bytes()
    wrapped = reader.take(reader.byte())
    private_key = key.private_key
    try:
        if isinstance(private_key, x25519.X25519PrivateKey):
            if len(ephemeral) != 33 or ephemeral[0] != 0x40:
                return None
            shared = private_key.exchange(x25519.X25519PublicKey.from_public_bytes(ephemeral[1:]))
        elif isinstance(private_key, ec.EllipticCurvePrivateKey):
            peer = ec.EllipticCurvePublicKey.from_encoded_point(private_key.curve, ephemeral)
            shared = private_key.exchange(ec.ECDH(), peer)
        else:
            return None
        padded = keywrap.aes_key_unwrap(ecdh_kek(shared, key.kdf_param, key.kdf), wrapped)
    except (keywrap.InvalidUnwrap, ValueError):  # a bad point, an all-zero X25519 output
        return None
    pad = padded[-1] if padded else 0
    if not 1 <= pad <= min(8, len(padded)) or padded[-pad:] != bytes([pad]) * pad:
        return None
    return _split_session_key(padded[:-pad])


def _session_key(key: DecryptionKey, pk_algo: int, rest: bytes) -> _SessionKey | None:
    """One PKESK's session key as ``key`` decrypts it, or ``None``."""
    try:
        if pk_algo in PK_RSA and isinstance(key.private_key, rsa.RSAPrivateKey):
            return _rsa_session_key(key, Reader(rest))
        if pk_algo == PK_ECDH and not isinstance(key.private_key, rsa.RSAPrivateKey):
            return _ecdh_session_key(key, Reader(rest))
    except PacketError:
        return None
    return None


class _Budget:
    """What the whole plaintext may still cost: decompressed octets and skipped packets."""

    __slots__ = ("octets", "packets")

    def __init__(self, octets: int) -> None:
        self.octets = octets
        self.packets = MAX_OTHER_PACKETS

    def inflate(self, algo: int, data: bytes) -> bytes:
        """Inflate a Compressed Data body within the octets left, and spend them."""
        if algo == 0:
            output = data
        elif algo in (1, 2):
            inflater = zlib.decompressobj(-15 if algo == 1 else 15)
            try:
                output = inflater.decompress(data, self.octets + 1)
            except zlib.error:
                raise MalformedMessageError("corrupt compressed data") from None
            if len(output) <= self.octets and not inflater.eof:
                raise MalformedMessageError("truncated compressed data")
        else:
            raise UnsupportedMessageError(f"unsupported compression algorithm {algo}")
        self.octets -= len(output)
        if self.octets < 0:
            raise MessageTooLargeError("the decompressed message exceeds the size limit")
        return output

    def skip(self) -> None:
        """Count a packet skipped without use."""
        self.packets -= 1
        if self.packets < 0:
            raise MalformedMessageError("too many packets beside the literal data")


def _collect_literals(data: bytes, budget: _Budget, depth: int, found: list[bytes]) -> None:
    """Walk the decrypted packets, appending literal data bodies.

    Signatures, one-pass signatures and marker packets are skipped: the sandbox needs
    the document, not sender authentication.
    """
    for tag, body in iter_packets(data):
        if tag == Tag.LITERAL:
            reader = Reader(body)
            reader.byte()  # format b/t/u/m: the data is returned unchanged regardless
            reader.take(reader.byte())  # file name
            reader.take(4)  # date
            found.append(reader.rest())
        elif tag == Tag.COMPRESSED:
            if depth >= MAX_NESTING:
                raise MalformedMessageError("compressed packets nested too deeply")
            if not body:
                raise MalformedMessageError("empty compressed data packet")
            _collect_literals(budget.inflate(body[0], body[1:]), budget, depth + 1, found)
        elif tag in (Tag.SIGNATURE, Tag.ONE_PASS_SIGNATURE, Tag.MARKER):
            budget.skip()
        else:
            raise MalformedMessageError(f"unexpected packet type {tag} in plaintext")
        if len(found) > 1:
            raise MalformedMessageError("more than one literal data packet")


def _decrypt_seipd(key: bytes, ciphertext: bytes) -> bytes | None:
    """The plaintext of a SEIPD v1 body (after its version octet); ``None`` if not authentic."""
    if len(ciphertext) < 16 + 2 + 22:
        return None
    # The quick check first, on two blocks: a wrong key costs no pass over the message.
    head = aes_cfb(key).decryptor().update(ciphertext[:18])
    if head[14:16] != head[16:18]:
        return None
    decryptor = aes_cfb(key).decryptor()
    plaintext = decryptor.update(ciphertext) + decryptor.finalize()
    quick_ok = plaintext[14:16] == plaintext[16:18]
    mdc = hashlib.sha1(plaintext[:-20], usedforsecurity=False).digest()
    if not (
        quick_ok and plaintext[-22:-20] == b"\xd3\x14" and hmac.compare_digest(mdc, plaintext[-20:])
    ):
        return None
    return plaintext[18:-22]


_NOT_ENCRYPTED: Final = (UnsupportedMessageError, "message is not encrypted")
# Outer packets refused outright, before spending any private-key operation.
_OUTER_REFUSALS: Final[dict[int, tuple[type[OpenPGPError], str]]] = {
    Tag.SED: (
        NotIntegrityProtectedError,
        "message is not integrity protected (SED packet without MDC)",
    ),
    Tag.AEAD: (UnsupportedMessageError, "AEAD encrypted data packets are not supported"),
    Tag.LITERAL: _NOT_ENCRYPTED,
    Tag.COMPRESSED: _NOT_ENCRYPTED,
    Tag.ONE_PASS_SIGNATURE: _NOT_ENCRYPTED,
    Tag.SIGNATURE: _NOT_ENCRYPTED,
}


class _Envelope:
    """The packets before the encrypted data, counted as they come."""

    __slots__ = ("encrypted", "others", "pkesks", "saw_skesk")

    def __init__(self) -> None:
        self.pkesks: list[bytes] = []
        self.encrypted: bytes | None = None
        self.saw_skesk = False
        self.others = 0

    def add(self, tag: int, body: bytes) -> None:
        """Take the next outer packet, refusing what the sandbox does not accept."""
        if self.encrypted is not None:
            raise MalformedMessageError("trailing data after encrypted data packet")
        refusal = _OUTER_REFUSALS.get(tag)
        if refusal is not None:
            raise refusal[0](refusal[1])
        if tag == Tag.PKESK:
            self.pkesks.append(body)
            if len(self.pkesks) > MAX_PKESKS:
                raise UnsupportedMessageError(
                    f"messages to more than {MAX_PKESKS} public keys (PKESK packets) "
                    "are not supported"
                )
        elif tag == Tag.SEIPD:
            self.encrypted = body
        elif tag in (Tag.SKESK, Tag.MARKER):
            self.saw_skesk = self.saw_skesk or tag == Tag.SKESK
            self.others += 1
            if self.others > MAX_OTHER_PACKETS:
                raise MalformedMessageError("too many packets before the encrypted data")
        else:
            raise MalformedMessageError(f"unexpected packet type {tag}")


def _parse_envelope(binary: bytes) -> tuple[list[bytes], bytes, bool]:
    """``(PKESK bodies, SEIPD v1 ciphertext after its version octet, saw an SKESK)``."""
    envelope = _Envelope()
    for tag, body in iter_packets(binary):
        envelope.add(tag, body)
    encrypted = envelope.encrypted
    if encrypted is None:
        raise MalformedMessageError("no encrypted data packet")
    if not encrypted or encrypted[0] != 1:
        raise UnsupportedMessageError("only SEIPD version 1 is supported")
    return envelope.pkesks, encrypted[1:], envelope.saw_skesk


def _first_plaintext(
    keys: list[DecryptionKey], pk_algo: int, rest: bytes, encrypted: bytes
) -> tuple[bytes | None, bool]:
    """The plaintext with the first of ``keys`` whose session key decrypts.

    Also whether any key gave a well-formed session key at all.
    """
    found = False
    for key in keys:
        session_key = _session_key(key, pk_algo, rest)
        if session_key is not None:
            found = True
            plaintext = _decrypt_seipd(session_key[1], encrypted)
            if plaintext is not None:
                return plaintext, True
    return None, found


class Decryptor:
    """Decrypts OpenPGP messages addressed to one secret key, fast.

    All expensive work (parsing, building ``cryptography`` key objects) happens once in
    ``__init__``; :meth:`decrypt` then costs one private-key operation plus AES.
    Immutable after construction: safe to share between threads.
    """

    __slots__ = ("_keys",)

    def __init__(self, private_armored: str | bytes) -> None:
        """Load every decryption-capable (sub)key of an unprotected secret key.

        Raises :class:`InvalidKeyError` if the data holds no usable key.
        """
        self._keys: dict[bytes, DecryptionKey] = load_decryption_keys(private_armored)

    @property
    def key_ids(self) -> frozenset[str]:
        """Upper-case hex key ids of the keys this decryptor can use."""
        return frozenset(key_id.hex().upper() for key_id in self._keys)

    def __repr__(self) -> str:
        return f"Decryptor(key_ids={sorted(self.key_ids)!r})"

    def decrypt(self, data: bytes, *, max_size: int = _DEFAULT_MAX_SIZE) -> bytes:
        """Decrypt an armored or binary OpenPGP message and return the literal data.

        ``max_size`` bounds the returned plaintext and every decompression step (a
        decompression-bomb guard). Any problem with ``data`` raises an
        :class:`OpenPGPError` subclass; nothing else escapes for bad input.
        """
        if max_size < 0:
            raise ValueError("max_size must be non-negative")
        # Room for packet headers around the literal data inside compression.
        limit = max_size + max(65536, max_size // 8)
        # Armor inflates by 4/3 and compression only shrinks realistic payloads.
        if len(data) > 4 * limit:
            raise MessageTooLargeError(
                f"message of {len(data)} bytes exceeds the size limit: the limit of {max_size} "
                "bytes of data"
            )
        try:
            return self._decrypt(bytes(data), max_size, limit)
        except (ArmorError, PacketError) as exc:
            raise MalformedMessageError(str(exc)) from None
        except MessageTooLargeError as exc:
            raise MessageTooLargeError(f"{exc}: the limit of {max_size} bytes") from None

    def _decrypt(self, data: bytes, max_size: int, limit: int) -> bytes:
        kind, binary = dearmor(data)
        if kind not in (None, "MESSAGE"):
            raise MalformedMessageError(f"unexpected armor block {kind}")
        pkesks, encrypted, saw_skesk = _parse_envelope(binary)
        plaintext = self._plaintext(pkesks, encrypted, saw_skesk=saw_skesk)
        found: list[bytes] = []
        _collect_literals(plaintext, _Budget(limit), 0, found)
        if not found:
            raise MalformedMessageError("no literal data packet")
        if len(found[0]) > max_size:
            raise MessageTooLargeError(f"the data of {len(found[0])} bytes exceeds the size limit")
        return found[0]

    def _plaintext(self, pkesks: list[bytes], encrypted: bytes, *, saw_skesk: bool) -> bytes:
        """The decrypted SEIPD with the first session key that decrypts it.

        PKESKs are tried in order, each with the key it names (a wildcard, all-zero key id:
        every key, the recipient is hidden by design), until a session key decrypts the
        message. Naming one of our keys turns a failure into ``IntegrityError`` rather
        than ``WrongKeyError``.
        """
        addressed = wildcard = unsupported = found = False
        for body in pkesks:
            reader = Reader(body)
            if reader.byte() != 3:
                unsupported = True  # v6 (RFC 9580) or unknown
                continue
            key_id = reader.take(8)
            if key_id == _ZERO_KEY_ID:
                wildcard, keys = True, list(self._keys.values())
            elif key_id in self._keys:
                addressed, keys = True, [self._keys[key_id]]
            else:
                continue
            plaintext, tried = _first_plaintext(keys, reader.byte(), reader.rest(), encrypted)
            if plaintext is not None:
                return plaintext
            found = found or tried
        if addressed:
            raise IntegrityError("decryption failed: message is corrupt")
        if found or wildcard or not (unsupported or saw_skesk):
            raise WrongKeyError("message is not encrypted to this key")
        if unsupported:
            raise UnsupportedMessageError("unsupported PKESK version")
        raise UnsupportedMessageError("password-encrypted messages are not supported")
