"""``invoicing-async worker`` as a service: stop signals, a database down at start, rotated
keys, a drain that ends, tokens shared by a fleet, health probes (issue 33).

Each test runs the command in subprocesses, as systemd or Kubernetes would, against the
sandbox served from the test's event loop (its gate holds requests: a test acts while
requests are certainly out), a PostgreSQL server the suite starts (tests/pgserver.py;
some tests stop and start it, as a database restart or a fleet started in any order
does) and the suite's redis-server. No test waits for time to pass: each waits for what
the worker says (its stderr), for the sandbox's state, or for the process to end, within
generous bounds.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import signal
import time

import aiohttp
import pytest
from sandboxtools import until
from workertools import LONG, environment, own_env, running, secure_requests

from invoicing_async.outbox import IN_FLIGHT, PENDING, PostgresOutbox, SqliteOutbox
from invoicing_sandbox import Fault, Sandbox, sample_invoice, sample_invoices, sandbox_issuers


def commits(sb: Sandbox, issuers) -> int:
    """Documents the sandbox committed for ``issuers``."""
    return sum(sb.issuer_stats(tin).commits for tin in issuers)


# --- stop signals --------------------------------------------------------------------------


async def test_sigterm_mid_run_lets_the_requests_out_end_and_exits_0(tmp_path, postgres_dsn):
    """SIGTERM while the provider holds four of the worker's requests: it says it stops
    (a second signal would stop it at once), starts no other request, and once the four
    are answered (well within ``--grace``) exits 0 with its summary. Nothing is in
    flight, every commit is recorded ``accepted``, the rest is back ``pending``; the next
    worker sends exactly those, each invoice committed once (before: SIGTERM killed the
    worker on the spot, exit -15, its entries in flight until their leases expired)."""
    count = 40
    async with Sandbox(key_algorithm="cv25519") as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        async with PostgresOutbox(postgres_dsn) as outbox:
            await outbox.enqueue(sample_invoices(count, issuer_vat=sb.client_id, lines=1))
        sb.hold(after=10)
        env = own_env(sb, key_file)
        async with running(
            env, "--ledger", postgres_dsn, "--concurrency", "4", "--grace", "60"
        ) as worker:
            await sb.wait_held(4)
            sent = secure_requests(sb) + sb.held  # answered, and held at the gate
            stopped_at = time.monotonic()
            worker.signal(signal.SIGTERM)
            await worker.saying(r"SIGTERM: stopping")
            sb.release()
            assert await worker.ended() == 0, worker.said
            assert time.monotonic() - stopped_at < 60  # within the grace
        accepted = int(
            re.search(r"worker stopped \(SIGTERM\): \d+ documents?: (\d+) accepted", worker.said)[1]
        )
        assert secure_requests(sb) == sent  # nothing new started after the signal
        async with PostgresOutbox(postgres_dsn) as outbox:
            counts = await outbox.counts()
            assert IN_FLIGHT not in counts
            assert counts == {"accepted": accepted, PENDING: count - accepted}
            assert sb.commit_count == accepted
            async for entry in outbox.entries(PENDING):
                assert not entry.maybe_committed  # never sent: put back untouched
        async with running(env, "--ledger", postgres_dsn, "--until-empty") as again:
            assert await again.ended() == 0, again.said
        assert sb.commit_count == count
        assert all(held.commits == 1 for held in sb.committed.values())


async def test_requests_held_past_the_grace_are_put_back_and_a_second_sigterm_stops_at_once(
    tmp_path, postgres_dsn
):
    """SIGTERM while the provider holds the worker's requests for longer than
    ``--grace``: the worker cuts them off at the grace, puts every entry back (those
    whose request was out knowing that it may have been committed) and exits 0; nothing
    is in flight. A second worker, with a long grace, stopped by SIGTERM twice, stops at
    once: exit 143, nothing in flight either. Let go, the held requests commit; the
    next worker's re-sends are answered 409, recorded ``accepted``: each invoice
    committed once."""
    count = 12
    async with Sandbox(key_algorithm="cv25519") as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        async with PostgresOutbox(postgres_dsn) as outbox:
            await outbox.enqueue(sample_invoices(count, issuer_vat=sb.client_id, lines=1))
        sb.hold()
        env = own_env(sb, key_file)
        async with running(
            env, "--ledger", postgres_dsn, "--concurrency", "2", "--grace", "0.5"
        ) as worker:
            await sb.wait_held(2)
            worker.signal(signal.SIGTERM)
            assert await worker.ended() == 0, worker.said
        async with PostgresOutbox(postgres_dsn) as outbox:
            assert await outbox.counts() == {PENDING: count}
            maybe = [e async for e in outbox.entries(PENDING) if e.maybe_committed]
            assert len(maybe) == 2
        async with running(
            env, "--ledger", postgres_dsn, "--concurrency", "2", "--grace", "3600"
        ) as worker:
            await sb.wait_held(4)  # its own two, beside the first worker's
            worker.signal(signal.SIGTERM)
            await worker.saying(r"SIGTERM: stopping")
            worker.signal(signal.SIGTERM)
            assert await worker.ended() == 128 + signal.SIGTERM, worker.said
            assert "stopping at once" in worker.said
        async with PostgresOutbox(postgres_dsn) as outbox:
            assert IN_FLIGHT not in await outbox.counts()
        sb.release()
        await until(lambda: sb.held == 0)
        async with running(env, "--ledger", postgres_dsn, "--until-empty") as again:
            assert await again.ended() == 0, again.said
        assert sb.commit_count == count
        assert all(held.commits == 1 for held in sb.committed.values())
        async with PostgresOutbox(postgres_dsn) as outbox:
            assert await outbox.counts() == {"accepted": count}


# --- a database down at start ----------------------------------------------------------------


async def test_a_worker_started_before_its_database_sends_everything_once_it_is_up(
    tmp_path, postgres_server, postgres_dsn
):
    """The database is down when the worker starts (a fleet starts in any order): the
    worker says once that it waits for it, waits, and once the database is up sends
    every invoice, and says once that it answers; exit 0 (before: ``LedgerError:
    cannot use the outbox: ConnectionRefusedError``, exit 1 after a second)."""
    count = 30
    async with Sandbox(key_algorithm="cv25519") as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        async with PostgresOutbox(postgres_dsn) as outbox:
            await outbox.enqueue(sample_invoices(count, issuer_vat=sb.client_id, lines=1))
        await asyncio.to_thread(postgres_server.stop)
        down = True
        try:
            async with running(
                own_env(sb, key_file), "--ledger", postgres_dsn, "--until-empty", "-v"
            ) as worker:
                await worker.saying(r"WARNING .*the outbox database is unavailable")
                assert worker.process.returncode is None  # it waits
                await asyncio.to_thread(postgres_server.start)
                down = False
                assert await worker.ended() == 0, worker.said
        finally:
            if down:
                await asyncio.to_thread(postgres_server.start)
    assert worker.said.count("the outbox database is unavailable") == 1, worker.said
    assert worker.said.count("the outbox database answers again") == 1, worker.said
    assert f"worker done: {count} documents: {count} accepted" in worker.said
    assert sb.commit_count == count


async def test_a_database_that_refuses_the_workers_credentials_ends_it_with_78(
    tmp_path, postgres_dsn
):
    """A configuration failure is not waited for: a database that refuses the worker's
    role ends it at once with exit status 78, saying so in one line without the
    password."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        wrong = postgres_dsn.replace("postgresql://postgres@", "postgresql://nobody:s3cret@")
        async with running(own_env(sb, key_file), "--ledger", wrong) as worker:
            assert await worker.ended() == 78, worker.said
    assert "a configuration failure" in worker.said
    assert "s3cret" not in worker.said
    assert "Traceback" not in worker.said


