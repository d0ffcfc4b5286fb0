"""pytest fixtures for users' own test suites: a running sandbox and a client bound to it.

Installed as the ``invoicing_sandbox`` pytest plugin (entry point ``pytest11`` of the
``invoicing-async-sandbox`` distribution); the fixtures need pytest-asyncio, which its
``pytest`` extra installs::

    async def test_invoice_is_accepted(invoicing_client, invoicing_sandbox):
        result = await invoicing_client.submit_secure(invoice)
        assert invoicing_sandbox.committed[document_key(invoice)].record == result

Scope: both fixtures are function-scoped, so every test gets an empty sandbox on its own
event loop. The provider key is generated once per process and shared (RSA-3072 takes
about a second), so a fixture costs a few milliseconds.

Configuration: override the ``invoicing_sandbox_options`` fixture (a dict of
:class:`~invoicing_sandbox.Sandbox` keyword arguments) in a ``conftest.py``, e.g.
``{"key_algorithm": "cv25519", "seed": 7}``.

Applications configured through the environment (``InvoicingClient.from_env()``): the
``invoicing_env`` fixture sets the ``INVOICING_*`` variables of the running sandbox for
the test (and removes them after it).

The fixtures are declared with ``pytest_asyncio.fixture``, which works in both of
pytest-asyncio's modes (``auto`` and ``strict``). Without pytest-asyncio the fixtures
still exist, and fail with a message saying what to install, instead of pytest's
"fixture not found"; a suite that does not use them is not affected. Imports of the
library happen inside the fixtures, so loading the plugin costs nothing either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from invoicing_async import InvoicingClient
    from invoicing_sandbox import Sandbox

__all__ = ["invoicing_client", "invoicing_env", "invoicing_sandbox", "invoicing_sandbox_options"]

MISSING = (
    "the invoicing_async fixtures need pytest-asyncio, which is not installed: "
    "pip install 'invoicing-async-sandbox[pytest]' (or pytest-asyncio)"
)


@pytest.fixture
def invoicing_sandbox_options() -> dict[str, Any]:
    """Keyword arguments of the sandbox ``invoicing_sandbox`` starts: none by default.

    Override it in a ``conftest.py`` to configure that
    :class:`~invoicing_sandbox.Sandbox` (key algorithm, seed, token lifetimes,
    ``duplicate_detection``, ``tls`` …).
    """
    return {}


@pytest.fixture
def invoicing_env(
    invoicing_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> dict[str, str]:
    """The ``INVOICING_*`` variables of ``invoicing_sandbox``, set for the test.

    For code that builds its client with ``InvoicingClient.from_env()`` (or
    ``BlockingClient.from_env()``): base URL, client id, API key, the provider key
    (written to a file in the test's ``tmp_path``) pinned by its fingerprint, and the
    CA file when the sandbox serves TLS (see
    :meth:`~invoicing_sandbox.Sandbox.client_variables`). Returns them; they are
    unset after the test.

    .. versionadded:: 0.3.0
    """
    variables = invoicing_sandbox.client_variables(tmp_path)
    monkeypatch.delenv("INVOICING_API_KEY_FILE", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return variables


try:
    import pytest_asyncio
except ImportError:  # the fixtures say what is missing when a test asks for them

    @pytest.fixture
    def invoicing_sandbox() -> NoReturn:
        """Needs pytest-asyncio (``pip install 'invoicing-async-sandbox[pytest]'``)."""
        pytest.fail(MISSING, pytrace=False)

    @pytest.fixture
    def invoicing_client() -> NoReturn:
        """Needs pytest-asyncio (``pip install 'invoicing-async-sandbox[pytest]'``)."""
        pytest.fail(MISSING, pytrace=False)

else:

    @pytest_asyncio.fixture
    async def invoicing_sandbox(  # type: ignore[misc]
        invoicing_sandbox_options: dict[str, Any],
    ) -> AsyncIterator[Sandbox]:
        """A running :class:`~invoicing_sandbox.Sandbox`, stopped after the test.

        Function-scoped: empty for every test. Environments ``test`` (the default) and
        ``production``; configured by ``invoicing_sandbox_options``.
        """
        from invoicing_sandbox import Sandbox  # noqa: PLC0415

        async with Sandbox(**invoicing_sandbox_options) as sandbox:
            yield sandbox

    @pytest_asyncio.fixture
    async def invoicing_client(  # type: ignore[misc]
        invoicing_sandbox: Sandbox,
    ) -> AsyncIterator[InvoicingClient]:
        """An :class:`~invoicing_async.InvoicingClient` bound to ``invoicing_sandbox``.

        Default environment, its credentials, the sandbox's provider key (and its CA when
        it serves TLS); closed after the test.
        """
        from invoicing_async import InvoicingClient  # noqa: PLC0415

        sandbox = invoicing_sandbox
        async with InvoicingClient(
            sandbox.base_url,
            sandbox.client_id,
            sandbox.client_secret,
            provider_key=sandbox.provider_key,
            ssl=sandbox.client_ssl_context(),
        ) as client:
            yield client
