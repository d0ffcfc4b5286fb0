"""Reading a SQLite ledger file from a test, even while another process writes it.

A plain read-only ``sqlite3`` connection (WAL mode lets it read beside the writer): the
tests look at the file as any operator's tool would, not through the library.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def rows(path: Path) -> dict[str, dict]:
    """Every entry: key -> {state, status, outcome (parsed JSON or None)}."""
    if not path.exists():
        return {}
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    except sqlite3.OperationalError:
        return {}
    try:
        found = connection.execute("SELECT key, state, status, outcome FROM entries").fetchall()
    except sqlite3.OperationalError:  # not created yet
        return {}
    finally:
        connection.close()
    return {
        key: {"state": state, "status": status, "outcome": json.loads(outcome) if outcome else None}
        for key, state, status, outcome in found
    }


def settled_ok(path: Path) -> set[str]:
    """Keys whose recorded outcome says the provider holds the document."""
    return {
        key
        for key, row in rows(path).items()
        if row["state"] == "done" and row["status"] in ("accepted", "duplicate")
    }


def in_flight(path: Path) -> set[str]:
    """Keys whose request may be out with no outcome recorded."""
    return {key for key, row in rows(path).items() if row["state"] == "in_flight"}
