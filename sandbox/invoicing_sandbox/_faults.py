"""Injected failures: what they are and which request gets one. Pure: no I/O.

A :class:`Fault` is a frozen description. Which request receives one is decided by a
:class:`FaultPlan`: scripted faults are taken in arrival order; random faults are decided
from ``(seed, document identity, attempt number)`` alone, so a concurrent client sees the
same faults per document however its requests interleave, and a retrying client always
gets through after ``max_per_document`` faulted attempts. A *poisoned* document gets its
fault on every attempt, until cured: what no amount of retrying gets through.

Faults act at one of two points, mirroring where real failures happen:

* *before the commit* (``latency``, ``status``, ``reset``, ``hang``): the provider never
  processes the request (except ``latency``, which only delays it);
* *after the commit* (everything else): the document is committed (or recognised as a
  duplicate) and then the *response* goes wrong, the case where a client cannot know
  whether it succeeded and must re-send to find out.

How a fault is written on the wire (a reset, a half body, a trickle) is the aiohttp
application's business (:mod:`._app`).
"""

from __future__ import annotations

import collections
import random
from typing import TYPE_CHECKING, Literal

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["BEFORE_COMMIT", "DEFAULT_RANDOM_KINDS", "Fault", "FaultKind", "FaultPlan", "Queue"]

FaultKind = Literal[
    "latency",
    "status",
    "reset",
    "hang",
    "commit_then_drop",
    "commit_then_500",
    "truncated",
    "non_json",
    "wrong_content_type",
    "trickle",
    "oversized",
    "foreign_record",
    "echo_secrets",
]

#: The scripted queues: for document requests, the other operations, token requests,
#: and refresh grants (which take their own first, then the token requests').
Queue = Literal["documents", "operations", "tokens", "refresh"]

#: Kinds applied before the request is processed; the others mangle the response.
BEFORE_COMMIT: frozenset[str] = frozenset({"latency", "status", "reset", "hang"})


