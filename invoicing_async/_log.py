"""The library's loggers: one per area an operator turns up, not one per module.

The names are public (``docs/logging.rst``): an application filters by area
(``invoicing_async.delivery`` for a document's attempts, ``invoicing_async.auth`` for
tokens …), whichever module writes the line. Every module takes its logger from here,
so the areas are listed in one place.
"""

from __future__ import annotations

import logging

__all__ = ["auth", "batch", "deferral", "delivery", "ledger", "operations", "transport"]

#: A document's attempts: retries, refusals, give-ups; a batch that stops; the
#: adaptive in-flight limit.
delivery = logging.getLogger("invoicing_async.delivery")
#: Bulk submission.
batch = logging.getLogger("invoicing_async.batch")
#: Tokens: fetches, renewals, 401 recovery, the shared token store.
auth = logging.getLogger("invoicing_async.auth")
#: Deferred sales: the provider down and back, the drainer, the backlog.
deferral = logging.getLogger("invoicing_async.deferral")
#: The ledger file and the outbox workers.
ledger = logging.getLogger("invoicing_async.ledger")
#: The other operations' attempts (cancellations, uploads …).
operations = logging.getLogger("invoicing_async.operations")
#: Each HTTP exchange.
transport = logging.getLogger("invoicing_async.transport")
