"""What an application holds: a client, a pool, an outbox and its worker.

Owns: the sending machinery behind a client or a pool (:mod:`.engine`), their document
methods written once (:mod:`.surface`), :class:`~invoicing_async.InvoicingClient`
(:mod:`.client`), :class:`~invoicing_async.IssuerPool` (:mod:`.pool`) with its
credentials (:mod:`.credentials`, :mod:`.credfile`), the environment's configuration
(:mod:`.env`), the blocking twins (:mod:`.blocking`), the outbox as an application uses
it (:mod:`.outbox`, and as a till uses it), the worker that drains it (:mod:`.worker`,
its claims :mod:`._claims`, the issuers whose documents wait :mod:`._blocked`, its counts
:mod:`.progress`).

May import: every folder below it; the engine installs ``_obs``'s telemetry hook.
"""
