"""What the command shows: a progress line on a terminal, the summary, outcome records.

``worker`` shows its own (:class:`WorkerReport`): the same bar on a terminal, else a
line every few seconds while something changed, and a one-line summary in the same
words (documents counted once, by how they ended; re-sent requests as retries).

The progress line is redrawn in place (a carriage return) and always fits the terminal's
width, read at every redraw: a line one column too long wraps, and every redraw then
stacks a new line. Parts are dropped by priority to fit (counts and ETA first, the bar takes what is
left), so 50 columns show ``[####....] 120/300 40% ETA 0:03`` and 120 columns add the
outcomes, retries and rate. Plain ASCII, so one character is one column.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import Counter
from typing import IO, TYPE_CHECKING, Any

import attrs

from invoicing_async._client.progress import WorkerProgress
from invoicing_async._core.convert import outcome_to_dict
from invoicing_async._core.outcomes import Outcome, OutcomeStatus
from invoicing_async._doc.document import dumps

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .inputs import Source

__all__ = [
    "Progress",
    "Tally",
    "WorkerReport",
    "documents_line",
    "fit",
    "summary",
    "terminal_width",
    "worker_line",
    "write_record",
]

_REDRAW = 0.1  # seconds between redraws
_LABELS = {
    OutcomeStatus.ACCEPTED: "accepted",
    OutcomeStatus.DUPLICATE: "duplicate",
    OutcomeStatus.REJECTED: "rejected",
    OutcomeStatus.UNKNOWN: "unknown",
    OutcomeStatus.NOT_SENT: "not sent",
}


@attrs.define
class Tally:
    """Counts of a run: outcomes sent now, outcomes replayed from the ledger, retries.

    ``read`` counts the input entries read so far; after an interruption,
    ``not_started`` those read but never sent (the others have an outcome).
    """

    total: int | None = None
    sent: Counter[OutcomeStatus] = attrs.field(factory=Counter)
    replayed: Counter[OutcomeStatus] = attrs.field(factory=Counter)
    unreadable: int = 0
    retries: int = 0
    started: float = attrs.field(factory=time.perf_counter)
    read: int = 0
    not_started: int | None = None
    #: After an interruption: documents whose request may have been out (the ledger
    #: recorded them ``unknown``, or ``not_sent`` if it never left).
    in_flight: int = 0
    #: Documents with at least one request in this run, and when the last one settled.
    attempted: int = 0
    last_sent: float | None = None

    @property
    def settled(self) -> int:
        """Documents with an outcome so far."""
        return sum(self.sent.values()) + sum(self.replayed.values())

    @property
    def failed(self) -> int:
        """Documents the provider does not hold (or may not)."""
        ok = (OutcomeStatus.ACCEPTED, OutcomeStatus.DUPLICATE)
        return sum(
            n for counts in (self.sent, self.replayed) for s, n in counts.items() if s not in ok
        )

    def add(self, outcome: Outcome, *, unreadable: bool = False) -> None:
        """Count one outcome."""
        (self.replayed if outcome.replayed else self.sent)[outcome.status] += 1
        self.retries += max(0, outcome.attempts - 1)
        self.unreadable += unreadable
        if outcome.attempts:
            self.attempted += 1
            self.last_sent = time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self.started


def write_record(output: IO[str], outcome: Outcome, index: int, source: Source) -> None:
    """One JSON line: the outcome's public dict, its input position and its source."""
    record = {**outcome_to_dict(outcome), "index": index, "source": source.as_dict()}
    output.write(dumps(record).decode("utf-8") + "\n")
    output.flush()


