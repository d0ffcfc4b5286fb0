"""Telemetry for the people who run it: traces, metrics, a Prometheus endpoint, hooks.

The library makes spans and metrics in OpenTelemetry's conventions whenever the
application has configured the OpenTelemetry SDK (a tracer provider, a meter provider);
it depends on ``opentelemetry-api`` only (the ``otel`` extra), and without a provider
every call is a no-op. :doc:`/operating` lists what is made and what to alert on.

This module holds the two switches an operator may want beyond configuring the SDK::

    from invoicing_async.telemetry import send_traceparent, serve_metrics

    server = serve_metrics(9464)       # Prometheus scrapes http://127.0.0.1:9464/metrics
    send_traceparent()                 # the provider gets the W3C traceparent header

The metrics port answers the health probes an orchestrator asks for too: ``/healthz``
(the event loop answers and the process has file descriptors to spare) and ``/readyz``
(besides, what ``serve_metrics(ready=...)`` checks: a database reachable, a key loaded,
the worker not stopping). It serves from a thread and an event loop of its own and
bounds what a client may hold (``max_connections``, ``request_timeout``, ``max_head``):
a flood of the port costs the worker none of its descriptors, threads or sending.

OpenTelemetry is one :class:`Hook` of the library's; an application adds its own with
:func:`add_hook` (as stamina's ``RetryHook``), told of each call as it starts
(:class:`CallStarted`) and, through the :class:`Observer` it answers with, of what
happens in it: retries (:class:`Retried`), physical requests (:class:`RequestStarted`,
:class:`RequestEnded`), a batch's progress (:class:`Settled`), the ending
(:class:`CallEnded`). :doc:`/guides/hooks` shows one. With no hook listening, no event is
built.

.. versionadded:: 0.4.0

.. versionchanged:: 0.5.0 hooks (:func:`add_hook`).
"""

from __future__ import annotations

from ._core.events import (
    BacklogWatched,
    CallEnded,
    CallStarted,
    Deferred,
    Described,
    Hook,
    Observed,
    Observer,
    RequestEnded,
    RequestObserver,
    RequestStarted,
    Retried,
    Settled,
    Watch,
    add_hook,
    remove_hook,
)
from ._obs.server import MetricsServer, serve_metrics
from ._obs.spans import send_traceparent

__all__ = [
    "BacklogWatched",
    "CallEnded",
    "CallStarted",
    "Deferred",
    "Described",
    "Hook",
    "MetricsServer",
    "Observed",
    "Observer",
    "RequestEnded",
    "RequestObserver",
    "RequestStarted",
    "Retried",
    "Settled",
    "Watch",
    "add_hook",
    "remove_hook",
    "send_traceparent",
    "serve_metrics",
]
