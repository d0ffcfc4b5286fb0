"""Exactly one truthful outcome under every failure, through real HTTP against the sandbox.

Each test here reproduces a way the promise broke for users (a hung batch, one bad
document stopping the rest, single calls reporting committed sales as failed, a
misconfiguration flooding the provider, sleeps outliving deadlines, a client used after
close) and states what must hold instead.
"""

from __future__ import annotations

import asyncio
import sys
import time
import traceback

import pytest

from invoicing_async import (
    AuthenticationError,
    ForeignRecordError,
    InvoicingClient,
    InvoicingError,
    OutcomeStatus,
    RetryPolicy,
    document_key,
)
from invoicing_async.testing import instant_retries
from invoicing_sandbox import DEFAULT_RANDOM_KINDS, Fault, Sandbox, sample_invoices

QUICK = RetryPolicy(base_delay=0.005, max_delay=0.02, attempt_timeout=5, budget_ratio=3)


def client_for(sb, **kwargs):
    kwargs.setdefault("provider_key", sb.provider_key)
    return InvoicingClient(sb.base_url, sb.client_id, sb.client_secret, **kwargs)


async def within(seconds, awaitable):
    """Await with a hard limit: a hang fails the test instead of stalling the suite."""
    return await asyncio.wait_for(awaitable, seconds)


# --- 1. a batch never hangs -----------------------------------------------------------


async def test_a_raising_progress_callback_ends_the_batch_with_its_error():
    """A progress callback that raises stops the batch with that error, at once, even at
    concurrency 1 (the preparer used to block on a full queue forever)."""

    def explode(progress):
        raise ZeroDivisionError("callback bug")

    async with Sandbox(key_algorithm="cv25519") as sb, client_for(sb) as client:
        documents = sample_invoices(50, issuer_vat=sb.client_id, lines=1)
        with pytest.raises(ZeroDivisionError, match="callback bug"):
            await within(10, client.submit_many(documents, concurrency=1, on_progress=explode))


async def test_closing_the_client_during_a_batch_gives_every_document_an_outcome():
    """close() while a batch runs: the batch ends (no hang, no raw RuntimeError) and every
    document has one outcome; none is reported ok unless the sandbox holds it."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        # Forty requests pass, then the provider holds them: the batch is certainly
        # mid-way when the client is closed.
        sb.hold(after=40)
        documents = sample_invoices(200, issuer_vat=sb.client_id, lines=1)
        async with client_for(sb) as client:

            async def close_soon():
                await sb.wait_held(1)
                await client.close()

            closer = asyncio.ensure_future(close_soon())
            outcomes = await within(20, client.submit_many(documents, concurrency=8, retry=QUICK))
            await closer
        assert len(outcomes) == len(documents)
        held = {c.record.internal_id for c in sb.committed.values()}
        for document, outcome in zip(documents, outcomes, strict=True):
            committed = document["DistributionDetails"]["InternalDocumentId"] in held
            assert outcome.ok == committed or outcome.status is OutcomeStatus.UNKNOWN
            if outcome.status is OutcomeStatus.NOT_SENT:
                assert not committed
        assert any(o.status is OutcomeStatus.NOT_SENT for o in outcomes)


async def test_a_batch_on_a_closed_client_raises_a_typed_error_at_once():
    """Submitting through a closed client is a clear InvoicingError, never a hang."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        client = client_for(sb)
        async with client:
            pass
        documents = sample_invoices(5, issuer_vat=sb.client_id, lines=1)
        with pytest.raises(InvoicingError, match="closed"):
            await within(5, client.submit_many(documents))
        with pytest.raises(InvoicingError, match="closed"):
            await within(5, client.submit_json(documents[0]))


