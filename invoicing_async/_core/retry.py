"""How a request is retried: :class:`RetryPolicy`, and every backoff delay of the package.

Every wait of the library comes from one function, :func:`backoff` (capped exponential
with jitter, as stamina's): :meth:`RetryPolicy.delay` (the attempts of documents,
operations and token grants), :meth:`RetryPolicy.delay_after_round` (an outbox entry
between rounds) and :class:`Backoff`, the waits of a loop that tries again until
something answers (a probe of a provider that is down, a database or Redis that went
away, a worker whose batch stopped). *Whether* to retry is the decision core's
(:mod:`.table`, :mod:`.machine`). :func:`set_instant_retries` is the switch behind
:mod:`invoicing_async.testing`: with it on, every delay of a :class:`RetryPolicy` is zero.
Pure: it says how long; the waiting itself is :mod:`invoicing_async._io.waits`'.
"""

from __future__ import annotations

import random
from typing import Literal

import attrs

__all__ = [
    "Backoff",
    "Jitter",
    "RetryPolicy",
    "backoff",
    "retries_are_instant",
    "set_instant_retries",
]

#: How a wait is drawn below its ceiling: ``"full"`` uniform in ``[0, ceiling]`` (the
#: attempts of one request: AWS's "full jitter"), ``"equal"`` in ``[ceiling/2, ceiling]``
#: (waits that must grow however the draw falls, spread across a fleet), ``"none"`` the
#: ceiling itself.
Jitter = Literal["full", "equal", "none"]


def backoff(
    failures: int,
    *,
    base: float,
    cap: float,
    jitter: Jitter = "full",
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait after ``failures`` failures in a row (from 1): the one backoff.

    The ceiling is ``min(cap, base * 2**(failures-1))``; the wait is drawn below it as
    ``jitter`` says.
    """
    ceiling = min(cap, base * 2.0 ** max(0, failures - 1))
    if jitter == "none":
        return ceiling
    low = ceiling / 2 if jitter == "equal" else 0.0
    return (rng or random).uniform(low, ceiling)


class Backoff:
    """The waits of a loop that tries until something answers, from :func:`backoff`.

    ``next()`` after each failure gives a longer wait (up to ``cap``); ``reset()`` after
    a success starts again from ``base``.
    """

    __slots__ = ("_base", "_cap", "_jitter", "failures")

    def __init__(self, base: float, cap: float, *, jitter: Jitter = "equal") -> None:
        self._base = base
        self._cap = max(base, cap)
        self._jitter: Jitter = jitter
        #: Failures in a row so far.
        self.failures = 0

    def __repr__(self) -> str:
        return f"<Backoff {self.failures} failure(s), {self._base:g}-{self._cap:g} s>"

    def next(self) -> float:
        """One more failure: the seconds to wait before the next try."""
        self.failures += 1
        return backoff(self.failures, base=self._base, cap=self._cap, jitter=self._jitter)

    def reset(self) -> None:
        """It answered: the next failure waits ``base`` again."""
        self.failures = 0


_instant = False


def set_instant_retries(enabled: bool) -> None:
    """Make every backoff delay zero (``True``) or restore them (``False``)."""
    global _instant  # noqa: PLW0603  (one process-wide switch, like stamina's testing mode)
    _instant = enabled


def retries_are_instant() -> bool:
    """Whether backoff delays are switched off."""
    return _instant


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How a document (or a token request) is retried.

    .. versionadded:: 0.1.0
    """

    #: Requests per document at most (the first one included). In a batch a 429 costs a
    #: quarter attempt: the batch halves its concurrency, and a document is not given up
    #: while it finds what the provider takes.
    max_attempts: int = 6
    #: Backoff: a random delay up to ``base_delay * 2**(attempt-1)``, at most ``max_delay``.
    base_delay: float = 0.25
    max_delay: float = 15.0
    #: Re-send after an ambiguous failure. Safe only with a provider that detects
    #: duplicates (the real service does); without it such documents end ``UNKNOWN``.
    resend_ambiguous: bool = True
    #: Retries the whole batch may spend: ``min_budget`` plus ``budget_ratio`` per document.
    budget_ratio: float = 0.5
    min_budget: int = 20
    #: Seconds for one request, body included (``None``: the client's own timeout).
    attempt_timeout: float | None = 30.0
    #: Consecutive answers blaming the configuration (401/403 to documents, unknown
    #: endpoints, redirects) after which a batch stops sending: the documents not sent
    #: end ``NOT_SENT``. ``None``: never. Refused credentials, a missing or expired
    #: provider key and a closed client stop a batch at once, whatever this says.
    circuit_breaker: int | None = 10
    #: Re-authentication cooldowns a batch waits out in a row with no document answered
    #: in between. A 401 that a revoked access token may have caused, while no new token
    #: may be requested yet (``TokenCache(reauth_cooldown=...)``), makes the document
    #: wait for the next token: every document that meets it waits for the same one, so
    #: a provider that revokes tokens within a second costs one wait per cooldown. After
    #: this many such waits without progress, those documents end ``NOT_SENT``. A
    #: single call waits only within its ``timeout``.
    #:
    #: .. versionadded:: 0.4.0
    reauth_waits: int = 3
    #: Outbox workers and drainers: rounds an entry may fail ``unknown`` (the provider
    #: may have received it: a 5xx, a reset or a timeout after sending, a 408), each of
    #: up to ``max_attempts`` requests, before it is *parked*: kept with its outcome,
    #: never claimed again until an explicit retry (``ledger retry``, ``retry()``).
    #: Rounds that end ``not_sent`` (the provider certainly never processed the
    #: document: an outage, a 429/503, the breaker) do not count. ``None``: never park.
    #:
    #: .. versionadded:: 0.4.0
    max_rounds: int | None = 10
    #: Outbox workers and drainers: an entry put back after a failed round waits
    #: ``round_delay * 2**(round-1)`` seconds, at most ``max_round_delay``, the upper
    #: half at random (:meth:`delay_after_round`), before it is claimed again; ``round``
    #: counts the rounds that count against ``max_rounds``, so after a ``not_sent``
    #: round (an outage) it waits ``round_delay`` at most.
    #:
    #: .. versionadded:: 0.4.0
    round_delay: float = 2.0
    max_round_delay: float = 300.0

    def __attrs_post_init__(self) -> None:
        if self.max_rounds is not None and self.max_rounds < 1:
            raise ValueError("max_rounds must be at least 1 (or None: never park)")

    def delay(
        self,
        attempt: int,
        *,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (from 1).

        ``Retry-After`` when the provider sent one, else capped exponential backoff with
        full jitter: uniform in ``[0, min(max_delay, base_delay * 2**(attempt-1))]``.
        Always zero while :func:`set_instant_retries` is on.
        """
        if _instant:
            return 0.0
        if retry_after is not None:
            return max(0.0, float(retry_after))
        return backoff(attempt, base=self.base_delay, cap=self.max_delay, rng=rng)

    def delay_after_round(self, rounds: int, *, rng: random.Random | None = None) -> float:
        """Seconds an outbox entry waits after its failed round number ``rounds`` (from 1).

        Capped exponential backoff with "equal jitter": uniform in ``[cap/2, cap]`` for
        ``cap = min(max_round_delay, round_delay * 2**(rounds-1))``, so the wait grows
        round after round however the draw falls, and a fleet's entries spread out.
        Always zero while :func:`set_instant_retries` is on.

        .. versionadded:: 0.4.0
        """
        if _instant:
            return 0.0
        return backoff(
            rounds, base=self.round_delay, cap=self.max_round_delay, jitter="equal", rng=rng
        )
