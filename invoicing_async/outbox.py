"""The transactional outbox: invoices enqueued with your data, sent by any number of workers.

An application writes each invoice into the outbox **in the same database transaction**
as its own data (the sale, the order), so an invoice can never be lost between "saved"
and "sent". Workers, in any number of processes on any number of machines, claim
entries, submit them through the same machinery as
:meth:`~invoicing_async.InvoicingClient.submit_stream` (retries, circuit breaker,
adaptive concurrency) and record one truthful outcome per entry::

    from invoicing_async.outbox import PostgresOutbox

    outbox = PostgresOutbox(dsn)
    await outbox.setup()                      # idempotent: every worker may call it
    async with pool.acquire() as conn, conn.transaction():
        ...                                   # your own rows
        await outbox.enqueue(invoices, connection=conn)
    async with InvoicingClient(...) as client:
        await outbox.run_worker(client, concurrency=32)

Claims use ``FOR UPDATE SKIP LOCKED`` and a lease that a heartbeat extends; a worker
that dies (even SIGKILL) stops extending it, and another worker claims the entry when
it expires. Every write checks the lease (fencing): a worker whose claim was taken over
can neither send nor overwrite the newer outcome. Delivery is at least once; the
provider's duplicate detection (``409`` with the original record) makes it exactly once.

A poison document (one the provider fails on every time) costs a bounded number of
requests: after a failed round an entry waits longer and longer before it is claimed
again, and after ``RetryPolicy.max_rounds`` rounds that failed ``unknown`` (10 by
default) it is :data:`PARKED`: it needs attention, and only :meth:`~PostgresOutbox.retry`
(``invoicing-async ledger retry``) sends it again.

:class:`SqliteOutbox` is the same API in one SQLite file: one worker at a time, any
process may enqueue.

.. versionadded:: 0.2.0
"""

from invoicing_async._client.outbox import (
    IN_FLIGHT,
    PARKED,
    PENDING,
    LedgerEntry,
    PostgresOutbox,
    SqliteOutbox,
    WorkerProgress,
    open_outbox,
)

__all__ = [
    "IN_FLIGHT",
    "PARKED",
    "PENDING",
    "LedgerEntry",
    "PostgresOutbox",
    "SqliteOutbox",
    "WorkerProgress",
    "open_outbox",
]
