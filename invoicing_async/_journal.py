"""The write-ahead journal of bulk submission: append-only JSON Lines.

Two events per document::

    {"v": 1, "event": "sending", "key": "...", "index": 3, "at": "…Z"}
    {"v": 1, "event": "settled", "key": "...", "index": 3, "status": "accepted",
     "attempts": 2, "result": {…provider record…}, "error": null, "at": "…Z"}

``sending`` is written and flushed *before* a request leaves, ``settled`` after its
outcome is known, so a crash (even SIGKILL) loses at most the documents in flight, and
those are known: resuming re-sends them, and the provider's duplicate detection turns a
document that was in fact committed into a 409 with its original record.

A torn last line (the process died mid-write) is ignored. Nothing secret is written: keys
are document identities, results are the provider's records, errors their messages.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs

from ._convert import format_timestamp, outcome_to_json, result_from_json
from ._documents import dumps
from ._errors import InvoicingError
from ._outcomes import Outcome, OutcomeStatus

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["Journal", "JournalEntry"]

log = logging.getLogger("invoicing_async.batch")

_VERSION = 1
_FINAL = frozenset({OutcomeStatus.ACCEPTED, OutcomeStatus.DUPLICATE, OutcomeStatus.REJECTED})


@attrs.frozen
class JournalEntry:
    """What an earlier run recorded for one document identity."""

    key: str
    index: int
    in_flight: bool
    outcome: Outcome | None = None

    @property
    def settled(self) -> bool:
        """True when the document needs no further request (accepted, duplicate, rejected)."""
        return self.outcome is not None and self.outcome.status in _FINAL


class Journal:
    """An append-only JSON Lines journal, read back on open.

    :param path: the journal file; created if missing, appended to otherwise.
    :param fsync: also ``fsync`` after each line (survives power loss, costs a disk flush
        per document); by default lines are flushed to the OS, which survives a crash of
        the process.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._entries: dict[str, JournalEntry] = {}
        self._file: IO[str] | None = None
        if self.path.exists():
            self._read()

    def __enter__(self) -> Journal:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def open(self) -> None:
        """Open the file for appending; a torn last line is cut off first."""
        if self._file is not None:
            return
        self._truncate_torn_tail()
        self._file = self.path.open("a", encoding="utf-8")

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def get(self, key: str) -> JournalEntry | None:
        """What earlier runs recorded for ``key``, if anything."""
        return self._entries.get(key)

    def __len__(self) -> int:
        return len(self._entries)

    def sending(self, key: str, index: int) -> None:
        """Record that a request for ``key`` is about to leave."""
        self._entries[key] = JournalEntry(key, index, in_flight=True)
        self._write({"event": "sending", "key": key, "index": index})

    def settled(self, outcome: Outcome) -> None:
        """Record the outcome of ``outcome.key``."""
        self._entries[outcome.key] = JournalEntry(
            outcome.key, outcome.index, in_flight=False, outcome=outcome
        )
        self._write({"event": "settled", **outcome_to_json(outcome)})

    def _write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            raise RuntimeError("the journal is not open")
        record = {"v": _VERSION, **record, "at": format_timestamp(dt.datetime.now(dt.timezone.utc))}
        self._file.write(dumps(record).decode("utf-8") + "\n")
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())

    def _read(self) -> None:
        with self.path.open("r", encoding="utf-8", errors="replace") as file:
            for number, line in enumerate(file, 1):
                try:
                    record = json.loads(line)
                    self._apply(record)
                except (ValueError, KeyError, TypeError):  # noqa: PERF203
                    log.warning("journal %s: line %d is unreadable, ignored", self.path, number)

    def _apply(self, record: dict[str, Any]) -> None:
        key = str(record["key"])
        index = int(record["index"])
        if record["event"] == "sending":
            self._entries[key] = JournalEntry(key, index, in_flight=True)
            return
        result = record.get("result")
        error_data = record.get("error")
        error = None
        if error_data:
            error = InvoicingError(
                str(error_data.get("message", "")), status=error_data.get("status")
            )
        outcome = Outcome(
            index=index,
            key=key,
            status=OutcomeStatus(record["status"]),
            result=result_from_json(result) if isinstance(result, dict) else None,
            error=error,
            attempts=int(record.get("attempts", 0)),
        )
        self._entries[key] = JournalEntry(key, index, in_flight=False, outcome=outcome)

    def _truncate_torn_tail(self) -> None:
        """Cut a last line without its newline (a write interrupted by a crash).

        The file is scanned backwards block by block until the newline that ends the last
        whole record, however long the torn line is.
        """
        if not self.path.exists():
            return
        with self.path.open("rb+") as file:
            end = file.seek(0, os.SEEK_END)
            if end == 0:
                return
            file.seek(end - 1)
            if file.read(1) == b"\n":
                return
            position = end
            while position > 0:
                start = max(0, position - 65536)
                file.seek(start)
                block = file.read(position - start)
                newline = block.rfind(b"\n")
                if newline >= 0:
                    file.truncate(start + newline + 1)
                    return
                position = start
            file.truncate(0)  # one torn line and nothing else
