"""The shared token cache: one token per credentials, one token request at a time.

State per credentials is a small machine read against a clock passed in (monotonic by
default); the windows scale with the token's lifetime (see
:class:`~invoicing_async.AccessToken`)::

    empty ─fetch─▶ fresh ─renew_at+jitter─▶ renewal window ─unusable_at─▶ blocking
                     ▲                        │ one caller renews,             │ every caller
                     └────── new token ◀──────┘ the others keep using it       ┘ waits for one fetch

Single flight: the first caller that finds the token missing or due becomes the *owner*
of a fetch and publishes a future; every other caller awaits that future (or keeps the
still usable token) instead of sending its own request, so 10,000 coroutines on a cold
cache cause one request. If the owner is cancelled, a waiter takes over. A failure is
raised to each waiter as its own copy, so tracebacks do not pile up on one object.
Futures are created inside the running loop (and replaced if the cache is used from
another loop), so a cache built at import time, outside any loop, works.

The owner asks the :class:`~._tokenstore.TokenStore` for the token, which extends
single flight beyond the process (or not: the default store keeps nothing). Renewing
tries the refresh grant with the freshest refresh token known, and falls back to client
credentials on *any* failure; a refused refresh first re-reads the store, in case a
sibling process already rotated the refresh token.

After a 401, :meth:`TokenCache._recover` decides whether a new token may cure it: at most
one forced re-authentication per credentials per ``reauth_cooldown``, shared by every
caller of the cache.

Entries are keyed by environment (the base URL), client id and a digest of the secret,
so a cache shared by several clients never hands one environment's token to another.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
import time
from collections.abc import Awaitable, Callable

import attrs

from invoicing_async._core.errors import CredentialsError, InvoicingError
from invoicing_async._core.log import auth as log
from invoicing_async._core.models import AccessToken
from invoicing_async._core.unauthorized import after_refresh, refusal_kept

from .tokenstore import CredentialsKey, MemoryTokenStore, TokenStore

__all__ = ["CredentialsKey", "TokenCache", "Tokens"]

#: One grant: given a token, its refresh grant (no fallback); given ``None``, client
#: credentials.
Fetch = Callable[[AccessToken | None], Awaitable[AccessToken]]


@attrs.define
class _Entry:
    token: AccessToken | None = None
    renew_at: float = float("-inf")
    pending: asyncio.Future[AccessToken] | None = None
    requests: int = 0
    renew_not_before: float = float("-inf")
    reauth_not_before: float = float("-inf")
    background: asyncio.Task[AccessToken] | None = None
    renewal_failures: int = 0
    #: The last token the provider accepted (a token, not its value: reprs hide it).
    confirmed: AccessToken | None = attrs.field(default=None, repr=False)
    confirmation: asyncio.Future[None] | None = None  # done when a token is confirmed
    #: The token endpoint refused these credentials: until when that is the answer.
    refused_until: float = float("-inf")
    refusal: CredentialsError | None = None


class TokenCache:
    """Access tokens shared by every coroutine and client that uses this cache.

    Pass one instance to several :class:`~invoicing_async.InvoicingClient` objects to let
    them share tokens; a client without one gets its own. Safe for any number of
    concurrent coroutines within one event loop at a time.

    :param store: where tokens are shared beyond this process, for example
        :class:`invoicing_async.redis.RedisTokenStore`; by default nowhere
        (:class:`~invoicing_async.MemoryTokenStore`).
    :param clock: a monotonic clock in seconds (tests pass a fake one).
    :param reauth_cooldown: seconds during which a 401 cannot force another new token for
        the same credentials: a 401 after a re-authentication that recent is the
        request's own answer. Token requests caused by 401s stay at one per cooldown
        however many requests are refused; credentials the token endpoint refused are
        not asked about again for as long (every caller gets the refusal).
    :param propagation_delay: seconds a multi-node provider may take to accept a token it
        has just issued on all its nodes. A 401 to a token this young is retried once the
        token is this old, instead of being taken as the answer, even when another node
        has accepted the token already.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.2.0
       ``store``, ``reauth_cooldown`` and ``propagation_delay``; renewal starts five
       minutes ahead of expiry with jitter, callers block only in the last minute.
    """

    def __init__(
        self,
        store: TokenStore | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        reauth_cooldown: float = 30.0,
        propagation_delay: float = 3.0,
    ) -> None:
        if reauth_cooldown < 0 or propagation_delay < 0:
            raise ValueError("reauth_cooldown and propagation_delay must not be negative")
        self._store: TokenStore = store if store is not None else MemoryTokenStore()
        self._clock = clock
        self._cooldown = reauth_cooldown
        self._propagation = propagation_delay
        self._entries: dict[CredentialsKey, _Entry] = {}
        self._rng = random.Random()  # jitter, not a secret

    def __repr__(self) -> str:
        return f"<TokenCache entries={len(self._entries)} store={self._store!r}>"

    @property
    def clock(self) -> Callable[[], float]:
        """The clock expiry is read against."""
        return self._clock

    @property
    def reauth_cooldown(self) -> float:
        """Seconds between two new tokens forced by 401s (see the class docstring).

        .. versionadded:: 0.3.0
        """
        return self._cooldown

    @property
    def store(self) -> TokenStore:
        """Where tokens are shared beyond this process.

        .. versionadded:: 0.2.0
        """
        return self._store

    def requests(self, key: CredentialsKey) -> int:
        """How many token grants this cache sent for ``key`` (observability and tests)."""
        entry = self._entries.get(key)
        return entry.requests if entry else 0

    def _peek(self, key: CredentialsKey) -> AccessToken | None:
        """The cached token for ``key``, if any, without fetching."""
        entry = self._entries.get(key)
        return entry.token if entry else None

    def _fresh(self, key: CredentialsKey) -> AccessToken | None:
        """The cached token when it needs no renewal yet, without awaiting anything."""
        entry = self._entries.get(key)
        if entry is None or entry.token is None or self._clock() >= entry.renew_at:
            return None
        return entry.token

    async def _get(self, key: CredentialsKey, fetch: Fetch) -> AccessToken:
        """A usable token for ``key``, fetching one (once, for all callers) when needed.

        In the renewal window the renewal runs in the background and every caller,
        including the one that started it, keeps the current token; only a missing token
        or one in its last minute makes callers wait.
        """
        entry = self._entries.setdefault(key, _Entry())
        while True:
            now = self._clock()
            token = entry.token
            if token is not None and now < entry.renew_at:
                return token
            pending = self._pending(entry)
            if token is not None and now < token.unusable_at:
                if pending is None and now >= entry.renew_not_before:
                    self._renew_in_background(key, entry, token, fetch)
                return token
            if pending is None:
                if entry.refusal is not None and now < entry.refused_until:
                    raise _own_copy(entry.refusal)  # refused lately: not asked again yet
                return await self._fetch(key, entry, token, fetch, self._begin(entry))
            await asyncio.wait([pending])
            if pending.cancelled():
                continue  # the owner was cancelled: take over on the next turn
            error = pending.exception()
            if error is not None:
                raise _own_copy(error)
            return pending.result()

    async def _recover(
        self, key: CredentialsKey, refused: AccessToken, fetch: Fetch
    ) -> AccessToken | None:
        """After a 401 to a request sent with ``refused``: a token to retry with, or ``None``.

        See :meth:`_recovery`, which also says whether the token was forced.
        """
        token, _ = await self._recovery(key, refused, fetch)
        return token

    async def _recovery(
        self, key: CredentialsKey, refused: AccessToken, fetch: Fetch
    ) -> tuple[AccessToken | None, bool]:
        """After a 401 to a request sent with ``refused``: a token to retry with, or ``None``.

        And whether this call forced that token (a 401 to it is then the request's own
        answer: a token fetched for it was refused too).

        - ``refused`` was replaced meanwhile, or is being replaced (here or, with a
          shared store, by a sibling process): retry with the new token, once the
          provider has accepted it from someone or it is ``propagation_delay`` old.
        - No 401 forced a new token for these credentials within ``reauth_cooldown``:
          force one now (single flight: every caller shares it) and retry with it.
        - A sibling process stored a newer token: retry with it.
        - ``refused`` is younger than ``propagation_delay``: a node of a multi-node
          provider may not know it yet, *whichever node accepted it already*; retry with
          it once it is that old.
        - Otherwise ``None``: no new token may be requested before the cooldown ends
          (:meth:`_reauth_in` says when).

        .. versionadded:: 0.2.0
        .. versionchanged:: 0.3.0 a 401 to a young token is retried even after the
           provider accepted it (another node may not know it yet).
        """
        entry = self._entries.setdefault(key, _Entry())
        current = entry.token
        if current is None or current.value != refused.value:
            token = await self._get(key, fetch)  # replaced, or being replaced
            await self._settled(entry, token)
            return token, False
        now = self._clock()
        if now >= entry.reauth_not_before:
            entry.reauth_not_before = now + self._cooldown
            log.debug("a 401 may be the token's fault: fetching a new one (%s)", key.client_id)
            entry.token = None
            await self._store.discard(key, refused)
            return await self._get(key, fetch), True
        stored = await self._store.load(key, clock=self._clock)
        if stored is not None and stored.value != refused.value and now < stored.unusable_at:
            self._adopt(entry, stored)  # a sibling process replaced it
            return stored, False
        if now < refused.obtained_at + self._propagation:
            # Whichever node accepted it already: another may not know it yet.
            log.debug(
                "a 401 to a token %.1f s old: retrying once it is known", now - refused.obtained_at
            )
            await self._aged(refused)
            return refused, False
        return None, False

    def _was_confirmed(self, key: CredentialsKey, token: AccessToken) -> bool:
        """Whether the provider accepted ``token`` (the last token it accepted is it)."""
        entry = self._entries.get(key)
        return entry is not None and _same(entry.confirmed, token)

    def _refused(self, key: CredentialsKey) -> bool:
        """Whether the token endpoint refused ``key``'s credentials at its last grant."""
        entry = self._entries.get(key)
        return entry is not None and entry.refusal is not None

    def _reauth_in(self, key: CredentialsKey) -> float:
        """Seconds until a 401 may force a new token for ``key`` again (0: now)."""
        entry = self._entries.get(key)
        return 0.0 if entry is None else max(0.0, entry.reauth_not_before - self._clock())

    def _confirm(self, key: CredentialsKey, token: AccessToken) -> None:
        """Note that the provider accepted ``token`` (it answered other than 401).

        .. versionadded:: 0.2.0
        """
        entry = self._entries.get(key)
        if entry is None or _same(entry.confirmed, token):
            return
        entry.confirmed = token
        waiting, entry.confirmation = entry.confirmation, None
        if waiting is not None and not waiting.done():
            waiting.set_result(None)

    async def _settled(self, entry: _Entry, token: AccessToken) -> None:
        """Until the provider accepted ``token`` or it is ``propagation_delay`` old."""
        while not _same(entry.confirmed, token):
            wait = token.obtained_at + self._propagation - self._clock()
            if wait <= 0:
                return
            waiting = entry.confirmation
            loop = asyncio.get_running_loop()
            if waiting is None or waiting.get_loop() is not loop:
                waiting = entry.confirmation = loop.create_future()
            try:
                await asyncio.wait_for(asyncio.shield(waiting), wait)
            except asyncio.TimeoutError:
                return

    async def _aged(self, token: AccessToken) -> None:
        """Until ``token`` is ``propagation_delay`` old.

        Age is read on the cache's clock, which a test may move (looked at again at
        least every quarter second) or freeze: the wait never outlasts the time the
        clock said was left when it began.
        """
        loop = asyncio.get_running_loop()
        left = token.obtained_at + self._propagation - self._clock()
        until = loop.time() + left
        while left > 0 and (now := loop.time()) < until:
            await asyncio.sleep(min(left, until - now, 0.25))
            left = token.obtained_at + self._propagation - self._clock()

    def _invalidate(self, key: CredentialsKey, token: AccessToken) -> None:
        """Drop ``token`` from this cache, unless it was already replaced.

        Many requests can fail with the same expired token at once; only the first drop
        counts, so they cause one new fetch rather than one each.
        """
        entry = self._entries.get(key)
        if entry is not None and entry.token is not None and entry.token.value == token.value:
            entry.token = None

    def clear(self) -> None:
        """Forget every token (for example after credentials were rotated)."""
        self._entries.clear()

    def _forget(self, key: CredentialsKey) -> None:
        """Forget ``key``'s token and state (an issuer no longer served by this process).

        A fetch or renewal in progress ends as it would; its result is not kept.
        """
        self._entries.pop(key, None)

    # --- internals -------------------------------------------------------------------------

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

    def _adopt(self, entry: _Entry, token: AccessToken) -> None:
        """Make ``token`` the entry's, with this process's jittered renewal time."""
        entry.token = token
        entry.renew_at = token.renew_at + self._rng.uniform(0, token.renew_ahead / 5)
        entry.renew_not_before = float("-inf")

    @staticmethod
    def _begin(entry: _Entry) -> asyncio.Future[AccessToken]:
        """Publish the future of a fetch about to start (before any ``await``)."""
        future: asyncio.Future[AccessToken] = asyncio.get_running_loop().create_future()
        entry.pending = future
        return future

    def _renew_in_background(
        self, key: CredentialsKey, entry: _Entry, token: AccessToken, fetch: Fetch
    ) -> None:
        """Renew while ``token`` is still usable; a failure waits ``retry_interval``."""
        task = asyncio.ensure_future(self._fetch(key, entry, token, fetch, self._begin(entry)))
        entry.background = task  # a reference, so the task is not collected mid-way

        def done(task: asyncio.Task[AccessToken]) -> None:
            if entry.background is task:
                entry.background = None
            if task.cancelled():
                return
            error = task.exception()
            if error is None:
                entry.renewal_failures = 0
                return
            entry.renew_not_before = self._clock() + token.retry_interval
            entry.renewal_failures += 1
            # Once per run of failures: an outage of the token endpoint is one event.
            log.log(
                logging.WARNING if entry.renewal_failures == 1 else logging.DEBUG,
                "renewing the access token failed (%s); the current one stays in use, "
                "next attempt in %.0f s",
                error,
                token.retry_interval,
            )

        task.add_done_callback(done)

    async def _fetch(
        self,
        key: CredentialsKey,
        entry: _Entry,
        current: AccessToken | None,
        fetch: Fetch,
        future: asyncio.Future[AccessToken],
    ) -> AccessToken:
        async def renew(freshest: AccessToken | None) -> AccessToken:
            return await self._renew(key, entry, freshest, fetch)

        try:
            token = await self._store.obtain(key, current, renew, clock=self._clock)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            if refusal_kept(exc):
                # Refused credentials stay refused for a while: the callers that meet a
                # 401 after the refusal (or whose documents come later) get it again
                # without a token request each.
                entry.refusal = exc
                entry.refused_until = self._clock() + self._cooldown
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters may be none
            raise
        else:
            self._adopt(entry, token)
            entry.refusal = None
            future.set_result(token)
            return token
        finally:
            if entry.pending is future:
                entry.pending = None

    async def _renew(
        self, key: CredentialsKey, entry: _Entry, freshest: AccessToken | None, fetch: Fetch
    ) -> AccessToken:
        """A new token: the refresh grant, else (or after any failure of it) credentials.

        A refused refresh first re-reads the store: a sibling may have rotated it.
        """
        if freshest is not None and freshest.refresh_token:
            try:
                return await self._grant(key, entry, freshest, fetch)
            except InvoicingError as exc:
                after = after_refresh(exc)
                if after == "stop":
                    raise
                if after == "failed":
                    log.warning("refresh failed (%s): falling back to client credentials", exc)
                else:
                    # invalid_grant: maybe a sibling rotated the refresh token; take its token.
                    stored = await self._store.load(key, clock=self._clock)
                    if (
                        stored is not None
                        and stored.value != freshest.value
                        and self._clock() < stored.unusable_at
                    ):
                        log.debug("refresh refused; a newer token is stored: using it")
                        return stored
                    log.debug(
                        "the refresh token was refused (%s): falling back to client credentials",
                        exc,
                    )
        return await self._grant(key, entry, None, fetch)

    async def _grant(
        self, key: CredentialsKey, entry: _Entry, refresh_with: AccessToken | None, fetch: Fetch
    ) -> AccessToken:
        entry.requests += 1
        log.debug(
            "requesting an access token for %s (%s)",
            key.client_id,
            "refresh grant" if refresh_with is not None else "client credentials",
        )
        return await fetch(refresh_with)


