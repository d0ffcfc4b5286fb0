"""The outbox as a till uses it: where deferred sales wait until the drainer sends them.

A deferred sale is an ordinary outbox entry plus its deferral record beside it (when and
why it was deferred, its offline QR, whether the application was told its outcome: the
table :mod:`invoicing_async._durable.deferrals` keeps). A till (a
:class:`~invoicing_async.Deferral`) takes an outbox object — a
:class:`~invoicing_async.outbox.SqliteOutbox`, a
:class:`~invoicing_async.outbox.PostgresOutbox`, or a SQLite file path — and uses it
through :class:`TillOutbox`, which :mod:`invoicing_async.outbox` makes of it (the outbox
module alone knows its classes' storage).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from invoicing_async._durable.deferrals import Deferrals
    from invoicing_async._durable.store import Store

__all__ = ["TillOutbox"]


class TillOutbox(Protocol):
    """What a till and its drainer need of an outbox."""

    #: The deferral records kept beside the outbox's entries.
    deferrals: Deferrals

    async def open(self) -> None:
        """Open the outbox and create the deferrals table (once)."""

    async def close(self) -> None:
        """Close the outbox if the till opened it."""

    async def worker(self) -> Store:
        """The store a worker claims from, its lock taken (SQLite: one worker at a time)."""

    async def worker_done(self) -> None:
        """Give back what :meth:`worker` took."""
