"""The sandbox's controls for deterministic tests and multi-node providers.

``hold``/``release``: document requests wait (received, not processed) until the test
lets them go. ``set_token_lag``: two nodes, a new token known at once to the node that
issued it and to the other one later. ``set_token_revocation``: tokens revoked some
seconds after their issue.
"""

from __future__ import annotations

import asyncio

import pytest
from sandboxtools import FakeClock, client_for, invoice, raw

from invoicing_async import TokenCache
from invoicing_sandbox import Sandbox


async def test_held_requests_wait_uncommitted_until_released():
    """hold(after=1): the first request is processed, the second waits at the gate
    (counted by ``held``, nothing committed) until release()."""
    async with Sandbox(key_algorithm="cv25519") as sb, client_for(sb) as client:
        sb.hold(after=1)
        first = await client.submit_json(invoice(sb, 1))
        second = asyncio.ensure_future(client.submit_json(invoice(sb, 2)))
        await sb.wait_held(1)
        assert sb.held == 1
        assert sb.commit_count == 1
        assert not second.done()
        sb.release()
        assert (await second).mark != first.mark
        assert sb.held == 0
        assert sb.commit_count == 2
        third = await client.submit_json(invoice(sb, 3))  # released: later ones pass
        assert third.mark


async def test_closing_the_sandbox_lets_held_requests_finish():
    """A request held when the sandbox closes goes on and commits (like a slow one),
    so close() never hangs on the gate."""
    sb = Sandbox(key_algorithm="cv25519")
    await sb.start()
    client = client_for(sb)
    try:
        sb.hold()
        pending = asyncio.ensure_future(client.submit_json(invoice(sb, 1)))
        await sb.wait_held(1)
        await asyncio.wait_for(sb.close(), 10)
        assert sb.commit_count == 1
        pending.cancel()
        await asyncio.gather(pending, return_exceptions=True)
    finally:
        await client.close()


async def test_holding_again_keeps_held_requests_until_release():
    """hold() again while a request is held (to let another one pass, say) keeps the held
    one waiting, and release() lets it go on. It used to wait for an event that nothing
    would set any more, until the sandbox closed."""
    async with Sandbox(key_algorithm="cv25519") as sb, client_for(sb) as client:
        sb.hold()
        first = asyncio.ensure_future(client.submit_json(invoice(sb, 1)))
        await sb.wait_held(1)
        sb.hold(after=1)
        await client.submit_json(invoice(sb, 2))  # the one let through
        assert not first.done()
        assert sb.held == 1
        sb.release()
        await asyncio.wait_for(first, 30)  # a guard against the old deadlock, not a timing
        assert sb.commit_count == 2


def test_hold_refuses_a_negative_count():
    """hold(after=-1) is a mistake, said at once."""
    with pytest.raises(ValueError, match="after"):
        Sandbox().hold(after=-1)


async def post(sb: Sandbox, token, number: int) -> int:
    """One document request with ``token``, outside the client (no 401 policy)."""
    headers = {"Authorization": f"Bearer {token.value}", "APIKey": sb.client_secret}
    status, _ = await raw(
        "POST", f"{sb.base_url}/Invoice/json", json=invoice(sb, number), headers=headers
    )
    return status


async def test_two_nodes_learn_a_new_token_one_after_the_other():
    """set_token_lag(5, nodes=2) on a fake clock: requests alternate between the nodes;
    the node that issued the token (the token request's) accepts it at once, the other
    answers 401 until 5 s have passed, then both accept it."""
    clock = FakeClock()
    async with Sandbox(key_algorithm="cv25519", clock=clock) as sb:
        sb.set_token_lag(5, nodes=2)
        async with client_for(sb, token_cache=TokenCache(clock=clock)) as client:
            token = await client.token()  # node 0 issues it
        assert [await post(sb, token, n) for n in range(1, 5)] == [401, 201, 401, 201]
        clock.now += 5
        assert [await post(sb, token, n) for n in range(5, 9)] == [201] * 4


async def test_revoked_tokens_are_refused_after_the_delay():
    """set_token_revocation(10): a token works for 10 s after its issue, then 401
    ("revoked"); a new token works again."""
    clock = FakeClock()
    async with Sandbox(key_algorithm="cv25519", clock=clock) as sb:
        sb.set_token_revocation(10)
        cache = TokenCache(clock=clock, propagation_delay=0)
        async with client_for(sb, token_cache=cache) as client:
            token = await client.token()
            assert await post(sb, token, 1) == 201
            clock.now += 10
            assert await post(sb, token, 2) == 401
            await client.submit_json(invoice(sb, 3))  # the 401 forces a new token
        assert sb.stats.token_requests == 2
