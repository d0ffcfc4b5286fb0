"""The pytest plugin in a user's suite: configuration, and a clear message without
pytest-asyncio instead of "fixture 'invoicing_sandbox' not found"."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

USER_TEST = textwrap.dedent(
    """
    import pytest
    from invoicing_async import document_key
    from invoicing_sandbox import sample_invoice

    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def invoicing_sandbox_options():
        return {"key_algorithm": "cv25519", "seed": 3}

    async def test_submit(invoicing_client, invoicing_sandbox):
        result = await invoicing_client.submit_secure(sample_invoice(1))
        assert invoicing_sandbox.committed[document_key(sample_invoice(1))].record == result
        assert invoicing_sandbox.provider_key.algorithm.startswith("Curve25519")
    """
)

ENV_TEST = textwrap.dedent(
    """
    import asyncio, os
    import pytest
    from invoicing_async import InvoicingClient, ValidationError
    from invoicing_async.blocking import BlockingClient
    from invoicing_sandbox import sample_invoice

    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def invoicing_sandbox_options():
        return {"key_algorithm": "cv25519", "tls": True}

    async def test_app_configured_from_the_environment(invoicing_env, invoicing_sandbox):
        assert os.environ["INVOICING_API_KEY"] == invoicing_sandbox.client_secret
        async with InvoicingClient.from_env() as client:  # pinned key, trusted CA
            await client.submit_secure(sample_invoice(1))
        with BlockingClient.from_env() as blocking:
            await asyncio.to_thread(blocking.submit_secure, sample_invoice(2))
        assert invoicing_sandbox.commit_count == 2
        with pytest.raises(ValidationError):
            async with InvoicingClient.from_env() as client:
                await client.submit_json({"hello": "world"})

    class TestOddDocuments:
        @pytest.fixture
        def invoicing_sandbox_options(self):
            return {"key_algorithm": "cv25519", "require_fields": False}

        async def test_relaxed_sandbox_takes_odd_documents(self, invoicing_client):
            await invoicing_client.submit_json({"hello": "world"})

    def test_variables_are_gone_after_the_tests():
        assert "INVOICING_API_KEY" not in os.environ
    """
)


def _pytest(tmp_path, *prefix: str):
    (tmp_path / "test_user.py").write_text(USER_TEST)
    return subprocess.run(
        [sys.executable, *prefix, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-o", "asyncio_default_fixture_loop_scope=function", str(tmp_path / "test_user.py")],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip


def test_options_fixture_configures_the_sandbox(tmp_path):
    """Overriding `invoicing_sandbox_options` configures the fixture's sandbox."""
    completed = _pytest(tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "1 passed" in completed.stdout


def test_env_fixture_and_require_fields_option(tmp_path):
    """`invoicing_env` sets the sandbox's INVOICING_* variables for the test (provider
    key pinned, the CA of a TLS sandbox), so `InvoicingClient.from_env()` and
    `BlockingClient.from_env()` reach it, and unsets them after; the sandbox refuses a
    document that is not an invoice unless `invoicing_sandbox_options` says
    `require_fields: False`."""
    (tmp_path / "test_env_user.py").write_text(ENV_TEST)
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-o", "asyncio_default_fixture_loop_scope=function", str(tmp_path / "test_env_user.py")],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "3 passed" in completed.stdout


def test_without_pytest_asyncio_the_fixture_says_what_is_missing(tmp_path):
    """Without pytest-asyncio the fixtures exist and fail with what to install (not
    pytest's "fixture 'invoicing_client' not found")."""
    shadow = tmp_path / "shadow" / "pytest_asyncio"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('pytest-asyncio is not installed')\n")
    (tmp_path / "test_user.py").write_text(USER_TEST)
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path / "shadow"),
        # Entry points off: pytest-asyncio's own would load; ours is named explicitly.
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "invoicing_sandbox._pytest_plugin", "-W", "ignore::pytest.PytestUnknownMarkWarning",
         str(tmp_path / "test_user.py")],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path, env=env,
    )  # fmt: skip
    output = completed.stdout + completed.stderr
    assert completed.returncode != 0
    assert "not found" not in output
    assert "need pytest-asyncio, which is not installed" in output
    assert "pip install 'invoicing-async-sandbox[pytest]'" in output


OUTAGE_TEST = textwrap.dedent(
    """
    import pytest
    from invoicing_async import Deferral, DeferredReceipt
    from invoicing_sandbox import sample_invoice

    pytestmark = pytest.mark.asyncio

    async def test_the_till_keeps_selling(invoicing_client, invoicing_sandbox, tmp_path):
        async with Deferral(invoicing_client, tmp_path / "till.db", budget=0.5) as till:
            await invoicing_client.token()
            async with invoicing_sandbox.outage("hang"):
                receipt = await till.submit_or_defer(sample_invoice(1))
            assert isinstance(receipt, DeferredReceipt)
            assert receipt.reason.value == "timed_out"
            async with invoicing_sandbox.outage("refuse"):
                assert isinstance(await till.submit_or_defer(sample_invoice(2)), DeferredReceipt)
    """
)


def test_a_users_suite_drives_an_outage_through_the_fixture(tmp_path):
    """A POS application's own test starts outages on the fixture's sandbox to test
    that its till keeps selling (deferral)."""
    (tmp_path / "test_user.py").write_text(OUTAGE_TEST)
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-o", "asyncio_default_fixture_loop_scope=function", str(tmp_path / "test_user.py")],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "1 passed" in completed.stdout


UNRELATED_TEST = textwrap.dedent(
    """
    import sys

    def test_something_else(request):
        assert request.config.pluginmanager.has_plugin("invoicing_sandbox")
        heavy = [m for m in ("aiohttp", "cryptography", "invoicing_async._client.client",
                             "invoicing_sandbox._sandbox") if m in sys.modules]
        assert heavy == []
    """
)


def test_loading_the_plugin_imports_nothing_heavy(tmp_path):
    """A user's suite that never asks for the fixtures loads the plugin (it is registered
    on install) but not aiohttp, cryptography, the client or the sandbox: installing the
    sandbox does not slow down their test runs."""
    (tmp_path / "test_unrelated.py").write_text(UNRELATED_TEST)
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-o", "asyncio_default_fixture_loop_scope=function", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "1 passed" in completed.stdout
