"""An outbox worker: a batch whose journal is the set of entries it has claimed.

The worker feeds claimed entries, each a :class:`~invoicing_async.Submission` with its
own endpoint, into one batch of the client, so outcomes, retries, the retry budget, the
circuit breaker and the adaptive in-flight limit are those of ``submit_stream``. The
batch's journal is :class:`~._claims.Claims`: lookups answer from the claimed rows, and
every write is fenced by the claim's lease (a worker whose claim was taken over writes
nothing, and does not send). A heartbeat extends the leases; a worker that dies stops
extending them, and another worker claims the entries when they expire: a request that
may have left is re-sent with ``maybe_committed``, so the provider's ``409`` makes it
``accepted`` and the document is committed once.

A worker is a service:

* **It stops gracefully.** Asked to stop (``stop`` set, or the worker cancelled: a stop
  signal, a deferral closing), it claims nothing more and lets no request leave (one
  waiting for its token stays unsent); the requests out end within ``grace`` seconds
  (at once if none is out); then it puts back every entry it holds (fenced by the
  lease): those never sent untouched, those cut off knowing that they may have been
  committed. Its last writes get :data:`~._claims.PUT_BACK` seconds after the grace:
  a database that does not answer them leaves those entries to their leases (one
  WARNING). Set, ``stop`` makes it return its counts; a cancellation ends it
  cancelled, and a second one cuts the requests out at once.
* **It waits for its database.** When the outbox database is unavailable (down at start,
  restarting, failing over, a lost connection: :class:`~invoicing_async.LedgerError`
  with reason ``unavailable``), the batch in progress ends, and the worker waits for
  the database with capped, jittered backoff (one WARNING per outage, one INFO when it
  answers again), puts back the entries it held (their requests are re-sent, answered
  ``409`` if they were committed) and goes on. Only a configuration failure (the
  database refuses its credentials, a table of a newer format) ends it. Every look at
  the database while it waits watches ``stop``: a database that accepts connections
  and never answers does not hold a stop for its driver's connect timeout.
* **It counts documents.** Its counts are of documents, each once by its latest outcome
  (:mod:`._progress`), told to ``on_progress`` as they change.
* **It outlives an issuer's refused credentials.** With an
  :class:`~invoicing_async.IssuerPool`, an issuer whose documents the batch stopped
  (the provider refused its credentials, or the pool has none) waits, its entries not
  claimed, until its wait is over or the pool's credentials change (:mod:`._blocked`).
* **Its drain ends.** A worker that stops when empty stops when nothing is left but
  entries waiting for an operator (refused credentials, no credentials, parked), and
  says so, naming the issuers and how many of their entries wait.

Poison documents (the provider fails on one every time) cost a bounded number of
requests: an entry put back after a failed round waits before it is claimed again,
longer after every round that counts against it (``RetryPolicy.delay_after_round``,
across rounds, workers and restarts: the wait is stored with the entry as
``available_at``; a round the provider certainly never processed, an outage, waits the
first round's delay however long the outage lasts), and once
``RetryPolicy.max_rounds`` rounds have failed against its budget (``unknown``
outcomes: :func:`~invoicing_async._core.entries.charged`) the entry is *parked*: kept with its last
outcome, including whether a request for it may have been committed, and claimed
again only after an explicit retry.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from invoicing_async._core.errors import LedgerError
from invoicing_async._core.log import ledger as log
from invoicing_async._core.retry import Backoff
from invoicing_async._io.waits import pause
from invoicing_async._obs.metrics import Pending
from invoicing_async._send.batch import BatchOptions

from ._blocked import Blocked
from ._claims import Claims, Hooks
from .progress import Documents

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from invoicing_async._core.outcomes import OutcomeStatus
    from invoicing_async._core.retry import RetryPolicy
    from invoicing_async._doc.document import Submission
    from invoicing_async._durable.store import Store
    from invoicing_async._send.batch import Batch

    from .engine import Engine

__all__ = ["DEFAULT_GRACE", "Claims", "Hooks", "run_worker", "until_available"]

#: Seconds a worker asked to stop lets its requests out end, by default: well within
#: the 30 s an orchestrator waits (Kubernetes' ``terminationGracePeriodSeconds``).
DEFAULT_GRACE = 10.0
#: The longest wait between two looks at an unavailable outbox database.
_MAX_BACKOFF = 5.0
#: The longest pause of a worker whose batch stopped (its breaker opened).
_MAX_PAUSE = 60.0


async def run_worker(
    store: Store,
    engine: Engine,
    *,
    concurrency: int,
    stop_when_empty: bool,
    retry: RetryPolicy,
    lease: float,
    poll: float,
    hooks: Hooks | None = None,
    name: str = "outbox",
    grace: float = DEFAULT_GRACE,
    stop: asyncio.Event | None = None,
    documents: Documents | None = None,
) -> dict[OutcomeStatus, int]:
    """Drain the outbox (see :meth:`PostgresOutbox.run_worker`); returns document counts.

    Each document once, by its latest outcome written (:mod:`._progress`): an outcome
    whose write failed is counted when the entry is sent again.

    :param hooks: told of every outcome, and asked before every first request.
    :param name: the outbox's name on its ``invoicing.outbox.pending`` gauge.
    :param grace: seconds the requests out may take to end once the worker is asked to
        stop (``stop`` set, or cancelled); then they are cut off.
    :param stop: set it to stop gracefully: the worker returns its counts.
    :param documents: what counts the documents (and tells their progress).
    """
    stop = stop if stop is not None else asyncio.Event()
    documents = documents if documents is not None else Documents()
    # After a batch whose breaker opened: poll, then doubling from a second to a minute.
    pauses = Backoff(1.0, _MAX_PAUSE, jitter="none")
    idle = poll
    orphaned: list[str] = []  # leases held when the database went away
    unconfirmed = 0  # outcomes whose write the database's going away left unknown
    # Observed while this function runs (closed after); counted for the progress too.
    pending = Pending(name, wanted=documents.wanted)
    blocked = Blocked(engine.channels)
    try:
        while not stop.is_set():
            claims = Claims(
                store, seconds=lease, policy=retry, hooks=hooks, pending=pending,
                documents=documents,
            )  # fmt: skip
            options = BatchOptions(
                concurrency=concurrency, retry=retry, trace=False, identified=True
            )
            batch = engine.batch(options, claims)
            try:
                if orphaned:
                    await store.release(orphaned, 0.0)
                    orphaned = []
                orphaned += await _round(
                    claims, batch, blocked, size=concurrency, poll=poll,
                    stop_when_empty=stop_when_empty, pause=idle, grace=grace, stop=stop,
                )  # fmt: skip
                blocked.observe(batch)  # what it stopped after its feed ended
                empty = (
                    stop_when_empty
                    and batch.stopped is None
                    and not stop.is_set()
                    and await store.remaining(blocked.skipped()) == 0
                )
            except LedgerError as exc:
                if exc.reason != "unavailable":
                    raise
                orphaned += await claims.release()
                waited = await until_available(
                    store.remaining, stop, error=exc, waiting=documents.waiting
                )
                if not waited:
                    break
                continue
            finally:
                unconfirmed += claims.unconfirmed
            if stop.is_set():
                _left_to_leases(orphaned, lease)
                break
            if batch.stopped is not None:
                if stop_when_empty:
                    log.warning("outbox worker stops: %s", batch.stopped)
                    return _counted(documents, unconfirmed)
                log.warning("outbox worker paused %.0f s: %s", idle, batch.stopped)
                await pause(idle, stop)
                idle = pauses.next()
                continue
            pauses.reset()
            idle = poll
            if empty:
                await _stopping(store, blocked)
                return _counted(documents, unconfirmed)
        return _counted(documents, unconfirmed)
    finally:
        pending.close()


def _left_to_leases(leases: list[str], seconds: float) -> None:
    """A stopping worker could not put back what it held: say what becomes of it."""
    if leases:
        log.warning(
            "outbox worker stops: the outbox database did not answer its last writes: the "
            "entries it held are left to their leases; any worker sends them again once "
            "they expire (within %g s), each request that may have left as maybe committed",
            seconds,
        )


def _counted(documents: Documents, unconfirmed: int) -> dict[OutcomeStatus, int]:
    """The counts a worker returns; said once if some writes were left unknown.

    An outcome whose write failed as the database went away is counted where it is
    written again (by this worker or another, after a re-send the provider answers
    ``409``); if that write had landed after all, the entry is done and counted by no
    one: the counts may fall short by as many, never count an entry twice.
    """
    if unconfirmed:
        log.warning(
            "outbox worker: %d outcome(s) were being written when the outbox database went "
            "away; those whose write landed are not in this worker's counts (the outbox "
            "holds them: invoicing-async outbox status)",
            unconfirmed,
        )
    return documents.counts()


async def _round(
    claims: Claims,
    batch: Batch,
    blocked: Blocked,
    *,
    size: int,
    poll: float,
    stop_when_empty: bool,
    pause: float,
    grace: float,
    stop: asyncio.Event,
) -> list[str]:
    """One batch over the entries claimed; the leases that could not be put back.

    Entries still held at the end go back at once, or after ``pause`` when the batch's
    breaker opened. Asked to stop (``stop`` set, or cancelled), the round stops
    gracefully (see the module docstring); cancelled again, at once. Either way it
    writes the outcomes it knows and puts back what it holds before it ends, rather
    than leaving it to its leases to expire; a request that may have left keeps that
    knowledge.
    """
    heartbeat = asyncio.ensure_future(claims.heartbeat())
    documents = claims.feed(
        batch, size=size, poll=poll, stop_when_empty=stop_when_empty, rounds=blocked
    )
    consume = asyncio.ensure_future(_consume(batch, documents))
    cancelled = False
    try:
        cancelled = await _until_asked(consume, stop)
        # Asked to stop: the requests out may end; unless asked twice already (``stop``
        # set, then cancelled before this round saw it): then at once.
        if not consume.done() and not (cancelled and stop.is_set()):
            claims.stop()
            batch.halt()
            cancelled = await _ending(consume, batch, grace) or cancelled
    finally:
        cancelled = await _cut(consume) or cancelled
        heartbeat.cancel()
        # Waited for, not awaited: awaiting it would hand a cancellation of this worker
        # arriving now to the heartbeat, and suppressing the heartbeat's would swallow it.
        await asyncio.wait({heartbeat})
    failure = None if consume.cancelled() else consume.exception()
    if cancelled or claims.stopping or consume.cancelled():
        left = await claims.finish()
        if cancelled:
            raise asyncio.CancelledError
        if failure is not None and not isinstance(failure, LedgerError):
            raise failure
        return left
    if failure is not None:  # the batch's failure (the outbox unavailable …) is the round's
        raise failure
    await claims.flush()
    return await claims.release(0.0 if batch.stopped is None else pause)


async def _consume(batch: Batch, documents: AsyncIterator[Submission]) -> None:
    """Run the batch over the claimed documents.

    The claims tell the worker's issuers that wait of each outcome, as it settles.
    """
    async with contextlib.aclosing(batch.run(documents)) as outcomes:
        async for _ in outcomes:
            pass


async def _until_asked(consume: asyncio.Future[None], stop: asyncio.Event) -> bool:
    """Until the batch ends or the worker is asked to stop; whether it was cancelled."""
    asked = asyncio.ensure_future(stop.wait())
    waited: list[asyncio.Future[Any]] = [consume, asked]
    try:
        await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        return True
    finally:
        asked.cancel()
    return False


async def _ending(consume: asyncio.Future[None], batch: Batch, grace: float) -> bool:
    """Let the requests out end, ``grace`` seconds at most; whether cancelled meanwhile."""
    quiet = asyncio.ensure_future(batch.none_out())
    waited: list[asyncio.Future[Any]] = [consume, quiet]
    try:
        await asyncio.wait(waited, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # asked again: at once
        return True
    finally:
        quiet.cancel()
    return False


async def _cut(consume: asyncio.Future[None]) -> bool:
    """End the batch now if it runs; whether this worker was cancelled meanwhile.

    The batch records what it cuts off (in its journal, the claims) before it ends: its
    end is waited for even through a cancellation, which is then handed on.
    """
    consume.cancel()
    cancelled = False
    while not consume.done():
        try:
            await asyncio.wait({consume})
        except asyncio.CancelledError:  # noqa: PERF203  (told once the batch ended)
            cancelled = True
    return cancelled


async def _stopping(store: Store, blocked: Blocked) -> None:
    """A worker that stops when empty found nothing to send: say what waits, and why."""
    waiting = await store.waiting(blocked.skipped()) if blocked.skipped() else {}
    for issuer, count in sorted(waiting.items()):
        log.warning(
            "outbox worker stops: %d entr%s of %s wait: %s",
            count,
            "y" if count == 1 else "ies",
            f"issuer {issuer}" if issuer else "no issuer",
            blocked.why(issuer),
            extra={"invoicing.issuer": issuer},
        )
    parked = await store.parked()
    if parked:
        log.warning(
            "outbox worker stops: nothing left to send but %d parked entr%s that need "
            "attention (invoicing-async ledger show --status parked; ledger retry "
            "--status parked sends them again)",
            parked,
            "y" if parked == 1 else "ies",
        )


async def until_available(
    check: Callable[[], Awaitable[object]],
    stop: asyncio.Event | None,
    *,
    error: LedgerError | None = None,
    waiting: Callable[[str | None], object] | None = None,
) -> bool:
    """Until ``check()`` does not fail with the database unavailable: one WARNING, one INFO.

    With ``error``, the database went away (``check`` is not run first); without, this
    is a start and ``check`` the first look at it. Waits with capped, jittered backoff.
    Returns ``False`` if ``stop`` was set meanwhile, also while ``check`` runs (it is
    cut off: a database that accepts connections and never answers holds no stop).
    Another failure of ``check`` (a configuration failure) is raised. ``waiting`` is
    told why the worker waits, then ``None`` once the database answers.
    """
    waits = Backoff(0.1, _MAX_BACKOFF)  # equal jitter: a fleet spreads out
    if error is not None:
        _unavailable(error, waiting)
    while not (stop is not None and stop.is_set()):
        if error is not None:
            await pause(waits.next(), stop)
        try:
            if not await _unless_stopped(check, stop):
                return False
        except LedgerError as exc:
            if exc.reason != "unavailable":
                raise
            if error is None:
                _unavailable(exc, waiting)
            else:
                log.debug("the outbox database is still unavailable: %s", exc)
            error = exc
            continue
        if error is not None:
            log.info("the outbox database answers again: the worker goes on")
            if waiting is not None:
                waiting(None)
        return True
    return False


def _unavailable(error: LedgerError, waiting: Callable[[str | None], object] | None) -> None:
    """Say once that the worker waits for its database."""
    log.warning(
        "the outbox database is unavailable (%s); the worker waits for it, and sends "
        "what the outbox holds once it answers",
        error,
    )
    if waiting is not None:
        waiting(f"the outbox database is unavailable ({error})")


async def _unless_stopped(
    check: Callable[[], Awaitable[object]], stop: asyncio.Event | None
) -> bool:
    """Run ``check()`` unless ``stop`` is set first (then it is cut off): whether it ran.

    Its failure is raised. Cut off, it is waited for as it ends (a connection attempt
    closing its socket), which a cancellation of this call does not interrupt twice.
    """
    if stop is None:
        await check()
        return True
    if stop.is_set():
        return False
    running = asyncio.ensure_future(check())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not running.done():
            running.cancel()
            await asyncio.wait({running})
    if running.cancelled():
        return False
    running.result()
    return True
