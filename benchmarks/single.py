"""8. A single call: sequential ``submit_secure`` latency against raw aiohttp.

What a POS backend's handler pays per sale: one ``await client.submit_secure(invoice)``
after the other (no concurrency), a 4 KB invoice (RSA-3072), against a provider in
another process (``_provider.py``) that answers at once, and one that answers after
20 ms. The floor is raw aiohttp doing the same work with the least Python: a token
fetched beforehand, ``json.dumps`` + the floor encryption (``_floor.py``, on the loop)
+ ``POST`` + reading and ``json.loads``-ing the answer.

Library and floor calls are timed one by one with ``perf_counter_ns``, in rounds whose
order is shuffled (drift on a shared machine hits both alike); p50 and p90 of each are
reported. Target: library p50 < 1.2x the floor's, with both providers.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import TYPE_CHECKING

import aiohttp

from invoicing_sandbox._samples import sample_invoice

from ._common import Section, Settings, keypair, percentile
from ._floor import FloorRecipient, encrypt_armored
from ._provider import ProviderProcess
from .e2e import client, floor_headers

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

NAME = "single"
TARGET = 1.2


async def _floor_caller(
    session: aiohttp.ClientSession, url: str
) -> Callable[[dict[str, object]], Awaitable[None]]:
    """One raw call per document: serialise, encrypt on the loop, post, read, parse."""
    recipient = FloorRecipient.from_armored(keypair("rsa3072").public_armored)
    headers = await floor_headers(session, url, encrypted=True)
    target = url + "/Invoice/secure"
    dumps = json.dumps

    async def call(document: dict[str, object]) -> None:
        body = dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
        body = encrypt_armored(recipient, body)
        async with session.post(target, data=body, headers=headers) as answer:
            record = json.loads(await answer.read())
            if answer.status != 201 or not record:
                raise AssertionError(f"floor post failed: {answer.status}")

    return call


async def _measure(url: str, docs: list[dict[str, object]], rounds: int) -> dict[str, list[int]]:
    """Nanoseconds per call of the library and the floor, rounds interleaved."""
    samples: dict[str, list[int]] = {"library": [], "floor": []}
    async with client(url) as library, aiohttp.ClientSession() as session:
        await library.token()
        floor = await _floor_caller(session, url)

        async def lib(document: dict[str, object]) -> None:
            await library.submit_secure(document)

        calls = {"library": lib, "floor": floor}
        for call in calls.values():  # warm up: connections, caches, the thread pool
            for document in docs[:20]:
                await call(document)
        per_round = max(1, len(docs) // rounds)
        clock = time.perf_counter_ns
        order = list(calls)
        for round_ in range(rounds):
            random.shuffle(order)
            part = docs[round_ * per_round : (round_ + 1) * per_round]
            for name in order:
                timed, bucket = calls[name], samples[name]
                for document in part:
                    started = clock()
                    await timed(document)
                    bucket.append(clock() - started)
    return samples


def run(settings: Settings) -> Section:
    section = Section(
        NAME,
        "A single call: sequential submit_secure vs raw aiohttp (µs per call, 4 KB, RSA-3072)",
        ["Provider", "Client", "calls", "p50 µs", "p90 µs", "p50 ÷ floor", "Target"],
    )
    count = settings.n(2000, 100)
    rounds = settings.n(10, 2)
    docs = [sample_invoice(n) for n in range(1, count + 1)]
    for latency in (0.0, 0.02):
        provider_name = "instant" if not latency else f"{latency * 1000:.0f} ms"
        calls = count if not latency else max(rounds, count // 4)
        with ProviderProcess(latency) as provider:
            samples = asyncio.run(_measure(provider.url, docs[:calls], rounds))
        p50 = {name: percentile(values, 50) / 1000 for name, values in samples.items()}
        p90 = {name: percentile(values, 90) / 1000 for name, values in samples.items()}
        ratio = p50["library"] / p50["floor"]
        verdict = section.check(
            f"single: submit_secure p50 ÷ raw aiohttp ({provider_name} provider)",
            ratio,
            TARGET,
            higher=False,
        )
        for name, label in (("library", "submit_secure"), ("floor", "floor (raw aiohttp)")):
            section.rows.append(
                [
                    provider_name,
                    label,
                    str(len(samples[name])),
                    f"{p50[name]:,.0f}",
                    f"{p90[name]:,.0f}",
                    f"{p50[name] / p50['floor']:.2f}x",
                    verdict if name == "library" else "",
                ]
            )
    section.notes.append(
        "One call at a time, as a till's handler makes them; the floor encrypts on the "
        "loop with the least Python (_floor.py) and posts with a pre-fetched token."
    )
    return section
