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
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["JSON_LINES", "Source", "Unreadable", "UsageError", "count_documents", "read"]

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
    """Input that is not a document: refused locally, with what is wrong and where."""

    why: str
    column: int | None = None


def _kind(value: Any) -> str:
    return "null" if value is None else _KIND.get(type(value), type(value).__name__)


def _not_object(value: Any) -> Unreadable:
    return Unreadable(f"{_kind(value)}, not a JSON object: a document is an object")


def _invalid(exc: json.JSONDecodeError) -> tuple[int, Unreadable]:
    return exc.lineno, Unreadable(f"invalid JSON ({exc.msg})", exc.colno)


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _skip(text: str, position: int) -> int:
    match = _WHITESPACE.match(text, position)
    return match.end() if match else position


def _array(text: str, start: int) -> tuple[list[tuple[int, Any]], int]:
    """The array at ``start``: ``(position, element)`` pairs and the position after it.

    Raises :class:`json.JSONDecodeError` at the problem, with its line and column.
    """
    elements: list[tuple[int, Any]] = []
    position = _skip(text, start + 1)
    if text.startswith("]", position):
        return elements, position + 1
    while True:
        value, end = _DECODER.raw_decode(text, position)
        elements.append((position, value))
        position = _skip(text, end)
        if text.startswith(",", position):
            position = _skip(text, position + 1)
        elif text.startswith("]", position):
            return elements, position + 1
        else:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, position)


def _decode(text: str, start: int, *, is_array: bool) -> list[tuple[int, Any]]:
    if is_array:
        elements, end = _array(text, start)
    else:
        value, end = _DECODER.raw_decode(text, start)
        elements = [(start, value)]
    end = _skip(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data after the JSON value", text, end)
    return elements


def _whole(text: str) -> Iterator[tuple[int, Any]]:
    """A text holding one JSON value: an object, or an array of objects."""
    start = _skip(text, 0)
    if start == len(text):
        return  # empty: no document (the command says so if nothing else comes)
    is_array = text.startswith("[", start)
    try:
        elements = _decode(text, start, is_array=is_array)
    except json.JSONDecodeError as exc:
        yield _invalid(exc)
        return
    if is_array and elements and not any(isinstance(v, dict) for _, v in elements):
        kinds = " and ".join(sorted({_KINDS.get(_kind(v), "nulls") for _, v in elements}))
        why = f"an array of {kinds}, not of JSON objects: a document is an object"
        yield _line_of(text, start), Unreadable(why)
        return
    for position, value in elements:
        yield _line_of(text, position), value if isinstance(value, dict) else _not_object(value)


def _lines(lines: Iterable[str], first: int = 1) -> Iterator[tuple[int, Any]]:
    """JSON Lines: one value per non-blank line."""
    for number, line in enumerate(lines, first):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, Unreadable(f"invalid JSON ({exc.msg})", exc.colno)
            continue
        yield number, value if isinstance(value, dict) else _not_object(value)


def _stream(file: IO[str], *, json_lines: bool | None) -> Iterator[tuple[int, Any]]:
    """The values of an open text stream; ``json_lines=None``: recognise the format."""
    if json_lines:
        yield from _lines(file)
        return
    if json_lines is False:
        yield from _whole(file.read())
        return
    # Recognise: blank lines first, then a first line that is a whole JSON value means
    # JSON Lines; anything else (an array, a pretty-printed object) is one JSON value.
    head: list[str] = []
    for line in file:
        head.append(line)
        if line.strip():
            break
    first = head[-1].strip() if head else ""
    if not first:
        return
    if not first.startswith("["):
        try:
            json.loads(first)
        except json.JSONDecodeError:
            pass
        else:
            yield from _lines(head)
            yield from _lines(file, len(head) + 1)
            return
    yield from _whole("".join(head) + file.read())


def _files(source: str) -> list[Path]:
    path = Path(source)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in _SUFFIXES and p.is_file())
    if path.exists():
        return [path]
    raise UsageError(f"no such file or directory: {source}")


def _format(path: Path) -> bool | None:
    if path.suffix in JSON_LINES:
        return True
    return False if path.suffix == ".json" else None


def read(sources: list[str], stdin: IO[str] | None = None) -> Iterator[tuple[Source, Any]]:
    """``(source, document or Unreadable)`` for every document of ``sources`` in order.

    ``-`` is standard input. A file that cannot be opened or decoded is one unreadable
    entry; a name that does not exist is a :class:`UsageError` before anything is read.
    """
    for source in sources:
        if source != "-":
            _files(source)  # a missing name fails before anything is sent
    for source in sources:
        if source == "-":
            for line, value in _stream(stdin or sys.stdin, json_lines=None):
                yield Source("-", line), value
            continue
        for path in _files(source):
            name = str(path)
            try:
                with path.open(encoding="utf-8-sig") as file:
                    for line, value in _stream(file, json_lines=_format(path)):
                        yield Source(name, line), value
            except UnicodeDecodeError as exc:
                yield Source(name, 1), Unreadable(f"not UTF-8 text (byte {exc.start})")
            except OSError as exc:
                yield Source(name, 1), Unreadable(f"cannot read: {exc.strerror or exc}")


def count_documents(sources: list[str]) -> int | None:
    """How many entries :func:`read` will give, for a progress bar; ``None`` for stdin."""
    if "-" in sources:
        return None
    total = 0
    try:
        for source in sources:
            for path in _files(source):
                with path.open(encoding="utf-8-sig") as file:
                    total += sum(1 for _ in _stream(file, json_lines=_format(path)))
    except (OSError, UnicodeDecodeError, UsageError):
        return None
    return total
