"""The decision core: one place decides every request's fate. Pure: no I/O, no clock.

Four parts, read in this order:

* :mod:`._table`: what an answer means: :func:`classify` turns a failed attempt's error
  into a :class:`Kind`, and :data:`RULES` gives each kind every consequence as a column
  (the outcome, a retry, the breaker, the load, a sale's deferral, telemetry's name);
* :mod:`._machine`: :class:`Attempts`, the state machine one request runs (ask, send,
  tell), with the safety class's rules;
* :mod:`._shared`: what a batch's requests share (:class:`Budget`, :class:`Breaker`,
  :class:`ReauthWaits`);
* :mod:`._unauthorized`: the 401 rule (:class:`TokenRetries`).

Drivers: :mod:`invoicing_async._attempts` (the one loop), :mod:`invoicing_async._delivery`
(documents), :mod:`invoicing_async._operations` (the other operations), the token grant
in :mod:`invoicing_async._channel`. No other module looks at an error's class or status to
decide what to do (``tests/unit/test_layout.py`` checks it); every wait's length comes
from :mod:`invoicing_async._retry`.
"""

from ._machine import Attempts, End, Send, Wait, sent_nothing
from ._shared import SINGLE, Breaker, Budget, ReauthWaits, Shared
from ._table import (
    RULES,
    WHY,
    Blame,
    Kind,
    Load,
    Rule,
    certainly_not_processed,
    classify,
    deferral,
    duplicate_means_success,
    ending_of,
    last_answer,
    may_resend,
    maybe_processed,
    needs_operator,
    refused_by_provider,
    retry_reason,
)
from ._unauthorized import MAX_TOKEN_RETRIES, TokenRetries

__all__ = [
    "MAX_TOKEN_RETRIES",
    "RULES",
    "SINGLE",
    "WHY",
    "Attempts",
    "Blame",
    "Breaker",
    "Budget",
    "End",
    "Kind",
    "Load",
    "ReauthWaits",
    "Rule",
    "Send",
    "Shared",
    "TokenRetries",
    "Wait",
    "certainly_not_processed",
    "classify",
    "deferral",
    "duplicate_means_success",
    "ending_of",
    "last_answer",
    "may_resend",
    "maybe_processed",
    "needs_operator",
    "refused_by_provider",
    "retry_reason",
    "sent_nothing",
]
