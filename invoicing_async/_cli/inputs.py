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
  entry for the file, not three documents;
- a document that is valid JSON but not read (nested beyond Python's recursion limit, a
  number of more digits than Python makes an integer of: its field named) or that holds a
  byte that is not UTF-8 (its column named) is one unreadable entry; the others go.

Input is read as a stream, and memory follows the largest document taken (``max_size``
bytes of JSON text), never the input: a JSON Lines line is read up to that size, an
array one element at a time (:class:`Scanner`, over ``json``'s own decoder on a window
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
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs

from invoicing_async._doc.binding import loads
from invoicing_async._doc.document import DEFAULT_MAX_DOCUMENT_SIZE, utf8_size

from ._scan import (
    SKIP,
    Bounds,
    DeadlinePassed,
    Invalid,
    Refused,
    Scanner,
    Skipping,
    TooLarge,
    input_size,
    not_utf8,
    refusal,
    skip_line,
    values,
)

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
_KIND = {str: "a string", int: "a number", float: "a number", bool: "a boolean", list: "an array"}
_KINDS = {
    "a string": "strings",
    "a number": "numbers",
    "a boolean": "booleans",
    "an array": "arrays",
}


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

    def at(self, source: Source) -> str:
        """Where it is: ``FILE:LINE``, and ``:COLUMN`` when known."""
        return f"{source}:{self.column}" if self.column else str(source)


@attrs.frozen
class NotRead:
    """Input left unread because the deadline passed: the rest of a source, from a line."""

    why: str


def _kind(value: Any) -> str:
    return "null" if value is None else _KIND.get(type(value), type(value).__name__)


def _not_object(value: Any) -> Unreadable:
    return Unreadable(f"{_kind(value)}, not a JSON object: a document is an object")


def _too_large(bounds: Bounds, size: int) -> Unreadable:
    why = f"the document is {size:,} bytes, more than the limit of {bounds.max_size:,} bytes"
    return Unreadable(why + ": not read", size=size)


# --- JSON Lines ---------------------------------------------------------------------------


def _lines(
    file: IO[str], bounds: Bounds, first: int = 1, head: tuple[str, ...] = ()
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
            yield number, _too_large(bounds, input_size(line) + skip_line(file, bounds, number))
            continue
        if not line.strip():
            continue
        yield number, _line(line, bounds)


def _line(line: str, bounds: Bounds) -> Any:
    """The document on a line of JSON Lines (within the limit in characters), or why not."""
    body = line.rstrip("\r\n")
    bad = None
    try:
        size = utf8_size(body)
    except UnicodeEncodeError:  # a byte that is not UTF-8, decoded as a lone surrogate
        size, bad = input_size(body), not_utf8(body)
    if size > bounds.max_size:  # not ASCII: more bytes than characters
        return _too_large(bounds, size)
    if bad is not None:
        return Unreadable(bad[0], bad[1] + 1)
    try:
        value = loads(line)  # a name written twice with different values is kept
    except json.JSONDecodeError as exc:
        return Unreadable(f"invalid JSON ({exc.msg})", exc.colno)
    except (ValueError, RecursionError) as exc:  # valid JSON Python does not read
        try:
            return Unreadable(refusal(line, exc))
        except json.JSONDecodeError as again:
            return Unreadable(f"invalid JSON ({again.msg})", again.colno)
    return value if isinstance(value, dict) else _not_object(value)


# --- one JSON value, or an array of them --------------------------------------------------


def _whole(opened: Callable[[], Any], bounds: Bounds) -> Iterator[tuple[int, Any]]:
    """A text holding one JSON value: an object, or an array of objects.

    ``opened()`` opens the text from its start. An array is read once to check it (a
    broken one gives one entry, none of its documents; one without any object gives one
    entry), then again to give its elements.
    """
    with opened() as file:
        scanner = Scanner(file, bounds)
        if scanner.skip_whitespace() != "[":  # one value (or none), given once all is read
            try:
                found = list(values(scanner))
            except Invalid as exc:
                yield exc.line, Unreadable(f"invalid JSON ({exc.message})", exc.column)
                return
            yield from ((line, _entry(value, bounds)) for line, value in found)
            return
        start = scanner.line_at(scanner.pos)
        kinds: set[str] = set()
        try:
            for _, value in values(scanner):
                kinds.add(value.kind if isinstance(value, (TooLarge, Refused)) else _kind(value))
        except Invalid as exc:
            yield exc.line, Unreadable(f"invalid JSON ({exc.message})", exc.column)
            return
        except DeadlinePassed:
            raise DeadlinePassed(start) from None  # nothing of the array was given
    if kinds and "dict" not in kinds:
        names = " and ".join(sorted({_KINDS.get(kind, "nulls") for kind in kinds}))
        why = f"an array of {names}, not of JSON objects: a document is an object"
        yield start, Unreadable(why)
        return
    with opened() as file:
        yield from _entries(Scanner(file, bounds), bounds)


def _entries(scanner: Scanner, bounds: Bounds) -> Iterator[tuple[int, Any]]:
    """Each value of ``scanner`` as :func:`_entry`; where it stops being JSON, the error."""
    try:
        for line, value in values(scanner):
            yield line, _entry(value, bounds)
    except Invalid as exc:
        yield exc.line, Unreadable(f"invalid JSON ({exc.message})", exc.column)


def _entry(value: Any, bounds: Bounds) -> Any:
    """A value as a document, or its refusal: too large, or not an object."""
    if isinstance(value, TooLarge):
        return _too_large(bounds, value.size)
    if isinstance(value, Refused):
        return Unreadable(value.why, value.column)
    return value if isinstance(value, dict) else _not_object(value)


# --- sources ------------------------------------------------------------------------------


def _recognised(
    file: IO[str], bounds: Bounds, whole: Callable[[tuple[str, ...]], Iterator[tuple[int, Any]]]
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
        if _one_value(first):
            yield from _lines(file, bounds, head=tuple(head))
            return
    yield from whole(tuple(head))


def _one_value(text: str) -> bool:
    """Whether ``text`` (a first line) is a whole JSON value, read or not."""
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    except (ValueError, RecursionError):  # valid JSON Python does not read: where it ends
        end = Skipping(scalar=text[0] not in '{["').end_in(text, 0)
        return (end is None and text[0] not in '{["') or end == len(text)
    return True


@contextlib.contextmanager
def _spooled(head: tuple[str, ...], rest: IO[str], bounds: Bounds) -> Iterator[Callable[[], Any]]:
    """Standard input copied to a temporary file: an opener of it, for :func:`_whole`."""
    with tempfile.TemporaryFile(
        "w+", encoding="utf-8", errors="surrogateescape", newline=""
    ) as spool:
        spool.writelines(head)
        while chunk := rest.read(SKIP):
            bounds.check(1)
            spool.write(chunk)

        @contextlib.contextmanager
        def opened() -> Iterator[IO[str]]:
            spool.seek(0)
            yield spool

        yield opened


def _stdin(stdin: IO[str], bounds: Bounds) -> Iterator[tuple[int, Any]]:
    reconfigure = getattr(stdin, "reconfigure", None)
    if reconfigure is not None:  # a byte that is not UTF-8 refuses its own document only
        reconfigure(errors="surrogateescape")

    def whole(head: tuple[str, ...]) -> Iterator[tuple[int, Any]]:
        with _spooled(head, stdin, bounds) as opened:
            yield from _whole(opened, bounds)

    yield from _recognised(stdin, bounds, whole)


def _path(path: Path, bounds: Bounds) -> Iterator[tuple[int, Any]]:
    def opened() -> IO[str]:
        return path.open(encoding="utf-8-sig", errors="surrogateescape")

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
    bounds = Bounds(max_size, deadline, clock)
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
            except DeadlinePassed as exc:
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
