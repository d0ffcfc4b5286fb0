"""How many requests a batch keeps in flight: AIMD, so it settles at what the provider takes."""

from __future__ import annotations

import asyncio
import collections

from invoicing_async._core.log import delivery as log
from invoicing_async._core.table import Load

__all__ = ["Limiter"]


class Limiter:
    """How many requests a batch keeps in flight: AIMD between 1 and ``maximum``.

    An answer the decision core says asks for fewer requests (429, 503: ``Load.SHRINK``)
    halves the limit, once per round (answers to requests sent before the last decrease
    do not halve it again); every answer that says it may grow (a success, a 409) adds
    ``1/limit``, so a full window of them adds one.
    """

    def __init__(self, maximum: int) -> None:
        self._maximum = maximum
        self._limit = float(maximum)
        self._in_flight = 0
        self._round = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def limit(self) -> int:
        """Requests allowed in flight now."""
        return int(self._limit)

    def try_room(self) -> bool:
        """Whether a request could be sent now without waiting."""
        return not self._waiters and self._in_flight < int(self._limit)

    def try_acquire(self) -> int | None:
        """Room without waiting (the common case): the round, or ``None`` if full."""
        if self._waiters or self._in_flight >= int(self._limit):
            return None
        self._in_flight += 1
        return self._round

    async def acquire(self) -> int:
        """Wait for room; returns the round the request is sent in."""
        while self._in_flight >= int(self._limit):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                self._wake()  # pass on a wake-up this waiter may have taken
                raise
        self._in_flight += 1
        return self._round

    def release(self, round_sent: int, load: Load | None) -> None:
        """A request ended; ``load`` is what its answer says of the provider's load.

        ``None`` when it was never sent (the deadline passed while it waited for room):
        that says nothing about the provider's load.
        """
        self._in_flight -= 1
        if load is Load.SHRINK:
            if round_sent == self._round:
                self._limit = max(1.0, self._limit / 2)
                self._round += 1
                log.info("provider overloaded: %d request(s) in flight at most", self.limit)
        elif load is Load.GROW:
            self._limit = min(float(self._maximum), self._limit + 1 / self._limit)
        self._wake()

    def _wake(self) -> None:
        room = int(self._limit) - self._in_flight
        while room > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                room -= 1
