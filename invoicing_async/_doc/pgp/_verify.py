"""The mathematics of self-signatures: each signed subject hashed once, cheap checks first.

A key's validity rests on the signatures its primary key made over its own parts
(RFC 9580 §5.2.4): the primary key alone (direct-key signatures, key revocations), the
primary key and a user id (certifications), the primary key and a subkey (bindings). A
:class:`Subject` is one of those, framed for hashing: its hash state is computed once per
hash algorithm and *copied* for each signature, so a large user id under many signatures
is hashed once, not once per signature (hostile keys made that quadratic). A
:class:`Verifier` is the primary key as the signer, its ``cryptography`` key built once;
before it hashes anything it checks what costs nothing (the public-key algorithm, the
issuer, a hash id it knows), and before the public-key operation the two octets of the
digest every signature carries.

The mathematics is ``cryptography``'s: RSA PKCS#1 v1.5, DSA, ECDSA on the NIST and
Brainpool curves and secp256k1, EdDSA (the legacy Ed25519 form and RFC 9580's
Ed25519/Ed448) over the prehashed digest. Which signatures *count* is decided elsewhere
(:mod:`._validity`); here only whether one was made by the key over a subject.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed, encode_dss_signature

from ._packets import (
    CURVES,
    PK_DSA,
    PK_ECDSA,
    PK_ED448,
    PK_ED25519,
    PK_EDDSA,
    PK_RSA,
    PublicKey,
    key_hash_prefix,
)
from ._sigs import HASHES

if TYPE_CHECKING:
    from ._sigs import Signature

__all__ = ["Subject", "Verifier", "can_verify", "key_subject", "user_id_subject"]

# Curves whose ECDSA signatures can be checked: the NIST ones, and those a key may be
# signed on even though nothing here encrypts to them.
_ECDSA_CURVES: Final[dict[bytes, ec.EllipticCurve]] = {
    **{oid: curve for oid, (_, curve) in CURVES.items() if curve is not None},
    bytes.fromhex("2b2403030208010107"): ec.BrainpoolP256R1(),
    bytes.fromhex("2b240303020801010b"): ec.BrainpoolP384R1(),
    bytes.fromhex("2b240303020801010d"): ec.BrainpoolP512R1(),
    bytes.fromhex("2b8104000a"): ec.SECP256K1(),
}


def key_subject(body: bytes) -> bytes:
    """A v4 key packet as signatures hash it."""
    return key_hash_prefix(body)


def user_id_subject(tag: int, body: bytes) -> tuple[bytes, bytes]:
    """A user id (tag 13) or user attribute (tag 17) as certifications hash it."""
    return (b"\xb4" if tag == 13 else b"\xd1") + len(body).to_bytes(4, "big"), body


class Subject:
    """What a signature is made over, its hash state kept per algorithm for every signature."""

    __slots__ = ("_contexts", "_parts")

    def __init__(self, *parts: bytes) -> None:
        self._parts = parts
        self._contexts: dict[int, Any] = {}

    def digest(self, signature: Signature) -> bytes | None:
        """The digest ``signature`` signs over this subject; None if the hash is unavailable."""
        algorithm = signature.hash_algorithm
        context = self._contexts.get(algorithm)
        if context is None:
            try:
                context = hashlib.new(HASHES[algorithm].lower())
            except (KeyError, ValueError):
                return None
            for part in self._parts:
                context.update(part)
            self._contexts[algorithm] = context
        context = context.copy()
        context.update(signature.hashed)
        context.update(b"\x04\xff" + len(signature.hashed).to_bytes(4, "big"))
        digest: bytes = context.digest()
        return digest


def _public_key(key: PublicKey) -> object:
    """The ``cryptography`` public key signatures by ``key`` are checked with."""
    if key.algorithm in PK_RSA:
        n, e = (int.from_bytes(value, "big") for value in key.mpis)
        return rsa.RSAPublicNumbers(e, n).public_key()
    if key.algorithm == PK_DSA:
        p, q, g, y = (int.from_bytes(value, "big") for value in key.mpis)
        return dsa.DSAPublicNumbers(y, dsa.DSAParameterNumbers(p, q, g)).public_key()
    if key.algorithm == PK_ECDSA and key.oid in _ECDSA_CURVES:
        return ec.EllipticCurvePublicKey.from_encoded_point(_ECDSA_CURVES[key.oid], key.mpis[0])
    if key.algorithm == PK_EDDSA:
        point = key.mpis[0]
        if len(point) != 33 or point[0] != 0x40:
            raise ValueError("invalid Ed25519 point")
        return ed25519.Ed25519PublicKey.from_public_bytes(point[1:])
    if key.algorithm == PK_ED25519:
        return ed25519.Ed25519PublicKey.from_public_bytes(key.mpis[0])
    if key.algorithm == PK_ED448:
        return ed448.Ed448PublicKey.from_public_bytes(key.mpis[0])
    raise ValueError(f"cannot verify {key.description} signatures")


def _dss(material: tuple[bytes, ...]) -> bytes:
    """DSA and ECDSA's two MPIs as the DER signature ``cryptography`` checks."""
    r, s = (int.from_bytes(value, "big") for value in material)
    return encode_dss_signature(r, s)


