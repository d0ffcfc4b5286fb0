"""The shared token cache: single flight, renewal windows, fallbacks, the 401 policy."""

from __future__ import annotations

import asyncio
import logging
import traceback

import pytest
from sandboxtools import FakeClock

from invoicing_async import (
    AccessToken,
    AuthenticationError,
    CredentialsError,
    MalformedResponseError,
    MemoryTokenStore,
    ServerError,
    TokenCache,
    TokenStore,
    TransportError,
)
from invoicing_async._io.tokencache import CredentialsKey, _Entry

KEY = CredentialsKey.of("https://p.example", "123456789", "secret")


class Fetcher:
    """Counts grants; optionally blocks until released, or fails (refresh grants alone
    with ``refresh_error``)."""

    def __init__(self, clock: FakeClock, lifetime: float = 900.0) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.calls: list[AccessToken | None] = []
        self.gate: asyncio.Event | None = None
        self.error: BaseException | None = None
        self.refresh_error: BaseException | None = None

    async def __call__(self, current: AccessToken | None) -> AccessToken:
        self.calls.append(current)
        started = self.clock()
        if self.gate is not None:
            await self.gate.wait()
        else:
            await asyncio.sleep(0)
        if current is not None and self.refresh_error is not None:
            raise self.refresh_error
        if self.error is not None:
            raise self.error
        return AccessToken(
            value=f"tok-{len(self.calls)}",
            token_type="Bearer",
            expires_in=self.lifetime,
            obtained_at=started,
            refresh_token=f"rt-{len(self.calls)}",
        )


@pytest.fixture
def clock():
    return FakeClock()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_cold_cache_single_flight(clock):
    """10,000 coroutines on a cold cache cause exactly one token fetch and share its token."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    tokens = await asyncio.gather(*(cache._get(KEY, fetch) for _ in range(10_000)))
    assert len(fetch.calls) == 1
    assert {t.value for t in tokens} == {"tok-1"}
    assert cache.requests(KEY) == 1


async def test_fresh_token_is_reused(clock):
    """A token before its renewal window (5 minutes ahead of expiry) is returned as is."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    first = await cache._get(KEY, fetch)
    clock.now += 590
    assert await cache._get(KEY, fetch) is first
    assert len(fetch.calls) == 1


async def test_renewal_window_renews_in_the_background_while_all_keep_the_token(clock):
    """Five minutes ahead of expiry one renewal starts in the background; every caller,
    the one that started it included, keeps the valid token without waiting."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    old = await cache._get(KEY, fetch)
    clock.now += 700  # renewal window (600 s + jitter), usable until 840 s
    fetch.gate = asyncio.Event()
    tokens = await asyncio.gather(*(cache._get(KEY, fetch) for _ in range(100)))
    assert all(t is old for t in tokens)  # nobody waited for the renewal
    await settle()
    assert len(fetch.calls) == 2
    assert fetch.calls[1] is old  # the renewal used the old token's refresh token
    fetch.gate.set()
    await settle()
    assert (await cache._get(KEY, fetch)).value == "tok-2"
    assert len(fetch.calls) == 2


def test_fleet_renewal_times_are_jittered():
    """Caches (one per process) renew the same 900 s token at different moments, all
    between 5 and 4 minutes ahead of expiry: a fleet does not renew in lockstep."""
    token = AccessToken(value="t", token_type="Bearer", expires_in=900, obtained_at=0)
    moments = set()
    for _ in range(50):
        cache = TokenCache()
        entry = cache._entries.setdefault(KEY, _Entry())
        cache._adopt(entry, token)
        moments.add(entry.renew_at)
    assert len(moments) > 40
    assert all(600 <= m <= 660 for m in moments)


async def test_last_minute_makes_callers_wait_for_one_fetch(clock):
    """In a token's last minute every caller waits for the same single fetch."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    await cache._get(KEY, fetch)
    clock.now += 850  # unusable from 840 s on
    fetch.gate = asyncio.Event()
    waiting = [asyncio.create_task(cache._get(KEY, fetch)) for _ in range(50)]
    await asyncio.sleep(0.01)
    assert not any(t.done() for t in waiting)
    fetch.gate.set()
    tokens = await asyncio.gather(*waiting)
    assert {t.value for t in tokens} == {"tok-2"}
    assert len(fetch.calls) == 2