@attrs.frozen(kw_only=True)
class Fault:
    """A failure injected into one request. Build it with the class methods.

    .. versionadded:: 0.1.0
    """

    kind: FaultKind
    #: Seconds: the delay of ``latency``, the interval between chunks of ``trickle``.
    seconds: float = 0.0
    #: The HTTP status of a ``status`` fault.
    code: int | None = None
    #: ``Retry-After`` sent with a ``status`` fault (delta seconds or an HTTP date).
    retry_after: int | str | None = None
    #: Body size of ``oversized``; chunk size of ``trickle``.
    size: int = 0
    #: ``oversized``: chunked transfer encoding instead of a ``Content-Length``.
    chunked: bool = False

    @classmethod
    def latency(cls, seconds: float) -> Fault:
        """Wait ``seconds`` before processing the request normally."""
        if seconds < 0:
            raise ValueError("latency must not be negative")
        return cls(kind="latency", seconds=seconds)

    @classmethod
    def status(cls, status: int, *, retry_after: int | str | None = None) -> Fault:
        """Answer ``status`` (408, 429, 5xx …) without processing: nothing is committed."""
        if not 400 <= status < 600:
            raise ValueError("a status fault needs a 4xx or 5xx status")
        return cls(kind="status", code=status, retry_after=retry_after)

    @classmethod
    def reset(cls) -> Fault:
        """Reset the TCP connection before processing: nothing is committed."""
        return cls(kind="reset")

    @classmethod
    def hang(cls) -> Fault:
        """Never answer (until the client gives up or the sandbox stops); nothing committed."""
        return cls(kind="hang")

    @classmethod
    def commit_then_drop(cls) -> Fault:
        """Commit, then close the connection without a response (a lost answer)."""
        return cls(kind="commit_then_drop")

    @classmethod
    def commit_then_500(cls) -> Fault:
        """Commit, then answer 500: the error lies, the document is held."""
        return cls(kind="commit_then_500")

    @classmethod
    def truncated(cls) -> Fault:
        """Commit, then send part of the body under a longer ``Content-Length`` and close."""
        return cls(kind="truncated")

    @classmethod
    def non_json(cls) -> Fault:
        """Commit, then answer with the right status but an HTML body (a proxy's page)."""
        return cls(kind="non_json")

    @classmethod
    def wrong_content_type(cls) -> Fault:
        """Commit, then send the real record labelled ``Content-Type: text/html``."""
        return cls(kind="wrong_content_type")

    @classmethod
    def trickle(cls, seconds: float, *, chunk_size: int = 1) -> Fault:
        """Commit, then write the body ``chunk_size`` bytes at a time, ``seconds`` apart."""
        if seconds < 0 or chunk_size < 1:
            raise ValueError("trickle needs seconds >= 0 and chunk_size >= 1")
        return cls(kind="trickle", seconds=seconds, size=chunk_size)

    @classmethod
    def oversized(cls, size: int, *, chunked: bool = False) -> Fault:
        """Commit, then send a ``size``-byte body (``Content-Length``, or chunked)."""
        if size < 0:
            raise ValueError("size must not be negative")
        return cls(kind="oversized", size=size, chunked=chunked)

    @classmethod
    def foreign_record(cls) -> Fault:
        """Commit, then answer with another document's record (other number and id).

        A mixed-up response that a client must never take as its own.
        """
        return cls(kind="foreign_record")

    @classmethod
    def echo_secrets(cls) -> Fault:
        """Commit, then answer with a record that echoes the request's API key and token.

        Some providers put what they received into their messages; a client must keep
        it out of everything it hands on.
        """
        return cls(kind="echo_secrets")

    @property
    def name(self) -> str:
        """A short label for the request log: ``status:503``, ``latency:0.2``, ``reset``."""
        if self.kind == "status":
            return f"status:{self.code}"
        if self.kind in ("latency", "trickle"):
            return f"{self.kind}:{self.seconds:g}"
        if self.kind == "oversized":
            return f"oversized:{self.size}{':chunked' if self.chunked else ''}"
        return self.kind

    @property
    def before_commit(self) -> bool:
        """Whether the fault acts before the request is processed."""
        return self.kind in BEFORE_COMMIT


#: Random faults drawn by default: every kind a retrying client must survive on its own
#: (``hang``, ``trickle`` and ``oversized`` need client timeouts or caps set for them).
DEFAULT_RANDOM_KINDS: tuple[Fault, ...] = (
    Fault.status(408),
    Fault.status(429, retry_after=0),
    Fault.status(500),
    Fault.status(503, retry_after=0),
    Fault.reset(),
    Fault.commit_then_drop(),
    Fault.commit_then_500(),
    Fault.truncated(),
    Fault.non_json(),
)


@attrs.frozen
class _RandomFaults:
    rate: float
    seed: int | str
    kinds: tuple[Fault, ...]
    max_per_document: int

    def decide(self, identity: str, attempt: int) -> Fault | None:
        if attempt > self.max_per_document or not self.kinds:
            return None
        # A fresh generator per (seed, identity, attempt): independent of arrival order.
        rng = random.Random(f"{self.seed}:{identity}:{attempt}")
        if rng.random() >= self.rate:
            return None
        return self.kinds[rng.randrange(len(self.kinds))]


