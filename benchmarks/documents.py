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

**Each type of the rest of a day.** The same way, for a document of each type typed
since (11.2, 11.3, 11.4, 11.5, 5.2, 1.2, 1.3, 2.2, 2.3): the 25 lines (at 0 % with their
exemption for a sale abroad) and what its type names (the customer abroad and its
country, the marks an 11.4 credits, an 11.5's third party), by hand and typed +
``check`` (which applies the type's rules). Target for each: at most 50 µs more.

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
import functools
import gc
import time
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, NamedTuple

from invoicing_async import OutcomeStatus
from invoicing_async.documents import (
    VAT_RATES,
    Address,
    CreditReceipt,
    DocumentBase,
    IntraEUSalesInvoice,
    IntraEUServiceInvoice,
    Line,
    Party,
    PaymentMethod,
    RetailReceipt,
    ServiceReceipt,
    SimplifiedInvoice,
    ThirdCountrySalesInvoice,
    ThirdCountryServiceInvoice,
    ThirdPartyReceipt,
    UncorrelatedCreditNote,
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
#: Each VAT category's rate, as the fraction a net is multiplied by.
_RATES = {code: Decimal(rate) / 100 for code, rate in VAT_RATES.items()}
_ISSUER = Party(vat="EL123456783")


class Kind(NamedTuple):
    """A type of document to build both ways: its class, its lines' VAT, its own members."""

    cls: type[DocumentBase]
    #: The lines' VAT category (1: 24 %, 7: 0 %) and exemption (``None``: none).
    category: int = 1
    exemption: int | None = None
    #: Its own members: the typed document's fields, and their JSON, as written by hand.
    fields: dict[str, Any] = {}  # noqa: RUF012  (never mutated)
    members: dict[str, Any] = {}  # noqa: RUF012


def _abroad(country: str, vat: str) -> tuple[dict[str, Any], dict[str, Any]]:
    party = Party(vat=vat, address=Address(country_code=country))
    return {"counterparty": party}, {
        "CounterParty": {"Vat": vat, "Address": {"CountryCode": country}}
    }


_MARK = 400007396844549
_EXPORT = {"category": 7, "exemption": 14}
#: The types of the rest of a day (issue 40), each as its sample is shaped.
KINDS = [
    Kind(ServiceReceipt),
    Kind(SimplifiedInvoice),
    Kind(
        CreditReceipt,
        fields={"correlated_invoices": [_MARK]},
        members={"CorrelatedInvoices": [_MARK]},
    ),
    Kind(
        ThirdPartyReceipt,
        fields={"third_party": Party(vat="EL094019245")},
        members={"ThirdParty": {"Vat": "EL094019245"}},
    ),
    Kind(
        UncorrelatedCreditNote,
        fields={"counterparty": Party(vat="EL094019245")},
        members={"CounterParty": {"Vat": "EL094019245"}},
    ),
    Kind(
        IntraEUSalesInvoice,
        **_EXPORT,
        **dict(zip(("fields", "members"), _abroad("IT", "IT00000000000"), strict=True)),
    ),
    Kind(
        ThirdCountrySalesInvoice,
        **_EXPORT,
        **dict(zip(("fields", "members"), _abroad("GB", "GB123456789"), strict=True)),
    ),
    Kind(
        IntraEUServiceInvoice,
        **_EXPORT,
        **dict(zip(("fields", "members"), _abroad("DE", "DE123456789"), strict=True)),
    ),
    Kind(
        ThirdCountryServiceInvoice,
        **_EXPORT,
        **dict(zip(("fields", "members"), _abroad("US", "US1234"), strict=True)),
    ),
]
#: The retail receipt of the first measure.
RECEIPT = Kind(RetailReceipt)


def build_dict(kind: Kind = RECEIPT) -> dict[str, Any]:
    """The document as an application builds the provider's JSON by hand, done right."""
    details = []
    net_sum = vat_sum = Decimal(0)
    rate = _RATES[kind.category]
    for number, (text, quantity, price) in enumerate(ITEMS, 1):
        net = (quantity * price).quantize(_CENT, ROUND_HALF_UP)
        vat = (net * rate).quantize(_CENT, ROUND_HALF_UP)
        net_sum += net
        vat_sum += vat
        line = {
            "Descriptions": [text],
            "Quantity": float(quantity),
            "UnitPrice": float(price),
            "VatCategoryCode": kind.category,
            "NetTotal": float(net),
            "VATTotal": float(vat),
            "Total": float(net + vat),
            "LineNo": number,
        }
        if kind.exemption is not None:
            line["VatExemptionCategoryCode"] = kind.exemption
        details.append(line)
    gross = net_sum + vat_sum
    return {
        **kind.members,
        "InvoiceTypeCode": kind.cls.type_code,
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
            {
                "Percentage": float(rate * 100),
                "UnderlyingValue": float(net_sum),
                "VatAmount": float(vat_sum),
            }
        ],
        "DistributionDetails": {"InternalDocumentId": "till-1/A/17"},
        "PaymentDetails": {
            "PaymentMethods": [{"PaymentMethodTypeCode": 7, "Amount": float(gross)}]
        },
    }


def build_typed(kind: Kind = RECEIPT) -> DocumentBase:
    """The same document, typed: the model computes what the dict's builder computed."""
    category, exemption = kind.category, kind.exemption
    return kind.cls(
        issuer=_ISSUER,
        series="A",
        number=17,
        issued="2026-11-22T10:15:00",
        lines=[
            Line(
                text,
                quantity=quantity,
                unit_price=price,
                vat_category=category,
                vat_exemption=exemption,
            )
            for text, quantity, price in ITEMS
        ],
        payments=[PaymentMethod(7)],
        internal_id="till-1/A/17",
        **kind.fields,
    )


def build_and_check(kind: Kind = RECEIPT) -> DocumentBase:
    document = build_typed(kind)
    if check(document):
        raise AssertionError("the document has problems")
    return document


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


def _kinds(settings: Settings, section: Section) -> None:
    """Each type of the rest of a day: typed + check vs its JSON by hand."""
    candidates: dict[str, Any] = {}
    for kind in (RECEIPT, *KINDS):  # 11.1's, measured again beside them, for reference
        if to_json(build_typed(kind)) != build_dict(kind) or check(build_dict(kind)):
            raise AssertionError(f"{kind.cls.__name__}: the two ways differ, or have problems")
        code = kind.cls.type_code
        candidates[f"{code} dict"] = functools.partial(build_dict, kind)
        candidates[f"{code} typed + check"] = functools.partial(build_and_check, kind)
    count = settings.n(2000, 30)
    timings = interleaved_timings(candidates, dict.fromkeys(candidates, count))
    us = {name: median(values) / 1000 for name, values in timings.items()}
    worst = max(
        us[f"{k.cls.type_code} typed + check"] - us[f"{k.cls.type_code} dict"] for k in KINDS
    )
    verdict = section.check(
        f"documents: typed + check - dict, {LINES} lines, the worst of the {len(KINDS)} new types",
        worst,
        50,
        higher=False,
        unit=" µs",
    )
    for kind in (RECEIPT, *KINDS):
        code = kind.cls.type_code
        extra = us[f"{code} typed + check"] - us[f"{code} dict"]
        section.rows.append(
            [
                f"{code} {kind.cls.__name__}: typed + check (dict {us[f'{code} dict']:.1f} µs)",
                f"{count}",
                f"{us[f'{code} typed + check']:.1f} µs",
                f"{extra:+.1f} µs",
                verdict if extra == worst and kind is not RECEIPT else "",
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
    _kinds(settings, section)
    _batches(settings, section)
    section.notes.append(
        "Building: medians of single calls (perf_counter_ns), candidates interleaved in "
        "shuffled rounds, the garbage collector off. A typed document's computed lines "
        "and summaries hold the rules by construction: check() reads its other fields."
    )
    return section
