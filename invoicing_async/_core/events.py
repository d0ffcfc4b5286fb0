"""Telemetry as events: what the library's calls tell whoever listens, and who listens.

The loop, the channel, the transport, a batch and a sale make no span and no measurement:
they tell the library's calls (:mod:`.calls`) what happens, and a call passes each event
to its observers. This module is what is told: a call started (:class:`CallStarted`), more
of its fields known, a retry waited for (:class:`Retried`), a physical request sent and
ended (:class:`RequestStarted`, :class:`RequestEnded`: the transport's response), a sale
deferred, a batch's progress (:class:`Settled`), the call ended (:class:`CallEnded`), a
deferral's backlog that may be read (:class:`BacklogWatched`); and who listens: the hooks
installed in :data:`HOOKS`, in the manner of stamina's ``RetryHook``. A :class:`Hook` is
told of each call as it starts and answers with an :class:`Observer` of that call, or
``None`` when it does not care. ``invoicing_async._obs`` installs the one that makes
OpenTelemetry's spans and metrics; an application may add its own
(:func:`invoicing_async.telemetry.add_hook`).

What nobody listens to costs nothing measurable: with no hook installed no event is built
at all (``HOOKS`` is an empty tuple, tested once per call), and a call that no hook
observes carries no observer: its retries and requests build no event either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "HOOKS",
    "BacklogWatched",
    "CallEnded",
    "CallStarted",
    "Deferred",
    "Described",
    "Hook",
    "Observed",
    "Observer",
    "RequestEnded",
    "RequestObserver",
    "RequestStarted",
    "Retried",
    "Settled",
    "Watch",
    "add_hook",
    "observers",
    "remove_hook",
]


# --- the events ------------------------------------------------------------------------------


@attrs.frozen
class CallStarted:
    """A library call starts: a submission, a batch or its document, an operation ….

    :ivar name: its span's name (``invoicing.submit`` …); ``None`` for a batch that has no
        span of its own (an outbox worker's, which may never end: its documents are
        traces of their own).
    :ivar kind: ``document``, ``operation``, ``token`` or ``batch``: what its ending counts.
    :ivar fields: what its log records carry (``invoicing.*``); the call's own mapping,
        which grows as more is known (:class:`Described`).
    :ivar parent: the call it is made in, if any (a token request's submission).
    :ivar root: it starts a trace of its own whatever the current one.

    .. versionadded:: 0.5.0
    """

    name: str | None
    kind: str
    fields: Mapping[str, Any]
    parent: Observed | None = None
    root: bool = False


@attrs.frozen
class Described:
    """More of a call's fields are known (a sale's document once it is identified).

    .. versionadded:: 0.5.0
    """

    fields: Mapping[str, Any]


@attrs.frozen
class Retried:
    """The call sends its request again, for ``reason``.

    After ``delay`` seconds if known; ``error`` is the failure that made it (a 401
    answered with a new token has none).

    .. versionadded:: 0.5.0
    """

    reason: str
    delay: float | None = None
    error: BaseException | None = None


@attrs.frozen
class RequestStarted:
    """A physical HTTP request of the call is about to leave (``url`` with its query).

    :ivar resends: how many requests the call sent before this one, whatever the cause
        (a retry, a 401 answered with a new token): ``http.request.resend_count``.

    .. versionadded:: 0.5.0
    """

    method: str
    url: str
    resends: int


@attrs.frozen
class RequestEnded:
    """The request is over: answered with ``status``, or not (``status`` ``None``).

    :ivar error_type: the class name of the failure that left no answer
        (``"TransportError"``, ``"cancelled"``); ``None`` for an answer.

    .. versionadded:: 0.5.0
    """

    status: int | None
    error_type: str | None


@attrs.frozen
class Deferred:
    """The call, a sale, deferred its document ``key`` (to the outbox) for ``reason``.

    .. versionadded:: 0.5.0
    """

    reason: str
    key: str | None


@attrs.frozen
class Settled:
    """A batch's progress: one document's outcome is reported.

    :ivar counted: a new outcome (not one read back from its journal).

    .. versionadded:: 0.5.0
    """

    status: str
    counted: bool


@attrs.frozen
class CallEnded:
    """The call is over, with ``status``.

    ``status`` is an outcome's value, ``interrupted`` or ``error`` (a batch's is
    ``closed``); after ``attempts``; ``error`` is what ended it, if anything.

    .. versionadded:: 0.5.0
    """

    status: str
    attempts: int = 0
    error: BaseException | None = None


@attrs.frozen
class BacklogWatched:
    """A deferral's backlog may be read while it runs.

    ``read()`` gives ``(sales not yet transmitted, the oldest's deferral in epoch seconds
    or None)``; ``name`` names its outbox (never with a password).

    .. versionadded:: 0.5.0
    """

    name: str
    read: Callable[[], tuple[int, float | None]]


# --- hooks and observers ---------------------------------------------------------------------


class Observed(Protocol):
    """A call as its observers see it: its fields, its observers.

    .. versionadded:: 0.5.0
    """

    @property
    def fields(self) -> Mapping[str, Any]:
        """What its log records carry."""

    @property
    def observers(self) -> tuple[Observer, ...]:
        """What observes it (none: nobody listens)."""


class Observer:
    """What a hook attaches to one call: told what happens in it, in order.

    Every method does nothing: a hook's observer overrides those it needs. They are called
    on the event loop, in the task that makes the call; they should be quick and must not
    raise.

    .. versionadded:: 0.5.0
    """

    __slots__ = ()

    def entered(self) -> object:
        """The call becomes the task's current one (once per turn of a batch's document).

        What it returns is given back to :meth:`exited`.
        """
        return None

    def exited(self, entered: object) -> None:
        """The call is no longer the task's current one."""

    def described(self, event: Described) -> None:
        """More fields are known."""

    def retried(self, event: Retried) -> None:
        """The call's request is sent again."""

    def request(self, event: RequestStarted) -> RequestObserver | None:  # noqa: ARG002
        """A physical request leaves: an observer of it, or ``None``."""
        return None

    def deferred(self, event: Deferred) -> None:
        """The call (a sale) deferred its document."""

    def document(self, event: CallStarted) -> Observer | None:  # noqa: ARG002
        """A batch's document starts (the batch's observers only): its observer, if any."""
        return None

    def settled(self, event: Settled) -> None:
        """A batch's document's outcome is reported (the batch's observers only)."""

    def ended(self, event: CallEnded) -> None:
        """The call is over (once)."""


