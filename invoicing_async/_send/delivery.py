"""One document's delivery: the decision core driven for a document.

A :class:`Delivery` is what a document adds to the core's :class:`~._decision.Attempts`
(a deduplicated write): its identity, against which every record answered is checked
(a record of another document is a :class:`~invoicing_async.ForeignRecordError`, which
the core treats as "may or may not hold it"), its place in the input, and the
:class:`~invoicing_async.Outcome` the ending becomes. Single calls, batches and sales
all deliver documents through it; the loop is :func:`~._attempts.drive`, the rules are
the core's (:mod:`._decision`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from invoicing_async._core.errors import InvoicingError
from invoicing_async._core.log import delivery as log
from invoicing_async._core.machine import Attempts
from invoicing_async._core.outcomes import Outcome, OutcomeStatus
from invoicing_async._core.safety import Safety
from invoicing_async._core.shared import SINGLE
from invoicing_async._core.table import foreign_record, held_record
from invoicing_async._doc.document import foreign_fields
from invoicing_async._io.loop import drive, log_ending, step

if TYPE_CHECKING:
    import random
    from collections.abc import Awaitable, Callable

    from invoicing_async._core.machine import End, Wait
    from invoicing_async._core.models import DocumentResult
    from invoicing_async._core.retry import RetryPolicy
    from invoicing_async._core.shared import Shared
    from invoicing_async._doc.document import Identity, Prepared
    from invoicing_async._io.channel import Channel


__all__ = ["Delivery"]


class Delivery:
    """The attempts at one document, until its outcome is known.

    :param policy: the retry policy.
    :param shared: what the batch's documents share (:data:`~._decision.SINGLE` alone).
    :param deadline: loop time by which the document must be settled, or ``None``.
    :param maybe_committed: an earlier run may have committed it (a resumed batch):
        a 409 is then its own commit, not a duplicate.
    :param sale: a sale: the answers the decision core says end a sale end it at once.
    :param safety: a document submission is a ``DEDUPLICATED_WRITE``.
    :param on_leave: told (with the delivery) as each request leaves, before the core
        is; it may raise to keep the request from leaving (a batch that stops).
    """

    __slots__ = ("_attempts", "_on_leave", "_prepared", "_route", "identity", "index", "key")

    def __init__(
        self,
        key: str,
        index: int,
        identity: Identity,
        *,
        policy: RetryPolicy,
        shared: Shared = SINGLE,
        deadline: float | None = None,
        maybe_committed: bool = False,
        sale: bool = False,
        rng: random.Random | None = None,
        safety: Safety = Safety.DEDUPLICATED_WRITE,
        on_leave: Callable[[Delivery], object] | None = None,
    ) -> None:
        self.key = key
        self.index = index
        self.identity = identity
        self._attempts = Attempts(
            safety,
            policy,
            deadline=deadline,
            shared=shared,
            maybe_committed=maybe_committed,
            sale=sale,
            rng=rng,
        )
        self._on_leave = on_leave

    @property
    def attempts(self) -> int:
        """Requests sent."""
        return self._attempts.attempts

    @property
    def maybe_committed(self) -> bool:
        """Whether the provider may hold the document (an attempt may have been processed)."""
        return self._attempts.maybe_committed

    @property
    def core(self) -> Attempts:
        """The decision core's state of this document's attempts."""
        return self._attempts

    @property
    def label(self) -> str:
        """What its log lines name."""
        return f"invoice {self.key}"

    @property
    def fields(self) -> dict[str, str | None]:
        """What its log lines carry as ``extra``."""
        return {"invoicing.document_key": self.key, "invoicing.issuer": self.identity.issuer}

    async def run(self, route: Channel, prepared: Prepared) -> Outcome:
        """Send ``prepared`` through ``route`` until the outcome is known (a single call)."""
        self._route = route
        self._prepared = prepared
        end = await drive(self._attempts, self._attempt_on_route, subject=self, log=log)
        return self.outcome(end)

    def step(self, route: Channel, prepared: Prepared) -> Awaitable[End | Wait]:
        """At most one attempt through ``route``, as the core says (a batch's worker).

        No closure and no partial for the attempt: it is a method of the delivery.
        """
        self._route = route
        self._prepared = prepared
        return step(self._attempts, self._attempt_on_route, subject=self, log=log)

    def _attempt_on_route(self, timeout: float | None) -> Awaitable[DocumentResult]:
        """One attempt: the record, checked against the document's identity."""
        return self._checked(self._route.send(self._prepared, timeout=timeout, leaving=self._left))

    def _left(self) -> None:
        """The attempt's request leaves (the route says so): it may be processed now."""
        if self._on_leave is not None:
            self._on_leave(self)  # may raise: then it does not leave
        self._attempts.left()

    async def _checked(self, sending: Awaitable[DocumentResult]) -> DocumentResult:
        """The record ``sending`` answers, checked against the document's identity."""
        try:
            record = await sending
        except InvoicingError as exc:
            # A 409's record of another document is a foreign record, not a duplicate.
            held = held_record(exc)
            foreign = None if held is None else self._foreign(held, held=True)
            if foreign is not None:
                raise foreign from None
            raise
        mismatch = self._foreign(record, held=False)
        if mismatch is not None:
            raise mismatch
        return record

    def give_up(self, why: str, error: InvoicingError | None = None) -> Outcome:
        """Stop before (or between) attempts: see :meth:`~._decision.Attempts.give_up`."""
        return self._told(self._attempts.give_up(why, error))

    def refuse(self, error: InvoicingError) -> Outcome:
        """It cannot be sent: refused, or not sent, as the decision core says.

        Refused: it cannot be read, serialised or encrypted. Not sent: no provider key,
        no credentials for its issuer.
        """
        end = self._attempts.unsendable(error)
        if end.status is not OutcomeStatus.REJECTED:
            return self._told(end)
        log.warning(
            "invoice %s: rejected before sending: %s",
            self.key,
            error,
            extra={**self.fields, "invoicing.outcome": "rejected"},
        )
        return self.outcome(end)

    def interrupted(self) -> Outcome:
        """The outcome to record when the delivery is cancelled midway."""
        return self.outcome(self._attempts.interrupted())

    def _told(self, end: End) -> Outcome:
        log_ending(end, subject=self, log=log)
        return self.outcome(end)

    def outcome(self, end: End) -> Outcome:
        """The document's outcome for the core's ending."""
        return Outcome(
            index=self.index,
            key=self.key,
            issuer=self.identity.issuer,
            status=end.status,
            result=end.result,
            error=end.error,
            attempts=end.attempts,
        )

    def _foreign(self, record: DocumentResult, *, held: bool) -> InvoicingError | None:
        mismatches = foreign_fields(self.identity, record)
        return foreign_record(record, mismatches, held=held) if mismatches else None
