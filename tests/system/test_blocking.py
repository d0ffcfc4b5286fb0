"""Synchronous callers: `BlockingClient` from the threads of a WSGI-style application, and
the async client used from two `asyncio.run` calls.

The sandbox runs on the test's event loop over real loopback HTTP; the blocking calls run
in other threads (the test awaits them with ``asyncio.to_thread``), as a WSGI server's
worker threads would make them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import subprocess
import sys
import textwrap
import threading

import pytest
from sandboxtools import invoice

from invoicing_async import (
    ClientStateError,
    DuplicateDocumentError,
    InvoicingClient,
    OutcomeStatus,
    ValidationError,
    document_key,
)
from invoicing_async.blocking import BlockingClient, BlockingPool
from invoicing_sandbox import Sandbox, sample_invoice


@pytest.fixture
async def sandbox():
    async with Sandbox(key_algorithm="cv25519") as sb:
        yield sb


def blocking_for(sb: Sandbox) -> BlockingClient:
    return BlockingClient(sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key)


async def test_wsgi_threads_share_one_client_and_one_token(sandbox):
    """Sixteen threads of a WSGI-style app, each handling sales with one shared
    BlockingClient at once: every invoice is committed once, each thread gets its own
    result, and all of them together cost exactly one token request."""
    invoices = [invoice(sandbox, n) for n in range(64)]
    start = threading.Barrier(16)

    def handle(worker: int) -> list[int | None]:
        start.wait()  # all threads call at once, on a cold token cache
        return [client.submit_secure(sale, timeout=20).mark for sale in invoices[worker::16]]

    client = blocking_for(sandbox)
    with client, concurrent.futures.ThreadPoolExecutor(16) as pool:
        marks = await asyncio.to_thread(
            lambda: [m for ms in pool.map(handle, range(16)) for m in ms]
        )
    assert client.closed
    assert sandbox.stats.token_requests == 1
    assert sandbox.commit_count == 64
    assert all(held.commits == 1 for held in sandbox.committed.values())
    assert sorted(marks) == sorted(held.record.mark for held in sandbox.committed.values())
    assert {threading.current_thread().name} != {"invoicing"}


async def test_errors_are_the_async_clients_raised_in_the_caller(sandbox):
    """A 409 is DuplicateDocumentError with the original record, a refusal is
    ValidationError, in the calling thread; submit_many gives one outcome per document,
    in order; token() and json work too."""
    sale = invoice(sandbox, 1)
    broken = invoice(sandbox, 2)
    broken["Details"] = []

    def calls() -> None:
        with blocking_for(sandbox) as client:
            first = client.submit_json(sale)
            with pytest.raises(DuplicateDocumentError) as duplicate:
                client.submit_secure(sale)
            assert duplicate.value.result == first
            with pytest.raises(ValidationError):
                client.submit_secure(broken)
            outcomes = client.submit_many(iter([invoice(sandbox, 3), broken]), concurrency=2)
            assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED, OutcomeStatus.REJECTED]
            assert client.token().expires_in == 900
            assert client.token_cache is not None

    await asyncio.to_thread(calls)
    assert sandbox.stats.token_requests == 1


async def test_calling_from_a_running_event_loop_is_a_clear_error(sandbox):
    """Inside a coroutine a blocking call would freeze the loop: it raises
    ClientStateError saying to await the async client, and sends nothing."""
    client = blocking_for(sandbox)
    with pytest.raises(ClientStateError, match="await an InvoicingClient"):
        client.submit_json(invoice(sandbox, 1))
    client.close()
    assert not sandbox.requests


async def test_closed_client_refuses_calls_and_close_waits_for_calls_in_flight(sandbox):
    """close() lets a call in flight finish (here one the provider takes 0.3 s to
    answer), then refuses new calls; closing twice is fine. `run()` calls any
    coroutine of the async client."""
    sandbox.set_latency(0.3)
    client = blocking_for(sandbox)
    sale = invoice(sandbox, 5)
    started = threading.Event()

    async def submit(async_client: InvoicingClient):
        started.set()
        return await async_client.submit_json(sale)

    def close_while_sending():
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(client.run, submit)
            started.wait()
            client.close()  # returns once the call is done: its result is there
            return pending.result(timeout=30)

    result = await asyncio.to_thread(close_while_sending)
    assert result.mark == sandbox.committed[document_key(sale)].record.mark
    with pytest.raises(ClientStateError, match="closed"):
        await asyncio.to_thread(client.token)
    client.close()


def test_session_option_is_refused():
    """A caller's aiohttp session belongs to the caller's loop: refused at once."""
    with pytest.raises(ValueError, match="leave out session="):
        BlockingClient("https://api.example", "123456789", "KEY", session=object())


TWO_RUNS = textwrap.dedent(
    """
    import asyncio, gc, threading, warnings
    warnings.simplefilter("error")
    from invoicing_async import ClientStateError, InvoicingClient
    from invoicing_sandbox import Sandbox, sample_invoice

    ready, box = threading.Event(), {}
    async def serve():
        async with Sandbox(key_algorithm="cv25519") as sb:
            box["sb"] = sb
            ready.set()
            await asyncio.Event().wait()
    threading.Thread(target=asyncio.run, args=(serve(),), daemon=True).start()
    ready.wait()
    sb = box["sb"]
    client = InvoicingClient(sb.base_url, sb.client_id, sb.client_secret)
    print("first", asyncio.run(client.submit_json(sample_invoice(1))).mark)
    try:
        asyncio.run(client.submit_json(sample_invoice(2)))
    except ClientStateError as exc:
        print("second", exc)
    del client
    gc.collect()
    """
)


def test_second_asyncio_run_is_a_clear_error_without_unclosed_session_warnings(tmp_path):
    """`asyncio.run(client.submit_json(...))` twice on one client: the first works; the
    second raises ClientStateError pointing to BlockingClient; no "Unclosed client
    session" or other ResourceWarning (the first run's session was closed with its
    loop)."""
    script = tmp_path / "two_runs.py"
    script.write_text(TWO_RUNS)
    done = subprocess.run(
        [sys.executable, "-X", "dev", str(script)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("first 4000010")
    assert "invoicing_async.blocking.BlockingClient" in done.stdout
    # -X dev also turns on asyncio's debug mode, which reports a step the shared
    # machine's load made slow ("Executing <Task …> took 0.154 seconds"): not a warning
    # of the client's, so not held against it.
    stderr = "\n".join(
        line for line in done.stderr.splitlines() if not _SLOW_STEP.match(line)
    )
    assert "Unclosed" not in stderr
    assert "ResourceWarning" not in stderr
    assert stderr == ""


#: asyncio's debug mode's line for a slow step of the loop.
_SLOW_STEP = re.compile(r"^Executing <.*> took \d+\.\d+ seconds$")


async def test_async_client_still_closes_normally(sandbox):
    """The session guard changes nothing for `async with`: the client works and closes,
    and a closed client says it is closed."""
    async with InvoicingClient(sandbox.base_url, sandbox.client_id, sandbox.client_secret) as c:
        await c.submit_json(invoice(sandbox, 9))
    with pytest.raises(ClientStateError, match="closed"):
        await c.submit_json(invoice(sandbox, 10))


async def test_a_blocking_pool_serves_many_issuers_from_many_threads(sandbox):
    """BlockingPool: 8 threads submit invoices of three issuers at once; each invoice is
    committed under its own issuer, with one token request per issuer."""
    issuers = {f"70000000{n}": f"key-{n}" for n in range(3)}
    env = sandbox.environment().name
    for tin, key in issuers.items():
        sandbox.add_client(env, tin, key)
    documents = [sample_invoice(n, issuer_vat=list(issuers)[n % 3], lines=1) for n in range(24)]

    def calls() -> list:
        pool = BlockingPool(sandbox.base_url, issuers, provider_key=sandbox.provider_key)
        with pool, concurrent.futures.ThreadPoolExecutor(8) as threads:
            return list(threads.map(pool.submit_json, documents))

    results = await asyncio.to_thread(calls)
    assert len({r.mark for r in results}) == 24
    assert all(len(sandbox.committed_in(env, tin)) == 8 for tin in issuers)
    assert sandbox.stats.token_requests == 3


@pytest.mark.parametrize("by_name", [False, True])
async def test_submit_many_reads_the_documents_in_the_calling_thread(sandbox, by_name):
    """A cursor belongs to its thread: ``submit_many`` reads the documents in the
    caller's thread, whether they are passed by position or as ``documents=``."""
    readers: list[str] = []

    def cursor():
        for n in range(3):
            readers.append(threading.current_thread().name)
            yield invoice(sandbox, 10 + n)

    def calls() -> None:
        with blocking_for(sandbox) as client:
            documents = cursor()
            if by_name:
                outcomes = client.submit_many(documents=documents, concurrency=2)
            else:
                outcomes = client.submit_many(documents, concurrency=2)
            assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED] * 3

    await asyncio.to_thread(calls)
    assert len(readers) == 3
    assert "invoicing" not in readers
    assert len(set(readers)) == 1
