"""The drainer of deferred sales: the outbox worker a :class:`~invoicing_async.Deferral` owns.

It runs passes of :func:`~invoicing_async._client.worker.run_worker` over the till's outbox (the
same worker as ``invoicing-async worker``: the batch's adaptive limit and retry budget),
with the :class:`~._provider.ProviderState` as the gate before each first request, and
delivers every final outcome to the application at least once: an outcome is marked told
only once the application's callback returned (or its loop asked for the next one), so
one settled while the process died is delivered after the restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from typing import TYPE_CHECKING

from invoicing_async._client.worker import run_worker
from invoicing_async._core import calls
from invoicing_async._core.errors import InvoicingError, LedgerError
from invoicing_async._core.log import deferral as log
from invoicing_async._core.outcomes import ANSWERED
from invoicing_async._core.table import deferral as deferral_reason
from invoicing_async._send.journal import Ref

from ._provider import wait_for
from .records import DeferralReason, DeferredOutcome, receipt_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from invoicing_async._client.engine import Engine
    from invoicing_async._client.outbox import Till
    from invoicing_async._core.events import Watch
    from invoicing_async._core.outcomes import Outcome
    from invoicing_async._core.retry import RetryPolicy
    from invoicing_async._durable.deferrals import DeferralRecord

    from ._provider import ProviderState

__all__ = ["Drainer"]

#: Seconds between warnings about an old backlog.
_WARN_EVERY = 60.0
#: Seconds a claim lasts without the worker's heartbeat (PostgreSQL).
_LEASE = 30.0
#: Final outcomes read from the outbox per query.
_PAGE = 100


class Drainer:
    """Sends what waits in a deferral's outbox and delivers the final outcomes."""

    def __init__(
        self,
        engine: Engine,
        outbox: Till,
        state: ProviderState,
        *,
        check: Callable[[], None],
        origin: str,
        on_outcome: Callable[[DeferredOutcome], Awaitable[None] | None] | None,
        warn_after: float,
        retry: RetryPolicy,
        concurrency: int,
        poll: float,
    ) -> None:
        self._engine = engine
        self._check = check
        self._outbox = outbox
        self._state = state
        self._origin = origin
        self._on_outcome = on_outcome
        self._warn_after = warn_after
        self._retry = retry
        self._concurrency = concurrency
        self._poll = poll
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._settled = asyncio.Event()
        self._refreshing: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._warned: float | None = None
        self._locked = False
        #: ``(count, oldest deferral's epoch seconds, parked)`` as last counted.
        self.backlog: tuple[int, float | None, int] = (0, None, 0)
        self._gauges: Watch | None = None

    # --- life ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start draining (and delivering to ``on_outcome``), unless already running."""
        if self._tasks and not all(task.done() for task in self._tasks):
            return
        self._tasks = [asyncio.ensure_future(self._drain())]
        if self._gauges is None:  # the backlog's gauges, while the drainer runs
            self._gauges = calls.watch_backlog(repr(self._outbox), lambda: self.backlog[:2])
        if self._on_outcome is not None:
            self._tasks.append(asyncio.ensure_future(self._deliver()))

    async def stop(self) -> None:
        """Stop; claims in flight go back to the outbox (re-sent by the next start)."""
        tasks, self._tasks = self._tasks, [*self._background]
        if self._refreshing is not None:
            tasks.append(self._refreshing)
            self._refreshing = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._state.reset()
        if self._gauges is not None:
            self._gauges.close()
            self._gauges = None

    def deferred(self, deferral: DeferralRecord) -> None:
        """A sale was just deferred: count it, and wake the drainer."""
        count, oldest, parked = self.backlog
        first = deferral.deferred_at if oldest is None else min(oldest, deferral.deferred_at)
        self.backlog = (count + 1, first, parked)
        _pulse(self._wake)

    # --- the worker's hooks (:class:`~._worker.Hooks`) ---------------------------------------

    async def before_send(self, ref: Ref) -> None:
        """While the provider is down, one document at a time goes, as a probe."""
        await self._state.gate(ref)

    def answered(self, outcome: Outcome) -> None:
        """An outcome says whether the provider answers."""
        state = self._state
        failed = False
        if outcome.status in ANSWERED:
            if state.mark_up("the drainer's request was answered"):
                self._rewind_soon()
        else:
            reason = deferral_reason(outcome.error, out_of_time=False)
            if reason is not None:
                state.mark_down(DeferralReason(reason))
                failed = True
        state.finished(Ref.of_outcome(outcome), failed=failed)

    def settled(self, outcome: Outcome, *, done: bool) -> None:  # noqa: ARG002
        """An outcome is written: a final one is delivered (the backlog recounted)."""
        if done:
            _pulse(self._settled)
            self._refresh_soon()

    # --- draining --------------------------------------------------------------------------

    async def _drain(self) -> None:
        while True:
            try:
                self._check()
            except InvoicingError as exc:  # the client was closed
                log.info("deferred sales: the drainer stops: %s", exc)
                return
            try:
                await self._pass()
            except LedgerError as exc:
                if exc.reason == "locked":
                    await self._locked_out()
                else:
                    log.error("deferred sales: the outbox cannot be used: %s", exc)
            except Exception:  # noqa: BLE001  (the drainer outlives a failed pass, logged)
                log.exception("deferred sales: the drainer failed; trying again")
            await wait_for(self._wake, self._poll)

    async def _locked_out(self) -> None:
        """Another worker sends from the outbox (``invoicing-async worker``)."""
        if not self._locked:
            log.info("another worker sends from %r; waiting for it", self._outbox)
        self._locked = True
        await self.refresh_backlog()  # what it sent is what the backlog lost
        count, _, parked = self.backlog
        if count == parked:  # nothing waits to be sent (parked sales wait for a retry)
            self._state.mark_up("another worker sent every deferred sale")

    async def _pass(self) -> None:
        """Send until nothing is left (or the batch stops), then recount the backlog."""
        store = await self._outbox.worker()
        self._locked = False
        self._state.reset()
        steps = self._state.steps
        try:
            await self._outbox.deferrals.rewind()
            await run_worker(
                store,
                self._engine,
                concurrency=self._concurrency,
                stop_when_empty=True,
                retry=self._retry,
                lease=_LEASE,
                poll=min(self._poll, 0.5),
                hooks=self,
                name=repr(self._outbox),
            )
            empty = await store.remaining() == 0
        finally:
            await self._outbox.worker_done()
        if empty and self._state.unchanged(steps):  # else the count may miss a new sale
            self._state.mark_up("nothing is left to send")
        await self.refresh_backlog()

    # --- the backlog ----------------------------------------------------------------------

    async def refresh_backlog(self) -> None:
        """Count now; warn when the oldest has waited longer than ``warn_after``."""
        self.backlog = count, oldest, parked = await self._outbox.deferrals.backlog()
        if oldest is None or time.time() - oldest <= self._warn_after:
            self._warned = None
            return
        now = time.monotonic()
        if self._warned is None or now - self._warned >= _WARN_EVERY:
            self._warned = now
            log.warning(
                "%d deferred sale(s) not yet transmitted to the provider%s; the oldest has "
                "waited %.0f s (warn_after=%g)",
                count,
                f" ({parked} parked: they need attention, see `invoicing-async backlog`)"
                if parked
                else "",
                time.time() - oldest,
                self._warn_after,
            )

    def _rewind_soon(self) -> None:
        """The provider is back: what waits goes oldest first, not by its backoff."""
        task = asyncio.ensure_future(self._outbox.deferrals.rewind())
        task.add_done_callback(_quiet)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _refresh_soon(self) -> None:
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.ensure_future(self._refresh_quietly())

    async def _refresh_quietly(self) -> None:
        try:
            await self.refresh_backlog()
        except LedgerError as exc:
            log.debug("cannot count the backlog: %s", exc)

    # --- outcomes --------------------------------------------------------------------------

    async def _deliver(self) -> None:
        """Hand every final outcome to ``on_outcome``, marked told when it returns."""
        callback = self._on_outcome
        assert callback is not None  # noqa: S101  (started only with one)
        while True:
            settled = self._settled
            try:
                due = await self._outbox.deferrals.due(self._origin, _PAGE)
            except LedgerError as exc:
                log.error("deferred sales: cannot read outcomes: %s", exc)
                due = []
            for deferral, entry in due:
                if entry.outcome is None:
                    continue
                item = DeferredOutcome(receipt_of(deferral), entry.outcome)
                try:
                    answer = callback(item)
                    if inspect.isawaitable(answer):
                        await answer
                except Exception:  # noqa: BLE001  (the application's callback, logged)
                    log.exception(
                        "on_outcome failed for invoice %s; it is delivered again later",
                        deferral.key,
                    )
                    break
                await self._outbox.deferrals.acknowledge([deferral.ref])
            else:
                if len(due) == _PAGE:
                    continue
            await wait_for(settled, self._poll)

    async def outcomes(self) -> AsyncIterator[DeferredOutcome]:
        """Final outcomes as they arrive; each told once the loop asks for the next."""
        if self._on_outcome is not None:
            raise RuntimeError("outcomes go to on_outcome: iterate outcomes() without it")
        while True:
            settled = self._settled
            due = await self._outbox.deferrals.due(self._origin, _PAGE)
            for deferral, entry in due:
                if entry.outcome is None:
                    continue
                yield DeferredOutcome(receipt_of(deferral), entry.outcome)
                await self._outbox.deferrals.acknowledge([deferral.ref])
            if len(due) < _PAGE:
                await wait_for(settled, self._poll)


def _quiet(task: asyncio.Task[None]) -> None:
    """A background write that failed: the next pass does it again."""
    if not task.cancelled() and task.exception() is not None:
        log.debug("deferred sales: %s", task.exception())


def _pulse(event: asyncio.Event) -> None:
    """Wake whoever waits on ``event`` now (they took it before looking)."""
    event.set()