async def test_failed_renewal_keeps_the_token_and_retries_at_most_every_30_s(clock, caplog):
    """A renewal that fails in the window leaves the valid token in use; the next attempt
    waits 30 s (for a 900 s token), however many calls come in between."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    old = await cache._get(KEY, fetch)
    fetch.error = ServerError("down", status=503)
    fetch.refresh_error = ServerError("down", status=503)
    clock.now += 700
    with caplog.at_level(logging.WARNING, logger="invoicing_async.auth"):
        for _ in range(20):
            assert await cache._get(KEY, fetch) is old
            await settle()
            clock.now += 1
    # One attempt (a refresh, then client credentials) in the first 20 s.
    assert fetch.calls == [None, old, None]
    assert "renewing the access token failed" in caplog.text
    clock.now += 11  # 31 s after the failure
    await cache._get(KEY, fetch)
    await settle()
    assert len(fetch.calls) == 5


async def test_renewal_windows_scale_for_short_tokens(clock):
    """A 2 s token: renewal from 1.33 s (+ jitter), blocking from 1.87 s, failed renewals
    retried every 0.067 s."""
    token = AccessToken(value="t", token_type="Bearer", expires_in=2, obtained_at=0)
    assert token.renew_at == pytest.approx(2 - 2 / 3)
    assert token.unusable_at == pytest.approx(2 - 2 / 15)
    assert token.retry_interval == pytest.approx(2 / 30)


async def test_expiry_counts_from_before_the_request(clock):
    """The lifetime starts when the request was sent, not when the answer arrived."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock, lifetime=100)
    fetch.gate = asyncio.Event()
    task = asyncio.create_task(cache._get(KEY, fetch))
    await asyncio.sleep(0)
    clock.now += 30  # a slow token endpoint
    fetch.gate.set()
    token = await task
    assert token.expires_at == 1100.0


async def test_failure_reaches_all_waiters_and_next_call_retries(clock):
    """A failed fetch raises in every waiting caller; the next call fetches again."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    fetch.error = AuthenticationError("refused", status=400)
    results = await asyncio.gather(
        *(cache._get(KEY, fetch) for _ in range(10)), return_exceptions=True
    )
    assert all(isinstance(r, AuthenticationError) for r in results)
    assert len(fetch.calls) == 1
    fetch.error = None
    assert (await cache._get(KEY, fetch)).value == "tok-2"


async def test_each_waiter_raises_its_own_copy_with_a_short_traceback(clock):
    """1,000 waiters of a failed fetch each raise their own exception object: same type,
    message and fields, a traceback of their own call only (raising one shared object
    appended every raise to it: 1,002 entries after 1,000 waiters)."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    fetch.gate = asyncio.Event()
    fetch.error = CredentialsError("refused", status=401, error="invalid_client")
    tasks = [asyncio.create_task(cache._get(KEY, fetch)) for _ in range(1000)]
    await settle()
    fetch.gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert len(fetch.calls) == 1
    assert all(isinstance(r, CredentialsError) for r in results)
    assert len({id(r) for r in results}) == 1000
    assert {(r.message, r.status, r.error) for r in results} == {("refused", 401, "invalid_client")}
    assert max(len(traceback.extract_tb(r.__traceback__)) for r in results) < 10


async def test_cancelled_owner_hands_over(clock):
    """If the coroutine fetching is cancelled, a waiting caller fetches instead of failing."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    fetch.gate = asyncio.Event()
    owner = asyncio.create_task(cache._get(KEY, fetch))
    await asyncio.sleep(0)
    waiter = asyncio.create_task(cache._get(KEY, fetch))
    await asyncio.sleep(0)
    owner.cancel()
    await asyncio.sleep(0)
    fetch.gate.set()
    token = await waiter
    assert token.value == "tok-2"
    assert owner.cancelled()


async def test_invalidate_drops_only_the_failed_token(clock):
    """Only the token that failed is dropped; a newer one survives late 401s of the old."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    old = await cache._get(KEY, fetch)
    cache._invalidate(KEY, old)
    new = await cache._get(KEY, fetch)
    assert new.value == "tok-2"
    cache._invalidate(KEY, old)  # a late 401 for the old token
    assert await cache._get(KEY, fetch) is new
    assert len(fetch.calls) == 2


