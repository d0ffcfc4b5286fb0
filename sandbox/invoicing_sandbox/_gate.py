"""A gate tests close on document requests, to hold them until the test says so.

Timing is the enemy of a deterministic test: "the provider takes 0.2 s, so the batch is
still running when the interrupt arrives" holds until a loaded machine proves it wrong.
A closed gate makes the provider wait *before it processes* a document request (nothing
is committed) until the test opens it, so "still running" is a fact::

    sb.hold(after=4)            # four requests pass, the fifth and later ones wait
    await sb.wait_held(1)       # a request is waiting: the batch cannot finish now
    ...                         # interrupt, cancel, kill, restart something
    sb.release()                # the waiting requests go on (and commit)

A gate can also hold the requests of one issuer only (``sb.hold(issuer=tin)``), while
the others' requests pass: a test then knows, by counts, that one issuer's backlog held
back nobody else.

The gate belongs to the event loop of the running sandbox.

.. versionadded:: 0.3.0
.. versionchanged:: 0.4.0 holds per issuer.
"""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._issuers import IssuerKey

__all__ = ["Gate"]


class _Hold:
    """One closed gate: the requests it still lets pass, the event that opens it."""

    __slots__ = ("opened", "passes")

    def __init__(self, passes: int) -> None:
        self.passes = passes
        self.opened: asyncio.Event | None = None


class Gate:
    """Open by default; :meth:`hold` closes it (after letting ``after`` requests pass).

    The gate of every request, and one per issuer held (``key``): a request meets the
    first where the document handler starts, its issuer's (if held) before that.
    """

    def __init__(self) -> None:
        self._holds: dict[IssuerKey | None, _Hold] = {}  # None: every request
        self._changed: asyncio.Event | None = None
        self._held: collections.Counter[IssuerKey | None] = collections.Counter()
        #: Requests held, at every gate.
        self.held = 0

    def hold(self, after: int = 0, key: IssuerKey | None = None) -> None:
        """Let ``after`` more document requests (of ``key``) through, then hold the next ones.

        Holding again while requests are held keeps them held, until :meth:`release`.
        """
        if after < 0:
            raise ValueError("after must not be negative")
        hold = self._holds.get(key)
        if hold is None:
            self._holds[key] = _Hold(after)
        else:
            hold.passes = after

    def release(self, key: IssuerKey | None = None) -> None:
        """Open the gate (``None``: every gate): the requests held go on, and later ones."""
        keys = list(self._holds) if key is None else [key]
        for name in keys:
            hold = self._holds.pop(name, None)
            if hold is not None and hold.opened is not None:
                hold.opened.set()

    def held_of(self, key: IssuerKey) -> int:
        """Requests held at ``key``'s gate."""
        return self._held[key]

    async def wait_held(self, count: int = 1, key: IssuerKey | None = None) -> None:
        """Until at least ``count`` requests are held (at ``key``'s gate, or at any)."""
        while (self.held if key is None else self._held[key]) < count:
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()

    async def enter(self, stop: asyncio.Event, key: IssuerKey | None = None) -> None:
        """A document request (of ``key``) arrives: return when it may be processed.

        Or when ``stop`` is set (the sandbox closes).
        """
        hold = self._holds.get(key)
        if hold is None:
            return
        if hold.passes > 0:
            hold.passes -= 1
            return
        if hold.opened is None:
            hold.opened = asyncio.Event()
        opened = hold.opened
        self._count(key, 1)
        try:
            waiters = [asyncio.ensure_future(opened.wait()), asyncio.ensure_future(stop.wait())]
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
        finally:
            self._count(key, -1)

    def _count(self, key: IssuerKey | None, step: int) -> None:
        self.held += step
        self._held[key] += step
        if not self._held[key]:
            del self._held[key]
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()
