"""What is kept across crashes: the ledger, the outbox stores, their entries.

Owns: how an entry is stored and read back (:mod:`.entry`; the entry's record, states and
rules are the core's, :mod:`invoicing_async._core.entries`: this folder applies them), its
identity (:mod:`._identity`), the formats (:mod:`._schema`), one store per backend: a SQLite file
(:mod:`._sqlitefile`, :mod:`._lockfile`) as a job's ledger (:mod:`.ledger`) or a
machine's outbox (:mod:`.sqlite`), PostgreSQL (:mod:`.postgres`: the only importer of
asyncpg), the claims' side of a store (:mod:`.store`), documents made ready for an
outbox (:mod:`.enqueue`) and deferred sales as rows beside entries (:mod:`.deferrals`).

May import: the folders below it but ``_obs`` (``_core``, ``_doc``, ``_io``, ``_send``),
sqlite3, asyncpg.
"""
