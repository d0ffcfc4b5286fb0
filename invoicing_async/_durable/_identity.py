"""A document's identity in storage: its key and its issuer; rows of 0.3 adopted.

Two issuers' documents with the same key are two entries (format 3, :mod:`._schema`).
A row written before (format 2 or older) has the issuer ``''``: it was written by a
store that served one issuer, so it is the document of *whichever* issuer names that key
first. That document adopts it: the row takes its issuer, in the same transaction as
the write or the lookup that found it, so the entry stays one (an enqueue finds it and
does not add a second; a resumed batch replays it) and every later write names it by
its full identity. A document that names no issuer is ``''`` too, and matches exactly.

The rules are here once for both backends: :func:`match` (which stored row is a
document's) and the adopting statements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from invoicing_async._core.errors import LedgerError
from invoicing_async._send.journal import Ref

from ._schema import DEFERRALS, TABLE

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterable, Sequence

    from invoicing_async._core.entries import LedgerEntry

__all__ = ["adopt_postgres", "adopt_sqlite", "match", "one_of", "who"]


def match(
    rows: Iterable[Any], refs: Iterable[Ref], *, identity: Callable[[Any], Ref]
) -> dict[Ref, Any]:
    """The stored row of each document of ``refs`` that has one.

    Its own row; else, for a document naming an issuer, the row of its key that names
    none (written before issuers were stored, see the module docstring).
    """
    stored = {identity(row): row for row in rows}
    found: dict[Ref, Any] = {}
    for ref in refs:
        row = stored.get(ref)
        if row is None and ref.issuer:
            row = stored.get(Ref("", ref.key))
        if row is not None:
            found[ref] = row
    return found


def one_of(key: str, entries: list[LedgerEntry]) -> LedgerEntry | None:
    """The entry of ``key`` when no issuer is named: the one that names none, or the only one."""
    if len(entries) > 1:
        unnamed = [entry for entry in entries if entry.issuer is None]
        if len(unnamed) == 1:
            return unnamed[0]
        issuers = ", ".join(str(entry.issuer) for entry in entries)
        raise LedgerError(
            f"documents of several issuers have the key {key} ({issuers}): name the issuer",
            reason="ambiguous",
        )
    return entries[0] if entries else None


def who(*, key: str = ":key", issuer: str = ":issuer", table: str = "entries") -> str:
    """An SQL condition for the row of one document: its own, or the one it adopts."""
    return (
        f"(key = {key} AND (issuer = {issuer} OR (issuer = '' AND NOT EXISTS "  # noqa: S608
        f"(SELECT 1 FROM {table} AS own WHERE own.key = {key} AND own.issuer = {issuer}))))"
    )


_SQLITE_ADOPT = tuple(
    f"UPDATE {table} SET issuer = :issuer WHERE key = :key AND issuer = '' AND NOT EXISTS "  # noqa: S608
    f"(SELECT 1 FROM {table} AS own WHERE own.key = :key AND own.issuer = :issuer)"
    for table in ("entries", "deferrals")
)


def adopt_sqlite(connection: sqlite3.Connection, refs: Sequence[Ref]) -> None:
    """Give the rows of 0.3 of these documents their issuer (in the caller's transaction)."""
    rows = [{"key": ref.key, "issuer": ref.issuer} for ref in refs if ref.issuer]
    if rows:
        for statement in _SQLITE_ADOPT:
            connection.executemany(statement, rows)


_POSTGRES_ADOPT = tuple(
    f"UPDATE {table} AS o SET issuer = t.issuer "  # noqa: S608
    "FROM unnest($1::text[], $2::text[]) AS t(key, issuer) "
    f"WHERE o.key = t.key AND o.issuer = '' AND NOT EXISTS "
    f"(SELECT 1 FROM {table} AS own WHERE own.key = t.key AND own.issuer = t.issuer)"
    for table in (TABLE, DEFERRALS)
)


async def adopt_postgres(connection: Any, refs: Sequence[Ref]) -> None:
    """Give the rows of 0.3 of these documents their issuer (in the caller's transaction).

    Only documents that name an issuer, and only if a row of their key names none (a
    plain indexed read first: an outbox without such rows takes no lock for it).
    """
    named = [ref for ref in refs if ref.issuer]
    if not named:
        return
    keys = [ref.key for ref in named]
    legacy = await connection.fetchval(
        f"SELECT EXISTS (SELECT 1 FROM {TABLE} WHERE key = ANY($1::text[]) AND issuer = '')",  # noqa: S608
        keys,
    )
    if legacy:
        for statement in _POSTGRES_ADOPT:
            await connection.execute(statement, keys, [ref.issuer for ref in named])
