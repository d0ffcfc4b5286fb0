"""What an outbox worker did, in documents: each counted once, by how it ended for it.

An entry may take several rounds: one that fails in a way that may pass (``not_sent``,
``unknown`` with re-sends allowed) goes back to the outbox and is claimed again later,
by this worker or another. Its outcomes are then not documents: a document answered
404 three times and accepted the fourth is one document, accepted, and three requests
sent again. :class:`Documents` counts a worker's documents so: each by its latest
outcome, the requests after a document's first as *retries* (as ``submit`` counts
them), and an entry on its way put back untouched as its worker stopped (its request
waited for a token: it never left) as not sent.

Only the documents whose latest outcome sent them back to the outbox are remembered
(to move their count when they settle again): the memory follows the backlog of
entries waiting for another round, not the documents sent.

:class:`WorkerProgress` is what a worker's ``on_progress`` callback is handed.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

import attrs

from invoicing_async._core.outcomes import OutcomeStatus
from invoicing_async._send.journal import Ref

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from invoicing_async._core.outcomes import Outcome

__all__ = ["Documents", "WorkerProgress"]


@attrs.frozen
class WorkerProgress:
    """How far an outbox worker is: passed to its ``on_progress`` callback.

    After every outcome written, when the outbox's pending entries were counted again,
    and when the worker starts or stops waiting for its database.

    .. versionadded:: 0.5.0
    """

    #: Documents this worker settled or put back, each once (however many rounds).
    documents: int = 0
    #: Of those, how many ended in each status (each its latest outcome).
    counts: Mapping[OutcomeStatus, int] = attrs.field(factory=dict)
    #: Requests sent again: every request of a document after its first, across rounds.
    retries: int = 0
    #: Entries the outbox holds to be sent (pending or in flight, any worker's), as last
    #: counted (at most a second ago while the worker claims), less those this worker
    #: finished since; ``None`` until they are counted.
    pending: int | None = None
    #: Why the worker waits, if it does: its database is unavailable (down, restarting,
    #: or not answering).
    waiting: str | None = None
    #: The outbox's database answered: the worker claims entries (``False``: it has not
    #: answered yet, down or silent since the worker started).
    started: bool = False

    @property
    def sent(self) -> int:
        """Documents the provider was sent (every one whose latest outcome is not ``not_sent``)."""
        return self.documents - self.counts.get(OutcomeStatus.NOT_SENT, 0)


class Documents:
    """A worker's documents, counted as the module says; told to ``on_progress``."""

    def __init__(self, on_progress: Callable[[WorkerProgress], object] | None = None) -> None:
        self._on_progress = on_progress
        self._counts: collections.Counter[OutcomeStatus] = collections.Counter()
        self._documents = 0
        self._retries = 0
        #: Documents sent back to the outbox: their latest status, and whether this
        #: worker has sent them a request yet.
        self._again: dict[Ref, tuple[OutcomeStatus, bool]] = {}
        self._pending: int | None = None
        self._waiting: str | None = None
        self._started = False

    @property
    def wanted(self) -> bool:
        """Whether anyone is told of progress (then the pending entries are counted)."""
        return self._on_progress is not None

    def settled(self, outcome: Outcome, *, again: bool) -> None:
        """An outcome was written; ``again``: the entry goes back to be sent again."""
        self._count(outcome.status, outcome.attempts, Ref.of_outcome(outcome), again=again)

    def put_back(self, outcome: Outcome) -> None:
        """An entry on its way went back untouched (it never left, the worker stopping)."""
        self._count(OutcomeStatus.NOT_SENT, 0, Ref.of_outcome(outcome), again=True)

    def pending(self, count: int | None) -> None:
        """The outbox's entries to be sent, just counted."""
        if count != self._pending:
            self._pending = count
            self.tell()

    def waiting(self, why: str | None) -> None:
        """The worker waits for its database (``why``), or no longer (``None``)."""
        if why != self._waiting:
            self._waiting = why
            self.tell()

    def started(self) -> None:
        """The outbox's database answered: the worker claims entries."""
        if not self._started:
            self._started = True
            self.tell()

    def counts(self) -> dict[OutcomeStatus, int]:
        """How many documents ended in each status."""
        return {status: n for status, n in self._counts.items() if n}

    def progress(self) -> WorkerProgress:
        """The worker's progress now."""
        return WorkerProgress(
            self._documents,
            self.counts(),
            self._retries,
            self._pending,
            self._waiting,
            self._started,
        )

    def tell(self) -> None:
        """Hand the progress to ``on_progress``."""
        if self._on_progress is not None:
            self._on_progress(self.progress())

    def _count(self, status: OutcomeStatus, attempts: int, ref: Ref, *, again: bool) -> None:
        before = self._again.pop(ref, None)
        if before is None:  # a document this worker had not counted yet, or had done
            self._documents += 1
            self._retries += max(0, attempts - 1)
            requested = attempts > 0
        else:
            previous, requested = before
            self._counts[previous] -= 1
            self._retries += attempts if requested else max(0, attempts - 1)
            requested = requested or attempts > 0
        self._counts[status] += 1
        if again:
            self._again[ref] = (status, requested)
        elif self._pending:  # it left the outbox's backlog: counted again later
            self._pending -= 1
        self.tell()
