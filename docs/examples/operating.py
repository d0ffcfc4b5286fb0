"""The traces of the operating guide: a retried submission, a deferred sale.

Runs the sandbox on loopback with OpenTelemetry's SDK exporting to memory, then prints
each trace as a tree of span names and the attributes an operator looks for.
"""

import asyncio
import tempfile
from pathlib import Path

# region setup
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()  # in production: OTLP, behind a BatchSpanProcessor
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)  # once, at start-up: the library does the rest
# endregion setup

from invoicing_async import Deferral, DeferredReceipt, InvoicingClient  # noqa: E402
from invoicing_sandbox import Fault, Sandbox, sample_invoice  # noqa: E402

SHOWN = (
    "invoicing.document_key",
    "invoicing.outcome",
    "invoicing.deferral.reason",
    "http.response.status_code",
    "http.request.resend_count",
    "error.type",
)


def render(spans: list) -> str:
    """Spans as trees: one line per span, children indented under their parent."""
    ids = {span.context.span_id for span in spans}
    children: dict = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s.start_time):
            attributes = span.attributes
            shown = " ".join(f"{k}={attributes[k]}" for k in SHOWN if k in attributes)
            linked = " (linked to the sale)" if span.links else ""
            lines.append(f"{'  ' * depth}{span.name} {shown}{linked}".rstrip())
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)


async def retried_submission(sb: Sandbox) -> str:
    """A submission answered 503, then accepted: its trace."""
    async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
        sb.script(Fault.status(503, retry_after=0))
        await client.submit_json(sample_invoice(1))
    return render(exporter.get_finished_spans())


async def deferred_sale(sb: Sandbox, work: Path) -> str:
    """A sale deferred while the provider is down, then delivered: both traces."""
    delivered = asyncio.Event()
    told = lambda _: delivered.set()  # noqa: E731
    async with (
        InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client,
        Deferral(client, work / "till.db", on_outcome=told, poll=0.1) as till,
    ):
        await client.token()
        exporter.clear()
        await sb.set_outage("refuse")
        receipt = await till.submit_or_defer(sample_invoice(2), encrypted=False)
        assert isinstance(receipt, DeferredReceipt)
        await sb.set_outage(None)
        await asyncio.wait_for(delivered.wait(), 60)
    spans = [s for s in exporter.get_finished_spans() if s.name != "invoicing.token"]
    return render([s for s in spans if s.parent is None or s.kind.name == "CLIENT"])


async def main() -> None:
    """Print both, as the operating guide shows them."""
    async with Sandbox() as sb:
        first = await retried_submission(sb)
        exporter.clear()
        with tempfile.TemporaryDirectory() as work:
            second = await deferred_sale(sb, Path(work))
    print(first, second, sep="\n\n")
    assert first.splitlines()[0].startswith("invoicing.submit ")
    assert "http.response.status_code=201 http.request.resend_count=1" in first
    assert "invoicing.outcome=deferred" in second
    assert "(linked to the sale)" in second


if __name__ == "__main__":
    asyncio.run(main())
