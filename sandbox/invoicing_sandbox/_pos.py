"""POS signatures: a key per issuer, deterministic signatures, verification. Pure.

The provider's own signing scheme is not in what we have of its documentation, so the
sandbox's is its own and minimal: it signs the request's JSON object in a canonical
form (:func:`canonical`: keys sorted, compact, UTF-8) with an Ed25519 key derived per
issuer from the sandbox's salt. A test verifies a signature with the issuer's public
key alone (:func:`verify_pos_signature`, :meth:`Sandbox.pos_public_key
<invoicing_sandbox.Sandbox.pos_public_key>`, ``GET /_sandbox/pos-keys/{tin}``).
Ed25519 signatures are deterministic: the same data signed again gives the same
signature, which is what makes re-sending a signing request after a lost answer safe.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import TYPE_CHECKING, Any

import attrs
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ALGORITHM", "PosSignature", "PosSigner", "canonical", "verify_pos_signature"]

#: The signature algorithm the sandbox's answers name.
ALGORITHM = "Ed25519"


def canonical(payload: Mapping[str, Any]) -> bytes:
    """The bytes a POS signature covers: ``payload`` as sorted, compact UTF-8 JSON."""
    text = json.dumps(
        payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


@attrs.frozen(kw_only=True)
class PosSignature:
    """A POS signature the sandbox issued: the ground truth of the signing operations.

    .. versionadded:: 0.3.0
    """

    environment: str
    client_id: str
    #: The issuer the data was signed for (the path's, or the payload's ``issuerTin``).
    issuer_tin: str
    #: ``PosSignatures`` or ``signpos``.
    operation: str
    #: The signed JSON object, as received.
    payload: dict[str, Any] = attrs.field(eq=False, repr=False)
    #: Base64 of the Ed25519 signature of the payload's canonical JSON (keys sorted,
    #: compact, UTF-8): :func:`verify_pos_signature` checks it.
    signature: str
    #: Requests that asked for this signature: more than 1 when the same data was sent
    #: again (a lost answer re-sent), which signs nothing new.
    requests: int = 1


class PosSigner:
    """One Ed25519 key per issuer, derived from ``salt``: a seeded sandbox signs alike."""

    def __init__(self, salt: str) -> None:
        self._salt = salt
        self._keys: dict[str, Ed25519PrivateKey] = {}

    def _key(self, issuer_tin: str) -> Ed25519PrivateKey:
        key = self._keys.get(issuer_tin)
        if key is None:
            seed = hashlib.sha256(f"{self._salt}\x00pos\x00{issuer_tin}".encode()).digest()
            key = self._keys[issuer_tin] = Ed25519PrivateKey.from_private_bytes(seed)
        return key

    def public_key(self, issuer_tin: str) -> bytes:
        """The issuer's raw 32-byte Ed25519 public key."""
        return (
            self._key(issuer_tin)
            .public_key()
            .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        )

    def sign(self, issuer_tin: str, payload: Mapping[str, Any]) -> str:
        """Base64 of the issuer's signature of :func:`canonical` ``(payload)``."""
        signature = self._key(issuer_tin).sign(canonical(payload))
        return base64.b64encode(signature).decode("ascii")


def verify_pos_signature(
    public_key: bytes | str, payload: Mapping[str, Any], signature: str | bytes
) -> bool:
    """Whether ``signature`` is the sandbox's POS signature of ``payload``.

    :param public_key: the issuer's public key: 32 raw bytes, or their base64 (as
        ``GET /_sandbox/pos-keys/{tin}`` gives it).
    :param payload: the JSON object that was signed.
    :param signature: the base64 text the sandbox answered (or the raw 64 bytes).

    .. versionadded:: 0.3.0
    """
    try:
        raw_key = (
            base64.b64decode(public_key, validate=True)
            if isinstance(public_key, str)
            else public_key
        )
        raw_signature = (
            base64.b64decode(signature, validate=True) if isinstance(signature, str) else signature
        )
        Ed25519PublicKey.from_public_bytes(raw_key).verify(raw_signature, canonical(payload))
    except (InvalidSignature, ValueError, binascii.Error):
        return False
    return True
