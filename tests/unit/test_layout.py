"""The packages' shape: no import circles, one owner per third-party library, and the
client never depends on the sandbox.

These rules keep the layout one a maintainer can hold in their head (see the design
guide): every module can be read after the modules it imports, and a library such as
aiohttp or PGPy can be replaced by changing one module. How long a module is, is not a
rule: modules are split by responsibility, not by a line count.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Each package and the directory it lives in (the client, and the sandbox's distribution).
PACKAGES = {"invoicing_async": ROOT, "invoicing_sandbox": ROOT / "sandbox"}

#: Third-party libraries and the only modules allowed to import them.
OWNERS = {
    "aiohttp": {"invoicing_async._io.transport", "invoicing_sandbox._app"},
    "pgpy": set(),  # keys are read and verified by _pgp itself; PGPy is a test peer only
    "cattrs": {"invoicing_async._core.convert", "invoicing_async._doc.typedjson"},
    "redis": {"invoicing_async._io.redisstore"},
    "asyncpg": {"invoicing_async._durable.postgres"},
    "psycopg": {"invoicing_async._durable.postgres"},
    "segno": {"invoicing_async._doc.qr"},
    "opentelemetry": {"invoicing_async._obs.spans", "invoicing_async._obs.metrics"},
    "prometheus_client": {"invoicing_async._obs.server"},
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


#: The one private client module the sandbox's distribution may import: everything it uses
#: of the client beyond the public ``invoicing_async`` names, listed in its ``__all__``.
SEAM = "invoicing_async._for_sandbox"


def _client_imports(path: Path) -> set[tuple[str, str]]:
    """``(module, name)`` for each name a module imports from the client (``name`` is
    ``""`` for a plain ``import``), ``TYPE_CHECKING`` imports included."""
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update((alias.name, "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.update((node.module, alias.name) for alias in node.names)
    return {
        (module, name)
        for module, name in found
        if module == "invoicing_async" or module.startswith("invoicing_async.")
    }


SANDBOX_IMPORTS = {
    name: _client_imports(path)
    for name, path in MODULES.items()
    if name.startswith("invoicing_sandbox")
}


def _private(module: str, name: str) -> bool:
    return any(part.startswith("_") for part in [*module.split("."), name])


def test_the_sandbox_imports_the_client_only_through_its_seam():
    """The sandbox's distribution uses public ``invoicing_async`` names and the seam's
    (``invoicing_async._for_sandbox``), never another private client module: a
    maintainer changing the client's privates knows which ones the sandbox relies on."""
    reach_ins = sorted(
        f"{importer}: {module}{f' import {name}' if name else ''}"
        for importer, imports in SANDBOX_IMPORTS.items()
        for module, name in imports
        if module != SEAM and _private(module, name)
    )
    assert reach_ins == []


def test_the_seam_lists_exactly_what_the_sandbox_imports():
    """Every name of the seam's ``__all__`` is imported by some sandbox module and every
    name the sandbox imports from it is listed: the seam is the sandbox's whole
    dependency on the client's privates, and nothing more."""
    tree = ast.parse(MODULES[SEAM].read_text(encoding="utf-8"))
    [listed] = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    ]
    used = {
        name for imports in SANDBOX_IMPORTS.values() for module, name in imports if module == SEAM
    }
    assert {"unused": sorted(set(listed) - used), "unlisted": sorted(used - set(listed))} == {
        "unused": [],
        "unlisted": [],
    }


def test_the_sandbox_loads_the_command_only_when_it_runs_one():
    """The seam imports the command's helpers on first use: a sandbox a test starts (its
    keys, decryptor and server) loads neither the client's command nor the client
    itself, as before the seam; the ``sandbox`` command still finds its helpers."""
    code = (
        "import sys\n"
        "import invoicing_sandbox._app, invoicing_sandbox._environ, invoicing_sandbox._keys\n"
        "print(sorted(m for m in sys.modules if m.startswith('invoicing_async._cli.')"
        " or m == 'invoicing_async._client.client'))\n"
        "from invoicing_async._for_sandbox import UsageError, write_record\n"
        "print(UsageError.__module__, write_record.__module__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [
        "[]",
        "invoicing_async._cli.inputs invoicing_async._cli.output",
    ]


