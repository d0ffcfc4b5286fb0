"""11. Many issuers: 10,000 issuers x 5 documents through ``IssuerPool``, from one process.

The provider is ``_provider.py`` in its own process, ``--strict``: every ``client_id`` is
an issuer with its own API key (:func:`~._provider.api_key_of` its TIN), and it counts
token requests and documents per issuer. The same 50,000 small documents
(``/Invoice/json``: ``encrypted=False``, the per-document PGP cost is the same for one
issuer or many), interleaved — document *n* is issuer *n* mod the issuer count's, as an
outbox claiming fairly across issuers hands them out, so every issuer's lane empties and
opens again between its documents — go through one batch (concurrency 64) in these
configurations:

* **many**: 10,000 issuers x 5 documents, ``IssuerPool.submit_many``;
* **ten**: 10 issuers x 5,000 documents, the same;
* **client**: one issuer's 50,000 with an ``InvoicingClient.submit_many``;
* **pool1**: the same with an ``IssuerPool`` of that one issuer;
* **faulty**: as *many*, but one issuer's key is revoked once half the documents were
  answered, and another is answered ``429`` (``Retry-After: 1``) to every document;
  through ``submit_stream``, so the time at which the *others'* last document settled is
  known (the batch is closed then: the throttled issuer's retries would go on alone).

Each run is a fresh interpreter (``--child``), so resident sizes compare: it imports
everything, builds the credentials mapping, warms up with 300 documents of another
issuer in a throwaway pool or client, then records its RSS, opens the measured pool or
client (no token yet: every token request is in the timed batch) and reports its peak
RSS, the batch's seconds and CPU seconds, and the provider's counts. Runs are
interleaved: each round runs every configuration once in a random order, and a ratio
is the median of the rounds' ratios (the machine is shared: drift within a round hits
all alike).

Request throughput counts what the provider answered: token requests and submissions
together (10,000 + 50,000 for *many*, 1 + 50,000 for *client*). Targets (issue 28):
exactly one token request per issuer (*many*, and the others of *faulty*); peak RSS
growth of *many* minus that of *ten* <= 150 MB; request throughput of *many* >= 0.9x
that of one issuer (*client* and *pool1* alike); and, the project's own, the others of
*faulty* >= 0.9x *many*: a revoked and a throttled issuer hold no one else back.

``python -m benchmarks.issuers --child CONFIG ISSUERS DOCUMENTS URL`` is one run.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import random
import sys
import time
from typing import TYPE_CHECKING, Any

from ._common import Chart, Section, Settings, fmt, median, peak_kib, run_child
from ._provider import ProviderProcess, api_key_of, control, reset, stats

if TYPE_CHECKING:
    from collections.abc import Iterator

NAME = "issuers"
CONCURRENCY = 64
PER_ISSUER = 5
#: The issuer of the warm-up documents: none of the measured ones.
WARM_UP_TIN = "699999999"
WARM_UP = 300
CONFIGS = ["many", "ten", "client", "pool1", "faulty"]


def _labels(many: int) -> dict[str, str]:
    count = many * PER_ISSUER
    return {
        "many": f"{many:,} issuers x {PER_ISSUER}, pool",
        "ten": f"10 issuers x {count // 10:,}, pool",
        "client": f"1 issuer x {count:,}, InvoicingClient",
        "pool1": f"1 issuer x {count:,}, IssuerPool of one",
        "faulty": f"{many:,} issuers, one revoked, one throttled",
    }


def tins(count: int) -> list[str]:
    """``count`` issuers' TINs (nine digits, none of them the warm-up issuer)."""
    return [f"{700_000_000 + n:09d}" for n in range(count)]


def documents(issuers: list[str], count: int) -> Iterator[dict[str, Any]]:
    """``count`` small invoices, issuer by issuer in turn, made one at a time."""
    for n in range(count):
        tin = issuers[n % len(issuers)]
        number = n // len(issuers)
        yield {
            "Issuer": {"Vat": tin},
            "Series": "M",
            "Number": number,
            "DistributionDetails": {"InternalDocumentId": f"{tin}-M-{number}"},
            "Summaries": {"TotalGrossValue": 12.4},
        }


# --- the child: one configuration in a fresh interpreter -----------------------------------


def _sender(config: str, url: str, credentials: dict[str, str]) -> Any:
    from invoicing_async import InvoicingClient, IssuerPool  # noqa: PLC0415

    if config == "client":
        ((tin, key),) = credentials.items()
        return InvoicingClient(url, tin, key, limit=CONCURRENCY)
    return IssuerPool(url, credentials, limit=CONCURRENCY)