def test_an_api_key_with_a_newline_is_refused_at_construction_without_showing_it():
    """A key read from a file with its newline is refused when the client is built, with
    a message that says why, and the key is in no traceback local."""

    def key_from_a_file():
        return "S3CRET-KEY-VALUE\n"

    with pytest.raises(ValueError, match="newline") as info:
        InvoicingClient("http://127.0.0.1:9", "094019245", key_from_a_file())
    formatted = "".join(
        traceback.TracebackException.from_exception(info.value, capture_locals=True).format()
    )
    assert "S3CRET-KEY-VALUE" not in formatted


async def test_cli_with_an_api_key_ending_in_a_newline_works(tmp_path):
    """The command strips the newline a shell or .env file leaves on INVOICING_API_KEY."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = tmp_path / "invoices.jsonl"
        import json  # noqa: PLC0415

        documents.write_text(
            "\n".join(json.dumps(d) for d in sample_invoices(3, issuer_vat=sb.client_id)) + "\n",
            encoding="utf-8",
        )
        env = {
            "INVOICING_BASE_URL": sb.base_url,
            "INVOICING_CLIENT_ID": sb.client_id,
            "INVOICING_API_KEY": sb.client_secret + "\n",
            "PATH": "/usr/bin:/bin",
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "invoicing_async",
            "submit",
            "--json",
            str(documents),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await within(30, process.communicate())
        assert process.returncode == 0, err.decode()
        assert len(sb.committed) == 3


# --- 2. one bad document never stops the others -----------------------------------------


class Exploding(dict):
    """A mapping whose values cannot be read."""

    def __getitem__(self, key):
        raise KeyError("broken mapping")

    def get(self, key, default=None):
        raise RuntimeError("broken mapping")

    def items(self):
        raise RuntimeError("broken mapping")


def deep(levels):
    document = {}
    node = document
    for _ in range(levels):
        node["x"] = {}
        node = node["x"]
    return document


@pytest.mark.parametrize("encrypted", [True, False])
async def test_bad_documents_are_rejected_alone_and_the_rest_are_accepted(encrypted):
    """Any exception from identifying or preparing a document ends that document only:
    a 5,000-deep document, a str with a lone surrogate, a mapping that raises, and a
    mapping whose keys collide in JSON ({1: …, "1": …}) are rejected locally; the valid
    invoices around them are accepted."""
    async with Sandbox(key_algorithm="cv25519") as sb, client_for(sb) as client:
        good = sample_invoices(6, issuer_vat=sb.client_id, lines=1)
        bad = [deep(5000), '{"a": "\ud800"}', Exploding(a=1), {1: "one", "1": "uno"}]
        documents = [good[0], bad[0], good[1], bad[1], good[2], bad[2], good[3], bad[3], *good[4:]]
        outcomes = await within(
            30, client.submit_many(documents, encrypted=encrypted, concurrency=2, retry=QUICK)
        )
        statuses = [o.status for o in outcomes]
        assert statuses == [
            OutcomeStatus.ACCEPTED, OutcomeStatus.REJECTED,
            OutcomeStatus.ACCEPTED, OutcomeStatus.REJECTED,
            OutcomeStatus.ACCEPTED, OutcomeStatus.REJECTED,
            OutcomeStatus.ACCEPTED, OutcomeStatus.REJECTED,
            OutcomeStatus.ACCEPTED, OutcomeStatus.ACCEPTED,
        ]  # fmt: skip
        for outcome in outcomes:
            if outcome.status is OutcomeStatus.REJECTED:
                assert isinstance(outcome.error, InvoicingError)
                assert outcome.error.status is None  # refused locally: nothing was sent
                assert outcome.attempts == 0
        assert len(sb.committed) == len(good)


# --- 3. single calls retry safely -----------------------------------------------------------


async def test_single_calls_behind_faults_report_every_committed_sale_as_accepted():
    """200 sales, one call each, 5% of requests faulted (lost answers included): every
    call returns its own record; each sale is committed exactly once; no call that
    raised was committed."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.random_faults(rate=0.05, seed=3, kinds=DEFAULT_RANDOM_KINDS, max_per_document=3)
        documents = sample_invoices(200, issuer_vat=sb.client_id, lines=1, seed=3)
        results = []
        with instant_retries():
            async with client_for(sb) as client:

                async def sale(document):
                    try:
                        return await client.submit_secure(document)
                    except InvoicingError as exc:
                        return exc

                results = await asyncio.gather(*(sale(d) for d in documents))
        failed = [repr(r) for r in results if isinstance(r, Exception)]
        assert failed == [], failed
        for document, result in zip(documents, results, strict=True):
            internal_id = document["DistributionDetails"]["InternalDocumentId"]
            assert result.internal_id == internal_id
            committed = next(
                c for c in sb.committed.values() if c.record.internal_id == internal_id
            )
            assert committed.record.mark == result.mark
        assert len(sb.committed) == 200


