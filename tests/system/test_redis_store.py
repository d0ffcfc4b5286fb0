"""RedisTokenStore against a real redis-server: lock, fencing, PTTL, secrets, fallbacks.

Each store stands in for one process of a fleet (its own connections, its own cache).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import pytest
import redis.asyncio as aioredis
from sandboxtools import until

from invoicing_async import AccessToken, CredentialsError, TokenCache
from invoicing_async._io.tokencache import CredentialsKey
from invoicing_async.redis import RedisTokenStore

KEY = CredentialsKey.of("https://p.example", "123456789", "API-KEY-SECRET")


class Grants:
    """A token endpoint with rotating refresh tokens: each refresh token is good once."""

    def __init__(self, lifetime: float = 900.0, delay: float = 0.0) -> None:
        self.lifetime = lifetime
        self.delay = delay
        self.calls: list[str | None] = []  # the refresh token used, or None
        self.valid_refresh: set[str] = set()
        self.gate: asyncio.Event | None = None

    async def __call__(self, current: AccessToken | None) -> AccessToken:
        self.calls.append(current.refresh_token if current is not None else None)
        started = time.monotonic()
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(self.delay)
        if current is not None:
            if current.refresh_token not in self.valid_refresh:
                raise CredentialsError("refused", status=400, error="invalid_grant")
            self.valid_refresh.discard(current.refresh_token)
        n = len(self.calls)
        self.valid_refresh.add(f"RT-SECRET-{n}")
        return AccessToken(
            value=f"AT-SECRET-{n}",
            token_type="Bearer",
            expires_in=self.lifetime,
            obtained_at=started,
            refresh_token=f"RT-SECRET-{n}",
        )


@pytest.fixture
async def raw(redis_url):
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def stores(redis_url):
    made: list[RedisTokenStore] = []

    def make(**kwargs) -> RedisTokenStore:
        kwargs.setdefault("lock_ttl", 1.0)
        store = RedisTokenStore(redis_url, **kwargs)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.aclose()


async def test_many_caches_on_a_cold_store_make_one_request(stores, caplog):
    """20 caches (processes) x 100 coroutines on a cold store: one grant, one token; the
    DEBUG log tells the fetch and the store, with no secret in it."""
    grants = Grants(delay=0.05)
    caches = [TokenCache(stores()) for _ in range(20)]
    with caplog.at_level(logging.DEBUG, logger="invoicing_async"):
        tokens = await asyncio.gather(*(c._get(KEY, grants) for c in caches for _ in range(100)))
    assert len(grants.calls) == 1
    assert {t.value for t in tokens} == {"AT-SECRET-1"}
    assert "requesting an access token" in caplog.text
    assert "stored a new access token" in caplog.text
    assert "SECRET" not in caplog.text


async def test_waiters_are_woken_by_pubsub_not_by_polling(stores):
    """A process waiting for a sibling's fetch gets the token as soon as it is stored,
    even with a 30 s poll interval: the wait listens on the store's channel."""
    grants = Grants()
    grants.gate = asyncio.Event()
    holder = TokenCache(stores(poll_interval=30, lock_ttl=60))
    waiter = TokenCache(stores(poll_interval=30, lock_ttl=60))
    first = asyncio.create_task(holder._get(KEY, grants))
    await asyncio.wait_for(until(lambda: grants.calls), 10)  # the holder is fetching
    second = asyncio.create_task(waiter._get(KEY, grants))
    await asyncio.sleep(0.1)
    assert not second.done()
    started = time.monotonic()
    grants.gate.set()
    assert (await asyncio.wait_for(second, 5)).value == "AT-SECRET-1"
    assert time.monotonic() - started < 2
    await first
    assert len(grants.calls) == 1


async def test_expiry_is_read_from_redis_pttl(stores, raw):
    """A sibling reads the remaining lifetime from Redis's PTTL (less a small margin),
    not from the issuing host's clock."""
    grants = Grants(lifetime=60)
    await TokenCache(stores())._get(KEY, grants)
    (token_key,) = [k async for k in raw.scan_iter(match="*:token")]
    await raw.pexpire(token_key, 20_000)  # 20 s left, whatever the issuer thought
    before = time.monotonic()
    token = await TokenCache(stores())._get(KEY, grants)
    assert token.value == "AT-SECRET-1"
    assert before + 10 < token.expires_at <= time.monotonic() + 20  # not the 60 s lifetime
    assert len(grants.calls) == 1


async def test_a_holder_whose_lock_expired_never_overwrites_a_newer_token(stores, raw):
    """Fencing: holder A's lock expires while its fetch is slow; B takes the lock and
    stores a token; A's late token is refused by the generation check, and A hands out
    B's token."""
    slow = Grants()
    slow.gate = asyncio.Event()
    a = asyncio.create_task(TokenCache(stores())._get(KEY, slow))
    for _ in range(100):
        locks = [k async for k in raw.scan_iter(match="*:lock")]
        if locks:
            break
        await asyncio.sleep(0.01)
    await raw.delete(*locks)  # as if A's lock expired (A is stalled, its heartbeat too)
    fast = Grants()
    fast.valid_refresh.clear()
    b_token = await TokenCache(stores())._get(KEY, fast)
    assert b_token.value == "AT-SECRET-1"
    slow.calls.clear()
    slow.gate.set()
    a_token = await a
    assert a_token.value == b_token.value  # A took the newer, stored token
    assert (await TokenCache(stores())._get(KEY, fast)).value == b_token.value
    (generation_key,) = [k async for k in raw.scan_iter(match="*:generation")]
    assert await raw.get(generation_key) == b"2"


