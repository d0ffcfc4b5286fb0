"""OpenTelemetry's SDK with in-memory exporters, configured for one test at a time.

The API's global providers can be set once per process; OpenTelemetry's own tests reset
them between tests the same way (``opentelemetry.test.globals_test``), which is what
:func:`otel` does, so each test sees only its own spans and measurements and the tests
after it run with no provider, as an application that configured none.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

if TYPE_CHECKING:
    from collections.abc import Iterator


class Telemetry:
    """What a test reads: finished spans, and the metrics collected now."""

    def __init__(self, spans: InMemorySpanExporter, reader: InMemoryMetricReader) -> None:
        self._spans = spans
        self._reader = reader

    def spans(self) -> list[Any]:
        return list(self._spans.get_finished_spans())

    def named(self, name: str) -> list[Any]:
        return [span for span in self.spans() if span.name == name]

    def children(self, parent: Any) -> list[Any]:
        """The spans whose parent is ``parent``, in start order."""
        found = [
            span
            for span in self.spans()
            if span.parent is not None and span.parent.span_id == parent.context.span_id
        ]
        return sorted(found, key=lambda span: span.start_time)

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """``(attributes, point)`` of every data point of metric ``name``."""
        data = self._reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found += [(dict(p.attributes), p) for p in metric.data.data_points]
        return found

    def value(self, name: str, wanted: dict[str, Any] | None = None) -> float:
        """The sum (counter) or value (gauge) of ``name``'s points with these attributes."""
        wanted = wanted or {}
        total = 0.0
        for found, point in self.points(name):
            if all(found.get(key) == value for key, value in wanted.items()):
                total += getattr(point, "value", getattr(point, "count", 0))
        return total


def _reset() -> None:
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None
    metrics_internal._PROXY_METER_PROVIDER = metrics_internal._ProxyMeterProvider()


@contextlib.contextmanager
def otel() -> Iterator[Telemetry]:
    """The SDK's tracer and meter providers, in memory, for the block."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    _reset()
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    try:
        yield Telemetry(spans, reader)
    finally:
        _reset()
        tracer_provider.shutdown()
        meter_provider.shutdown()
