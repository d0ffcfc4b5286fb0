"""Run the benchmarks, print the tables, write RESULTS.rst and results.png."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from . import BENCHMARKS, compare
from ._common import Section, Settings

if TYPE_CHECKING:
    from collections.abc import Sequence

HERE = Path(__file__).resolve().parent


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpg_version() -> str:
    if shutil.which("gpg") is None:
        return "not installed"
    try:
        out = subprocess.run(
            ["gpg", "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.splitlines()[0].split()[-1] if out else "unknown"


def _git_revision() -> str:
    """The commit benchmarked, ``+changes`` when the library has uncommitted edits."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=HERE,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "invoicing_async"],
            capture_output=True,
            text=True,
            cwd=HERE.parent,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + (" +changes" if dirty else "")


def machine() -> list[tuple[str, str]]:
    """What the numbers were measured on."""
    return [
        ("CPU", f"{_cpu_model()}, {os.cpu_count()} logical cores"),
        ("OS", platform.platform()),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("invoicing_async", f"{_version('invoicing-async')} (git {_git_revision()})"),
        ("aiohttp", _version("aiohttp")),
        ("cryptography", _version("cryptography")),
        ("PGPym", _version("PGPym")),
        ("python-gnupg / gpg", f"{_version('python-gnupg')} / {_gpg_version()}"),
        ("date", dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
    ]


def grid(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An RST grid table (readable as plain text too)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=False)]

    def line(char: str) -> str:
        return "+" + "+".join(char * (w + 2) for w in widths) + "+"

    def cells(row: Sequence[str]) -> str:
        return "|" + "|".join(f" {cell:<{w}} " for cell, w in zip(row, widths, strict=False)) + "|"

    out = [line("-"), cells(headers), line("=")]
    for row in rows:
        out += [cells(row), line("-")]
    return "\n".join(out)


def _underline(title: str, char: str) -> str:
    return f"{title}\n{char * len(title)}"


def render(
    sections: list[Section], settings: Settings, command: str, total: float, chart_note: str
) -> str:
    parts = [_underline("Benchmark results", "=")]
    if settings.quick:
        parts.append(
            ".. warning:: QUICK smoke run (small counts): checks the harness, the numbers "
            "are not meaningful."
        )
    parts.append(f"Command: ``{command}`` ({total:.0f} s in all).")
    parts.append(grid(["Machine", ""], machine()))
    parts.append(f"Chart: {chart_note}.")
    parts.append(
        "The machine is shared and noisy: read the ratios, which compare with a floor "
        "measured in the same run, rather than the absolute numbers."
    )
    checks = [check for section in sections for check in section.checks]
    if checks:
        parts.append(_underline("Targets", "-"))
        parts.append(
            grid(
                ["Target", "Measured", "Wanted", "Verdict"],
                [[c.what, c.measured, c.target, c.verdict] for c in checks],
            )
        )
    for number, section in enumerate(sections, 1):
        parts.append(_underline(f"{number}. {section.title}", "-"))
        parts.append(f"``--only {section.name}``, {section.seconds:.0f} s.")
        if section.rows:
            parts.append(grid(section.columns, section.rows))
        parts.extend(f"* {note}" for note in section.notes)
    return "\n\n".join(parts) + "\n"


def chart(sections: list[Section], path: Path) -> str:
    """Draw every section's charts into one PNG; return a note saying what happened."""
    charts = [c for section in sections for c in section.charts]
    if not charts:
        return "none (nothing to draw)"
    try:
        import matplotlib as mpl  # noqa: PLC0415

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return "skipped, matplotlib is not installed (pip install matplotlib)"
    columns = 2 if len(charts) > 1 else 1
    rows = (len(charts) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(7 * columns, 4.2 * rows), squeeze=False)
    for ax, spec in zip(axes.flat, charts, strict=False):
        count = len(spec.series)
        width = 0.8 / max(count, 1)
        for i, (name, values) in enumerate(spec.series.items()):
            positions = [x + (i - (count - 1) / 2) * width for x in range(len(values))]
            ax.bar(positions, values, width, label=name)
        ax.set_xticks(range(len(spec.labels)), spec.labels, fontsize=8)
        ax.set_title(spec.title, fontsize=10)
        ax.set_ylabel(spec.ylabel, fontsize=8)
        if spec.log:
            ax.set_yscale("log")
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(charts) :]:
        ax.set_visible(False)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return f"``{path.name}``"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small counts: a harness smoke test")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"run only these (repeatable or comma-separated): {', '.join(BENCHMARKS)}",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=HERE,
        help="directory for RESULTS.rst and results.png (default: benchmarks/)",
    )
    args = parser.parse_args(argv)
    names = [n.strip() for item in args.only for n in item.split(",") if n.strip()] or BENCHMARKS
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {BENCHMARKS}")
    settings = Settings(quick=args.quick)
    command = "python -m benchmarks" + (" " + " ".join(argv or sys.argv[1:])).rstrip()
    started = time.perf_counter()
    sections: list[Section] = []
    failed = False
    for name in names:
        print(f"--- {name} ...", flush=True)
        began = time.perf_counter()
        try:
            module = importlib.import_module(f"benchmarks.{name}")
            section: Section = module.run(settings)
        except Exception:
            failed = True
            traceback.print_exc()
            section = Section(name, f"{name}: FAILED", [])
            section.notes.append("the benchmark raised; see the console output")
        section.seconds = time.perf_counter() - began
        sections.append(section)
        print(grid(section.columns, section.rows) if section.rows else section.title, flush=True)
    args.output.mkdir(parents=True, exist_ok=True)
    note = chart(sections, args.output / "results.png")
    text = render(sections, settings, command, time.perf_counter() - started, note)
    results = args.output / "RESULTS.rst"
    # A comparison with an older checkout (benchmarks.compare --results) stays.
    kept = compare.keep(results.read_text(encoding="utf-8")) if results.exists() else ""
    results.write_text(f"{text}\n{kept}\n" if kept else text, encoding="utf-8")
    print()
    print(text)
    print(f"results written to {results}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
