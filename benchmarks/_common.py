"""What every benchmark shares: run settings, timing, statistics, result sections, keys."""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import random
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from invoicing_async import ProviderKey
    from invoicing_sandbox import SandboxKeyPair


@dataclass(frozen=True)
class Settings:
    """How big a run is: ``quick`` is the harness smoke test (small counts)."""

    quick: bool = False

    def n(self, full: int, quick: int) -> int:
        """``full`` in a full run, ``quick`` in a quick one."""
        return quick if self.quick else full


@dataclass
class Check:
    """One target: what was compared, the measured ratio or value, and the verdict."""

    what: str
    measured: str
    target: str
    passed: bool

    @property
    def verdict(self) -> str:
        return "PASS" if self.passed else "MISS"


@dataclass
class Chart:
    """A grouped bar chart: one group per label, one bar per series."""

    title: str
    ylabel: str
    labels: list[str]
    series: dict[str, list[float]]
    log: bool = False


@dataclass
class Section:
    """One benchmark's results: a table, notes, target checks and an optional chart."""

    name: str
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    seconds: float = 0.0

    def check(
        self, what: str, value: float, target: float, *, higher: bool, unit: str = "x"
    ) -> str:
        """Record a target check and return ``"<value><unit> PASS|MISS"`` for the table."""
        passed = value >= target if higher else value < target
        sign = ">=" if higher else "<"
        return self.add_check(what, f"{value:.2f}{unit}", f"{sign} {target:g}{unit}", passed)

    def add_check(self, what: str, measured: str, target: str, passed: bool) -> str:
        """Record a target check of any kind; return ``"<measured> PASS|MISS"``."""
        check = Check(what, measured, target, passed)
        self.checks.append(check)
        return f"{measured} {check.verdict}"


# --- statistics --------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; values need not be sorted."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def interleaved_timings(
    candidates: dict[str, Callable[[], object]],
    runs: dict[str, int],
    *,
    rounds: int = 10,
    warmup: int = 5,
) -> dict[str, list[int]]:
    """Time single calls of every candidate with ``perf_counter_ns``, rounds interleaved.

    Each candidate gets ``runs[name]`` timed calls split over ``rounds`` rounds; the order
    of candidates is shuffled every round, so drift on a noisy machine hits all of them
    alike. The garbage collector is off while timing (as ``timeit`` does).
    """
    for name, call in candidates.items():
        for _ in range(min(warmup, runs[name])):
            call()
    samples: dict[str, list[int]] = {name: [] for name in candidates}
    order = list(candidates)
    clock = time.perf_counter_ns
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        for round_ in range(rounds):
            random.shuffle(order)
            for name in order:
                call = candidates[name]
                per_round = runs[name] // rounds + (1 if round_ < runs[name] % rounds else 0)
                bucket = samples[name]
                for _ in range(per_round):
                    started = clock()
                    call()
                    bucket.append(clock() - started)
    finally:
        if enabled:
            gc.enable()
    return samples


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def peak_kib() -> tuple[int, int]:
    """Current and peak resident size in KiB (``resource`` where /proc is missing)."""
    try:
        return _status_kib("VmRSS"), _status_kib("VmHWM")
    except OSError:
        import resource  # noqa: PLC0415

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak, peak


def small_documents(count: int, start: int = 0) -> Iterator[dict[str, Any]]:
    """``count`` small invoices numbered from ``start``, made one at a time."""
    for number in range(start, start + count):
        yield {
            "Issuer": {"Vat": "094019245"},
            "Series": "M",
            "Number": number,
            "DistributionDetails": {"InternalDocumentId": f"094019245-M-{number}"},
            "Summaries": {"TotalGrossValue": 12.4},
        }


def run_child(module: str, *args: str) -> dict[str, float]:
    """Run ``python -m benchmarks.<module> --child ARGS``; its last line, a JSON object.

    A fresh interpreter for each run: its memory and start-up are its own.
    """
    out = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", "--child", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if out.returncode:
        raise RuntimeError(f"{module} child {args[0]} failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def stopwatch() -> Callable[[], float]:
    """Seconds since the call, as a function."""
    started = time.perf_counter()
    return lambda: time.perf_counter() - started


# --- keys and documents ------------------------------------------------------------------


@functools.cache
def keypair(algorithm: str) -> SandboxKeyPair:
    """A sandbox provider key pair (``rsa3072`` or ``cv25519``), generated once per process."""
    from invoicing_sandbox import generate_keypair  # noqa: PLC0415

    return generate_keypair(algorithm)  # type: ignore[arg-type]


@functools.cache
def provider_key(algorithm: str) -> ProviderKey:
    """The library's :class:`ProviderKey` for :func:`keypair`."""
    from invoicing_async import ProviderKey  # noqa: PLC0415

    return ProviderKey.from_armored(keypair(algorithm).public_armored)


def invoice_json(number: int, lines: int) -> bytes:
    """A sample invoice serialised exactly as the library sends it."""
    from invoicing_async._doc.document import serialize_document  # noqa: PLC0415
    from invoicing_sandbox._samples import sample_invoice  # noqa: PLC0415

    return serialize_document(sample_invoice(number, lines=lines))


@contextlib.contextmanager
def quiet_warnings() -> Iterator[None]:
    """Ignore warnings (PGPy's deprecation noise) inside the block only."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def fmt(value: float, digits: int = 1) -> str:
    """A number with thousands separators."""
    return f"{value:,.{digits}f}"
