"""The shared token cache: one token per credentials, one token request at a time.

State per credentials is a small machine read against a clock passed in (monotonic by
default)::

    empty ─fetch─▶ fresh ─renew_at─▶ renewal window ─unusable_at─▶ expired
                     ▲                    │ one caller renews,          │ every caller
                     └──── new token ◀────┘ the others keep using it    ┘ waits for one fetch

Single flight: the first caller that finds the token missing or expired becomes the
*owner* of a fetch and publishes a future; every other caller awaits that future instead
of sending its own request, so 10,000 coroutines on a cold cache cause one request. If
the owner is cancelled, a waiter takes over. Futures are created inside the running loop
(and replaced if the cache is used from another loop), so a cache built at import time,
outside any loop, works.

Entries are keyed by environment (the base URL), client id and a digest of the secret,
so a cache shared by several clients never hands one environment's token to another.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable

import attrs

from ._models import AccessToken

__all__ = ["CredentialsKey", "TokenCache"]

#: Fetches a token; receives the current (possibly expired) token so it can refresh.
Fetch = Callable[[AccessToken | None], Awaitable[AccessToken]]


#: Seconds between renewal attempts after one failed while the token is still usable.
_RENEW_COOLDOWN = 5.0


@attrs.frozen
class CredentialsKey:
    """Which environment and credentials a token belongs to. Holds no secret."""

    base_url: str
    client_id: str
    secret_digest: str = attrs.field(repr=False)

    @classmethod
    def of(cls, base_url: str, client_id: str, client_secret: str) -> CredentialsKey:
        """Key for these credentials; the secret is kept only as a SHA-256 digest."""
        digest = hashlib.sha256(client_secret.encode("utf-8")).hexdigest()
        return cls(base_url.rstrip("/").lower(), client_id, digest)


@attrs.define
class _Entry:
    token: AccessToken | None = None
    pending: asyncio.Future[AccessToken] | None = None
    requests: int = 0
    renew_not_before: float = float("-inf")


class TokenCache:
    """Access tokens shared by every coroutine and client that uses this cache.

    Pass one instance to several :class:`~invoicing_async.InvoicingClient` objects to let
    them share tokens; a client without one gets its own. Safe for any number of
    concurrent coroutines within one event loop at a time.

    :param clock: a monotonic clock in seconds (tests pass a fake one).

    .. versionadded:: 0.1.0
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[CredentialsKey, _Entry] = {}

    def __repr__(self) -> str:
        return f"<TokenCache entries={len(self._entries)}>"

    @property
    def clock(self) -> Callable[[], float]:
        """The clock expiry is read against."""
        return self._clock

    def requests(self, key: CredentialsKey) -> int:
        """How many token fetches were started for ``key`` (observability and tests)."""
        entry = self._entries.get(key)
        return entry.requests if entry else 0

    def peek(self, key: CredentialsKey) -> AccessToken | None:
        """The cached token for ``key``, if any, without fetching."""
        entry = self._entries.get(key)
        return entry.token if entry else None

    def fresh(self, key: CredentialsKey) -> AccessToken | None:
        """The cached token when it needs no renewal yet, without awaiting anything."""
        entry = self._entries.get(key)
        token = entry.token if entry else None
        return token if token is not None and self._clock() < token.renew_at else None

    async def get(self, key: CredentialsKey, fetch: Fetch) -> AccessToken:
        """A usable token for ``key``, fetching one (once, for all callers) when needed."""
        entry = self._entries.setdefault(key, _Entry())
        while True:
            now = self._clock()
            token = entry.token
            if token is not None and now < token.renew_at:
                return token
            usable = token is not None and now < token.unusable_at
            if usable and now < entry.renew_not_before:
                return token  # type: ignore[return-value]  # a renewal just failed: wait
            pending = self._pending(entry)
            if pending is None:
                try:
                    return await self._fetch(entry, token, fetch)
                except Exception:
                    if token is None or self._clock() >= token.unusable_at:
                        raise
                    # The renewal failed but the token is still good: use it, and let
                    # the next renewal wait a little instead of hammering the endpoint.
                    entry.renew_not_before = self._clock() + _RENEW_COOLDOWN
                    return token
            if usable:
                return token  # type: ignore[return-value]  # someone else is renewing
            await asyncio.wait([pending])
            if pending.cancelled():
                continue  # the owner was cancelled: take over on the next turn
            error = pending.exception()
            if error is not None:
                raise error
            return pending.result()

    def invalidate(self, key: CredentialsKey, token: AccessToken) -> None:
        """Drop ``token`` after the provider refused it, unless it was already replaced.

        Many requests can fail with the same expired token at once; only the first drop
        counts, so they cause one new fetch rather than one each.
        """
        entry = self._entries.get(key)
        if entry is not None and entry.token is not None and entry.token.value == token.value:
            entry.token = None

    def clear(self) -> None:
        """Forget every token (for example after credentials were rotated)."""
        self._entries.clear()

    @staticmethod
    def _pending(entry: _Entry) -> asyncio.Future[AccessToken] | None:
        pending = entry.pending
        if pending is None or pending.done():
            return None
        if pending.get_loop() is not asyncio.get_running_loop():
            # Left behind by another event loop (asyncio.run called twice): unusable here.
            entry.pending = None
            return None
        return pending

    async def _fetch(self, entry: _Entry, current: AccessToken | None, fetch: Fetch) -> AccessToken:
        future: asyncio.Future[AccessToken] = asyncio.get_running_loop().create_future()
        entry.pending = future
        entry.requests += 1
        try:
            token = await fetch(current)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters may be none
            raise
        else:
            entry.token = token
            future.set_result(token)
            return token
        finally:
            if entry.pending is future:
                entry.pending = None
