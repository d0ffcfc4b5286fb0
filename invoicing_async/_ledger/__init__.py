"""The durable ledger of bulk submission and the outbox of fleets.

One record per document identity: whether a request for it may be out, and its last
outcome. Two backends keep the same records under the same rules (:mod:`._rules`):

* :mod:`._sqlite`: one file (stdlib ``sqlite3``, WAL), written from one thread with
  group commit; the embedded default for ``journal=`` and :class:`SqliteOutbox`;
* :mod:`._postgres`: a transactional outbox table (asyncpg) that any number of workers
  drain with ``FOR UPDATE SKIP LOCKED`` claims, leases and fenced updates.

:mod:`._worker` drives claimed outbox entries through the same batch machinery as
``submit_stream``. This package's ``__init__`` imports nothing, so the batch can import
the rules and the SQLite backend without reaching the worker (which imports the batch).
"""
