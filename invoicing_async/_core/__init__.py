"""The decision core and the records: pure, no I/O, no clock of its own.

Owns: the error tree (:mod:`.errors`), the records callers get (:mod:`.models`,
:mod:`.outcomes`, :mod:`.problems`) and their formats (:mod:`.convert`), the provider's
protocol without I/O and its redaction (:mod:`.protocol`, :mod:`.redact`), the safety
classes (:mod:`.safety`), the rest of a day's requests and answers (:mod:`.day`: credits,
payments, IRIS, the listing), the retry policy and the one back-off (:mod:`.retry`), and the
decisions: what an answer means (:mod:`.table`), the machine one request runs
(:mod:`.machine`) with what a batch's requests share (:mod:`.shared`) and the 401 rule
(:mod:`.unauthorized`), a durable entry's states, record and rules (:mod:`.entries`:
final, re-sent, charged, parked, the verdict on a document read again); the library's
logger names (:mod:`.log`); telemetry as events (:mod:`.events`: what is told, the hooks
that listen) told by the library's calls (:mod:`.calls`). No asyncio: the waits are
:mod:`invoicing_async._io.waits`'.

May import: attrs, cattrs and the standard library. Everything else imports it.
"""
