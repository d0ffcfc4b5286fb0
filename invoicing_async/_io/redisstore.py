"""Share access tokens across processes and machines through Redis.

The body of :mod:`invoicing_async.redis` (the guide to it is that face's docstring).
"""

from __future__ import annotations

import asyncio as _asyncio
import contextlib as _contextlib
import logging as _logging
import secrets as _secrets
import time as _time
import typing as _typing

import attrs as _attrs
import redis.asyncio as _aioredis
from redis.asyncio.retry import Retry as _Retry
from redis.backoff import NoBackoff as _NoBackoff
from redis.exceptions import ConnectionError as _ConnectionError
from redis.exceptions import RedisError as _RedisError

from invoicing_async._core.log import auth as _log
from invoicing_async._core.retry import Backoff as _Backoff
from invoicing_async._io import _sharedtoken as _shared

if _typing.TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType

    from invoicing_async._core.models import AccessToken

    from .tokenstore import CredentialsKey

__all__ = ["RedisTokenStore"]


#: Seconds after a warning about Redis during which further trouble is told at DEBUG.
_QUIET = 60.0


class _TroubleError(Exception):
    """Redis failed or was too slow; the cause says how."""


@_attrs.frozen
class _Stored:
    token: AccessToken
    generation: int


class RedisTokenStore:
    """A :class:`~invoicing_async.TokenStore` in Redis: one token fetch for a whole fleet.

    :param redis: a URL (``redis://host:6379/0``, ``rediss://`` for TLS) or a
        ``redis.asyncio.Redis`` client of yours (then :meth:`aclose` leaves it open).
    :param prefix: the first part of every key name.
    :param encryption_key: 16, 24 or 32 bytes: values (tokens and refresh tokens) are
        stored encrypted with AES-GCM. Every process of the fleet needs the same key.
    :param lock_ttl: seconds the fetch lock lives without its holder's heartbeat: the
        longest a dead holder can delay the others.
    :param timeout: seconds any Redis call may take before Redis counts as unavailable.
    :param poll_interval: longest wait between looks at the lock while waiting for a
        sibling's token, should a pub/sub message be lost.
    :param retry_after: the most seconds Redis is left alone after failures (the process
        fetches its own tokens meanwhile): half a second after the first, doubling (with
        jitter) while it keeps failing.
    :param safety_margin: seconds taken off a stored token's remaining lifetime (at most a
        twentieth of the lifetime), for the time between Redis's answer and its use.

    .. versionadded:: 0.2.0
    """

    def __init__(
        self,
        redis: str | _aioredis.Redis,
        *,
        prefix: str = "invoicing-async",
        encryption_key: bytes | None = None,
        lock_ttl: float = 10.0,
        timeout: float = 1.0,
        poll_interval: float = 0.5,
        retry_after: float = 5.0,
        safety_margin: float = 0.5,
    ) -> None:
        if lock_ttl <= 0 or timeout <= 0 or poll_interval <= 0 or retry_after < 0:
            raise ValueError("lock_ttl, timeout and poll_interval must be positive")
        if encryption_key is not None and len(encryption_key) not in (16, 24, 32):
            del encryption_key  # out of the traceback's locals
            raise ValueError("encryption_key must be 16, 24 or 32 bytes")
        self._codec = _shared.TokenCodec(encryption_key)
        del encryption_key
        if isinstance(redis, str):
            self._redis = _aioredis.Redis.from_url(
                redis,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                # Once more on a new connection: a pooled one may have died with a restart.
                retry=_Retry(_NoBackoff(), 1),
                retry_on_error=[_ConnectionError],
            )
            self._owned = True
        else:
            self._redis = redis
            self._owned = False
        self._prefix = prefix
        self._lock_ms = max(1, round(lock_ttl * 1000))
        self._timeout = timeout
        self._poll = poll_interval
        self._margin = safety_margin
        self._acquire = self._redis.register_script(_shared.ACQUIRE)
        self._extend = self._redis.register_script(_shared.EXTEND)
        self._release = self._redis.register_script(_shared.RELEASE)
        self._save = self._redis.register_script(_shared.SAVE)
        self._load = self._redis.register_script(_shared.LOAD)
        self._discard = self._redis.register_script(_shared.DISCARD)
        self._degraded = False
        self._bypass_until = float("-inf")
        self._waits = _Backoff(min(0.5, retry_after), retry_after)  # equal jitter
        self._quiet_until = float("-inf")

    def __repr__(self) -> str:
        encrypted = " encrypted" if self._codec.encrypted else ""
        return f"<RedisTokenStore prefix={self._prefix!r}{encrypted}>"

    async def __aenter__(self) -> RedisTokenStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections, if the store made its own client."""
        if self._owned:
            await self._redis.aclose()

    @property
    def degraded(self) -> bool:
        """Whether Redis failed lately and the process is fetching its own tokens."""
        return self._degraded

    # --- the TokenStore protocol -----------------------------------------------------------

    async def load(self, key: CredentialsKey, *, clock: Callable[[], float]) -> AccessToken | None:
        """The stored token (``None``: none, or Redis unavailable)."""
        if self._bypassed():
            return None
        try:
            stored = await self._read(_shared.KeyNames.of(self._prefix, key), clock)
        except _TroubleError as exc:
            self._trouble(exc)
            return None
        return stored.token if stored is not None else None

    async def obtain(
        self,
        key: CredentialsKey,
        stale: AccessToken | None,
        renew: Callable[[AccessToken | None], Awaitable[AccessToken]],
        *,
        clock: Callable[[], float],
    ) -> AccessToken:
        """A stored token newer than ``stale``, or one fetched under the fleet's lock."""
        if self._bypassed():
            return await renew(None)  # the fleet's refresh token may be rotated: see below
        names = _shared.KeyNames.of(self._prefix, key)
        try:
            while True:
                stored = await self._read(names, clock)
                if stored is not None and _newer(stored.token, stale, clock):
                    return stored.token
                owner = _secrets.token_hex(16)
                generation = int(
                    await self._call(
                        self._acquire(keys=[names.lock, names.fence], args=[owner, self._lock_ms])
                    )
                )
                if generation:
                    return await self._as_owner(
                        names,
                        owner=owner,
                        generation=generation,
                        stale=stale,
                        renew=renew,
                        clock=clock,
                    )
                await self._wait(names)
        except _TroubleError as exc:
            self._trouble(exc)
            # Client credentials: the refresh token known here is the fleet's, and a
            # sibling renewing without Redis too may have rotated it (a refused refresh
            # would cost a second request).
            return await renew(None)

    async def discard(self, key: CredentialsKey, token: AccessToken) -> None:
        """Delete the stored token if it is ``token`` (a newer one is kept)."""
        if self._bypassed():
            return
        names = _shared.KeyNames.of(self._prefix, key)
        try:
            stored = await self._read(names, _time.monotonic)
            if stored is not None and stored.token.value == token.value:
                await self._call(
                    self._discard(keys=[names.token, names.generation], args=[stored.generation])
                )
        except _TroubleError as exc:
            self._trouble(exc)

    # --- the lock holder -------------------------------------------------------------------

    async def _as_owner(
        self,
        names: _shared.KeyNames,
        *,
        owner: str,
        generation: int,
        stale: AccessToken | None,
        renew: Callable[[AccessToken | None], Awaitable[AccessToken]],
        clock: Callable[[], float],
    ) -> AccessToken:
        heartbeat = _asyncio.ensure_future(self._heartbeat(names, owner))
        try:
            # Under the lock, look again: a sibling may have stored one just now.
            stored = await self._read(names, clock)
            if stored is not None and _newer(stored.token, stale, clock):
                return stored.token
            # The stored token carries the refresh token in use (they rotate).
            token = await renew(stored.token if stored is not None else stale)
            return await self._store(names, generation, token, clock)
        finally:
            heartbeat.cancel()
            try:
                await self._call(self._release(keys=[names.lock], args=[owner, names.channel]))
            except _TroubleError as exc:
                self._trouble(exc)

    async def _store(
        self,
        names: _shared.KeyNames,
        generation: int,
        token: AccessToken,
        clock: Callable[[], float],
    ) -> AccessToken:
        """Store ``token`` unless a newer generation is stored: the token to use."""
        remaining = round((token.expires_at - clock()) * 1000)
        if remaining <= 0:
            return token
        try:
            saved = await self._call(
                self._save(
                    keys=[names.token, names.generation],
                    args=[generation, self._codec.encode(token, names), remaining, names.channel],
                )
            )
            if saved:
                _log.debug("stored a new access token (generation %d)", generation)
                return token
            # Fenced: our lock expired mid-fetch and a successor stored a newer token.
            newer = await self._read(names, clock)
        except _TroubleError as exc:
            self._trouble(exc)
            return token
        _log.debug("a newer token was stored meanwhile (generation %d refused)", generation)
        return newer.token if newer is not None and clock() < newer.token.unusable_at else token

    async def _heartbeat(self, names: _shared.KeyNames, owner: str) -> None:
        """Keep the lock while the fetch runs; stop once it is lost."""
        while True:
            await _asyncio.sleep(self._lock_ms / 3000)
            try:
                if not await self._call(
                    self._extend(keys=[names.lock], args=[owner, self._lock_ms])
                ):
                    return
            except _TroubleError:
                return

    # --- waiting for a sibling ---------------------------------------------------------------

    async def _wait(self, names: _shared.KeyNames) -> None:
        """Until the lock holder stores a token or releases (or loses) the lock."""
        pubsub = self._redis.pubsub()
        try:
            await self._call(pubsub.subscribe(names.channel))
            while True:
                # After subscribing: a message sent before it would be missed, the lock not.
                remaining = await self._call(self._redis.pttl(names.lock))
                if remaining < 0:
                    return
                wait = min(self._poll, max(remaining / 1000, 0.001))
                message = await self._call(
                    pubsub.get_message(ignore_subscribe_messages=True, timeout=wait),
                    timeout=wait + self._timeout,
                )
                if message is not None:
                    return
        finally:
            with _contextlib.suppress(_RedisError, OSError, _asyncio.TimeoutError):
                closing = pubsub.aclose()  # type: ignore[no-untyped-call]
                await _asyncio.wait_for(closing, self._timeout)

    # --- Redis calls, values, health -----------------------------------------------------------

    async def _call(
        self, awaitable: Awaitable[_typing.Any], *, timeout: float | None = None
    ) -> _typing.Any:
        try:
            result = await _asyncio.wait_for(awaitable, timeout or self._timeout)
        except (_RedisError, OSError, _asyncio.TimeoutError) as exc:
            await self._drop_idle_connections()
            raise _TroubleError(type(exc).__name__) from exc
        if self._degraded:
            self._degraded = False
            self._waits.reset()
            _log.info("the Redis token store answers again: tokens are shared again")
        return result

    async def _read(self, names: _shared.KeyNames, clock: Callable[[], float]) -> _Stored | None:
        before = clock()  # before the call: the expiry read is never late
        found = await self._call(self._load(keys=[names.token, names.generation]))
        if not found or len(found) != 3 or found[2] is None:
            return None
        value, remaining_ms, generation = found
        if int(remaining_ms) <= 0:
            return None
        expires_at = before + int(remaining_ms) / 1000
        token = self._codec.decode(value, names, expires_at=expires_at, margin=self._margin)
        if token is None:
            return None
        return _Stored(token, int(generation))

    async def _drop_idle_connections(self) -> None:
        """Close the pool's idle connections.

        After a restart of Redis they are all dead, and each would cost a failure (and a
        fallback) of its own.
        """
        pool = getattr(self._redis, "connection_pool", None)
        if pool is None:
            return
        with _contextlib.suppress(_RedisError, OSError, _asyncio.TimeoutError):
            await _asyncio.wait_for(pool.disconnect(inuse_connections=False), self._timeout)

    def _bypassed(self) -> bool:
        return self._degraded and _time.monotonic() < self._bypass_until

    def _trouble(self, error: _TroubleError) -> None:
        cause = error.__cause__
        now = _time.monotonic()
        self._bypass_until = now + self._waits.next()
        if self._degraded:
            return
        self._degraded = True
        # Once per outage: stale pooled connections failing right after Redis came back
        # belong to the same outage and are told at DEBUG only.
        level = _logging.WARNING if now >= self._quiet_until else _logging.DEBUG
        self._quiet_until = now + _QUIET
        _log.log(
            level,
            "the Redis token store is unavailable (%s: %s): each process fetches its own "
            "tokens until it answers again",
            type(cause).__name__,
            str(cause)[:200],
        )


def _newer(token: AccessToken, stale: AccessToken | None, clock: Callable[[], float]) -> bool:
    """A stored token the caller can use instead of fetching one."""
    return clock() < token.unusable_at and (stale is None or token.value != stale.value)
