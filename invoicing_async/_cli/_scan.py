"""JSON values from a text read a piece at a time, in memory bounded by the largest.

The command's readers (:mod:`.inputs`) never hold a whole input: :class:`Scanner` parses
the value (or each element of the array) at the front of a window of the text with
``json``'s own decoder, reading more when a value is cut by the window's end, and skips a
value longer than the limit without holding it (:class:`Skipping`: strings and nesting
followed, not checked), giving its size. Lines and columns are counted as the window
moves, so an error says where it is. :class:`Bounds` carries the limit and the deadline
every reader checks.

Valid JSON that Python does not read (nested beyond its recursion limit, a number of
more digits than it makes an integer of) is a :class:`Refused` value, the text after it
read on. Text is decoded with ``surrogateescape``: a byte that is not UTF-8 is kept as a
lone surrogate (:func:`not_utf8` finds it), so that it refuses its own document only, and
sizes are the bytes as read (:func:`input_size`).
"""

from __future__ import annotations

import json
import re
import time
from typing import IO, TYPE_CHECKING, Any

import attrs

from invoicing_async._doc.binding import DECODER
from invoicing_async._doc.checked import hostile_json
from invoicing_async._doc.document import utf8_size

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "READ",
    "SKIP",
    "Bounds",
    "DeadlinePassed",
    "Invalid",
    "Refused",
    "Scanner",
    "TooLarge",
    "input_size",
    "not_utf8",
    "refusal",
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
#: A byte that is not UTF-8, as ``surrogateescape`` decodes it.
_ESCAPED = re.compile("[\udc80-\udcff]")


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


@attrs.frozen
class Refused:
    """A value that is valid JSON but no document read: why, and the kind it starts as."""

    why: str
    kind: str
    column: int | None = None


def input_size(text: str) -> int:
    """The bytes ``text`` was read from: its UTF-8, a byte that was not counting one."""
    try:
        return utf8_size(text)
    except UnicodeEncodeError:  # a byte that is not UTF-8, decoded as a lone surrogate
        return len(text.encode("utf-8", "surrogateescape"))


def not_utf8(text: str, start: int = 0, end: int | None = None) -> tuple[str, int] | None:
    """The first byte of ``text[start:end]`` that is not UTF-8: what to say, and where."""
    found = _ESCAPED.search(text, start, len(text) if end is None else end)
    if found is None:
        return None
    return f"not UTF-8 text (byte 0x{ord(found.group()) - 0xDC00:02X})", found.start()


def refusal(text: str, error: ValueError | RecursionError) -> str:
    """Why valid JSON ``text`` is no document (see :func:`~._checked.hostile_json`).

    :raises json.JSONDecodeError: ``text`` is not JSON either.
    """
    problem = hostile_json(text, error)
    return f"{problem.field}: {problem.message}" if problem.field else problem.message


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
            return size + input_size(part.rstrip("\r\n"))
        size += input_size(part)


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
        #: Whether a byte that is not UTF-8 was read: then each value is looked at for it.
        self._escaped = False

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
        if not (self._escaped or chunk.isascii()):
            self._escaped = not_utf8(chunk) is not None
        self.text += chunk
        return True

    def invalid(self, message: str, position: int) -> Invalid:
        """The error for ``message`` at ``position``, with its line and column."""
        bad = not_utf8(self.text, position, position + 1) if self._escaped else None
        return Invalid(
            message if bad is None else bad[0], self.line_at(position), self.column_at(position)
        )

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
            except (ValueError, RecursionError) as exc:  # valid JSON Python does not read
                return self._refused(start, exc)
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
                size = input_size(self.text[start:end])
            self.pos = end
            if size > self._bounds.max_size:
                return TooLarge(size, _first_kind(self.text[start]))
            bad = not_utf8(self.text, start, end) if self._escaped else None
            if bad is not None:
                return self._not_utf8(start, *bad)
            return value

    def _not_utf8(self, start: int, why: str, position: int) -> Refused:
        """The refusal of the value at ``start`` for the byte at ``position``."""
        column: int | None = self.column_at(position)
        if self.text.count("\n", start, position):  # on a later line of the value
            why, column = f"{why} at line {self.line_at(position)}, column {column}", None
        return Refused(why, _first_kind(self.text[start]), column)

    def _refused(self, start: int, error: ValueError | RecursionError) -> Refused | TooLarge:
        """Move past the value at ``start``, which ``json`` refused with ``error``: why.

        It is read whole (up to the limit: a larger one is :class:`TooLarge`, skipped)
        to say which field is at fault.

        :raises Invalid: the value is no JSON after all, or the text ends inside it.
        """
        skipping = Skipping(scalar=self.text[start] not in '{["')
        scanned = 0  # how far past its start the value was scanned
        while (end := skipping.end_in(self.text, start + scanned)) is None:
            scanned = len(self.text) - start
            if scanned > self._bounds.max_size:
                return self._skip(start)
            self._bounds.check(self.line_at(start))
            more = self._read(max(READ, scanned))  # twice as much each time: linear in all
            start = self.pos  # the window may have moved
            if not more:
                if not skipping.scalar:
                    raise self.invalid("Unterminated value", start)
                end = len(self.text)
                break
        text = self.text[start:end]
        if input_size(text) > self._bounds.max_size:
            return self._skip(start)
        try:
            why = refusal(text, error)
        except json.JSONDecodeError as exc:
            raise self.invalid(exc.msg, start + exc.pos) from None
        self.pos = end
        return Refused(why, _first_kind(text[0]))

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
                return TooLarge(size + input_size(self.text[start:end]), _first_kind(first))
            size += input_size(self.text[start:])
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
