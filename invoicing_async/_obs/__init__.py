"""What operators see: spans, metrics and log records, and the port they scrape.

Owns: the hook that turns the library's events (:mod:`invoicing_async._core.events`)
into OpenTelemetry's spans and metrics (:mod:`.hooks`), the spans (:mod:`.spans`) and
the metrics and gauges (:mod:`.metrics`) in OpenTelemetry's conventions (the only
importers of ``opentelemetry``), the metrics and health server (:mod:`.server`, on its
own bounded HTTP server :mod:`._http`: the only importer of ``prometheus_client``).

May import: :mod:`invoicing_async._core` and :mod:`invoicing_async._doc`.
"""
