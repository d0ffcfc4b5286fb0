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

  The format of ``invoicing-async sandbox --issuers-file``: the file it writes serves
  a worker as it is.
* ``INVOICING_CREDENTIALS_RESOLVER=package.module:function``: a callable importable by
  that path, ``tin -> api_key`` (or ``None``: not one of ours), plain or ``async``, so
  keys can stay in a vault or the application's database; it is called once per
  issuer while the pool keeps that issuer.

The file holds secrets: an error about it names the file, the line and the TIN, never
the line itself nor a key (a key would be in it). The resolver's exceptions are the
pool's :class:`~invoicing_async.UnknownIssuerError` for that issuer's documents.

.. versionadded:: 0.4.0
"""

from __future__ import annotations

import csv
import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    Resolver = Callable[[str], Awaitable[str | None] | str | None]

__all__ = [
    "ENV_CREDENTIALS_FILE",
    "ENV_CREDENTIALS_RESOLVER",
    "issuer_credentials",
    "load_resolver",
    "read_credentials",
]

ENV_CREDENTIALS_FILE = "INVOICING_CREDENTIALS_FILE"
ENV_CREDENTIALS_RESOLVER = "INVOICING_CREDENTIALS_RESOLVER"
#: What the first column of a CSV file's header line may be called.
_HEADERS = frozenset({"tin", "client_id", "issuer", "vat"})
_SHOWN = 20  # characters of a TIN an error shows at most


def read_credentials(path: str | Path) -> dict[str, str]:
    """The ``{tin: api_key}`` of a credentials file (see the module docstring).

    :raises ValueError: the file cannot be read or is malformed: the message names the
        file, the line and the TIN, never a key.
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
    found = _from_json(source, text) if json_text else _from_csv(source, text)
    for tin, key in found.items():
        if not tin or not key or tin != tin.strip() or key != key.strip():
            raise ValueError(
                f"the credentials file {source}: issuer {tin[:_SHOWN]!r}: an empty TIN or "
                "API key, or spaces around one"
            )
    if not found:
        raise ValueError(f"the credentials file {source} names no issuer")
    return found


def _from_json(source: Path, text: str) -> dict[str, str]:
    def strings_only(pairs: list[tuple[str, Any]]) -> dict[str, str]:
        found: dict[str, str] = {}
        for tin, key in pairs:
            if not isinstance(key, str):
                raise ValueError(f"the API key of {tin[:_SHOWN]!r} is not a string")  # noqa: TRY004
            if found.get(tin, key) != key:
                raise ValueError(f"{tin[:_SHOWN]!r} appears twice with different API keys")
            found[tin] = key
        return found

    try:
        loaded = json.loads(text, object_pairs_hook=strings_only)
    except ValueError as exc:
        # json's own messages give a position only; ours name a TIN, never a key.
        raise ValueError(f"the credentials file {source}: {exc}") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"the credentials file {source}: a JSON object of TIN to API key")  # noqa: TRY004
    return loaded


def _from_csv(source: Path, text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    rows = csv.reader(text.splitlines())
    try:
        for row in rows:
            line = rows.line_num
            fields = [field.strip() for field in row]
            if not any(fields) or fields[0].startswith("#"):
                continue
            if line == 1 and fields[0].lower() in _HEADERS:
                continue
            if len(fields) != 2:
                raise ValueError(
                    f"the credentials file {source} line {line}: expected TIN,API key "
                    f"(2 fields, found {len(fields)})"
                )
            tin, key = fields
            if found.get(tin, key) != key:
                raise ValueError(
                    f"the credentials file {source} line {line}: {tin[:_SHOWN]!r} again, "
                    "with another API key"
                )
            found[tin] = key
    except csv.Error as exc:  # a quote left open: csv's message holds no field
        raise ValueError(f"the credentials file {source} line {rows.line_num}: {exc}") from None
    return found


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
) -> dict[str, str] | Resolver | None:
    """Many issuers' credentials, if given: ``file``, else the variables; else ``None``.

    :raises ValueError: see :func:`read_credentials` and :func:`load_resolver`.
    """
    path = (file or "").strip() or (environ.get(ENV_CREDENTIALS_FILE) or "").strip()
    if path:
        return read_credentials(path)
    spec = (environ.get(ENV_CREDENTIALS_RESOLVER) or "").strip()
    if spec:
        return load_resolver(spec)
    return None