async def test_rotating_refresh_tokens_the_stored_one_is_used(stores):
    """Each renewal, whichever process does it, uses the refresh token stored by the last
    one, not the one in its own memory: with refresh tokens good once, none is refused."""
    grants = Grants()
    fleet = [stores() for _ in range(4)]
    current = await fleet[0].obtain(KEY, None, grants, clock=time.monotonic)
    for store in fleet[1:]:
        # This process holds the current token, but an outdated refresh token.
        remembered = AccessToken(
            value=current.value,
            token_type="Bearer",
            expires_in=900,
            obtained_at=current.obtained_at,
            refresh_token="RT-SECRET-OUTDATED",
        )
        current = await store.obtain(KEY, remembered, grants, clock=time.monotonic)
    assert grants.calls == [None, "RT-SECRET-1", "RT-SECRET-2", "RT-SECRET-3"]
    assert current.value == "AT-SECRET-4"


async def test_refused_refresh_rereads_the_store_before_client_credentials(stores, raw):
    """A refresh refused with invalid_grant (a sibling rotated it) takes the sibling's
    token from the store if there is one; only otherwise client credentials."""
    grants = Grants(lifetime=900)
    mine = TokenCache(stores())
    old = await mine._get(KEY, grants)
    sibling = TokenCache(stores())
    await sibling._get(KEY, grants)
    # The sibling renews (rotating RT-SECRET-1) while this process still holds `old`.
    await sibling._recover(KEY, old, grants)
    assert grants.calls == [None, None]
    grants.valid_refresh.clear()
    stale = AccessToken(
        value=old.value, token_type="Bearer", expires_in=900, obtained_at=0, refresh_token="x"
    )
    assert (await mine._renew(KEY, mine._entries[KEY], stale, grants)).value == "AT-SECRET-2"
    assert grants.calls == [None, None, "x"]


async def test_stored_values_are_encrypted_and_keys_hold_no_secret(stores, raw, caplog):
    """With an encryption key no token or refresh token is readable in Redis, no key name
    holds the API key, and a process with another key ignores the value (and says so)
    instead of failing."""
    grants = Grants()
    await TokenCache(stores(encryption_key=b"k" * 32))._get(KEY, grants)
    names = [k async for k in raw.scan_iter()]
    assert names
    for name in names:
        assert b"API-KEY-SECRET" not in name
        assert KEY.secret_digest.encode() not in name
        assert b"123456789" in name
        if await raw.type(name) == b"string":
            value = await raw.get(name)
            assert b"AT-SECRET" not in value
            assert b"RT-SECRET" not in value
    with caplog.at_level(logging.WARNING, logger="invoicing_async.auth"):
        other = await TokenCache(stores(encryption_key=b"x" * 32))._get(KEY, grants)
    assert other.value == "AT-SECRET-2"
    assert "cannot read" in caplog.text
    assert "SECRET" not in caplog.text
    assert "k" * 32 not in repr(stores(encryption_key=b"k" * 32))
    with pytest.raises(ValueError, match="16, 24 or 32"):
        RedisTokenStore("redis://127.0.0.1:1/0", encryption_key=b"short")


async def test_a_forced_reauth_discards_only_the_refused_token(stores):
    """A 401 forces a new token fleet-wide: the refused token is deleted from the store
    and the next process reads the new one; a late 401 for the old token deletes nothing."""
    grants = Grants()
    first = TokenCache(stores())
    old = await first._get(KEY, grants)
    new = await first._recover(KEY, old, grants)
    assert new.value == "AT-SECRET-2"
    second = TokenCache(stores())
    await second._get(KEY, grants)
    await second._store.discard(KEY, old)
    assert (await TokenCache(stores())._get(KEY, grants)).value == new.value
    assert len(grants.calls) == 2


async def test_failed_fetch_releases_the_lock_at_once(stores):
    """A holder whose grant fails releases the lock: the next process fetches at once,
    without waiting for the lock's TTL."""
    failing = Grants()
    failing.valid_refresh.clear()

    async def refuse(current):
        raise CredentialsError("refused", status=400, error="invalid_client")

    with pytest.raises(CredentialsError):
        await TokenCache(stores(lock_ttl=30))._get(KEY, refuse)
    started = time.monotonic()
    assert (await TokenCache(stores(lock_ttl=30))._get(KEY, failing)).value == "AT-SECRET-1"
    assert time.monotonic() - started < 5


async def test_unreachable_redis_falls_back_in_process_and_warns_once(caplog):
    """Redis refusing connections: tokens still come (one grant per process, single
    flight in it), and the process says so once at WARNING."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = RedisTokenStore(f"redis://:PASSWORD-SECRET@127.0.0.1:{port}/0", retry_after=0)
    cache = TokenCache(store)
    grants = Grants()
    with caplog.at_level(logging.DEBUG, logger="invoicing_async.auth"):
        tokens = await asyncio.gather(*(cache._get(KEY, grants) for _ in range(100)))
        cache.clear()
        await cache._get(KEY, grants)
    await store.aclose()
    assert {t.value for t in tokens} == {"AT-SECRET-1"}
    assert len(grants.calls) == 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "unavailable" in warnings[0].getMessage()
    assert store.degraded
    assert "PASSWORD-SECRET" not in caplog.text
    assert "PASSWORD-SECRET" not in repr(store)


async def test_a_redis_that_never_answers_falls_back_within_the_timeout():
    """A Redis that accepts connections but never answers (overloaded, a half-open
    network) costs at most the store's timeout before the process fetches its own."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        store = RedisTokenStore(f"redis://127.0.0.1:{port}/0", timeout=0.3)
        started = time.monotonic()
        token = await TokenCache(store)._get(KEY, Grants())
        elapsed = time.monotonic() - started
        await store.aclose()
    assert token.value == "AT-SECRET-1"
    assert elapsed < 3