# --- keys rotated while the worker runs ------------------------------------------------------


async def outbox_of(path, issuers, per_issuer: int) -> None:
    async with SqliteOutbox(path) as outbox:
        for tin in issuers:
            await outbox.enqueue(
                [sample_invoice(n, issuer_vat=tin, lines=1) for n in range(per_issuer)]
            )


def write_atomically(path, text: str) -> None:
    """Write ``text`` to ``path`` as operators and secret managers do: a new file
    renamed over the old one."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text, encoding="utf-8")
    fresh.chmod(0o600)
    fresh.replace(path)


async def three_shops(tmp_path):
    """Three shops, four invoices each in a SQLite outbox, their keys in a credentials file."""
    issuers = sandbox_issuers(3)
    path = tmp_path / "outbox.db"
    await outbox_of(path, issuers, 4)
    credentials = tmp_path / "keys.json"
    write_atomically(credentials, json.dumps(issuers))
    return issuers, path, credentials


async def test_a_key_rotated_in_the_credentials_file_is_used_without_a_restart(tmp_path):
    """A shop rotates its API key at the provider while the worker runs: its documents
    wait (one WARNING names the shop), the other shops' go on. The operator writes the
    new key into the credentials file (an atomic rename): the same worker process reads
    the file again and sends the shop's documents with the new key, no signal, no
    restart. No key appears in anything it says."""
    issuers, path, credentials = await three_shops(tmp_path)
    shop, *others = issuers
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        sb.rotate_issuer(shop, "the-shops-new-key")
        env = environment(sb, key_file)
        async with running(env, "--ledger", str(path), "--credentials", str(credentials)) as worker:
            await worker.saying(rf"issuer {shop}'s documents wait")
            await until(lambda: all(sb.issuer_stats(t).commits == 4 for t in others))
            write_atomically(credentials, json.dumps({**issuers, shop: "the-shops-new-key"}))
            await asyncio.wait_for(until(lambda: sb.issuer_stats(shop).commits == 4), LONG)
            worker.signal(signal.SIGTERM)
            assert await worker.ended() == 0, worker.said
    assert worker.said.count(f"issuer {shop}'s documents wait") == 1, worker.said
    for key in [*issuers.values(), "the-shops-new-key"]:
        assert key not in worker.said
    async with SqliteOutbox(path) as outbox:
        assert await outbox.counts() == {"accepted": 12}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
async def test_sighup_with_a_named_pipe_in_the_files_place_never_stops_the_sending(tmp_path):
    """The credentials file replaced by a symbolic link to a named pipe nobody writes
    to, then ``SIGHUP``: the worker says the file is not a regular file and keeps the
    credentials it has, and invoices enqueued afterwards are sent (before: the SIGHUP
    handler read the pipe on the event loop, waiting for a writer forever: nothing was
    sent any more). It stops on SIGTERM with status 0."""
    issuers, path, credentials = await three_shops(tmp_path)
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        env = environment(sb, key_file)
        async with running(env, "--ledger", str(path), "--credentials", str(credentials)) as worker:
            await asyncio.wait_for(until(lambda: commits(sb, issuers) == 12), LONG)
            pipe = tmp_path / "pipe"
            os.mkfifo(pipe)
            link = tmp_path / "link"
            link.symlink_to(pipe)
            link.replace(credentials)
            worker.signal(signal.SIGHUP)
            await asyncio.wait_for(worker.saying(r"not a regular file"), 30)
            async with SqliteOutbox(path) as outbox:
                await outbox.enqueue(
                    [sample_invoice(20 + n, issuer_vat=t) for n, t in enumerate(issuers)]
                )
            await asyncio.wait_for(until(lambda: commits(sb, issuers) == 15), 30)
            worker.signal(signal.SIGTERM)
            assert await worker.ended() == 0, worker.said
    assert not any(key in worker.said for key in issuers.values())


VAULT = '''"""A vault of API keys, as a platform's resolver reads it: a JSON file, read each time."""
import json, os


