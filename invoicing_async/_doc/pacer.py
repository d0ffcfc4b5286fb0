"""How much CPU work a batch does on the event loop per turn of the loop.

A batch prepares (serialises, encrypts) its documents on the loop's own thread, one
task ahead of the workers. Unpaced, it would prepare as many documents in one turn as
there is room for, and every other coroutine of the application would wait that long
(tens of milliseconds). A :class:`Pacer` gives each turn a budget of CPU time: once it
is spent, the work waits for a later turn (waiters, if several, in the order they came,
let go as many at a time as the budget covers by the average cost so far; nobody
polls). What is spent is counted until the budget is, across turns if need be: no
callback runs per turn for it. Threads would keep the loop free too, but add no
throughput under the GIL and cost a bulk run a hand-over per document.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

__all__ = ["TURN_BUDGET", "Pacer"]

#: Seconds of CPU work the documents of one turn of the loop may take (once spent, the
#: next ones wait for a later turn).
TURN_BUDGET = 0.002


class Pacer:
    """A budget of CPU seconds per turn of the event loop, shared by a batch's workers."""

    def __init__(self, budget: float = TURN_BUDGET) -> None:
        self._budget = budget
        self._spent = 0.0
        self._cost = 0.0  # the average cost of one piece of work, lately
        self._renewing = False
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def free(self) -> bool:
        """Whether work may start now without waiting (:meth:`turn` would return at once)."""
        return self._spent < self._budget and not self._waiters

    async def turn(self) -> None:
        """Return at once if this turn has budget left, else when a later turn has."""
        if self._spent < self._budget and not self._waiters:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._renew_soon()
        try:
            await waiter
        except asyncio.CancelledError:
            if not waiter.done() or waiter.cancelled():
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def spend(self, seconds: float) -> None:
        """Count a piece of work done.

        What is spent counts until the budget is: then work waits for a later turn, and
        the budget is renewed at its start. A turn never holds more than the budget (and
        one piece) of work, and work that is spread over many turns costs no callback
        per turn (a batch that prepares one document per turn, waiting for room).
        """
        self._spent += seconds
        # The first piece's cost as it is (an average from zero would let a burst by).
        self._cost = seconds if not self._cost else self._cost + (seconds - self._cost) / 8

    def _renew_soon(self) -> None:
        # Scheduled before the callbacks of anyone who waits after this (the loop's
        # ready queue is first in, first out): the next turn starts with a new budget.
        if not self._renewing:
            self._renewing = True
            asyncio.get_running_loop().call_soon(self._renew)

    def _renew(self) -> None:
        self._renewing = False
        self._spent = 0.0
        room = max(1, int(self._budget / self._cost)) if self._cost > 0 else 1
        while room and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                room -= 1
        if self._waiters:
            self._renew_soon()
