"""14. Documents: what typed documents and their checks cost.

**Building.** The same 25-line retail receipt, made two ways, timed call by call with
the rounds interleaved (the machine is shared: drift hits them alike):

* **dict**: the provider's JSON built by hand, as an application does it right: each
  line's net and VAT computed with ``Decimal`` and rounded per line, the summaries, the
  VAT analysis and the payment added up, amounts written as floats;
* **typed + check**: ``RetailReceipt(lines=[Line(...) ...])`` (the same values computed
  by the model) and ``check(receipt)``, the document then ready to send.

The two documents are the same JSON (checked before timing). Target: typed + check
costs at most 50 µs more than the dict (medians). Beside: the typed document alone,
``check`` of the dict, and ``to_json`` of the typed document (paid when it is sent).

**A batch, checked.** ``submit_many`` of 10-line sample invoices (4 KB, RSA-3072,
concurrency 64, a provider process answering at once: the client's CPU bounds the
batch, the worst case for a per-document cost), as they are and each marked
``checked()`` (the rules run where each is serialised). Rounds alternate the order.
As for ``telemetry``, the target is on throughput per CPU second of the client process
(documents ÷ its CPU seconds while the batch runs), which other engineers' load on the
machine moves far less than the wall clock: checked ÷ unchecked >= 0.97x (median of the
rounds' ratios). The wall clock's documents per second are shown beside.
"""

from __future__ import annotations

import asyncio
import gc
import time
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from invoicing_async import OutcomeStatus
from invoicing_async.documents import (
    Line,
    Party,
    PaymentMethod,
    RetailReceipt,
    check,
    checked,
    to_json,
)
from invoicing_sandbox._samples import sample_invoice

from ._common import Section, Settings, fmt, interleaved_timings, median
from ._provider import ProviderProcess
from .e2e import CONCURRENCY, client

NAME = "documents"
LINES = 25
#: The receipt's lines: text, quantity, unit price (the same for both ways).
ITEMS = [
    (f"Προϊόν {n}", Decimal(n % 5 + 1), Decimal(f"{n % 17 + 1}.{n * 7 % 100:02d}"))
    for n in range(LINES)
]
_CENT = Decimal("0.01")
_RATE = Decimal("0.24")
_ISSUER = Party(vat="EL123456783")


def build_dict() -> dict[str, Any]:
    """The receipt as an application builds the provider's JSON by hand, done right."""
    details = []
    net_sum = vat_sum = Decimal(0)
    for number, (text, quantity, price) in enumerate(ITEMS, 1):
        net = (quantity * price).quantize(_CENT, ROUND_HALF_UP)
        vat = (net * _RATE).quantize(_CENT, ROUND_HALF_UP)
        net_sum += net
        vat_sum += vat
        details.append(
            {
                "Descriptions": [text],
                "Quantity": float(quantity),
                "UnitPrice": float(price),
                "VatCategoryCode": 1,
                "NetTotal": float(net),
                "VATTotal": float(vat),
                "Total": float(net + vat),
                "LineNo": number,
            }
        )
    gross = net_sum + vat_sum
    return {
        "InvoiceTypeCode": "11.1",
        "Issuer": {"Vat": "EL123456783"},
        "Series": "A",
        "Number": 17,
        "DateIssued": "2026-11-22T10:15:00",
        "Details": details,
        "Summaries": {
            "TotalNetAmount": float(net_sum),
            "TotalVATAmount": float(vat_sum),
            "TotalGrossValue": float(gross),
        },
        "VatAnalysis": [
            {"Percentage": 24.0, "UnderlyingValue": float(net_sum), "VatAmount": float(vat_sum)}
        ],
        "DistributionDetails": {"InternalDocumentId": "till-1/A/17"},
        "PaymentDetails": {
            "PaymentMethods": [{"PaymentMethodTypeCode": 7, "Amount": float(gross)}]
        },
    }


def build_typed() -> RetailReceipt:
    """The same receipt, typed: the model computes what the dict's builder computed."""
    return RetailReceipt(
        issuer=_ISSUER,
        series="A",
        number=17,
        issued="2026-11-22T10:15:00",
        lines=[Line(text, quantity=quantity, unit_price=price) for text, quantity, price in ITEMS],
        payments=[PaymentMethod(7)],
        internal_id="till-1/A/17",
    )


