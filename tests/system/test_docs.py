"""The documentation's examples run, and its generated parts stay true.

Every code example in ``docs/`` is a file under ``docs/examples/`` that these tests run
against the embedded sandbox (real loopback HTTP, no other network): what a reader
copies works, and the assertions in it are the behaviour the pages promise. The other
tests keep the pages honest where they quote the package (the outcome table, the error
tree, the command's subcommands) and keep them free of private module paths, so they
survive the package's internal moves.
"""

from __future__ import annotations

import argparse
import configparser
import importlib.util
import logging
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from aiohttp import test_utils
from helpers import script_with_ctrl_c

import invoicing_async
from invoicing_async import InvoicingError, OutcomeStatus, ProviderKeyError, document_key
from invoicing_async._cli.command import _build
from invoicing_async.testing import instant_retries
from invoicing_sandbox import Fault, Sandbox, sample_invoice

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"
PAGES = sorted(DOCS.rglob("*.rst"))

#: The examples the pages include, each run by a test below.
EXECUTED = {
    "getting_started.py",
    "pos_backend.py",
    "bulk_job.py",
    "security.py",
    "shared_tokens.py",
    "test_with_sandbox.py",
    "test_with_mock_transport.py",
    "outbox.py",
    "operations.py",
    "sync_frameworks.py",
    "interrupted_batch.py",
    "pos_outage.py",
    "operating.py",
    "json_logging.py",
    "many_issuers.py",
    "documents.py",
    "hooks.py",
    "tills_day.py",
}


#: The service examples the pages include (a systemd unit, a Kubernetes manifest),
#: checked by ``test_the_service_examples_parse_and_agree_with_the_command``.
CHECKED = {"invoicing-worker.service", "invoicing-worker.yaml"}


def load(name: str):
    """Import ``docs/examples/NAME.py`` as a module."""
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"docs_example_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# --- the examples --------------------------------------------------------------------


async def test_getting_started_submits_once_and_a_resend_gets_the_same_record():
    """The first submit_secure is accepted; the same invoice sent again returns the same
    record (the provider's 409), and the sandbox holds it once."""
    await load("getting_started").main()


async def test_many_issuers_example_sends_for_every_shop_and_refuses_a_stranger():
    """500 invoices of 50 issuers through one pool: all accepted, each issuer's key read
    from the vault once and one token each; an issuer without a key is refused before
    any request."""
    await load("many_issuers").main()


async def test_documents_example_builds_checks_and_sends_the_four_documents(capsys):
    """The four typed documents are accepted as their JSON and read back equal; each
    common mistake is an error of check and a 400 of the sandbox naming the same
    fields; the guide shows the JSON and the problems the example prints."""
    import json  # noqa: PLC0415

    example = load("documents")
    await example.main()
    printed = capsys.readouterr().out
    page = (DOCS / "guides" / "documents.rst").read_text(encoding="utf-8")
    shown = page.split(".. code-block:: json\n", 1)[1].split("\n\n\n", 1)[0]
    assert json.loads(shown) == example.to_json(example.retail_receipt(17))
    problems = page.split(".. code-block:: text\n", 1)[1].split("\n\n", 1)[0]
    assert problems.strip()
    for line in problems.strip().splitlines():
        assert line.strip() in printed, line


async def test_operations_example_cancels_once_and_signs_once():
    """A lost cancellation answer is read back, never re-sent blindly; a repeat is
    answered with the original cancellation mark; a lost signature answer is re-sent
    and the same signature comes back, signed once."""
    await load("operations").main()


async def test_tills_day_example_credits_pays_and_reconciles(capsys):
    """A sale, a return whose answer is lost (sent again, one credit), a card payment
    later, an IRIS payment, the day's listing and a PDF: the guide's steps, as run."""
    await load("tills_day").main()
    printed = capsys.readouterr().out
    assert "after 2 requests, one issued" in printed
    assert "IRIS Completed" in printed


def run_script(name: str) -> subprocess.CompletedProcess[str]:
    """Run ``docs/examples/NAME.py`` as a reader does, with plain Python; it succeeds."""
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed


def test_getting_started_runs_as_a_script():
    """A reader can run the getting-started example as it is, with plain Python."""
    completed = run_script("getting_started")
    assert "accepted: mark" in completed.stdout


