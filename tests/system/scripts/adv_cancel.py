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

from invoicing_async import InvoicingClient, RetryPolicy
from invoicing_sandbox import Fault, Sandbox, sample_invoices


class SandboxThread:
    """A sandbox serving from another thread's event loop."""

    def __init__(self, kinds: tuple[Fault, ...]) -> None:
        self._kinds = kinds
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.sb: Sandbox | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()))

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with Sandbox(key_algorithm="cv25519") as sb:
            sb.random_faults(rate=1.0, seed=1, kinds=self._kinds, max_per_document=1)
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


async def wait_for_sending(path: Path, count: int) -> None:
    while len(ledger_rows(path)) < count:  # noqa: ASYNC110  (another thread writes the file)
        await asyncio.sleep(0.01)


async def main(mode: str, journal: Path) -> dict[str, object]:
    # Long enough that nothing in flight is answered before the cancel (the sandbox ends
    # the waits when it closes); the stream needs a few answers first.
    kinds: tuple[Fault, ...] = (Fault.latency(0.5 if mode == "stream" else 3.0),)
    if mode == "backoff":
        kinds = (Fault.latency(3.0), Fault.status(503, retry_after=60))
    report: dict[str, object] = {"mode": mode}
    with SandboxThread(kinds) as sb:
        documents = sample_invoices(40, issuer_vat=sb.client_id, lines=1)
        retry = RetryPolicy(base_delay=0.01, max_delay=0.02)
        client = InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        )
        async with client:
            if mode == "stream":
                stream = client.submit_stream(
                    documents, concurrency=8, ledger=journal, retry=retry
                )
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
                await wait_for_sending(journal, 8)
                await asyncio.sleep(0.2)  # 503s answered, their documents in backoff
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
        session = client._transport._session
        report["session_closed"] = session is None or session.closed
    report["journal"] = journal_state(journal)
    return report


if __name__ == "__main__":
    mode, path = sys.argv[1], Path(sys.argv[2])
    result = asyncio.run(main(mode, path))
    gc.collect()
    with contextlib.suppress(BrokenPipeError):
        print(json.dumps(result), flush=True)
