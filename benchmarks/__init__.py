"""Benchmarks of invoicing_async: ``python -m benchmarks [--quick] [--only NAME]``.

Every number is reported as a ratio against a floor measured in the same run (the machine
is shared and noisy, absolute times drift). One module per benchmark, each with a
``run(settings) -> Section``:

================  ========================================================================
pgp               PGP stage, µs per invoice: library vs raw ``cryptography``, PGPy, gpg
e2e               ``submit_many`` throughput vs raw aiohttp, provider in another process
token             token requests made by 10,000 cold callers; cost of a warm lookup
lag               event-loop lag while a batch runs (encryption in threads vs on the loop)
memory            peak RSS streaming 10k / 100k (/ 1M) documents through ``submit_stream``
procpool          encryption throughput in a process pool (per-document tasks vs chunked map)
ledger            SQLite ledger: journaled stream memory and throughput, resume from 1M entries
single            one ``submit_secure`` after another: p50 latency vs raw aiohttp + floor
bulk              batch throughput and loop lag vs the raw floor; journaled ÷ unjournaled
sandbox_issuers   the sandbox holding 10,000 issuers: memory, documents/s vs 100 issuers
telemetry         batch throughput with OpenTelemetry off, API only, SDK tracing and metrics
issuers           ``IssuerPool``, 10,000 issuers x 5: token requests, memory, requests/s vs 1
claims            outbox claims over 1 and 1,000 issuers vs format 2's; format 3 upgrade
documents         a typed 25-line document + check vs the JSON by hand; a batch checked
counts            Python calls and gc collections per document: library vs raw aiohttp
rotation          a key rotated mid-batch: seconds from the file's rename to its first use
================  ========================================================================

Results go to ``benchmarks/RESULTS.rst`` and ``benchmarks/results.png``.
``python -m benchmarks.compare OLD NEW`` compares two checkouts on the same invoices.

How to read the two counts (``counts``, and ``compare`` for each tree and mode):
wall-clock throughput on this shared machine moves by ±7 % between two runs of the same
tree; the calls move by a percent or two, so a difference beyond that is the change's own.
*Python calls/doc* is the interpreter's work per document (function calls and coroutine
resumptions, not calls into builtins): fewer layers, tasks and awaits show up here long
before a wall-clock ratio can tell them from noise. *gen-0 per 1,500 docs* is how often
the collector's young generation filled up: its counter rises with every container (dict,
list, coroutine, future ...) allocated and falls with every one freed, 700 a collection,
so it follows what a document allocates and holds a while (copies, requests across an
await, tasks in flight) and what a batch keeps. It moves more than the calls (a few per
cent in a JSON batch, up to a third in an encrypted one): read its range. More of them
bring the *full* collections closer, each of which walks every object of the process and
stalls the event loop meanwhile (their duration, not their number, is what the p99 lag
shows). Hold a change to the path every document walks to both: no more calls and no more
young collections than the tree it replaces, or the change says which feature costs them
and why. Both depend on the Python and aiohttp versions: compare trees in one environment.
"""

from __future__ import annotations

BENCHMARKS = [
    "pgp",
    "e2e",
    "token",
    "lag",
    "memory",
    "procpool",
    "ledger",
    "single",
    "bulk",
    "sandbox_issuers",
    "telemetry",
    "issuers",
    "claims",
    "documents",
    "counts",
    "rotation",
]
