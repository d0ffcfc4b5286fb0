"""The issuers file of ``invoicing-async sandbox``: many issuers' credentials, in and out.

Two formats (a file whose first character other than white space is ``{`` or ``[`` is
read as JSON):

* JSON: one object, ``{"TIN": "API key", ...}``; what ``--issuer-count`` writes;
* CSV: one issuer a line, ``TIN,API key`` (quoted as CSV quotes, if need be); blank
  lines, lines starting with ``#``, and a first line naming the columns (``tin,api_key``;
  the first named ``tin``, ``client_id``, ``issuer`` or ``vat``) are skipped.

The file holds secrets. It is written with 0600 permissions, and an error about it
names the file, the line and the TIN, never the line itself (a key would be in it).

.. versionadded:: 0.4.0
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._issuers import check_issuers

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["read_issuers", "write_issuers"]

#: What the first column of a CSV file's header line may be called.
_HEADERS = frozenset({"tin", "client_id", "issuer", "vat"})


def read_issuers(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``{tin: api_key}`` of an issuers file; ``ValueError`` saying what is wrong where."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"{source}: not UTF-8 text") from None
    read = _from_json if text.lstrip()[:1] in ("{", "[") else _from_csv
    issuers = read(source, text)
    try:
        return check_issuers(issuers, {})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{source}: {exc}") from None


def _from_json(source: Path, text: str) -> dict[str, str]:
    def strings_only(pairs: list[tuple[str, Any]]) -> dict[str, str]:
        issuers: dict[str, str] = {}
        for tin, key in pairs:
            if not isinstance(key, str):
                raise ValueError(f"the API key of {tin[:20]!r} is not a string")  # noqa: TRY004
            if issuers.get(tin, key) != key:
                raise ValueError(f"{tin[:20]!r} appears twice with different API keys")
            issuers[tin] = key
        return issuers

    try:
        loaded = json.loads(text, object_pairs_hook=strings_only)
    except ValueError as exc:
        # json's own messages give a position only; ours name a TIN, never a key.
        raise ValueError(f"{source}: {exc}") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"{source}: a JSON object of TIN to API key is expected")  # noqa: TRY004
    return loaded


def _from_csv(source: Path, text: str) -> dict[str, str]:
    issuers: dict[str, str] = {}
    rows = csv.reader(text.splitlines())
    for row in rows:
        line = rows.line_num
        fields = [field.strip() for field in row]
        if not any(fields) or fields[0].startswith("#"):
            continue
        if line == 1 and fields[0].lower() in _HEADERS:
            continue
        if len(fields) != 2:
            raise ValueError(f"{source} line {line}: expected TIN,API key (2 fields)")
        tin, key = fields
        if issuers.get(tin, key) != key:
            raise ValueError(f"{source} line {line}: {tin[:20]!r} again, with another API key")
        issuers[tin] = key
    return issuers


def write_issuers(path: str | os.PathLike[str], issuers: Mapping[str, str]) -> Path:
    """Write ``issuers`` as a JSON issuers file only its owner can read; its path."""
    target = Path(path)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if hasattr(os, "fchmod"):  # an existing file keeps its mode through O_CREAT
        os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump(dict(issuers), file, indent=0)
        file.write("\n")
    return target
