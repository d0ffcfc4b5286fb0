"""The library's loggers: one per area an operator turns up, not one per module.

The names are public (``docs/logging.rst``): an application filters by area
(``invoicing_async.delivery`` for a document's attempts, ``invoicing_async.auth`` for
tokens …), whichever module writes the line. Every module takes its logger from here,
so the areas are listed in one place.

Every record also carries its fields as attributes (``extra``): a JSON formatter
(python-json-logger, structlog's stdlib bridge) gets ``invoicing.document_key``,
``invoicing.issuer``, ``invoicing.attempt``, ``invoicing.outcome`` … without parsing the
message. A line that names its fields passes them itself; every other line gets those
of the call it was logged in (:data:`current`: a document's delivery, an operation, a
token request), so a transport or token line written while a document is sent names
that document too. The fields are identities, counts and outcomes, never a secret.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any

__all__ = [
    "auth",
    "batch",
    "current",
    "deferral",
    "delivery",
    "ledger",
    "operations",
    "transport",
]

#: The call being made in this task, if any: an object whose ``fields`` (a mapping of
#: ``invoicing.*`` names to values) every record logged meanwhile carries (see
#: :mod:`.calls`, whose calls set it).
current: contextvars.ContextVar[Any] = contextvars.ContextVar("invoicing_call", default=None)


class _CallFields(logging.Filter):
    """Adds the current call's fields to a record that does not name them itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        call = current.get()
        if call is not None:
            attributes = record.__dict__
            for name, value in call.fields.items():
                if name not in attributes:
                    attributes[name] = value
        return True


def _logger(name: str) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.addFilter(_CallFields())
    return logger


#: A document's attempts: retries, refusals, give-ups; a batch that stops; the
#: adaptive in-flight limit.
delivery = _logger("invoicing_async.delivery")
#: Bulk submission.
batch = _logger("invoicing_async.batch")
#: Tokens: fetches, renewals, 401 recovery, the shared token store.
auth = _logger("invoicing_async.auth")
#: Deferred sales: the provider down and back, the drainer, the backlog.
deferral = _logger("invoicing_async.deferral")
#: The ledger file and the outbox workers.
ledger = _logger("invoicing_async.ledger")
#: The other operations' attempts (cancellations, uploads …).
operations = _logger("invoicing_async.operations")
#: Each HTTP exchange.
transport = _logger("invoicing_async.transport")
