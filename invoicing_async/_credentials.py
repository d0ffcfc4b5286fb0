"""Many issuers' credentials for the command line: a file, or a resolver named by path.

A platform's worker sends for every issuer whose documents are in its outbox. The
``invoicing-async`` command then builds an :class:`~invoicing_async.IssuerPool` instead
of a client, from one of (the first given wins):

* ``--credentials FILE`` or ``INVOICING_CREDENTIALS_FILE``: a file of ``{tin: api_key}``,
  in one of two formats (a file whose first character other than white space is ``{``
  or ``[`` is read as JSON):

  - JSON: one object, ``{"094019245": "API key", ...}``;
  - CSV: one issuer a line, ``TIN,API key`` (quoted as CSV quotes, if need be); blank
    lines, lines starting with ``#`` and a first line naming the columns (its first
    column ``tin``, ``client_id``, ``issuer`` or ``vat``) are skipped.

  The format of ``invoicing-async sandbox --issuers FILE``, and of the file
  ``--issuer-count`` writes: the file serves a worker as it is. The file is a
  :class:`CredentialsFile`: read again when it changes (a key rotated while the worker
  runs, written by an atomic rename), the last good credentials kept in use while a
  changed file cannot be read.
* ``INVOICING_CREDENTIALS_RESOLVER=package.module:function``: a callable importable by
  that path, ``tin -> api_key`` (or ``None``: not one of ours), plain or ``async``, so
  keys can stay in a vault or the application's database; it is called once per
  issuer while the pool keeps that issuer, and again when the provider refuses the key
  it gave.

The file holds secrets: an error about it names the file, every malformed line and its
TIN, never the line itself nor a key (a key would be in it); a file that other users
may read is used with a WARNING saying how to close it. The resolver's exceptions are
the pool's :class:`~invoicing_async.UnknownIssuerError` for that issuer's documents.

.. versionadded:: 0.4.0
"""

from __future__ import annotations

import csv
import importlib
import json
import os
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._log import auth as log

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    Resolver = Callable[[str], Awaitable[str | None] | str | None]

__all__ = [
    "ENV_CREDENTIALS_FILE",
    "ENV_CREDENTIALS_RESOLVER",
    "CredentialsFile",
    "issuer_credentials",
    "load_resolver",
    "read_credentials",
]

ENV_CREDENTIALS_FILE = "INVOICING_CREDENTIALS_FILE"
ENV_CREDENTIALS_RESOLVER = "INVOICING_CREDENTIALS_RESOLVER"
#: What the first column of a CSV file's header line may be called.
_HEADERS = frozenset({"tin", "client_id", "issuer", "vat"})
_SHOWN = 20  # characters of a TIN an error shows at most
#: Malformed lines an error lists at most (then how many more).
_LISTED = 20
#: Seconds between two looks at a credentials file's metadata (has it changed?).
_LOOK_EVERY = 1.0