def test_a_client_that_sends_dicts_does_not_load_the_typed_documents():
    """The typed models, their converter and the checks load with the first typed or
    checked document: a client or pool made (and one sending a dict) does not pay for
    them at import; a typed document still sends."""
    code = (
        "import sys\n"
        "from invoicing_async import InvoicingClient, IssuerPool, document_key\n"
        "document_key({'Issuer': {'Vat': '094019245'}, 'Series': 'A'})\n"
        "typed = ('_doctypes', '_docjson', '_checked', '_checks', '_amounts')\n"
        "print(sorted(m for m in sys.modules if m.rpartition('.')[2] in typed))\n"
        "from invoicing_async.documents import Line, Party, RetailReceipt\n"
        "receipt = RetailReceipt(issuer=Party(vat='094019245'), series='T', number=1,\n"
        "    issued='2026-11-22T10:00:00', lines=[Line('Tea', unit_price='2.00')])\n"
        "print(document_key(receipt))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["[]", "doc:094019245/T/1"]


def test_the_client_has_no_decryption_code():
    """Only a provider decrypts: the decryptor and the secret-key reader ship in the
    sandbox's distribution, and no client module defines a function or class that
    decrypts (``.ci/wheels.py`` checks the built wheel too)."""
    import invoicing_async._doc.pgp  # noqa: PLC0415

    assert not (ROOT / "invoicing_async" / "_pgp" / "_decrypt.py").exists()
    assert not (ROOT / "invoicing_async" / "_pgp" / "_secret.py").exists()
    exported = {"Decryptor", "DecryptionKey", "load_decryption_keys", "OpenPGPError"}
    assert exported & set(dir(invoicing_async._doc.pgp)) == set()
    decrypting = sorted(
        f"{name}: {node.name}"
        for name, path in MODULES.items()
        if name.startswith("invoicing_async")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and "decrypt" in node.name.lower()
    )
    assert decrypting == []


#: Private names of other libraries the client reaches into, each for a reason: the
#: type of argparse's subcommand registry, and aiohttp's automatic re-send of requests
#: on a reused connection, which a POST must never get (see _transport).
FOREIGN_PRIVATE = {"_SubParsersAction", "_retry_connection"}


def _defined_names(tree: ast.Module) -> set[str]:
    """Every name a module defines: functions, classes, attributes set on ``self``,
    class-level fields and module globals."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _private_reach_ins(path: Path) -> list[str]:
    """``obj._name`` accesses on lines marked ``noqa: SLF001`` whose ``_name`` this module
    does not define, and ``getattr(obj, "_name")`` / ``hasattr`` of such a name: a reach
    into another module's privates (a ``getattr`` needs no ``noqa`` to do it)."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    defined = _defined_names(tree)
    marked = {
        number for number, line in enumerate(source.splitlines(), 1) if "noqa: SLF001" in line
    }
    attributes = [
        f"{path.name}:{node.lineno}: .{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and (node.lineno in marked or node.end_lineno in marked)
        and _foreign_private(node.attr, defined)
    ]
    by_name = [
        f"{path.name}:{node.lineno}: {node.func.id}(…, {node.args[1].value!r})"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"getattr", "hasattr", "setattr", "delattr"}
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
        and _foreign_private(node.args[1].value, defined)
    ]
    return attributes + by_name


def _foreign_private(name: str, defined: set[str]) -> bool:
    return (
        name.startswith("_")
        and not name.startswith("__")
        and name not in defined
        and name not in FOREIGN_PRIVATE
    )


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_reaches_into_another_modules_privates(module):
    """A module uses another module's private names only through a named seam (the
    client's engine, the token cache's ``Tokens`` view …): a ``noqa: SLF001`` is for the
    module's own classes, never for another module's."""
    assert _private_reach_ins(MODULES[module]) == []


#: The package's folders, bottom to top: a module imports only from its own folder and
#: the folders before it (docs/architecture.rst draws them). The public faces
#: (``invoicing_async.outbox`` …) and the package's ``__init__`` stand above them all.
ORDER = [
    "_core",
    "_doc",
    "_obs",
    "_io",
    "_send",
    "_durable",
    "_client",
    "_pos",
    "_cli",
    "_for_sandbox",
]
CLIENT_GRAPH = {
    name: targets for name, targets in GRAPH.items() if name.startswith("invoicing_async")
}


