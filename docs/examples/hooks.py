"""Telemetry of your own: a hook that counts retries and times requests, no SDK needed.

An application that feeds statsd, Datadog's client or its own dashboard adds a hook: it
is told of each library call as it starts and answers with an observer of that call (or
``None``: that call is of no interest, and costs nothing more).
"""

import asyncio
import collections
import time

# region hook
from invoicing_async.telemetry import (
    CallEnded,
    CallStarted,
    Hook,
    Observer,
    RequestEnded,
    RequestObserver,
    RequestStarted,
    Retried,
    add_hook,
    remove_hook,
)


class Stats(Hook):
    """Counts retries by reason and outcomes by call, and times each HTTP request."""

    def __init__(self) -> None:
        self.retries: collections.Counter[str] = collections.Counter()
        self.outcomes: collections.Counter[tuple[str, str]] = collections.Counter()
        self.requests: list[tuple[str, int | None, float]] = []

    def call(self, event: CallStarted) -> Observer | None:
        """A call starts: observed, unless it is a token request."""
        if event.kind == "token":
            return None  # not of interest here: nothing more is told of it
        return _Call(self, event.name or "batch")


class _Call(Observer):
    def __init__(self, stats: Stats, name: str) -> None:
        self.stats = stats
        self.name = name

    def retried(self, event: Retried) -> None:
        self.stats.retries[event.reason] += 1

    def request(self, event: RequestStarted) -> RequestObserver:
        return _Timed(self.stats, event.method)

    def document(self, event: CallStarted) -> Observer:
        return _Call(self.stats, event.name or "document")  # a batch's documents

    def ended(self, event: CallEnded) -> None:
        self.stats.outcomes[self.name, event.status] += 1


class _Timed(RequestObserver):
    def __init__(self, stats: Stats, method: str) -> None:
        self.stats = stats
        self.method = method
        self.started = time.perf_counter()

    def ended(self, event: RequestEnded) -> None:
        seconds = time.perf_counter() - self.started
        self.stats.requests.append((self.method, event.status, seconds))


# endregion hook

from invoicing_async import InvoicingClient  # noqa: E402
from invoicing_sandbox import Fault, Sandbox, sample_invoice  # noqa: E402


async def main() -> None:
    """A submission answered 503 once, then a batch of two: what the hook counted."""
    stats = Stats()
    add_hook(stats)
    try:
        async with Sandbox() as sb:
            client = InvoicingClient(sb.base_url, sb.client_id, sb.client_secret)
            async with client:
                sb.script(Fault.status(503, retry_after=0))
                await client.submit_json(sample_invoice(1))
                batch = [sample_invoice(2), sample_invoice(3)]
                await client.submit_many(batch, encrypted=False)
    finally:
        remove_hook(stats)
    print(dict(stats.retries), dict(stats.outcomes), len(stats.requests))
    assert stats.retries == {"throttled": 1}
    assert stats.outcomes == {
        ("invoicing.submit", "accepted"): 1,
        ("invoicing.document", "accepted"): 2,
        ("invoicing.batch", "closed"): 1,
    }
    # The submission twice (503, then 201), and the batch's two documents.
    assert [status for _, status, _ in stats.requests] == [503, 201, 201, 201]


if __name__ == "__main__":
    asyncio.run(main())
