"""The library's two asyncio waits: :func:`pause` and :func:`within`.

How long to wait is the core's (:func:`invoicing_async._core.retry.backoff` and the
policies); waiting is I/O's, so it lives here, in the lowest folder that waits on the
event loop: the channel, the client, the stores and the drainer import it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Awaitable

__all__ = ["pause", "within"]

T = TypeVar("T")


async def pause(
    seconds: float | None,
    until: asyncio.Event | None = None,
    woken: asyncio.Future[Any] | None = None,
) -> None:
    """Wait ``seconds``, or until ``until`` is set or ``woken`` done if that comes first.

    ``seconds`` ``None``: until then (with neither: no wait). ``woken`` is left as it is
    (others may wait for it too).
    """
    if until is None and woken is None:
        await asyncio.sleep(seconds or 0.0)
        return
    waiter = asyncio.ensure_future(until.wait()) if until is not None else None
    waited = {future for future in (waiter, woken) if future is not None}
    try:
        await asyncio.wait(waited, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if waiter is not None:
            waiter.cancel()


async def within(work: Awaitable[T], seconds: float | None) -> asyncio.Future[T] | None:
    """``work`` run as a task for ``seconds`` at most: the task, done; or ``None``.

    ``None``: the time ran out, and the task was cancelled and waited for as it ended (a
    connection it held closed). A cancellation of the caller cancels the task too.
    """
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if done:
        return task
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None
