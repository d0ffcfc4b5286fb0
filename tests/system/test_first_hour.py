"""Small things a new user met in the first hour: messages, defaults, names, the docs.

Each test states the behaviour the user relies on; the sandbox ones run over real HTTP.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

import invoicing_async
from invoicing_async import InvoicingClient, LedgerError, UnexpectedStatusError
from invoicing_async.outbox import SqliteOutbox
from invoicing_sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[2]


async def test_base_url_without_the_environment_path_says_so():
    """A base URL missing the environment's path (``…:port`` instead of ``…:port/test``)
    gets a 404: the error says to check that the base URL includes the environment's
    path, instead of a bare "HTTP 404"."""
    async with (
        Sandbox(key_algorithm="cv25519") as sb,
        InvoicingClient(sb.url, sb.client_id, sb.client_secret) as client,
    ):
        with pytest.raises(UnexpectedStatusError) as caught:
            await client.token()
    assert caught.value.status == 404
    assert "check that the base URL includes the environment's path" in str(caught.value)


def test_public_errors_present_their_public_module():
    """Every exception class of the public API says `invoicing_async.Name` in reprs and
    tracebacks (not `invoicing_async._core.errors.Name`), and still pickles."""
    import pickle  # noqa: PLC0415

    errors = [
        getattr(invoicing_async, name)
        for name in invoicing_async.__all__
        if isinstance(getattr(invoicing_async, name), type)
        and issubclass(getattr(invoicing_async, name), BaseException)
    ]
    assert len(errors) >= 16
    for error in errors:
        assert error.__module__ == "invoicing_async", error
    raised = LedgerError("the ledger x is in use", reason="locked")
    text = "".join(traceback.format_exception_only(type(raised), raised))
    assert text.startswith("invoicing_async.LedgerError: ")
    assert pickle.loads(pickle.dumps(raised)).reason == "locked"  # noqa: S301  (our own bytes)


def test_the_command_and_the_library_have_one_default_concurrency():
    """`submit --concurrency` and `worker --concurrency` default to the library's own
    default (32), which `submit_stream`, `submit_many` and `run_worker` share."""
    from invoicing_async._cli.command import _parser  # noqa: PLC0415

    library = {
        inspect.signature(function).parameters["concurrency"].default
        for function in (
            InvoicingClient.submit_stream,
            InvoicingClient.submit_many,
            SqliteOutbox.run_worker,
        )
    }
    assert library == {32}
    parser = _parser()
    for command in ("submit", "worker"):
        args = parser.parse_args([command])
        assert args.concurrency == 32, command
    help_text = subprocess.run(
        [sys.executable, "-m", "invoicing_async", "submit", "--help"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert "documents in flight (32)" in help_text


def test_missing_provider_key_text_serves_both_ways_of_configuring():
    """The message for a client without a provider key names what to set for
    `from_env()` (INVOICING_PROVIDER_KEY) as well as `provider_key=`."""
    from invoicing_async._core.errors import MISSING_PROVIDER_KEY  # noqa: PLC0415

    assert "provider_key=" in MISSING_PROVIDER_KEY
    assert "INVOICING_PROVIDER_KEY" in MISSING_PROVIDER_KEY


def test_landing_page_opens_with_install_and_a_first_call():
    """The docs' landing page shows how to install before anything else, then a first
    call (from an executed example), and does not call shipped features future."""
    page = (ROOT / "docs" / "index.rst").read_text(encoding="utf-8")
    head = page.split("What it promises", 1)[0]
    assert "pip install" in head
    assert ".. literalinclude:: examples/getting_started.py" in head
    assert "submit(client, invoice)" in _region(
        ROOT / "docs/examples/getting_started.py", "first-call"
    )
    assert "coming in the next release" not in page
    assert "guides/sync-frameworks" in page


def _region(path: Path, name: str) -> str:
    text = path.read_text(encoding="utf-8")
    return text.split(f"# region {name}", 1)[1].split(f"# endregion {name}", 1)[0]


def test_readme_lists_every_command_and_how_to_get_nox():
    """README's command list names every subcommand the command offers, and `nox -s
    docs` comes with `pip install nox`."""
    readme = (ROOT / "README.rst").read_text(encoding="utf-8")
    listing = readme.split("\nThe command\n-----------\n", 1)[1].split("\nConfiguration\n", 1)[0]
    listed = set(re.findall(r"^- ``(\w+)", listing, re.MULTILINE))
    listed |= set(re.findall(r"^- ``\w+[^`]*`` and ``(\w+)``", listing, re.MULTILINE))
    offered = {"demo", "sandbox", "submit", "token", "key", "outbox", "worker", "ledger"}
    assert offered <= listed, offered - listed
    for line in readme.splitlines():
        if "nox -s docs" in line:
            assert "pip install nox" in line, line


def test_testing_guide_mentions_pytest_asyncio_fixture_for_strict_mode():
    """Users writing their own async fixtures in strict mode are told to use
    `@pytest_asyncio.fixture`."""
    guide = (ROOT / "docs" / "guides" / "testing.rst").read_text(encoding="utf-8")
    assert "``@pytest_asyncio.fixture``" in guide
    assert "strict mode" in guide
