"""``invoicing-async worker``: send what an outbox holds, as a service.

The worker runs :meth:`~invoicing_async.outbox.PostgresOutbox.run_worker` until it is
stopped, or with ``--until-empty`` until nothing is left that it can send, and behaves as
systemd, Docker and Kubernetes expect of a service (:mod:`._service`):

* the first ``SIGTERM`` or ``SIGINT`` stops it gracefully (``--grace`` seconds for the
  requests out), the second at once; ``SIGHUP`` reads the credentials again;
* a database that is down when it starts is waited for; a refused configuration ends it
  with exit status 78;
* ``--metrics-port`` serves ``/metrics``, ``/healthz`` (the event loop answers, the
  process has file descriptors to spare) and ``/readyz`` (the outbox's database answers,
  the provider key is loaded and valid, the worker is not stopping), from a server that
  bounds what anyone who reaches it may hold (:func:`~invoicing_async.telemetry.serve_metrics`);
* ``--until-empty`` ends with exit status 3 when only entries an operator must release
  are left (an issuer's refused or missing credentials, parked entries), naming the
  issuers and how many of their entries wait;
* ``--token-store`` shares the access tokens of a fleet of workers in Redis;
* it says how far it is (``--progress-every``): a bar on a terminal, else a line every
  few seconds while something changed (pending, sent, accepted …); its summary counts
  documents, each once by how it ended, and the requests sent again as retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import sys
from typing import TYPE_CHECKING, Any

from invoicing_async._client.outbox import open_outbox
from invoicing_async._client.pool import IssuerPool
from invoicing_async._core.entries import IN_FLIGHT, PARKED, PENDING
from invoicing_async._core.errors import LedgerError
from invoicing_async._core.retry import RetryPolicy
from invoicing_async._durable.postgres import described
from invoicing_async._obs.server import serve_metrics

from ._service import (
    EXIT_CONFIG,
    EXIT_WAITING,
    Signals,
    add_grace,
    add_token_store,
    grace_of,
    token_cache,
)
from .common import (
    UsageError,
    add_concurrency,
    add_credentials,
    add_ledger,
    attach_progress,
    issuers,
    key_and_tls,
    ledger_url,
    parked_hint,
    sender,
    settings,
)
from .output import WorkerReport, documents_line

if TYPE_CHECKING:
    import argparse
    import signal
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

    from invoicing_async._client.outbox import PostgresOutbox, SqliteOutbox, WorkerProgress
    from invoicing_async._core.outcomes import OutcomeStatus
    from invoicing_async._doc.pgp import ProviderKey

    from .common import Commands

__all__ = ["register"]

#: Seconds the readiness probe gives the outbox's database to answer.
_PING_TIMEOUT = 3.0
#: Issuers the closing summary names at most (then how many more).
_NAMED = 20
#: LedgerError reasons that say the configuration is refused (exit 78).
_CONFIGURATION = frozenset({"unreadable", "refused", "missing"})
_REASON_WIDTH = 160
#: Seconds between two progress lines, by default.
_PROGRESS_EVERY = 5.0


async def _worker(args: argparse.Namespace) -> int:
    credentials = issuers(args)
    found = settings(args, many=credentials is not None)
    key, ssl = key_and_tls(found, json_only=args.json)
    grace, policy = _options(args)
    url = ledger_url(args)
    outbox = open_outbox(url)
    stop = asyncio.Event()
    report = WorkerReport(args.progress_every)
    async with token_cache(args) as cache, contextlib.AsyncExitStack() as stack:
        client = sender(found, credentials, args=args, provider_key=key, ssl=ssl, token_cache=cache)
        await stack.enter_async_context(client)
        stack.push_async_callback(outbox.close)
        work: asyncio.Future[dict[OutcomeStatus, int]] | None = None

        def now() -> None:
            if work is not None:
                work.cancel()

        reload = client.reload_credentials if isinstance(client, IssuerPool) else None
        signals = Signals(stop=stop.set, now=now, reload=reload, grace=grace)
        stack.enter_context(signals.installed())
        await stack.enter_async_context(_metrics(args, _readiness(outbox, key, stop)))
        stack.enter_context(_reporting(report))
        work = asyncio.ensure_future(
            outbox.run_worker(
                client,
                concurrency=args.concurrency,
                stop_when_empty=args.until_empty,
                retry=policy,
                grace=grace,
                stop=stop,
                on_progress=report.update,
            )
        )
        await _reported(work, report)
        if work.cancelled():
            print(
                "invoicing-async: worker stopped at once: the requests in flight were cut "
                "off; their entries are sent again (answered 409 if they were committed)",
                file=sys.stderr,
            )
            return signals.exit_status
        try:
            work.result()
        except LedgerError as exc:
            if exc.reason not in _CONFIGURATION:
                raise
            print(
                f"invoicing-async: the outbox cannot be used: {exc.message} (a configuration "
                f"failure: fix it, then start the worker again; exit status {EXIT_CONFIG})",
                file=sys.stderr,
            )
            return EXIT_CONFIG
        if signals.received is not None:
            print(_stopped(signals.received, report.latest, url), file=sys.stderr)
            return 0
        waiting = await _waiting(outbox, url) if args.until_empty else []
    print(f"worker done: {documents_line(report.latest)}", file=sys.stderr)
    for line in waiting:
        print(f"  {line}", file=sys.stderr)
    return EXIT_WAITING if waiting else 0


def _options(args: argparse.Namespace) -> tuple[float, RetryPolicy]:
    """The grace of a stop, and the retry policy, the options ask for (checked)."""
    if args.max_rounds < 0:
        raise UsageError("--max-rounds must be 0 (never park) or more")
    if not args.progress_every >= 0:
        raise UsageError("--progress-every must be 0 seconds (no progress) or more")
    policy = RetryPolicy(attempt_timeout=args.timeout, max_rounds=args.max_rounds or None)
    return grace_of(args), policy


async def _reported(work: asyncio.Future[Any], report: WorkerReport) -> None:
    """Until ``work`` ends, its progress said (a line every few seconds, or the bar)."""
    lines = asyncio.ensure_future(report.run())
    try:
        await asyncio.wait({work})
    finally:
        lines.cancel()
        report.close()


def _stopped(received: signal.Signals, progress: WorkerProgress, url: str) -> str:
    """The summary of a worker a signal stopped; why, if its database never answered."""
    done = documents_line(progress)
    if progress.started:
        return f"worker stopped ({received.name}): {done}"
    where = described(url) if "://" in url else url
    return f"worker stopped ({received.name}) before the outbox database answered ({where}): {done}"


async def _waiting(outbox: PostgresOutbox | SqliteOutbox, url: str) -> list[str]:
    """What a drain left for an operator, one line per issuer (and one for parked ones)."""
    issuers: dict[str, list[Any]] = {}  # issuer -> [count, last error]
    parked = 0
    try:
        for status in (PENDING, IN_FLIGHT):
            async for entry in outbox.entries(status):
                counted = issuers.setdefault(entry.issuer or "", [0, None])
                counted[0] += 1
                if entry.outcome is not None and entry.outcome.error is not None:
                    counted[1] = entry.outcome.error
        parked = (await outbox.counts()).get(PARKED, 0)
    except LedgerError as exc:
        return [f"what waits in the outbox cannot be read: {exc.message}"]
    lines = [
        f"{f'issuer {issuer}' if issuer else 'no issuer'}: {count} "
        f"entr{'y' if count == 1 else 'ies'} wait: "
        + (_reason(error) if error is not None else "not sent yet")
        for issuer, (count, error) in sorted(issuers.items(), key=lambda item: -item[1][0])
    ]
    if len(lines) > _NAMED:
        more = sum(count for count, _ in list(issuers.values())[_NAMED:])
        lines[_NAMED:] = [f"and {len(lines) - _NAMED} more issuers ({more} entries)"]
    if parked:
        lines.append(parked_hint(parked, url))
    return lines


def _reason(error: BaseException) -> str:
    """An entry's last error, on one line."""
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= _REASON_WIDTH else text[: _REASON_WIDTH - 3] + "..."


