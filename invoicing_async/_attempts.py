"""The one loop every request runs: ask the decision core, send, tell it, wait as told.

:func:`drive` runs a :class:`~._decision.Attempts` on the event loop's clock: it takes a
slot of the batch's :class:`~._limiter.Limiter` (when there is one), asks the core
whether to send and within what timeout, makes one attempt, tells the core the answer,
and sleeps as long as the core says before asking again. What to send, and what the
answer is, are the caller's (:mod:`._delivery` for documents, :mod:`._operations` for the
other operations, :mod:`._channel` for token grants); *whether* to go on is the core's
alone. Every retry and every ending is logged here, once, with its fields as ``extra``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ._decision import End
from ._errors import DuplicateDocumentError, InvoicingError
from ._outcomes import OutcomeStatus

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from ._decision import Attempts
    from ._limiter import Limiter

__all__ = ["drive", "log_ending"]


async def drive(
    attempts: Attempts,
    attempt: Callable[[float | None], Awaitable[Any]],
    *,
    label: str,
    log: logging.Logger,
    extra: Mapping[str, Any] | None = None,
    limiter: Limiter | None = None,
    retry_level: int = logging.INFO,
) -> End:
    """Attempts until the core ends them; the ending (logged, see :func:`log_ending`).

    :param label: what the log lines name (``invoice id:…``, ``POST /Invoice/File``).
    :param extra: fields every log line carries (``invoicing.document_key`` …).
    :param limiter: the batch's in-flight limit: a slot is held for each attempt.
    """
    loop = asyncio.get_running_loop()
    while True:
        slot = None
        if limiter is not None:
            fast = limiter.try_acquire()
            slot = fast if fast is not None else await limiter.acquire()
        step = attempts.next(loop.time())
        if isinstance(step, End):
            if limiter is not None and slot is not None:
                limiter.release(slot, None, answered=False)
            log_ending(step, label=label, log=log, extra=extra)
            return step
        overload: InvoicingError | None = None
        answered = False
        try:
            result = await attempt(step.timeout)
        except InvoicingError as exc:
            answered = True
            # A 409 says nothing about the provider's load: like a success.
            overload = None if isinstance(exc, DuplicateDocumentError) else exc
            decision = attempts.failed(exc, loop.time())
        else:
            answered = True
            decision = attempts.succeeded(result)
        finally:
            if limiter is not None and slot is not None:
                limiter.release(slot, overload, answered=answered)
        if isinstance(decision, End):
            log_ending(decision, label=label, log=log, extra=extra)
            return decision
        log.log(
            retry_level,
            "%s: attempt %d failed (%s); retrying in %.2f s",
            label,
            attempts.attempts,
            decision.after,
            decision.seconds,
            extra={**(extra or {}), "invoicing.attempt": attempts.attempts},
        )
        await asyncio.sleep(decision.seconds)


def log_ending(
    end: End, *, label: str, log: logging.Logger, extra: Mapping[str, Any] | None = None
) -> None:
    """One line for how a request ended, at the level its ending deserves.

    Accepted at once is the common case (DEBUG); accepted after retries is worth a line.
    A request never sent because its batch stopped is one of many: the stop is logged
    once by the batch, so only a request that was tried warns of its own.
    """
    fields = {
        **(extra or {}),
        "invoicing.attempt": end.attempts,
        "invoicing.outcome": end.status.value,
    }
    status, attempts = end.status, end.attempts
    if status is OutcomeStatus.ACCEPTED:
        level = logging.INFO if attempts > 1 else logging.DEBUG
        log.log(level, "%s: accepted at attempt %d", label, attempts, extra=fields)
    elif status is OutcomeStatus.DUPLICATE:
        log.info("%s: attempt %d: already transmitted (409)", label, attempts, extra=fields)
    elif status is OutcomeStatus.REJECTED:
        log.warning("%s: attempt %d: rejected: %s", label, attempts, end.error, extra=fields)
    elif status is OutcomeStatus.UNKNOWN:
        log.warning(
            "%s: outcome unknown after %d attempt(s), %s: %s",
            label,
            attempts,
            end.reason,
            end.last,
            extra=fields,
        )
    else:
        log.log(
            logging.WARNING if attempts else logging.DEBUG,
            "%s: not sent after %d attempt(s), %s: %s",
            label,
            attempts,
            end.reason,
            end.error,
            extra=fields,
        )
