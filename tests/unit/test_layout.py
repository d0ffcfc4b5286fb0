"""The packages' shape: no import circles, one owner per third-party library, and the
client never depends on the sandbox.

These rules keep the layout one a maintainer can hold in their head (see the design
guide): every module can be read after the modules it imports, and a library such as
aiohttp or PGPy can be replaced by changing one module. How long a module is, is not a
rule: modules are split by responsibility, not by a line count.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Each package and the directory it lives in (the client, and the sandbox's distribution).
PACKAGES = {"invoicing_async": ROOT, "invoicing_sandbox": ROOT / "sandbox"}

#: Third-party libraries and the only modules allowed to import them.
OWNERS = {
    "aiohttp": {"invoicing_async._transport", "invoicing_sandbox._app"},
    "pgpy": set(),  # keys are read and verified by _pgp itself; PGPy is a test peer only
    "cattrs": {"invoicing_async._convert"},
    "redis": {"invoicing_async.redis"},
    "asyncpg": {"invoicing_async._ledger._postgres_outbox"},
    "psycopg": {"invoicing_async._ledger._postgres_outbox"},
    "segno": {"invoicing_async.qr"},
}


def _module_name(path: Path, parent: Path) -> str:
    parts = list(path.relative_to(parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {
    _module_name(path, parent): path
    for package, parent in PACKAGES.items()
    for path in sorted((parent / package).rglob("*.py"))
}


def _imports(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports, at run time or for type checking, absolute names."""
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
            # ``from . import _protocol`` imports a module, not a name.
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {module for module in found if module}


GRAPH = {
    name: {
        module
        for module in _imports(name, path)
        if module in MODULES and module != name and not name.startswith(module + ".")
    }
    for name, path in MODULES.items()
}


def _cycle_from(start: str) -> list[str] | None:
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, trail = stack.pop()
        for nxt in GRAPH[node]:
            if nxt == start:
                return [*trail, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*trail, nxt]))
    return None


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_circle(module):
    """No module reaches itself through its imports (``TYPE_CHECKING`` imports count)."""
    assert _cycle_from(module) is None, " -> ".join(_cycle_from(module) or [])


@pytest.mark.parametrize("library", sorted(OWNERS))
def test_each_third_party_library_has_one_owner(library):
    """aiohttp, PGPy, cattrs … are imported only by the modules that own them."""
    importers = {
        name
        for name, path in MODULES.items()
        if any(m == library or m.startswith(library + ".") for m in _imports(name, path))
    }
    assert importers <= OWNERS[library]


def test_the_client_never_imports_the_sandbox():
    """The client works without the sandbox's distribution installed: no module of
    invoicing_async imports invoicing_sandbox (the deprecated ``invoicing_async.sandbox``
    alias looks it up by name, when used)."""
    importers = {
        name
        for name, path in MODULES.items()
        if name.startswith("invoicing_async")
        and any(m.startswith("invoicing_sandbox") for m in _imports(name, path))
    }
    assert importers == set()
