"""Fair turns across issuers' lanes: the scheduler a batch of many issuers sends by."""

from __future__ import annotations

import asyncio

import pytest

from invoicing_async import RateLimitError
from invoicing_async._core.table import RULES, Load, classify
from invoicing_async._send._lanes import Lanes


def lanes(capacity=100, limit=4, on_empty=lambda _: None):
    scheduler = Lanes(capacity, limit=limit, on_empty=on_empty)
    scheduler.lane = lambda key: scheduler.find(key) or scheduler.open(key, {"issuer": key})
    return scheduler


async def drain(scheduler, count):
    """Take ``count`` items, settling each at once; the keys in the order taken."""
    order = []
    for _ in range(count):
        lane, item, slot = await scheduler.take()
        order.append((lane.key, item))
        scheduler.sent(lane, slot, Load.GROW)
        scheduler.settled(lane)
    return order


async def test_lanes_take_turns_one_document_each():
    """A big issuer queued first does not keep a small one waiting: turns alternate."""
    scheduler = lanes()
    big, small = scheduler.lane("big"), scheduler.lane("small")
    for n in range(20):
        await scheduler.put(big, n)
    for n in range(3):
        await scheduler.put(small, n)
    order = await drain(scheduler, 23)
    positions = [i for i, (key, _) in enumerate(order) if key == "small"]
    assert positions == [1, 3, 5]
    assert [item for key, item in order if key == "big"] == list(range(20))  # in order


async def test_a_lane_at_its_limit_sits_out_while_others_go_on():
    """An issuer with its in-flight limit full is skipped; the others keep every worker."""
    scheduler = lanes(limit=2)
    slow, quick = scheduler.lane("slow"), scheduler.lane("quick")
    for n in range(5):
        await scheduler.put(slow, n)
        await scheduler.put(quick, n)
    taken = [await scheduler.take() for _ in range(4)]
    assert [lane.key for lane, _, _ in taken] == ["slow", "quick", "slow", "quick"]
    # slow has 2 in flight (its limit): the next two turns are quick's.
    for lane, _, slot in taken:
        if lane.key == "quick":
            scheduler.sent(lane, slot, Load.GROW)
            scheduler.settled(lane)
    nxt = [await scheduler.take() for _ in range(2)]
    assert [lane.key for lane, _, _ in nxt] == ["quick", "quick"]


async def test_a_throttled_lane_halves_its_limit_and_pauses_alone():
    """A 429 halves that lane's limit and pauses it; the other lane is not paused."""
    scheduler = lanes(limit=4)
    throttled, other = scheduler.lane("t"), scheduler.lane("o")
    for n in range(4):
        await scheduler.put(throttled, n)
        await scheduler.put(other, n)
    lane, item, slot = await scheduler.take()
    assert lane is throttled
    scheduler.sent(lane, slot, RULES[classify(RateLimitError("slow", status=429))].load)
    scheduler.pause(lane, 3600)
    scheduler.later(lane, item, 3600)
    assert throttled.limiter.limit == 2
    rest = [await scheduler.take() for _ in range(4)]
    assert {lane.key for lane, _, _ in rest} == {"o"}


async def test_a_retry_waits_in_its_lane_without_a_worker_and_goes_first_when_due():
    """A document waiting for its retry holds no worker; once due it goes before the
    lane's fresh documents."""
    scheduler = lanes()
    lane = scheduler.lane("a")
    for n in range(3):
        await scheduler.put(lane, n)
    taken_lane, item, slot = await scheduler.take()
    scheduler.sent(taken_lane, slot, Load.GROW)
    scheduler.later(taken_lane, item, 0.01)
    _, fresh, slot2 = await scheduler.take()
    assert fresh == 1  # the retry is not due yet
    scheduler.sent(lane, slot2, Load.GROW)
    scheduler.settled(lane)
    await asyncio.sleep(0.02)
    _, due, _ = await scheduler.take()
    assert due == 0


