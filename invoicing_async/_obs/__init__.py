"""What operators see: spans, metrics and log records, and the port they scrape.

Owns: the OpenTelemetry conventions (:mod:`.telemetry`: the only importer of
``opentelemetry``), the metrics and health server (:mod:`.server`, on its own bounded
HTTP server :mod:`._http`: the only importer of ``prometheus_client``).

May import: :mod:`invoicing_async._core` and :mod:`invoicing_async._doc`.
"""
