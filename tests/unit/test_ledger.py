"""The SQLite ledger: its file, its lock, its failures, and the finality rules (pure)."""

from __future__ import annotations

import stat

import pytest

from invoicing_async import (
    AuthenticationError,
    Ledger,
    LedgerError,
    Outcome,
    OutcomeStatus,
    TransportError,
    UnknownOutcomeError,
    ValidationError,
)
from invoicing_async._core.entries import decide, is_final, requeue
from invoicing_async._send.journal import Ref


def outcome(status, error=None, attempts=1):
    return Outcome(index=0, key="id:a", status=status, error=error, attempts=attempts)


async def test_files_are_created_readable_by_the_owner_only(tmp_path):
    """The ledger holds VAT numbers, marks and authentication codes: the file, its WAL
    and its lock file are created 0600 whatever the umask allows."""
    path = tmp_path / "batch.db"
    async with Ledger(path) as ledger:
        await ledger._acquire()
        await ledger._sending(Ref("", "id:a"))
        for file in tmp_path.iterdir():
            assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
        ledger._release()


async def test_a_second_sender_on_one_ledger_is_refused_at_once(tmp_path):
    """Two senders on one ledger would send every document twice: the second gets a
    typed LedgerError (reason locked) immediately; readers are not refused."""
    path = tmp_path / "batch.db"
    first = Ledger(path)
    await first._acquire()
    second = Ledger(path)
    with pytest.raises(LedgerError, match="in use by another batch of this process") as caught:
        await second._acquire()
    assert caught.value.reason == "locked"
    async with Ledger(path) as reader:
        assert await reader.counts() == {}
    first._release()
    await second._acquire()  # free again once the first sender is done
    second._release()
    await first.close()
    await second.close()


async def test_a_file_that_is_not_a_ledger_is_refused_clearly(tmp_path):
    """An old JSON Lines journal (or any other file) is not read as a ledger."""
    path = tmp_path / "old.jsonl"
    path.write_text('{"v":1,"event":"sending","key":"id:a","index":0}\n' * 100)
    with pytest.raises(LedgerError, match="is not a ledger") as caught:
        await Ledger(path).open()
    assert caught.value.reason == "unreadable"


async def test_records_survive_reopening_and_can_be_listed_retried_forgotten(tmp_path):
    """What a ledger records is read back after reopening; retry marks an entry pending
    (keeping that it may be committed), forget deletes it."""
    path = tmp_path / "batch.db"
    async with Ledger(path) as ledger:
        await ledger._sending(Ref("", "id:a"))
        await ledger._sending(Ref("", "id:b"))
        ledger._settled(outcome(OutcomeStatus.ACCEPTED), None)
    async with Ledger(path) as ledger:
        a, b = await ledger.get("id:a"), await ledger.get("id:b")
        assert a.status is OutcomeStatus.ACCEPTED
        assert a.final
        assert b.status == "in_flight"
        assert b.maybe_committed
        assert [e.key async for e in ledger.entries("in_flight")] == ["id:b"]
        assert await ledger.counts() == {"accepted": 1, "in_flight": 1}
        assert await ledger.retry(["id:a"]) == 1
        assert (await ledger.get("id:a")).status == "pending"
        assert await ledger.forget(["id:b", "id:zzz"]) == 1
        assert await ledger.get("id:b") is None


async def test_a_recorded_outcome_reads_back_with_the_same_record(tmp_path):
    """What a resumed batch replays is the record the provider gave: the ledger stores
    the outcome in outcome_to_dict's form and reads it back equal, whatever its record
    holds (here one built with only a raw status, as a test double might)."""
    from invoicing_async import DocumentResult  # noqa: PLC0415

    record = DocumentResult(
        mark=400001, uid="AB12", raw_status="Pending", extra={"note": "ünïcode"},
        authority_data_response={"statusCode": "Success", "index": 1},
    )  # fmt: skip
    recorded = Outcome(
        index=4, key="id:a", status=OutcomeStatus.ACCEPTED, result=record, attempts=2
    )
    async with Ledger(tmp_path / "batch.db") as ledger:
        ledger._settled(recorded, None)
    async with Ledger(tmp_path / "batch.db") as ledger:
        entry = await ledger.get("id:a")
    assert entry.outcome == recorded
    assert entry.outcome.result.status is recorded.result.status
    assert entry.final


