"""The public API: what users import is exactly what __all__ promises, documented."""

from __future__ import annotations
import __future__

import importlib
import types

import pytest

MODULES = [
    "invoicing_async",
    "invoicing_async.outbox",
    "invoicing_async.qr",
    "invoicing_async.redis",
    "invoicing_async.sandbox",
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


@pytest.mark.parametrize("name", MODULES)
def test_all_is_complete(name):
    """Every public name a module defines or imports is in __all__, and nothing else
    (like httpx's test_exported_members): the reference documentation is generated from
    __all__, so a name missing there is an undocumented API."""
    module = importlib.import_module(name)
    public = {
        attribute
        for attribute, value in vars(module).items()
        if not attribute.startswith("_")
        and not isinstance(value, (types.ModuleType, __future__._Feature))
    }
    assert public == set(module.__all__)


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
