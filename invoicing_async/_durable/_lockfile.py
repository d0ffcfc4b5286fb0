"""The sender's lock beside a ledger file: ``<ledger>.lock``, holding the holder's pid.

One process at a time sends from a ledger; a second is refused at once (the lock is
taken without waiting), with the pid of the one that holds it.
"""

from __future__ import annotations

import contextlib
import os
from typing import IO, TYPE_CHECKING

from invoicing_async._core.errors import LedgerError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["LockFile"]


class LockFile:
    """An exclusive lock on ``<ledger>.lock``, held while a process sends from it.

    The holder removes the file before letting go, so nothing is left beside the ledger.
    A process that opened the file just before its removal may then lock a file that
    no longer has the name: it checks that the name still leads to the file it locked,
    and starts again if not. (The database file itself cannot carry the lock: closing
    any descriptor of it would drop SQLite's own locks on it.)
    """

    def __init__(self, path: Path) -> None:
        self.path = path.with_name(path.name + ".lock")
        self._file: IO[str] | None = None

    def acquire(self, ledger: Path) -> None:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            file = os.fdopen(fd, "r+", encoding="ascii")
            try:
                _flock(file)
            except OSError:
                holder = file.read().strip() or "unknown"
                file.close()
                if holder == str(os.getpid()):
                    raise LedgerError(
                        f"the ledger {ledger} is in use by another batch of this process "
                        f"(pid {holder}): one ledger serves one batch at a time; give "
                        "concurrent batches a ledger file each, or run them one after the "
                        "other",
                        reason="locked",
                    ) from None
                raise LedgerError(
                    f"the ledger {ledger} is in use by another process (pid {holder}); two "
                    "runs on one ledger would send every document twice: wait for it to end",
                    reason="locked",
                ) from None
            if _names(self.path, file):
                break
            file.close()  # removed by the holder meanwhile: lock the new one
        file.seek(0)
        file.truncate()
        file.write(str(os.getpid()))
        file.flush()
        self._file = file

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                if _names(self.path, self._file):
                    self.path.unlink()  # still locked: no one can take it in between
            self._file.close()  # closing the descriptor releases the lock
            self._file = None


def _names(path: Path, file: IO[str]) -> bool:
    """Whether ``path`` still leads to the open ``file`` (it was not removed or replaced)."""
    try:
        return os.path.samestat(path.stat(), os.fstat(file.fileno()))
    except OSError:
        return False


def _flock(file: IO[str]) -> None:
    try:
        import fcntl  # noqa: PLC0415  (POSIX)
    except ImportError:  # pragma: no cover  (Windows)
        import msvcrt  # noqa: PLC0415

        msvcrt.locking(file.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        return
    fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
