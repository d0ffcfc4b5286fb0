"""The one loop every request runs: ask the decision core, send, tell it, wait as told.

:func:`step` runs one turn of a :class:`~invoicing_async._core.machine.Attempts` on the
event loop's clock: it asks the core whether to send and within what timeout, makes one
attempt, and tells the core the answer. :func:`drive` repeats steps and sleeps as long
as the core says between them; a batch instead runs a document a step at a time and puts
one that must wait back in its issuer's lane (:mod:`invoicing_async._send._lanes`), so
that no worker sleeps. What to send, and what the answer is, are the caller's
(:mod:`invoicing_async._send.delivery` for documents,
:mod:`invoicing_async._send.operations` for the other operations, :mod:`.channel` for
token grants); *whether* to go on is the core's alone. It lives with the wire, below the
sending folder, because a token grant runs it too. Every retry and every ending is
logged here, once, with its fields as ``extra``; every retry is also told to the call's
observers (:func:`invoicing_async._core.calls.waited`: counted, marked on its span).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from invoicing_async._core import calls
from invoicing_async._core.errors import InvoicingError
from invoicing_async._core.machine import End, Wait
from invoicing_async._core.outcomes import OutcomeStatus

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from invoicing_async._core.machine import Attempts

__all__ = ["Named", "Subject", "drive", "log_ending", "step"]


class Subject(Protocol):
    """What a request's log lines name: read only when a line is written."""

    @property
    def label(self) -> str:
        """What the message names (``invoice id:…``, ``POST /Invoice/File``)."""

    @property
    def fields(self) -> Mapping[str, Any]:
        """What every record carries as ``extra`` (``invoicing.document_key`` …)."""


@attrs.frozen
class Named:
    """A :class:`Subject` known in advance (an operation, a token request)."""

    label: str
    fields: Mapping[str, Any] = attrs.field(factory=dict)


async def step(
    attempts: Attempts,
    attempt: Callable[[float | None], Awaitable[Any]],
    *,
    subject: Subject,
    log: logging.Logger,
    retry_level: int = logging.INFO,
) -> End | Wait:
    """Ask the core, make at most one attempt, tell the core; log a retry or an ending.

    A batch runs its documents a step at a time (a document waiting for its retry holds
    no worker); :func:`drive` runs one request's steps to the end. What the attempt's
    answer said of the provider's load (for an adaptive in-flight limit) is
    ``attempts.load`` after it.
    """
    loop = asyncio.get_running_loop()
    ask = attempts.next(loop.time())
    if isinstance(ask, End):
        log_ending(ask, subject=subject, log=log)
        return ask
    try:
        result = await attempt(ask.timeout)
    except InvoicingError as exc:
        decision = attempts.failed(exc, loop.time())
    else:
        decision = attempts.succeeded(result)
    if isinstance(decision, End):
        log_ending(decision, subject=subject, log=log)
    else:
        if log.isEnabledFor(retry_level):
            log.log(
                retry_level,
                "%s: attempt %d failed (%s); retrying in %.2f s",
                subject.label,
                attempts.attempts,
                decision.after,
                decision.seconds,
                extra={**subject.fields, "invoicing.attempt": attempts.attempts},
            )
        calls.waited(decision)
    return decision


async def drive(
    attempts: Attempts,
    attempt: Callable[[float | None], Awaitable[Any]],
    *,
    subject: Subject,
    log: logging.Logger,
    retry_level: int = logging.INFO,
) -> End:
    """Steps until the core ends them; the ending (each step logged, see :func:`step`).

    :param subject: what the log lines name, and the fields they carry.
    """
    while True:
        decision = await step(attempts, attempt, subject=subject, log=log, retry_level=retry_level)
        if isinstance(decision, End):
            return decision
        await asyncio.sleep(decision.seconds)


def log_ending(end: End, *, subject: Subject, log: logging.Logger) -> None:
    """One line for how a request ended, at the level its ending deserves.

    Accepted at once is the common case (DEBUG); accepted after retries is worth a line.
    A request never sent because its batch stopped is one of many: the stop is logged
    once by the batch, so only a request that was tried warns of its own.
    """
    status, attempts = end.status, end.attempts
    if status is OutcomeStatus.ACCEPTED:
        level = logging.INFO if attempts > 1 else logging.DEBUG
    elif status is OutcomeStatus.DUPLICATE:
        level = logging.INFO
    elif status is OutcomeStatus.REJECTED or status is OutcomeStatus.UNKNOWN:
        level = logging.WARNING
    else:
        level = logging.WARNING if attempts else logging.DEBUG
    if not log.isEnabledFor(level):
        return  # the common case, accepted at once: nothing made for a line not written
    label = subject.label
    fields = {
        **subject.fields,
        "invoicing.attempt": attempts,
        "invoicing.outcome": status.value,
    }
    if status is OutcomeStatus.ACCEPTED:
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
            level,
            "%s: not sent after %d attempt(s), %s: %s",
            label,
            attempts,
            end.reason,
            end.error,
            extra=fields,
        )
