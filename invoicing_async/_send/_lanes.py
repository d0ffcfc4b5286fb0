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
with ten lanes or ten thousand. A batch of one issuer takes turns with nobody:
:class:`OneLane` keeps its one lane without turns or per-lane timers.

The lanes hold at most ``capacity`` documents (queued, waiting or in flight):
:meth:`Lanes.put` waits for room, so memory is bounded whatever the input. A lane that
holds nothing any more is kept idle, with what it knows of its issuer (its limit, a
pause, the batch's context: a breaker, a budget), while at most ``keep_idle`` are;
past that the longest idle is dropped (``on_empty`` is told), so lanes are bounded too.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._limiter import Limiter

if TYPE_CHECKING:
    from collections.abc import Callable

    from invoicing_async._core.table import Load

__all__ = ["Lane", "Lanes", "OneLane"]

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


class _Workers:
    """The workers that wait for a document to send, and the documents held."""

    def __init__(self) -> None:
        self._waiters: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._held = 0
        self._closed = False

    @property
    def held(self) -> int:
        """Documents held: queued, waiting or in flight."""
        return self._held

    def close(self) -> None:
        """No more documents will be put: ``take`` ends once all are settled."""
        self._closed = True
        self._wake_all_if_done()

    @staticmethod
    def pause(lane: Lane[Any], seconds: float) -> None:
        """Send nothing of ``lane`` for ``seconds`` (its issuer was asked to slow down)."""
        until = asyncio.get_running_loop().time() + seconds
        lane._paused_until = max(lane._paused_until, until)  # noqa: SLF001

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _wake_all_if_done(self) -> None:
        if self._closed and self._held == 0:
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(None)


class Lanes(_Workers, Generic[T]):
    """The lanes of one batch (see the module docstring).

    Workers waiting for a document queue up and are woken one at a time, each when a
    lane can send (a document put in it, room in its limit, its retry or pause over):
    nobody polls, and a change wakes one worker, not all of them.

    :param capacity: documents held at most, across every lane.
    :param limit: each lane's in-flight limit to begin with (the batch's concurrency).
    :param on_empty: told of a lane dropped because it holds nothing any more;
        ``None``: lanes are kept (one issuer: its adaptive limit lasts the batch).
    :param keep_idle: lanes that hold nothing kept at most, the longest idle dropped
        first: an issuer whose documents come again finds its lane as it left it.
    """

    def __init__(
        self,
        capacity: int,
        *,
        limit: int,
        on_empty: Callable[[Lane[T]], None] | None = None,
        keep_idle: int = 0,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        super().__init__()
        self._capacity = capacity
        self._limit = limit
        self._on_empty = on_empty
        self._keep_idle = keep_idle
        self._lanes: dict[str | None, Lane[T]] = {}
        #: Lanes that hold nothing, the longest idle first.
        self._idle: dict[str | None, Lane[T]] = {}
        self._turn: collections.deque[Lane[T]] = collections.deque()
        self._timers: list[tuple[float, int, Lane[T]]] = []
        self._alarm: asyncio.TimerHandle | None = None
        self._seq = itertools.count()
        self._room = asyncio.Event()

    def __len__(self) -> int:
        """Lanes in use."""
        return len(self._lanes)

    def find(self, key: str | None) -> Lane[T] | None:
        """The lane of issuer ``key``, if it has one now (an idle one is in use again)."""
        lane = self._lanes.get(key)
        if lane is None and (lane := self._idle.pop(key, None)) is not None:
            self._lanes[key] = lane
        return lane

    def peek(self, key: str | None) -> Lane[T] | None:
        """The lane of issuer ``key``, in use or idle, left as it is."""
        return self._lanes.get(key) or self._idle.get(key)

    def drop_all(self) -> None:
        """The batch is over: every lane is dropped (``on_empty`` told), idle or not."""
        lanes = [*self._lanes.values(), *self._idle.values()]
        self._lanes.clear()
        self._idle.clear()
        if self._on_empty is not None:
            for lane in lanes:
                self._on_empty(lane)

    def open(self, key: str | None, context: Any) -> Lane[T]:
        """A new lane for issuer ``key``, keeping ``context`` for the batch."""
        lane = self._lanes[key] = Lane(key, self._limit, context)
        return lane

    async def put(self, lane: Lane[T], item: T) -> None:
        """Queue ``item`` in ``lane``, once there is room."""
        while not self.put_now(lane, item):
            self._room.clear()
            await self._room.wait()

    def put_now(self, lane: Lane[T], item: T) -> bool:
        """Queue ``item`` in ``lane`` if there is room now; whether it was."""
        if self._held >= self._capacity:
            return False
        self._held += 1
        lane.held += 1
        lane.fresh.append(item)
        self._offer(lane, asyncio.get_running_loop().time())
        return True

    async def take(self) -> tuple[Lane[T], T, int] | None:
        """The next document to send, its lane and the limiter round it is sent in.

        Waits for one; ``None`` once the lanes are closed and hold nothing. The caller
        then sends, calls :meth:`sent`, and :meth:`settled` or :meth:`later`.
        """
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            while self._turn:
                lane = self._turn.popleft()
                lane._queued = False  # noqa: SLF001  (this module's own)
                taken = self._take_from(lane, now)
                self._offer(lane, now)  # back in the turn if it can go on, else on a timer
                if taken is not None:
                    return lane, taken[0], taken[1]
            if self._closed and self._held == 0:
                return None
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif self._turn:
                    self._wake_one()  # pass on a wake-up this waiter took
                raise

    def sent(self, lane: Lane[T], slot: int, load: Load | None) -> None:
        """The attempt taken with ``slot`` ended (``load``: what its answer says, if any)."""
        lane.limiter.release(slot, load)
        self._offer(lane, asyncio.get_running_loop().time())

    def later(self, lane: Lane[T], item: T, delay: float) -> None:
        """``item`` waits ``delay`` seconds for its next attempt, in its lane."""
        now = asyncio.get_running_loop().time()
        heapq.heappush(lane._later, (now + delay, next(self._seq), item))  # noqa: SLF001
        self._offer(lane, now)

    def settled(self, lane: Lane[T]) -> None:
        """An item of ``lane`` is settled: its room is free; an empty lane is dropped."""
        self._held -= 1
        lane.held -= 1
        self._room.set()
        if lane.held == 0 and self._on_empty is not None and self._lanes.get(lane.key) is lane:
            del self._lanes[lane.key]
            idle = self._idle
            idle[lane.key] = lane
            if len(idle) > self._keep_idle:
                oldest = next(iter(idle))
                self._on_empty(idle.pop(oldest))
        self._wake_all_if_done()

    # --- internals -------------------------------------------------------------------------

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
                self._arm()
            return
        if lane.limiter.try_room():
            lane._queued = True  # noqa: SLF001
            self._turn.append(lane)
            self._wake_one()

    def _arm(self) -> None:
        """Be called back when the earliest timer is due (one timer handle at a time)."""
        due = self._timers[0][0]
        alarm = self._alarm
        if alarm is not None and not alarm.cancelled() and alarm.when() <= due:
            return
        if alarm is not None:
            alarm.cancel()
        self._alarm = asyncio.get_running_loop().call_at(due, self._ring)

    def _ring(self) -> None:
        self._alarm = None
        timers = self._timers
        now = asyncio.get_running_loop().time()
        while timers and timers[0][0] <= now:
            due, _, lane = heapq.heappop(timers)
            if lane._timer == due:  # noqa: SLF001  (else a later timer of it is pending)
                lane._timer = None  # noqa: SLF001
                self._offer(lane, now)
        if timers:
            self._arm()


class OneLane(_Workers, Generic[T]):
    """The lanes of a batch of one issuer: one lane, and no turns to take.

    :class:`Lanes`' interface without what only many issuers need (turns, a timer per
    lane, idle lanes): a worker takes the next document as soon as the lane's limit has
    room; a retry due goes first; a pause and the earliest retry not yet due are kept
    on one timer. Whoever puts documents waits for room until a quarter of the capacity
    is free again, then fills it in one go: one wake-up for many documents.
    """

    def __init__(self, capacity: int, *, limit: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        super().__init__()
        self._capacity = capacity
        self._limit = limit
        self._lane: Lane[T] | None = None
        self._room = asyncio.Event()
        self._alarm: asyncio.TimerHandle | None = None
        self._seq = itertools.count()
        #: Held at most when whoever waits for room is woken.
        self._refill = capacity - max(1, capacity // 4)

    def __len__(self) -> int:
        """Lanes in use (one, once opened)."""
        return 0 if self._lane is None else 1

    def find(self, key: str | None) -> Lane[T] | None:  # noqa: ARG002  (one lane)
        """The lane, if it is open."""
        return self._lane

    def open(self, key: str | None, context: Any) -> Lane[T]:
        """Open the lane, keeping ``context`` for the batch."""
        lane = self._lane = Lane(key, self._limit, context)
        return lane

    def peek(self, key: str | None) -> Lane[T] | None:  # noqa: ARG002  (one lane)
        """The lane, if it is open."""
        return self._lane

    def drop_all(self) -> None:
        """The batch is over."""
        self._lane = None
        if self._alarm is not None:
            self._alarm.cancel()
            self._alarm = None

    async def put(self, lane: Lane[T], item: T) -> None:
        """Queue ``item``, once there is room."""
        if self._held >= self._capacity:
            self._room.clear()
            while self._held > self._refill:
                await self._room.wait()
                self._room.clear()
        self._add(lane, item)

    def put_now(self, lane: Lane[T], item: T) -> bool:
        """Queue ``item`` if there is room now; whether it was."""
        if self._held >= self._capacity:
            return False
        self._add(lane, item)
        return True

    def _add(self, lane: Lane[T], item: T) -> None:
        self._held += 1
        lane.held += 1
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if waiter.done():
                continue
            if not lane.fresh and not lane._later and lane._paused_until == float("-inf"):  # noqa: SLF001
                slot = lane.limiter.try_acquire()
                if slot is not None:  # straight to a worker that waits: it looks no more
                    waiter.set_result((lane, item, slot))
                    return
            lane.fresh.append(item)
            waiter.set_result(None)  # it looks for itself
            return
        lane.fresh.append(item)

    async def take(self) -> tuple[Lane[T], T, int] | None:
        """The next document to send, its lane and the limiter round it is sent in.

        A worker that waits may be handed a document as it is put (it then has its
        room in the limit already), or woken to look.
        """
        while True:
            lane = self._lane
            if lane is not None:
                taken = self._take_from(lane)
                if taken is not None:
                    if self._waiters and self._ready(lane):
                        self._wake_one()  # more to send: another worker may take it
                    return lane, taken[0], taken[1]
            if self._closed and self._held == 0:
                return None
            waiter: asyncio.Future[tuple[Lane[T], T, int] | None]
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                handed = await waiter
            except asyncio.CancelledError:
                self._cancelled(waiter)
                raise
            if handed is not None:
                return handed

    def _cancelled(self, waiter: asyncio.Future[tuple[Lane[T], T, int] | None]) -> None:
        """A waiting worker is cancelled: what it was handed goes back; a wake-up on."""
        if waiter in self._waiters:
            self._waiters.remove(waiter)
        elif waiter.done() and not waiter.cancelled() and (handed := waiter.result()):
            lane, item, slot = handed
            lane.limiter.release(slot, None)
            lane.fresh.appendleft(item)
            if self._waiters:
                self._wake_one()
        elif self._waiters:
            self._wake_one()  # pass on a wake-up this waiter took

    def sent(self, lane: Lane[T], slot: int, load: Load | None) -> None:
        """The attempt taken with ``slot`` ended (``load``: what its answer says, if any)."""
        lane.limiter.release(slot, load)
        if self._waiters and self._ready(lane):
            self._wake_one()

    def later(self, lane: Lane[T], item: T, delay: float) -> None:
        """``item`` waits ``delay`` seconds for its next attempt."""
        due = asyncio.get_running_loop().time() + delay
        heapq.heappush(lane._later, (due, next(self._seq), item))  # noqa: SLF001
        if delay <= 0:
            if self._waiters:
                self._wake_one()
        else:
            self._arm(due)

    def settled(self, lane: Lane[T]) -> None:
        """An item is settled: its room is free (whoever waits for half of it is woken)."""
        self._held -= 1
        lane.held -= 1
        if self._held <= self._refill:
            self._room.set()
        self._wake_all_if_done()

    # --- internals -------------------------------------------------------------------------

    def _take_from(self, lane: Lane[T]) -> tuple[T, int] | None:
        later, paused = lane._later, lane._paused_until  # noqa: SLF001
        if later or paused != float("-inf"):  # only then does the time matter
            now = asyncio.get_running_loop().time()
            if paused > now:
                self._arm(paused)
                return None
            lane._paused_until = float("-inf")  # noqa: SLF001  (over: hand-offs again)
            if later and later[0][0] <= now:
                slot = lane.limiter.try_acquire()
                return None if slot is None else (heapq.heappop(later)[2], slot)
            if later:
                self._arm(later[0][0])
        if not lane.fresh:
            return None
        slot = lane.limiter.try_acquire()
        return None if slot is None else (lane.fresh.popleft(), slot)

    @staticmethod
    def _ready(lane: Lane[T]) -> bool:
        """Whether another document might be taken now (a cheap guess: the taker checks)."""
        return bool(lane.fresh or lane._later) and lane.limiter.try_room()  # noqa: SLF001

    def _arm(self, when: float) -> None:
        """Wake a worker at ``when`` (one timer: the earliest)."""
        alarm = self._alarm
        if alarm is not None and not alarm.cancelled() and alarm.when() <= when:
            return
        if alarm is not None:
            alarm.cancel()
        self._alarm = asyncio.get_running_loop().call_at(when, self._ring)

    def _ring(self) -> None:
        self._alarm = None
        if self._waiters:
            self._wake_one()
