"""Deferred sales: a till never waits on the provider.

Owns: the sale (:mod:`.sale`: :class:`~invoicing_async.Deferral`), what is stored of a
sale that never left (:mod:`._stamp`), whether the provider is down (:mod:`._provider`),
the drainer (:mod:`._drainer`) and what the application is told (:mod:`.records`).

May import: every folder below it but ``_obs``: what telemetry sees is told as events
(:mod:`invoicing_async._core.calls`), the backlog's gauges too.
"""