async def test_a_single_call_gets_its_record_through_a_409_cut_short():
    """The answer to the first request is lost after the commit, the 409 to the re-send
    is cut short: the call still returns its record, fetched with one more re-send, and
    the sale is committed once (batches: tests/test_sandbox_faults.py)."""
    async with Sandbox(key_algorithm="cv25519") as sb, client_for(sb) as client:
        sb.script(Fault.commit_then_drop(), Fault.truncated())
        document = sample_invoices(1, issuer_vat=sb.client_id, lines=1)[0]
        with instant_retries():
            result = await within(20, client.submit_secure(document))
        [committed] = sb.committed.values()
        assert committed.commits == 1
        assert result == committed.record
        assert sb.stats.submissions == {"drop": 1, 409: 2}


async def test_single_call_timeout_bounds_retries_and_waits():
    """timeout= bounds the whole call, retries and Retry-After waits included."""
    async with Sandbox(key_algorithm="cv25519") as sb, client_for(sb) as client:
        [document] = sample_invoices(1, issuer_vat=sb.client_id, lines=1)
        sb.script(Fault.status(429, retry_after=60), Fault.status(429, retry_after=60))
        started = time.monotonic()
        with pytest.raises(InvoicingError):
            await within(30, client.submit_json(document, timeout=2))
        assert time.monotonic() - started < 20  # not the 60 s Retry-After
        assert len(sb.committed) == 0


async def test_single_call_retry_policy_is_per_call():
    """retry= on a single call replaces the client's policy for that call only."""
    async with Sandbox(key_algorithm="cv25519") as sb, client_for(sb) as client:
        [first, second] = sample_invoices(2, issuer_vat=sb.client_id, lines=1)
        sb.script(Fault.status(503, retry_after=0))
        with pytest.raises(InvoicingError):
            await client.submit_json(first, retry=RetryPolicy(max_attempts=1))
        sb.script(Fault.status(503, retry_after=0))
        result = await client.submit_json(second)
        assert result.internal_id == second["DistributionDetails"]["InternalDocumentId"]


# --- 5. misconfiguration stops early --------------------------------------------------------


async def test_wrong_api_key_costs_one_token_request_and_sends_nothing():
    """Refused credentials: the batch stops at once, every document NOT_SENT (never
    rejected: nothing was refused about the documents), one token request in all."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(2000, issuer_vat=sb.client_id, lines=1)
        async with InvoicingClient(
            sb.base_url, sb.client_id, "wrong-api-key", provider_key=sb.provider_key
        ) as client:
            outcomes = await within(60, client.submit_many(documents, concurrency=32))
        assert {o.status for o in outcomes} == {OutcomeStatus.NOT_SENT}
        assert all(isinstance(o.error, AuthenticationError) for o in outcomes)
        assert sb.stats.token_requests <= 2
        assert sum(sb.stats.submissions.values()) == 0


async def test_wrong_issuer_vat_trips_the_circuit_breaker():
    """Every document answered 401 (issuer VAT ≠ API key): after a short run of 401s the
    batch stops sending; the rest end NOT_SENT; requests stay near the breaker size."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(2000, issuer_vat="999999999", lines=1)
        async with client_for(sb) as client:
            outcomes = await within(60, client.submit_many(documents, concurrency=32, retry=QUICK))
        statuses = [o.status for o in outcomes]
        assert set(statuses) <= {OutcomeStatus.REJECTED, OutcomeStatus.NOT_SENT}
        assert statuses.count(OutcomeStatus.NOT_SENT) > 1800
        assert sum(sb.stats.submissions.values()) < 100
        assert sb.stats.token_requests <= 3


