"""pytest fixtures for users' own test suites: a running sandbox and a client bound to it.

Installed as the ``invoicing_async`` pytest plugin (entry point ``pytest11``), so any
suite that has the library and pytest-asyncio can ask for them::

    async def test_invoice_is_accepted(invoicing_client, invoicing_sandbox):
        result = await invoicing_client.submit_secure(invoice)
        assert invoicing_sandbox.committed[document_key(invoice)].record == result

Both fixtures are function-scoped: every test gets an empty sandbox on its own event
loop. The provider key is generated once per process and shared (RSA-3072 takes about
a second), so a fixture costs a few milliseconds.

They are declared with ``pytest_asyncio.fixture``, which works in both of
pytest-asyncio's modes (``auto`` and ``strict``). Without pytest-asyncio the plugin
defines nothing: it must never break a pytest run that does not use it. Imports of the
library happen inside the fixtures, so loading the plugin costs nothing either.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from invoicing_async import InvoicingClient
    from invoicing_async.sandbox import Sandbox

__all__: list[str] = []

if importlib.util.find_spec("pytest_asyncio") is not None:
    import pytest_asyncio

    __all__ += ["invoicing_client", "invoicing_sandbox"]

    @pytest_asyncio.fixture
    async def invoicing_sandbox() -> AsyncIterator[Sandbox]:
        """A running :class:`~invoicing_async.sandbox.Sandbox`, stopped after the test.

        Environments ``test`` (the default) and ``production``; empty for every test.
        """
        from invoicing_async.sandbox import Sandbox  # noqa: PLC0415

        async with Sandbox() as sandbox:
            yield sandbox

    @pytest_asyncio.fixture
    async def invoicing_client(invoicing_sandbox: Sandbox) -> AsyncIterator[InvoicingClient]:
        """An :class:`~invoicing_async.InvoicingClient` bound to ``invoicing_sandbox``.

        Default environment, its credentials and the sandbox's provider key; closed
        after the test.
        """
        from invoicing_async import InvoicingClient  # noqa: PLC0415

        sandbox = invoicing_sandbox
        async with InvoicingClient(
            sandbox.base_url,
            sandbox.client_id,
            sandbox.client_secret,
            provider_key=sandbox.provider_key,
        ) as client:
            yield client
