"""Spans in OpenTelemetry's conventions: the tracer, the attributes, the links.

The library depends on ``opentelemetry-api`` only, and only when the application does:
spans are made when the application has configured a tracer provider (an SDK's), and
otherwise none is, at the cost of a dictionary look-up per library call. As the Azure
SDK and the OpenTelemetry instrumentations do, the API is never imported here unless the
application imported it already: an application that configured a provider has, one that
did not pays no import.

Secrets stay out by construction: attributes pass an allow-list of names (:data:`ALLOWED`)
and carry identities, counts, classes and outcomes only; ``url.full`` is made from the
URL without its query and user information (:func:`target`); no header, body, token, key
or error message is ever read here (an error is named by its class).
:mod:`.hooks` turns the library's events into the spans made here.
"""

from __future__ import annotations

import collections
import functools
import importlib.metadata
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "SCOPE",
    "Api",
    "allowed",
    "api",
    "error_type",
    "failed",
    "propagating",
    "remember_deferred",
    "send_traceparent",
    "start",
    "target",
    "tracer",
    "version",
]

#: The instrumentation scope: the tracer's and the meter's name.
SCOPE = "invoicing_async"

#: Every attribute a span, an event or a measurement may carry. Anything else is dropped.
ALLOWED = frozenset(
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


def propagating() -> bool:
    """Whether requests carry ``traceparent`` (:func:`send_traceparent`)."""
    return _propagate


_tracers: tuple[Any, Any] | None = None  # (provider, tracer)


def tracer() -> Any:
    """The library's tracer, or ``None`` while no tracer provider is configured."""
    global _tracers  # noqa: PLW0603
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:  # the application never imported the API: it configured nothing
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    if _tracers is None or _tracers[0] is not provider:
        _tracers = (provider, provider.get_tracer(SCOPE, version()))
    return _tracers[1]


@functools.cache
def version() -> str | None:
    """The installed distribution's version: the instrumentation scope's."""
    try:
        return importlib.metadata.version("invoicing-async")
    except importlib.metadata.PackageNotFoundError:
        return None


class Api:
    """The API's modules, imported once a tracer exists (the application imported them)."""

    def __init__(self) -> None:
        from opentelemetry import context, propagate, trace  # noqa: PLC0415

        self.context = context
        self.propagate = propagate
        self.trace = trace
        self.client = trace.SpanKind.CLIENT


_api_loaded: Api | None = None


def api() -> Api:
    """The API's modules (imported at the first use: a tracer exists)."""
    global _api_loaded  # noqa: PLW0603
    if _api_loaded is None:
        _api_loaded = Api()
    return _api_loaded


def allowed(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Only names of the allow-list, only scalar values (``None`` dropped)."""
    return {
        name: value
        for name, value in attributes.items()
        if name in ALLOWED and isinstance(value, (str, bool, int, float))
    }


def error_type(error: BaseException | None) -> str | None:
    """An error named by its class (never by its message)."""
    return None if error is None else type(error).__name__


def start(
    tracer: Any, name: str, fields: Mapping[str, Any], *, parent: Any = None, root: bool = False
) -> Any:
    """A span: under ``parent``, the current span, or a new trace (``root``).

    A document deferred before (by a sale) links to its sale's span.
    """
    made = api()
    ctx: Any = None  # None: the current context
    if parent is not None:
        ctx = made.trace.set_span_in_context(parent)
    elif root:
        ctx = made.context.Context()
    links = None
    key = fields.get("invoicing.document_key")
    if key is not None and key in _DEFERRED:
        links = [made.trace.Link(_DEFERRED[key], {"invoicing.outcome": "deferred"})]
    return tracer.start_span(name, context=ctx, links=links, attributes=allowed(fields))


def failed(span: Any, description: str) -> None:
    """Set ``span``'s status to an error, described."""
    trace = api().trace
    span.set_status(trace.Status(trace.StatusCode.ERROR, description))


def remember_deferred(key: str, span: Any) -> None:
    """A sale's span deferred ``key``: the document's later delivery links to it."""
    _DEFERRED[key] = span.get_span_context()
    _DEFERRED.move_to_end(key)
    while len(_DEFERRED) > _DEFERRED_KEPT:
        _DEFERRED.popitem(last=False)


@functools.lru_cache(maxsize=256)
def target(url: str) -> tuple[str, str, int]:
    """``(url.full, server.address, server.port)`` of a URL without its query.

    User information (``user:password@``) is dropped, and so is the fragment.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")), host, port