class Tokens:
    """One credentials' view of a shared :class:`TokenCache`: what a channel asks of it.

    The named seam between the cache (the state machine, shared by every client and
    issuer that uses it) and one issuer's :class:`~._channel.Channel`, which fetches
    with ``fetch`` and asks about its own credentials only.
    """

    __slots__ = ("_cache", "_fetch", "key")

    def __init__(self, cache: TokenCache, key: CredentialsKey, fetch: Fetch) -> None:
        self._cache = cache
        self.key = key
        self._fetch = fetch

    @property
    def cache(self) -> TokenCache:
        """The shared cache."""
        return self._cache

    def fresh(self) -> AccessToken | None:
        """The cached token when it needs no renewal yet, without awaiting anything."""
        return self._cache._fresh(self.key)  # noqa: SLF001  (this module's own)

    def peek(self) -> AccessToken | None:
        """The cached token, if any, without fetching."""
        return self._cache._peek(self.key)  # noqa: SLF001

    async def get(self) -> AccessToken:
        """A usable token, fetched once for all callers when needed."""
        return await self._cache._get(self.key, self._fetch)  # noqa: SLF001

    async def recover(self, refused: AccessToken) -> tuple[AccessToken | None, bool]:
        """After a 401 to ``refused``: a token to retry with (or ``None``).

        And whether this call forced it (see :meth:`TokenCache._recovery`).
        """
        return await self._cache._recovery(self.key, refused, self._fetch)  # noqa: SLF001

    def confirm(self, token: AccessToken) -> None:
        """The provider accepted ``token``."""
        self._cache._confirm(self.key, token)  # noqa: SLF001

    def was_confirmed(self, token: AccessToken) -> bool:
        """Whether ``token`` is the last one the provider accepted."""
        return self._cache._was_confirmed(self.key, token)  # noqa: SLF001

    def reauth_in(self) -> float:
        """Seconds until a 401 may force a new token again (0: now)."""
        return self._cache._reauth_in(self.key)  # noqa: SLF001

    def refused(self) -> bool:
        """Whether the token endpoint refused these credentials when last asked.

        Until a grant succeeds: a pool asks its resolver again for such an issuer.
        """
        return self._cache._refused(self.key)  # noqa: SLF001

    def forget(self) -> None:
        """Drop this credentials' token from the cache (the issuer left the pool)."""
        self._cache._forget(self.key)  # noqa: SLF001


def _same(known: AccessToken | None, token: AccessToken) -> bool:
    return known is not None and known.value == token.value


def _own_copy(error: BaseException) -> BaseException:
    """A copy of ``error`` for one waiter to raise, with the original's cause.

    Raising one object from many coroutines appends every raise to its traceback (after
    1,000 waiters: 1,002 entries); a copy starts with a traceback of its own.
    """
    try:
        clone = copy.copy(error)
    except Exception:  # noqa: BLE001  (an exception that cannot be copied: share it)
        return error
    if type(clone) is not type(error):  # pragma: no cover - a __reduce__ returning another type
        return error
    clone.__cause__ = error.__cause__
    clone.__suppress_context__ = error.__suppress_context__
    clone.__traceback__ = None
    return clone
