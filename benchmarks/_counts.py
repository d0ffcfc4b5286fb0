"""Two costs per document that the machine's load does not move: calls and collections.

On a shared 2-core machine two runs of the same tree differ by several per cent in
documents per second. The calls move by a percent or two, the young collections by a few
per cent (more in an encrypted batch), so a change to the path every document walks can
be held to them:

* :class:`Calls`: Python function calls, ``sys.setprofile``'s ``'call'`` events. One
  fires whenever a Python frame starts running: every call of a Python function or
  method, and every resumption of a coroutine or generator (an ``await`` that suspended
  and was woken up). That is the interpreter's work a redesign removes (layers, tasks,
  callbacks, awaits). ``'c_call'`` (Python code calling a builtin) is *not* counted: one
  such event costs anything from a dict lookup to an RSA encryption, so their number
  says little about time, and the builtins' own work and everything C code calls (the
  ``json`` encoder, the C task's steps, aiohttp's C parser) never appear in it anyway.
  The count covers the threads the client starts too (0.3 encrypted in a thread pool):
  the hook is installed for new threads when the counter is made, before the client
  exists, and counts only inside ``with counter:``. The hook makes a run two or three
  times slower: count in a run of its own, never in a timed one.
* :class:`Collections`: the garbage collector's runs, per generation, and how long each
  full (generation 2) one took, from ``gc.callbacks``. The young generation's counter
  rises with every object the collector tracks (containers: dicts, lists, coroutines,
  futures ...) allocated and falls with every one freed; past its threshold (700 by
  default) a young collection runs and the counter restarts from 0. So their number per
  document follows what a document allocates and holds a while (copies of it, requests
  and responses across an await, tasks in flight) and what a batch keeps (outcomes),
  not what is freed at once. A full collection walks every object of the process: its
  duration is a stall of the event loop, the p99 lag while a batch runs. A callback runs
  only per collection (a few µs each): timed runs can carry it.

The counts depend on the Python (3.11 and 3.12 differ by about 10 %) and on aiohttp's
version: compare trees in one environment. Only the standard library is used, so that
``benchmarks.compare``'s child can import this beside an old tree's library.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

#: Documents sent first, so that connections, workers and lazy imports are not counted.
WARM_UP = 100
#: The batch size the collection counts are quoted for ("gen-0 per 1,500 documents").
PER = 1500


class Calls:
    """Python function calls (``'call'`` events) made inside ``with counter:``.

    Make the counter before the client, so that the threads the client starts are hooked;
    :meth:`close` unhooks new threads again. One block per counter; ``count`` is read
    after it.
    """

    def __init__(self) -> None:
        self.count = 0
        self._armed = False
        self._ticks = itertools.count()
        threading.setprofile(self._hook)

    def _hook(self, _frame: object, event: str, _arg: object) -> None:
        if event == "call" and self._armed:
            next(self._ticks)  # one C call: atomic under the GIL, unlike ``+= 1``

    def __enter__(self) -> Calls:
        self._armed = True
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc_info: object) -> None:
        sys.setprofile(None)
        self._armed = False
        self.count = next(self._ticks)

    def close(self) -> None:
        threading.setprofile(None)  # type: ignore[arg-type]  (typeshed wants a function)


class Collections:
    """The collector's runs inside ``with Collections() as runs:``, per generation.

    Entering collects once (not counted), so that every measured run starts with an empty
    young generation; ``full_ms`` holds each full collection's duration in milliseconds.
    """

    def __init__(self) -> None:
        self.runs = [0, 0, 0]
        self.full_ms: list[float] = []
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = info["generation"]
        self.runs[generation] += 1
        if generation == 2:  # the oldest generation: a full collection
            self.full_ms.append((time.perf_counter() - self._started) * 1000)

    def __enter__(self) -> Collections:
        gc.collect()
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self._callback)

    def result(self, documents: int) -> dict[str, Any]:
        """The counts as a JSON object, for a block that sent ``documents``.

        Generations 0 and 1 per :data:`PER` documents; the full collections' durations as
        they were (their number does not scale with the batch).
        """
        scale = PER / documents
        return {
            "gen0": self.runs[0] * scale,
            "gen1": self.runs[1] * scale,
            "full_ms": [round(ms, 2) for ms in self.full_ms],
        }


async def measure(
    send: Callable[[list[Any]], Awaitable[Any]], documents: list[Any], counter: Calls | None
) -> tuple[dict[str, Any], Any]:
    """One run: ``send(documents)`` counted; the result as a JSON object, and what it sent.

    With a ``counter`` (made before the client), :data:`WARM_UP` documents are sent first,
    then all of them with the hook counting: ``{"calls": per document}``. Without, the
    send is timed and its collections counted: ``{"rate": docs/s, "cpu_us": CPU µs per
    document, "gen0", "gen1", "full_ms"}`` (:meth:`Collections.result`).
    """
    if counter is not None:
        await send(documents[:WARM_UP])
        with counter:
            sent = await send(documents)
        counter.close()
        return {"calls": counter.count / len(documents)}, sent
    with Collections() as runs:
        started, cpu = time.perf_counter(), time.process_time()
        sent = await send(documents)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    result = {"rate": len(documents) / seconds, "cpu_us": cpu / len(documents) * 1e6}
    return {**result, **runs.result(len(documents))}, sent


def read_counts(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' :meth:`Collections.result` in a few numbers.

    The median young and generation 1 collections per :data:`PER` documents, the young
    ones' range, the full collections of all the runs and the longest of them.
    """
    gen0 = [run["gen0"] for run in runs]
    return {
        "gen0": statistics.median(gen0),
        "gen0_range": (min(gen0), max(gen0)),
        "gen1": statistics.median(run["gen1"] for run in runs),
        "full": sum(len(run["full_ms"]) for run in runs),
        "runs": len(runs),
        "full_max_ms": max((ms for run in runs for ms in run["full_ms"]), default=0.0),
    }


def young(counts: dict[str, Any]) -> str:
    """:func:`read_counts`' young collections as text: ``141 (132-150)``, or ``141``."""
    low, high = (round(n) for n in counts["gen0_range"])
    return f"{counts['gen0']:.0f}" + (f" ({low}-{high})" if low != high else "")


def full(counts: dict[str, Any]) -> str:
    """:func:`read_counts`' full collections as text: ``1 in 3 runs (<= 24 ms)``, ``0``."""
    text = str(counts["full"]) + (f" in {counts['runs']} runs" if counts["runs"] > 1 else "")
    longest = counts["full_max_ms"]
    return text + (f" (<= {longest:.0f} ms)" if longest else "")


def describe(counts: dict[str, Any]) -> str:
    """:func:`read_counts` as text: ``gen-0 141 (132-150) per 1,500 docs, full 0``."""
    return f"gen-0 {young(counts)} per {PER:,} docs, full {full(counts)}"