def _readiness(
    outbox: PostgresOutbox | SqliteOutbox, key: ProviderKey | None, stop: asyncio.Event
) -> Callable[[], Awaitable[str | None]]:
    """``/readyz``: not stopping, the provider key valid, the outbox's database answering."""

    async def ready() -> str | None:
        if stop.is_set():
            return "stopping"
        expires = key.expires_at if key is not None else None
        if expires is not None and expires <= dt.datetime.now(dt.timezone.utc):
            return f"the provider key expired at {expires.isoformat()}"
        try:
            await asyncio.wait_for(outbox.ping(), _PING_TIMEOUT)
        except LedgerError as exc:
            return f"the outbox database does not answer: {exc.message}"
        except asyncio.TimeoutError:
            return f"the outbox database did not answer within {_PING_TIMEOUT:g} s"
        return None

    return ready


@contextlib.contextmanager
def _reporting(report: WorkerReport) -> Iterator[None]:
    """Log records clear the progress bar before they are written (on a terminal)."""
    if not report.bar.enabled:
        yield
        return
    attach_progress(report.bar)
    try:
        yield
    finally:
        attach_progress(None)


@contextlib.asynccontextmanager
async def _metrics(
    args: argparse.Namespace, ready: Callable[[], Awaitable[str | None]]
) -> AsyncIterator[None]:
    """The metrics and probes ``--metrics-port`` asks for, while the worker runs."""
    if args.metrics_port is None:
        yield
        return
    try:
        server = serve_metrics(args.metrics_port, args.metrics_host, ready=ready)
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(
            f"cannot serve metrics on {args.metrics_host}:{args.metrics_port}: {exc.strerror}"
        ) from None
    print(f"metrics: {server.url} (probes: {server.healthz}, {server.readyz})", file=sys.stderr)
    sys.stderr.flush()
    try:
        yield
    finally:
        server.close()