async def test_a_paused_lane_sends_again_once_its_pause_ends():
    """An issuer told to slow down (429 with Retry-After) while its lane is in the turn
    with more documents: once the pause is over its documents are taken again, with no
    other event needed (no other issuer, nothing of its own in flight)."""
    scheduler = lanes(limit=4)
    lane = scheduler.lane("t")
    for n in range(2):
        await scheduler.put(lane, n)
    taken_lane, item, slot = await scheduler.take()  # the lane stays in the turn: 1 is left
    scheduler.sent(taken_lane, slot, RULES[classify(RateLimitError("slow", status=429))].load)
    scheduler.pause(lane, 0.01)
    scheduler.later(lane, item, 0.01)
    taken = [await asyncio.wait_for(scheduler.take(), 10) for _ in range(2)]
    assert sorted(item for _, item, _ in taken) == [0, 1]


async def test_capacity_bounds_what_is_held_and_empty_lanes_are_dropped():
    """put() waits while ``capacity`` documents are held; a lane that holds nothing any
    more is dropped (and said so); take() ends after close() once all are settled."""
    dropped = []
    scheduler = lanes(capacity=2, on_empty=dropped.append)
    lane = scheduler.lane("a")
    await scheduler.put(lane, 1)
    await scheduler.put(lane, 2)
    third = asyncio.ensure_future(scheduler.put(lane, 3))
    await asyncio.sleep(0)
    assert not third.done()
    await drain(scheduler, 1)
    await third
    await drain(scheduler, 2)
    assert [d.key for d in dropped] == ["a"]
    assert len(scheduler) == 0
    scheduler.close()
    assert await scheduler.take() is None


async def test_an_idle_lane_is_kept_as_its_issuer_left_it_up_to_keep_idle():
    """An issuer whose documents come again later in the batch finds its lane as it left
    it: the limit a 429 halved and its context (breaker, budget) stay. Past
    ``keep_idle`` idle lanes the longest idle is dropped (and said so); at the batch's
    end every lane is."""
    dropped = []
    scheduler = Lanes(100, limit=4, on_empty=dropped.append, keep_idle=1)
    a = scheduler.open("a", {"issuer": "a"})
    await scheduler.put(a, 1)
    lane, _, slot = await scheduler.take()
    scheduler.sent(lane, slot, RULES[classify(RateLimitError("slow", status=429))].load)
    scheduler.settled(lane)
    assert len(scheduler) == 0
    assert dropped == []
    assert scheduler.find("a") is a
    assert a.limiter.limit == 2  # as it was left
    await scheduler.put(a, 2)
    await drain(scheduler, 1)
    b = scheduler.open("b", {"issuer": "b"})
    await scheduler.put(b, 3)
    await drain(scheduler, 1)  # b idle too: a, idle the longest, is dropped
    assert dropped == [a]
    assert scheduler.find("a") is None
    scheduler.drop_all()
    assert dropped == [a, b]


async def test_ten_thousand_lanes_cost_what_two_do():
    """Taking the next document does not scan idle lanes: 10,000 lanes of one document
    each are served in turn, each once."""
    scheduler = lanes(capacity=20_000)
    for n in range(10_000):
        await scheduler.put(scheduler.lane(f"{n:09d}"), n)
    order = await drain(scheduler, 10_000)
    assert sorted(item for _, item in order) == list(range(10_000))


@pytest.mark.parametrize("limit", [1, 3])
async def test_a_lane_never_exceeds_its_limit_in_flight(limit):
    """However many workers ask, one lane has at most its limit in flight."""
    scheduler = lanes(limit=limit)
    lane = scheduler.lane("a")
    for n in range(10):
        await scheduler.put(lane, n)
    taken = [await scheduler.take() for _ in range(limit)]
    waiting = asyncio.ensure_future(scheduler.take())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    first_lane, _, slot = taken[0]
    scheduler.sent(first_lane, slot, Load.GROW)
    scheduler.settled(first_lane)
    assert (await asyncio.wait_for(waiting, 1))[1] == limit
