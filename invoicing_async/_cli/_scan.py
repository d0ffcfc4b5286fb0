"""JSON values from a text read a piece at a time, in memory bounded by the largest.

The command's readers (:mod:`._input`) never hold a whole input: :class:`Scanner` parses
the value (or each element of the array) at the front of a window of the text with
``json``'s own decoder, reading more when a value is cut by the window's end, and skips a
value longer than the limit without holding it (:class:`Skipping`: strings and nesting
followed, not checked), giving its size. Lines and columns are counted as the window
moves, so an error says where it is. :class:`Bounds` carries the limit and the deadline
every reader checks.
"""

from __future__ import annotations

import json
import re
import time
from typing import IO, TYPE_CHECKING, Any

import attrs

from invoicing_async._binding import DECODER
from invoicing_async._documents import utf8_size

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "READ",
    "SKIP",
    "Bounds",
    "DeadlinePassed",
    "Invalid",
    "Scanner",
    "TooLarge",
    "skip_line",
    "values",
]

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = DECODER  # a name written twice with different values is kept (_binding)
#: Characters read at a time; a value that is not complete yet doubles it.
READ = 1 << 16
#: Characters read at a time while skipping a document larger than the limit.
SKIP = 1 << 20
#: What a skipped value's structure is made of, and what ends a number or a literal.
_STRUCTURE = re.compile(r'["\[\]{}]')
_SCALAR_END = re.compile(r"[\s,\]}]")
#: What may follow a number's prefix at the end of the window (and be the rest of it).
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*")
#: How close to the end of what was read a decoding error may be and still mean only
#: "read more" ("Expecting value" at a cut ``tru``, an escape cut after ``\u12`` …).
_NEAR_END = 16


class DeadlinePassed(Exception):  # noqa: N818  (a signal to stop, not an error)
    """The deadline passed while reading, at ``line``: what is left is not read."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class Invalid(Exception):  # noqa: N818  (becomes an Unreadable)
    """A JSON text that is not valid: what is wrong, and where."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


@attrs.frozen
class Bounds:
    """How much one document may take, and until when (on ``clock``) reading may go on."""

    max_size: int
    deadline: float | None = None
    clock: Callable[[], float] = time.monotonic

    def check(self, line: int) -> None:
        """Raise :class:`DeadlinePassed` (at ``line``) once the deadline has passed."""
        if self.deadline is not None and self.clock() >= self.deadline:
            raise DeadlinePassed(line)


@attrs.frozen
class TooLarge:
    """A value larger than the limit, skipped: its size and what its first character says."""

    size: int
    kind: str


def _first_kind(first: str) -> str:
    """The kind of a value from its first character (of a value too large to parse)."""
    kinds = {"{": "dict", "[": "an array", '"': "a string", "n": "null"}
    return kinds.get(first, "a boolean" if first in "tf" else "a number")


def skip_line(file: IO[str], bounds: Bounds, number: int) -> int:
    """Read past the rest of a line, a piece at a time: its size in bytes."""
    size = 0
    while True:
        bounds.check(number)
        part = file.readline(SKIP)
        if not part:
            return size
        if part.endswith("\n"):
            return size + utf8_size(part.rstrip("\r\n"))
        size += utf8_size(part)


class Scanner:
    """A JSON text read a piece at a time, its values parsed from a bounded window.

    ``text`` holds what was read and not yet consumed (from ``pos``); line and column
    numbers are counted as the window moves, so an error anywhere says where it is.
    """

    def __init__(self, file: IO[str], bounds: Bounds) -> None:
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
        if self.pos > READ:
            self._drop(self.pos)
        chunk = self._file.read(size)
        if not chunk:
            self.eof = True
            return False
        self.text += chunk
        return True

    def invalid(self, message: str, position: int) -> Invalid:
        """The error for ``message`` at ``position``, with its line and column."""
        return Invalid(message, self.line_at(position), self.column_at(position))

    # -- reading --

    def skip_whitespace(self) -> str:
        """Move past whitespace; the next character, or ``""`` at the end."""
        while True:
            match = _WHITESPACE.match(self.text, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self._read(READ):
                return ""

    def value(self) -> Any:
        """The value at ``pos`` (after whitespace), or :class:`TooLarge` when skipped.

        :raises Invalid: not valid JSON.
        """
        start, want = self.pos, READ
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
                self._read(max(READ, min(want, self._bounds.max_size + 1 - have)))
                want *= 2
                start = self.pos  # the window may have moved
                continue
            if (
                not self.eof
                and len(self.text) - end < _NEAR_END
                and _NUMBER_TAIL.fullmatch(self.text, end)
            ):  # a number may go on past the window: "0." of "0.5", "12" of "123"
                self._read(READ)
                start = self.pos
                continue
            size = end - start
            if size > self._bounds.max_size // 4:  # else its bytes cannot exceed the limit
                size = utf8_size(self.text[start:end])
            self.pos = end
            if size > self._bounds.max_size:
                return TooLarge(size, _first_kind(self.text[start]))
            return value

    def _skip(self, start: int) -> TooLarge:
        """Move past the value at ``start`` without holding it: its size and kind.

        The text is read a megabyte at a time and forgotten as it is scanned.

        :raises Invalid: the text ends inside the value.
        """
        line, first = self.line_at(start), self.text[start]
        skipping = Skipping(scalar=first not in '{["')
        size = 0
        while True:
            end = skipping.end_in(self.text, start)
            if end is not None:
                self.pos = end
                return TooLarge(size + utf8_size(self.text[start:end]), _first_kind(first))
            size += utf8_size(self.text[start:])
            self.pos = len(self.text)
            self._drop(self.pos)
            start = 0
            self._bounds.check(line)
            if not self._read(SKIP):
                if skipping.scalar:  # a number at the very end of the text
                    return TooLarge(size, _first_kind(first))
                raise Invalid("Unterminated value larger than the limit", line, 1)


@attrs.define
class Skipping:
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


def values(scanner: Scanner) -> Iterator[tuple[int, Any]]:
    """``(line, value or TooLarge)`` for the value of a JSON text, or its array's elements.

    Nothing may follow it but whitespace.

    :raises Invalid: where the text stops being valid JSON.
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
