"""A fleet of real processes sharing tokens through a real Redis (issue 14's "done means").

Eight worker processes (``scripts/fleet_worker.py``) talk to a sandbox served from this
test's event loop and to a ``redis-server`` the suite starts. They are started together
(each waits for a line on stdin) so the token endpoint sees them as a herd.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from invoicing_async import InvoicingClient, TokenCache
from invoicing_async.redis import RedisTokenStore
from invoicing_sandbox import Fault, Sandbox

SCRIPT = Path(__file__).parent / "scripts" / "fleet_worker.py"
FLEET = 8


async def start_fleet(sb, redis_url, mode, seconds=0.0, count=FLEET, **store):
    """``count`` worker processes, ready; ``store`` may set ``lock_ttl`` and ``timeout``."""
    settings = {
        "FLEET_LOCK_TTL": str(store.get("lock_ttl", 1.0)),
        "FLEET_REDIS_TIMEOUT": str(store.get("timeout", 0.5)),
    }
    workers = []
    for worker in range(count):
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SCRIPT),
            mode,
            sb.base_url,
            sb.client_id,
            redis_url,
            str(worker),
            str(seconds),
            env={**os.environ, "INVOICING_API_KEY": sb.client_secret, **settings},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        workers.append(process)
    for process in workers:
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        assert line.strip() == b"ready", (line, await process.stderr.read())
    return workers


def go(workers) -> None:
    for process in workers:
        process.stdin.write(b"go\n")


async def results(workers, timeout=120) -> list[dict]:
    found = []
    for process in workers:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
        assert process.returncode == 0, err.decode()[-3000:]
        found.append(json.loads(out.decode().strip().splitlines()[-1]))
    return found


async def test_cold_fleet_of_8_processes_x_500_coroutines_makes_one_token_request(redis_url):
    """Eight processes, 500 coroutines each, start on a cold store at once: the token
    endpoint sees exactly one request, and every coroutine gets that token. The store's
    defaults (a 10 s lock, 1 s per Redis call; here 5 s, for a loaded machine's 4,000
    coroutines): with the 0.5 s of the outage tests, a starved holder's lock may expire,
    or a slow answer count as Redis down, and a second request is then right."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        workers = await start_fleet(sb, redis_url, "cold", lock_ttl=10.0, timeout=5.0)
        go(workers)
        found = await results(workers)
        assert [r["distinct"] for r in found] == [1] * FLEET
        assert sb.stats.token_requests == 1
        assert sum(r["requests"] for r in found) == 1
        assert not any(r["warnings"] for r in found)


async def soak(redis_url, seconds, *, stop_redis=None, lifetime=2):
    async with Sandbox(key_algorithm="cv25519", expires_in=lifetime) as sb:
        workers = await start_fleet(sb, redis_url, "soak", seconds)
        go(workers)
        started = time.monotonic()
        if stop_redis is not None:
            await stop_redis(started)
        found = await results(workers, timeout=seconds + 120)
        return sb, found, time.monotonic() - started


def assert_no_failures(found) -> int:
    ok = 0
    for result in found:
        failures = {k: v for k, v in result.items() if k not in ("ok", "warnings", "requests")}
        assert not failures, result
        ok += result["ok"]
    return ok


async def check_soak(redis_url, seconds):
    sb, found, elapsed = await soak(redis_url, seconds)
    ok = assert_no_failures(found)
    assert ok > 0
    lifetimes = elapsed / 2
    # One renewal per lifetime, renewed a third ahead: ~1.5 per lifetime for the fleet
    # (eight unshared processes would make ~12); refresh grants do the renewing.
    assert sb.stats.token_requests <= 1.8 * lifetimes + 3, (sb.stats, lifetimes)
    assert sb.stats.refresh_requests >= 0.5 * lifetimes
    assert sb.commit_count == ok


async def test_fleet_with_2_second_tokens_renews_once_per_lifetime(redis_url):
    """Eight processes submit invoices for 8 s with 2-second tokens whose refresh tokens
    rotate (an hour of 900 s tokens, 450 times faster): zero authentication errors,
    every invoice accepted, and about one token request per token lifetime for the
    whole fleet, not one per process."""
    await check_soak(redis_url, 8.0)


@pytest.mark.slow
async def test_fleet_soak_with_2_second_tokens_for_a_minute(redis_url):
    """As above over 60 s of real time: 30 lifetimes of 2-second tokens."""
    await check_soak(redis_url, 60.0)


async def test_redis_stopped_mid_run_fails_no_invoice(redis_server):
    """Redis is stopped after 2 s of an 8 s run and started again 3 s later: every
    invoice of the eight processes is accepted, each process says once (WARNING) that
    it fetches its own tokens, and sharing resumes."""
    redis_server.flush()

    async def outage(started: float) -> None:
        await asyncio.sleep(2)
        await asyncio.to_thread(redis_server.stop)
        await asyncio.sleep(3)
        await asyncio.to_thread(redis_server.start)

    try:
        _, found, _ = await soak(redis_server.url, 8.0, stop_redis=outage)
    finally:
        if redis_server.process is None:
            redis_server.start()
    assert assert_no_failures(found) > 0
    warned = [r["warnings"] for r in found]
    assert all(sum("Redis token store is unavailable" in w for w in ws) == 1 for ws in warned), (
        warned
    )


