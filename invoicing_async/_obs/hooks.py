"""The hook that turns the library's events into OpenTelemetry's spans and metrics.

:class:`OpenTelemetry` is a :class:`~invoicing_async._core.events.Hook`
(:mod:`invoicing_async._core.events` says what is told, and when); :func:`install`
installs it, once, where OpenTelemetry is installed (the client does, as it is built).
At each call's start it looks for a tracer provider and a meter provider (:mod:`.spans`,
:mod:`.metrics`); without either the call has no observer, and nothing of it is told to
anyone. What is made (``docs/operating.rst`` shows the trees and lists the metrics):

* a span per library call: a submission, a batch and each of its documents, an
  operation, a deferral's sale, a token request; with the library's own attributes
  (``invoicing.*``: document key, issuer, safety class, outcome, attempts, deferral
  reason), a ``retry`` event for each re-send;
* under it, one ``CLIENT`` span per physical HTTP request, named by its method, with the
  stable HTTP client attributes (``http.request.method``, ``server.address``,
  ``server.port``, ``url.full``, ``http.response.status_code``, ``error.type``) and
  ``http.request.resend_count`` on every re-send of the call, whatever its cause (a
  retry, a 401 answered with a new token);
* ``http.client.request.duration`` and the library's counters (:class:`.metrics.Meters`).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import importlib.util
import sys
import time
import weakref
from typing import TYPE_CHECKING, Any

from invoicing_async._core import events
from invoicing_async._core.events import CallEnded, Hook, Observer, RequestObserver

from . import metrics as _metrics
from . import spans as _spans

if TYPE_CHECKING:
    from collections.abc import Mapping

    from invoicing_async._core.events import (
        BacklogWatched,
        CallStarted,
        Deferred,
        Described,
        Observed,
        RequestEnded,
        RequestStarted,
        Retried,
        Settled,
        Watch,
    )

__all__ = ["OpenTelemetry", "install"]

#: Outcomes a call succeeds with (any other sets the span's status to error).
_FINE = frozenset({"accepted", "duplicate", "deferred"})


class _Traced(Observer):
    """One call's span (if tracing) and measurements (if metered).

    Its requests' spans go under its own span, or, for a batch's document, under the
    batch's (``under``), then carrying the document's key and issuer themselves.
    """

    __slots__ = (
        "__weakref__",
        "_ended",
        "count",
        "fields",
        "kind",
        "meters",
        "span",
        "tracer",
        "under",
    )

    def __init__(
        self,
        kind: str,
        fields: Mapping[str, Any],
        *,
        tracer: Any,
        meters: _metrics.Meters | None,
        span: Any = None,
        under: Any = None,
        count: bool = True,
    ) -> None:
        self.kind = kind
        self.fields = fields
        self.tracer = tracer
        self.meters = meters
        self.span = span
        #: The span its requests' spans go under (its own, or its batch's).
        self.under = span if span is not None else under
        self.count = count
        self._ended = False

    def entered(self) -> object:
        """Its own span becomes the current span: another instrumentation's nest under it."""
        if self.span is None:
            return None
        api = _spans.api()
        return api.context.attach(api.trace.set_span_in_context(self.span))

    def exited(self, entered: object) -> None:
        if entered is not None:
            _spans.api().context.detach(entered)

    def described(self, event: Described) -> None:
        if self.span is not None:
            self.span.set_attributes(_spans.allowed(event.fields))

    def retried(self, event: Retried) -> None:
        """Counted, and an event on the call's own span.

        A batch's document has none: its next request's span says it is a re-send.
        """
        if self.meters is not None:
            self.meters.retries.add(1, {"invoicing.retry.reason": event.reason})
        if self.span is not None:
            attributes: dict[str, Any] = {"invoicing.retry.reason": event.reason}
            if event.delay is not None:
                attributes["invoicing.retry.delay"] = round(event.delay, 3)
            named = _spans.error_type(event.error)
            if named is not None:
                attributes["error.type"] = named
            self.span.add_event("retry", attributes)

    def request(self, event: RequestStarted) -> RequestObserver | None:
        full, host, port = _spans.target(event.url.split("?", 1)[0])
        attributes: dict[str, Any] = {
            "http.request.method": event.method,
            "server.address": host,
            "server.port": port,
        }
        span = None
        if self.under is not None:
            api = _spans.api()
            span_attributes = {**attributes, "url.full": full}
            if event.resends:
                span_attributes["http.request.resend_count"] = event.resends
            if self.span is None:  # a batch's document: the request names it
                span_attributes["invoicing.document_key"] = self.fields["invoicing.document_key"]
                issuer = self.fields["invoicing.issuer"]
                if issuer is not None:
                    span_attributes["invoicing.issuer"] = issuer
            span = self.tracer.start_span(
                event.method,
                context=api.trace.set_span_in_context(self.under),
                kind=api.client,
                attributes=span_attributes,
            )
        if self.meters is not None and self.kind == "token":
            self.meters.token_requests.add(1, {"invoicing.grant": self.fields["invoicing.grant"]})
        return _Request(self.meters, attributes, span)

    def deferred(self, event: Deferred) -> None:
        if self.span is not None and event.key is not None:
            _spans.remember_deferred(event.key, self.span)

    def ended(self, event: CallEnded) -> None:
        """Count it, close its span. Once."""
        if self._ended:
            return
        self._ended = True
        status = event.status
        if self.count and self.meters is not None:
            self.meters.count(self.kind, status, self.fields)
        span = self.span
        if span is None:
            return
        ending: dict[str, Any] = {"invoicing.outcome": status}
        if event.attempts:
            ending["invoicing.attempts"] = event.attempts
        if status not in _FINE:
            named = _spans.error_type(event.error)
            if named is not None:
                ending["error.type"] = named
            _spans.failed(span, named or status)
        span.set_attributes(ending)
        span.end()


