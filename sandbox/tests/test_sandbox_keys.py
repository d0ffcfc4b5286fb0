"""The sandbox's own key pair: generated without PGPy, read back by the decryptor.

PGPy (an independent reader) checks the layout of generated keys, and the client's
:class:`~invoicing_async.ProviderKey` must accept them; GnuPG's verdict is in
``tests/system/test_interop.py``.
"""

from __future__ import annotations

import warnings

import messagefactory as mf
import pytest
from messagefactory import PAYLOAD, packet, packets, quiet

from invoicing_async import ProviderKey
from invoicing_sandbox import cached_keypair, generate_keypair
from invoicing_sandbox._keys import public_half
from invoicing_sandbox._pgp import Decryptor, InvalidKeyError

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import pgpy
    from pgpy.constants import (
        CompressionAlgorithm,
        Features,
        HashAlgorithm,
        KeyFlags,
        PubKeyAlgorithm,
        SignatureType,
        SymmetricKeyAlgorithm,
    )


# --------------------------------------------------------------------------- generation


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


def test_keypair_repr_hides_private_key():
    """Neither SandboxKeyPair nor Decryptor reveal secret key material in repr()."""
    cv_pair, cv_decryptor = mf.keypair("cv25519"), mf.decryptor("cv25519")
    assert "PRIVATE" not in repr(cv_pair)
    assert cv_pair.private_armored.splitlines()[2] not in repr(cv_pair)
    assert "cv25519" in repr(cv_pair)
    assert repr(cv_decryptor).startswith("Decryptor(key_ids=")


def test_generate_keypair_rejects_unknown_algorithm():
    """An algorithm outside the Literal is a programming error (ValueError)."""
    with pytest.raises(ValueError, match="unsupported algorithm"):
        generate_keypair("dsa1024")  # type: ignore[arg-type]


@pytest.mark.parametrize("algorithm", ["rsa2048", "cv25519"])
def test_generated_key_signatures(algorithm):
    """The self-signatures verify (PGPy), use SHA-256, and carry MDC and the issuer.

    The user id certification is a positive certification with the MDC feature; the
    subkey binding is signed by the primary key.
    """
    pair = generate_keypair(algorithm)
    with quiet():
        key, _ = pgpy.PGPKey.from_blob(pair.public_armored)
        uid = key.userids[0]
        assert uid.selfsig.type == SignatureType.Positive_Cert
        assert uid.selfsig.hash_algorithm == HashAlgorithm.SHA256
        assert Features.ModificationDetection in uid.selfsig.features
        assert uid.selfsig.signer == key.fingerprint.keyid
        assert bool(key.verify(uid))
        (subkey,) = key.subkeys.values()
        assert bool(key.verify(subkey))
        binding = next(s for s in subkey._signatures if s.type == SignatureType.Subkey_Binding)
        assert binding.hash_algorithm == HashAlgorithm.SHA256
        assert binding.signer == key.fingerprint.keyid


@pytest.mark.parametrize(
    ("algorithm", "name"), [("rsa2048", "RSA-2048"), ("cv25519", "Curve25519")]
)
def test_generated_key_is_a_valid_provider_key(algorithm, name):
    """The client's ProviderKey accepts the public half and encrypts to the subkey the
    decryptor holds; the round trip is byte-exact.
    """
    pair = generate_keypair(algorithm)
    key = ProviderKey.from_armored(pair.public_armored)
    decryptor = Decryptor(pair.private_armored)
    assert key.algorithm == name
    assert key.expires_at is None
    assert key.subkey_fingerprint != key.fingerprint
    assert key.subkey_fingerprint[-16:] in decryptor.key_ids
    assert decryptor.decrypt(key.encrypt(PAYLOAD)) == PAYLOAD


def test_cached_keypair_is_made_once():
    """cached_keypair hands every caller in the process the same pair."""
    assert cached_keypair("cv25519") is cached_keypair("cv25519")
    assert cached_keypair("cv25519") != cached_keypair("rsa2048")


def test_public_half_of_a_secret_key():
    """The public half of a secret key (what a key_file gives) is exactly its certificate."""
    for pair in (mf.keypair("cv25519"), mf.keypair("rsa3072")):
        assert public_half(pair.private_armored) == pair.public_armored
        assert "PRIVATE" not in public_half(pair.private_armored)


def test_public_half_refuses_a_public_key():
    """A public key holds no secret: the sandbox cannot decrypt with it (ValueError)."""
    with pytest.raises(ValueError, match="must hold a secret key"):
        public_half(mf.keypair("cv25519").public_armored)


# --------------------------------------------------------------------------- reading secret keys


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


def test_public_key_and_protected_key_refused():
    """A public key, or a passphrase-protected secret key, cannot build a Decryptor."""
    cv_pair = mf.keypair("cv25519")
    with pytest.raises(InvalidKeyError, match="no usable"):
        Decryptor(cv_pair.public_armored)
    with quiet():
        key, _ = pgpy.PGPKey.from_blob(cv_pair.private_armored)
        key.protect("pw", SymmetricKeyAlgorithm.AES256, HashAlgorithm.SHA256)
        protected = str(key)
    with pytest.raises(InvalidKeyError, match="protected"):
        Decryptor(protected)


def test_corrupt_secret_key_checksum():
    """A damaged secret MPI is caught by the secret-key checksum."""
    cv_pair = mf.keypair("cv25519")
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
def test_inconsistent_rsa_secret_key(tamper):
    """An RSA secret key whose MPIs do not fit together is InvalidKeyError.

    The checksum is correct; the cheap p*q == n and e*d == 1 checks catch it.
    """
    rsa_pair = mf.keypair("rsa3072")
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