def can_verify(key: PublicKey) -> bool:
    """Whether signatures made by ``key`` can be checked here at all."""
    if key.algorithm in (*PK_RSA, PK_DSA, PK_ED25519, PK_ED448):
        return True
    if key.algorithm == PK_ECDSA:
        return key.oid in _ECDSA_CURVES
    return key.algorithm == PK_EDDSA and CURVES.get(key.oid, ("",))[0] == "Ed25519"


class Verifier:
    """The primary key as the maker of self-signatures.

    :attr:`checks` counts the public-key operations spent (for budgets and tests).
    """

    __slots__ = ("_public", "checks", "key", "key_id")

    def __init__(self, key: PublicKey) -> None:
        self.key = key
        self.key_id = key.key_id
        self.checks = 0
        self._public: object = None

    def plausible(self, signature: Signature) -> bool:
        """Whether ``signature`` may be this key's at all, before anything is hashed."""
        return (
            signature.pk_algorithm == self.key.algorithm
            and signature.issuer in (None, self.key_id)
            and signature.hash_algorithm in HASHES
        )

    def claims(self, signature: Signature, subject: Subject) -> bytes | None:
        """The digest ``signature`` signs if it may be this key's over ``subject``, or None.

        No public-key operation: the cheap checks (:meth:`plausible`), then the hash (from
        the subject's kept state) and the two octets every signature carries. None also
        when the hash is unavailable here (RIPEMD-160 on OpenSSL 3).
        """
        if not self.plausible(signature):
            return None
        digest = subject.digest(signature)
        if digest is None or digest[:2] != signature.left16:
            return None
        return digest

    def check(self, signature: Signature, digest: bytes) -> bool:
        """Whether this key made ``signature`` over what hashes to ``digest``.

        The mathematics only: the hash policy, the signature's lifetime and its type are
        the caller's to check. A signature that cannot be checked here (an algorithm
        ``cryptography`` lacks) is not verified.
        """
        self.checks += 1
        try:
            self._check(signature, digest)
        except (InvalidSignature, UnsupportedAlgorithm, ValueError, TypeError):
            return False
        return True

    def _check(self, signature: Signature, digest: bytes) -> None:
        """Raise unless the signature material is right for ``digest``."""
        if self._public is None:
            self._public = _public_key(self.key)
        public: Any = self._public
        hash_class = getattr(hashes, HASHES[signature.hash_algorithm], None)
        if hash_class is None:
            raise UnsupportedAlgorithm(f"{signature.hash_name} is not available")
        algorithm: hashes.HashAlgorithm = hash_class()
        material = signature.material
        if isinstance(public, rsa.RSAPublicKey):
            signed = material[0].rjust((public.key_size + 7) // 8, b"\x00")
            public.verify(signed, digest, padding.PKCS1v15(), Prehashed(algorithm))
        elif isinstance(public, dsa.DSAPublicKey):
            public.verify(_dss(material), digest, Prehashed(algorithm))
        elif isinstance(public, ec.EllipticCurvePublicKey):
            public.verify(_dss(material), digest, ec.ECDSA(Prehashed(algorithm)))
        elif self.key.algorithm == PK_EDDSA:
            public.verify(b"".join(value.rjust(32, b"\x00") for value in material), digest)
        else:
            public.verify(material[0], digest)
