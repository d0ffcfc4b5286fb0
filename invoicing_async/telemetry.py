"""Telemetry for the people who run it: traces, metrics, a Prometheus endpoint.

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

.. versionadded:: 0.4.0
"""

from __future__ import annotations

from ._obs.server import MetricsServer, serve_metrics
from ._obs.spans import send_traceparent

__all__ = ["MetricsServer", "send_traceparent", "serve_metrics"]