async def test_missing_provider_key_sends_nothing_and_rejects_nothing():
    """submit_many(encrypted=True) without a provider key: all NOT_SENT, no request."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        documents = sample_invoices(500, issuer_vat=sb.client_id, lines=1)
        async with client_for(sb, provider_key=None) as client:
            outcomes = await within(30, client.submit_many(documents))
        assert {o.status for o in outcomes} == {OutcomeStatus.NOT_SENT}
        assert sum(sb.stats.submissions.values()) == 0


# --- 8. deadlines bound every sleep ----------------------------------------------------------


async def test_batch_deadline_is_not_outlived_by_a_retry_after():
    """deadline=3 against Retry-After: 60 ends in about 3 s, not 60."""
    async with Sandbox(key_algorithm="cv25519") as sb, client_for(sb) as client:
        documents = sample_invoices(4, issuer_vat=sb.client_id, lines=1)
        sb.random_faults(
            rate=1.0, seed=1, kinds=[Fault.status(429, retry_after=60)], max_per_document=9
        )
        started = time.monotonic()
        outcomes = await within(45, client.submit_many(documents, deadline=3))
        assert time.monotonic() - started < 20  # not the 60 s Retry-After
        assert {o.status for o in outcomes} == {OutcomeStatus.NOT_SENT}


async def test_cli_timeout_is_the_attempt_timeout(tmp_path):
    """invoicing-async submit --timeout 1: a hung request is given up after ~1 s per
    attempt, not after the policy's default 30 s."""
    import json  # noqa: PLC0415

    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.random_faults(rate=1.0, seed=1, kinds=[Fault.hang()], max_per_document=1)
        documents = tmp_path / "invoices.jsonl"
        [document] = sample_invoices(1, issuer_vat=sb.client_id)
        documents.write_text(json.dumps(document) + "\n", encoding="utf-8")
        env = {
            "INVOICING_BASE_URL": sb.base_url,
            "INVOICING_CLIENT_ID": sb.client_id,
            "INVOICING_API_KEY": sb.client_secret,
            "PATH": "/usr/bin:/bin",
        }
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "invoicing_async",
            "submit",
            "--json",
            "--timeout",
            "1",
            str(documents),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await within(60, process.communicate())
        assert time.monotonic() - started < 20, err.decode()
        assert json.loads(out)["status"] == "accepted"


# --- 11. a client used after close or from another loop ----------------------------------------


def test_a_client_used_from_a_second_event_loop_raises_a_typed_error():
    """A client built and used in one asyncio.run, then used in another: a clear
    InvoicingError, never a raw RuntimeError or a hang."""

    async def main():
        async with Sandbox(key_algorithm="cv25519") as sb:
            client = client_for(sb)
            [document] = sample_invoices(1, issuer_vat=sb.client_id, lines=1)
            await client.submit_json(document)

            async def elsewhere():
                return await asyncio.wait_for(client.submit_json(document), 5)

            def other_loop():
                return asyncio.run(elsewhere())

            try:
                with pytest.raises(InvoicingError, match="event loop"):
                    await asyncio.to_thread(other_loop)
            finally:
                await client.close()

    asyncio.run(main())


# --- 4. a record of another document is never this document's result --------------------


