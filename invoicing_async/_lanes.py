"""Fair sending across issuers: one lane per issuer, served in turn within one concurrency.

A batch of many issuers puts each document in its issuer's :class:`Lane`. Workers ask
for the next document to send (:meth:`Lanes.take`): lanes take turns — round robin, a
document per turn, which is deficit round robin with equal costs — and a lane sits out
while nothing in it is ready, while its in-flight limit is full (its own
:class:`~._limiter.Limiter`, halved on 429/503 and grown back on successes), or while
the provider asked its issuer to slow down (:meth:`Lanes.pause`, a ``Retry-After``). A
document waiting for a retry stays in its lane until it is due (:meth:`Lanes.later`),
holding no worker. So a 100,000-document issuer does not starve a 10-document one, and
one issuer's throttling or backoff slows only its own documents.

Only lanes that can send now are in the turn (a deque); lanes waiting for a time (a
retry due, a pause ending) are in a timer heap: taking the next document costs the same
with ten lanes or ten thousand.

The lanes hold at most ``capacity`` documents (queued, waiting or in flight):
:meth:`Lanes.put` waits for room, so memory is bounded whatever the input. A lane that
holds nothing any more is dropped (``on_empty`` is told), so lanes are bounded too.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import itertools
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._limiter import Limiter

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._errors import InvoicingError

__all__ = ["Lane", "Lanes"]

T = TypeVar("T")


class Lane(Generic[T]):
    """One issuer's documents in a batch, and what the batch keeps for that issuer."""

    __slots__ = (
        "_later",
        "_paused_until",
        "_queued",
        "_timer",
        "context",
        "fresh",
        "held",
        "key",
        "limiter",
    )

    def __init__(self, key: str | None, limit: int, context: Any) -> None:
        self.key = key
        #: What the batch keeps for this issuer (its channel, breaker, budget …).
        self.context = context
        self.limiter = Limiter(limit)
        #: Documents not yet sent, in input order.
        self.fresh: collections.deque[T] = collections.deque()
        self._later: list[tuple[float, int, T]] = []
        #: Documents of this lane held by the lanes: queued, waiting or in flight.
        self.held = 0
        self._paused_until = float("-inf")
        #: In the turn now.
        self._queued = False
        #: When its pending timer fires (``None``: none pending).
        self._timer: float | None = None

    def __repr__(self) -> str:
        return f"<Lane {self.key} held={self.held} limit={self.limiter.limit}>"

    def _due(self) -> float | None:
        """When this lane has a document to send next (``None``: nothing queued)."""
        if self.fresh:
            return self._paused_until
        if self._later:
            return max(self._later[0][0], self._paused_until)
        return None

    def _ready(self, now: float) -> bool:
        due = self._due()
        return due is not None and due <= now and self.limiter.try_room()


