"""The metrics port's answers under a flood of complete requests: a page made once a
second at most, a probe's answer never kept (issue 38 C: a flood of back-to-back
``/metrics`` requests made a page each, and the worker's sending fell to a third)."""

from __future__ import annotations

import asyncio

from invoicing_async._obs.server import _KEPT, FRESH, _Shared


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_page_made_is_given_again_for_a_second_then_made_anew():
    """A hundred scrapes within :data:`FRESH` seconds make one page; the next scrape
    after it makes a new one."""
    clock = Clock()
    shared = _Shared(clock)
    made = []

    async def page() -> str:
        made.append(clock.now)
        return f"page {len(made)}"

    answers = [await shared(("page", "/metrics"), page, keep=True) for _ in range(100)]
    assert answers == ["page 1"] * 100
    clock.now += FRESH
    assert await shared(("page", "/metrics"), page, keep=True) == "page 2"
    assert len(made) == 2


async def test_a_probe_is_shared_while_it_runs_and_never_kept():
    """Twenty probes asked at once run one check; asked again after it ended, the check
    runs again (a readiness that just failed is said at once)."""
    shared = _Shared(Clock())
    release = asyncio.Event()
    runs = []

    async def check() -> str | None:
        runs.append(1)
        await release.wait()
        return None

    waiting = [asyncio.ensure_future(shared("ready", check)) for _ in range(20)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*waiting) == [None] * 20
    assert await shared("ready", check) is None
    assert len(runs) == 2


async def test_pages_of_many_different_requests_keep_no_more_than_a_few():
    """A flood varying its headers (each a page of its own key) keeps at most
    :data:`_KEPT` pages: memory bounded, whatever the requests say."""
    shared = _Shared(Clock())

    async def page() -> bytes:
        return b"x" * 1000

    for number in range(1000):
        await shared(("page", f"accept-{number}"), page, keep=True)
    assert len(shared._made) == _KEPT
