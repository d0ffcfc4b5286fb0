"""A credentials file read safely: its two formats, and errors that show no value.

A file of ``{tin: api_key}`` (see :mod:`._credentials` for where the command takes it):

* JSON: one object, ``{"094019245": "API key", ...}`` (a file whose first character
  other than white space is ``{`` or ``[`` is read as JSON);
* CSV: one issuer a line, ``TIN,API key`` (quoted as CSV quotes, if need be); blank
  lines, lines starting with ``#`` and a first line naming the columns (its first
  column ``tin``, ``client_id``, ``issuer`` or ``vat``) are skipped.

Reading never waits for anyone: the file is opened non-blocking and must be a regular
file (a named pipe put in its place would wait for a writer forever), of
:data:`MAX_FILE_SIZE` bytes at most. The file holds secrets, and a key may stand where
a TIN goes (the columns swapped): an error names the file and where each problem is — a
line and column (a CSV file's column is its field) — and what is wrong there, never a
value of the file. A file that other users may read is read with a WARNING saying how
to close it.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from invoicing_async._core.log import auth as log

__all__ = [
    "MAX_FILE_SIZE",
    "Stamp",
    "complete",
    "parse_credentials",
    "read_credentials",
    "read_file",
    "stamp_of",
]

#: The largest credentials file read, in bytes (about 800,000 issuers).
MAX_FILE_SIZE = 64 * 1024 * 1024
#: What tells one version of a file from the next: device, inode, size, change times.
Stamp = tuple[int, int, int, int, int]
#: What the first column of a CSV file's header line may be called.
_HEADERS = frozenset({"tin", "client_id", "issuer", "vat"})
#: Problems an error lists at most (then how many more).
_LISTED = 20
_CHUNK = 1 << 20
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def read_credentials(path: str | Path) -> dict[str, str]:
    """The ``{tin: api_key}`` of a credentials file (see the module docstring).

    The file is read as it is now: see :class:`~._credfile.CredentialsFile` for a file
    read again while it may be being written. A file that users other than its owner
    may read is read, with a WARNING.

    :raises ValueError: the file cannot be read or is malformed: the message names the
        file and where each problem is (line and column), never a value of the file.
    """
    source = Path(path)
    data, before, after = read_file(source)
    if before != after:
        raise ValueError(f"the credentials file {source} changed while it was read")
    return parse_credentials(source, data)


def read_file(source: Path, *, limit: int = MAX_FILE_SIZE) -> tuple[bytes, Stamp, Stamp]:
    """The bytes of a regular file, and its stamp before and after they were read.

    Opened without waiting for anyone: a named pipe (or a symbolic link to one) would
    wait for a writer forever, so what is not a regular file is refused once opened
    (``fstat``), as is a file larger than ``limit`` bytes. Two different stamps: the
    file changed while it was read.

    :raises ValueError: it cannot be opened or read, is not a regular file, or is too
        large; the message names the file.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(source, flags)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ValueError(f"cannot read the credentials file {source}: {reason}") from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise ValueError(
                f"the credentials file {source} is not a regular file (a named pipe, a "
                "device or a directory): it is not read"
            )
        _warn_if_shared(source, stat.S_IMODE(found.st_mode))
        chunks: list[bytes] = []
        size = 0
        while size <= limit and (chunk := os.read(fd, min(_CHUNK, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise ValueError(
                f"the credentials file {source} is larger than {limit:,} bytes: it is not read"
            )
        return b"".join(chunks), stamp_of(found), stamp_of(os.fstat(fd))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ValueError(f"cannot read the credentials file {source}: {reason}") from None
    finally:
        os.close(fd)


def stamp_of(found: os.stat_result) -> Stamp:
    """What tells one version of a file from the next: device, inode, size, change times."""
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def parse_credentials(source: Path, data: bytes) -> dict[str, str]:
    """The ``{tin: api_key}`` of a credentials file's bytes (``source`` names it).

    Every problem is found, each named by where it is (a CSV file's line and column, the
    column a field; a JSON file's line and column, a character), never by a value: a
    key written where a TIN goes must not be printed.

    :raises ValueError: the bytes are malformed, or name no issuer.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(f"the credentials file {source} line {line}: not UTF-8 text") from None
    problems = _Problems()
    json_text = text.lstrip()[:1] in ("{", "[")
    found = _from_json(text, problems) if json_text else _from_csv(text, problems)
    if problems:
        raise ValueError(f"the credentials file {source} {problems}")
    if not found:
        raise ValueError(f"the credentials file {source} names no issuer")
    return found


def complete(data: bytes) -> bool:
    """Whether a file's bytes may be whole: JSON ends itself; CSV lines end in a newline."""
    start = data.removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
    return start in (b"{", b"[", b"") or data.endswith((b"\n", b"\r"))


class _Problems:
    """What is wrong in a file: the first ``_LISTED`` said, the others counted."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self.more = 0

    def __bool__(self) -> bool:
        return bool(self.said)

    def __str__(self) -> str:
        more = [f"and {self.more:,} more"] if self.more else []
        return "; ".join([*self.said, *more])

    def add(self, problem: str) -> None:
        if len(self.said) < _LISTED:
            self.said.append(problem)
        else:
            self.more += 1


class _Where:
    """``line L, column C`` of positions in a text, asked in increasing order.

    Each answer counts only the newlines since the last: linear in the text, however
    many positions are asked about.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._at = 0
        self._line = 1
        self._start = 0  # where the line of ``_at`` starts

    def __call__(self, position: int) -> str:
        newlines = self._text.count("\n", self._at, position)
        if newlines:
            self._line += newlines
            self._start = self._text.rfind("\n", self._at, position) + 1
        self._at = position
        return f"line {self._line}, column {position - self._start + 1}"


class _Malformed(Exception):  # noqa: N818  (internal: ends the reading of a JSON file)
    pass


def _from_json(text: str, problems: _Problems) -> dict[str, str]:
    """The members of a JSON object, each checked where it stands."""
    reader = _JsonObject(text, problems)
    try:
        reader.read()
    except _Malformed as exc:
        problems.add(str(exc))
    return reader.found


class _JsonObject:
    """Reads one JSON object of TIN to API key, member by member, knowing where each is."""

    def __init__(self, text: str, problems: _Problems) -> None:
        self._text = text
        self._where = _Where(text)
        self._problems = problems
        self.found: dict[str, str] = {}
        self._first: dict[str, str] = {}  # where each TIN first appears

    def read(self) -> None:
        text, where = self._text, self._where
        at = self._space(0)
        if text[at : at + 1] == "[":
            raise _Malformed(f"{where(at)}: a JSON object of TIN to API key, not an array")
        at = self._expect(at, "{")
        more = text[at : at + 1] != "}"
        while more:
            if text[at : at + 1] != '"':
                raise _Malformed(f"{where(at)}: a TIN (a string in double quotes) expected")
            tin_at = at
            tin, at = self._value(at)
            key_at = self._expect(self._space(at), ":")
            key, at = self._value(key_at)
            self._member(str(tin), where(tin_at), key, where(key_at))
            at = self._space(at)
            more = text[at : at + 1] == ","
            if more:
                at = self._space(at + 1)
        at = self._expect(at, "}")
        if at != len(text):
            raise _Malformed(f"{where(at)}: nothing may follow the object")

    def _space(self, at: int) -> int:
        return _SPACE.match(self._text, at).end()  # type: ignore[union-attr]

    def _expect(self, at: int, what: str) -> int:
        if self._text[at : at + len(what)] != what:
            raise _Malformed(f"{self._where(at)}: {what!r} expected")
        return self._space(at + len(what))

    def _value(self, at: int) -> tuple[Any, int]:
        """The JSON value at ``at``, and where it ends."""
        try:
            return _DECODER.raw_decode(self._text, at)
        except json.JSONDecodeError as exc:  # its message holds a position, no value
            raise _Malformed(f"line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise _Malformed(f"{self._where(at)}: a value nested too deeply") from None

    def _member(self, tin: str, tin_at: str, key: Any, key_at: str) -> None:
        """One member ``tin: key``: kept, or a problem said where it is."""
        problems = self._problems
        if not tin:
            problems.add(f"{tin_at}: the TIN is empty")
        elif tin != tin.strip():
            problems.add(f"{tin_at}: spaces around the TIN")
        elif not isinstance(key, str):
            problems.add(f"{key_at}: the API key is not a string")
        elif not key:
            problems.add(f"{key_at}: the API key is empty")
        elif key != key.strip():
            problems.add(f"{key_at}: spaces around the API key")
        elif self.found.get(tin, key) != key:
            problems.add(f"{tin_at}: the TIN of {self._first[tin]} again, with another API key")
        else:
            self.found[tin] = key
            self._first.setdefault(tin, tin_at)


def _from_csv(text: str, problems: _Problems) -> dict[str, str]:
    found: dict[str, str] = {}
    first: dict[str, int] = {}  # the line where each TIN first appears
    rows = csv.reader(io.StringIO(text, newline=""))
    line = 0
    try:
        for row in rows:
            line = rows.line_num
            fields = [field.strip() for field in row]
            if not any(fields) or fields[0].startswith("#"):
                continue
            if line == 1 and fields[0].lower() in _HEADERS:
                continue
            if len(fields) != 2:
                problems.add(f"line {line}: expected TIN,API key (2 fields, found {len(fields)})")
                continue
            tin, key = fields
            if not tin:
                problems.add(f"line {line}, column 1: the TIN is empty")
            elif not key:
                problems.add(f"line {line}, column 2: the API key is empty")
            elif found.get(tin, key) != key:
                problems.add(
                    f"line {line}, column 1: the TIN of line {first[tin]} again, with "
                    "another API key"
                )
            else:
                found[tin] = key
                first.setdefault(tin, line)
    except csv.Error as exc:  # a quote left open: csv's message holds no field
        problems.add(f"line {rows.line_num or line + 1}: {exc}")
    return found


_warned: set[tuple[str, int]] = set()


def _warn_if_shared(source: Path, mode: int) -> None:
    """One WARNING (per file and mode) when users other than the owner may read it."""
    if os.name != "posix" or not mode & 0o077 or (str(source), mode) in _warned:
        return
    _warned.add((str(source), mode))
    log.warning(
        "the credentials file %s can be read by other users (mode %04o): it holds API "
        "keys; make it readable by its owner only: chmod 600 %s",
        source,
        mode,
        source,
    )
