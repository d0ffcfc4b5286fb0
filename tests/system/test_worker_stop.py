"""``invoicing-async worker``: a stop that ends within its grace, and counts that say what
happened (issue 38, part E).

Each test runs the command in a subprocess against the sandbox served from the test's
event loop (its gates hold document or token requests until the test lets them go) and
the suite's PostgreSQL, or a "database" on loopback that accepts connections and never
answers. No test waits for time to pass: each waits for what the worker says, for the
sandbox's state, or for the process to end. The seconds a stop takes are asserted
against bounds far from what they measure (a stop that waits for nothing must not take
its whole grace; a grace of 1 s must not take asyncpg's 60 s connect timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal

from sandboxtools import until
from workertools import LONG, own_env, running, secure_requests

from invoicing_async.outbox import IN_FLIGHT, PENDING, PostgresOutbox
from invoicing_sandbox import Fault, Sandbox, sample_invoices


@contextlib.asynccontextmanager
async def silent_database():
    """A "database" on loopback that accepts connections and never answers a byte.

    Yields its DSN and an event set once a client connected.
    """
    connected = asyncio.Event()
    held: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        connected.set()
        await reader.read()  # whatever the client says, until it leaves: no answer

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"postgresql://worker@127.0.0.1:{port}/outbox", connected
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


class FreezingProxy:
    """A TCP proxy on loopback in front of a database, that can stop forwarding.

    Frozen, it forwards nothing more either way and connects no new client upstream:
    the database, as the worker sees it, accepts connections and never answers (a host
    gone, a network partition without resets).
    """

    def __init__(self, upstream_port: int) -> None:
        self._upstream = upstream_port
        self._frozen = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []
        self.port = 0

    async def __aenter__(self) -> FreezingProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._server.close()
        for task in self._tasks:
            task.cancel()
        for writer in self._writers:
            writer.close()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def freeze(self) -> None:
        self._frozen.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        if self._frozen.is_set():
            return  # accepted, never answered
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._upstream)
        self._writers.append(up_writer)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.ensure_future(self._pump(source, sink))
            self._tasks.add(task)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while data := await source.read(65536):
            if self._frozen.is_set():
                await asyncio.Future()  # held: never forwarded
            sink.write(data)
            await sink.drain()


async def all_marked_sending(dsn: str, count: int) -> None:
    """Until ``count`` entries are in flight and marked sending (their requests on the way)."""
    async with PostgresOutbox(dsn) as outbox:
        while sum([e.maybe_committed async for e in outbox.entries(IN_FLIGHT)]) < count:  # noqa: ASYNC110  (polling the state under test)
            await asyncio.sleep(0.01)


async def test_sigterm_while_the_database_never_answers_ends_within_the_grace(tmp_path):
    """SIGTERM while the worker's first connection to its database waits for an answer
    that never comes (a database that accepts TCP and hangs): the worker stops within
    its grace, exit 0, and says that it stopped before the outbox database answered,
    naming it without a password (before: it waited out asyncpg's 60 s connect timeout,
    58 s after the signal, and said only 'nothing sent')."""
    grace = 1.0
    async with Sandbox(key_algorithm="cv25519") as sb, silent_database() as (dsn, connected):
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        async with running(own_env(sb, key_file), "--ledger", dsn, "--grace", str(grace)) as worker:
            await asyncio.wait_for(connected.wait(), LONG)
            status, seconds = await worker.stopped()
    assert status == 0, worker.said
    assert seconds < grace + 10, f"the stop took {seconds:.1f} s:\n{worker.said}"
    assert re.search(
        r"worker stopped \(SIGTERM\) before the outbox database answered "
        r"\(postgresql://worker@127\.0\.0\.1:\d+/outbox\): no documents",
        worker.said,
    ), worker.said
    assert "Traceback" not in worker.said


async def test_sigterm_after_the_database_went_silent_mid_run_ends_within_its_grace(
    tmp_path, postgres_dsn
):
    """The database stops answering while the worker runs (two requests out, held by the
    provider): SIGTERM ends it within its grace and a few seconds for the writes it
    cannot make, exit 0, saying that the entries it holds are left to their leases
    (before: it waited for an answer to its last writes that never came)."""
    grace = 1.0
    port = int(re.search(r":(\d+)/", postgres_dsn)[1])
    async with Sandbox(key_algorithm="cv25519") as sb, FreezingProxy(port) as proxy:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        async with PostgresOutbox(postgres_dsn) as outbox:
            await outbox.enqueue(sample_invoices(6, issuer_vat=sb.client_id, lines=1))
        sb.hold()
        dsn = postgres_dsn.replace(f":{port}/", f":{proxy.port}/")
        async with running(
            own_env(sb, key_file), "--ledger", dsn, "--concurrency", "2", "--grace", str(grace)
        ) as worker:
            await asyncio.wait_for(sb.wait_held(2), LONG)
            proxy.freeze()
            status, seconds = await worker.stopped()
    assert status == 0, worker.said
    assert seconds < grace + 15, f"the stop took {seconds:.1f} s:\n{worker.said}"
    assert re.search(r"left to their leases", worker.said), worker.said
    assert "Traceback" not in worker.said


async def test_sigterm_while_the_provider_holds_the_token_request_puts_the_entries_back_untouched(
    tmp_path, postgres_dsn
):
    """SIGTERM while the provider holds the worker's token request, so that no document
    request has left: the worker stops at once (nothing is out to wait for), well before
    its grace, exit 0. Every entry is back pending untouched: not maybe committed, no
    failed round charged, its last outcome the one it had; the summary counts the
    documents as not sent. No document request ever left, then or after (before: the
    worker waited out its whole grace, then put all 16 back as maybe committed, and said
    '16 unknown')."""
    count, grace = 16, 20.0
    async with Sandbox(key_algorithm="cv25519") as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        async with PostgresOutbox(postgres_dsn) as outbox:
            await outbox.enqueue(sample_invoices(count, issuer_vat=sb.client_id, lines=1))
        sb.hold_tokens()
        async with running(
            own_env(sb, key_file), "--ledger", postgres_dsn,
            "--concurrency", str(count), "--grace", str(grace),
        ) as worker:  # fmt: skip
            await asyncio.wait_for(sb.wait_tokens_held(1), LONG)
            await asyncio.wait_for(all_marked_sending(postgres_dsn, count), LONG)
            status, seconds = await worker.stopped()
        assert secure_requests(sb) == 0
    assert status == 0, worker.said
    assert seconds < grace, f"the stop took {seconds:.1f} s:\n{worker.said}"
    assert f"worker stopped (SIGTERM): {count} documents: {count} not sent" in worker.said
    async with PostgresOutbox(postgres_dsn) as outbox:
        assert await outbox.counts() == {PENDING: count}
        entries = [e async for e in outbox.entries(PENDING)]
    assert len(entries) == count
    for entry in entries:
        assert not entry.maybe_committed, entry
        assert entry.failures == 0, entry
        assert entry.outcome is None, entry  # never sent: nothing recorded over it


async def test_the_worker_says_how_far_it_is_at_the_default_log_level(tmp_path, postgres_dsn):
    """At the default log level the worker writes a progress line every
    ``--progress-every`` seconds while something changed: the entries pending in the
    outbox, the documents sent, those accepted (before: nothing until it stopped)."""
    count = 12
    async with Sandbox(key_algorithm="cv25519") as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        async with PostgresOutbox(postgres_dsn) as outbox:
            await outbox.enqueue(sample_invoices(count, issuer_vat=sb.client_id, lines=1))
        sb.hold(after=5)
        async with running(
            own_env(sb, key_file), "--ledger", postgres_dsn,
            "--concurrency", "2", "--progress-every", "0.05",
        ) as worker:  # fmt: skip
            await asyncio.wait_for(sb.wait_held(2), LONG)
            await worker.saying(r"worker: \d+ pending, 5 sent, 5 accepted")
            sb.release()
            await asyncio.wait_for(until(lambda: sb.commit_count == count), LONG)
            await worker.saying(rf"worker: 0 pending, {count} sent, {count} accepted")
            worker.signal(signal.SIGTERM)
            assert await worker.ended() == 0, worker.said
    assert f"worker stopped (SIGTERM): {count} documents: {count} accepted" in worker.said


async def test_the_summary_counts_documents_and_names_the_retries_apart(tmp_path, postgres_dsn):
    """A drain whose first three document requests are answered 404 (each ends its round
    ``not_sent``; the entry is claimed again in a later round) and every other request
    accepted: the summary counts each document once, by how it ended, and the re-sent
    requests apart, as ``submit`` names them: '4 documents: 4 accepted (3 retries)'
    (before: '3 not_sent, 4 accepted', outcomes counted as documents)."""
    count = 4
    async with Sandbox(key_algorithm="cv25519") as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        async with PostgresOutbox(postgres_dsn) as outbox:
            await outbox.enqueue(sample_invoices(count, issuer_vat=sb.client_id, lines=1))
        sb.script(*[Fault.status(404)] * 3)
        async with running(
            own_env(sb, key_file), "--ledger", postgres_dsn, "--concurrency", "1", "--until-empty"
        ) as worker:
            assert await worker.ended() == 0, worker.said
        assert secure_requests(sb) == count + 3
    assert f"worker done: {count} documents: {count} accepted (3 retries)" in worker.said