def terminal_width(stream: IO[str]) -> int:
    """Columns of the terminal ``stream`` writes to (``COLUMNS`` wins; 80 if unknown)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError, AttributeError):
        return 80


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def fit(tally: Tally, width: int) -> str:
    """The progress line for ``tally`` in at most ``width - 1`` columns (see the module)."""
    room = max(1, width - 1)  # the last column wraps on some terminals
    done, total, elapsed = tally.settled, tally.total, tally.elapsed()
    rate = done / elapsed if elapsed > 0 else 0.0
    head = f"{done}/{total} {min(100, done * 100 // total)}%" if total else f"{done} settled"
    held = tally.sent[OutcomeStatus.ACCEPTED] + tally.sent[OutcomeStatus.DUPLICATE]
    problems = [
        f"{label} {tally.sent[status]}"
        for status, label in _LABELS.items()
        if tally.sent[status] and status not in (OutcomeStatus.ACCEPTED, OutcomeStatus.DUPLICATE)
    ]
    optional = [  # by priority, each shown only when it fits after those before it
        f" ETA {_clock((total - done) / rate)}" if total and rate and done < total else "",
        " | " + " ".join([f"ok {held}", *problems]),
        f" | retries {tally.retries}",
        f" | from ledger {sum(tally.replayed.values())}" if tally.replayed else "",
        f" | {rate:.0f}/s",
    ]
    # A bar of at least 10 cells comes right after the count and ETA, when there is room.
    reserve = 13 if total and room >= 40 else 0
    line = head[:room]
    for part in optional:
        if len(line) + len(part) > room - reserve:
            break
        line += part
    if reserve and total:
        cells = min(40, room - len(line) - 3)
        filled = cells * min(done, total) // total
        line = f"[{'#' * filled}{'.' * (cells - filled)}] {line}"
    return line


class Progress:
    """The progress line on a terminal (stderr); nothing when it is not a terminal."""

    def __init__(self, tally: Tally, stream: IO[str] | None = None) -> None:
        self._tally = tally
        self._stream = stream if stream is not None else sys.stderr
        self.enabled = _isatty(self._stream)
        self._shown = 0  # columns on screen now
        self._last = 0.0

    def update(self) -> None:
        """Redraw, at most every 0.1 s."""
        now = time.perf_counter()
        if self.enabled and now - self._last >= _REDRAW:
            self._last = now
            self._draw()

    def clear(self) -> None:
        """Blank the line (before a log message is written over it)."""
        if self.enabled and self._shown:
            self._stream.write("\r" + " " * self._shown + "\r")
            self._stream.flush()
            self._shown = 0

    def close(self) -> None:
        """Draw the final state and end the line."""
        if self.enabled:
            self._draw()
            self._stream.write("\n")
            self._stream.flush()
            self._shown = 0

    def _draw(self) -> None:
        line = fit(self._tally, terminal_width(self._stream))
        pad = max(0, self._shown - len(line))
        self._stream.write("\r" + line + " " * pad)
        self._stream.flush()
        self._shown = len(line) + pad


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _rate(tally: Tally) -> str:
    """How long the run took, and the sending rate when something was sent."""
    elapsed = f"{tally.elapsed():.2f} s"
    if tally.last_sent is None:
        return f"{elapsed} (nothing sent)"
    sending = tally.last_sent - tally.started
    if sending <= 0:
        return elapsed
    return f"{elapsed} ({tally.attempted / sending:.0f} documents/s sent)"


def summary(tally: Tally, extra: dict[str, Any] | None = None) -> str:
    """The closing summary: documents sent now and those from the ledger, apart.

    After an interruption the first line also counts what was read but never started,
    so that the lines add up to the input read so far.
    """
    sent, replayed = sum(tally.sent.values()), sum(tally.replayed.values())
    head = f"{tally.settled}"
    if replayed:
        head += f": {sent} sent now, {replayed} from the ledger (settled by an earlier run)"
    if tally.not_started is not None:
        of = f" of {tally.total}" if tally.total is not None else ""
        head = (
            f"{tally.settled + tally.not_started} read{of} before the interruption: "
            f"{tally.settled} with an outcome"
            + (f" ({tally.in_flight} of them in flight)" if tally.in_flight else "")
            + f", {tally.not_started} not started"
        )
        if replayed:
            head += f" ({replayed} of them from the ledger)"
    lines = [f"documents:   {head}"]
    for status, label in _LABELS.items():
        line = f"{label + ':':<12} {tally.sent[status]}"
        if tally.replayed[status]:
            line += f" (+{tally.replayed[status]} from the ledger)"
        if status is OutcomeStatus.REJECTED and tally.unreadable:
            line += f" ({tally.unreadable} unreadable input, see above)"
        lines.append(line)
    lines.append(f"retries:     {tally.retries}")
    lines.append(f"elapsed:     {_rate(tally)}")
    lines += [f"{name + ':':<12} {value}" for name, value in (extra or {}).items()]
    return "\n".join(lines)


# --- worker ----------------------------------------------------------------------------------


def _outcomes(counts: Mapping[OutcomeStatus, int], *, accepted: bool = False) -> list[str]:
    """``"5 accepted"``, ``"3 not sent"`` …: the statuses counted (accepted always, if asked)."""
    return [
        f"{counts.get(status, 0)} {label}"
        for status, label in _LABELS.items()
        if counts.get(status, 0) or (accepted and status is OutcomeStatus.ACCEPTED)
    ]


def _retries(count: int) -> str:
    return f"{count} retr{'y' if count == 1 else 'ies'}"


def documents_line(progress: WorkerProgress) -> str:
    """What a worker did, for its summary: ``6000 documents: 6000 accepted (3 retries)``.

    Each document once, by how it ended; the requests sent again apart, as ``submit``
    counts them.
    """
    count = progress.documents
    if not count:
        return "no documents"
    line = f"{count} document{'' if count == 1 else 's'}: " + ", ".join(_outcomes(progress.counts))
    return line + (f" ({_retries(progress.retries)})" if progress.retries else "")


def worker_line(progress: WorkerProgress) -> str:
    """A worker's progress line: ``worker: 120 pending, 4880 sent, 4870 accepted, …``."""
    parts = [] if progress.pending is None else [f"{progress.pending} pending"]
    parts += [f"{progress.sent} sent", *_outcomes(progress.counts, accepted=True)]
    if progress.retries:
        parts.append(_retries(progress.retries))
    line = "worker: " + ", ".join(parts)
    return line + (f"; waiting: {progress.waiting}" if progress.waiting else "")


