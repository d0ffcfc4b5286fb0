"""An outbox worker's counts are of documents (issue 38, part E), and say so in words.

:class:`~invoicing_async._client.progress.Documents` counts each document once, by its latest
outcome, the requests after a document's first as retries; the command's summary and
progress line (``_cli.output``) say it as ``submit`` does.
"""

from __future__ import annotations

import io

from invoicing_async import Outcome, OutcomeStatus
from invoicing_async._cli.output import WorkerReport, documents_line, worker_line
from invoicing_async._client.progress import Documents, WorkerProgress

A, N, U = OutcomeStatus.ACCEPTED, OutcomeStatus.NOT_SENT, OutcomeStatus.UNKNOWN


def outcome(key: str, status: OutcomeStatus, attempts: int = 1) -> Outcome:
    return Outcome(index=0, key=key, issuer="123456789", status=status, attempts=attempts)


def test_a_document_sent_back_three_times_then_accepted_counts_once_accepted():
    """Three rounds ``not_sent`` (one request each, the entry back in the outbox), then
    accepted: one document, accepted, three retries (before: '3 not_sent, 1 accepted',
    outcomes counted as documents). Other documents count apart."""
    seen: list[WorkerProgress] = []
    documents = Documents(seen.append)
    for _ in range(3):
        documents.settled(outcome("a", N), again=True)
    documents.settled(outcome("a", A), again=False)
    documents.settled(outcome("b", A, attempts=3), again=False)  # two retries in its round
    progress = documents.progress()
    assert documents.counts() == {A: 2}
    assert (progress.documents, progress.retries, progress.sent) == (2, 5, 2)
    assert seen[-1] == progress
    assert documents_line(progress) == "2 documents: 2 accepted (5 retries)"


def test_a_round_without_a_request_is_no_retry_and_an_entry_put_back_is_not_sent():
    """A round that sent nothing (no credentials, the token never came) costs no retry;
    an entry put back untouched as the worker stops counts not sent, once, and moves a
    document counted before to not sent."""
    documents = Documents()
    documents.settled(outcome("a", N, attempts=0), again=True)
    documents.settled(outcome("a", A), again=False)
    documents.settled(outcome("b", U), again=True)
    documents.put_back(outcome("b", U))
    documents.put_back(outcome("c", N, attempts=0))
    progress = documents.progress()
    assert documents.counts() == {A: 1, N: 2}
    assert (progress.documents, progress.retries, progress.sent) == (3, 0, 1)
    assert documents_line(progress) == "3 documents: 1 accepted, 2 not sent"


def test_the_pending_count_falls_with_each_document_done_until_counted_again():
    """The outbox's pending entries, as last counted, less the documents finished since."""
    documents = Documents(lambda _progress: None)
    documents.pending(10)
    documents.settled(outcome("a", A), again=False)
    documents.settled(outcome("b", N), again=True)  # back in the outbox: still pending
    assert documents.progress().pending == 9
    documents.pending(4)  # counted again: another worker sent some
    assert documents.progress().pending == 4


def test_the_progress_line_says_pending_sent_and_accepted():
    """What a worker's progress line says, and that the summary of none says so."""
    progress = WorkerProgress(
        documents=12, counts={A: 9, OutcomeStatus.REJECTED: 1, N: 2}, retries=1, pending=30
    )
    assert worker_line(progress) == (
        "worker: 30 pending, 10 sent, 9 accepted, 1 rejected, 2 not sent, 1 retry"
    )
    assert worker_line(WorkerProgress()) == "worker: 0 sent, 0 accepted"
    waiting = WorkerProgress(waiting="the outbox database is unavailable (refused)")
    assert worker_line(waiting).endswith("; waiting: the outbox database is unavailable (refused)")
    assert documents_line(WorkerProgress()) == "no documents"
    assert documents_line(WorkerProgress(documents=1, counts={A: 1})) == "1 document: 1 accepted"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_worker_draws_the_bar_of_submit(monkeypatch):
    """On a terminal the worker's progress is ``submit``'s bar, documents done of those
    done and pending; ``--progress-every 0`` draws nothing."""
    monkeypatch.setenv("COLUMNS", "120")
    screen = Terminal()
    report = WorkerReport(5.0, screen)
    report.update(WorkerProgress(documents=3, counts={A: 2, N: 1}, retries=1, pending=7))
    report.close()
    drawn = screen.getvalue()
    assert "3/10 30%" in drawn, drawn
    assert "ok 2 not sent 1" in drawn, drawn
    assert drawn.endswith("\n")
    quiet = Terminal()
    silent = WorkerReport(0, quiet)
    silent.update(WorkerProgress(documents=1, counts={A: 1}))
    silent.close()
    assert quiet.getvalue() == ""
