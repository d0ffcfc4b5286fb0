"""Fixtures of the system tests."""

from __future__ import annotations

import pytest

from invoicing_async.outbox import PostgresOutbox, SqliteOutbox


@pytest.fixture(params=["sqlite", "postgres"])
async def outbox(request, tmp_path):
    """An outbox of each kind, set up: a SQLite file, and a table in a fresh PostgreSQL
    database (tests/pgserver.py)."""
    if request.param == "sqlite":
        box = SqliteOutbox(tmp_path / "outbox.db")
    else:
        box = PostgresOutbox(request.getfixturevalue("postgres_dsn"))
    async with box:
        yield box
