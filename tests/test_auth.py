"""The shared token cache: single flight, renewal ahead of expiry, invalidation."""

from __future__ import annotations

import asyncio

import pytest

from invoicing_async import AccessToken, AuthenticationError, TokenCache
from invoicing_async._auth import CredentialsKey

KEY = CredentialsKey.of("https://p.example", "123456789", "secret")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Fetcher:
    """Counts fetches; optionally blocks until released, or fails."""

    def __init__(self, clock: FakeClock, lifetime: float = 900.0) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.calls: list[AccessToken | None] = []
        self.gate: asyncio.Event | None = None
        self.error: BaseException | None = None

    async def __call__(self, current: AccessToken | None) -> AccessToken:
        self.calls.append(current)
        started = self.clock()
        if self.gate is not None:
            await self.gate.wait()
        else:
            await asyncio.sleep(0)
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


async def test_cold_cache_single_flight(clock):
    """10,000 coroutines on a cold cache cause exactly one token fetch and share its token."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    tokens = await asyncio.gather(*(cache.get(KEY, fetch) for _ in range(10_000)))
    assert len(fetch.calls) == 1
    assert {t.value for t in tokens} == {"tok-1"}
    assert cache.requests(KEY) == 1


async def test_fresh_token_is_reused(clock):
    """A token before its renewal point is returned without fetching."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    first = await cache.get(KEY, fetch)
    clock.now += 800  # renew_at is 840 s after issue for a 900 s token
    assert await cache.get(KEY, fetch) is first
    assert len(fetch.calls) == 1


async def test_renewal_window_one_renews_others_keep_using(clock):
    """Near expiry one caller renews while every other caller keeps the valid token."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    old = await cache.get(KEY, fetch)
    clock.now += 850  # inside the renewal window, still usable
    fetch.gate = asyncio.Event()
    renewer = asyncio.create_task(cache.get(KEY, fetch))
    await asyncio.sleep(0)
    others = await asyncio.gather(*(cache.get(KEY, fetch) for _ in range(100)))
    assert all(t is old for t in others)  # nobody waited for the renewal
    assert len(fetch.calls) == 2
    fetch.gate.set()
    new = await renewer
    assert new.value == "tok-2"
    assert fetch.calls[1] is old  # the renewal saw the old token (to use its refresh token)
    assert await cache.get(KEY, fetch) is new


async def test_expired_token_makes_callers_wait_for_one_fetch(clock):
    """After expiry every caller waits for the same single fetch."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    await cache.get(KEY, fetch)
    clock.now += 900
    fetch.gate = asyncio.Event()
    waiting = [asyncio.create_task(cache.get(KEY, fetch)) for _ in range(50)]
    await asyncio.sleep(0.01)
    assert not any(t.done() for t in waiting)
    fetch.gate.set()
    tokens = await asyncio.gather(*waiting)
    assert {t.value for t in tokens} == {"tok-2"}
    assert len(fetch.calls) == 2


async def test_expiry_counts_from_before_the_request(clock):
    """The lifetime starts when the request was sent, not when the answer arrived."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock, lifetime=100)
    fetch.gate = asyncio.Event()
    task = asyncio.create_task(cache.get(KEY, fetch))
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
        *(cache.get(KEY, fetch) for _ in range(10)), return_exceptions=True
    )
    assert all(isinstance(r, AuthenticationError) for r in results)
    assert len(fetch.calls) == 1
    fetch.error = None
    assert (await cache.get(KEY, fetch)).value == "tok-2"


async def test_cancelled_owner_hands_over(clock):
    """If the coroutine fetching is cancelled, a waiting caller fetches instead of failing."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    fetch.gate = asyncio.Event()
    owner = asyncio.create_task(cache.get(KEY, fetch))
    await asyncio.sleep(0)
    waiter = asyncio.create_task(cache.get(KEY, fetch))
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
    old = await cache.get(KEY, fetch)
    cache.invalidate(KEY, old)
    new = await cache.get(KEY, fetch)
    assert new.value == "tok-2"
    cache.invalidate(KEY, old)  # a late 401 for the old token
    assert await cache.get(KEY, fetch) is new
    assert len(fetch.calls) == 2


async def test_environments_do_not_share_tokens(clock):
    """The same credentials on another base URL get their own token."""
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)
    test = await cache.get(CredentialsKey.of("https://test.p.example", "1", "s"), fetch)
    prod = await cache.get(CredentialsKey.of("https://p.example", "1", "s"), fetch)
    other_secret = await cache.get(CredentialsKey.of("https://p.example", "1", "s2"), fetch)
    assert len({test.value, prod.value, other_secret.value}) == 3


def test_credentials_key_hides_secret():
    """The cache key keeps only a digest of the secret, out of its repr."""
    key = CredentialsKey.of("https://p.example/", "123", "VERY-SECRET")
    assert "VERY-SECRET" not in repr(key)
    assert key.secret_digest not in repr(key)
    assert key.base_url == "https://p.example"


def test_cache_built_outside_a_loop_works_in_several_loops():
    """A cache made at import time works under asyncio.run, twice, with a fetch pending."""
    clock = FakeClock()
    cache = TokenCache(clock=clock)
    fetch = Fetcher(clock)

    async def use() -> str:
        token = await cache.get(KEY, fetch)
        clock.now += 2000
        return token.value

    assert asyncio.run(use()) == "tok-1"
    assert asyncio.run(use()) == "tok-2"
