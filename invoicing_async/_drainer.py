"""The drainer of deferred sales: the outbox worker a :class:`~._deferral.Deferral` owns.

Three parts:

* :class:`Queue`: the deferral's outbox, SQLite or PostgreSQL, as the worker and the
  deferral table (:mod:`._ledger._deferrals`) use it;
* :class:`ProviderState`: whether the provider is known down, and the probes that find
  out when it is back: while it is down, one document at a time is let through (the
  oldest claimed), ``probe_delay`` apart at first and doubling; the first answer ends the
  outage for every sale;
* :class:`Drainer`: passes of :func:`~._worker.run_worker` over the outbox (the same
  worker as ``invoicing-async worker``: the batch's adaptive limit and retry budget),
  with the provider state as the gate before each first request, and the delivery of
  every final outcome to the application, at least once: an outcome is marked told only
  once the application's callback returned (or its loop asked for the next one), so one
  settled while the process died is delivered after the restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import time
from typing import TYPE_CHECKING, Any

from . import _telemetry as telemetry
from ._errors import ClientStateError, LedgerError
from ._journal import Ref
from ._ledger._deferrals import PostgresDeferrals, SqliteDeferrals
from ._ledger._postgres_outbox import PostgresStore
from ._ledger._sqlite_ledger import Ledger, file_of, let_go
from ._ledger._sqlite_outbox import worker_store
from ._log import deferral as log
from ._outcomes import OutcomeStatus
from ._receipts import DeferredOutcome, last_error, reason_of, receipt_of
from ._retry import Backoff
from ._worker import run_worker

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

    from ._engine import Engine
    from ._ledger._deferrals import DeferralStore, Deferred
    from ._ledger._store import Store
    from ._outcomes import Outcome
    from ._receipts import DeferralReason
    from ._retry import RetryPolicy

__all__ = ["Drainer", "ProviderState", "Queue"]

#: Outcomes that say the provider answered: it is up.
_ANSWERED = frozenset({OutcomeStatus.ACCEPTED, OutcomeStatus.DUPLICATE, OutcomeStatus.REJECTED})
#: Seconds between warnings about an old backlog.
_WARN_EVERY = 60.0
#: Seconds a claim lasts without the worker's heartbeat (PostgreSQL).
_LEASE = 30.0
#: Final outcomes read from the outbox per query.
_PAGE = 100


class Queue:
    """A deferral's outbox: what the drainer and the sale need of it."""

    def __init__(self, deferrals: DeferralStore, name: str) -> None:
        self.deferrals = deferrals
        self._name = name
        self._ready = False

    def __repr__(self) -> str:
        return self._name

    @classmethod
    def of(cls, outbox: Any) -> Queue:
        """The queue of an outbox object, or of a SQLite file path."""
        if isinstance(outbox, (str, os.PathLike)):
            return _SqliteQueue(Ledger(outbox), owned=True)
        ledger = getattr(outbox, "ledger", None)
        if isinstance(ledger, Ledger):
            return _SqliteQueue(ledger, owned=False)
        store = getattr(outbox, "_db", None)
        if isinstance(store, PostgresStore):
            return _PostgresQueue(outbox, store)
        raise TypeError(
            f"outbox must be a SqliteOutbox, a PostgresOutbox or a file path, not {outbox!r}"
        )

    async def open(self) -> None:
        """Open the outbox and create the deferrals table (once)."""
        if not self._ready:
            await self._open()
            await self.deferrals.setup()
            self._ready = True

    async def close(self) -> None:
        """Close what the queue opened itself."""
        self._ready = False

    async def _open(self) -> None:
        raise NotImplementedError

    async def store(self) -> Store:
        """The worker's store, its lock taken (SQLite: one worker at a time)."""
        raise NotImplementedError

    async def unlock(self) -> None:
        """Give back what :meth:`store` took."""


class _SqliteQueue(Queue):
    def __init__(self, ledger: Ledger, *, owned: bool) -> None:
        super().__init__(SqliteDeferrals(file_of(ledger)), f"SqliteOutbox({str(ledger.path)!r})")
        self._ledger = ledger
        self._owned = owned

    async def _open(self) -> None:
        await self._ledger.open()

    async def close(self) -> None:
        await super().close()
        if self._owned:
            await self._ledger.close()

    async def store(self) -> Store:
        try:
            return await worker_store(self._ledger)
        except BaseException:  # cancelled while recovering: the lock is given back too
            let_go(self._ledger)
            raise

    async def unlock(self) -> None:
        let_go(self._ledger)  # the lock worker_store took


