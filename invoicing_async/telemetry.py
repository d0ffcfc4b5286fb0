"""Telemetry for the people who run it: traces, metrics, a Prometheus endpoint.

The library makes spans and metrics in OpenTelemetry's conventions whenever the
application has configured the OpenTelemetry SDK (a tracer provider, a meter provider);
it depends on ``opentelemetry-api`` only (the ``otel`` extra), and without a provider
every call is a no-op. :doc:`/operating` lists what is made and what to alert on.

This module holds the two switches an operator may want beyond configuring the SDK::

    from invoicing_async.telemetry import send_traceparent, serve_metrics

    server = serve_metrics(9464)       # Prometheus scrapes http://127.0.0.1:9464/metrics
    send_traceparent()                 # the provider gets the W3C traceparent header

.. versionadded:: 0.4.0
"""

from __future__ import annotations

from ._telemetry import MetricsServer, send_traceparent, serve_metrics

__all__ = ["MetricsServer", "send_traceparent", "serve_metrics"]
