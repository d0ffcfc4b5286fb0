"""11. Telemetry: what traces and metrics cost a batch, side by side in one run.

The same batch (``submit_many``, concurrency 64, 4 KB invoices encrypted to RSA-3072,
one provider process answering at once: the client's CPU is the bottleneck, the worst
case for any per-document cost) in three kinds of process, each a fresh interpreter so
that one never sees another's imports:

* **off**: OpenTelemetry never imported (the extra not installed, or not used);
* **api**: the API imported, no provider configured (every call a no-op);
* **sdk**: the SDK configured: a tracer provider with a batch span processor (its
  exporter drops the spans: the cost measured is the library's and the SDK's, not a
  collector's) and a meter provider with a reader; every span and measurement made
  (a batch span, a span per document, a CLIENT span per request, the duration
  histogram, the counters);
* **sampled**: the same SDK with the sampler production services run,
  ``ParentBased(TraceIdRatioBased(0.1))``: a tenth of the traces recorded, the metrics
  all.

Each round runs the three in a rotated order (the machine is shared: drift hits them
alike). The client's CPU is what bounds the batch, and what telemetry costs, so the
targets are on throughput per CPU second of the client process (documents ÷ its CPU
seconds while the batch runs), which other engineers' load on the machine moves far less
than the wall clock: api ÷ off >= 0.99, sampled ÷ off >= 0.97 (issue 32) and sdk ÷ off
(full sampling) >= 0.95 (medians of the rounds' ratios). The wall clock's documents per
second, and their ratios, are shown beside.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

from invoicing_async import OutcomeStatus
from invoicing_sandbox._samples import sample_invoice

from ._common import Section, Settings, fmt, median
from ._provider import ProviderProcess
from .e2e import CONCURRENCY, client

NAME = "telemetry"
VARIANTS = ["off", "api", "sampled", "sdk"]
LABELS = {
    "off": "OpenTelemetry not imported",
    "api": "API imported, no provider",
    "sampled": "SDK, ParentBased(TraceIdRatioBased(0.1))",
    "sdk": "SDK: tracing and metrics on, every trace",
}
#: The lowest docs per CPU second each variant may keep of ``off``'s.
TARGETS = {"api": 0.99, "sampled": 0.97, "sdk": 0.95}


def _configure(variant: str) -> None:
    """Set the process up as ``variant`` says (before the client is used)."""
    if variant == "off":
        return
    # Imported here: the "off" process must never import them.
    from opentelemetry import metrics, trace  # noqa: PLC0415

    if variant == "api":
        return
    from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:  # noqa: ARG002
            return SpanExportResult.SUCCESS

    sampler = None
    if variant == "sampled":
        from opentelemetry.sdk.trace.sampling import (  # noqa: PLC0415
            ParentBased,
            TraceIdRatioBased,
        )

        sampler = ParentBased(TraceIdRatioBased(0.1))
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


async def _batch(url: str, count: int) -> dict[str, float]:
    docs = [sample_invoice(n) for n in range(1, count + 1)]
    async with client(url) as c:
        await c.submit_many(docs[:100], concurrency=CONCURRENCY)  # warm-up: connections
        cpu, started = time.process_time(), time.perf_counter()
        outcomes = await c.submit_many(docs, concurrency=CONCURRENCY)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if any(o.status not in (OutcomeStatus.ACCEPTED, OutcomeStatus.DUPLICATE) for o in outcomes):
        raise AssertionError("a document was not accepted")
    return {"rate": count / seconds, "cpu_us": cpu / count * 1e6}


def child(variant: str, url: str, count: int) -> None:
    """One measured batch in this process (``python -m benchmarks.telemetry ...``)."""
    _configure(variant)
    result = asyncio.run(_batch(url, count))
    imported = any(name.startswith("opentelemetry") for name in sys.modules)
    if imported != (variant != "off"):
        raise AssertionError(f"{variant}: OpenTelemetry imported: {imported}")
    print(json.dumps(result))


def _measure_once(variant: str, url: str, count: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.telemetry", variant, url, str(count)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {variant} run failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(url: str, count: int, rounds: int) -> dict[str, list[dict[str, float]]]:
    """Every variant once per round, the order rotated."""
    results: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    for round_ in range(rounds):
        shift = round_ % len(VARIANTS)
        for name in VARIANTS[shift:] + VARIANTS[:shift]:
            results[name].append(_measure_once(name, url, count))
    return results


def run(settings: Settings) -> Section:
    section = Section(
        NAME,
        "Telemetry: batch throughput with OpenTelemetry off, API only, SDK on "
        "(concurrency 64, 4 KB invoices, RSA-3072)",
        [
            "Process",
            "docs x rounds",
            "docs/s (median)",
            "÷ off",
            "CPU µs/doc",
            "docs/CPU s ÷ off",
            "Target",
        ],
    )
    count, rounds = settings.n(3000, 200), settings.n(7, 1)
    with ProviderProcess() as provider:
        results = measure(provider.url, count, rounds)
    rate = {name: [r["rate"] for r in rs] for name, rs in results.items()}
    cpu = {name: median([r["cpu_us"] for r in rs]) for name, rs in results.items()}
    per_cpu = {name: [1e6 / r["cpu_us"] for r in rs] for name, rs in results.items()}
    ratios = {
        name: [r / off for r, off in zip(rate[name], rate["off"], strict=True)] for name in TARGETS
    }
    cpu_ratios = {
        name: [r / off for r, off in zip(per_cpu[name], per_cpu["off"], strict=True)]
        for name in TARGETS
    }
    targets = {
        name: section.check(
            f"telemetry: {LABELS[name]} ÷ off, batch docs per CPU second",
            median(cpu_ratios[name]),
            target,
            higher=True,
        )
        for name, target in TARGETS.items()
    }
    for name in VARIANTS:
        section.rows.append(
            [
                LABELS[name],
                f"{count} x {rounds}",
                fmt(median(rate[name]), 0),
                "1.00x" if name == "off" else f"{median(ratios[name]):.2f}x",
                f"{cpu[name]:.0f}",
                "1.00x" if name == "off" else f"{median(cpu_ratios[name]):.3f}x",
                targets.get(name, ""),
            ]
        )
    section.notes += [
        "Docs per CPU second, ratios per round: "
        + "; ".join(
            f"{name} ÷ off " + ", ".join(f"{r:.3f}" for r in cpu_ratios[name]) for name in TARGETS
        )
        + ". Wall-clock docs/s, ratios per round: "
        + "; ".join(
            f"{name} ÷ off " + ", ".join(f"{r:.2f}" for r in ratios[name]) for name in TARGETS
        )
        + ".",
        (
            "Each run is a fresh interpreter (the 'off' one asserts OpenTelemetry was never "
            "imported); a 100-document warm-up opens the connections before the clock starts."
        ),
    ]
    return section


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2], int(sys.argv[3]))
