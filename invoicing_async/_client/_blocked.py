"""The issuers whose documents wait for an operator, as an outbox worker keeps them.

With an :class:`~invoicing_async.IssuerPool`, an issuer whose documents the batch
stopped (the provider refused its credentials, or the pool has none) waits: its entries
are not claimed (other workers may send them), one WARNING names it, and after a wait
(the pool's ``recheck_refused``, doubling while the credentials stay refused, up to
:data:`_MAX_RECHECK`) or as soon as the pool's credentials change (a credentials file
changed, ``reload_credentials()``), the batch that runs tries it again at its next
claim, without waiting for its other documents: the pool asks its resolver again, its
documents go with the new key, and one INFO says that the new key took effect.

:class:`Blocked` is what the worker's claims (:meth:`~._claims.Claims.feed`) ask between
claims; a client's worker (one issuer) has none that wait.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from invoicing_async._core.log import ledger as log
from invoicing_async._core.outcomes import ANSWERED
from invoicing_async._core.retry import Backoff
from invoicing_async._core.table import needs_operator
from invoicing_async._io.issuers import Issuers

if TYPE_CHECKING:
    from collections.abc import Sequence

    from invoicing_async._core.errors import InvoicingError
    from invoicing_async._core.outcomes import Outcome
    from invoicing_async._io.channel import Channels
    from invoicing_async._send.batch import Batch

__all__ = ["Blocked"]

#: The longest wait before an issuer whose credentials stay refused is tried again.
_MAX_RECHECK = 600.0


class _Wait:
    """One issuer whose documents wait: why, until when, and the next wait."""

    __slots__ = ("changed", "until", "waits", "why")

    def __init__(self, why: str, recheck: float) -> None:
        self.why = why
        self.waits = Backoff(max(recheck, 0.001), max(recheck, _MAX_RECHECK), jitter="none")
        #: Loop time its entries are claimed again; ``None``: tried again now (the
        #: current batch sends them, and its refusal makes it wait again).
        self.until: float | None = None
        #: Tried again because the credentials changed (not because its wait was over).
        self.changed = False


class Blocked:
    """The issuers whose documents wait for an operator (see the module docstring).

    Told by the feed of the issuers the batch stopped, and of every outcome; it says
    which issuers are not claimed now, and has the batch send again those whose wait
    is over or whose credentials changed.
    """

    def __init__(self, channels: Channels) -> None:
        self._issuers = channels if isinstance(channels, Issuers) else None
        self._recheck = self._issuers.recheck_refused if self._issuers is not None else 0.0
        self._revision = self._issuers.revision if self._issuers is not None else 0
        # Kept with the pool: a drainer's passes (one run each) and the workers of one
        # pool wait for the same issuers, each told once.
        self._waiting: dict[str, _Wait] = self._issuers.waiting if self._issuers is not None else {}
        self._seen: set[str | None] = set()  # the current batch's stopped issuers
        self._batch: Batch | None = None
        self._stops = 0  # how many issuers the current batch had stopped when looked at

    def observe(self, batch: Batch) -> None:
        """The issuers ``batch`` stopped wait (a pool's batch only)."""
        if self._batch is not batch:
            self._batch, self._seen, self._stops = batch, set(), 0
        stopped = batch.stopped_issuers
        if len(stopped) == self._stops or self._issuers is None:
            return
        self._stops = len(stopped)
        for issuer, error in stopped.items():
            if issuer not in self._seen and issuer is not None:
                self._seen.add(issuer)
                self._stopped(issuer, error)

    def outcome(self, outcome: Outcome) -> None:
        """An outcome: an issuer without credentials waits; one that answered goes on."""
        if self._issuers is None:
            return
        # A document naming no issuer is stored with none (""), and waits as one.
        issuer = outcome.issuer or ""
        error = outcome.error
        if error is not None and needs_operator(error):
            if issuer not in self._seen:
                self._seen.add(issuer)
                self._stopped(issuer, error)
        elif outcome.status in ANSWERED and (wait := self._waiting.pop(issuer, None)) is not None:
            log.info(
                "outbox worker: issuer %s's %s: its documents are sent again",
                issuer,
                "new credentials took effect" if wait.changed else "credentials work again",
                extra={"invoicing.issuer": issuer},
            )

    def skipped(self) -> Sequence[str]:
        """The issuers whose entries are not claimed now."""
        now = _now()
        return [
            issuer
            for issuer, wait in self._waiting.items()
            if wait.until is not None and now < wait.until
        ]

    def why(self, issuer: str) -> str:
        """Why ``issuer``'s documents wait."""
        wait = self._waiting.get(issuer)
        return wait.why if wait is not None else "unknown"

    async def retry(self, batch: Batch) -> None:
        """Have ``batch`` send again the waiting issuers that are due, at once.

        Due: its wait is over, or the pool's credentials changed (a credentials file
        read again, a reload). Their entries are claimed again from now on, and the
        batch sends their documents with the credentials the pool resolves now.
        """
        due = self._due()
        if not due:
            return
        self.observe(batch)
        self._seen.difference_update(due)  # a refusal again makes it wait again
        await batch.resume(due)
        self._stops = len(batch.stopped_issuers)

    def woken(self) -> asyncio.Future[None] | None:
        """Done at the pool's next change of credentials (a pool's worker only).

        Whether an issuer waits or not: one may come to wait before the change.
        """
        return self._issuers.changed() if self._issuers is not None else None

    def _due(self) -> list[str]:
        if not self._waiting or self._issuers is None:
            return []
        now = _now()
        revision = self._issuers.refresh()
        if revision != self._revision:
            self._revision = revision
            for wait in self._waiting.values():
                if wait.until is not None:
                    wait.until, wait.changed = now, True
        due = []
        for issuer, wait in self._waiting.items():
            if wait.until is not None and wait.until <= now:
                wait.until = None  # tried by the batch: waits again if stopped again
                due.append(issuer)
        return due

    def _stopped(self, issuer: str, error: InvoicingError) -> None:
        if self._issuers is not None:
            self._issuers.distrust(issuer)  # its credentials resolved again when tried
        wait = self._waiting.get(issuer)
        first = wait is None
        if wait is None:
            wait = self._waiting[issuer] = _Wait(str(error), self._recheck)
        wait.why, wait.changed = str(error), False
        seconds = wait.waits.next()
        wait.until = _now() + seconds
        log.log(
            logging.WARNING if first else logging.INFO,  # INFO after every new try
            "outbox worker: %s wait: %s; tried again in %.0f s, or as soon as the "
            "credentials change (a credentials file changed, SIGHUP)",
            f"issuer {issuer}'s documents" if issuer else "documents that name no issuer",
            error,
            seconds,
            extra={"invoicing.issuer": issuer},
        )


def _now() -> float:
    return asyncio.get_running_loop().time()