class Lanes(Generic[T]):
    """The lanes of one batch (see the module docstring).

    :param capacity: documents held at most, across every lane.
    :param limit: each lane's in-flight limit to begin with (the batch's concurrency).
    :param on_empty: told of a lane dropped because it holds nothing any more;
        ``None``: lanes are kept (one issuer: its adaptive limit lasts the batch).
    """

    def __init__(
        self,
        capacity: int,
        *,
        limit: int,
        on_empty: Callable[[Lane[T]], None] | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._limit = limit
        self._on_empty = on_empty
        self._lanes: dict[str | None, Lane[T]] = {}
        self._turn: collections.deque[Lane[T]] = collections.deque()
        self._timers: list[tuple[float, int, Lane[T]]] = []
        self._seq = itertools.count()
        self._held = 0
        self._closed = False
        #: Workers waiting in :meth:`take`, first come first woken.
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._room = asyncio.Event()

    def __len__(self) -> int:
        """Lanes in use."""
        return len(self._lanes)

    @property
    def held(self) -> int:
        """Documents held: queued, waiting or in flight."""
        return self._held

    def find(self, key: str | None) -> Lane[T] | None:
        """The lane of issuer ``key``, if it has one now."""
        return self._lanes.get(key)

    def open(self, key: str | None, context: Any) -> Lane[T]:
        """A new lane for issuer ``key``, keeping ``context`` for the batch."""
        lane = self._lanes[key] = Lane(key, self._limit, context)
        return lane

    async def put(self, lane: Lane[T], item: T) -> None:
        """Queue ``item`` in ``lane``, once there is room."""
        while self._held >= self._capacity:
            self._room.clear()
            await self._room.wait()
        self._held += 1
        lane.held += 1
        lane.fresh.append(item)
        self._offer(lane, asyncio.get_running_loop().time())

    def close(self) -> None:
        """No more documents will be put: :meth:`take` ends once all are settled."""
        self._closed = True
        self._wake(everyone=True)

    async def take(self) -> tuple[Lane[T], T, int] | None:
        """The next document to send, its lane and the limiter round it is sent in.

        Waits for one; ``None`` once the lanes are closed and hold nothing. The caller
        then sends, calls :meth:`sent`, and :meth:`settled` or :meth:`later`.
        """
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            self._wake_timers(now)
            while self._turn:
                lane = self._turn.popleft()
                lane._queued = False  # noqa: SLF001  (this module's own)
                taken = self._take_from(lane, now)
                # Back at the end of the turn if it can go on, or on the timer for when it
                # can: a lane paused while in the turn must not drop out of both.
                self._offer(lane, now)
                if taken is not None:
                    return lane, taken[0], taken[1]
            if self._closed and self._held == 0:
                return None
            await self._sleep(loop, self._timers[0][0] - now if self._timers else None)

    def sent(
        self, lane: Lane[T], slot: int, error: InvoicingError | None, *, answered: bool
    ) -> None:
        """The attempt taken with ``slot`` ended (``error``: its failure)."""
        lane.limiter.release(slot, error, answered=answered)
        self._offer(lane, asyncio.get_running_loop().time())

    def later(self, lane: Lane[T], item: T, delay: float) -> None:
        """``item`` waits ``delay`` seconds for its next attempt, in its lane."""
        due = asyncio.get_running_loop().time() + delay
        heapq.heappush(lane._later, (due, next(self._seq), item))  # noqa: SLF001
        self._offer(lane, asyncio.get_running_loop().time())

    def pause(self, lane: Lane[T], seconds: float) -> None:
        """Send nothing of ``lane`` for ``seconds`` (its issuer was asked to slow down)."""
        until = asyncio.get_running_loop().time() + seconds
        lane._paused_until = max(lane._paused_until, until)  # noqa: SLF001

    def settled(self, lane: Lane[T]) -> None:
        """An item of ``lane`` is settled: its room is free; an empty lane is dropped."""
        self._held -= 1
        lane.held -= 1
        self._room.set()
        if lane.held == 0 and self._on_empty is not None and self._lanes.get(lane.key) is lane:
            del self._lanes[lane.key]
            self._on_empty(lane)
        if self._closed and self._held == 0:
            self._wake(everyone=True)  # the end: every worker's take() returns None

    def drain(self, lane: Lane[T]) -> list[T]:
        """Take every item queued or waiting in ``lane`` out (its issuer stops)."""
        items = list(lane.fresh) + [item for _, _, item in lane._later]  # noqa: SLF001
        lane.fresh.clear()
        lane._later.clear()  # noqa: SLF001
        return items

    # --- internals -------------------------------------------------------------------------

    async def _sleep(self, loop: asyncio.AbstractEventLoop, seconds: float | None) -> None:
        """Until :meth:`_wake` wakes this worker, or ``seconds`` (the next timer) passed.

        A future per waiting worker, woken one at a time: a document put in the turn
        wakes one worker, not every idle one (which would each wake up, find it taken,
        and wait again: a turn of the loop per worker per document).
        """
        waiter = loop.create_future()
        self._waiters.append(waiter)
        timer = None if seconds is None else loop.call_later(seconds, _set, waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._wake()  # woken as the cancellation came: pass the wake-up on
            raise
        finally:
            if timer is not None:
                timer.cancel()
                with contextlib.suppress(ValueError):  # still there if the timer woke it
                    self._waiters.remove(waiter)

    def _wake(self, *, everyone: bool = False) -> None:
        """Wake a worker waiting in :meth:`take` (``everyone``: all of them)."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                if not everyone:
                    return

    def _take_from(self, lane: Lane[T], now: float) -> tuple[T, int] | None:
        due = lane._due()  # noqa: SLF001
        if due is None or due > now:
            return None
        slot = lane.limiter.try_acquire()
        if slot is None:
            return None
        later = lane._later  # noqa: SLF001
        if later and later[0][0] <= now:
            return heapq.heappop(later)[2], slot  # a retry due goes first: it is older
        return lane.fresh.popleft(), slot

    def _offer(self, lane: Lane[T], now: float) -> None:
        """Put ``lane`` in the turn if it can send now, or on the timer for when it can."""
        if lane._queued:  # noqa: SLF001
            return
        due = lane._due()  # noqa: SLF001
        if due is None:
            return
        if due > now:
            if lane._timer is None or due < lane._timer:  # noqa: SLF001
                lane._timer = due  # noqa: SLF001
                heapq.heappush(self._timers, (due, next(self._seq), lane))
                self._wake()  # to wait for this timer, if it is the first now
            return
        if lane.limiter.try_room():
            lane._queued = True  # noqa: SLF001
            self._turn.append(lane)
            self._wake()

    def _wake_timers(self, now: float) -> None:
        timers = self._timers
        while timers and timers[0][0] <= now:
            due, _, lane = heapq.heappop(timers)
            if lane._timer == due:  # noqa: SLF001  (else a later timer of it is pending)
                lane._timer = None  # noqa: SLF001
                self._offer(lane, now)


def _set(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
