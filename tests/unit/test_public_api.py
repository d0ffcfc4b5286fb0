"""The public API: what users import is exactly what __all__ promises, documented."""

from __future__ import annotations
import __future__

import importlib
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

MODULES = [
    "invoicing_async",
    "invoicing_async.blocking",
    "invoicing_async.documents",
    "invoicing_async.outbox",
    "invoicing_async.qr",
    "invoicing_async.redis",
    "invoicing_async.telemetry",
    "invoicing_sandbox",
    "invoicing_async.testing",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_importable(name):
    """__all__ is sorted (isort style: constants, classes, functions), and every name in
    it exists and has a docstring."""
    module = importlib.import_module(name)

    def isort_key(public: str) -> tuple[int, str]:
        return (0 if public.isupper() else 1 if public[0].isupper() else 2, public)

    assert list(module.__all__) == sorted(module.__all__, key=isort_key)
    for public in module.__all__:
        value = getattr(module, public)
        if callable(value):
            assert value.__doc__, f"{name}.{public} has no docstring"


def _ours(value: object) -> bool:
    """Whether ``value`` belongs to the project (not an import from elsewhere)."""
    home = getattr(value, "__module__", None)
    if home is None:  # a constant: a public name of the module itself (not TYPE_CHECKING)
        return not isinstance(value, (bool, types.ModuleType, __future__._Feature))
    return home.split(".")[0] in ("invoicing_async", "invoicing_sandbox")


@pytest.mark.parametrize("name", MODULES)
def test_all_is_complete(name):
    """Every public name a module defines or re-exports from the project is in __all__,
    and nothing else (like httpx's test_exported_members): the reference documentation is
    generated from __all__, so a name missing there is an undocumented API. Names the
    module imports from the standard library or other packages are not its API, and
    lazily imported names (the packages') count as they are listed by dir()."""
    module = importlib.import_module(name)
    public = {
        attribute
        for attribute in dir(module)
        if not attribute.startswith("_") and _ours(getattr(module, attribute))
    }
    assert public == set(module.__all__)


@pytest.mark.parametrize("name", ["invoicing_async", "invoicing_sandbox"])
def test_importing_the_package_imports_nothing_heavy(name):
    """``import invoicing_async`` (and the sandbox's package) is cheap: aiohttp, the
    sandbox and the client are imported when a name is first used, so a pytest session
    that loads the sandbox's plugin and a script that only reads the version pay
    nothing."""
    code = (
        f"import sys, {name}\n"
        "heavy = [m for m in ('aiohttp', 'cryptography', 'invoicing_async._client.client', "
        "'invoicing_sandbox._sandbox') if m in sys.modules]\n"
        "print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_contract_names_are_exported():
    """The names the issue tracker promised users are all importable from the top."""
    from invoicing_async import (  # noqa: F401, PLC0415
        AuthenticationError,
        DocumentResult,
        DocumentStatus,
        DuplicateDocumentError,
        InvoicingClient,
        InvoicingError,
        MalformedResponseError,
        Outcome,
        OutcomeStatus,
        ProviderKey,
        ProviderKeyError,
        ProviderTimeoutError,
        ServerError,
        TransportError,
        ValidationError,
    )


def test_every_error_derives_from_invoicing_error():
    """One except clause catches every error the library raises."""
    import invoicing_async  # noqa: PLC0415

    errors = [getattr(invoicing_async, n) for n in invoicing_async.__all__ if n.endswith("Error")]
    assert len(errors) >= 10
    assert all(issubclass(e, invoicing_async.InvoicingError) for e in errors)


def test_version_is_lazy_and_known():
    """__version__ comes from the installed metadata."""
    import invoicing_async  # noqa: PLC0415

    assert invoicing_async.__version__


ROOT = Path(__file__).resolve().parents[2]
#: A documented version mark: ``.. versionadded:: 0.5.0`` (in a page or a docstring).
VERSION_MARK = re.compile(r"\.\. (?:versionadded|versionchanged|deprecated):: (\d+)\.(\d+)\.(\d+)")


def _project_version(pyproject: Path) -> str:
    found = re.search(r'^version = "([^"]+)"$', pyproject.read_text(encoding="utf-8"), re.MULTILINE)
    assert found is not None, pyproject
    return found.group(1)


def _release(version: str) -> tuple[int, ...]:
    """``0.5.0.dev0`` is (a pre-release of) 0.5.0."""
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    assert found is not None, version
    return tuple(map(int, found.groups()))


def test_the_version_is_the_one_the_docs_mark_features_for():
    """The installed version (what ``--version`` prints) is the project's; no page or
    docstring marks a feature for a later release; the sandbox, of the same version,
    requires the client of exactly that version (they share private seams)."""
    from importlib.metadata import requires, version  # noqa: PLC0415

    client = _project_version(ROOT / "pyproject.toml")
    sandbox = _project_version(ROOT / "sandbox" / "pyproject.toml")
    assert version("invoicing-async") == client
    assert version("invoicing-async-sandbox") == sandbox == client
    assert f"invoicing-async=={client}" in (requires("invoicing-async-sandbox") or [])
    pin = re.search(
        r'"invoicing-async==([^"]+)"', (ROOT / "sandbox" / "pyproject.toml").read_text()
    )
    assert pin is not None
    assert pin.group(1) == client
    sources = [
        ROOT / "README.rst",
        ROOT / "sandbox" / "README.rst",
        *(ROOT / "docs").rglob("*.rst"),
        *(ROOT / "invoicing_async").rglob("*.py"),
        *(ROOT / "sandbox" / "invoicing_sandbox").rglob("*.py"),
    ]
    marks = {
        (source.relative_to(ROOT).as_posix(), tuple(map(int, mark.groups())))
        for source in sources
        for mark in VERSION_MARK.finditer(source.read_text(encoding="utf-8"))
    }
    assert len(marks) > 50
    ahead = sorted(mark for mark in marks if mark[1] > _release(client))
    assert not ahead, f"marked for a release after {client}: {ahead}"