def build_and_check() -> RetailReceipt:
    receipt = build_typed()
    if check(receipt):
        raise AssertionError("the receipt has problems")
    return receipt


def _building(settings: Settings, section: Section) -> None:
    if to_json(build_typed()) != build_dict() or check(build_dict()):
        raise AssertionError("the two ways do not build the same valid document")
    typed, document = build_typed(), build_dict()
    candidates = {
        "dict": build_dict,
        "typed + check": build_and_check,
        "typed": build_typed,
        "check(dict)": lambda: check(document),
        "to_json(typed)": lambda: to_json(typed),
    }
    count = settings.n(3000, 60)
    timings = interleaved_timings(candidates, dict.fromkeys(candidates, count))
    us = {name: median(values) / 1000 for name, values in timings.items()}
    extra = us["typed + check"] - us["dict"]
    verdict = section.check(
        f"documents: typed + check - dict, {LINES} lines", extra, 50, higher=False, unit=" µs"
    )
    labels = {
        "dict": "the JSON built by hand (Decimal per line)",
        "typed + check": "typed document + check()",
        "typed": "typed document alone",
        "check(dict)": "check() of the hand-built JSON",
        "to_json(typed)": "to_json() of the typed document",
    }
    for name, label in labels.items():
        section.rows.append(
            [
                label,
                f"{count}",
                f"{us[name]:.1f} µs",
                f"{us[name] - us['dict']:+.1f} µs" if name != "dict" else "",
                verdict if name == "typed + check" else "",
            ]
        )


async def _batch(url: str, docs: list[Any], *, marked: bool) -> tuple[float, float]:
    """docs/s and CPU µs per document of one batch, checked or not."""
    gc.collect()
    async with client(url) as c:
        await c.token()
        cpu, started = time.process_time(), time.perf_counter()
        outcomes = await c.submit_many(
            map(checked, docs) if marked else docs, concurrency=CONCURRENCY
        )
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if any(o.status is not OutcomeStatus.ACCEPTED for o in outcomes):
        raise AssertionError("a document was not accepted")
    return len(docs) / seconds, cpu / len(docs) * 1e6


def _batches(settings: Settings, section: Section) -> None:
    count, rounds = settings.n(600, 100), settings.n(40, 1)
    docs = [sample_invoice(n) for n in range(1, count + 1)]
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with ProviderProcess() as provider:
        asyncio.run(_batch(provider.url, docs[:100], marked=True))  # warm-up
        for round_ in range(rounds):
            for marked in (round_ % 2 == 0, round_ % 2 == 1):
                results[marked].append(asyncio.run(_batch(provider.url, docs, marked=marked)))
    # Documents per CPU second: the CPU µs per document of the unchecked ÷ the checked's.
    ratios = [off[1] / on[1] for on, off in zip(results[True], results[False], strict=True)]
    walls = [on[0] / off[0] for on, off in zip(results[True], results[False], strict=True)]
    verdict = section.check(
        "documents: checked ÷ unchecked batch, docs per CPU second",
        median(ratios),
        0.97,
        higher=True,
    )
    for marked, label in ((False, "submit_many(documents)"), (True, "... map(checked, ...)")):
        rate = median([r[0] for r in results[marked]])
        cpu = median([r[1] for r in results[marked]])
        section.rows.append(
            [
                label,
                f"{count} x {rounds}",
                f"{fmt(rate, 0)} docs/s, {cpu:.0f} CPU µs/doc",
                f"{median(ratios):.3f}x" if marked else "",
                verdict if marked else "",
            ]
        )
    section.notes.append(
        "Checked ÷ unchecked per round, documents per CPU second: "
        + ", ".join(f"{r:.3f}" for r in ratios)
        + "; wall clock docs/s: "
        + ", ".join(f"{r:.3f}" for r in walls)
        + "."
    )


def run(settings: Settings) -> Section:
    section = Section(
        NAME,
        f"Documents: a typed {LINES}-line receipt and its check vs the JSON by hand; "
        "a batch checked vs unchecked",
        ["What", "calls / docs x rounds", "median", "vs the dict / ratio", "Target"],
    )
    _building(settings, section)
    _batches(settings, section)
    section.notes.append(
        "Building: medians of single calls (perf_counter_ns), candidates interleaved in "
        "shuffled rounds, the garbage collector off. A typed document's computed lines "
        "and summaries hold the rules by construction: check() reads its other fields."
    )
    return section
