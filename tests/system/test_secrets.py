"""Adversarial: the API key, access tokens and refresh tokens never leak.

Sentinel credentials are registered in the sandbox, and every token the sandbox issues
is harvested at the source. Then the whole fault matrix runs (every ``Fault`` kind on
documents and on the token endpoint, refresh grants going wrong, 400/401/404/409 answers,
a faulty batch with a journal, the command line), with every logger at DEBUG, and no
secret may appear in: log text, ``str``/``repr`` of errors, tracebacks formatted with
their locals, the journal, outcome reprs, or the command's output.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import secrets
import sys
import traceback

import pytest
from aioresponses import aioresponses
from helpers import once
from sandboxtools import FakeClock

from invoicing_async import InvoicingClient, InvoicingError, RetryPolicy, TokenCache
from invoicing_async.testing import set_instant_retries
from invoicing_sandbox import DEFAULT_RANDOM_KINDS, Fault, Sandbox, sample_invoice
from invoicing_sandbox._rules import random_tin

SENTINEL_KEY = "SENTINEL-APIKEY-" + secrets.token_hex(12)
TIN = random_tin(random.Random("adversarial-secrets"))
QUICK = RetryPolicy(base_delay=0.001, max_delay=0.005, attempt_timeout=1.0, budget_ratio=4)

#: Every fault kind, as it can hit a document request.
DOCUMENT_FAULTS = (
    Fault.latency(0.01),
    Fault.status(408),
    Fault.status(429, retry_after=0),
    Fault.status(500),
    Fault.status(503, retry_after="Wed, 21 Oct 2015 07:28:00 GMT"),
    Fault.reset(),
    Fault.hang(),
    Fault.commit_then_drop(),
    Fault.commit_then_500(),
    Fault.truncated(),
    Fault.non_json(),
    Fault.wrong_content_type(),
    Fault.trickle(0.001, chunk_size=128),
    Fault.oversized(300_000),
    Fault.oversized(300_000, chunked=True),
)


class Leaks:
    """The secrets to look for, and every text that must not contain one."""

    def __init__(self, sb: Sandbox) -> None:
        self.secrets = {SENTINEL_KEY}
        self.texts: list[tuple[str, str]] = []
        self.errors: list[tuple[str, BaseException]] = []
        grant = sb._provider.grant

        def harvesting_grant(form, env, exchange):
            reply = grant(form, env, exchange)
            if reply.status == 200:
                body = json.loads(reply.body)
                self.secrets.add(body["access_token"])
                self.secrets.add(body["refresh_token"])
            return reply

        sb._provider.grant = harvesting_grant  # every token issued, even if its answer is lost

    def error(self, where: str, exc: BaseException) -> None:
        self.errors.append((where, exc))

    def text(self, where: str, text: str) -> None:
        self.texts.append((where, text))

    def findings(self) -> list[str]:
        found = []
        for where, exc in self.errors:
            views = {
                "str": str(exc),
                "repr": repr(exc),
                "vars": repr(vars(exc)),
                "traceback": "".join(
                    traceback.TracebackException.from_exception(exc, capture_locals=True).format()
                ),
            }
            for view, text in views.items():
                found += self._scan(f"{where} [{view}]", text)
        for where, text in self.texts:
            found += self._scan(where, text)
        return found

    def _scan(self, where: str, text: str) -> list[str]:
        found = []
        for secret in self.secrets:
            at = text.find(secret)
            if at >= 0:
                kind = "API key" if secret == SENTINEL_KEY else "token"
                found.append(f"{where}: {kind} in …{text[max(0, at - 160) : at + 20]!r}")
        return found


def make_client(sb: Sandbox, clock: FakeClock, **kwargs) -> InvoicingClient:
    env = sb.environment(client_id=TIN)
    kwargs.setdefault("provider_key", sb.provider_key)
    # The clock stands still: every token would stay young (propagation_delay) forever,
    # and each 401 wait out the allowance. Secrets are the subject here, not that wait.
    kwargs.setdefault("token_cache", TokenCache(clock=clock, propagation_delay=0))
    return InvoicingClient(env.base_url, TIN, SENTINEL_KEY, **kwargs)


async def attempt(leaks: Leaks, where: str, call) -> object:
    try:
        return await asyncio.wait_for(call, 20)
    except InvoicingError as exc:
        leaks.error(where, exc)
    return None


async def run_matrix(sb: Sandbox, leaks: Leaks, clock: FakeClock) -> None:
    counter = iter(range(1, 10_000))

    def doc(**kwargs):
        return sample_invoice(next(counter), issuer_vat=TIN, lines=1, **kwargs)

    # Every fault kind on a document request, encrypted and not.
    async with make_client(sb, clock, timeout=0.5, max_response_size=100_000) as client:
        for fault in DOCUMENT_FAULTS:
            for encrypted in (False, True):
                sb.script(fault)
                document = doc()
                submit = client.submit_secure if encrypted else client.submit_json
                # One attempt: the fault's own error reaches us (single calls retry it).
                first = once(client, document, encrypted=encrypted)
                await attempt(leaks, f"document {fault.name}", first)
                # Resend: 409 after a commit, or the first commit after a refusal.
                await attempt(leaks, f"document {fault.name} resend", submit(document))
        # Definite answers: 400, 401 (issuer VAT mismatch), 404, 405/409 on other calls.
        bad = doc()
        bad["Summaries"]["TotalGrossValue"] = -1
        await attempt(leaks, "400", client.submit_json(bad))
        await attempt(leaks, "401", client.submit_json(sample_invoice(1, issuer_vat="999999999")))
        await attempt(leaks, "404", client.request("POST", "/nowhere", json={"a": 1}))
        await attempt(leaks, "405", client.request("GET", "/Invoice/json"))
        result = await client.submit_json(doc())
        for _ in range(2):
            await attempt(
                leaks,
                "cancel",
                client.request("POST", "/Invoice/cancelDeliveryNote", json={"mark": result.mark}),
            )
        await attempt(leaks, "cancel 400", client.request("POST", "/Invoice/cancelDeliveryNote"))
        # The provider forgets the token: 401, fresh token, retry.
        sb.expire_tokens()
        await attempt(leaks, "expired", client.submit_json(doc()))
        leaks.text("client repr", repr(client))
        leaks.text("cache repr", repr(client.token_cache))
        token = await client.token()
        leaks.text("token repr", repr(token))

    # Every fault kind on the token endpoint, with one try (the error reaches the caller)
    # and with the default retries.
    for fault in (*DOCUMENT_FAULTS, Fault.status(400), Fault.status(401)):
        for attempts in (1, 4):
            sb.script_token(fault)
            async with make_client(
                sb, clock, timeout=0.5, max_response_size=100_000, token_attempts=attempts
            ) as client:
                set_instant_retries(True)  # token retries without waiting
                await attempt(leaks, f"token {fault.name} x{attempts}", client.submit_json(doc()))

    # Refresh grants going wrong: in the renewal window and after expiry, the refresh
    # answer is faulted (so the refresh token is in play when the error is raised).
    for fault in (*DOCUMENT_FAULTS, Fault.status(400)):
        for jump in (900 - 30, 2000):
            async with make_client(
                sb, clock, timeout=0.5, max_response_size=100_000, token_attempts=1
            ) as client:
                await client.submit_json(doc())
                clock.now += jump
                sb.script_token(fault)
                await attempt(leaks, f"refresh {fault.name} +{jump}", client.submit_json(doc()))
            clock.now += 10_000  # the next client starts with a cold cache anyway


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter("%(name)s %(message)s").format(record))


@pytest.fixture(scope="module")
def matrix() -> Leaks:
    """Run the fault matrix once, with every logger at DEBUG; the tests read the result."""

    async def main() -> Leaks:
        # Single calls retry now; the matrix is about secrets, not about waiting.
        set_instant_retries(True)
        clock = FakeClock(10_000.0)
        async with Sandbox(key_algorithm="cv25519", clock=clock) as sb:
            sb.add_client(sb.environments[0], TIN, SENTINEL_KEY)
            leaks = Leaks(sb)
            await run_matrix(sb, leaks, clock)
        return leaks

    root = logging.getLogger()
    handler, level = _Collect(), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        leaks = asyncio.run(main())
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    leaks.text("log", "\n".join(handler.lines))
    return leaks


def test_no_secret_in_errors_logs_or_reprs_under_every_fault(matrix):
    """Every fault kind on documents and on the token endpoint (plus faulted refresh
    grants and 400/401/404/405/409 answers), with DEBUG logging: no API key, access token
    or refresh token in any error's str, repr or attributes, any log line or any repr.
    """
    assert len(matrix.secrets) > 20  # many tokens were issued and are looked for
    assert len(matrix.errors) > 50  # the matrix produced errors to inspect
    assert "the refresh token was refused" in dict(matrix.texts)["log"]
    findings = [f for f in matrix.findings() if "[traceback]" not in f]
    assert not findings, "\n".join(findings)


def test_no_secret_in_tracebacks_formatted_with_locals_under_every_fault(matrix):
    """The same matrix: no secret in any error's traceback formatted with
    ``capture_locals=True`` (what Sentry-style reporters and ``rich`` tracebacks print).
    """
    findings = [f for f in matrix.findings() if "[traceback]" in f]
    assert not findings, "\n".join(findings)


async def test_no_secret_in_journal_or_outcomes_of_a_faulty_batch(tmp_path, caplog):
    """A batch under random faults of every default kind plus 400s, 401s and 409s, with a
    ledger: no secret in the ledger's files, any outcome's repr, its error's traceback
    formatted with locals, or the DEBUG log.
    """
    caplog.set_level(logging.DEBUG)
    clock = FakeClock(10_000.0)
    journal = tmp_path / "batch.db"
    async with Sandbox(key_algorithm="cv25519", clock=clock) as sb:
        sb.add_client(sb.environments[0], TIN, SENTINEL_KEY)
        leaks = Leaks(sb)
        sb.random_faults(rate=0.6, seed=3, kinds=(*DEFAULT_RANDOM_KINDS, Fault.hang()))
        documents = [sample_invoice(n, issuer_vat=TIN, lines=1) for n in range(60)]
        documents[5]["Summaries"]["TotalGrossValue"] = -1  # 400
        documents[6] = sample_invoice(6, issuer_vat="999999999", lines=1)  # 401
        async with make_client(sb, clock) as client:
            sb.script(None)  # no fault for this one
            await client.submit_json(documents[7])  # 409 in the batch
            outcomes = await client.submit_many(
                documents, concurrency=8, ledger=journal, retry=QUICK
            )
            sb.expire_tokens()
            outcomes += await client.submit_many(
                documents[:10], concurrency=8, retry=RetryPolicy(max_attempts=1)
            )
    statuses = {o.status.value for o in outcomes}
    assert {"accepted", "duplicate", "rejected"} <= statuses, statuses
    for outcome in outcomes:
        leaks.text(f"outcome {outcome.index}", repr(outcome))
        if outcome.error is not None:
            leaks.error(f"outcome {outcome.index} error", outcome.error)
    for file in tmp_path.glob("batch.db*"):  # the ledger, its WAL and its lock file
        leaks.text(file.name, file.read_bytes().decode("utf-8", "replace"))
    leaks.text("log", caplog.text)
    assert not leaks.findings(), "\n".join(leaks.findings())


async def run_cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-X",
        "dev",
        "-m",
        "invoicing_async",
        *args,
        env={**os.environ, **env},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode, stdout.decode(), stderr.decode()


async def test_no_secret_in_command_output_under_faults(tmp_path):
    """`submit` (with faults, refusals and a journal) and `token` (without --show-token,
    also against a failing token endpoint): no secret on stdout, stderr, the output file
    or the journal.
    """
    async with Sandbox(key_algorithm="cv25519") as sb:
        sb.add_client(sb.environments[0], TIN, SENTINEL_KEY)
        leaks = Leaks(sb)
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        env = {
            "INVOICING_BASE_URL": sb.environment(client_id=TIN).base_url,
            "INVOICING_CLIENT_ID": TIN,
            "INVOICING_API_KEY": SENTINEL_KEY,
            "INVOICING_PROVIDER_KEY": str(key_file),
        }
        documents = [sample_invoice(n, issuer_vat=TIN, lines=1) for n in range(12)]
        documents[2]["Summaries"]["TotalGrossValue"] = -1
        documents[3] = sample_invoice(3, issuer_vat="999999999", lines=1)
        source = tmp_path / "invoices.jsonl"
        source.write_text("".join(json.dumps(d) + "\n" for d in documents) + "{torn\n")
        journal = tmp_path / "batch.db"
        output = tmp_path / "out.jsonl"
        sb.script(Fault.commit_then_500(), Fault.truncated(), Fault.non_json())
        sb.script_token(Fault.status(503, retry_after=0))
        runs = [
            await run_cli("submit", str(source), "--journal", str(journal), env=env),
            await run_cli(
                "submit",
                str(source),
                "--json",
                "--output",
                str(output),
                "--journal",
                str(journal),
                env=env,
            ),
            await run_cli("token", env=env),
        ]
        sb.script_token(*[Fault.status(500)] * 4)
        runs.append(await run_cli("token", env=env))
        sb.script_token(Fault.non_json())
        runs.append(await run_cli("token", env=env))
    assert [code for code, _, _ in runs] == [1, 1, 0, 1, 1]
    for n, (_, stdout, stderr) in enumerate(runs):
        leaks.text(f"run {n} stdout", stdout)
        leaks.text(f"run {n} stderr", stderr)
        assert "Traceback" not in stderr, stderr
    leaks.text("output", output.read_text(encoding="utf-8"))
    for file in tmp_path.glob("batch.db*"):  # the ledger, its WAL and its lock file
        leaks.text(file.name, file.read_bytes().decode("utf-8", "replace"))
    assert len(leaks.secrets) >= 4
    assert not leaks.findings(), "\n".join(leaks.findings())


@pytest.mark.parametrize("fault", [Fault.non_json(), Fault.truncated(), Fault.status(503)])
async def test_refresh_token_not_in_traceback_locals_when_a_refresh_answer_fails(fault):
    """A refresh grant whose answer is unusable, then a client-credentials grant that
    fails the same way, raise to the caller (one token try each): the traceback
    formatted with locals shows no refresh token.
    """
    clock = FakeClock(10_000.0)
    async with Sandbox(key_algorithm="cv25519", clock=clock) as sb:
        sb.add_client(sb.environments[0], TIN, SENTINEL_KEY)
        leaks = Leaks(sb)
        async with make_client(sb, clock, token_attempts=1) as client:
            await client.submit_json(sample_invoice(1, issuer_vat=TIN))
            clock.now += 2000
            sb.script_token(fault, fault)  # the refresh, then its fallback
            with pytest.raises(InvoicingError) as caught:
                await once(client, sample_invoice(2, issuer_vat=TIN))
    leaks.error(f"refresh {fault.name}", caught.value)
    assert not leaks.findings(), "\n".join(leaks.findings())


@pytest.mark.parametrize("expires_in", [0, "soon", -5, None])
async def test_access_token_not_in_traceback_locals_when_a_token_answer_is_refused(expires_in):
    """A 200 token answer carrying a token but an unusable ``expires_in`` is refused as
    MalformedResponseError; the traceback formatted with locals does not show the token.
    """
    issued = Issued()  # the secrets live in an object whose repr hides them

    async def fetch() -> BaseException:
        base = "https://provider.example"
        with aioresponses() as mock:
            mock.post(f"{base}/oauth/token", payload=issued.body(expires_in))
            async with InvoicingClient(base, TIN, SENTINEL_KEY, token_attempts=1) as client:
                try:
                    await client.token()
                except InvoicingError as exc:
                    return exc
        raise AssertionError("the answer was accepted")

    error = await fetch()
    text = "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())
    assert "MalformedResponseError" in text
    for secret in (SENTINEL_KEY, *issued.secrets):
        assert secret not in text


class Issued:
    """Tokens a fake token endpoint hands out; ``repr`` does not show them."""

    def __init__(self) -> None:
        self.secrets = (
            "SENTINEL-ACCESS-" + secrets.token_hex(8),
            "SENTINEL-REFRESH-" + secrets.token_hex(8),
        )

    def body(self, expires_in) -> dict:
        access, refresh = self.secrets
        return {"access_token": access, "refresh_token": refresh, "expires_in": expires_in}

    def __repr__(self) -> str:
        return "<Issued>"
