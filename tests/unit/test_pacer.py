"""The pacer: a batch's CPU work on the event loop, in slices of one turn's budget."""

from __future__ import annotations

import asyncio

from invoicing_async._doc.pacer import Pacer


class Turns:
    """Counts the turns of the running loop (a callback that comes back every turn)."""

    def __init__(self) -> None:
        self.count = 0
        self._handle = asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.count += 1
        self._handle = asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._handle.cancel()


async def test_work_past_a_turns_budget_waits_for_later_turns_first_come_first_served():
    """Workers that find a turn's budget spent wait, in the order they came, and go on a
    few per turn (as many as the budget covers): other callbacks of the loop run
    between the slices, and every worker gets its turn."""
    pacer = Pacer(budget=1.0)
    turns = Turns()
    ran: list[tuple[int, int]] = []

    async def worker(number: int) -> None:
        await pacer.turn()
        ran.append((number, turns.count))
        pacer.spend(0.4)  # 0.4 s of "work" counted per worker

    await asyncio.gather(*(worker(n) for n in range(10)))
    turns.stop()
    assert [number for number, _ in ran] == list(range(10))
    per_turn: dict[int, int] = {}
    for _, turn in ran:
        per_turn[turn] = per_turn.get(turn, 0) + 1
    assert max(per_turn.values()) == 3  # 0 + 0.4 + 0.8 < 1.0: the fourth waits
    assert len(per_turn) >= 4


async def test_a_cancelled_waiter_does_not_hold_up_the_others():
    """A worker cancelled while it waits for a turn leaves the queue; the ones after it
    still go on."""
    pacer = Pacer(budget=1.0)

    async def worker(cost: float) -> None:
        await pacer.turn()
        pacer.spend(cost)

    spender = asyncio.ensure_future(worker(2.0))  # spends the turn's budget and more
    first, second = asyncio.ensure_future(worker(0.1)), asyncio.ensure_future(worker(0.1))
    await asyncio.sleep(0)  # all three have run up to their turn: two of them wait
    assert spender.done()
    assert not first.done()
    first.cancel()
    await asyncio.wait_for(second, 5)
    assert first.cancelled()
