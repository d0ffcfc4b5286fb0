"""The decision core and the records: pure, no I/O, no clock of its own.

Owns: the error tree (:mod:`.errors`), the records callers get (:mod:`.models`,
:mod:`.outcomes`, :mod:`.problems`) and their formats (:mod:`.convert`), the provider's
protocol without I/O and its redaction (:mod:`.protocol`, :mod:`.redact`), the safety
classes (:mod:`.safety`), the rest of a day's requests and answers (:mod:`.day`: credits,
payments, IRIS, the listing), the retry policy and the one back-off (:mod:`.retry`), and the
decisions: what an answer means (:mod:`.table`), the machine one request runs
(:mod:`.machine`) with what a batch's requests share (:mod:`.shared`) and the 401 rule
(:mod:`.unauthorized`); the library's logger names (:mod:`.log`).

May import: attrs, cattrs and the standard library. Everything else imports it.
"""
