"""Traces and metrics in OpenTelemetry's conventions: the only module that imports it.

The library depends on ``opentelemetry-api`` only, and only when the application does:
spans and measurements are made when the application has configured a tracer provider
or a meter provider (an SDK's), and otherwise nothing is, at the cost of a dictionary
look-up per library call. As the Azure SDK and the OpenTelemetry instrumentations do,
the API is never imported here unless the application imported it already: an
application that configured a provider has, one that did not pays no import.

What is made (``docs/operating.rst`` shows the trees and lists the metrics):

* a span per library call (:class:`Call`): a submission, a batch and each of its
  documents, an operation, a deferral's sale, a token request; with the library's own
  attributes (``invoicing.*``: document key, issuer, safety class, outcome, attempts,
  deferral reason);
* under it, one ``CLIENT`` span per physical HTTP request (:func:`exchange`), named by
  its method, with the stable HTTP client attributes (``http.request.method``,
  ``server.address``, ``server.port``, ``url.full``, ``http.response.status_code``,
  ``error.type``) and ``http.request.resend_count`` on every re-send of the call,
  whatever its cause (a retry, a 401 answered with a new token);
* ``http.client.request.duration`` and the library's counters and gauges.

Secrets stay out by construction: attributes pass an allow-list of names (:data:`_ALLOWED`)
and carry identities, counts, classes and outcomes only; ``url.full`` is made from the
URL without its query and user information; no header, body, token, key or error message
is ever read here (an error is named by its class). A call's fields are also what its log
records carry (:data:`~._log.current`), with telemetry configured or not.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import importlib.metadata
import sys
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from invoicing_async._core import log as _log
from invoicing_async._core.errors import InvoicingError
from invoicing_async._core.table import ending_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Mapping
    from contextlib import AbstractContextManager
    from typing import ParamSpec

    from invoicing_async._core.machine import End, Wait
    from invoicing_async._core.outcomes import Outcome
    from invoicing_async._doc.document import Identity

    P = ParamSpec("P")

__all__ = [
    "PROMETHEUS_MISSING",
    "SCOPE",
    "BacklogGauges",
    "BatchCall",
    "Call",
    "Exchange",
    "Pending",
    "call",
    "calling",
    "current",
    "deferred",
    "describe",
    "document_fields",
    "exchange",
    "export_for_prometheus",
    "retried",
    "send_traceparent",
    "traced",
    "waited",
    "watch_backlog",
]

T = TypeVar("T")

#: The instrumentation scope: the tracer's and the meter's name.
SCOPE = "invoicing_async"

#: Every attribute a span, an event or a measurement may carry. Anything else is dropped.
_ALLOWED = frozenset(
    {
        "http.request.method",
        "http.response.status_code",
        "http.request.resend_count",
        "server.address",
        "server.port",
        "url.full",
        "url.scheme",
        "error.type",
        "invoicing.document_key",
        "invoicing.issuer",
        "invoicing.safety",
        "invoicing.outcome",
        "invoicing.attempts",
        "invoicing.operation",
        "invoicing.grant",
        "invoicing.deferral.reason",
        "invoicing.retry.reason",
        "invoicing.retry.delay",
        "invoicing.batch.documents",
        "invoicing.outbox",
    }
)

#: Outcomes a call succeeds with (any other sets the span's status to error).
_FINE = frozenset({"accepted", "duplicate", "deferred"})

#: ``http.client.request.duration``'s buckets, as the semantic conventions advise.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)

#: Span contexts of deferred sales, by document key: their later delivery links to them.
_DEFERRED: collections.OrderedDict[str, Any] = collections.OrderedDict()
_DEFERRED_KEPT = 10_000

_propagate = False


def send_traceparent(enabled: bool = True) -> None:
    """Send (or stop sending) the W3C ``traceparent`` header to the provider.

    Off by default: the provider has no use for it unless it traces too, and the
    header tells it which requests belong together. Only sent while tracing.
    """
    global _propagate  # noqa: PLW0603  (one switch for the process, like the providers)
    _propagate = enabled


# --- the providers ---------------------------------------------------------------------------

_tracers: tuple[Any, Any] | None = None  # (provider, tracer)
_meters: tuple[Any, _Meters] | None = None  # (provider, instruments)


def _tracer() -> Any:
    """The library's tracer, or ``None`` while no tracer provider is configured."""
    global _tracers  # noqa: PLW0603
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:  # the application never imported the API: it configured nothing
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    if _tracers is None or _tracers[0] is not provider:
        _tracers = (provider, provider.get_tracer(SCOPE, _version()))
    return _tracers[1]


