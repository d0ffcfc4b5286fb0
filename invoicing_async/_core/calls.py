"""The library's calls: what each tells its observers, and the fields its records carry.

A :class:`Call` is one library call (a submission, a batch's document, an operation, a
sale, a token request): its fields, what observes it (asked of the hooks of
:mod:`.events` as it starts), the physical requests it sent so far. Entering it makes it
the task's current call (:data:`invoicing_async._core.log.current`): its log records carry
its fields, with telemetry configured or not, and what the loop (:func:`waited`), the
channel (:func:`retried`, :func:`calling`) and the transport (:func:`sending`) tell is told
to its observers. A :class:`Batch` asks the hooks once and observes its documents' calls
through what observes it. Where nobody listens, every function here builds no event.
"""

from __future__ import annotations

import functools
from asyncio import CancelledError
from typing import TYPE_CHECKING, Any, TypeVar

from . import events
from . import log as _log
from .errors import InvoicingError
from .events import (
    BacklogWatched,
    CallEnded,
    CallStarted,
    Deferred,
    Described,
    RequestObserver,
    RequestStarted,
    Retried,
    Settled,
)
from .events import observers as observers_of
from .table import ending_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping
    from contextlib import AbstractContextManager
    from typing import ParamSpec

    from .events import Observer, RequestEnded, Watch
    from .machine import End, Wait
    from .outcomes import Outcome

    P = ParamSpec("P")

__all__ = [
    "Batch",
    "Call",
    "call",
    "calling",
    "current",
    "deferred",
    "describe",
    "document_fields",
    "retried",
    "sending",
    "traced",
    "waited",
    "watch_backlog",
]

T = TypeVar("T")


class Call:
    """One library call: its fields, its observers, its physical requests so far.

    Entering it (``with``) makes it the task's current call: its log records, its retries
    and its requests are its own. :meth:`end` tells its observers how it ended, once.
    """

    __slots__ = ("_ended", "_entered", "_preset", "_token", "fields", "kind", "observers", "sends")

    def __init__(
        self, kind: str, fields: dict[str, Any], observers: tuple[Observer, ...] = ()
    ) -> None:
        self.kind = kind
        self.fields = fields
        self.observers = observers
        #: Physical requests sent so far (the next one's ``http.request.resend_count``).
        self.sends = 0
        self._preset: str | None = None
        self._ended = False

    def __enter__(self) -> Call:
        self._token = _log.current.set(self)
        if self.observers:
            self._entered = [observer.entered() for observer in self.observers]
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.observers:
            for observer, entered in zip(self.observers, self._entered, strict=True):
                observer.exited(entered)
        _log.current.reset(self._token)

    def update(self, fields: Mapping[str, Any]) -> None:
        """More fields (for its records, and its observers) once they are known."""
        self.fields.update(fields)
        if self.observers:
            event = Described(fields)
            for observer in self.observers:
                observer.described(event)

    def retried(
        self, reason: str, delay: float | None = None, error: BaseException | None = None
    ) -> None:
        """Its request is sent again (see :class:`Retried`)."""
        if self.observers:
            event = Retried(reason, delay, error)
            for observer in self.observers:
                observer.retried(event)

    def request(self, event: RequestStarted) -> RequestObserver | None:
        """Its observers' observer of a request (asked only when it has observers)."""
        found = [o for observer in self.observers if (o := observer.request(event)) is not None]
        if not found:
            return None
        return found[0] if len(found) == 1 else _Requests(tuple(found))

    def defer(self, reason: str) -> None:
        """It deferred its document: it ends ``deferred``, whatever :meth:`end` is told."""
        self.update({"invoicing.deferral.reason": reason})
        self._preset = "deferred"
        if self.observers:
            key = self.fields.get("invoicing.document_key")
            event = Deferred(reason, key if isinstance(key, str) else None)
            for observer in self.observers:
                observer.deferred(event)

    def ended(self, end: End) -> None:
        """End with the decision core's ending of the call's attempts."""
        self.end(end.status.value, error=end.error, attempts=end.attempts)

    def end(self, status: str, *, error: BaseException | None = None, attempts: int = 0) -> None:
        """The call is over with ``status``: its observers are told. Once."""
        if self._ended:
            return
        self._ended = True
        if self.observers:
            event = CallEnded(self._preset or status, attempts, error)
            for observer in self.observers:
                observer.ended(event)

    def finish(self, error: BaseException | None) -> None:
        """End as a call that returned (``accepted``) or raised ``error``.

        An error ends it as the decision core reads it (a 409 ``duplicate``, a refusal
        ``rejected``, an unknown outcome ``unknown`` …), a cancellation ``interrupted``.
        """
        if error is None:
            self.end("accepted")
        elif isinstance(error, InvoicingError):
            self.end(ending_of(error).value, error=error)
        elif isinstance(error, CancelledError):
            self.end("interrupted")
        else:
            self.end("error", error=error)


class _Requests(RequestObserver):
    """Several observers of one request, told in order."""

    __slots__ = ("_each",)

    def __init__(self, each: tuple[RequestObserver, ...]) -> None:
        self._each = each

    def headers(self, headers: Mapping[str, str]) -> Mapping[str, str]:
        for observer in self._each:
            headers = observer.headers(headers)
        return headers

    def ended(self, event: RequestEnded) -> None:
        for observer in self._each:
            observer.ended(event)