def api_key_of(tin):
    with open(os.environ["VAULT_FILE"], encoding="utf-8") as vault:
        return json.load(vault).get(tin)
'''


@pytest.mark.parametrize("how", ["after its recheck", "on SIGHUP"])
async def test_a_key_rotated_in_the_resolvers_vault_is_used_without_a_restart(tmp_path, how):
    """The same with ``INVOICING_CREDENTIALS_RESOLVER`` (a vault the worker cannot watch):
    once the new key is in the vault, the worker asks the resolver again, after
    ``--credentials-recheck`` (its wait, doubling while the key stays refused) or at
    once on ``SIGHUP``, and sends the shop's documents with the new key, in the same
    process."""
    issuers = sandbox_issuers(3)
    shop, *others = issuers
    path = tmp_path / "outbox.db"
    await outbox_of(path, issuers, 4)
    vault = tmp_path / "vault.json"
    vault.write_text(json.dumps(issuers), encoding="utf-8")
    (tmp_path / "shopvault.py").write_text(VAULT, encoding="utf-8")
    recheck = "0.2" if how == "after its recheck" else "3600"
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        sb.rotate_issuer(shop, "the-shops-new-key")
        env = environment(
            sb, key_file, INVOICING_CREDENTIALS_RESOLVER="shopvault:api_key_of",
            VAULT_FILE=str(vault), PYTHONPATH=str(tmp_path),
        )  # fmt: skip
        async with running(env, "--ledger", str(path), "--credentials-recheck", recheck) as worker:
            await worker.saying(rf"issuer {shop}'s documents wait")
            await until(lambda: all(sb.issuer_stats(t).commits == 4 for t in others))
            vault.write_text(json.dumps({**issuers, shop: "the-shops-new-key"}), encoding="utf-8")
            if how == "on SIGHUP":
                worker.signal(signal.SIGHUP)
            await asyncio.wait_for(until(lambda: sb.issuer_stats(shop).commits == 4), LONG)
            worker.signal(signal.SIGTERM)
            assert await worker.ended() == 0, worker.said
    assert "the-shops-new-key" not in worker.said
    async with SqliteOutbox(path) as outbox:
        assert await outbox.counts() == {"accepted": 12}


# --- a drain that ends ---------------------------------------------------------------------


async def test_until_empty_with_one_refused_shop_ends_with_3_naming_it(tmp_path):
    """``--until-empty`` over three shops, one whose key the provider refuses: the other
    shops' invoices are sent, then the worker ends (it does not wait for an operator)
    with exit status 3 and a summary naming the refused shop, how many of its entries
    wait and why; the warning names the shop, not "the batch". Its entries stay pending,
    sent with a corrected key by a later run (before: the drain never ended)."""
    issuers, path, credentials = await three_shops(tmp_path)
    shop, *others = issuers
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        sb.revoke_issuer(shop)
        env = environment(sb, key_file)
        args = ("--ledger", str(path), "--credentials", str(credentials), "--until-empty")
        async with running(env, *args) as worker:
            assert await worker.ended() == 3, worker.said
        assert all(sb.issuer_stats(t).commits == 4 for t in others)
        assert re.search(rf"issuer {shop}: 4 entries wait: CredentialsError: ", worker.said)
        assert re.search(rf"WARNING .*issuer {shop}'s documents wait", worker.said)
        assert re.search(r"worker done: \d+ documents: 8 accepted\b", worker.said), worker.said
        assert "the batch stopped" not in worker.said
        assert not any(key in worker.said for key in issuers.values())
        async with SqliteOutbox(path) as outbox:
            assert await outbox.counts() == {"accepted": 8, PENDING: 4}
        sb.restore_issuer(shop)
        async with running(env, *args) as again:
            assert await again.ended() == 0, again.said
        assert sb.issuer_stats(shop).commits == 4


async def test_until_empty_with_only_parked_entries_left_ends_with_3(tmp_path):
    """A drain whose only leftovers are parked (poison) entries ends with exit status 3
    too, saying how many are parked and how to send them again."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        path = tmp_path / "outbox.db"
        documents = sample_invoices(3, issuer_vat=sb.client_id, lines=1)
        async with SqliteOutbox(path) as outbox:
            keys = await outbox.enqueue(documents)
        sb.poison(keys[0], Fault.status(500, retry_after=0))  # its retries at once
        async with running(
            own_env(sb, key_file), "--ledger", str(path), "--until-empty", "--max-rounds", "1"
        ) as worker:
            assert await worker.ended() == 3, worker.said
    assert "1 parked entry need attention" in worker.said
    assert re.search(r"worker done: .*2 accepted", worker.said), worker.said


# --- tokens shared by a fleet ----------------------------------------------------------------


async def test_three_cli_workers_with_a_token_store_fetch_one_token_per_issuer(
    tmp_path, postgres_dsn, redis_url
):
    """Three ``worker`` processes over one PostgreSQL outbox of 60 shops, each given
    ``--token-store`` (the suite's Redis; its values encrypted with the key of
    ``INVOICING_TOKEN_STORE_KEY``): every invoice committed once, and at most one token
    request per shop for the whole fleet (before: the command had no such option, and
    each process fetched the token of every shop it sent for)."""
    issuers = sandbox_issuers(60)
    credentials = tmp_path / "keys.json"
    write_atomically(credentials, json.dumps(issuers))
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        async with PostgresOutbox(postgres_dsn) as outbox:
            for n in range(3):
                await outbox.enqueue([sample_invoice(n, issuer_vat=t, lines=1) for t in issuers])
        sb.hold()  # the fleet starts together: nothing is answered before all three ask
        env = environment(
            sb, key_file, INVOICING_TOKEN_STORE_KEY=base64.b64encode(bytes(range(32))).decode()
        )
        args = ("--ledger", postgres_dsn, "--credentials", str(credentials), "--until-empty",
                "--token-store", redis_url, "--concurrency", "8")  # fmt: skip
        async with (
            running(env, *args) as one,
            running(env, *args) as two,
            running(env, *args) as three,
        ):
            await sb.wait_held(6)
            sb.release()
            for worker in (one, two, three):
                assert await worker.ended() == 0, worker.said
    assert sb.commit_count == 180
    assert all(held.commits == 1 for held in sb.committed.values())
    per_issuer = {tin: sb.issuer_stats(tin).token_requests for tin in issuers}
    assert max(per_issuer.values()) == 1, per_issuer
    # A worker may have found nothing left to claim ("worker done: no documents").
    summaries = [re.search(r"worker done: (.*)", w.said) for w in (one, two, three)]
    assert all(summaries), [w.said for w in (one, two, three)]
    shares = [re.search(r"(\d+) accepted", found[1]) for found in summaries if found]
    assert sum(int(share[1]) for share in shares if share) == 180, [
        w.said for w in (one, two, three)
    ]


# --- health --------------------------------------------------------------------------------


async def probe(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as answer:
        return answer.status, await answer.text()


async def test_readyz_turns_unready_while_the_database_is_down(
    tmp_path, postgres_server, postgres_dsn
):
    """A worker serving ``--metrics-port``: ``/readyz`` is 200 while its database
    answers, 503 naming the outbox database while it is down (``/healthz`` stays 200:
    the worker is alive, only not ready), 200 again once it is up; 503 "stopping" after
    SIGTERM, until it ends."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        async with PostgresOutbox(postgres_dsn) as outbox:
            await outbox.setup()
        sb.hold()
        async with running(
            own_env(sb, key_file), "--ledger", postgres_dsn, "--metrics-port", "0",
            "--grace", "60",
        ) as worker:  # fmt: skip
            found = await worker.saying(r"probes: (http://\S+/healthz), (http://\S+/readyz)")
            healthz, readyz = found[1], found[2]
            assert await probe(readyz) == (200, "ready\n")
            await asyncio.to_thread(postgres_server.stop)
            try:
                status, said = await probe(readyz)
                assert status == 503
                assert said.startswith("the outbox database does not answer")
                assert await probe(healthz) == (200, "ok\n")
            finally:
                await asyncio.to_thread(postgres_server.start)
            async with PostgresOutbox(postgres_dsn) as outbox:
                await outbox.enqueue(sample_invoices(1, issuer_vat=sb.client_id, lines=1))
            await sb.wait_held(1)  # the worker answers, and sends again
            assert await probe(readyz) == (200, "ready\n")
            worker.signal(signal.SIGTERM)
            await worker.saying("SIGTERM: stopping")
            assert await probe(readyz) == (503, "stopping\n")
            sb.release()
            assert await worker.ended() == 0, worker.said


async def test_a_worker_whose_token_store_is_down_at_start_sends_everything(tmp_path, redis_server):
    """Redis is down when the worker starts (a fleet starts in any order): the worker
    says once that the token store is unavailable, fetches its own tokens meanwhile and
    sends every invoice; exit 0. No invoice waits for Redis."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        path = tmp_path / "outbox.db"
        async with SqliteOutbox(path) as outbox:
            await outbox.enqueue(sample_invoices(10, issuer_vat=sb.client_id, lines=1))
        redis_server.stop()
        try:
            async with running(
                own_env(sb, key_file), "--ledger", str(path), "--until-empty",
                "--token-store", redis_server.url,
            ) as worker:  # fmt: skip
                assert await worker.ended() == 0, worker.said
        finally:
            redis_server.start()
    assert worker.said.count("the Redis token store is unavailable") == 1, worker.said
    assert "worker done: 10 documents: 10 accepted" in worker.said
    assert sb.commit_count == 10
