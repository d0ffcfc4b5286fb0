"""What a shared token store keeps, independent of the backend's I/O.

Key names, the Lua scripts of the fleet's lock and fenced writes, and the stored value
(optionally sealed with AES-GCM). :mod:`invoicing_async.redis` does the I/O.
"""

from __future__ import annotations

import base64
import json
import os
from typing import TYPE_CHECKING, Any

import attrs
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from invoicing_async._core.log import auth as log
from invoicing_async._core.models import AccessToken
from invoicing_async._doc.document import dumps

if TYPE_CHECKING:
    from .tokenstore import CredentialsKey

__all__ = [
    "ACQUIRE",
    "DISCARD",
    "EXTEND",
    "LOAD",
    "RELEASE",
    "SAVE",
    "KeyNames",
    "TokenCodec",
]


# KEYS: lock, fence. ARGV: owner, ttl ms. The new generation, or 0 if the lock is taken.
ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"""
# KEYS: lock. ARGV: owner, ttl ms.
EXTEND = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
# KEYS: lock. ARGV: owner, channel.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
return 0
"""
# KEYS: token, generation. ARGV: generation, value, ttl ms, channel. Fenced write.
SAVE = """
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) <= current then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('PUBLISH', ARGV[4], 'stored')
return 1
"""
# KEYS: token, generation. {value, remaining ms, generation} or nil.
LOAD = """
local value = redis.call('GET', KEYS[1])
if not value then
  return nil
end
return {value, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
"""
# KEYS: token, generation. ARGV: generation. Deletes the token if it is that generation.
DISCARD = """
if redis.call('GET', KEYS[2]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


@attrs.frozen
class KeyNames:
    """The key and channel names of one credentials.

    All under one hash tag (one Redis Cluster slot), named by client id and a digest,
    never by the API key.
    """

    token: str
    generation: str
    fence: str
    lock: str
    channel: str

    @classmethod
    def of(cls, prefix: str, key: CredentialsKey) -> KeyNames:
        """The names for ``key`` under ``prefix``."""
        base = f"{prefix}:{{{key.namespace}}}"
        return cls(
            token=f"{base}:token",
            generation=f"{base}:generation",
            fence=f"{base}:fence",
            lock=f"{base}:lock",
            channel=f"{base}:events",
        )


class TokenCodec:
    """A token as stored: JSON, or sealed with AES-GCM bound to the key name.

    ``p1:`` + JSON when there is no key; ``e1:`` + base64(nonce + ciphertext) with one.
    The lifetime stored is the token's full one; what remains is Redis's ``PTTL``.
    """

    def __init__(self, encryption_key: bytes | None) -> None:
        self._aead = AESGCM(encryption_key) if encryption_key is not None else None

    def __repr__(self) -> str:
        return f"<TokenCodec encrypted={self.encrypted}>"

    @property
    def encrypted(self) -> bool:
        """Whether values are sealed."""
        return self._aead is not None

    def encode(self, token: AccessToken, names: KeyNames) -> bytes:
        """The value to store for ``token``."""
        payload = dumps(
            {
                "access_token": token.value,
                "token_type": token.token_type,
                "expires_in": token.expires_in,
                "refresh_token": token.refresh_token,
            }
        )
        if self._aead is None:
            return b"p1:" + payload
        nonce = os.urandom(12)
        sealed = self._aead.encrypt(nonce, payload, names.token.encode())
        return b"e1:" + base64.b64encode(nonce + sealed)

    def decode(
        self, value: bytes, names: KeyNames, *, expires_at: float, margin: float
    ) -> AccessToken | None:
        """The token in ``value`` (``None`` if it cannot be read here).

        It expires at ``expires_at`` less a margin of at most a twentieth of its lifetime.
        """
        data = self._open(value, names)
        try:
            lifetime = float(data["expires_in"]) if data is not None else 0.0
            refresh = data.get("refresh_token") if data is not None else None
            if data is None or lifetime <= 0 or not isinstance(refresh, (str, type(None))):
                raise ValueError("unreadable")  # noqa: TRY301  (one path for every defect)
            return AccessToken(
                value=str(data["access_token"]),
                token_type=str(data["token_type"]),
                expires_in=lifetime,
                obtained_at=expires_at - min(margin, lifetime / 20) - lifetime,
                refresh_token=refresh,
            )
        except (KeyError, TypeError, ValueError):
            del data  # it may hold secrets: out of the traceback's locals
            log.warning(
                "ignoring a token stored under %s that this process cannot read "
                "(another encryption key, or none, or another format)",
                names.token,
            )
            return None

    def _open(self, value: bytes, names: KeyNames) -> dict[str, Any] | None:
        kind, _, body = bytes(value).partition(b":")
        # Sealed values need the key; with a key, plain values are refused.
        expected = b"p1" if self._aead is None else b"e1"
        try:
            if kind == expected and self._aead is not None:
                raw = base64.b64decode(body, validate=True)
                body = self._aead.decrypt(raw[:12], raw[12:], names.token.encode())
            data = json.loads(body) if kind == expected else None
        except (InvalidTag, ValueError):
            data = None
        return data if isinstance(data, dict) else None
