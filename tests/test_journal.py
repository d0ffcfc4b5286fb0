"""The write-ahead journal: what it records, and what it reads back after a crash."""

from __future__ import annotations

import json

from invoicing_async import Journal, Outcome, OutcomeStatus


def test_records_are_read_back_by_key(tmp_path):
    """A sending line marks a document in flight; its settled line replaces it."""
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        journal.sending("id:a", 0)
        journal.sending("id:b", 1)
        journal.settled(Outcome(index=1, key="id:b", status=OutcomeStatus.REJECTED))
    reader = Journal(path)
    assert len(reader) == 2
    assert reader.get("id:a").in_flight
    assert not reader.get("id:a").settled
    assert reader.get("id:b").settled
    assert reader.get("id:b").outcome.status is OutcomeStatus.REJECTED
    assert reader.get("id:c") is None


def test_unreadable_lines_are_skipped(tmp_path):
    """A line that is not a journal record is ignored; the records around it count."""
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        journal.sending("id:a", 0)
    with path.open("a", encoding="utf-8") as file:
        file.write("not json\n")
    with Journal(path) as journal:
        journal.sending("id:b", 1)
    reader = Journal(path)
    assert reader.get("id:a") is not None
    assert reader.get("id:b") is not None


def test_torn_tail_longer_than_64k_is_cut_at_its_own_start(tmp_path):
    """A torn last line longer than the 64 KiB the journal looks back is cut at its own
    start: the next run's first line starts on a fresh line and is read back.
    """
    path = tmp_path / "journal.jsonl"
    with Journal(path) as journal:
        journal.sending("id:first", 0)
    with path.open("a", encoding="utf-8") as file:
        # A settled line with a large provider record, torn by the kill.
        file.write('{"v":1,"event":"settled","key":"id:big","result":{"x":"' + "y" * 100_000)
    with Journal(path) as journal:
        journal.sending("id:second", 1)  # then the process dies again, in flight
    reader = Journal(path)
    assert reader.get("id:first") is not None
    second = reader.get("id:second")
    assert second is not None, "the sending line was merged into the torn tail"
    assert second.in_flight
    for line in path.read_text(encoding="utf-8").splitlines():
        json.loads(line)  # nothing torn is left
    with Journal(path) as journal:
        journal.settled(Outcome(index=1, key="id:second", status=OutcomeStatus.ACCEPTED))
    assert Journal(path).get("id:second").settled