def fleet_bound(elapsed: float, lifetime: float) -> float:
    """Token requests a sharing fleet makes: about one and a half per lifetime (renewed a
    third ahead, with jitter), plus the first."""
    return 1.8 * elapsed / lifetime + 3


async def restart_soak(redis_server, seconds, *, lifetime, restart_at):
    """The fleet submits for ``seconds``; Redis is restarted, empty, ``restart_at`` in."""
    redis_server.flush()

    async def restart(started: float) -> None:
        await asyncio.sleep(restart_at)
        await asyncio.to_thread(redis_server.stop)
        await asyncio.to_thread(redis_server.start)  # no persistence: empty

    try:
        sb, found, elapsed = await soak(
            redis_server.url, seconds, stop_redis=restart, lifetime=lifetime
        )
    finally:
        if redis_server.process is None:
            redis_server.start()
    assert assert_no_failures(found) > 0
    requests = sb.stats.token_requests
    print(json.dumps({"token_requests": requests, "per_process": [r["requests"] for r in found]}))
    # At most one extra request per process for the outage.
    assert requests <= fleet_bound(elapsed, lifetime) + FLEET, (requests, elapsed)
    return found


async def test_redis_restarted_empty_the_fleet_shares_tokens_again(redis_server):
    """Eight processes submit for 9 s with 2-second tokens; Redis is restarted (empty)
    3 s in: no invoice fails, and once Redis answers the fleet is back to about one
    token request per renewal, at most one extra request per process for the outage
    (before: every process kept renewing on its own)."""
    await restart_soak(redis_server, 9.0, lifetime=2, restart_at=3.0)


@pytest.mark.slow
async def test_redis_restarted_empty_the_fleet_shares_tokens_again_soak(redis_server):
    """The issue's run: 30 s with 6-second tokens, Redis restarted (empty) 10 s in
    (before: 31 token requests where a fleet sharing makes about 8)."""
    await restart_soak(redis_server, 30.0, lifetime=6, restart_at=10.0)


async def test_sigkilled_lock_holder_delays_the_others_by_at_most_the_lock_ttl(redis_url):
    """The process holding the fetch lock is killed (SIGKILL) while its token request
    hangs: the other processes get a token no later than the lock's TTL (2 s) after the
    kill (plus the new fetch), with one more token request."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.script_token(Fault.hang())
        # 2 s: short enough to wait for, long enough that a starved successor's
        # heartbeat (every 0.7 s) keeps its lock on a loaded machine.
        store_settings = {"lock_ttl": 2.0, "timeout": 2.0}
        holder = (await start_fleet(sb, redis_url, "cold", count=1, **store_settings))[0]
        go([holder])
        store = RedisTokenStore(redis_url)
        async with store:
            lock_keys = []
            for _ in range(200):
                lock_keys = [k async for k in store._redis.scan_iter(match="*:lock")]
                if lock_keys:
                    break
                await asyncio.sleep(0.05)
            assert lock_keys, "the holder never took the lock"
            others = await start_fleet(sb, redis_url, "cold", count=FLEET - 1, **store_settings)
            go(others)
            # Until the others wait for the holder: subscribed to the lock's channel.
            channel = lock_keys[0].decode().removesuffix(":lock") + ":events"
            while (await store._redis.pubsub_numsub(channel))[0][1] < FLEET - 1:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            holder.send_signal(signal.SIGKILL)
            killed = time.time()
            found = await results(others)
        await holder.wait()
        assert [r["distinct"] for r in found] == [1] * (FLEET - 1)
        assert sb.stats.token_requests == 2  # the hung one, the successor's
        # The lock's TTL (2 s; its heartbeat died with the holder), plus the new fetch and
        # a busy machine's delays: far from the hung request's 10 s timeout.
        waited = max(r["done_at"] for r in found) - killed
        assert waited < 2.0 + 2.0, waited


async def test_redis_store_in_one_process_with_many_clients(redis_url):
    """Clients with their own caches on one shared store (one process standing in for a
    fleet) make one token request between them."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        stores = [RedisTokenStore(redis_url) for _ in range(4)]
        clients = [
            InvoicingClient(sb.base_url, sb.client_id, sb.client_secret, token_cache=TokenCache(s))
            for s in stores
        ]
        try:
            tokens = await asyncio.gather(*(c.token() for c in clients for _ in range(50)))
        finally:
            for client, store in zip(clients, stores, strict=True):
                await client.close()
                await store.aclose()
        assert len({t.value for t in tokens}) == 1
        assert sb.stats.token_requests == 1