@pytest.mark.parametrize("resend", [True, False])
async def test_a_foreign_record_is_never_ok(resend):
    """The provider commits the invoice but answers with another document's record: it
    is never taken as this invoice's result. With re-sends the 409 brings the invoice's
    own record (ACCEPTED); without, the outcome is UNKNOWN and the foreign record is
    kept on the ForeignRecordError for inspection."""
    async with Sandbox(key_algorithm="cv25519") as sb, client_for(sb) as client:
        documents = sample_invoices(3, issuer_vat=sb.client_id, lines=1)
        sb.script(None, Fault.foreign_record())
        retry = RetryPolicy(base_delay=0, max_delay=0, resend_ambiguous=resend)
        outcomes = await client.submit_many(documents, concurrency=1, retry=retry)
        victim = outcomes[1]
        own = sb.committed[victim.key].record
        if resend:
            assert victim.status is OutcomeStatus.ACCEPTED
            assert victim.result == own
        else:
            assert victim.status is OutcomeStatus.UNKNOWN
            assert victim.result is None
            foreign = victim.error.last_error
            assert isinstance(foreign, ForeignRecordError)
            assert foreign.result is not None
            assert foreign.result != own
            assert set(foreign.mismatches) & {"number", "internal_id"}
        assert [o.status for o in (outcomes[0], outcomes[2])] == [OutcomeStatus.ACCEPTED] * 2
        assert all(c.commits == 1 for c in sb.committed.values())


async def test_a_single_call_answered_with_a_foreign_record_returns_its_own():
    """A single call answered with another document's record retries and returns the
    record of the document it sent."""
    async with Sandbox(key_algorithm="cv25519") as sb, client_for(sb) as client:
        [document] = sample_invoices(1, issuer_vat=sb.client_id, lines=1)
        sb.script(Fault.foreign_record())
        with instant_retries():
            result = await client.submit_json(document)
        assert result == sb.committed[document_key(document)].record


# --- 5. a batch settles at what the provider can take -------------------------------------


async def test_a_batch_adapts_its_concurrency_to_a_provider_answering_429():
    """A provider that takes 4 requests at a time and answers 429 beyond: a batch
    started at concurrency 32 halves what it keeps in flight and settles near 4, so
    every invoice is accepted and 429s stay a small share of the requests."""
    async with Sandbox(key_algorithm="cv25519", max_in_flight=4) as sb:
        sb.random_faults(rate=1.0, kinds=[Fault.latency(0.01)], max_per_document=99)
        documents = sample_invoices(400, issuer_vat=sb.client_id, lines=1)
        async with client_for(sb) as client:
            outcomes = await within(
                120, client.submit_many(documents, concurrency=32, encrypted=False, retry=QUICK)
            )
        assert {o.status for o in outcomes} == {OutcomeStatus.ACCEPTED}
        requests = sum(sb.stats.submissions.values())
        assert sb.stats.submissions[429] < 0.25 * requests, sb.stats.submissions


# --- 9. secrets echoed into records -----------------------------------------------------


async def test_secrets_a_provider_echoes_into_records_reach_no_outcome_or_journal(tmp_path):
    """A provider that echoes the API key and the bearer token into its record (201, and
    409 on the re-send): neither reaches an outcome, an error or the journal."""
    async with Sandbox(key_algorithm="cv25519") as sb, client_for(sb) as client:
        documents = sample_invoices(6, issuer_vat=sb.client_id, lines=1)
        sb.random_faults(rate=1.0, seed=2, kinds=[Fault.echo_secrets()], max_per_document=2)
        sb.script(None, Fault.commit_then_drop())  # the second document is re-sent: 409
        journal = tmp_path / "batch.db"
        outcomes = await client.submit_many(documents, ledger=journal, retry=QUICK)
        token = (await client.token()).value
    assert {o.status for o in outcomes} == {OutcomeStatus.ACCEPTED}
    texts = [repr(o) for o in outcomes] + [  # the ledger's files: database, WAL, lock
        file.read_bytes().decode("utf-8", "replace") for file in tmp_path.glob("batch.db*")
    ]
    for text in texts:
        assert sb.client_secret not in text
        assert token not in text
    assert any("[redacted]" in (o.result.message or "") for o in outcomes)