def _instruments() -> _Meters | None:
    """The library's instruments, or ``None`` while no meter provider is configured."""
    global _meters  # noqa: PLW0603
    metrics = sys.modules.get("opentelemetry.metrics")
    if metrics is None:
        return None
    provider = metrics.get_meter_provider()
    # The API's stand-in until a provider is set has no public name: it is known by its
    # class's (a provider set later replaces it, and is picked up at the next call).
    if isinstance(provider, metrics.NoOpMeterProvider) or type(provider).__name__.startswith(
        "_Proxy"
    ):
        return None
    if _meters is None or _meters[0] is not provider:
        _meters = (provider, _Meters(provider.get_meter(SCOPE, _version())))
    return _meters[1]


@functools.cache
def _version() -> str | None:
    """The installed distribution's version: the instrumentation scope's."""
    try:
        return importlib.metadata.version("invoicing-async")
    except importlib.metadata.PackageNotFoundError:
        return None


def _allowed(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Only names of the allow-list, only scalar values (``None`` dropped)."""
    return {
        name: value
        for name, value in attributes.items()
        if name in _ALLOWED and isinstance(value, (str, bool, int, float))
    }


def _error_type(error: BaseException | None) -> str | None:
    return None if error is None else type(error).__name__


_DOCUMENTS = "Documents whose outcome is known, by outcome."
_OPERATIONS = "Operations (cancellations, uploads …) ended, by operation and outcome."
_TOKENS = "Requests sent to the token endpoint, by grant."


class _Meters:
    """The library's instruments on one meter provider."""

    def __init__(self, meter: Any) -> None:
        self.duration = meter.create_histogram(
            "http.client.request.duration",
            unit="s",
            description="Duration of HTTP client requests.",
            explicit_bucket_boundaries_advisory=_BUCKETS,
        )
        counter = meter.create_counter
        self.documents = counter("invoicing.documents", "{document}", _DOCUMENTS)
        self.operations = counter("invoicing.operations", "{operation}", _OPERATIONS)
        self.token_requests = counter("invoicing.token.requests", "{request}", _TOKENS)
        self.retries = counter("invoicing.retries", "{retry}", "Requests sent again, by reason.")
        for name, unit, description in _GAUGES:
            meter.create_observable_gauge(
                name, callbacks=[functools.partial(_observe, name)], unit=unit,
                description=description,
            )  # fmt: skip

    def count(self, kind: str, status: str, attributes: Mapping[str, Any]) -> None:
        """One document or operation ended with ``status``."""
        if kind == "document":
            self.documents.add(1, {"invoicing.outcome": status})
        elif kind == "operation":
            name = attributes.get("invoicing.operation", "request")
            self.operations.add(1, {"invoicing.operation": name, "invoicing.outcome": status})


# --- calls -----------------------------------------------------------------------------------


class _Api:
    """The API's modules, imported once a tracer exists (the application imported them)."""

    def __init__(self) -> None:
        from opentelemetry import context, propagate, trace  # noqa: PLC0415

        self.context = context
        self.propagate = propagate
        self.trace = trace
        self.client = trace.SpanKind.CLIENT


_api_loaded: _Api | None = None


def _api() -> _Api:
    global _api_loaded  # noqa: PLW0603
    if _api_loaded is None:
        _api_loaded = _Api()
    return _api_loaded


class Call:
    """One library call as telemetry sees it: its span, its fields, its physical sends.

    ``kind`` is ``document``, ``operation``, ``token`` or ``batch``: what its ending
    counts. ``fields`` are what its log records carry. Its HTTP requests' spans go
    under its own span, or, for a batch's document, under the batch's (``under``), then
    carrying the document's key and issuer themselves. A call with neither a tracer nor
    instruments still keeps its fields and counts its sends. Entering it (``with``)
    makes it the task's current call; :meth:`end` closes it.
    """

    __slots__ = (
        "__weakref__",
        "_ended",
        "_preset",
        "_tokens",
        "count",
        "fields",
        "kind",
        "meters",
        "outcome",
        "sends",
        "span",
        "tracer",
        "under",
    )

    def __init__(
        self,
        kind: str,
        fields: dict[str, Any],
        *,
        tracer: Any,
        meters: _Meters | None,
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
        #: Physical requests sent so far (the next one's ``http.request.resend_count``).
        self.sends = 0
        #: How it ended, once it has.
        self.outcome: str | None = None
        self._preset: str | None = None
        self._ended = False
        self._tokens: list[tuple[Any, Any]] = []

    def __enter__(self) -> Call:
        """Make this the current call of the task (for its records and its requests).

        Its own span becomes the current span too, so that another instrumentation's
        spans nest under it.
        """
        token = _log.current.set(self)
        attached = None
        if self.span is not None:
            api = _api()
            attached = api.context.attach(api.trace.set_span_in_context(self.span))
        self._tokens.append((token, attached))
        return self

    def __exit__(self, *exc_info: object) -> None:
        token, attached = self._tokens.pop()
        if attached is not None:
            _api().context.detach(attached)
        _log.current.reset(token)

    def update(self, fields: Mapping[str, Any]) -> None:
        """More fields (and span attributes) once they are known."""
        self.fields.update(fields)
        if self.span is not None:
            self.span.set_attributes(_allowed(fields))

    def preset(self, status: str) -> None:
        """The outcome to end with, whatever :meth:`end` is told (a sale deferred)."""
        self._preset = status

    def ended(self, end: End) -> None:
        """End with the decision core's ending of the call's attempts."""
        self.end(end.status.value, error=end.error, attempts=end.attempts)

    def end(self, status: str, *, error: BaseException | None = None, attempts: int = 0) -> None:
        """The call is over with ``status``: count it, close its span. Once."""
        if self._ended:
            return
        self._ended = True
        self.outcome = status = self._preset or status
        if self.count and self.meters is not None:
            self.meters.count(self.kind, status, self.fields)
        span = self.span
        if span is None:
            return
        ending: dict[str, Any] = {"invoicing.outcome": status}
        if attempts:
            ending["invoicing.attempts"] = attempts
        if status not in _FINE:
            named = _error_type(error)
            if named is not None:
                ending["error.type"] = named
            _failed(span, named or status)
        span.set_attributes(ending)
        span.end()

    def finish(self, error: BaseException | None) -> None:
        """End as a call that returned (``accepted``) or raised ``error``.

        An error ends it as the decision core reads it (a 409 ``duplicate``, a refusal
        ``rejected``, an unknown outcome ``unknown`` …), a cancellation ``interrupted``.
        """
        if error is None:
            self.end("accepted")
        elif isinstance(error, InvoicingError):
            self.end(ending_of(error).value, error=error)
        elif isinstance(error, asyncio.CancelledError):
            self.end("interrupted")
        else:
            self.end("error", error=error)


class Quiet(Call):
    """A call while nobody listens (no tracer, no meters): its fields, no span, no count.

    What every call pays without an SDK: its fields, a context variable set and reset
    around it (its log records name it), and a count of its requests.
    """

    __slots__ = ("_token",)

    tracer = meters = span = under = None

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields
        self.sends = 0

    def __enter__(self) -> Call:
        self._token = _log.current.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _log.current.reset(self._token)

    def update(self, fields: Mapping[str, Any]) -> None:
        """More fields for its log records."""
        self.fields.update(fields)

    def end(self, status: str, *, error: BaseException | None = None, attempts: int = 0) -> None:
        """Nothing to count or close."""

    def finish(self, error: BaseException | None) -> None:
        """Nothing to count or close."""


def _start(
    tracer: Any, name: str, fields: Mapping[str, Any], *, parent: Any = None, root: bool = False
) -> Any:
    """A span: under ``parent``, the current call's, the current span, or a new trace."""
    api = _api()
    ctx: Any = None  # None: the current context
    if parent is None and not root:
        made = current()
        parent = made.under if made is not None else None
    if parent is not None:
        ctx = api.trace.set_span_in_context(parent)
    elif root:
        ctx = api.context.Context()
    links = None
    key = fields.get("invoicing.document_key")
    if key is not None and key in _DEFERRED:
        links = [api.trace.Link(_DEFERRED[key], {"invoicing.outcome": "deferred"})]
    return tracer.start_span(name, context=ctx, links=links, attributes=_allowed(fields))


def _failed(span: Any, description: str) -> None:
    trace = _api().trace
    span.set_status(trace.Status(trace.StatusCode.ERROR, description))


def call(name: str, kind: str, fields: dict[str, Any] | None = None, *, root: bool = False) -> Call:
    """A new call (its span under the current one, or a new trace: ``root``); not entered.

    A :class:`Quiet` one while nobody listens.
    """
    fields = fields if fields is not None else {}
    tracer = _tracer()
    meters = _instruments()
    if tracer is None and meters is None:
        return Quiet(fields)
    span = None if tracer is None else _start(tracer, name, fields, root=root)
    return Call(kind, fields, tracer=tracer, meters=meters, span=span)


def calling(
    name: str, kind: str, fields: dict[str, Any] | None = None
) -> AbstractContextManager[Call]:
    """A call, current while the block runs, ended when it leaves (see :meth:`Call.finish`).

    An ending told before (:meth:`Call.ended`) stands. While nobody listens, the
    :class:`Quiet` call itself: it has nothing to end.
    """
    made = call(name, kind, fields)
    return made if type(made) is Quiet else _Finishing(made)


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


def describe(key: str, identity: Identity) -> None:
    """The current call sends the document ``key`` of ``identity``."""
    made = current()
    if made is not None:
        made.update(document_fields(key, identity.issuer))


def document_fields(key: str, issuer: str | None) -> dict[str, Any]:
    """The fields of a document's call (and of its log records)."""
    return {
        "invoicing.document_key": key,
        "invoicing.issuer": issuer,
        "invoicing.safety": "deduplicated_write",
    }


def deferred(reason: str) -> None:
    """The current call (a sale) deferred its document: its later delivery links here."""
    made = current()
    if made is None:
        return
    made.update({"invoicing.deferral.reason": reason})
    made.preset("deferred")
    key = made.fields.get("invoicing.document_key")
    if made.span is not None and isinstance(key, str):
        _DEFERRED[key] = made.span.get_span_context()
        _DEFERRED.move_to_end(key)
        while len(_DEFERRED) > _DEFERRED_KEPT:
            _DEFERRED.popitem(last=False)


def retried(reason: str, *, delay: float | None = None, error: BaseException | None = None) -> None:
    """The current call sends its request again, for ``reason`` (after ``delay`` s).

    Counted; and an event on the call's own span (a batch's document has none: its
    next request's span says it is a re-send).
    """
    made = current()
    if made is None:
        return
    attributes: dict[str, Any] = {"invoicing.retry.reason": reason}
    if made.meters is not None:
        made.meters.retries.add(1, attributes)
    if made.span is not None:
        if delay is not None:
            attributes["invoicing.retry.delay"] = round(delay, 3)
        named = _error_type(error)
        if named is not None:
            attributes["error.type"] = named
        made.span.add_event("retry", attributes)


def waited(decision: Wait) -> None:
    """The decision core said to wait and send again (see :func:`retried`)."""
    retried(decision.reason, delay=decision.seconds, error=decision.after)


# --- batches ---------------------------------------------------------------------------------


class BatchCall:
    """A batch's telemetry: its span and its documents' calls.

    With a span (``name``), the documents' requests' spans go under it, each naming its
    document; without (an outbox worker's batch, which may never end), each document has
    a span of its own, the root of a trace (linked to the sale it was deferred by).
    Outcomes are counted in the batch and added to the counter at most once a second
    (a measurement per document would cost a batch more than its spans); documents
    still open when the batch ends (cut off) end ``interrupted``.
    """

    #: Seconds between additions of the batch's outcome counts to the counter.
    every = 1.0

    def __init__(self, name: str | None, fields: dict[str, Any]) -> None:
        self._tracer = tracer = _tracer()
        self._span = None if tracer is None or name is None else _start(tracer, name, fields)
        self._meters = _instruments()
        self._open: weakref.WeakSet[Call] = weakref.WeakSet()
        self._settled = 0
        self._counts: collections.Counter[str] = collections.Counter()
        self._timer: asyncio.TimerHandle | None = None

    def document(self, key: str, issuer: str | None) -> Call:
        """A document's call (its outcome is counted by :meth:`settled`).

        While nobody listens (no tracer, no meters) a :class:`Quiet` one: its fields,
        for its log records, made only when a record asks for them.
        """
        tracer, span = self._tracer, None
        if tracer is None and self._meters is None:
            return Quiet(document_fields(key, issuer))
        fields = document_fields(key, issuer)
        if tracer is not None and self._span is None:
            span = _start(tracer, "invoicing.document", fields, root=True)
        made = Call(
            "document",
            fields,
            tracer=tracer,
            meters=self._meters,
            span=span,
            under=self._span,
            count=False,
        )
        if span is not None:
            self._open.add(made)
        return made

    def settled(self, outcome: Outcome, *, count: bool = True) -> None:
        """A document's outcome is reported (``count``: not one read from a journal)."""
        self._settled += 1
        if count and self._meters is not None:
            self._counts[outcome.status.value] += 1
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

    @staticmethod
    def finished(made: Call, outcome: Outcome) -> None:
        """A document's attempts are over."""
        if made.span is not None or made.meters is not None:
            made.end(outcome.status.value, error=outcome.error, attempts=outcome.attempts)

    def close(self) -> None:
        """The batch is over."""
        self._count()
        for made in list(self._open):
            made.end("interrupted")
        self._open.clear()
        span, self._span = self._span, None
        if span is not None:
            span.set_attribute("invoicing.batch.documents", self._settled)
            span.end()


# --- HTTP requests ---------------------------------------------------------------------------


class Exchange:
    """One physical HTTP request: its ``CLIENT`` span and its duration, if anyone listens."""

    __slots__ = ("_attributes", "_call", "_span", "_started", "resends")

    def __init__(self, made: Call | None, method: str, url: str) -> None:
        self._call = made
        self._span = None
        self._attributes: dict[str, Any] | None = None
        self.resends = 0
        if made is None:
            return
        self.resends = made.sends
        made.sends += 1
        if made.tracer is None and made.meters is None:
            return
        full, host, port = _target(url.split("?", 1)[0])
        self._attributes = attributes = {
            "http.request.method": method,
            "server.address": host,
            "server.port": port,
        }
        self._started = time.perf_counter()
        if made.under is not None:
            api = _api()
            span_attributes = {**attributes, "url.full": full}
            if self.resends:
                span_attributes["http.request.resend_count"] = self.resends
            if made.span is None:  # a batch's document: the request names it
                span_attributes["invoicing.document_key"] = made.fields["invoicing.document_key"]
                issuer = made.fields["invoicing.issuer"]
                if issuer is not None:
                    span_attributes["invoicing.issuer"] = issuer
            self._span = made.tracer.start_span(
                method,
                context=api.trace.set_span_in_context(made.under),
                kind=api.client,
                attributes=span_attributes,
            )
        if made.meters is not None and made.kind == "token":
            made.meters.token_requests.add(1, {"invoicing.grant": made.fields["invoicing.grant"]})

    def headers(self, headers: Mapping[str, str]) -> Mapping[str, str]:
        """The request's headers, with ``traceparent`` when it is to be sent."""
        if self._span is None or not _propagate:
            return headers
        api = _api()
        carrier = dict(headers)
        api.propagate.inject(carrier, context=api.trace.set_span_in_context(self._span))
        return carrier

    def answered(self, status: int) -> None:
        """The provider answered with ``status``."""
        if self._attributes is not None:
            error = str(status) if status >= 400 else None
            self._done(status, error)

    def failed(self, error_type: str) -> None:
        """No answer: ``error_type`` names the failure (a class name, ``cancelled``)."""
        if self._attributes is not None:
            self._done(None, error_type)

    def _done(self, status: int | None, error: str | None) -> None:
        attributes = self._attributes
        assert attributes is not None  # noqa: S101  (checked by the callers)
        self._attributes = None
        if status is not None:
            attributes["http.response.status_code"] = status
        if error is not None:
            attributes["error.type"] = error
        made = self._call
        if made is not None and made.meters is not None:
            made.meters.duration.record(time.perf_counter() - self._started, attributes)
        span = self._span
        if span is not None:
            self._span = None
            if status is not None:
                span.set_attribute("http.response.status_code", status)
            if error is not None:
                span.set_attribute("error.type", error)
                _failed(span, error)
            span.end()


def exchange(method: str, url: str) -> Exchange:
    """A physical request of the current call is about to be sent."""
    return Exchange(current(), method, url)


@functools.lru_cache(maxsize=256)
def _target(url: str) -> tuple[str, str, int]:
    """``(url.full, server.address, server.port)`` of a URL without its query.

    User information (``user:password@``) is dropped, and so is the fragment.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")), host, port


# --- gauges ----------------------------------------------------------------------------------

_GAUGES = (
    ("invoicing.deferral.backlog", "{sale}", "Deferred sales not yet transmitted."),
    (
        "invoicing.deferral.backlog.age",
        "s",
        "How long the oldest deferred sale not yet transmitted has waited.",
    ),
    ("invoicing.outbox.pending", "{entry}", "Outbox entries pending or in flight."),
)

_sources_lock = threading.Lock()  # collections run in the exporter's thread
_sources: dict[str, weakref.WeakSet[_Source]] = {name: weakref.WeakSet() for name, _, _ in _GAUGES}


class _Source:
    """One value of a gauge (with its outbox's name), read at every collection.

    Observed while it is open and alive: the registry holds it weakly.
    """

    def __init__(self, gauge: str, name: str) -> None:
        self.name = name
        self._gauge = gauge
        with _sources_lock:
            _sources[gauge].add(self)

    def read(self) -> float | None:
        """The value now (``None``: nothing to report)."""
        raise NotImplementedError

    def close(self) -> None:
        """No longer observed."""
        with _sources_lock:
            _sources[self._gauge].discard(self)


def _observe(gauge: str, _options: Any) -> Iterable[Any]:
    from opentelemetry.metrics import Observation  # noqa: PLC0415  (a provider exists)

    with _sources_lock:
        sources = list(_sources[gauge])
    for source in sources:
        value = source.read()
        if value is not None:
            yield Observation(value, {"invoicing.outbox": source.name})


class _Backlog(_Source):
    def __init__(
        self, gauge: str, name: str, backlog: Callable[[], tuple[int, float | None]]
    ) -> None:
        super().__init__(gauge, name)
        self._backlog = backlog

    def read(self) -> float | None:
        count, oldest = self._backlog()
        if self._gauge == "invoicing.deferral.backlog":
            return count
        return 0.0 if oldest is None else max(0.0, time.time() - oldest)


class BacklogGauges:
    """A deferral's backlog as two gauges: sales not yet transmitted, the oldest's age."""

    def __init__(self, name: str, backlog: Callable[[], tuple[int, float | None]]) -> None:
        self._sources = [
            _Backlog("invoicing.deferral.backlog", name, backlog),
            _Backlog("invoicing.deferral.backlog.age", name, backlog),
        ]
        _instruments()  # a provider configured by now has the gauges at once

    def close(self) -> None:
        """No longer observed (the deferral is closed)."""
        for source in self._sources:
            source.close()


def watch_backlog(name: str, backlog: Callable[[], tuple[int, float | None]]) -> BacklogGauges:
    """Observe a deferral's backlog, ``(count, oldest epoch seconds)``, until closed."""
    return BacklogGauges(name, backlog)


class Pending(_Source):
    """An outbox's pending entries as its worker counts them (while metrics are read).

    The count is a query: it is made only while a meter provider is configured or the
    worker's progress is wanted (``wanted``), at most once every :attr:`every` seconds
    unless forced (the outbox found empty).
    """

    every = 1.0

    def __init__(self, name: str, *, wanted: bool = False) -> None:
        super().__init__("invoicing.outbox.pending", name)
        self.value: int | None = None
        self.wanted = wanted
        self._at = float("-inf")

    def read(self) -> float | None:
        return self.value

    async def refresh(self, count: Callable[[], Awaitable[int]], *, force: bool = False) -> bool:
        """Count again, if anyone reads the count and the last one is old enough.

        Whether it counted.
        """
        if not self.wanted and _instruments() is None:
            return False
        now = time.monotonic()
        if not force and now - self._at < self.every:
            return False
        self._at = now
        self.value = await count()
        return True


# --- for the Prometheus endpoint (:mod:`._metrics_server`) ----------------------------------

#: What an ``ImportError`` of the Prometheus endpoint says (``{}``: the missing module).
PROMETHEUS_MISSING = (
    "serving metrics needs the 'prometheus' extra of invoicing-async ({} is missing): the "
    "OpenTelemetry SDK, its Prometheus exporter and prometheus-client"
)


def export_for_prometheus() -> None:
    """Have Prometheus read the library's metrics (:mod:`._metrics_server` serves them).

    The SDK's meter provider, read by its Prometheus exporter, unless a meter provider
    is configured already.

    :raises ImportError: the ``prometheus`` extra is not installed (the message says so).
    """
    try:
        from opentelemetry import metrics  # noqa: PLC0415
        from opentelemetry.exporter.prometheus import PrometheusMetricReader  # noqa: PLC0415
        from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415
    except ImportError as exc:
        raise ImportError(PROMETHEUS_MISSING.format(exc.name)) from None
    if _instruments() is None:
        metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))
        _instruments()
