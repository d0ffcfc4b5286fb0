"""The command for many issuers: ``--credentials FILE`` and a resolver named by path.

``invoicing-async worker`` (and ``submit``) run in a subprocess against the sandbox on
loopback: given many issuers' credentials (a JSON or CSV file, or
``INVOICING_CREDENTIALS_RESOLVER=module:function``), the command sends through an
``IssuerPool``, each document with its own issuer's API key. No key is ever printed,
not even at ``-vv`` nor in an error about the file.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from invoicing_async.outbox import PENDING, SqliteOutbox
from invoicing_sandbox import Sandbox, sample_invoice, sandbox_issuers


def same_key(tin: str) -> dict:
    document = sample_invoice(1, issuer_vat=tin, lines=1)
    document["DistributionDetails"]["InternalDocumentId"] = "shared-1"
    return document


@pytest.fixture
async def sandbox(tmp_path):
    """A sandbox of three issuers; the command's environment names only its URL and key."""
    issuers = sandbox_issuers(3)
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        env = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}
        sb.issuers = issuers
        sb.env = {
            **env,
            "INVOICING_BASE_URL": sb.base_url,
            "INVOICING_PROVIDER_KEY": str(sb.write_public_key(tmp_path / "provider.asc")),
        }
        yield sb


async def run(sb: Sandbox, *args: str, **env: str) -> tuple[int, str]:
    """The command's exit status and everything it printed (stdout and stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "invoicing_async", *args,
        env={**sb.env, **env}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return int(process.returncode or 0), out.decode() + err.decode()


async def outbox_of_three_issuers(sb: Sandbox, path) -> None:
    """Four invoices each of three issuers, and one more of each with a shared key."""
    async with SqliteOutbox(path) as outbox:
        for tin in sb.issuers:
            await outbox.enqueue([sample_invoice(n, issuer_vat=tin, lines=1) for n in range(4)])
            await outbox.enqueue([same_key(tin)])
        assert await outbox.counts() == {PENDING: 15}


async def assert_all_sent_once(sb: Sandbox, path, printed: str) -> None:
    async with SqliteOutbox(path) as outbox:
        assert await outbox.counts() == {"accepted": 15}
    for tin, api_key in sb.issuers.items():
        assert sb.issuer_stats(tin).commits == 5
        assert api_key not in printed
    assert sb.commit_count == 15


@pytest.mark.parametrize("form", ["json", "csv"])
async def test_a_worker_sends_for_every_issuer_of_a_credentials_file(sandbox, tmp_path, form):
    """``worker --credentials FILE`` (a JSON object, or CSV lines with a header): every
    invoice of three issuers is committed once under its own issuer (two of them share
    a key), and no API key appears in the output, DEBUG logs included."""
    path = tmp_path / "outbox.db"
    await outbox_of_three_issuers(sandbox, path)
    credentials = tmp_path / f"keys.{form}"
    if form == "json":
        credentials.write_text(json.dumps(sandbox.issuers), encoding="utf-8")
    else:
        lines = ["tin,api_key", *(f"{t},{k}" for t, k in sandbox.issuers.items())]
        credentials.write_text("\n".join(lines) + "\n", encoding="utf-8")
    status, printed = await run(
        sandbox, "worker", "--ledger", str(path), "--credentials", str(credentials),
        "--until-empty", "-vv",
    )  # fmt: skip
    assert status == 0, printed
    assert "worker done: 15 documents: 15 accepted" in printed
    await assert_all_sent_once(sandbox, path, printed)


async def test_a_worker_asks_a_resolver_named_in_the_environment(sandbox, tmp_path):
    """``INVOICING_CREDENTIALS_RESOLVER=shopkeys:api_key_of`` (an async function found
    on the path) gives each issuer's key: the worker sends every invoice of the three
    issuers once, and prints no key."""
    path = tmp_path / "outbox.db"
    await outbox_of_three_issuers(sandbox, path)
    (tmp_path / "shopkeys.py").write_text(
        f"KEYS = {sandbox.issuers!r}\n\n\nasync def api_key_of(tin):\n    return KEYS.get(tin)\n",
        encoding="utf-8",
    )
    status, printed = await run(
        sandbox, "worker", "--ledger", str(path), "--until-empty", "-vv",
        INVOICING_CREDENTIALS_RESOLVER="shopkeys:api_key_of", PYTHONPATH=str(tmp_path),
    )  # fmt: skip
    assert status == 0, printed
    await assert_all_sent_once(sandbox, path, printed)


async def test_submit_takes_the_credentials_file_from_the_environment(sandbox, tmp_path):
    """``submit`` with ``INVOICING_CREDENTIALS_FILE``: the invoices of three issuers in one
    file are each committed under their own issuer; no key is printed."""
    credentials = tmp_path / "keys.json"
    credentials.write_text(json.dumps(sandbox.issuers), encoding="utf-8")
    documents = tmp_path / "invoices.jsonl"
    documents.write_text(
        "".join(json.dumps(same_key(tin)) + "\n" for tin in sandbox.issuers), encoding="utf-8"
    )
    status, printed = await run(
        sandbox, "submit", "--json", "--no-progress", str(documents),
        INVOICING_CREDENTIALS_FILE=str(credentials),
    )  # fmt: skip
    assert status == 0, printed
    for tin, api_key in sandbox.issuers.items():
        assert sandbox.issuer_stats(tin).commits == 1
        assert api_key not in printed


async def test_a_malformed_credentials_file_is_named_without_its_keys(sandbox, tmp_path):
    """A CSV line with a third field: the command refuses at once (status 2), naming
    the file and the line, and neither that line's key nor any other."""
    tins = list(sandbox.issuers)
    credentials = tmp_path / "keys.csv"
    credentials.write_text(
        f"{tins[0]},{sandbox.issuers[tins[0]]}\n{tins[1]},{sandbox.issuers[tins[1]]},oops\n",
        encoding="utf-8",
    )
    status, printed = await run(
        sandbox, "worker", "--ledger", str(tmp_path / "outbox.db"), "--credentials",
        str(credentials), "--until-empty",
    )  # fmt: skip
    assert status == 2, printed
    assert f"{credentials} line 2" in printed
    assert all(key not in printed for key in sandbox.issuers.values())
    assert sandbox.stats.token_requests == 0