class _Request(RequestObserver):
    """One physical HTTP request: its ``CLIENT`` span and its duration."""

    __slots__ = ("_attributes", "_meters", "_span", "_started")

    def __init__(
        self, meters: _metrics.Meters | None, attributes: dict[str, Any], span: Any
    ) -> None:
        self._meters = meters
        self._attributes = attributes
        self._span = span
        self._started = time.perf_counter()

    def headers(self, headers: Mapping[str, str]) -> Mapping[str, str]:
        """The request's headers, with ``traceparent`` when it is to be sent."""
        if self._span is None or not _spans.propagating():
            return headers
        api = _spans.api()
        carrier = dict(headers)
        api.propagate.inject(carrier, context=api.trace.set_span_in_context(self._span))
        return carrier

    def ended(self, event: RequestEnded) -> None:
        status, error = event.status, event.error_type
        if status is not None and status >= 400:
            error = str(status)
        attributes = self._attributes
        if status is not None:
            attributes["http.response.status_code"] = status
        if error is not None:
            attributes["error.type"] = error
        if self._meters is not None:
            self._meters.duration.record(time.perf_counter() - self._started, attributes)
        span = self._span
        if span is not None:
            self._span = None
            if status is not None:
                span.set_attribute("http.response.status_code", status)
            if error is not None:
                span.set_attribute("error.type", error)
                _spans.failed(span, error)
            span.end()


class _Batch(Observer):
    """A batch's span and its documents' calls.

    With a span, the documents' requests' spans go under it, each naming its document;
    without (an outbox worker's batch, which may never end), each document has a span of
    its own, the root of a trace (linked to the sale it was deferred by). Outcomes are
    counted in the batch and added to the counter at most once a second (a measurement
    per document would cost a batch more than its spans); documents still open when the
    batch ends (cut off) end ``interrupted``.
    """

    #: Seconds between additions of the batch's outcome counts to the counter.
    every = 1.0

    def __init__(self, tracer: Any, meters: _metrics.Meters | None, span: Any) -> None:
        self._tracer = tracer
        self._meters = meters
        self._span = span
        self._open: weakref.WeakSet[_Traced] = weakref.WeakSet()
        self._settled = 0
        self._counts: collections.Counter[str] = collections.Counter()
        self._timer: asyncio.TimerHandle | None = None

    def document(self, event: CallStarted) -> Observer | None:
        tracer, span = self._tracer, None
        if tracer is not None and self._span is None:
            span = _spans.start(tracer, "invoicing.document", event.fields, root=True)
        made = _Traced(
            "document",
            event.fields,
            tracer=tracer,
            meters=self._meters,
            span=span,
            under=self._span,
            count=False,
        )
        if span is not None:
            self._open.add(made)
        return made

    def settled(self, event: Settled) -> None:
        self._settled += 1
        if event.counted and self._meters is not None:
            self._counts[event.status] += 1
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(self.every, self._count)

    def _count(self) -> None:
        """Add the outcomes counted since the last time to the counter."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        meters = self._meters
        if meters is not None:
            for status, number in self._counts.items():
                meters.documents.add(number, {"invoicing.outcome": status})
        self._counts.clear()

    def ended(self, event: CallEnded) -> None:  # noqa: ARG002  (a batch has no outcome)
        self._count()
        interrupted = CallEnded("interrupted")
        for made in list(self._open):
            made.ended(interrupted)
        self._open.clear()
        span, self._span = self._span, None
        if span is not None:
            span.set_attribute("invoicing.batch.documents", self._settled)
            span.end()


def _under(parent: Observed | None) -> Any:
    """The span a call made in ``parent`` goes under (``None``: the current span)."""
    if parent is not None:
        for observer in parent.observers:
            if isinstance(observer, _Traced):
                return observer.under
    return None


class OpenTelemetry(Hook):
    """Spans and measurements for every call, while a provider is configured."""

    def call(self, event: CallStarted) -> Observer | None:
        modules = sys.modules  # never imported by the application: nothing is configured
        if "opentelemetry.trace" not in modules and "opentelemetry.metrics" not in modules:
            return None
        tracer = _spans.tracer()
        meters = _metrics.instruments()
        if tracer is None and meters is None:
            return None
        name = event.name
        if event.kind == "batch":
            span = None
            if tracer is not None and name is not None:
                span = _spans.start(tracer, name, event.fields, parent=_under(event.parent))
            return _Batch(tracer, meters, span)
        span = None
        if tracer is not None and name is not None:
            parent = _under(event.parent)
            span = _spans.start(tracer, name, event.fields, parent=parent, root=event.root)
        return _Traced(event.kind, event.fields, tracer=tracer, meters=meters, span=span)

    def backlog(self, event: BacklogWatched) -> Watch:
        return _metrics.watch_backlog(event.name, event.read)


_HOOK = OpenTelemetry()


@functools.cache
def _available() -> bool:
    """OpenTelemetry's API is installed (found, never imported here)."""
    return importlib.util.find_spec("opentelemetry") is not None


def install() -> None:
    """Install the OpenTelemetry hook, once, if OpenTelemetry is installed."""
    if _available():
        events.add_hook(_HOOK)