async def _warm_up(config: str, url: str) -> None:
    """Imports, code paths and first connections, with an issuer not measured."""
    credentials = {WARM_UP_TIN: api_key_of(WARM_UP_TIN)}
    async with _sender(config, url, credentials) as sender:
        await sender.submit_many(
            documents([WARM_UP_TIN], WARM_UP), concurrency=CONCURRENCY, encrypted=False
        )


async def _faulty(sender: Any, issuers: list[str], count: int) -> dict[str, Any]:
    """The *faulty* batch: seconds until the others' last document settled, and statuses."""
    revoked, throttled = issuers[0], issuers[1]
    others_left = count - 2 * (count // len(issuers))
    statuses: dict[str, dict[str, int]] = {"revoked": {}, "throttled": {}, "others": {}}
    started = time.perf_counter()
    seconds = 0.0
    stream = sender.submit_stream(
        documents(issuers, count), concurrency=CONCURRENCY, encrypted=False
    )
    async with contextlib.aclosing(stream) as outcomes:
        async for outcome in outcomes:
            tin = issuers[outcome.index % len(issuers)]
            group = {revoked: "revoked", throttled: "throttled"}.get(tin, "others")
            counts = statuses[group]
            counts[outcome.status.value] = counts.get(outcome.status.value, 0) + 1
            if group == "others":
                others_left -= 1
                if not others_left:
                    seconds = time.perf_counter() - started
                    break
    return {"seconds": seconds, "statuses": statuses}


async def _child(config: str, issuer_count: int, count: int, url: str) -> dict[str, Any]:
    issuers = tins(issuer_count)
    credentials = {tin: api_key_of(tin) for tin in issuers}
    await _warm_up(config, url)
    reset(url)
    if config == "faulty":
        control(url, revoke=issuers[0], revoke_after=count // 2)
        control(url, throttle=issuers[1], retry_after=1)
    gc.collect()
    rss_before, _ = peak_kib()
    async with _sender(config, url, credentials) as sender:
        cpu = time.process_time()
        if config == "faulty":
            result = await _faulty(sender, issuers, count)
        else:
            started = time.perf_counter()
            outcomes = await sender.submit_many(
                documents(issuers, count), concurrency=CONCURRENCY, encrypted=False
            )
            result = {"seconds": time.perf_counter() - started, "statuses": {"others": {}}}
            for outcome in outcomes:
                others = result["statuses"]["others"]
                others[outcome.status.value] = others.get(outcome.status.value, 0) + 1
            del outcomes
        result["cpu"] = time.process_time() - cpu
        _, hwm_after = peak_kib()
    counted = stats(url, clients=True)
    per_client = counted.pop("clients")
    faulty = set(issuers[:2]) if config == "faulty" else set()
    others = [per_client.get(tin, [0, 0]) for tin in issuers if tin not in faulty]
    return {
        **result,
        "config": config,
        "issuers": issuer_count,
        "count": count,
        "rss_before_kib": rss_before,
        "hwm_after_kib": hwm_after,
        "totals": counted,
        "others_tokens": [min(c[0] for c in others), max(c[0] for c in others)],
        "others_requests": sum(c[0] + c[1] for c in others),
        "faulty_tokens": [per_client.get(tin, [0, 0])[0] for tin in sorted(faulty)],
    }


# --- the parent ---------------------------------------------------------------------------


def _run_once(config: str, url: str, settings: Settings) -> dict[str, Any]:
    many = settings.n(10_000, 200)
    count = many * PER_ISSUER
    issuers = {"many": many, "faulty": many, "ten": 10, "client": 1, "pool1": 1}[config]
    result = run_child(NAME, config, str(issuers), str(count), url)
    expected = count - (2 * PER_ISSUER if config == "faulty" else 0)
    if result["statuses"]["others"] != {"accepted": expected}:
        raise AssertionError(f"{config}: not every document accepted: {result['statuses']}")
    return result


def _rate(result: dict[str, Any]) -> float:
    """Requests per second: every request of the batch, or the others' (*faulty*)."""
    if result["config"] == "faulty":
        return float(result["others_requests"]) / result["seconds"]
    totals = result["totals"]
    return (totals["token"] + totals["documents"]) / result["seconds"]


def _growth_mb(result: dict[str, Any]) -> float:
    return (result["hwm_after_kib"] - result["rss_before_kib"]) / 1024


def run(settings: Settings) -> Section:
    section = Section(
        NAME,
        f"Many issuers: {settings.n(10_000, 200):,} x {PER_ISSUER} documents through IssuerPool "
        f"(submit_many, concurrency {CONCURRENCY}, /Invoice/json)",
        ["Configuration", "token requests", "requests/s (median)", "÷ client",
         "CPU µs/request", "peak RSS growth", "Target"],
    )  # fmt: skip
    rounds = settings.n(3, 1)
    many = settings.n(10_000, 200)
    labels = _labels(many)
    results: dict[str, list[dict[str, Any]]] = {config: [] for config in CONFIGS}
    order = list(CONFIGS)
    with ProviderProcess(strict=True) as provider:
        for _ in range(rounds):
            random.shuffle(order)  # drift on a noisy machine hits all of them alike
            for config in order:
                results[config].append(_run_once(config, provider.url, settings))
    rates = {config: [_rate(r) for r in rs] for config, rs in results.items()}

    def ratio(top: str, bottom: str) -> float:
        return median([t / b for t, b in zip(rates[top], rates[bottom], strict=True)])

    growth = {config: median([_growth_mb(r) for r in rs]) for config, rs in results.items()}
    one_each = all(
        r["others_tokens"] == [1, 1] for config in ("many", "faulty") for r in results[config]
    )
    targets = {
        "many": "; ".join(
            [
                section.add_check(
                    f"issuers: token requests per issuer ({many:,} issuers)",
                    "1 each" if one_each else _spread(results),
                    "1 each",
                    one_each,
                ),
                section.add_check(
                    f"issuers: peak RSS growth, {many:,} minus 10 issuers",
                    f"{growth['many'] - growth['ten']:.1f} MB",
                    "<= 150 MB",
                    growth["many"] - growth["ten"] <= 150,
                ),
                section.check(
                    f"issuers: requests/s, {many:,} issuers ÷ 1 (InvoicingClient)",
                    ratio("many", "client"),
                    0.9,
                    higher=True,
                ),
                section.check(
                    f"issuers: requests/s, {many:,} issuers ÷ 1 (IssuerPool of one)",
                    ratio("many", "pool1"),
                    0.9,
                    higher=True,
                ),
            ]
        ),
        "faulty": section.check(
            "issuers: the others' requests/s, one revoked and one throttled ÷ none",
            ratio("faulty", "many"),
            0.9,
            higher=True,
        ),
    }
    for config in CONFIGS:
        rs = results[config]
        tokens = median([r["totals"]["token"] for r in rs])
        requests = [r["totals"]["token"] + r["totals"]["documents"] for r in rs]
        if config == "faulty":
            requests = [r["others_requests"] for r in rs]
        cpu = median([r["cpu"] / n * 1e6 for r, n in zip(rs, requests, strict=True)])
        section.rows.append(
            [
                labels[config],
                fmt(tokens, 0),
                fmt(median(rates[config]), 0),
                f"{ratio(config, 'client'):.2f}x",
                f"{cpu:.0f}",
                f"{growth[config]:+.1f} MB",
                targets.get(config, ""),
            ]
        )
    faulty = results["faulty"]
    section.notes += [
        (
            f"Medians of {rounds} round(s), configurations in a random order each round, "
            "each a fresh interpreter; ratios are medians of the rounds' ratios. Per round, "
            "many ÷ client: "
            + ", ".join(f"{m / c:.2f}" for m, c in zip(rates["many"], rates["client"], strict=True))
            + "; faulty's others ÷ many: "
            + ", ".join(f"{f / m:.2f}" for f, m in zip(rates["faulty"], rates["many"], strict=True))
            + "."
        ),
        (
            "Requests are what the provider answered (token requests and documents); for the "
            "faulty run, the other issuers' requests until their last document settled. "
            "Peak RSS growth: VmHWM after the batch minus VmRSS before the pool was opened "
            "(imports, credentials mapping and a 300-document warm-up done)."
        ),
        (
            "Faulty run: the revoked issuer's token requests "
            + ", ".join(str(r["faulty_tokens"][0]) for r in faulty)
            + " (one, then the one its first 401 forced, refused); its documents "
            + ", ".join(json.dumps(r["statuses"]["revoked"]) for r in faulty)
            + "; the throttled issuer's, when the others were done: "
            + ", ".join(json.dumps(r["statuses"]["throttled"] or "none settled") for r in faulty)
            + "."
        ),
    ]
    section.charts.append(
        Chart(
            "Many issuers: request throughput",
            "requests/s",
            ["requests/s (median)"],
            {labels[config]: [median(rates[config])] for config in CONFIGS},
        )
    )
    return section


def _spread(results: dict[str, list[dict[str, Any]]]) -> str:
    lows = [r["others_tokens"][0] for config in ("many", "faulty") for r in results[config]]
    highs = [r["others_tokens"][1] for config in ("many", "faulty") for r in results[config]]
    return f"{min(lows)} to {max(highs)} each"


def main() -> None:
    if len(sys.argv) != 6 or sys.argv[1] != "--child":
        sys.exit("usage: python -m benchmarks.issuers --child CONFIG ISSUERS DOCUMENTS URL")
    config, issuers, count, url = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    print(json.dumps(asyncio.run(_child(config, issuers, count, url))))


if __name__ == "__main__":
    main()