async def test_the_ledger_commands_name_an_issuer_when_keys_are_shared(sandbox, tmp_path):
    """An outbox where three issuers have an entry ``id:shared-1``: ``outbox status`` of
    that key says it is ambiguous and names the issuers (exit 1); with ``--issuer`` it
    prints that issuer's entry; ``ledger show`` names each entry's issuer (``--issuer``
    shows one issuer's), and ``ledger forget --issuer`` forgets that issuer's entry
    alone; ``outbox enqueue --issuer`` files a document that names no issuer under that
    issuer's entry."""
    path = tmp_path / "outbox.db"
    await outbox_of_three_issuers(sandbox, path)
    first, second, _third = sandbox.issuers
    status, printed = await run(sandbox, "outbox", "status", "id:shared-1", "--ledger", str(path))
    assert status == 1
    assert "several issuers have the key id:shared-1" in printed
    assert first in printed
    assert second in printed
    status, printed = await run(
        sandbox, "outbox", "status", "id:shared-1", "--issuer", second, "--ledger", str(path)
    )
    assert status == 0, printed
    assert json.loads(printed.splitlines()[0])["issuer"] == second
    status, printed = await run(sandbox, "ledger", "show", "--ledger", str(path), "--issuer", first)
    assert status == 0, printed
    lines = [line for line in printed.splitlines()[1:] if line]
    assert len(lines) == 5
    assert all(f"  issuer {first}" in line for line in lines)
    unnamed = tmp_path / "unnamed.json"
    document = same_key(first)
    del document["Issuer"]
    unnamed.write_text(json.dumps(document), encoding="utf-8")
    status, printed = await run(
        sandbox, "outbox", "enqueue", str(unnamed), "--issuer", second, "--ledger", str(path)
    )
    assert status == 0, printed  # the entry of the second issuer's id:shared-1, replaced
    status, printed = await run(
        sandbox, "ledger", "forget", "id:shared-1", "--issuer", first, "--ledger", str(path)
    )
    assert (status, printed.strip()) == (0, "forget: 1 of 1 entries forgotten")
    async with SqliteOutbox(path) as outbox:
        assert await outbox.counts() == {PENDING: 14}
        assert await outbox.status("id:shared-1", issuer=first) is None
        assert (await outbox.status("id:shared-1", issuer=second)).issuer == second
