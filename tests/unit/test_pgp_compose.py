"""The message composer, read back without GnuPG: shape, session key, literal packet.

The sandbox's decryptor and the hand-rolled readers here check what ``ProviderKey``
writes; GnuPG and Sequoia check it too in ``system/test_interop.py``.
"""

from __future__ import annotations

import warnings

import messagefactory as mf
import pytest

from invoicing_async import ProviderKey
from invoicing_async._doc.pgp import (
    PK_ECDH,
    PacketError,
    PublicKey,
    Reader,
    Tag,
    aes_cfb,
    dearmor,
    iter_packets,
    mpi,
    read_public_key,
)
from invoicing_async._doc.pgp._compose import recipient_for
from invoicing_sandbox._pgp import Decryptor
from invoicing_sandbox._pgp._decrypt import _session_key

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from pgpy.constants import EllipticCurveOID

DOCUMENT = '{"Series":"A","Number":1,"Note":"Αθήνα €"}'.encode()


@pytest.fixture(
    scope="module",
    params=["rsa3072", "cv25519", EllipticCurveOID.NIST_P256, EllipticCurveOID.NIST_P521],
    ids=["rsa3072", "cv25519", "nistp256", "nistp521"],
)
def key_and_decryptor(request):
    if isinstance(request.param, str):
        pair = mf.keypair(request.param)
        public, secret = pair.public_armored, pair.private_armored
    else:
        public, secret = mf.nist_pair(request.param)
    return ProviderKey.from_armored(public), Decryptor(secret)


def test_messages_decrypt_byte_exact(key_and_decryptor):
    """Armored and binary messages decrypt to the document, for RSA, Curve25519 and NIST."""
    key, decryptor = key_and_decryptor
    assert decryptor.decrypt(key.encrypt(DOCUMENT)) == DOCUMENT
    assert decryptor.decrypt(key.encrypt_binary(DOCUMENT)) == DOCUMENT
    assert decryptor.decrypt(key.encrypt(b"")) == b""


def test_message_shape(key_and_decryptor):
    """One PKESK v3 to the chosen subkey, then SEIPD v1 holding an AES-256 session key
    and one uncompressed literal packet in binary mode.
    """
    key, decryptor = key_and_decryptor
    packets = list(iter_packets(key.encrypt_binary(DOCUMENT)))
    assert [tag for tag, _ in packets] == [Tag.PKESK, Tag.SEIPD]
    pkesk, seipd = packets[0][1], packets[1][1]
    assert pkesk[0] == 3
    assert pkesk[1:9].hex().upper() == key.subkey_fingerprint[-16:]
    assert pkesk[9] == (PK_ECDH if key.algorithm != "RSA-3072" else 1)
    assert seipd[0] == 1
    found = _session_key(decryptor._keys[pkesk[1:9]], pkesk[9], pkesk[10:])
    assert found is not None
    cipher, session_key = found
    assert (cipher, len(session_key)) == (9, 32)
    decrypting = aes_cfb(session_key).decryptor()
    plaintext = decrypting.update(seipd[1:]) + decrypting.finalize()
    [(tag, literal)] = list(iter_packets(plaintext[18:-22]))
    assert tag == Tag.LITERAL
    assert literal == b"b\x00\x00\x00\x00\x00" + DOCUMENT
    assert plaintext[-22:-20] == b"\xd3\x14"


def test_every_message_has_its_own_session_key(key_and_decryptor):
    """The same document encrypted twice gives two different messages."""
    key, _ = key_and_decryptor
    assert key.encrypt_binary(DOCUMENT) != key.encrypt_binary(DOCUMENT)


CV25519_OID = bytes.fromhex("2b060104019755010501")
POINT = b"\x40" + bytes(range(1, 33))


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        (PublicKey(b"\x04", 22, (POINT,), bytes.fromhex("2b06010401da470f01")), "cannot receive"),
        (PublicKey(b"\x04", 17, (b"\x01",) * 4), "cannot receive"),
        (PublicKey(b"\x04", PK_ECDH, (POINT,), b"\x01", b"\x03\x01\x08\x07"), "cannot receive"),
        (PublicKey(b"\x04", PK_ECDH, (POINT,), CV25519_OID, b"\x03\x01\x02\x07"), "KDF"),
        (PublicKey(b"\x04", PK_ECDH, (POINT,), CV25519_OID, b"\x03\x01\x08\x04"), "key wrap"),
        (PublicKey(b"\x04", PK_ECDH, (POINT[1:],), CV25519_OID, b"\x03\x01\x08\x07"), "point"),
        (PublicKey(b"\x04", 1, (mpi(15)[2:], b"\x02")), "public numbers"),
    ],
    ids=["eddsa", "dsa", "unknown-curve", "sha1-kdf", "cast5-wrap", "bad-point", "bad-rsa"],
)
def test_keys_messages_cannot_be_built_for(key, reason):
    """Signing algorithms, unknown curves, KDFs or key wraps outside RFC 6637's AES and
    SHA-2, and invalid public numbers are refused with PacketError saying which.
    """
    with pytest.raises(PacketError, match=reason):
        recipient_for(key)


def test_a_valid_public_key_round_trips_through_the_reader():
    """recipient_for takes what read_public_key gives: the key id is the fingerprint's tail."""
    pair = mf.keypair("cv25519")
    key = ProviderKey.from_armored(pair.public_armored)
    _, binary = dearmor(pair.public_armored.encode())
    [subkey] = [
        read_public_key(Reader(body))
        for tag, body in iter_packets(binary)
        if tag == Tag.PUBLIC_SUBKEY
    ]
    assert recipient_for(subkey).key_id.hex().upper() == key.subkey_fingerprint[-16:]
