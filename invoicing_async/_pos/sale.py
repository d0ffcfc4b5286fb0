"""Deferred submission: a sale never waits on the provider.

A :class:`Deferral` binds a client to a durable queue (an outbox) and a latency budget.
:meth:`Deferral.submit_or_defer` sends a sale as a single call does; if the provider
has not answered within the budget, or is certainly unreachable, the document is made
durable in the outbox and a :class:`DeferredReceipt` is returned instead. Once the
provider is known to be down, later sales are deferred at once, without spending their
budget, until the drainer sees it answer again. A definite refusal is never deferred.

The drainer (:mod:`._drainer`) is the outbox worker of the deferral's outbox: it sends
the deferred documents as soon as the provider answers, and hands each final outcome to
the application.

The identity rule decides what may change across the boundary: a document whose first
attempt may have reached the provider is stored byte-identical (the provider's 409 makes
its re-sending safe); only one certainly not sent is stamped (:mod:`._stamp`:
``TransmissionFailure: 1``, and the application's ``stamp`` hook).

A deferral wraps a client rather than giving it a mode: ``submit_secure`` keeps its
return type and behaviour, a sale that may be deferred says so in its own method's type
(``DocumentResult | DeferredReceipt``), and the client stays free of storage and of the
drainer's life (the outbox knows the client, never the reverse).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import socket
import time
from typing import TYPE_CHECKING, Any

from invoicing_async._client.outbox import _till
from invoicing_async._client.surface import engine_of
from invoicing_async._core import calls
from invoicing_async._core.errors import InvoicingError
from invoicing_async._core.log import deferral as log
from invoicing_async._core.outcomes import OutcomeStatus
from invoicing_async._core.retry import RetryPolicy
from invoicing_async._core.table import deferral, last_answer
from invoicing_async._doc.checked import Checked, require_valid
from invoicing_async._doc.document import Prepared, SendOptions, identify
from invoicing_async._doc.qr import _signed_url
from invoicing_async._durable.deferrals import DeferralRecord
from invoicing_async._durable.enqueue import Ready

from ._drainer import Drainer
from ._provider import ProviderState
from ._stamp import stamp_sale
from .records import Backlog, DeferralReason, receipt_of

if TYPE_CHECKING:
    import os
    from collections.abc import AsyncIterator, Awaitable, Callable
    from types import TracebackType

    from invoicing_async._client.client import InvoicingClient
    from invoicing_async._client.outbox import PostgresOutbox, SqliteOutbox
    from invoicing_async._client.pool import IssuerPool
    from invoicing_async._core.entries import LedgerEntry
    from invoicing_async._core.models import DocumentResult
    from invoicing_async._core.outcomes import Outcome
    from invoicing_async._doc.document import Document, Identity

    from .records import DeferredOutcome, DeferredReceipt

__all__ = ["Deferral"]

#: Seconds a sale may outlive its budget while an attempt in progress is cancelled.
_GRACE = 0.1


class Deferral:
    """Deferred submission for a POS: a sale never waits on the provider.

    ::

        async with InvoicingClient(...) as client, Deferral(client, "till.db") as till:
            answer = await till.submit_or_defer(invoice)
            if isinstance(answer, DeferredReceipt):
                print_receipt(qr=answer.offline_qr_url)   # mark and QR come later
            else:
                print_receipt(qr=answer.qr_code_string)

    Within ``budget`` seconds :meth:`submit_or_defer` returns the provider's record, as
    :meth:`~invoicing_async.InvoicingClient.submit_secure` does; past it, or at once when
    the provider is certainly unreachable (a refused connection, a 429), the document is
    durable in ``outbox`` before a :class:`DeferredReceipt` is returned. Once the
    provider is known down, later sales are deferred at once, until the drainer sees it
    answer again. A definite refusal (400, a foreign record, refused credentials, no
    provider key) is never deferred: it raises as it does today.

    While open (``async with``, or :meth:`start` and :meth:`close`), the deferral's
    drainer sends what waits in the outbox, oldest first, as soon as the provider
    answers: one probe at a time while it is down (``probe_delay`` doubling up to
    ``probe_max_delay``), then with the batch machinery's adaptive limit and retry
    budget. It resumes from the outbox when opened again (after a crash too), and is the
    same worker as ``invoicing-async worker`` and ``run_worker`` (one at a time on a
    SQLite outbox). Each final outcome is delivered to ``on_outcome`` (or
    :meth:`outcomes`) at least once: again after a restart if the application had not
    taken it yet.

    :param client: the :class:`~invoicing_async.InvoicingClient` that sends, or an
        :class:`~invoicing_async.IssuerPool`: a till of many shops. Each sale then goes
        to the issuer its ``Issuer.Vat`` names, is deferred under its own identity
        (issuer and key), its offline QR signed with that issuer's API key, and the one
        drainer sends every shop's deferred sales through the pool, each issuer isolated
        and served in turn.
    :param outbox: where deferred sales wait: a SQLite file path, a
        :class:`~invoicing_async.outbox.SqliteOutbox`, or a
        :class:`~invoicing_async.outbox.PostgresOutbox` shared by a fleet of tills.
    :param budget: seconds a sale may wait for the provider (a call may pass it by
        ``0.1`` s plus the outbox's write).
    :param transmission_failure: stamp every deferred sale that certainly never left as
        a document issued during a loss of connection to the provider:
        ``TransmissionFailure: 1``, written into a dict or a typed document's JSON (one
        that carries the member already, in any spelling, keeps its own value; JSON
        bytes or text are stored as given). ``False``: not written.
    :param stamp: optional, a plain function: what else a sale certainly never sent
        needs before it is stored. Called with the sale as given to
        :meth:`submit_or_defer` (a mapping, a typed document such as
        :class:`~invoicing_async.documents.RetailReceipt`, or JSON bytes or text; a
        checked one unwrapped), it returns the document to store and send: of any of
        those kinds, of the same identity (issuer, series, number, internal document
        id), one the provider would take; ``TransmissionFailure`` is written into it
        then. A hook that raises or returns anything else never costs the sale: it is
        stored as given (``TransmissionFailure`` written), the failure logged (ERROR,
        ``invoicing_async.deferral``) and kept in :attr:`DeferredReceipt.stamp_error`.
    :param portal_url: the provider's portal: receipts get the offline QR url
        (:func:`~invoicing_async.qr.offline_qr_url`, signed with the client's API key).
    :param on_outcome: called (or awaited) with each :class:`DeferredOutcome`; the
        outcome counts as delivered when it returns. Without it, iterate
        :meth:`outcomes`.
    :param warn_after: seconds the oldest deferred sale may wait before a WARNING
        (``invoicing_async.deferral``, at most once a minute).
    :param retry: the drainer's :class:`~invoicing_async.RetryPolicy`.
    :param concurrency: documents the drainer sends at once at most.
    :param probe_delay: seconds between the drainer's probes of a provider that is down,
        at first; doubled after each failed probe up to ``probe_max_delay``.
    :param poll: seconds between the drainer's looks at the outbox when idle (for sales
        deferred by other processes or tills).
    :param origin: whose outcomes this deferral delivers, in an outbox shared by tills
        (default: the host name).

    .. versionadded:: 0.3.0
    .. versionchanged:: 0.4.0 ``client`` may be an :class:`~invoicing_async.IssuerPool`.
    .. versionchanged:: 0.5.0 a sale that never left is stamped without a hook
       (``transmission_failure``); a hook that fails never costs the sale.
    """

    def __init__(
        self,
        client: InvoicingClient | IssuerPool,
        outbox: SqliteOutbox | PostgresOutbox | str | os.PathLike[str],
        *,
        budget: float = 2.0,
        transmission_failure: bool = True,
        stamp: Callable[[Any], Document] | None = None,
        portal_url: str | None = None,
        on_outcome: Callable[[DeferredOutcome], Awaitable[None] | None] | None = None,
        warn_after: float = 3600.0,
        retry: RetryPolicy | None = None,
        concurrency: int = 4,
        probe_delay: float = 1.0,
        probe_max_delay: float = 60.0,
        poll: float = 5.0,
        origin: str | None = None,
    ) -> None:
        if not budget > 0:
            raise ValueError("budget must be positive")
        self._engine = engine = engine_of(client)
        self._budget = budget
        self._stamp = stamp
        self._transmission_failure = transmission_failure
        self._portal_url = portal_url
        self._outbox = _till(outbox)
        self._origin = origin if origin is not None else socket.gethostname()
        self._state = ProviderState(probe_delay, probe_max_delay)
        self._drainer = Drainer(
            engine,
            self._outbox,
            self._state,
            check=engine.transport.ensure_usable,  # a closed client stops it
            origin=self._origin,
            on_outcome=on_outcome,
            warn_after=warn_after,
            retry=retry or RetryPolicy(max_attempts=2, base_delay=0.5, attempt_timeout=10.0),
            concurrency=concurrency,
            poll=poll,
        )

    def __repr__(self) -> str:
        return f"<Deferral {self._outbox!r} budget={self._budget:g}s>"

    async def __aenter__(self) -> Deferral:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Open the outbox and start the drainer (idempotent)."""
        await self._outbox.open()
        self._drainer.start()

    async def close(self) -> None:
        """Stop the drainer (requests in flight stay re-sendable) and close the outbox."""
        await self._drainer.stop()
        await self._outbox.close()

    @property
    def provider_down(self) -> DeferralReason | None:
        """Why the provider is known down (sales are deferred at once), or ``None``."""
        return self._state.down

    @property
    def backlog(self) -> Backlog:
        """Deferred sales not yet transmitted, as last counted (see :meth:`refresh_backlog`).

        The drainer counts after every pass and every ``poll``; a sale deferred here
        counts at once.
        """
        count, oldest, parked = self._drainer.backlog
        when = dt.datetime.fromtimestamp(oldest, dt.timezone.utc) if oldest else None
        return Backlog(count, when, parked)

    async def refresh_backlog(self) -> Backlog:
        """Count the deferred sales not yet transmitted now (and warn if one is too old)."""
        await self._drainer.refresh_backlog()
        return self.backlog

    def outcomes(self) -> AsyncIterator[DeferredOutcome]:
        """Final outcomes of deferred sales, as they arrive (without ``on_outcome``).

        An outcome counts as delivered when the loop asks for the next one: one the
        application stopped at is delivered again (after a restart, too). One consumer
        at a time.
        """
        return self._drainer.outcomes()

    # --- the sale ------------------------------------------------------------------------

    @calls.traced("invoicing.sale")
    async def submit_or_defer(
        self, document: Document, *, encrypted: bool = True, budget: float | None = None
    ) -> DocumentResult | DeferredReceipt:
        """Submit ``document`` within the budget, or defer it durably.

        :param document: a JSON-serialisable mapping, a typed document
            (:mod:`invoicing_async.documents`: a
            :class:`~invoicing_async.documents.RetailReceipt` …), one marked
            :func:`~invoicing_async.documents.checked`, or the exact JSON bytes to send.
        :param encrypted: ``/Invoice/secure`` (default) or ``/Invoice/json``.
        :param budget: this sale's budget in seconds (default: the deferral's).
        :returns: the provider's record, or a :class:`DeferredReceipt` once the
            document is durable in the outbox (stamped if it certainly never left: see
            ``transmission_failure`` and ``stamp``).
        :raises InvalidDocumentError: the provider would refuse the document (its
            errors, by :func:`invoicing_async.documents.check`), or it holds a member
            twice with different values (:class:`~invoicing_async.AmbiguousDocumentError`,
            the ``stamp`` hook's document too): raised before anything is sent or
            stored, so that no receipt is printed for it.
        :raises DuplicateDocumentError: the provider held the document before this call.
        :raises InvoicingError: a definite refusal (400, a foreign record, refused
            credentials, no provider key): never deferred.

        .. versionchanged:: 0.5.0 typed documents; a ``stamp`` hook that changes the
           document's identity no longer raises ``ValueError``: the sale is stored as
           given, and the receipt's ``stamp_error`` says why.
        """
        engine = self._engine
        engine.transport.ensure_usable()
        # A sale the provider would refuse is refused here, at the till: before any
        # receipt, never queued (the rules live in _checked, the client's one set).
        require_valid(document)
        if isinstance(document, Checked):  # checked now: not again where it is serialised
            document = document.document
        await self.start()
        budget = self._budget if budget is None else budget
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        key, identity = identify(document)  # an ambiguous sale: refused, before any receipt
        calls.describe(key, identity.issuer)
        # Prepared even when it will not be sent now: a document that cannot be read or
        # encrypted (no usable provider key) is refused here, never deferred.
        body = await engine.preparer.prepare_one(document, encrypted=encrypted)
        if isinstance(body, InvoicingError):
            raise body
        down = self._state.down
        if down is not None:
            with self._state.deferring():
                return await self._defer(
                    document, key, identity, encrypted, down, plain=body[1], attempts=0,
                    maybe_sent=False,
                    detail=f"the provider is down ({down.value}): deferred without a request",
                )  # fmt: skip
        prepared = Prepared(key, identity, body[0], SendOptions(encrypted=encrypted), plain=body[1])
        outcome = await engine.deliver(prepared, deadline=deadline, sale=True, grace=_GRACE)
        timed_out = loop.time() >= deadline
        if outcome.status is OutcomeStatus.ACCEPTED and outcome.result is not None:
            self._state.mark_up("a sale was answered")
            return outcome.result
        error = last_answer(outcome.error)
        why = deferral(error, out_of_time=timed_out)
        if why is None:  # a definite answer (a foreign record too): never deferred
            if outcome.status in (OutcomeStatus.REJECTED, OutcomeStatus.DUPLICATE):
                self._state.mark_up("a sale was answered")
            raise error or _unexpected(outcome)
        reason = DeferralReason(why)
        with self._state.deferring():  # the drainer's pass must not undo this mark_down
            self._state.mark_down(reason)
            return await self._defer(
                document, key, identity, encrypted, reason, plain=body[1],
                attempts=outcome.attempts,
                maybe_sent=outcome.status is not OutcomeStatus.NOT_SENT,
                detail=str(error) if error is not None else "no answer within the budget",
            )  # fmt: skip

    async def _defer(
        self,
        document: Document,
        key: str,
        identity: Identity,
        encrypted: bool,
        reason: DeferralReason,
        *,
        plain: bytes,
        attempts: int,
        maybe_sent: bool,
        detail: str,
    ) -> DocumentResult | DeferredReceipt:
        """Make the sale durable in the outbox; its receipt (or an earlier final outcome).

        ``plain`` is the document as it was serialised to be sent: stored as it is when
        the document may have reached the provider (the identity rule), else stamped.
        """
        body, stamped, stamp_error = plain, False, None
        if not maybe_sent and (self._transmission_failure or self._stamp is not None):
            body, stamped, stamp_error = stamp_sale(
                document, key, identity, plain=plain, hook=self._stamp,
                transmission_failure=self._transmission_failure,
                max_size=self._engine.preparer.max_document_size,
            )  # fmt: skip
        deferred = DeferralRecord(
            key=key,
            origin=self._origin,
            deferred_at=time.time(),
            reason=reason.value,
            maybe_sent=maybe_sent,
            stamped=stamped,
            attempts=attempts,
            offline_qr=await self._offline_qr(body, identity.issuer),
            detail=detail,
            issuer=identity.issuer or "",
            stamp_error=stamp_error,
        )
        ready = Ready(key, body, encrypted, hashlib.sha256(body).hexdigest(), deferred.issuer)
        stored = await self._outbox.deferrals.defer(ready, deferred)
        if stored.final is not None:
            return _final(stored.final)
        calls.deferred(reason.value)
        if stored.fresh:
            log.info(
                "invoice %s: deferred (%s)",
                key,
                reason.value,
                extra={"invoicing.outcome": "deferred", "invoicing.deferral.reason": reason.value},
            )
            self._drainer.deferred(stored.deferral)
        return receipt_of(stored.deferral)

    async def _offline_qr(self, body: bytes, issuer: str | None) -> str | None:
        if self._portal_url is None:
            return None
        try:
            sign = await self._engine.signer(issuer)
        except InvoicingError as exc:  # no credentials for the issuer: no signature
            log.debug("no offline QR: %s", exc)
            return None
        try:
            return _signed_url(body, self._portal_url, sign)
        except ValueError as exc:
            log.debug("no offline QR: %s", exc)
            return None


def _final(entry: LedgerEntry) -> DocumentResult:
    """A sale the outbox already holds a final outcome of: its record, or its refusal."""
    outcome = entry.outcome
    if outcome is not None and outcome.result is not None and outcome.ok:
        return outcome.result
    if outcome is not None and outcome.error is not None:
        raise outcome.error
    raise InvoicingError(f"the outbox holds a final outcome of {entry.key} without a record")


def _unexpected(outcome: Outcome) -> InvoicingError:
    return InvoicingError(f"invoice {outcome.key}: {outcome.status.value} without an error")