class _PostgresQueue(Queue):
    def __init__(self, outbox: Any, store: PostgresStore) -> None:
        super().__init__(PostgresDeferrals(store), repr(outbox))  # names no password
        self._outbox = outbox
        self._store = store

    async def _open(self) -> None:
        await self._outbox.setup()

    async def store(self) -> Store:
        return self._store


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
            await _wait(self._changed, timeout)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


class Drainer:
    """Sends what waits in a deferral's outbox and delivers the final outcomes."""

    def __init__(
        self,
        engine: Engine,
        queue: Queue,
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
        self._queue = queue
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
        self._gauges: telemetry.BacklogGauges | None = None

    # --- life ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start draining (and delivering to ``on_outcome``), unless already running."""
        if self._tasks and not all(task.done() for task in self._tasks):
            return
        self._tasks = [asyncio.ensure_future(self._drain())]
        if self._gauges is None:  # the backlog's gauges, while the drainer runs
            self._gauges = telemetry.watch_backlog(repr(self._queue), lambda: self.backlog[:2])
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

    def deferred(self, deferral: Deferred) -> None:
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
        if outcome.status in _ANSWERED:
            if state.mark_up("the drainer's request was answered"):
                self._rewind_soon()
        else:
            reason = reason_of(last_error(outcome))
            if reason is not None:
                state.mark_down(reason)
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
            except ClientStateError as exc:
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
            await _wait(self._wake, self._poll)

    async def _locked_out(self) -> None:
        """Another worker sends from the outbox (``invoicing-async worker``)."""
        if not self._locked:
            log.info("another worker sends from %r; waiting for it", self._queue)
        self._locked = True
        await self.refresh_backlog()  # what it sent is what the backlog lost
        count, _, parked = self.backlog
        if count == parked:  # nothing waits to be sent (parked sales wait for a retry)
            self._state.mark_up("another worker sent every deferred sale")

    async def _pass(self) -> None:
        """Send until nothing is left (or the batch stops), then recount the backlog."""
        store = await self._queue.store()
        self._locked = False
        self._state.reset()
        steps = self._state.steps
        try:
            await self._queue.deferrals.rewind()
            await run_worker(
                store,
                self._engine,
                concurrency=self._concurrency,
                stop_when_empty=True,
                retry=self._retry,
                lease=_LEASE,
                poll=min(self._poll, 0.5),
                hooks=self,
                name=repr(self._queue),
            )
            empty = await store.remaining() == 0
        finally:
            await self._queue.unlock()
        if empty and self._state.unchanged(steps):  # else the count may miss a new sale
            self._state.mark_up("nothing is left to send")
        await self.refresh_backlog()

    # --- the backlog ----------------------------------------------------------------------

    async def refresh_backlog(self) -> None:
        """Count now; warn when the oldest has waited longer than ``warn_after``."""
        self.backlog = count, oldest, parked = await self._queue.deferrals.backlog()
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
        task = asyncio.ensure_future(self._queue.deferrals.rewind())
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
                due = await self._queue.deferrals.due(self._origin, _PAGE)
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
                await self._queue.deferrals.acknowledge([deferral.ref])
            else:
                if len(due) == _PAGE:
                    continue
            await _wait(settled, self._poll)

    async def outcomes(self) -> AsyncIterator[DeferredOutcome]:
        """Final outcomes as they arrive; each told once the loop asks for the next."""
        if self._on_outcome is not None:
            raise RuntimeError("outcomes go to on_outcome: iterate outcomes() without it")
        while True:
            settled = self._settled
            due = await self._queue.deferrals.due(self._origin, _PAGE)
            for deferral, entry in due:
                if entry.outcome is None:
                    continue
                yield DeferredOutcome(receipt_of(deferral), entry.outcome)
                await self._queue.deferrals.acknowledge([deferral.ref])
            if len(due) < _PAGE:
                await _wait(settled, self._poll)


def _quiet(task: asyncio.Task[None]) -> None:
    """A background write that failed: the next pass does it again."""
    if not task.cancelled() and task.exception() is not None:
        log.debug("deferred sales: %s", task.exception())


def _now() -> float:
    return asyncio.get_running_loop().time()


def _pulse(event: asyncio.Event) -> None:
    """Wake whoever waits on ``event`` now (they took it before looking)."""
    event.set()


async def _wait(event: asyncio.Event, timeout: float | None) -> None:
    """Wait for ``event`` (then clear it) or ``timeout`` seconds, whichever comes first."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()
    event.clear()
