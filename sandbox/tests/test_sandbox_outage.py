"""The sandbox's outage switch: refused connections, hanging requests, 503s, until told.

A POS application's own tests drive its deferral with it, so each outage must be what a
client really meets: a refused connection is certainly not sent, a hanging request is
never processed and ends when the outage does, a 503 is answered unprocessed; and the
provider comes back on the same URL.
"""

from __future__ import annotations

import asyncio

import pytest
from helpers import once
from sandboxtools import client_for, invoice, raw

from invoicing_async import RetryPolicy, ServerError, TransportError, document_key
from invoicing_sandbox import Sandbox

ONE_TRY = RetryPolicy(max_attempts=1)


async def test_refuse_refuses_connections_and_the_provider_comes_back_on_the_same_url():
    """While refusing, a new connection is refused (certainly not sent: maybe_sent is
    False) and nothing is committed; afterwards the same base URL answers again."""
    async with Sandbox() as sb:
        url = sb.base_url
        await sb.set_outage("refuse")
        assert sb.outage_mode == "refuse"
        async with client_for(sb, retry=ONE_TRY) as client:
            with pytest.raises(TransportError) as info:
                await client.submit_secure(invoice(sb, 1))
            assert info.value.maybe_sent is False
            await sb.set_outage(None)
            assert sb.base_url == url
            result = await client.submit_secure(invoice(sb, 1))
        assert sb.committed[document_key(invoice(sb, 1))].record == result
        assert sb.commit_count == 1


async def test_refuse_drops_open_connections():
    """A connection kept alive from before the outage does not reach the provider:
    the client's request on it fails (the open connections are closed)."""
    async with Sandbox() as sb, client_for(sb, retry=ONE_TRY) as client:
        await client.submit_secure(invoice(sb, 1))  # a pooled connection now exists
        async with sb.outage("refuse"):
            with pytest.raises(TransportError):
                await once(client, invoice(sb, 2))
        assert sb.commit_count == 1


async def test_hang_holds_requests_unprocessed_until_the_client_gives_up():
    """A hanging request is accepted and never answered; the client's timeout ends it,
    the outage counts it, and nothing is committed."""
    async with Sandbox() as sb, client_for(sb, retry=ONE_TRY) as client:
        await client.token()
        async with sb.outage("hang"):
            with pytest.raises(TransportError) as info:
                await once(client, invoice(sb, 1), timeout=0.3)
            assert info.value.maybe_sent is True  # accepted: the client cannot know
            assert sb.outage_hits == 1
        await _until(lambda: not sb._inflight)  # the held request's handler has ended
        assert sb.commit_count == 0
        assert [r.fault for r in sb.requests if r.path.endswith("/Invoice/json")] == ["outage:hang"]


async def test_a_hanging_request_ends_when_the_outage_does():
    """Ending the outage drops the requests it held (unprocessed): a client waiting
    without a timeout is released at once, and the next request is answered."""
    async with Sandbox() as sb, client_for(sb, retry=ONE_TRY) as client:
        await client.token()
        await sb.set_outage("hang")
        waiting = asyncio.ensure_future(once(client, invoice(sb, 1)))
        await _until(lambda: sb.outage_hits == 1)
        await sb.set_outage(None)
        with pytest.raises(TransportError):
            await asyncio.wait_for(waiting, 10)
        await client.submit_secure(invoice(sb, 2))
        assert set(sb.committed) == {document_key(invoice(sb, 2))}


async def test_503_answers_every_provider_route_unprocessed():
    """Documents and the token endpoint are answered 503 at once; /_sandbox/ is not."""
    async with Sandbox() as sb, client_for(sb, retry=ONE_TRY, token_attempts=1) as client:
        async with sb.outage("503"):
            with pytest.raises(TransportError, match="no access token"):
                await client.submit_secure(invoice(sb, 1))
            status, _ = await raw("GET", sb.inspect_url + "/stats")
            assert status == 200
        await client.token()
        async with sb.outage("503"):
            with pytest.raises(ServerError) as info:
                await once(client, invoice(sb, 1))
            assert info.value.status == 503
        assert sb.outage_hits == 2
        assert sb.commit_count == 0


async def test_the_outage_endpoint_switches_over_http():
    """POST /_sandbox/outage?mode=…&seconds=… starts an outage (ending by itself after
    the seconds), GET shows it, mode=none ends it; refuse without seconds is refused,
    since the service could not hear the request that would end it."""
    async with Sandbox() as sb:
        url = sb.inspect_url + "/outage"
        assert await raw("GET", url) == (200, {"mode": None, "hits": 0, "modes": [
            "refuse", "hang", "503"]})  # fmt: skip
        status, answer = await raw("POST", url + "?mode=refuse")
        assert status == 400
        assert "seconds" in answer["message"]
        assert (await raw("POST", url + "?mode=nonsense"))[0] == 400
        assert (await raw("POST", url + "?mode=503&seconds=-1"))[0] == 400
        assert await raw("POST", url + "?mode=503") == (200, {"mode": "503", "seconds": None})
        assert sb.outage_mode == "503"
        assert (await raw("POST", url + "?mode=none"))[0] == 200
        assert sb.outage_mode is None
        status, _ = await raw("POST", url + "?mode=refuse&seconds=0.2")
        assert status == 200
        assert sb.outage_mode == "refuse"
        await asyncio.wait_for(_ended(sb), 10)  # the timer ends it
        async with client_for(sb) as client:
            await client.submit_secure(invoice(sb, 1))


async def test_an_outage_context_ends_with_its_block_and_a_closed_sandbox_is_clean():
    """`async with sandbox.outage(...)` restores the provider when the block ends (an
    error too); closing a sandbox during a refusal releases its reserved port."""
    async with Sandbox() as sb:
        with pytest.raises(RuntimeError, match="boom"):
            async with sb.outage("503"):
                raise RuntimeError("boom")
        assert sb.outage_mode is None
        await sb.set_outage("refuse")
    with pytest.raises(ValueError, match="outage"):
        async with Sandbox() as sb:
            await sb.set_outage("flood")  # type: ignore[arg-type]


async def _ended(sb: Sandbox) -> None:
    while sb.outage_mode is not None:
        await sb._server.outage.changed()


async def _until(condition) -> None:
    """Wait (10 s at most, a safety net) for sandbox state no event announces."""

    async def poll() -> None:
        while not condition():  # noqa: ASYNC110  (polling the state under test is the point)
            await asyncio.sleep(0.005)

    await asyncio.wait_for(poll(), 10)
