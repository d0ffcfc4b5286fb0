"""Whether the provider is known down, and the drainer's probes that find out when it is back.

While the provider is down, sales are deferred at once (no request, no budget spent),
and the drainer lets one document at a time through as a probe (the oldest claimed),
``probe_delay`` apart at first and doubling (:class:`~invoicing_async._core.retry.Backoff`);
the first answer ends the outage for every sale.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from invoicing_async._core.log import deferral as log
from invoicing_async._core.retry import Backoff
from invoicing_async._io.waits import pause

if TYPE_CHECKING:
    from collections.abc import Iterator

    from invoicing_async._send.journal import Ref

    from .records import DeferralReason

__all__ = ["ProviderState", "wait_for"]


class ProviderState:
    """Whether the provider is known down, and the drainer's probes while it is.

    :param probe_delay: seconds before the first probe, doubled after each failed one.
    :param probe_max_delay: the most seconds between probes.
    """

    def __init__(self, probe_delay: float, probe_max_delay: float) -> None:
        #: Why the provider is known down, or ``None``: sales go straight to it.
        self.down: DeferralReason | None = None
        #: The document sent as the probe, while one is out.
        self.probe: Ref | None = None
        #: Between probes: ``probe_delay`` doubling up to ``probe_max_delay``.
        self._probes = Backoff(probe_delay, probe_max_delay, jitter="none")
        self._delay = self._probes.next()
        self._next = 0.0
        self._changed = asyncio.Event()
        # Sales deferring now, and a count of every step a sale took towards the outbox
        # (found the provider down, made its deferral durable): an empty outbox counted
        # before such a step proves nothing about the provider (see :meth:`unchanged`).
        self._deferring = 0
        self._steps = 0

    @contextlib.contextmanager
    def deferring(self) -> Iterator[None]:
        """Around a sale's way into the outbox, from finding the provider down on."""
        self._deferring += 1
        self._steps += 1
        try:
            yield
        finally:
            self._deferring -= 1
            self._steps += 1

    @property
    def steps(self) -> int:
        """Read before counting the outbox; give it to :meth:`unchanged` after."""
        return self._steps

    def unchanged(self, steps: int) -> bool:
        """No sale has been on its way into the outbox since :attr:`steps` gave ``steps``.

        A count of the outbox taken meanwhile may have missed that sale's deferral.
        """
        return self._deferring == 0 and self._steps == steps

    def mark_down(self, reason: DeferralReason) -> None:
        """The provider did not answer (or asked for fewer requests)."""
        if self.down is None:
            log.warning(
                "the provider is down (%s): sales are deferred at once until it answers again",
                reason.value,
            )
            self._next = _now() + self._delay
        self.down = reason

    def mark_up(self, why: str) -> bool:
        """The provider answered: sales go straight to it again. True if it was down."""
        if self.down is None:
            return False
        log.info("the provider answers again (%s): sales go straight to it", why)
        self.down = None
        self._probes.reset()
        self._delay = self._probes.next()
        self._notify()
        return True

    def finished(self, ref: Ref, *, failed: bool) -> None:
        """The outcome of ``ref`` is known: if it was the probe, the next may follow."""
        if ref != self.probe:
            return
        self.probe = None
        if failed:
            self._next = _now() + self._delay
            self._delay = self._probes.next()
        self._notify()

    def reset(self) -> None:
        """No probe is out (the drainer starts a new pass)."""
        self.probe = None
        self._notify()

    async def gate(self, ref: Ref) -> None:
        """Return when ``ref`` may be sent.

        At once while the provider is up, else as the next probe: one at a time, when its
        delay has passed.
        """
        while self.down is not None:
            now = _now()
            if self.probe is None and now >= self._next:
                self.probe = ref
                log.info("probing the provider with invoice %s", ref.key)
                return
            timeout = None if self.probe is not None else self._next - now
            await wait_for(self._changed, timeout)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


def _now() -> float:
    return asyncio.get_running_loop().time()


async def wait_for(event: asyncio.Event, timeout: float | None) -> None:
    """Wait for ``event`` (then clear it) or ``timeout`` seconds, whichever comes first."""
    await pause(timeout, event)
    event.clear()