class FaultPlan:
    """Scripted queues (documents, tokens, refresh grants, operations); random faults.

    Random faults are drawn for documents only: the other operations take scripted ones.
    Each queue has a version per issuer (``(environment, tin)``, ``script(..., issuer=tin)``)
    that only that issuer's requests take from, when the shared queue is empty.
    """

    def __init__(self) -> None:
        self.documents: collections.deque[Fault | None] = collections.deque()
        #: The provider's other operations (cancellations, POS signatures, status …).
        self.operations: collections.deque[Fault | None] = collections.deque()
        self.tokens: collections.deque[Fault | None] = collections.deque()
        self.refresh: collections.deque[Fault | None] = collections.deque()
        self.random: _RandomFaults | None = None
        #: Documents (by identity) that get their fault on every attempt.
        self.poisoned: dict[str, Fault] = {}
        #: Every document request waits ``latency[0]`` plus up to ``latency[1]`` seconds.
        self.latency: tuple[float, float] = (0.0, 0.0)
        self._rng = random.Random()
        self._shared = {
            "documents": self.documents,
            "operations": self.operations,
            "tokens": self.tokens,
            "refresh": self.refresh,
        }
        #: One issuer's queues, by ``(queue, environment, tin)``: made when scripted.
        self._issuers: dict[tuple[Queue, str, str], collections.deque[Fault | None]] = {}

    def set_latency(self, seconds: float, jitter: float = 0.0) -> None:
        """Delay every document request by ``seconds`` plus up to ``jitter`` at random."""
        if seconds < 0 or jitter < 0:
            raise ValueError("latency and jitter must not be negative")
        self.latency = (float(seconds), float(jitter))

    def base_latency(self) -> float:
        """This request's delay: 0 unless :meth:`set_latency` asked for one."""
        seconds, jitter = self.latency
        return seconds + self._rng.uniform(0, jitter) if jitter else seconds

    def clear(self) -> None:
        """Forget scripted and random faults."""
        self._issuers.clear()
        self.documents.clear()
        self.operations.clear()
        self.tokens.clear()
        self.refresh.clear()
        self.random = None
        self.poisoned.clear()

    def set_random(
        self, rate: float, seed: int | str, kinds: Iterable[Fault], max_per_document: int
    ) -> None:
        """Enable (``rate > 0``) or disable (``rate == 0``) seeded random faults."""
        if not 0.0 <= rate <= 1.0:
            raise ValueError("rate must be between 0 and 1")
        if max_per_document < 0:
            raise ValueError("max_per_document must not be negative")
        kinds = tuple(kinds)
        if not all(isinstance(kind, Fault) for kind in kinds):
            raise TypeError("kinds must be Fault instances")
        self.random = _RandomFaults(rate, seed, kinds, max_per_document) if rate > 0 else None

    def queue(
        self, name: Queue, issuer: tuple[str, str] | None = None
    ) -> collections.deque[Fault | None]:
        """The shared queue ``name``, or ``issuer``'s (``(environment, tin)``) to script."""
        if issuer is None:
            return self._shared[name]
        return self._issuers.setdefault((name, *issuer), collections.deque())

    def next(self, name: Queue, issuer: tuple[str, str] | None) -> tuple[bool, Fault | None]:
        """Like :meth:`take`, for a request of ``issuer``: the shared queue, then its own."""
        scripted, fault = self.take(self._shared[name])
        return (scripted, fault) if scripted else self.own(name, issuer)

    def own(self, name: Queue, issuer: tuple[str, str] | None) -> tuple[bool, Fault | None]:
        """Like :meth:`take`, from ``issuer``'s own queue ``name`` only."""
        queue = self._issuers.get((name, *issuer)) if issuer is not None else None
        return self.take(queue) if queue is not None else (False, None)

    @staticmethod
    def take(queue: collections.deque[Fault | None]) -> tuple[bool, Fault | None]:
        """The next scripted entry: ``(True, fault_or_None)``, or ``(False, None)`` if empty."""
        if queue:
            return True, queue.popleft()
        return False, None

    def poison(self, identity: str, fault: Fault | None) -> None:
        """Give every request for document ``identity`` ``fault`` (``None``: cure it)."""
        if fault is None:
            self.poisoned.pop(identity, None)
        elif not isinstance(fault, Fault):
            raise TypeError("fault must be a Fault instance, or None")
        else:
            self.poisoned[identity] = fault

    def random_fault(self, identity: str, attempt: int) -> Fault | None:
        """This attempt's fault when none is scripted, if any.

        A poisoned document's fault, else the random fault of this attempt.
        """
        poison = self.poisoned.get(identity)
        if poison is not None:
            return poison
        return self.random.decide(identity, attempt) if self.random is not None else None
