"""Documents from files, directories and stdin, each with its source (file, line).

A document is a JSON object. A source holds one object, an array of objects (``.json``),
or one object per line (JSON Lines: ``.jsonl``, ``.ndjson``); standard input and other
file names are recognised by their first line. Whatever cannot be read becomes an
:class:`Unreadable` that says what is wrong, where (file, line, column), so it gets its
own outcome and never stops the documents around it:

- a ``.json`` file (or an array) that is not valid JSON is one unreadable entry at the
  error's line and column; none of its documents is sent, since the file is broken;
- a JSON Lines line that is not valid JSON is one unreadable entry; the other lines go;
- a value that is not an object (``"text"``, ``3``, ``null``) is never sent: it is
  unreadable, and an array holding no object at all (``[1, 2, 3]``) is one unreadable
  entry for the file, not three documents.

Input is read as a stream, and memory follows the largest document taken (``max_size``
bytes of JSON text), never the input: a JSON Lines line is read up to that size, an
array one element at a time (:class:`_Scanner`, over ``json``'s own decoder on a window
of the text). A document larger than ``max_size`` is skipped without being held, and is
one unreadable entry at its line, naming its size and the limit. To keep "a broken file
sends nothing" true, an array is read twice: once to check it, once to send it
(standard input that is not JSON Lines is first spooled to a temporary file).

With a ``deadline`` (a :func:`time.monotonic` instant), reading stops when it passes,
even inside a huge document: what was not read is one :class:`NotRead` entry per source,
from the line reading stopped at.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs

from invoicing_async._documents import DEFAULT_MAX_DOCUMENT_SIZE, utf8_size

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "JSON_LINES",
    "NotRead",
    "Source",
    "Unreadable",
    "UsageError",
    "count_documents",
    "read",
]

#: Suffixes read as JSON Lines; ``.json`` is one value; others are recognised.
JSON_LINES = frozenset({".jsonl", ".ndjson"})
_SUFFIXES = (".json", ".jsonl", ".ndjson")
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_KIND = {str: "a string", int: "a number", float: "a number", bool: "a boolean", list: "an array"}
_KINDS = {
    "a string": "strings",
    "a number": "numbers",
    "a boolean": "booleans",
    "an array": "arrays",
}
#: Characters read at a time; a value that is not complete yet doubles it.
_READ = 1 << 16
#: Characters read at a time while skipping a document larger than the limit.
_SKIP = 1 << 20
#: What a skipped value's structure is made of, and what ends a number or a literal.
_STRUCTURE = re.compile(r'["\[\]{}]')
_SCALAR_END = re.compile(r"[\s,\]}]")
#: What may follow a number's prefix at the end of the window (and be the rest of it).
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*")
#: How close to the end of what was read a decoding error may be and still mean only
#: "read more" ("Expecting value" at a cut ``tru``, an escape cut after ``\u12`` …).
_NEAR_END = 16


class UsageError(Exception):
    """Bad arguments or input: reported in one line, exit status 2."""


@attrs.frozen
class Source:
    """Where a document comes from: a file (``-`` for standard input) and a line."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def as_dict(self) -> dict[str, Any]:
        """The ``source`` member of an output record."""
        return {"file": self.file, "line": self.line}


@attrs.frozen
class Unreadable:
    """Input that is not a document: refused locally, with what is wrong and where.

    ``size`` is set for a document larger than the limit: its size in bytes.
    """

    why: str
    column: int | None = None
    size: int | None = None


@attrs.frozen
class NotRead:
    """Input left unread because the deadline passed: the rest of a source, from a line."""

    why: str


