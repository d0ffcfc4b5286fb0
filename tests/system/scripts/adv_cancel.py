"""Cancel a journaled batch mid-flight; run with ``python -X dev -W error``.

Usage: adv_cancel.py MODE JOURNAL
MODE: ``cancel`` (cancel submit_many while requests are in flight), ``backoff`` (the
same, while some documents sleep in a retry backoff), ``stream`` (break out of
submit_stream and aclose it).

The sandbox runs in its own thread and event loop, so the client's loop holds only the
client's tasks. Prints one JSON report on stdout; anything on stderr (an unclosed
session, a task destroyed while pending, a ResourceWarning) is a failure for the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import sqlite3
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from invoicing_async import InvoicingClient, RetryPolicy
from invoicing_sandbox import Fault, Sandbox, sample_invoices

if TYPE_CHECKING:
    from collections.abc import Callable


class SandboxThread:
    """A sandbox serving from another thread's event loop."""

    def __init__(self, kinds: tuple[Fault, ...], *, hold_after: int) -> None:
        self._kinds = kinds
        self._hold_after = hold_after
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.sb: Sandbox | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()))

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.slow_callback_duration = 60  # -X dev: what is checked is what is left
        self._stop = asyncio.Event()
        async with Sandbox(key_algorithm="cv25519") as sb:
            sb.random_faults(rate=1.0, seed=1, kinds=self._kinds, max_per_document=1)
            # Requests after the first ``hold_after`` are held until the sandbox stops:
            # certainly in flight when the client cancels (no latency hoping so).
            sb.hold(after=self._hold_after)
            self.sb = sb
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> Sandbox:
        self._thread.start()
        self._ready.wait(30)
        assert self.sb is not None
        return self.sb

    def __exit__(self, *exc_info: object) -> None:
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


def ledger_rows(path: Path) -> list[tuple[str, str, str | None]]:
    if not path.exists():
        return []
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        return connection.execute("SELECT key, state, status FROM entries").fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []
    finally:
        connection.close()


def journal_state(path: Path) -> dict[str, object]:
    """Every entry exists once its document was sent (``sending`` is recorded first)."""
    rows = ledger_rows(path)
    return {
        "sent": len(rows),
        "in_flight_without_settled": sorted(k for k, state, _ in rows if state == "in_flight"),
        "unknown": sorted(k for k, state, status in rows if status == "unknown"),
        "settled": sum(1 for _, state, _ in rows if state == "done"),
    }


async def until(condition: Callable[[], bool]) -> None:
    """Until the sandbox's state (another thread's) says so."""
    while not condition():  # noqa: ASYNC110  (another thread's state, polled)
        await asyncio.sleep(0.01)


async def main(mode: str, journal: Path) -> dict[str, object]:
    # cancel: every request held (none answered before the cancel); stream: three
    # answered, the rest held; backoff: four answered 503 (Retry-After: 60, so their
    # documents sleep in a backoff), the rest held.
    kinds: tuple[Fault, ...] = ()
    hold_after = {"cancel": 0, "stream": 3, "backoff": 4}[mode]
    if mode == "backoff":
        kinds = (Fault.status(503, retry_after=60),)
    # -X dev reports callbacks slower than 0.1 s on stderr: a loaded machine is not a leak.
    asyncio.get_running_loop().slow_callback_duration = 60
    report: dict[str, object] = {"mode": mode}
    with SandboxThread(kinds, hold_after=hold_after) as sb:
        documents = sample_invoices(40, issuer_vat=sb.client_id, lines=1)
        retry = RetryPolicy(base_delay=0.01, max_delay=0.02)
        client = InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        )
        async with client:
            if mode == "stream":
                stream = client.submit_stream(documents, concurrency=8, ledger=journal, retry=retry)
                seen = 0
                async for _ in stream:
                    seen += 1
                    if seen == 3:
                        break
                await stream.aclose()
                report["seen"] = seen
            else:
                task = asyncio.ensure_future(
                    client.submit_many(documents, concurrency=8, ledger=journal, retry=retry)
                )
                # Eight requests out: held by the provider, or answered 503 (their
                # documents asleep in a backoff). The ledger's records are written ahead
                # of the requests, so they cannot tell.
                await until(lambda: sb.held + sb.stats.submissions.get(503, 0) >= 8)
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    report["cancelled"] = True
                else:
                    report["cancelled"] = False
            report["tasks_left"] = [
                repr(t) for t in asyncio.all_tasks() if t is not asyncio.current_task()
            ]
        session = client._engine.transport._session
        report["session_closed"] = session is None or session.closed
    report["journal"] = journal_state(journal)
    return report


if __name__ == "__main__":
    mode, path = sys.argv[1], Path(sys.argv[2])
    result = asyncio.run(main(mode, path))
    gc.collect()
    with contextlib.suppress(BrokenPipeError):
        print(json.dumps(result), flush=True)