def test_operating_traces_run_as_a_script():
    """The operating guide's traces: a retried submission is one call span with its two
    POSTs (the second a re-send), a deferred sale's later delivery links to the sale.
    Run as a reader runs it (it configures the SDK for its own process)."""
    completed = run_script("operating")
    assert "(linked to the sale)" in completed.stdout
    page = (DOCS / "operating.rst").read_text(encoding="utf-8")
    for line in completed.stdout.splitlines():  # the page shows what it prints
        if line.strip():
            assert _without_ids(line) in _without_ids(page), line


def _without_ids(text: str) -> str:
    """Text with the run's own identities and errors left out (the port, the key)."""
    return re.sub(r"id:\S+|error\.type=\S+", "", text)


async def test_a_hook_of_the_applications_counts_retries_outcomes_and_requests():
    """The hooks guide's ``Stats``: a retry after a 503 counted by reason, each call's
    outcome by call (a batch's documents through the batch's observer), each request's
    status; the token request it chose not to observe told it nothing."""
    await load("hooks").main()


async def test_json_logging_records_carry_their_fields():
    """With python-json-logger's formatter, a retry's record is a JSON object with the
    document key, the issuer and the attempt as keys, and no secret."""
    await load("json_logging").main()


async def test_pos_backend_serves_tills_on_loopback():
    """The aiohttp POS backend, run with a real AppRunner: twenty concurrent sales cost
    one token request, a re-sent sale gets the same receipt, an invalid one a 422, and
    the provider holds each invoice once."""
    await load("pos_backend").main()


@pytest.fixture
async def pos(tmp_path):
    """The POS backend's app configured from the environment as in production, served by
    aiohttp's test server, with the sandbox behind it."""
    example = load("pos_backend")
    async with Sandbox() as sandbox:
        app = example.create_app(sandbox.client_variables(tmp_path))
        async with test_utils.TestClient(test_utils.TestServer(app)) as till:
            assert sandbox.client_secret not in repr(app[example.INVOICING])
            yield sandbox, till


async def test_pos_backend_lost_answer_is_recovered_within_the_sale(pos):
    """The provider commits a sale but the answer is lost: the client's own retry gets
    the 409 with the original record, so the till gets its receipt at once (201) and
    the provider holds the invoice once."""
    sandbox, till = pos
    sandbox.script(Fault.commit_then_drop())
    invoice = sample_invoice(7, issuer_vat=sandbox.client_id)

    first = await till.post("/invoices", json=invoice)
    assert first.status == 201
    held = sandbox.committed[document_key(invoice)]
    assert held.commits == 1
    assert (await first.json())["mark"] == held.record.mark
    assert [r.status for r in sandbox.requests if r.identity] == [None, 409]


async def test_pos_backend_unknown_outcome_asks_the_till_to_retry(pos):
    """Every attempt's answer is lost: the outcome is unknown, the till is told to retry
    (503); once the provider answers again, the same invoice returns the receipt of the
    one commit."""
    sandbox, till = pos
    sandbox.random_faults(rate=1.0, kinds=[Fault.commit_then_drop()], max_per_document=99)
    invoice = sample_invoice(8, issuer_vat=sandbox.client_id)
    with instant_retries():
        first = await till.post("/invoices", json=invoice)
    assert first.status == 503
    assert (await first.json())["retry"] is True

    sandbox.random_faults(rate=0)
    again = await till.post("/invoices", json=invoice)
    assert again.status == 200
    held = sandbox.committed[document_key(invoice)]
    assert held.commits == 1
    assert (await again.json())["mark"] == held.record.mark


async def test_pos_backend_reports_refused_credentials_as_502(pos):
    """An invoice of another issuer (TIN not matching the API key) is not the till's
    fault and not retryable: 502, and nothing is committed."""
    sandbox, till = pos
    response = await till.post("/invoices", json=sample_invoice(1, issuer_vat="094019245"))
    assert response.status == 502
    assert sandbox.commit_count == 0


