"""What the command shows: a progress line on a terminal, the summary, outcome lines."""

from __future__ import annotations

import contextlib
import sys
import time
from collections import Counter
from typing import IO, TYPE_CHECKING, Any

from invoicing_async._convert import outcome_to_json
from invoicing_async._documents import dumps
from invoicing_async._outcomes import Outcome, OutcomeStatus

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from invoicing_async._client import InvoicingClient

__all__ = ["Progress", "run_batch", "summary"]


class Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

    def __init__(self, total: int | None, stream: IO[str]) -> None:
        self._total = total
        self._stream = stream
        self._enabled = stream.isatty()
        self._counts: Counter[OutcomeStatus] = Counter()
        self._last = 0.0
        self._started = time.perf_counter()

    def update(self, outcome: Outcome) -> None:
        self._counts[outcome.status] += 1
        now = time.perf_counter()
        if self._enabled and now - self._last > 0.1:
            self._last = now
            self._draw()

    def close(self) -> None:
        if self._enabled:
            self._draw()
            self._stream.write("\n")
            self._stream.flush()

    def _draw(self) -> None:
        done = sum(self._counts.values())
        rate = done / max(time.perf_counter() - self._started, 1e-9)
        if self._total:
            width = 30
            filled = int(width * done / self._total)
            bar = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{self._total}"
        else:
            bar = f"{done} settled"
        counts = " ".join(f"{s.value} {n}" for s, n in sorted(self._counts.items(), key=str))
        self._stream.write(f"\r{bar}  {counts}  {rate:.0f}/s ")
        self._stream.flush()


def summary(counts: Counter[OutcomeStatus], elapsed: float, extra: dict[str, Any]) -> str:
    total = sum(counts.values())
    lines = [
        f"documents:   {total}",
        f"accepted:    {counts[OutcomeStatus.ACCEPTED]}",
        f"duplicates:  {counts[OutcomeStatus.DUPLICATE]}",
        f"rejected:    {counts[OutcomeStatus.REJECTED]}",
        f"unknown:     {counts[OutcomeStatus.UNKNOWN]}",
        f"not sent:    {counts[OutcomeStatus.NOT_SENT]}",
        f"elapsed:     {elapsed:.2f} s ({total / max(elapsed, 1e-9):.0f} documents/s)",
    ]
    lines += [f"{name + ':':<12} {value}" for name, value in extra.items()]
    return "\n".join(lines)


async def run_batch(
    client: InvoicingClient,
    documents: Iterator[Any],
    *,
    output: IO[str],
    total: int | None,
    encrypted: bool,
    concurrency: int,
    journal: str | None,
    key: Callable[[Any], str],
) -> tuple[Counter[OutcomeStatus], float]:
    progress = Progress(total, sys.stderr)
    counts: Counter[OutcomeStatus] = Counter()
    started = time.perf_counter()
    try:
        stream = client.submit_stream(
            documents,
            concurrency=concurrency,
            encrypted=encrypted,
            journal=journal,
            key=key,
        )
        async with contextlib.aclosing(stream) as outcomes:
            async for outcome in outcomes:
                counts[outcome.status] += 1
                output.write(dumps(outcome_to_json(outcome)).decode("utf-8") + "\n")
                output.flush()
                progress.update(outcome)
    finally:
        progress.close()
    return counts, time.perf_counter() - started