async def test_environments_do_not_share_tokens(clock):
    """The same credentials on another base URL get their own token."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    test = await cache._get(CredentialsKey.of("https://test.p.example", "1", "s"), fetch)
    prod = await cache._get(CredentialsKey.of("https://p.example", "1", "s"), fetch)
    other_secret = await cache._get(CredentialsKey.of("https://p.example", "1", "s2"), fetch)
    assert len({test.value, prod.value, other_secret.value}) == 3


def test_credentials_key_hides_secret():
    """The cache key keeps only a digest of the secret, out of its repr and namespace."""
    key = CredentialsKey.of("https://p.example/", "123", "VERY-SECRET")
    assert "VERY-SECRET" not in repr(key)
    assert key.secret_digest not in repr(key)
    assert key.base_url == "https://p.example"
    assert key.namespace.startswith("123:")
    assert "VERY-SECRET" not in key.namespace
    assert key.secret_digest not in key.namespace
    assert key.namespace != CredentialsKey.of("https://test.p.example", "123", "x").namespace


def test_cache_built_outside_a_loop_works_in_several_loops():
    """A cache made at import time works under asyncio.run, twice, with a fetch pending."""
    clock = FakeClock()
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)

    async def use() -> str:
        token = await cache._get(KEY, fetch)
        clock.now += 2000
        return token.value

    assert asyncio.run(use()) == "tok-1"
    assert asyncio.run(use()) == "tok-2"


# --- refresh and its fallbacks ---------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        ServerError("internal error", status=500),
        MalformedResponseError("not JSON", status=200),
        TransportError("timed out", maybe_sent=True),
        CredentialsError("invalid_grant", status=400, error="invalid_grant"),
    ],
    ids=["5xx", "malformed", "timeout", "invalid_grant"],
)
async def test_any_refresh_failure_falls_back_to_client_credentials(clock, failure):
    """Any failed refresh (not only a refusal) is followed by a client-credentials grant:
    a refresh endpoint answering 500 never locks the client out after expiry."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    old = await cache._get(KEY, fetch)
    fetch.refresh_error = failure
    clock.now += 2000  # expired: callers wait for the new token
    token = await cache._get(KEY, fetch)
    assert fetch.calls == [None, old, None]
    assert token.value == "tok-3"


class SiblingStore(MemoryTokenStore):
    """A store where a sibling process already rotated the refresh token."""

    def __init__(self) -> None:
        self.sibling: AccessToken | None = None

    async def load(self, key, *, clock):
        return self.sibling


async def test_refused_refresh_takes_the_token_a_sibling_already_stored(clock):
    """A refused refresh (invalid_grant: a sibling used the rotating refresh token first)
    re-reads the store and takes the sibling's token: no client-credentials grant."""
    store = SiblingStore()
    cache = TokenCache(store, clock=clock)
    fetch = Fetcher(clock)
    await cache._get(KEY, fetch)
    clock.now += 2000
    store.sibling = AccessToken(
        value="sibling", token_type="Bearer", expires_in=900, obtained_at=clock.now
    )
    fetch.refresh_error = CredentialsError("invalid_grant", status=400, error="invalid_grant")
    assert (await cache._get(KEY, fetch)).value == "sibling"
    assert len(fetch.calls) == 2  # the first grant, the refused refresh


def test_memory_store_is_a_token_store():
    """The default store implements the TokenStore protocol."""
    assert isinstance(MemoryTokenStore(), TokenStore)
    assert isinstance(TokenCache().store, MemoryTokenStore)


# --- the 401 policy ------------------------------------------------------------------------


async def test_401_with_a_replaced_token_retries_with_the_current_one(clock):
    """A late 401 for a token already replaced costs no token request.

    A provider of one node (no propagation delay): the retry does not wait seconds of
    real time for the new token to be known; those waits are the next tests'.
    """
    cache = TokenCache(clock=clock, propagation_delay=0)
    fetch = Fetcher(clock)
    old = await cache._get(KEY, fetch)
    cache._invalidate(KEY, old)
    new = await cache._get(KEY, fetch)
    assert await cache._recover(KEY, old, fetch) is new
    assert len(fetch.calls) == 2