async def test_pos_backend_reports_a_key_the_provider_cannot_decrypt_for_as_503(caplog, tmp_path):
    """The backend encrypts to a key the provider does not hold (it rotated its key): the
    till is told to retry later (503) and an operator is told (an ERROR line), never
    asked to fix the invoice (422); nothing is committed."""
    example = load("pos_backend")
    from invoicing_sandbox import cached_keypair  # noqa: PLC0415

    async with Sandbox(key_algorithm="cv25519") as sandbox:
        environ = sandbox.client_variables(tmp_path)
        wrong = tmp_path / "rotated-away.asc"
        wrong.write_text(cached_keypair("rsa2048").public_armored, encoding="ascii")
        environ["INVOICING_PROVIDER_KEY"] = str(wrong)
        del environ["INVOICING_PROVIDER_FINGERPRINT"]
        app = example.create_app(environ)
        async with test_utils.TestClient(test_utils.TestServer(app)) as till:
            invoice = sample_invoice(3, issuer_vat=sandbox.client_id)
            response = await till.post("/invoices", json=invoice)
            assert response.status == 503
            assert (await response.json())["retry"] is True
        assert sandbox.commit_count == 0
    assert any(
        r.levelname == "ERROR" and isinstance(r.exc_info[1], ProviderKeyError)
        for r in caplog.records
        if r.exc_info
    )


async def test_pos_backend_refuses_a_swapped_key_file(tmp_path):
    """The app's client comes from `InvoicingClient.from_env()`, which pins the provider
    key: a key file with another fingerprint stops the app at start-up, before anything
    is encrypted to it."""
    example = load("pos_backend")
    from invoicing_sandbox import cached_keypair  # noqa: PLC0415

    key_file = tmp_path / "provider.asc"
    key_file.write_text(cached_keypair().public_armored, encoding="ascii")
    environ = {
        "INVOICING_BASE_URL": "https://invoicing.example.com",
        "INVOICING_CLIENT_ID": "094019245",
        "INVOICING_API_KEY": "not-a-real-key",
        "INVOICING_PROVIDER_KEY": str(key_file),
        "INVOICING_PROVIDER_FINGERPRINT": "0" * 40,
    }
    server = test_utils.TestServer(example.create_app(environ))
    with pytest.raises(ProviderKeyError) as caught:
        await server.start_server()
    await server.close()
    assert caught.value.reason == "fingerprint_mismatch"


async def _interrupt_while_held(
    command: list[str], env: dict, lines: int, sig, sandbox: Sandbox
) -> tuple[int, str]:
    """Run the script; once it printed ``lines`` outcomes and a request of it is held at
    the sandbox's gate (so the batch cannot have finished), send ``sig``; (status, stderr).
    """
    import asyncio  # noqa: PLC0415

    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    try:
        for _ in range(lines):
            assert await asyncio.wait_for(process.stdout.readline(), 60)
        await asyncio.wait_for(sandbox.wait_held(1), 60)
        process.send_signal(sig)
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
    finally:
        if process.returncode is None:  # a failed test leaves no process behind
            process.kill()
            await process.communicate()
    return process.returncode or 0, stderr.decode()


