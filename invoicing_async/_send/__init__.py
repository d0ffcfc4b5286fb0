"""Sending: a document's delivery, an operation's, the batch.

Owns: one document's delivery (:mod:`.delivery`), the provider's other operations
(:mod:`.operations`) and the rest of a day's (:mod:`.day`: credits, payments, IRIS, the
listing and a PDF), bulk submission (:mod:`.batch`, its issuers' lanes :mod:`._lanes`
and in-flight limit :mod:`._limiter`) and what a batch asks of a durable record
(:mod:`.journal`). The loop every request runs is the wire's (:mod:`invoicing_async._io.loop`).

May import: the folders below it but ``_obs`` (``_core``, ``_doc``, ``_io``): what
telemetry sees is told as events (:mod:`invoicing_async._core.calls`).
"""