async def test_401s_force_at_most_one_new_token_per_cooldown(clock):
    """1,000 concurrent 401s with one token force one new token; 401s to that token
    within the cooldown are the requests' answers (no token request), and after the
    cooldown one more new token may be forced."""
    cache = TokenCache(clock=clock, reauth_cooldown=30, propagation_delay=0)
    fetch = Fetcher(clock)
    old = await cache._get(KEY, fetch)
    retried = await asyncio.gather(*(cache._recover(KEY, old, fetch) for _ in range(1000)))
    assert {t.value for t in retried} == {"tok-2"}
    assert len(fetch.calls) == 2
    clock.now += 10
    verdicts = await asyncio.gather(*(cache._recover(KEY, retried[0], fetch) for _ in range(1000)))
    assert verdicts == [None] * 1000
    assert len(fetch.calls) == 2
    clock.now += 21
    assert (await cache._recover(KEY, retried[0], fetch)).value == "tok-3"
    assert len(fetch.calls) == 3


async def test_401_to_a_token_just_issued_is_retried_once_it_is_older(clock):
    """A 401 to the token a re-authentication just fetched may be replication lag: the
    request is retried when the token is propagation_delay old, not answered at once."""
    cache = TokenCache(clock=clock, reauth_cooldown=30, propagation_delay=0.05)
    fetch = Fetcher(clock)
    old = await cache._get(KEY, fetch)
    fresh = await cache._recover(KEY, old, fetch)
    assert fresh is not None
    assert fresh.value == "tok-2"
    again = asyncio.create_task(cache._recover(KEY, fresh, fetch))
    await asyncio.sleep(0.01)
    assert not again.done()  # waiting for the token to be known everywhere
    clock.now += 0.05
    assert await again is fresh
    assert await cache._recover(KEY, fresh, fetch) is None  # now it is the answer
    assert cache._reauth_in(KEY) == pytest.approx(30 - 0.05)
    assert len(fetch.calls) == 2


async def test_401_to_a_young_token_is_retried_even_after_another_node_accepted_it(clock):
    """A multi-node provider: one node accepted the new token (confirmed), another
    answers 401 because it does not know it yet. That 401 is retried once the token is
    propagation_delay old, never taken as the answer while the token is younger
    (before: a token accepted once made every later 401 final)."""
    cache = TokenCache(clock=clock, reauth_cooldown=30, propagation_delay=1.5)
    fetch = Fetcher(clock)
    old = await cache._get(KEY, fetch)
    token = await cache._recover(KEY, old, fetch)  # a 401 forced a new token
    cache._confirm(KEY, token)  # node A accepted it
    clock.now += 0.5
    retry = asyncio.create_task(cache._recover(KEY, token, fetch))  # node B refused it
    await asyncio.sleep(0.01)
    assert not retry.done()
    clock.now += 1.0
    assert await retry is token
    assert len(fetch.calls) == 2


async def test_a_replaced_token_is_retried_once_the_provider_accepted_it(clock):
    """Requests refused with a token another caller already replaced wait for the new
    token to be accepted by the provider (or to be propagation_delay old) before their
    retry: the forcing caller's retry goes first, and its success releases the rest."""
    cache = TokenCache(clock=clock, reauth_cooldown=30, propagation_delay=20)
    fetch = Fetcher(clock)
    old = await cache._get(KEY, fetch)
    new = await cache._recover(KEY, old, fetch)  # the first 401 forces a new token
    waiting = [asyncio.create_task(cache._recover(KEY, old, fetch)) for _ in range(50)]
    await asyncio.sleep(0.01)
    assert not any(t.done() for t in waiting)
    cache._confirm(KEY, new)  # the forcing caller's retry was accepted
    assert {t.value for t in await asyncio.gather(*waiting)} == {new.value}
    # Accepted by one node, but young: a 401 to it is not the answer yet.
    late = asyncio.create_task(cache._recover(KEY, new, fetch))
    await asyncio.sleep(0.01)
    assert not late.done()
    clock.now += 20
    assert await late is new
    assert await cache._recover(KEY, new, fetch) is None  # old, within the cooldown
    assert len(fetch.calls) == 2