async def test_interrupted_batch_prints_a_summary_and_resumes(tmp_path):
    """The bulk guide's script, stopped by Ctrl-C and then by SIGTERM: each time a
    one-line summary and exit 130, no traceback; the third run completes from the
    ledger, and every invoice is committed exactly once.

    The sandbox's gate lets five requests of each interrupted run through and holds the
    others, so each interrupt meets a running batch (a latency would only hope so). The
    requests held are let go after their client is gone: the provider commits documents
    whose answer never arrived, and the next run finds out from the ledger.
    """
    import json  # noqa: PLC0415
    import os  # noqa: PLC0415
    import signal  # noqa: PLC0415

    async with Sandbox(key_algorithm="cv25519") as sandbox:
        invoices = [sample_invoice(n, issuer_vat=sandbox.client_id, lines=1) for n in range(60)]
        source = tmp_path / "invoices.jsonl"
        source.write_text("".join(json.dumps(i) + "\n" for i in invoices))
        env = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}
        env.update(sandbox.client_variables(tmp_path))
        command = script_with_ctrl_c(
            str(EXAMPLES / "interrupted_batch.py"), str(source), str(tmp_path / "batch.db")
        )
        for sig in (signal.SIGINT, signal.SIGTERM):
            sandbox.hold(after=5)
            status, stderr = await _interrupt_while_held(command, env, 5, sig, sandbox)
            assert status == 130, stderr
            assert "Traceback" not in stderr
            assert re.fullmatch(
                r"interrupted after \d+ outcome\(s\) \([^)]*\); run the same command again "
                r"to resume from \S+batch\.db\n",
                stderr,
            ), stderr
            assert sandbox.commit_count < 60
            sandbox.release()
        process = await __import__("asyncio").create_subprocess_exec(
            *command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        _, stderr = await process.communicate()
        assert process.returncode == 0, stderr.decode()
        assert sandbox.commit_count == 60
        assert all(held.commits == 1 for held in sandbox.committed.values())


async def test_pos_outage_till_keeps_selling_and_prints_each_qr_when_its_mark_arrives(
    capsys, caplog
):
    """The till of "When the provider is down", selling typed retail receipts: sales
    during an outage are deferred (stamped ``TransmissionFailure: 1`` by the deferral),
    transmitted once the provider is back, each committed once, and each deferred
    receipt's real QR printed when its mark arrives; nothing went wrong on the way."""
    caplog.set_level(logging.INFO, logger="invoicing_async")
    await load("pos_outage").main()
    printed = capsys.readouterr().out
    assert printed.count("arrived; its QR code:") == 3
    assert "deferred (unreachable)" in printed
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


async def test_bulk_job_resumes_a_faulty_batch_without_double_commits():
    """300 invoices, 20% of requests faulted, stopped after 100 outcomes and resumed
    from the journal: all accepted, in input order, each committed exactly once; a
    deadline ends an unanswered invoice UNKNOWN, and re-submitting it settles it."""
    await load("bulk_job").main()


async def test_shared_tokens_fleet_makes_one_token_request(redis_url, monkeypatch):
    """Four workers with their own caches on one Redis store (encrypted values) start
    together on a cold store: every invoice accepted, one token request."""
    monkeypatch.setenv("TOKEN_STORE_KEY", "00" * 32)
    await load("shared_tokens").main(redis_url)


async def test_security_properties_hold():
    """Key pinning refuses another key, plain http is refused off loopback, and the API
    key and tokens are in no repr, error, log line or journal."""
    await load("security").main()


async def test_outbox_example_on_sqlite():
    """Invoices enqueued in the application's own SQLite transaction are drained by a
    worker: all accepted, each committed once."""
    await load("outbox").main()


async def test_outbox_example_on_postgres(postgres_dsn):
    """The same example on PostgreSQL (enqueued in an asyncpg transaction)."""
    await load("outbox").main(postgres_dsn)


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_sandbox_testing_examples_pass_under_pytest(mode):
    """The testing guide's tests pass when pytest runs them as a user's suite would, in
    both pytest-asyncio modes, with the plugin's fixtures."""
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(EXAMPLES / "test_with_sandbox.py"),
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            f"asyncio_mode={mode}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert re.search(r"\b6 passed\b", completed.stdout), completed.stdout


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_mock_transport_examples_pass_under_pytest_with_no_socket(mode):
    """The testing guide's tests on a MockTransport pass as a user's suite runs them, in
    both pytest-asyncio modes, and never open a socket: run with the unit suite's guard
    (tests/unit/conftest.py) as a plugin, they would fail if they did."""
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(EXAMPLES / "test_with_mock_transport.py"),
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "socketguard",
            "-o",
            f"asyncio_mode={mode}",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests" / "unit")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert re.search(r"\b3 passed\b", completed.stdout), completed.stdout


# --- the pages -----------------------------------------------------------------------


def _includes() -> list[tuple[Path, Path]]:
    return [
        (page, (page.parent / match.group(1)).resolve())
        for page in PAGES
        for match in re.finditer(r"^\.\. literalinclude:: (\S+)", page.read_text(), re.MULTILINE)
    ]


def test_every_code_example_is_an_executed_file():
    """Python in the pages comes only from executed example files: no code-block,
    doctest or literal block holds code that no test runs."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert not re.search(
            r"^\s*\.\. (code-block|code|sourcecode):: *python", text, re.MULTILINE
        ), page
        assert not re.search(r"^\s*\.\. (doctest|testcode)::", text, re.MULTILINE), page
        assert "\n>>> " not in text, page
        for line in text.splitlines():
            if line.rstrip().endswith("::") and not line.lstrip().startswith(".. "):
                pytest.fail(f"{page.name}: literal block after {line!r}")
    included = {path.name for _, path in _includes()}
    assert included <= EXECUTED | CHECKED
    for _, path in _includes():
        assert path.parent == EXAMPLES
        assert path.exists()


def test_included_markers_exist():
    """Every start-after/end-before marker a page uses is in the example it includes."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for block in re.split(r"^\.\. literalinclude:: ", text, flags=re.MULTILINE)[1:]:
            target = (page.parent / block.split()[0]).resolve()
            source = target.read_text(encoding="utf-8")
            for marker in re.findall(r":(?:start-after|end-before|start-at): (.+)", block):
                assert marker.strip() in source, (page.name, marker)
            for name in re.findall(r":pyobject: (\S+)", block):
                assert re.search(rf"^(class|def|async def) {name}\b", source, re.MULTILINE)


#: The maintainers' map: it names the private rooms, and is checked against them.
ARCHITECTURE = DOCS / "architecture.rst"


def test_docs_name_no_private_module():
    """The pages and examples use public names only (``invoicing_async._x`` moves), but
    for the architecture page, whose rooms are checked below."""
    sources = [*PAGES, *EXAMPLES.glob("*.py"), DOCS / "conf.py"]
    for source in sources:
        if source == ARCHITECTURE:
            continue
        assert not re.search(r"invoicing_async\._(?!_)", source.read_text(encoding="utf-8")), source


def test_the_architecture_page_names_rooms_that_exist():
    """Every private module the architecture page names (``invoicing_async._io.loop``,
    ``_send._lanes``, ``_core.table`` …) is a module or folder of the client: the map is
    redrawn when a room moves."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    named = set(re.findall(r"``(?:invoicing_async\.)?(_[a-z][a-z_]*(?:\._?[a-z][a-z_]*)*)``", text))
    assert len(named) > 10  # the page names its rooms
    package = ROOT / "invoicing_async"
    missing = sorted(
        name
        for name in named
        if not (package / f"{name.replace('.', '/')}.py").exists()
        and not (package / name.replace(".", "/")).is_dir()
    )
    assert missing == []


def test_outcome_table_lists_every_outcome_status():
    """The outcome table (README, included by the docs) has one row per OutcomeStatus."""
    readme = (ROOT / "README.rst").read_text(encoding="utf-8")
    table = readme.split("outcome-table-start", 1)[1].split(".. outcome-table-end", 1)[0]
    rows = re.findall(r"^``(\w+)``", table, re.MULTILINE)
    assert rows == [status.value for status in OutcomeStatus]


def test_error_tree_lists_every_public_error():
    """The tree drawn in the exception module's docstring (rendered in the docs) names
    every public exception class, and only those."""
    doc = sys.modules[InvoicingError.__init__.__module__].__doc__ or ""
    drawn = set(re.findall(r"^[\s│]*(?:[├└]── )?([A-Z]\w+Error)\s", doc, re.MULTILINE))
    public = {
        name
        for name in invoicing_async.__all__
        if isinstance(getattr(invoicing_async, name), type)
        and issubclass(getattr(invoicing_async, name), InvoicingError)
    }
    assert drawn == public


def test_cli_page_documents_every_subcommand():
    """The command reference has a section for each subcommand the command has."""
    completed = subprocess.run(
        [sys.executable, "-m", "invoicing_async", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    [choices] = re.findall(r"\{([\w,-]+)\}", completed.stdout)[:1]
    page = (DOCS / "cli.rst").read_text(encoding="utf-8")
    documented = re.findall(r"^\.\. invoicing-cli-help:: (\S+)$", page, re.MULTILINE)
    assert documented == choices.split(",")


def test_docs_build_without_warnings(tmp_path):
    """``sphinx-build -W`` succeeds (skipped where the ``docs`` extra is not installed;
    CI and ``nox -s docs`` run the build itself)."""
    pytest.importorskip("sphinx")
    pytest.importorskip("furo")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            "-d",
            str(tmp_path / "doctrees"),
            str(DOCS),
            str(tmp_path / "html"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert (tmp_path / "html" / "index.html").exists()
    # The error tree's lines are wider than the text column: its box wraps them in a
    # smaller font instead of clipping them.
    outcomes = (tmp_path / "html" / "outcomes.html").read_text(encoding="utf-8")
    assert 'class="invoicing-error-tree' in outcomes
    assert "invoicing.css" in outcomes
    css = (tmp_path / "html" / "_static" / "invoicing.css").read_text(encoding="utf-8")
    assert "white-space: pre-wrap" in css


def test_readme_invoice_is_the_sample_the_sandbox_accepts():
    """The invoice README shows is `sample_invoice(1, lines=1)`, as the library makes it;
    a default `Sandbox()` accepts it (tested in test_sandbox_service)."""
    import json  # noqa: PLC0415

    text = (ROOT / "README.rst").read_text(encoding="utf-8")
    block = text.split(".. code-block:: json\n", 1)[1]
    lines = []
    for line in block.splitlines()[1:]:
        if line and not line.startswith("    "):
            break
        lines.append(line)
    assert json.loads("\n".join(lines)) == sample_invoice(1, lines=1)


def test_readme_numbers_cite_their_benchmark():
    """Every bullet of README's Speed section names the benchmark command behind it
    (``python -m benchmarks --only NAME``, or ``benchmarks.compare`` against an older
    checkout)."""
    text = (ROOT / "README.rst").read_text(encoding="utf-8")
    speed = text.split("\nSpeed\n-----\n", 1)[1].split("\nErrors\n------\n", 1)[0]
    bullets = re.split(r"\n- ", speed)[1:]
    assert bullets
    for bullet in bullets:
        assert re.search(r"python -m benchmarks(?: --only \w+|\.compare \S+ \S+ --mode)", bullet), (
            bullet
        )


def _options_of(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` and of its subcommands' parsers."""
    found: set[str] = set()
    for action in parser._actions:
        found.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options_of(sub)
    return found


#: ``invoicing-async COMMAND ...`` up to the end of the inline literal or the line.
_COMMAND_LINE = re.compile(r"invoicing-async((?: [^`\n]*)?)")


def test_every_option_the_docs_name_is_an_option_of_its_command():
    """Wherever the README, the pages, the examples or a docstring of the package write
    ``invoicing-async COMMAND ... --option``, the command has that option (the
    many-issuers guide named ``sandbox --issuers-file``, an option that never existed)."""
    parser, commands = _build()
    options = {
        name: _options_of(sub) | _options_of(parser) for name, sub in commands.choices.items()
    }
    sources = [
        ROOT / "README.rst",
        *PAGES,
        *EXAMPLES.glob("*.py"),
        *(EXAMPLES / name for name in CHECKED),
        *(ROOT / "invoicing_async").rglob("*.py"),
        *(ROOT / "sandbox" / "invoicing_sandbox").rglob("*.py"),
    ]
    wrong = []
    for source in sources:
        for tail in _COMMAND_LINE.findall(source.read_text(encoding="utf-8")):
            words = [w.strip("'\",.;:()") for w in tail.split()]
            command = next((w for w in words if w and not w.startswith("-")), None)
            if command not in options:
                continue
            named = {w.split("=", 1)[0] for w in words if re.fullmatch(r"--[a-z][\w-]*(=.*)?", w)}
            wrong += [
                f"{source.relative_to(ROOT)}: {command} {o}" for o in named - options[command]
            ]
    assert wrong == []


def _option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def test_the_service_examples_parse_and_agree_with_the_command():
    """The systemd unit and the Kubernetes manifest of the operating guide parse (an INI
    file systemd reads; YAML documents), their command lines are ones the command
    accepts, and they keep their promises: a stop by SIGTERM whose grace fits in the
    time the orchestrator waits before SIGKILL, systemd not restarting a refused
    configuration (78), SIGHUP to reload; Kubernetes' liveness probe on ``/healthz`` and
    readiness probe on ``/readyz`` of the worker's metrics port."""
    parser = _build()[0]
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # systemd's keys are case-sensitive
    unit.read_string((EXAMPLES / "invoicing-worker.service").read_text(encoding="utf-8"))
    service = unit["Service"]
    command = shlex.split(service["ExecStart"])
    assert command[0].endswith("/invoicing-async")
    arguments = parser.parse_args(command[1:])
    assert arguments.command == "worker"
    assert service["KillSignal"] == "SIGTERM"
    assert float(service["TimeoutStopSec"]) > arguments.grace + 5
    assert "78" in service["RestartPreventExitStatus"].split()
    assert "-HUP" in service["ExecReload"]

    [deployment] = list(yaml.safe_load_all((EXAMPLES / "invoicing-worker.yaml").read_text()))
    assert deployment["kind"] == "Deployment"
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    command = [*container["command"], *container["args"]]
    assert command[0] == "invoicing-async"
    arguments = parser.parse_args(command[1:])
    assert arguments.command == "worker"
    assert pod["terminationGracePeriodSeconds"] > arguments.grace + 5
    assert arguments.metrics_host == "0.0.0.0"  # noqa: S104  (the kubelet probes the pod)
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports["metrics"] == arguments.metrics_port
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"]["path"] == path
        assert container[probe]["httpGet"]["port"] in ("metrics", arguments.metrics_port)
        # The probe's own timeout outlasts the worker's (5 s for the loop, the database).
        assert container[probe]["timeoutSeconds"] > 5
