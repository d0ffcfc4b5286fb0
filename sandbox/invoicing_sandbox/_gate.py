"""A gate tests close on document requests, to hold them until the test says so.

Timing is the enemy of a deterministic test: "the provider takes 0.2 s, so the batch is
still running when the interrupt arrives" holds until a loaded machine proves it wrong.
A closed gate makes the provider wait *before it processes* a document request (nothing
is committed) until the test opens it, so "still running" is a fact::

    sb.hold(after=4)            # four requests pass, the fifth and later ones wait
    await sb.wait_held(1)       # a request is waiting: the batch cannot finish now
    ...                         # interrupt, cancel, kill, restart something
    sb.release()                # the waiting requests go on (and commit)

The gate belongs to the event loop of the running sandbox.

.. versionadded:: 0.3.0
"""

from __future__ import annotations

import asyncio

__all__ = ["Gate"]


class Gate:
    """Open by default; :meth:`hold` closes it (after letting ``after`` requests pass)."""

    def __init__(self) -> None:
        self._passes: int | None = None  # None: open
        self._opened: asyncio.Event | None = None
        self._changed: asyncio.Event | None = None
        self.held = 0

    def hold(self, after: int = 0) -> None:
        """Let ``after`` more document requests through, then hold the following ones."""
        if after < 0:
            raise ValueError("after must not be negative")
        self._passes = after
        self._opened = None

    def release(self) -> None:
        """Open the gate: the requests held go on, and so will later ones."""
        self._passes = None
        if self._opened is not None:
            self._opened.set()
        self._opened = None

    async def wait_held(self, count: int = 1) -> None:
        """Until at least ``count`` requests are held at the gate."""
        while self.held < count:
            await self._event("_changed").wait()

    async def enter(self, stop: asyncio.Event) -> None:
        """A document request arrives: return when it may be processed (or ``stop`` is set)."""
        if self._passes is None:
            return
        if self._passes > 0:
            self._passes -= 1
            return
        opened = self._event("_opened")
        self.held += 1
        self._notify()
        try:
            waiters = [asyncio.ensure_future(opened.wait()), asyncio.ensure_future(stop.wait())]
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
        finally:
            self.held -= 1
            self._notify()

    def _event(self, name: str) -> asyncio.Event:
        event: asyncio.Event | None = getattr(self, name)
        if event is None:
            event = asyncio.Event()
            setattr(self, name, event)
        return event

    def _notify(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()
