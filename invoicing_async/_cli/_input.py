"""Documents from files, directories and stdin, each readable one or an unreadable marker."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invoicing_async._documents import document_key

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["UsageError", "document_identity", "read_documents"]


class UsageError(Exception):
    """Bad arguments or input: reported in one line, exit status 2."""


class _Unreadable:
    """A document that could not be read: refused locally, it still gets an outcome."""

    def __init__(self, where: str, why: str) -> None:
        self.where = where
        self.why = why

    def __repr__(self) -> str:
        return f"<unreadable document {self.where}: {self.why}>"


def _documents(sources: list[str]) -> Iterator[Any]:
    """Documents from files, directories (``*.json``, ``*.jsonl``) and ``-`` (stdin)."""
    for source in sources:
        if source == "-":
            yield from _parse_stream(sys.stdin.read(), "<stdin>")
            continue
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl", ".ndjson"))
        elif path.exists():
            files = [path]
        else:
            raise UsageError(f"no such file or directory: {source}")
        for file in files:
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                yield _Unreadable(str(file), f"cannot read: {exc}")
                continue
            yield from _parse_stream(text, str(file))


def _parse_stream(text: str, where: str) -> Iterator[Any]:
    stripped = text.strip()
    if not stripped:
        return
    if stripped[0] in "[{":
        try:
            data = json.loads(stripped)
        except ValueError:
            pass  # maybe JSON Lines
        else:
            yield from data if isinstance(data, list) else [data]
            return
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as exc:
            yield _Unreadable(f"{where}:{number}", f"invalid JSON ({exc.msg})")


def read_documents(sources: list[str]) -> Iterator[Any]:
    """The documents, with one stderr line for each that cannot be read."""
    for document in _documents(sources):
        if isinstance(document, _Unreadable):
            print(f"invoicing-async: {document.where}: {document.why}", file=sys.stderr)
        yield document


def document_identity(document: Any) -> str:
    if isinstance(document, _Unreadable):
        return f"unreadable:{document.where}"
    return document_key(document)
