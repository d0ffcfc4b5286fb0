"""The outbox worker stops when it is cancelled, whenever the cancellation arrives."""

from __future__ import annotations

import asyncio

import pytest
from sandboxtools import client_for

from invoicing_async._client import worker as _worker
from invoicing_async.outbox import SqliteOutbox
from invoicing_sandbox import Sandbox


async def test_a_worker_cancelled_as_its_round_ends_is_cancelled(tmp_path, monkeypatch):
    """A worker cancelled just as a round ends, while it waits for the round's heartbeat
    to stop, ends cancelled: its cancellation is not taken for the heartbeat's own and
    swallowed. A deferral's drainer is such a worker: closing the deferral waited
    forever for a drainer that went on."""
    worker: list[asyncio.Task] = []
    beat = _worker.Claims.heartbeat

    async def heartbeat(claims):
        try:
            await beat(claims)
        except asyncio.CancelledError:  # the round ends: the worker waits for this
            worker[0].cancel()
            raise

    monkeypatch.setattr(_worker.Claims, "heartbeat", heartbeat)
    async with (
        Sandbox() as sb,
        client_for(sb) as client,
        SqliteOutbox(tmp_path / "outbox.db") as outbox,
    ):
        worker.append(asyncio.ensure_future(outbox.run_worker(client, stop_when_empty=True)))
        with pytest.raises(asyncio.CancelledError):
            await worker[0]
    assert worker[0].cancelled()
