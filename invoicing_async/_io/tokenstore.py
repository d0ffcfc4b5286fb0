"""Where tokens live between the processes that use them: the :class:`TokenStore` protocol.

A :class:`~invoicing_async.TokenCache` keeps single flight *within* a process: one
coroutine at a time asks the store for a token. The store decides how far single flight
reaches beyond that. :class:`MemoryTokenStore` (the default) keeps nothing outside the
process, so each process fetches its own tokens; :class:`invoicing_async.redis.RedisTokenStore`
shares them across processes and machines, one fetch at a time for the whole fleet.

A store never talks to the token endpoint itself: the cache hands it ``renew``, which
does (refresh grant first, client credentials as the fallback), and the store decides
*whether* to call it, under whatever lock it has.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from invoicing_async._core.models import AccessToken

__all__ = ["CredentialsKey", "MemoryTokenStore", "TokenStore"]


@attrs.frozen(cache_hash=True)  # a dict key looked up for every request
class CredentialsKey:
    """Which environment and credentials a token belongs to. Holds no secret.

    .. versionadded:: 0.2.0
    """

    base_url: str
    client_id: str
    secret_digest: str = attrs.field(repr=False)

    @classmethod
    def of(cls, base_url: str, client_id: str, client_secret: str) -> CredentialsKey:
        """Key for these credentials; the secret is kept only as a SHA-256 digest."""
        digest = hashlib.sha256(client_secret.encode("utf-8")).hexdigest()
        return cls(base_url.rstrip("/").lower(), client_id, digest)

    @property
    def namespace(self) -> str:
        """A stable name for shared storage: the client id and a digest of the rest.

        Environment, client id and API key each give another name; the API key cannot be
        recovered from it.
        """
        material = f"{self.base_url}\0{self.client_id}\0{self.secret_digest}".encode()
        return f"{self.client_id}:{hashlib.sha256(material).hexdigest()[:32]}"


@runtime_checkable
class TokenStore(Protocol):
    """Where a :class:`~invoicing_async.TokenCache` keeps tokens beyond its own process.

    Implementations must be safe for concurrent use by the coroutines of one event loop;
    the cache calls :meth:`obtain` for one coroutine per process and credentials at a
    time. A store that cannot reach its backend should fall back to calling ``renew``
    itself: an extra token request is acceptable, a failed request is not.

    .. versionadded:: 0.2.0
    """

    async def load(self, key: CredentialsKey, *, clock: Callable[[], float]) -> AccessToken | None:
        """The stored token for ``key`` (``None``: none, or the store is unreachable).

        Its ``obtained_at`` is expressed on ``clock``.
        """
        ...

    async def obtain(
        self,
        key: CredentialsKey,
        stale: AccessToken | None,
        renew: Callable[[AccessToken | None], Awaitable[AccessToken]],
        *,
        clock: Callable[[], float],
    ) -> AccessToken:
        """A token newer than ``stale`` (the one the caller wants replaced, or ``None``).

        Returns a stored token when one newer than ``stale`` is usable; else calls
        ``renew`` with the freshest stored token (whose refresh token is the one to use),
        stores the result and returns it.
        """
        ...

    async def discard(self, key: CredentialsKey, token: AccessToken) -> None:
        """Forget ``token`` after the provider refused it, unless it was already replaced."""
        ...


class MemoryTokenStore:
    """The default store: nothing beyond the process; every process fetches its own.

    Single flight is the :class:`~invoicing_async.TokenCache`'s, per process, and the
    cache itself holds the token: this store keeps nothing.

    .. versionadded:: 0.2.0
    """

    def __repr__(self) -> str:
        return "<MemoryTokenStore>"

    async def load(self, key: CredentialsKey, *, clock: Callable[[], float]) -> AccessToken | None:
        """Nothing: no other process can have stored a token here."""
        del key, clock
        return None

    async def obtain(
        self,
        key: CredentialsKey,
        stale: AccessToken | None,
        renew: Callable[[AccessToken | None], Awaitable[AccessToken]],
        *,
        clock: Callable[[], float],
    ) -> AccessToken:
        """A new token from ``renew`` (refreshing ``stale`` when it has a refresh token)."""
        del key, clock
        return await renew(stale)

    async def discard(self, key: CredentialsKey, token: AccessToken) -> None:
        """Nothing to forget beyond the cache's own copy."""
        del key, token
