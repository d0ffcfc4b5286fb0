"""The durable ledger of bulk submission and the outbox of fleets.

One record per document identity (its issuer and its key, :mod:`._identity`): whether
a request for it may be out, and its last outcome. The backends keep the same records
under the same rules (:mod:`._rules`):

* :mod:`._sqlite_ledger`: a job's :class:`Ledger` in one file (:mod:`._sqlite_file`:
  stdlib ``sqlite3``, WAL, written from one thread with group commit), and the batch's
  journal in it; :mod:`._sqlite_outbox`: the same file as a single machine's outbox;
* :mod:`._postgres_outbox`: a transactional outbox table (asyncpg) that any number of
  workers drain with ``FOR UPDATE SKIP LOCKED`` claims, leases and fenced updates.

The outboxes' storage side is :mod:`._store`; the worker that drives claimed entries
through a batch lives above the batch (:mod:`invoicing_async._worker`).
"""
