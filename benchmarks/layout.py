"""The package's shape in four numbers: modules, import edges, rooms, the longest chain.

``python -m benchmarks.layout`` prints, for ``invoicing_async``:

* its modules (``.py`` files) and their lines;
* its import edges: pairs (importer, imported) of its own modules, ``TYPE_CHECKING`` and
  function-level imports included (a package's ``__init__`` counts as a module; an import
  of a package from one of its own modules does not);
* its rooms: the top-level entries of the package (a flat module is a room of its own,
  a folder is one room; the package's ``__init__`` is the room ``invoicing_async``), and
  the edges between rooms: distinct pairs (room, room) that some import joins (the
  figure issue 39 names), and the module edges that cross a room's wall;
* the longest chain: the most modules on one path of imports (the graph has no
  circles, ``tests/unit/test_layout.py``), and the chain itself.

It reads the files as text (``ast``), imports nothing, and measures the tree it is
given (``--root``), so two checkouts can be compared: the figures of issue 39's closing
note were printed by this script on both sides.
"""

from __future__ import annotations

import argparse
import ast
import functools
from pathlib import Path

PACKAGE = "invoicing_async"


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package by its dotted name."""
    found = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path) -> set[str]:
    """The absolute names of what ``name`` imports (modules, and ``module.name`` too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def graph(root: Path) -> dict[str, set[str]]:
    """Each module and the package modules it imports."""
    known = modules(root)
    return {
        name: {
            module
            for module in imports(name, path)
            if module in known and module != name and not name.startswith(module + ".")
        }
        for name, path in known.items()
    }


def room(name: str) -> str:
    """The top-level entry a module belongs to (``invoicing_async`` itself for ``__init__``)."""
    parts = name.split(".")
    return ".".join(parts[:2])


def longest_chain(edges: dict[str, set[str]]) -> list[str]:
    """The longest path of imports (in modules), found by memoised depth-first search."""

    @functools.cache
    def chain(node: str) -> tuple[str, ...]:
        best: tuple[str, ...] = ()
        for nxt in edges[node]:
            candidate = chain(nxt)
            if len(candidate) > len(best):
                best = candidate
        return (node, *best)

    return list(max((chain(node) for node in edges), key=len, default=()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    options = parser.parse_args()
    known = modules(options.root)
    edges = graph(options.root)
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in known.values())
    pairs = [(a, b) for a, targets in edges.items() for b in targets]
    crossing = [(a, b) for a, b in pairs if room(a) != room(b)]
    between = {(room(a), room(b)) for a, b in crossing}
    rooms = {room(name) for name in known} - {PACKAGE}
    folders = sorted(r for r in rooms if (options.root / Path(*r.split("."))).is_dir())
    chain = longest_chain(edges)
    print(f"modules: {len(known)} ({lines} lines)")
    print(f"import edges: {len(pairs)}, {len(crossing)} of them crossing a room's wall")
    print(f"edges between top-level rooms: {len(between)}")
    print(f"rooms: {len(rooms)} ({len(folders)} folders, {len(rooms) - len(folders)} modules)")
    print(f"  folders: {' '.join(r.rpartition('.')[2] for r in folders)}")
    print(f"longest chain: {len(chain)} modules")
    print("  " + " -> ".join(name.removeprefix(PACKAGE + ".") for name in chain))


if __name__ == "__main__":
    main()