def read_credentials(path: str | Path) -> dict[str, str]:
    """The ``{tin: api_key}`` of a credentials file (see the module docstring).

    A file that users other than its owner may read is read, with a WARNING.

    :raises ValueError: the file cannot be read or is malformed: the message names the
        file, and every malformed line (or issuer) and its TIN, never a key.
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"the credentials file {source} is not UTF-8 text") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ValueError(f"cannot read the credentials file {source}: {reason}") from None
    json_text = text.lstrip()[:1] in ("{", "[")
    problems: list[str] = []
    found = _from_json(source, text, problems) if json_text else _from_csv(text, problems)
    for tin, key in found.items():
        if not tin or not key or tin != tin.strip() or key != key.strip():
            problems.append(
                f"issuer {tin[:_SHOWN]!r}: an empty TIN or API key, or spaces around one"
            )
    if problems:
        shown = problems[:_LISTED]
        if len(problems) > _LISTED:
            shown.append(f"and {len(problems) - _LISTED} more")
        said = "; ".join(shown)
        raise ValueError(
            f"the credentials file {source}{' ' if said[:5] == 'line ' else ': '}{said}"
        )
    if not found:
        raise ValueError(f"the credentials file {source} names no issuer")
    _warn_if_shared(source)
    return found


def _from_json(source: Path, text: str, problems: list[str]) -> dict[str, str]:
    def strings_only(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for tin, key in pairs:
            if not isinstance(key, str):
                problems.append(f"the API key of {tin[:_SHOWN]!r} is not a string")
            elif found.get(tin, key) != key:
                problems.append(f"{tin[:_SHOWN]!r} appears twice with different API keys")
            found[tin] = key
        return found

    try:
        loaded = json.loads(text, object_pairs_hook=strings_only)
    except ValueError as exc:
        # json's own messages give a position only; ours name a TIN, never a key.
        raise ValueError(f"the credentials file {source}: {exc}") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"the credentials file {source}: a JSON object of TIN to API key")  # noqa: TRY004
    return {tin: key for tin, key in loaded.items() if isinstance(key, str)}


def _from_csv(text: str, problems: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    rows = csv.reader(text.splitlines())
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
                problems.append(
                    f"line {line}: expected TIN,API key (2 fields, found {len(fields)})"
                )
                continue
            tin, key = fields
            if not tin or not key:
                problems.append(f"line {line}: issuer {tin[:_SHOWN]!r}: an empty TIN or API key")
            elif found.get(tin, key) != key:
                problems.append(f"line {line}: {tin[:_SHOWN]!r} again, with another API key")
            else:
                found[tin] = key
    except csv.Error as exc:  # a quote left open: csv's message holds no field
        problems.append(f"line {rows.line_num or line + 1}: {exc}")
    return found


_warned: set[tuple[str, int]] = set()


def _warn_if_shared(source: Path) -> None:
    """One WARNING (per file and mode) when users other than the owner may read it."""
    try:
        mode = stat.S_IMODE(source.stat().st_mode)
    except OSError:
        return
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


class CredentialsFile(Mapping[str, str]):
    """A credentials file as a pool's resolver: read again when it changes.

    The ``{tin: api_key}`` it holds; looked up, it first checks (at most once a second)
    whether the file changed: replaced (an atomic rename), rewritten, or touched. A
    changed file that cannot be read (half written, a malformed line) leaves the last
    good credentials in use, with a WARNING saying why; the next change is read again.

    :raises ValueError: the file cannot be read at first (see :func:`read_credentials`).
    """

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self._clock = clock
        self._stamp = _stamp(self.path)
        self._keys = read_credentials(self.path)
        self._looked = clock()
        #: How many times the credentials were read again and changed.
        self.revision = 0

    def __repr__(self) -> str:
        return f"<CredentialsFile {str(self.path)!r} issuers={len(self._keys)}>"

    def __getitem__(self, tin: str) -> str:
        if self._clock() - self._looked >= _LOOK_EVERY:
            self.refresh()
        return self._keys[tin]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def refresh(self) -> bool:
        """Read the file again if it changed; whether the credentials changed."""
        self._looked = self._clock()
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        return self._read()

    def reload(self) -> bool:
        """Read the file again now (``SIGHUP``); whether the credentials changed."""
        self._looked = self._clock()
        self._stamp = _stamp(self.path)
        return self._read()

    def _read(self) -> bool:
        try:
            keys = read_credentials(self.path)
        except ValueError as exc:
            log.warning("%s; the credentials read before stay in use", exc)
            return False
        if keys == self._keys:
            return False
        self._keys = keys
        self.revision += 1
        log.info("the credentials file %s changed: %d issuers", self.path, len(keys))
        return True


def _stamp(path: Path) -> tuple[int, int, int, int] | None:
    """What tells one version of a file from the next: inode, size, change times."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def load_resolver(spec: str) -> Resolver:
    """The callable ``package.module:function`` names.

    :raises ValueError: the name is malformed, cannot be imported, or is not callable.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{ENV_CREDENTIALS_RESOLVER}={spec!r}: expected package.module:function")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except ImportError as exc:
        raise ValueError(
            f"{ENV_CREDENTIALS_RESOLVER}: cannot import {module_name}: {exc}"
        ) from None
    except AttributeError:
        raise ValueError(f"{ENV_CREDENTIALS_RESOLVER}: {module_name} has no {attribute}") from None
    if not callable(found):
        raise ValueError(f"{ENV_CREDENTIALS_RESOLVER}: {spec} is not callable")  # noqa: TRY004
    resolver: Resolver = found
    return resolver


def issuer_credentials(
    environ: Mapping[str, str], *, file: str | None = None
) -> CredentialsFile | Resolver | None:
    """Many issuers' credentials, if given: ``file``, else the variables; else ``None``.

    :raises ValueError: see :func:`read_credentials` and :func:`load_resolver`.
    """
    path = (file or "").strip() or (environ.get(ENV_CREDENTIALS_FILE) or "").strip()
    if path:
        return CredentialsFile(path)
    spec = (environ.get(ENV_CREDENTIALS_RESOLVER) or "").strip()
    if spec:
        return load_resolver(spec)
    return None