class _DeadlinePassed(Exception):  # noqa: N818  (a signal to stop, not an error)
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _Invalid(Exception):  # noqa: N818  (becomes an Unreadable)
    """A JSON text that is not valid: what is wrong, and where."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


@attrs.frozen
class _Bounds:
    """How much one document may take, and until when (on ``clock``) reading may go on."""

    max_size: int
    deadline: float | None = None
    clock: Callable[[], float] = time.monotonic

    def check(self, line: int) -> None:
        """Raise :class:`_DeadlinePassed` (at ``line``) once the deadline has passed."""
        if self.deadline is not None and self.clock() >= self.deadline:
            raise _DeadlinePassed(line)

    def too_large(self, size: int) -> Unreadable:
        why = f"the document is {size:,} bytes, more than the limit of {self.max_size:,} bytes"
        return Unreadable(why + ": not read", size=size)


@attrs.frozen
class _TooLarge:
    """A value larger than the limit, skipped: its size and what its first character says."""

    size: int
    kind: str


def _kind(value: Any) -> str:
    return "null" if value is None else _KIND.get(type(value), type(value).__name__)


def _first_kind(first: str) -> str:
    """The kind of a value from its first character (of a value too large to parse)."""
    kinds = {"{": "dict", "[": "an array", '"': "a string", "n": "null"}
    return kinds.get(first, "a boolean" if first in "tf" else "a number")


def _not_object(value: Any) -> Unreadable:
    return Unreadable(f"{_kind(value)}, not a JSON object: a document is an object")


# --- JSON Lines ---------------------------------------------------------------------------


def _lines(
    file: IO[str], bounds: _Bounds, first: int = 1, head: tuple[str, ...] = ()
) -> Iterator[tuple[int, Any]]:
    """JSON Lines: one value per non-blank line; a line over the limit is skipped unread.

    ``head``: lines read already (to recognise the format), numbered from ``first``.
    """
    cap = bounds.max_size + 1
    number = first - 1
    pending = iter(head)
    while True:
        line = next(pending, None)
        if line is None:
            line = file.readline(cap)
        if not line:
            return
        number += 1
        bounds.check(number)
        if len(line) == cap and not line.endswith("\n"):  # longer than the limit
            yield number, bounds.too_large(utf8_size(line) + _skip_line(file, bounds, number))
            continue
        if not line.strip():
            continue
        size = utf8_size(line.rstrip("\r\n"))
        if size > bounds.max_size:  # not ASCII: more bytes than characters
            yield number, bounds.too_large(size)
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, Unreadable(f"invalid JSON ({exc.msg})", exc.colno)
            continue
        yield number, value if isinstance(value, dict) else _not_object(value)


def _skip_line(file: IO[str], bounds: _Bounds, number: int) -> int:
    """Read past the rest of a line, a piece at a time: its size in bytes."""
    size = 0
    while True:
        bounds.check(number)
        part = file.readline(_SKIP)
        if not part:
            return size
        if part.endswith("\n"):
            return size + utf8_size(part.rstrip("\r\n"))
        size += utf8_size(part)


# --- one JSON value, or an array of them, from a window of the text ------------------------


class _Scanner:
    """A JSON text read a piece at a time, its values parsed from a bounded window.

    ``text`` holds what was read and not yet consumed (from ``pos``); line and column
    numbers are counted as the window moves, so an error anywhere says where it is.
    """

    def __init__(self, file: IO[str], bounds: _Bounds) -> None:
        self._file = file
        self._bounds = bounds
        self.text = ""
        self.pos = 0
        self.eof = False
        # Line and column of text[0]; newlines counted up to _counted.
        self._line = 1
        self._counted = 0
        self._column = 1

    # -- where --

    def line_at(self, position: int) -> int:
        """The line of ``position`` (never before one asked for already)."""
        self._line += self.text.count("\n", self._counted, position)
        self._counted = position
        return self._line

    def column_at(self, position: int) -> int:
        newline = self.text.rfind("\n", 0, position)
        return position - newline if newline >= 0 else self._column + position

    def _drop(self, upto: int) -> None:
        """Forget ``text[:upto]`` (consumed), keeping the line and column count."""
        self.line_at(upto)
        newline = self.text.rfind("\n", 0, upto)
        self._column = upto - newline if newline >= 0 else self._column + upto
        self.text, self.pos, self._counted = self.text[upto:], self.pos - upto, 0

    def _read(self, size: int) -> bool:
        """Read ``size`` more characters; False at the end of the text."""
        if self.pos > _READ:
            self._drop(self.pos)
        chunk = self._file.read(size)
        if not chunk:
            self.eof = True
            return False
        self.text += chunk
        return True

    def invalid(self, message: str, position: int) -> _Invalid:
        """The error for ``message`` at ``position``, with its line and column."""
        return _Invalid(message, self.line_at(position), self.column_at(position))

    # -- reading --

    def skip_whitespace(self) -> str:
        """Move past whitespace; the next character, or ``""`` at the end."""
        while True:
            match = _WHITESPACE.match(self.text, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self._read(_READ):
                return ""

    def value(self) -> Any:
        """The value at ``pos`` (after whitespace), or :class:`_TooLarge` when skipped.

        :raises _Invalid: not valid JSON.
        """
        start, want = self.pos, _READ
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, start)
            except json.JSONDecodeError as exc:
                incomplete = exc.msg.startswith("Unterminated string") or (
                    exc.pos >= len(self.text) - _NEAR_END
                )
                if self.eof or not incomplete:
                    raise self.invalid(exc.msg, exc.pos) from None
                have = len(self.text) - start
                if have > self._bounds.max_size:
                    return self._skip(start)
                self._bounds.check(self.line_at(start))
                # Twice as much each time (parsing again costs linear time in all), but
                # no more than it takes to know the value is too large.
                self._read(max(_READ, min(want, self._bounds.max_size + 1 - have)))
                want *= 2
                start = self.pos  # the window may have moved
                continue
            if (
                not self.eof
                and len(self.text) - end < _NEAR_END
                and _NUMBER_TAIL.fullmatch(self.text, end)
            ):  # a number may go on past the window: "0." of "0.5", "12" of "123"
                self._read(_READ)
                start = self.pos
                continue
            size = end - start
            if size > self._bounds.max_size // 4:  # else its bytes cannot exceed the limit
                size = utf8_size(self.text[start:end])
            self.pos = end
            if size > self._bounds.max_size:
                return _TooLarge(size, _first_kind(self.text[start]))
            return value

    def _skip(self, start: int) -> _TooLarge:
        """Move past the value at ``start`` without holding it: its size and kind.

        The text is read a megabyte at a time and forgotten as it is scanned.

        :raises _Invalid: the text ends inside the value.
        """
        line, first = self.line_at(start), self.text[start]
        skipping = _Skipping(scalar=first not in '{["')
        size = 0
        while True:
            end = skipping.end_in(self.text, start)
            if end is not None:
                self.pos = end
                return _TooLarge(size + utf8_size(self.text[start:end]), _first_kind(first))
            size += utf8_size(self.text[start:])
            self.pos = len(self.text)
            self._drop(self.pos)
            start = 0
            self._bounds.check(line)
            if not self._read(_SKIP):
                if skipping.scalar:  # a number at the very end of the text
                    return _TooLarge(size, _first_kind(first))
                raise _Invalid("Unterminated value larger than the limit", line, 1)


@attrs.define
class _Skipping:
    """How far skipping a value has come: in a string, after a backslash, how deep.

    Strings and nesting are followed, not checked: a value too large is refused whatever
    it holds.
    """

    scalar: bool
    depth: int = 0
    in_string: bool = False
    escaped: bool = False

    def end_in(self, text: str, pos: int) -> int | None:
        """Where the value ends in ``text``, scanned from ``pos``; ``None``: read on."""
        if self.escaped and pos < len(text):  # the character after a backslash ending a piece
            pos, self.escaped = pos + 1, False
        if self.scalar:  # a number or a literal: it ends before a delimiter
            match = _SCALAR_END.search(text, pos)
            return None if match is None else match.start()
        while pos < len(text):
            if self.in_string:
                pos = self._string_end(text, pos)
                if pos < 0:
                    return None
                self.in_string = False
                if self.depth == 0:
                    return pos
                continue
            match = _STRUCTURE.search(text, pos)
            if match is None:
                return None
            char, pos = match.group(), match.end()
            if char == '"':
                self.in_string = True
            else:
                self.depth += 1 if char in "[{" else -1
                if self.depth == 0:
                    return pos
        return None

    def _string_end(self, text: str, pos: int) -> int:
        """Where the string being skipped ends (after its quote), or -1: read on.

        ``str.find`` runs at memory speed over the long strings such documents hold (a
        regular expression takes ten times as long); a quote after an odd run of
        backslashes is escaped.
        """
        while (quote := text.find('"', pos)) >= 0:
            run = quote
            while run > pos and text[run - 1] == "\\":
                run -= 1
            if (quote - run) % 2 == 0:
                return quote + 1
            pos = quote + 1
        run = len(text)
        while run > pos and text[run - 1] == "\\":
            run -= 1
        self.escaped = (len(text) - run) % 2 == 1
        return -1


def _values(scanner: _Scanner) -> Iterator[tuple[int, Any]]:
    """``(line, value or _TooLarge)`` for the value of a JSON text, or its array's elements.

    Nothing may follow it but whitespace.

    :raises _Invalid: where the text stops being valid JSON.
    """
    first = scanner.skip_whitespace()
    if not first:
        return  # empty: no document (the command says so if nothing else comes)
    if first != "[":
        yield scanner.line_at(scanner.pos), scanner.value()
    else:
        scanner.pos += 1
        if scanner.skip_whitespace() == "]":
            scanner.pos += 1
        else:
            while True:
                yield scanner.line_at(scanner.pos), scanner.value()
                after = scanner.skip_whitespace()
                scanner.pos += 1
                if after == "]":
                    break
                if after != ",":
                    raise scanner.invalid("Expecting ',' delimiter", scanner.pos - 1)
                scanner.skip_whitespace()
    if scanner.skip_whitespace():
        raise scanner.invalid("Extra data after the JSON value", scanner.pos)


def _whole(opened: Callable[[], Any], bounds: _Bounds) -> Iterator[tuple[int, Any]]:
    """A text holding one JSON value: an object, or an array of objects.

    ``opened()`` opens the text from its start. An array is read once to check it (a
    broken one gives one entry, none of its documents; one without any object gives one
    entry), then again to give its elements.
    """
    with opened() as file:
        scanner = _Scanner(file, bounds)
        if scanner.skip_whitespace() != "[":  # one value (or none), given once all is read
            try:
                found = list(_values(scanner))
            except _Invalid as exc:
                yield exc.line, Unreadable(f"invalid JSON ({exc.message})", exc.column)
                return
            yield from ((line, _entry(value, bounds)) for line, value in found)
            return
        start = scanner.line_at(scanner.pos)
        kinds: set[str] = set()
        try:
            for _, value in _values(scanner):
                kinds.add(value.kind if isinstance(value, _TooLarge) else _kind(value))
        except _Invalid as exc:
            yield exc.line, Unreadable(f"invalid JSON ({exc.message})", exc.column)
            return
        except _DeadlinePassed:
            raise _DeadlinePassed(start) from None  # nothing of the array was given
    if kinds and "dict" not in kinds:
        names = " and ".join(sorted({_KINDS.get(kind, "nulls") for kind in kinds}))
        why = f"an array of {names}, not of JSON objects: a document is an object"
        yield start, Unreadable(why)
        return
    with opened() as file:
        yield from _entries(_Scanner(file, bounds), bounds)


def _entries(scanner: _Scanner, bounds: _Bounds) -> Iterator[tuple[int, Any]]:
    """Each value of ``scanner`` as :func:`_entry`; where it stops being JSON, the error."""
    try:
        for line, value in _values(scanner):
            yield line, _entry(value, bounds)
    except _Invalid as exc:
        yield exc.line, Unreadable(f"invalid JSON ({exc.message})", exc.column)


def _entry(value: Any, bounds: _Bounds) -> Any:
    """A value as a document, or its refusal: too large, or not an object."""
    if isinstance(value, _TooLarge):
        return bounds.too_large(value.size)
    return value if isinstance(value, dict) else _not_object(value)


# --- sources ------------------------------------------------------------------------------


def _recognised(
    file: IO[str], bounds: _Bounds, whole: Callable[[tuple[str, ...]], Iterator[tuple[int, Any]]]
) -> Iterator[tuple[int, Any]]:
    """A text whose format its first line tells: JSON Lines, or one JSON value.

    Blank lines first, then a first line that is a whole JSON value (or one longer than
    the limit, not an array) means JSON Lines; anything else (an array, a pretty-printed
    object) is one JSON value, read by ``whole(lines read so far)``.
    """
    cap = bounds.max_size + 1
    head: list[str] = []
    while line := file.readline(cap):
        head.append(line)
        if line.strip():
            break
    first = head[-1].strip() if head else ""
    if not first:
        return
    if not first.startswith("["):
        if len(head[-1]) == cap and not head[-1].endswith("\n"):  # a line over the limit
            yield from _lines(file, bounds, head=tuple(head))
            return
        try:
            json.loads(first)
        except json.JSONDecodeError:
            pass
        else:
            yield from _lines(file, bounds, head=tuple(head))
            return
    yield from whole(tuple(head))


@contextlib.contextmanager
def _spooled(head: tuple[str, ...], rest: IO[str], bounds: _Bounds) -> Iterator[Callable[[], Any]]:
    """Standard input copied to a temporary file: an opener of it, for :func:`_whole`."""
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="") as spool:
        spool.writelines(head)
        while chunk := rest.read(_SKIP):
            bounds.check(1)
            spool.write(chunk)

        @contextlib.contextmanager
        def opened() -> Iterator[IO[str]]:
            spool.seek(0)
            yield spool

        yield opened


def _stdin(stdin: IO[str], bounds: _Bounds) -> Iterator[tuple[int, Any]]:
    def whole(head: tuple[str, ...]) -> Iterator[tuple[int, Any]]:
        with _spooled(head, stdin, bounds) as opened:
            yield from _whole(opened, bounds)

    yield from _recognised(stdin, bounds, whole)


def _path(path: Path, bounds: _Bounds) -> Iterator[tuple[int, Any]]:
    def opened() -> IO[str]:
        return path.open(encoding="utf-8-sig")

    if path.suffix == ".json":
        yield from _whole(opened, bounds)
        return
    with opened() as file:
        if path.suffix in JSON_LINES:
            yield from _lines(file, bounds)
        else:
            yield from _recognised(file, bounds, lambda _head: _whole(opened, bounds))


def _files(source: str) -> list[Path]:
    path = Path(source)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in _SUFFIXES and p.is_file())
    if path.exists():
        return [path]
    raise UsageError(f"no such file or directory: {source}")


def read(
    sources: list[str],
    stdin: IO[str] | None = None,
    *,
    max_size: int = DEFAULT_MAX_DOCUMENT_SIZE,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[tuple[Source, Any]]:
    """``(source, document, Unreadable or NotRead)`` for every entry of ``sources`` in order.

    ``-`` is standard input. A file that cannot be opened or decoded is one unreadable
    entry; a name that does not exist is a :class:`UsageError` before anything is read.
    A document over ``max_size`` bytes is an unreadable entry, never read whole; once
    ``deadline`` (an instant of ``clock``) has passed, the rest of each source is one
    :class:`NotRead` entry.
    """
    for source in sources:
        if source != "-":
            _files(source)  # a missing name fails before anything is sent
    bounds = _Bounds(max_size, deadline, clock)
    stopped = False
    for source in sources:
        for path in [None] if source == "-" else _files(source):
            name = "-" if path is None else str(path)
            if stopped:
                yield Source(name, 1), NotRead(_DEADLINE)
                continue
            entries = _stdin(stdin or sys.stdin, bounds) if path is None else _path(path, bounds)
            try:
                for line, value in entries:
                    yield Source(name, line), value
            except _DeadlinePassed as exc:
                stopped = True
                yield Source(name, exc.line), NotRead(_DEADLINE)
            except UnicodeDecodeError as exc:
                yield Source(name, 1), Unreadable(f"not UTF-8 text (byte {exc.start})")
            except OSError as exc:
                yield Source(name, 1), Unreadable(f"cannot read: {exc.strerror or exc}")


_DEADLINE = "the deadline passed before it was read"


def count_documents(
    sources: list[str], *, max_size: int = DEFAULT_MAX_DOCUMENT_SIZE, deadline: float | None = None
) -> int | None:
    """How many entries :func:`read` will give, for a progress bar.

    ``None`` for standard input, or when the deadline passes while counting.
    """
    if "-" in sources:
        return None
    total = 0
    try:
        for _, value in read(sources, max_size=max_size, deadline=deadline):
            if isinstance(value, NotRead):
                return None
            total += 1
    except UsageError:
        return None
    return total
