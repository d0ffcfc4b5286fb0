"""What the requests of one batch (or one issuer of a batch) share: budget, breaker, waits.

A batch owns these and hands them to each document's :class:`~._machine.Attempts` as
:class:`Shared`; a single call shares nothing (:data:`SINGLE`). They count and remember;
what counts against them is the table's (:data:`~._table.RULES`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from .errors import InvoicingError, TransportError
from .table import RULES, Blame, classify

if TYPE_CHECKING:
    from .retry import RetryPolicy
    from .table import Kind

__all__ = ["SINGLE", "Breaker", "Budget", "ReauthWaits", "Shared"]


class Budget:
    """Retries a batch may spend: a floor plus a share per document started."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._tokens = float(policy.min_budget)
        self._ratio = policy.budget_ratio

    def started(self) -> None:
        """One more document: a little more budget."""
        self._tokens += self._ratio

    def take(self) -> bool:
        """Spend one retry, if any is left."""
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


class Breaker:
    """Stops a batch (or one issuer's documents in it) that can only fail.

    It opens after ``threshold`` answers in a row that blame the configuration (an
    answer that does not blame it ends the row), or at once for one that leaves nothing
    to send (:attr:`Blame.ISSUER`, :attr:`Blame.EVERYONE`); :attr:`error` then says why,
    and :attr:`everyone` whether nothing can be sent for anyone (no provider key, a
    closed client) rather than for this issuer.
    """

    def __init__(self, threshold: int | None) -> None:
        self._threshold = threshold
        self._run = 0
        self.error: InvoicingError | None = None
        self.everyone = False

    def record(self, error: InvoicingError | None, kind: Kind | None = None) -> None:
        """One answer (``None``: a success), judged by :data:`RULES` as ``kind``.

        ``kind`` is the answer's classification unless given (a refined one).
        """
        if error is not None and kind is None:
            kind = classify(error)
        blame = Blame.NONE if error is None or kind is None else RULES[kind].breaker
        if blame is Blame.NONE:
            self._run = 0
            return
        assert error is not None  # noqa: S101  (only an error blames)
        if blame is not Blame.CONFIG:
            self.trip(error, everyone=blame is Blame.EVERYONE)
            return
        self._run += 1
        if self._threshold is not None and self._run >= self._threshold:
            self.trip(
                TransportError(
                    f"not sent: the batch stopped after {self._run} consecutive answers that "
                    f"blame the configuration (last: {error})",
                    maybe_sent=False,
                )
            )

    def trip(self, error: InvoicingError, *, everyone: bool = False) -> None:
        """Open now: nothing more can be sent (``everyone``: for any issuer)."""
        if self.error is None:
            self.error = error
        self.everyone = self.everyone or everyone

    def reset(self) -> None:
        """Close again: what opened it may be put right (its issuer's credentials changed)."""
        self._run = 0
        self.error = None
        self.everyone = False


class ReauthWaits:
    """The re-authentication cooldowns a batch waits out (``REAUTH`` answers).

    Every document that meets a 401 while no new token may be requested waits for the
    same moment: the end of the cooldown. Those waits form one *window*, however many
    documents join it, so a provider that revokes every token within a second costs
    one window per cooldown, never one per document. After ``limit`` windows in a row
    without an answer to an accepted token in between (:meth:`progress`), documents
    stop waiting: a 401 that new tokens do not cure is no longer the token's fault.
    """

    #: Windows closer than this are one (the cache's and the loop's clocks differ a little).
    _SAME = 0.25

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._windows = 0
        self._until = float("-inf")

    def enter(self, until: float) -> bool:
        """Whether a document may wait until ``until`` (loop time) for a new token."""
        if until <= self._until + self._SAME:
            return True
        if self._windows >= self._limit:
            return False
        self._windows += 1
        self._until = until
        return True

    def progress(self) -> None:
        """A request was answered with a token: the run of fruitless windows ends."""
        self._windows = 0


@attrs.frozen
class Shared:
    """What the requests of one batch share (a single call shares nothing)."""

    budget: Budget
    breaker: Breaker
    #: ``None``: wait for a new token only within a deadline (a single call).
    reauth: ReauthWaits | None = None
    #: What a 429 costs of ``max_attempts``: a batch adapts its concurrency meanwhile.
    throttled_cost: float = 0.25

    @classmethod
    def of(cls, policy: RetryPolicy) -> Shared:
        """A batch's (or a batch's issuer's) shared state under ``policy``."""
        return cls(
            Budget(policy), Breaker(policy.circuit_breaker), ReauthWaits(policy.reauth_waits)
        )


class _Unlimited(Budget):
    def __init__(self) -> None:
        self._tokens = float("inf")
        self._ratio = 0.0

    def take(self) -> bool:
        return True


class _NoBreaker(Breaker):
    """A single call stops by itself: nothing else to stop."""

    def __init__(self) -> None:
        super().__init__(None)

    def record(self, error: InvoicingError | None, kind: Kind | None = None) -> None:
        pass

    def trip(self, error: InvoicingError, *, everyone: bool = False) -> None:
        pass


#: A single call's shared state: no budget, no breaker, a 429 costs a whole attempt.
SINGLE = Shared(_Unlimited(), _NoBreaker(), None, throttled_cost=1.0)