class WorkerReport:
    """A worker's progress on stderr, told by its ``on_progress`` (:meth:`update`).

    On a terminal, :class:`Progress`'s bar (documents done of those done and pending);
    elsewhere (a service's log) :meth:`run` writes :func:`worker_line` every ``every``
    seconds while it changes. ``every`` 0: neither.
    """

    def __init__(self, every: float, stream: IO[str] | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._every = every
        self._tally = Tally()
        self.bar = Progress(self._tally, self._stream)
        self.bar.enabled = self.bar.enabled and every > 0
        #: The progress last told.
        self.latest = WorkerProgress()
        self._written: str | None = None

    def update(self, progress: WorkerProgress) -> None:
        """The worker's progress changed."""
        self.latest = progress
        if self.bar.enabled:
            tally = self._tally
            tally.sent = Counter(progress.counts)
            tally.retries = progress.retries
            pending = progress.pending
            tally.total = progress.documents + pending if pending is not None else None
            self.bar.update()

    async def run(self) -> None:
        """Write the progress line every ``every`` seconds while it changes (until cancelled)."""
        if self.bar.enabled or self._every <= 0:
            return
        while True:
            await asyncio.sleep(self._every)
            line = worker_line(self.latest)
            if line != self._written:
                self._written = line
                print(f"invoicing-async: {line}", file=self._stream, flush=True)

    def close(self) -> None:
        """End the bar's line (on a terminal)."""
        self.bar.close()
