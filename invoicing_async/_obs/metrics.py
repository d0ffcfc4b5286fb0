"""Metrics in OpenTelemetry's conventions: the instruments, the gauges, Prometheus.

Measurements are made when the application has configured a meter provider (an SDK's),
and otherwise none is (see :mod:`.spans` for why the API is never imported here first).
What is measured (``docs/operating.rst`` lists it): ``http.client.request.duration``
(histogram, seconds), the counters of documents, operations, token requests and retries
(:class:`Meters`, fed by :mod:`.hooks`), and three gauges read at each collection: a
deferral's backlog and its age (:func:`watch_backlog`), an outbox's pending entries
(:class:`Pending`). :func:`export_for_prometheus` has Prometheus read them all.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from .spans import SCOPE, version

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Mapping

__all__ = [
    "PROMETHEUS_MISSING",
    "BacklogGauges",
    "Meters",
    "Pending",
    "export_for_prometheus",
    "instruments",
    "watch_backlog",
]

#: ``http.client.request.duration``'s buckets, as the semantic conventions advise.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)

_DOCUMENTS = "Documents whose outcome is known, by outcome."
_OPERATIONS = "Operations (cancellations, uploads …) ended, by operation and outcome."
_TOKENS = "Requests sent to the token endpoint, by grant."

_GAUGES = (
    ("invoicing.deferral.backlog", "{sale}", "Deferred sales not yet transmitted."),
    (
        "invoicing.deferral.backlog.age",
        "s",
        "How long the oldest deferred sale not yet transmitted has waited.",
    ),
    ("invoicing.outbox.pending", "{entry}", "Outbox entries pending or in flight."),
)


class Meters:
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


_meters: tuple[Any, Meters] | None = None  # (provider, instruments)


def instruments() -> Meters | None:
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
        _meters = (provider, Meters(provider.get_meter(SCOPE, version())))
    return _meters[1]


# --- gauges ----------------------------------------------------------------------------------

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
        instruments()  # a provider configured by now has the gauges at once

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
        if not self.wanted and instruments() is None:
            return False
        now = time.monotonic()
        if not force and now - self._at < self.every:
            return False
        self._at = now
        self.value = await count()
        return True


# --- for the Prometheus endpoint (:mod:`.server`) --------------------------------------------

#: What an ``ImportError`` of the Prometheus endpoint says (``{}``: the missing module).
PROMETHEUS_MISSING = (
    "serving metrics needs the 'prometheus' extra of invoicing-async ({} is missing): the "
    "OpenTelemetry SDK, its Prometheus exporter and prometheus-client"
)


def export_for_prometheus() -> None:
    """Have Prometheus read the library's metrics (:mod:`.server` serves them).

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
    if instruments() is None:
        metrics.set_meter_provider(MeterProvider(metric_readers=[PrometheusMetricReader()]))
        instruments()