def register(commands: Commands) -> None:
    """Add ``worker``."""
    worker = commands.add_parser(
        "worker",
        help="send what an outbox holds (run many)",
        description="Claim the outbox's entries and submit them, with safe retries, "
        "until stopped (SIGTERM or SIGINT: gracefully, then at once) or, with "
        "--until-empty, until nothing is pending. Run as many workers as you like on "
        "PostgreSQL (one per SQLite file); a worker that dies leaves its entries to the "
        "others. A database that is down when the worker starts is waited for. An entry "
        "that fails again waits longer after every round; after --max-rounds rounds that "
        "failed with an unknown outcome (a poison document) it is parked: 'ledger show "
        "--status parked' lists them, 'ledger retry' sends them again. With --credentials, "
        "an issuer whose key the provider refuses waits alone, and is sent with its new "
        "key once the file or resolver gives one (SIGHUP reads them again). Exit status: "
        "0 stopped or drained, 1 the outbox failed, 2 bad usage, 3 --until-empty left "
        f"entries only an operator can release (named), {EXIT_CONFIG} the configuration is "
        "refused (the database's credentials, a newer outbox format), 130/143 stopped at "
        "once by a second SIGINT/SIGTERM.",
    )
    add_credentials(worker, provider_key=True, many=True)
    add_ledger(worker)
    worker.add_argument(
        "--json", action="store_true", help="no provider key: send to /Invoice/json"
    )
    add_concurrency(worker)
    worker.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="for one attempt (30)"
    )
    worker.add_argument(
        "--until-empty",
        action="store_true",
        help="exit once nothing is pending or in flight but entries that wait for an "
        "operator (exit status 3 if some do: parked ones, or those of issuers whose "
        "credentials are refused)",
    )
    worker.add_argument(
        "--max-rounds",
        type=int,
        default=RetryPolicy().max_rounds,
        metavar="N",
        help="park an entry after N rounds that failed with an unknown outcome (a poison "
        f"document); 0: never ({RetryPolicy().max_rounds})",
    )
    add_grace(worker)
    worker.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve metrics for Prometheus on this port (0: any free port, printed), with "
        "the probes /healthz and /readyz; needs the 'prometheus' extra",
    )
    worker.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="the address --metrics-port listens on (127.0.0.1; 0.0.0.0 for every interface)",
    )
    worker.add_argument(
        "--progress-every",
        type=float,
        default=_PROGRESS_EVERY,
        metavar="SECONDS",
        help="say how far it is every SECONDS while something changed: entries pending, "
        "documents sent, accepted ... (a progress bar on a terminal); 0: never "
        f"({_PROGRESS_EVERY:g})",
    )
    add_token_store(worker)
    worker.set_defaults(handler=_worker)