def call(name: str, kind: str, fields: dict[str, Any] | None = None, *, root: bool = False) -> Call:
    """A new call (its observers told it starts, under the current call); not entered."""
    fields = fields if fields is not None else {}
    if not events.HOOKS:
        return Call(kind, fields)
    parent = _log.current.get()  # not current(): once per call, one call less
    return Call(kind, fields, observers_of(CallStarted(name, kind, fields, parent, root)))


def calling(
    name: str, kind: str, fields: dict[str, Any] | None = None
) -> AbstractContextManager[Call]:
    """A call, current while the block runs, ended when it leaves (see :meth:`Call.finish`).

    An ending told before (:meth:`Call.ended`) stands. A call nobody observes is its own
    context manager: it has nothing to end.
    """
    made = call(name, kind, fields)
    return _Finishing(made) if made.observers else made


class _Finishing:
    """A call entered for the block, and ended as the block leaves."""

    __slots__ = ("_made",)

    def __init__(self, made: Call) -> None:
        self._made = made

    def __enter__(self) -> Call:
        return self._made.__enter__()

    def __exit__(self, exc_type: object, error: BaseException | None, tb: object) -> None:
        made = self._made
        try:
            made.finish(error)
        finally:
            made.__exit__(exc_type, error, tb)


def traced(
    name: str, kind: str = "document"
) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Awaitable[T]]]:
    """Run a coroutine function as a call (see :func:`calling`)."""

    def decorate(function: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
        @functools.wraps(function)
        async def run(*args: P.args, **kwargs: P.kwargs) -> T:
            with calling(name, kind):
                return await function(*args, **kwargs)

        return run

    return decorate


def current() -> Call | None:
    """The call being made in this task, if any."""
    found: Call | None = _log.current.get()
    return found


def document_fields(key: str, issuer: str | None) -> dict[str, Any]:
    """The fields of a document's call (and of its log records)."""
    return {
        "invoicing.document_key": key,
        "invoicing.issuer": issuer,
        "invoicing.safety": "deduplicated_write",
    }


def describe(key: str, issuer: str | None) -> None:
    """The current call sends the document ``key`` of ``issuer``."""
    made = current()
    if made is not None:
        made.update(document_fields(key, issuer))


def sending(method: str, url: str) -> tuple[int, RequestObserver | None]:
    """A physical request of the current call leaves: ``(resends, observer)``.

    ``resends``: the requests the call sent before this one; ``observer``: its observers'
    observer of this one (``None``: nobody listens).
    """
    made: Call | None = _log.current.get()  # not current(): once per request, one call less
    if made is None:
        return 0, None
    resends = made.sends
    made.sends = resends + 1
    if not made.observers:
        return resends, None
    return resends, made.request(RequestStarted(method, url, resends))


def deferred(reason: str) -> None:
    """The current call (a sale) deferred its document (see :meth:`Call.defer`)."""
    made = current()
    if made is not None:
        made.defer(reason)


def retried(reason: str, *, delay: float | None = None, error: BaseException | None = None) -> None:
    """The current call sends its request again, for ``reason`` (after ``delay`` s)."""
    made = current()
    if made is not None and made.observers:
        made.retried(reason, delay, error)


def waited(decision: Wait) -> None:
    """The decision core said to wait and send again (see :func:`retried`)."""
    made = current()
    if made is not None and made.observers:
        made.retried(decision.reason, decision.seconds, decision.after)


# --- batches ---------------------------------------------------------------------------------


class Batch:
    """A batch as its observers see it: its own call, its documents' calls.

    ``name`` is its span's (``None``: an outbox worker's batch, which may never end). Its
    documents' calls are observed by what observes the batch (the hooks are asked once
    per batch, not per document).
    """

    __slots__ = ("observers",)

    def __init__(self, name: str | None, fields: dict[str, Any]) -> None:
        self.observers: tuple[Observer, ...] = (
            observers_of(CallStarted(name, "batch", fields, current())) if events.HOOKS else ()
        )

    def document(self, key: str, issuer: str | None) -> Call:
        """A document's call (its outcome is reported by :meth:`settled`)."""
        fields = document_fields(key, issuer)
        if not self.observers:
            return Call("document", fields)
        event = CallStarted("invoicing.document", "document", fields)
        found = [o for observer in self.observers if (o := observer.document(event)) is not None]
        return Call("document", fields, tuple(found))

    def settled(self, outcome: Outcome, *, count: bool = True) -> None:
        """A document's outcome is reported (``count``: not one read from a journal)."""
        if self.observers:
            event = Settled(outcome.status.value, count)
            for observer in self.observers:
                observer.settled(event)

    @staticmethod
    def finished(made: Call, outcome: Outcome) -> None:
        """A document's attempts are over."""
        if made.observers:
            made.end(outcome.status.value, error=outcome.error, attempts=outcome.attempts)

    def close(self) -> None:
        """The batch is over."""
        if self.observers:
            event = CallEnded("closed")
            for observer in self.observers:
                observer.ended(event)


# --- watched values --------------------------------------------------------------------------


class _Watches:
    """What every hook watches of one value, closed together."""

    def __init__(self, watches: list[Watch]) -> None:
        self._watches = watches

    def close(self) -> None:
        for watch in self._watches:
            watch.close()


def watch_backlog(name: str, read: Callable[[], tuple[int, float | None]]) -> Watch:
    """Let the hooks watch a deferral's backlog (see :class:`BacklogWatched`) until closed."""
    if not events.HOOKS:
        return _Watches([])
    event = BacklogWatched(name, read)
    return _Watches([w for hook in events.HOOKS if (w := hook.backlog(event)) is not None])
