"""The outage switch: the provider refuses connections, hangs, or answers 503 until told.

A POS application's own tests drive its deferral with it: the sale must not wait on a
provider that is down, and everything deferred must arrive once it is back. Three
outages, the ones tills meet:

* ``refuse``: nothing listens on the port (the service is down, the host up): every
  connection is refused, and connections already open are dropped. The port stays
  reserved, so the provider comes back on the same URL;
* ``hang``: connections are accepted and requests never answered (a load balancer up, the
  service behind it down), until the client gives up or the outage ends; nothing is
  processed;
* ``503``: every request is answered ``503 Service Unavailable`` at once, unprocessed.

The provider's routes are affected (the token endpoint too); ``/_sandbox/`` stays up
except while connections are refused. ``seconds`` ends an outage by itself: the only
way to end ``refuse`` over HTTP, since the service cannot hear you meanwhile.

:class:`OutageSwitch` holds the state and the timer; how connections are refused and
accepted again is the aiohttp application's (:mod:`._app`), passed in as two functions.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Literal, cast, get_args

from ._replies import METHOD_NOT_ALLOWED, Reply, error_reply
from ._wire import dumps

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

__all__ = ["OutageMode", "OutageSwitch"]

#: The outages the sandbox can play.
OutageMode = Literal["refuse", "hang", "503"]
_MODES: tuple[str, ...] = get_args(OutageMode)


class OutageSwitch:
    """The current outage (``None``: none), its timer, and who waits for a change.

    :param refuse: stop accepting connections (and drop the open ones).
    :param accept: accept connections again.
    """

    def __init__(
        self, refuse: Callable[[], Awaitable[None]], accept: Callable[[], Awaitable[None]]
    ) -> None:
        self._refuse = refuse
        self._accept = accept
        self.mode: OutageMode | None = None
        #: Requests the outage met (answered 503, or held while hanging).
        self.hits = 0
        self._changed = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def set(self, mode: OutageMode | None, *, seconds: float | None = None) -> None:
        """Switch to ``mode`` (``None``: back to normal), for ``seconds`` if given."""
        if mode is not None and mode not in _MODES:
            raise ValueError(f"an outage is one of {', '.join(_MODES)} (or None), not {mode!r}")
        if seconds is not None and not seconds > 0:
            raise ValueError("seconds must be positive")
        async with self._lock:
            if self._timer is not None and self._timer is not asyncio.current_task():
                self._timer.cancel()
            self._timer = None
            previous, self.mode = self.mode, mode
            if previous == "refuse" and mode != "refuse":
                await self._accept()
            elif mode == "refuse" and previous != "refuse":
                await self._refuse()
            if mode != previous:
                self._changed.set()  # wakes hanging requests; a new event for the next change
                self._changed = asyncio.Event()
            if mode is not None and seconds is not None:
                self._timer = asyncio.ensure_future(self._end_after(seconds))

    async def close(self) -> None:
        """Stop the timer (the sandbox is closing)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer

    async def _end_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        await self.set(None)

    async def changed(self) -> None:
        """Return once the outage changes (a hanging request then ends)."""
        await self._changed.wait()

    def unavailable(self) -> Reply:
        """The answer of the ``503`` outage."""
        self.hits += 1
        return error_reply(503, "the service is temporarily unavailable (sandbox outage)")

    def state(self) -> dict[str, object]:
        """What ``GET /_sandbox/outage`` answers."""
        return {"mode": self.mode, "hits": self.hits, "modes": list(_MODES)}

    def answer(
        self, method: str, query: Mapping[str, str]
    ) -> tuple[Reply, tuple[OutageMode | None, float | None] | None]:
        """``/_sandbox/outage``: the reply, and for a ``POST`` the switch to make.

        ``POST /_sandbox/outage?mode=hang&seconds=30`` starts an outage (``mode=none``
        ends it); ``GET`` shows the current one.
        """
        if method in ("GET", "HEAD"):
            return Reply(200, dumps(self.state())), None
        if method != "POST":
            return METHOD_NOT_ALLOWED, None
        text = query.get("mode", "").strip().lower()
        if text not in (*_MODES, "", "none", "normal"):
            return error_reply(400, f"mode must be one of {', '.join(_MODES)} or none"), None
        mode = cast("OutageMode", text) if text in _MODES else None
        try:
            seconds = float(query["seconds"]) if query.get("seconds") else None
        except ValueError:
            return error_reply(400, "seconds must be a number"), None
        if seconds is not None and not seconds > 0:
            return error_reply(400, "seconds must be positive"), None
        if mode == "refuse" and seconds is None:
            return error_reply(
                400,
                "refuse needs seconds=: while it refuses connections, the service cannot "
                "hear the request that would end the outage",
            ), None
        reply = Reply(200, dumps({"mode": mode, "seconds": seconds}))
        return reply, (mode, seconds)