def _folder(module: str) -> str | None:
    """The folder of ``invoicing_async._x.…`` (``None`` for a public face or the package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ORDER else None


def test_the_top_of_the_package_is_its_public_faces_and_its_folders():
    """A newcomer reads the top of the package and sees the architecture: the public
    modules, and the private folders of :data:`ORDER` (no flat private module)."""
    top = {  # a folder left empty by a checkout (its files moved) is nothing Python imports
        path.name
        for path in (ROOT / "invoicing_async").iterdir()
        if path.suffix == ".py" or (path / "__init__.py").exists()
    }
    private = {name.removesuffix(".py") for name in top if name.startswith("_")}
    assert private - {"__init__", "__main__"} == set(ORDER)
    assert len(ORDER) <= 10


@pytest.mark.parametrize("folder", ORDER)
def test_each_folder_says_what_it_owns_and_what_it_may_import(folder):
    """Each folder's ``__init__`` is a docstring that names what the folder owns and what
    it may import, and defines nothing (no re-exports: a module is imported by its name)."""
    tree = ast.parse((ROOT / "invoicing_async" / folder / "__init__.py").read_text("utf-8"))
    docstring = ast.get_docstring(tree) or ""
    assert "Owns:" in docstring or folder in ("_cli", "_for_sandbox")
    assert "May import:" in docstring or folder in ("_cli", "_for_sandbox")


def test_no_arrow_climbs_the_order_of_the_folders():
    """An import goes to the importer's own folder or to a folder below it: never up the
    order, never to a public face (the faces re-export the folders, not the reverse)."""
    climbing = sorted(
        f"{importer} -> {imported}"
        for importer, targets in CLIENT_GRAPH.items()
        if (mine := _folder(importer)) is not None
        for imported in targets
        if imported != "invoicing_async"
        and ((theirs := _folder(imported)) is None or ORDER.index(theirs) > ORDER.index(mine))
    )
    assert climbing == []


#: Folders that tell what telemetry sees as events (``invoicing_async._core.calls``): the
#: client installs the hook that turns them into spans and metrics, they never import it.
TELLING = ("_io", "_send", "_durable", "_pos")


def test_the_wire_the_sending_the_records_and_the_sales_import_no_telemetry():
    """``_io``, ``_send``, ``_durable`` and ``_pos`` import no ``_obs`` module (at run
    time or for type checking): telemetry is hooked onto their events, not woven in."""
    reaching = sorted(
        f"{importer} -> {imported}"
        for importer, targets in CLIENT_GRAPH.items()
        if _folder(importer) in TELLING
        for imported in targets
        if _folder(imported) == "_obs"
    )
    assert reaching == []


def test_no_folder_imports_another_folders_private_module():
    """``_x/_y.py`` is ``_x``'s own: only modules of ``_x`` import it (a folder's modules
    without an underscore are what other folders may use). Tests may look anywhere."""
    reaching = sorted(
        f"{importer} -> {imported}"
        for importer, targets in CLIENT_GRAPH.items()
        for imported in targets
        if (folder := _folder(imported)) is not None
        and len(parts := imported.split(".")) > 2
        and parts[2].startswith("_")
        and _folder(importer) != folder
        and importer != "invoicing_async"
    )
    assert reaching == []


ARCHITECTURE = ROOT / "docs" / "architecture.rst"


def _classes_crossing_a_boundary() -> set[str]:
    """Every class defined in one folder (top-level ``class``) and imported by name from
    its module by a module of another folder or by a public face."""
    defined = {
        name: {
            node.name
            for node in ast.parse(path.read_text("utf-8")).body
            if isinstance(node, ast.ClassDef)
        }
        for name, path in MODULES.items()
        if _folder(name) is not None
    }
    crossing: set[str] = set()
    for importer, path in MODULES.items():
        if not importer.startswith("invoicing_async"):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or node.module is None:
                continue
            folder = _folder(node.module)
            if folder is None or folder == _folder(importer):
                continue
            crossing.update(
                alias.name for alias in node.names if alias.name in defined.get(node.module, ())
            )
    return crossing


def test_the_architecture_page_names_every_class_that_crosses_a_boundary():
    """docs/architecture.rst gives each class that one folder hands another a line (or,
    for an error, a place in its list): a class that starts crossing is added to the map,
    and the map names no class that no longer exists."""
    page = ARCHITECTURE.read_text("utf-8")
    named = set(re.findall(r"``([A-Z][A-Za-z]+)``", page))
    crossing = _classes_crossing_a_boundary()
    assert len(crossing) > 40  # the rule sees the imports
    assert sorted(crossing - named) == []
    table = page.split("What crosses a boundary", 1)[1].split("Where decisions are made", 1)[0]
    listed = set(re.findall(r"^``([A-Z][A-Za-z]+)``", table, re.MULTILINE))
    everywhere = {
        node.name
        for path in MODULES.values()
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.ClassDef)
    }
    assert sorted(listed - everywhere) == []


def _is_protocol(node: ast.ClassDef) -> bool:
    """``class X(Protocol)``, ``class X(typing.Protocol)``, ``class X(Protocol[T])``
    (not ``asyncio.Protocol``, a base class of its own)."""
    for base in node.bases:
        target = base.value if isinstance(base, ast.Subscript) else base
        if (isinstance(target, ast.Name) and target.id == "Protocol") or (
            isinstance(target, ast.Attribute)
            and target.attr == "Protocol"
            and isinstance(target.value, ast.Name)
            and target.value.id == "typing"
        ):
            return True
    return False


def _members(node: ast.ClassDef) -> set[str]:
    """What a class defines: its methods, its class attributes (annotated or assigned,
    ``__slots__``) and what its methods assign to ``self``; dunders left out."""
    found: set[str] = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.add(item.name)
            for sub in ast.walk(item):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.ctx, ast.Store)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                ):
                    found.add(sub.attr)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            found.add(item.target.id)
        elif isinstance(item, ast.Assign):
            for target in item.targets:
                if isinstance(target, ast.Name):
                    found.add(target.id)
                    if target.id == "__slots__" and isinstance(item.value, (ast.Tuple, ast.List)):
                        found.update(
                            e.value for e in item.value.elts if isinstance(e, ast.Constant)
                        )
    return {name for name in found if not name.startswith("__")}


#: Protocols with fewer than two implementations in the package, and why each stays. A
#: user-facing extension point (a protocol users implement, as they may a token store)
#: would be one; ``TokenStore`` has two of the package's own (memory, Redis), so it needs
#: no place here.
SINGLE_PROTOCOLS = {
    # Its one implementation (CredentialsFile) lives in _client, above _io: naming the
    # class would climb the order of the folders.
    "invoicing_async._io.issuers.Reloadable",
    # Its one implementation (the drainer of deferred sales) lives in _pos, above
    # _client: naming the class would climb the order of the folders.
    "invoicing_async._client._claims.Hooks",
    # Public (invoicing_async.telemetry): what a hook is given of a call. Its one
    # implementation, the private _core.calls.Call, imports the events: naming it would
    # be a circle, and would make a private class public.
    "invoicing_async._core.events.Observed",
}


def _protocols_and_classes() -> tuple[dict[str, ast.ClassDef], dict[str, ast.ClassDef]]:
    protocols: dict[str, ast.ClassDef] = {}
    classes: dict[str, ast.ClassDef] = {}
    for name, path in MODULES.items():
        if not name.startswith("invoicing_async"):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ClassDef):
                (protocols if _is_protocol(node) else classes)[f"{name}.{node.name}"] = node
    return protocols, classes


def _implementations(protocol: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> list[str]:
    """The package's classes that name ``protocol`` as a base or define all its members."""
    wanted = _members(protocol)
    return sorted(
        name
        for name, node in classes.items()
        if any(isinstance(b, ast.Name) and b.id == protocol.name for b in node.bases)
        or (wanted and wanted <= _members(node))
    )


def test_a_protocol_has_two_implementations():
    """A ``typing.Protocol`` is for a seam two classes of the package fill (the
    journal: a ledger and an outbox's claims; the channels: a client's and a pool's);
    one with a single implementation names its class instead. The exceptions are
    listed in :data:`SINGLE_PROTOCOLS`, each with its reason (an extension point users
    implement, or a class an import would climb the folders to)."""
    protocols, classes = _protocols_and_classes()
    single = sorted(
        f"{name}: {', '.join(_implementations(node, classes)) or 'none'}"
        for name, node in protocols.items()
        if name not in SINGLE_PROTOCOLS and len(_implementations(node, classes)) < 2
    )
    assert single == []
    stale = sorted(
        name
        for name in SINGLE_PROTOCOLS
        if name not in protocols or len(_implementations(protocols[name], classes)) >= 2
    )
    assert stale == []  # an exception that no longer is one leaves the list