def test_only_held_documents_and_definite_refusals_of_this_content_are_final():
    """Accepted/duplicate are final; a 400 is final only with its content's fingerprint;
    a 401/403, a local refusal, not_sent and unknown never are."""
    refused = ValidationError("bad", status=400)
    assert is_final(outcome(OutcomeStatus.ACCEPTED), None)
    assert is_final(outcome(OutcomeStatus.DUPLICATE), None)
    assert is_final(outcome(OutcomeStatus.REJECTED, refused), "f1")
    assert not is_final(outcome(OutcomeStatus.REJECTED, refused), None)
    assert not is_final(
        outcome(OutcomeStatus.REJECTED, AuthenticationError("vat", status=401)), "f1"
    )
    assert not is_final(outcome(OutcomeStatus.REJECTED, ValidationError("local")), "f1")
    assert not is_final(outcome(OutcomeStatus.NOT_SENT, TransportError("x", maybe_sent=False)), "f")
    unknown = UnknownOutcomeError("?", last_error=TransportError("x", maybe_sent=True), attempts=1)
    assert not is_final(outcome(OutcomeStatus.UNKNOWN, unknown), "f")
    assert requeue(outcome(OutcomeStatus.UNKNOWN, unknown), final=False, resend_ambiguous=True)
    assert not requeue(outcome(OutcomeStatus.UNKNOWN, unknown), final=False, resend_ambiguous=False)


async def test_decide_reports_unknown_without_resending_when_the_policy_forbids(tmp_path):
    """An entry in flight (a crash) or unknown is re-sent as maybe committed only when
    ambiguous re-sends are allowed; otherwise it is reported unknown, not sent."""
    async with Ledger(tmp_path / "batch.db") as ledger:
        await ledger._sending(Ref("", "id:a"))
        entry = await ledger.get("id:a")
    verdict = decide(entry, resend_ambiguous=False)
    assert verdict.replay.status is OutcomeStatus.UNKNOWN
    assert verdict.replay.attempts == 0
    verdict = decide(entry, resend_ambiguous=True)
    assert verdict.replay is None
    assert verdict.maybe_committed


@pytest.fixture
def connections(monkeypatch):
    """Every SQLite connection opened during the test (the ledger's own included)."""
    import sqlite3  # noqa: PLC0415

    opened = []
    real = sqlite3.connect

    def connect(*args, **kwargs):
        connection = real(*args, **kwargs)
        opened.append(connection)
        return connection

    monkeypatch.setattr(sqlite3, "connect", connect)
    return opened


def left_open(connections) -> list:
    import sqlite3  # noqa: PLC0415

    still = []
    for connection in connections:
        try:
            connection.execute("SELECT 1")
        except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
            continue
        still.append(connection)
    return still


async def test_a_refused_file_is_not_held_open(tmp_path, connections):
    """A file refused as not a ledger leaves no SQLite connection open (a leak Python
    3.13 reports as an unclosed database, whenever the garbage collector finds it)."""
    path = tmp_path / "old.jsonl"
    path.write_text('{"v":1,"event":"sending","key":"id:a","index":0}\n' * 100)
    with pytest.raises(LedgerError, match="is not a ledger"):
        await Ledger(path).open()
    assert connections
    assert left_open(connections) == []


async def test_a_new_ledger_on_a_full_disk_says_so_and_is_not_held_open(tiny_tmpfs, connections):
    """A ledger created on a disk that is already full: LedgerError write_failed saying
    the disk is full (not "not a ledger"), and no SQLite connection left open."""
    import errno  # noqa: PLC0415

    with pytest.raises(OSError) as filled:  # 1 MiB on the 192 KiB tmpfs
        (tiny_tmpfs / "filler").write_bytes(b"\0" * (1 << 20))
    assert filled.value.errno == errno.ENOSPC
    with pytest.raises(LedgerError) as caught:
        await Ledger(tiny_tmpfs / "batch.db").open()
    assert caught.value.reason == "write_failed"
    assert "disk is full" in str(caught.value)
    assert "not a ledger" not in str(caught.value)
    assert left_open(connections) == []


@pytest.mark.parametrize("resend_ambiguous", [True, False])
async def test_an_outcome_recorded_before_a_request_leaves_is_durable_when_it_leaves(
    tmp_path, resend_ambiguous
):
    """Whatever was settled before a document's before_send is committed by the time
    before_send returns, also when the document's sending record was committed long
    before (read ahead): after a crash, the answers lost are those in flight only."""
    import ledgertools  # noqa: PLC0415

    from invoicing_async._durable.ledger import ledger_journal  # noqa: PLC0415

    path = tmp_path / "batch.db"
    async with ledger_journal(path, resend_ambiguous=resend_ambiguous) as j:
        await j.lookup([Ref("", "id:a"), Ref("", "id:b")])  # b's sending record may go ahead now
        await j.before_send(Ref("", "id:a"))
        j.after_outcome(
            Outcome(index=0, key="id:a", status=OutcomeStatus.ACCEPTED, attempts=1), None
        )
        await j.before_send(Ref("", "id:b"))
        assert ledgertools.rows(path)["id:a"]["state"] == "done"