class RequestObserver:
    """What an :class:`Observer` attaches to one physical request.

    .. versionadded:: 0.5.0
    """

    __slots__ = ()

    def headers(self, headers: Mapping[str, str]) -> Mapping[str, str]:
        """The request's headers (an observer may add ``traceparent``): unchanged here."""
        return headers

    def ended(self, event: RequestEnded) -> None:
        """The request is over."""


class Watch(Protocol):
    """What a hook returns for a watched value: closed when it is no longer watched.

    .. versionadded:: 0.5.0
    """

    def close(self) -> None:
        """No longer watched."""


class Hook:
    """Told of each library call as it starts, and of each value it may watch.

    Install one with :func:`add_hook`. Both methods answer ``None`` here: a hook
    overrides what it needs.

    .. versionadded:: 0.5.0
    """

    def call(self, event: CallStarted) -> Observer | None:  # noqa: ARG002
        """A call starts: its observer, or ``None`` (nothing to tell this hook)."""
        return None

    def backlog(self, event: BacklogWatched) -> Watch | None:  # noqa: ARG002
        """A deferral's backlog may be read from now on (until the watch is closed)."""
        return None


#: The hooks installed, in order. An empty tuple costs each call one truth test.
HOOKS: tuple[Hook, ...] = ()


def add_hook(hook: Hook) -> None:
    """Install ``hook`` (once: a hook installed already stays where it is).

    .. versionadded:: 0.5.0
    """
    global HOOKS  # noqa: PLW0603  (one registry for the process, like stamina's)
    if hook not in HOOKS:
        HOOKS = (*HOOKS, hook)


def remove_hook(hook: Hook) -> None:
    """Uninstall ``hook`` (nothing if it is not installed).

    .. versionadded:: 0.5.0
    """
    global HOOKS  # noqa: PLW0603
    HOOKS = tuple(installed for installed in HOOKS if installed is not hook)


def observers(event: CallStarted) -> tuple[Observer, ...]:
    """What the installed hooks observe of a call that starts (none: an empty tuple)."""
    found = []
    for hook in HOOKS:
        observer = hook.call(event)
        if observer is not None:
            found.append(observer)
    return tuple(found) if found else ()
