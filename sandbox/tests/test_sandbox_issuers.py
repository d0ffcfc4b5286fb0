"""The sandbox as a provider of many issuers: registration, one issuer revoked or
throttled while the others go on, per-issuer scripts, gate and counts, the service's
issuers file.

Over real loopback HTTP, with one real client per issuer (the client works per issuer)
or raw aiohttp where the wire answer itself is the point. "The others were not held
back" is said by counts (requests, 429s, commits per issuer), never by timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import tracemalloc
import urllib.request
from pathlib import Path

import aiohttp
import pytest
from sandboxtools import FakeClock

from invoicing_async import InvoicingClient, OutcomeStatus
from invoicing_async.testing import instant_retries
from invoicing_sandbox import (
    SANDBOX_CLIENT_ID,
    Fault,
    IssuerStats,
    Sandbox,
    sample_invoice,
    sample_invoices,
    sandbox_issuers,
)
from invoicing_sandbox._issuerfile import read_issuers, write_issuers
from invoicing_sandbox._rules import with_check_digit

FIVE = sandbox_issuers(5)
TINS = list(FIVE)


@pytest.fixture
async def sb():
    async with Sandbox(issuers=FIVE, key_algorithm="cv25519") as sandbox:
        yield sandbox


@contextlib.asynccontextmanager
async def clients(sb: Sandbox, tins=TINS):
    """One real client per issuer (as many issuers' clients of one process would be)."""
    opened = {
        tin: InvoicingClient(
            sb.base_url, tin, sb.environment(client_id=tin).client_secret,
            provider_key=sb.provider_key,
        )
        for tin in tins
    }  # fmt: skip
    try:
        yield opened
    finally:
        for client in opened.values():
            await client.close()


def documents(tin: str, count: int = 4) -> list[dict]:
    return sample_invoices(count, issuer_vat=tin, lines=2)


async def http(method: str, url: str, **kwargs) -> tuple[int, dict, dict]:
    """One raw request: status, headers, JSON body."""
    async with aiohttp.ClientSession() as session, session.request(method, url, **kwargs) as r:
        return r.status, dict(r.headers), await r.json(content_type=None)


async def grant(sb: Sandbox, tin: str, **form) -> tuple[int, dict]:
    form = {"grant_type": "client_credentials", "client_id": tin, **form}
    form.setdefault("client_secret", FIVE.get(tin) or sb.client_secret)
    status, _, body = await http("POST", f"{sb.base_url}/oauth/token", data=form)
    return status, body


async def post_document(sb: Sandbox, tin: str, token: str, number: int) -> tuple[int, dict]:
    """A document of ``tin`` with ``token``, outside the client: status and headers."""
    headers = {"Authorization": f"Bearer {token}", "APIKey": FIVE[tin]}
    document = sample_invoice(number, issuer_vat=tin, lines=2)
    status, answer, _ = await http(
        "POST", f"{sb.base_url}/Invoice/json", json=document, headers=headers
    )
    return status, answer


# --- many issuers, cheaply ---------------------------------------------------------------


def test_sandbox_issuers_are_reproducible_valid_and_disjoint():
    """sandbox_issuers(n): n distinct 9-digit TINs with a valid check digit, none the
    sandbox's default client; the same call gives the same keys, ``start`` gives the next
    ones, ``seed=None`` random keys."""
    issuers = sandbox_issuers(1000)
    assert len(issuers) == 1000
    assert issuers == sandbox_issuers(1000)
    assert all(len(tin) == 9 and with_check_digit(tin[:8]) == tin for tin in issuers)
    assert SANDBOX_CLIENT_ID not in issuers
    assert len(set(issuers.values())) == 1000
    assert all(len(key) == 43 for key in issuers.values())
    later = sandbox_issuers(10, start=1000)
    assert not set(later) & set(issuers)
    assert sandbox_issuers(3, seed=None) != sandbox_issuers(3, seed=None)
    assert sandbox_issuers(3, seed=1) != sandbox_issuers(3, seed=2)
    with pytest.raises(ValueError, match="negative"):
        sandbox_issuers(-1)


async def test_ten_thousand_issuers_cost_little_and_each_is_served():
    """10,000 issuers registered with add_issuers take a few megabytes (a dict entry
    each); the last one's document is committed, and counters exist only for issuers
    that sent something."""
    many = sandbox_issuers(10_000)
    async with Sandbox(key_algorithm="cv25519") as sb:
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            sb.add_issuers(many)
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert after - before < 2 * 1024 * 1024  # the keys and TINs are the caller's
        last = list(many)[-1]
        async with clients(sb, [last]) as opened:
            result = await opened[last].submit_json(sample_invoice(1, issuer_vat=last))
        assert sb.committed_in(client_id=last)[f"id:{last}-A-1"].record == result
        assert list(sb.stats.by_issuer) == [("test", last)]
        assert sb.issuer_stats(next(iter(many))) == IssuerStats()


async def test_add_issuers_is_all_or_none_and_never_names_a_key():
    """A batch with a TIN registered under another key, an empty key or a number is
    refused whole: the error names the TIN, never a key, and nothing was added."""
    async with Sandbox(key_algorithm="cv25519") as sb:
        batch = {**sandbox_issuers(3), SANDBOX_CLIENT_ID: "another-secret-key"}
        with pytest.raises(ValueError, match=SANDBOX_CLIENT_ID) as caught:
            sb.add_issuers(batch)
        assert "another-secret-key" not in str(caught.value)
        assert sb.client_secret not in str(caught.value)
        with pytest.raises(ValueError, match="999"):
            sb.add_issuers({"999": ""})
        with pytest.raises(TypeError):
            sb.add_issuers({"999": 12345})  # type: ignore[dict-item]
        for tin in sandbox_issuers(3):
            with pytest.raises(KeyError):
                sb.environment(client_id=tin)
        sb.add_issuers(sandbox_issuers(3), environment="production")
        assert sb.environment("production", client_id=TINS[0]).client_secret == FIVE[TINS[0]]


# --- one issuer revoked or throttled, the others go on ----------------------------------


async def test_two_of_five_issuers_revoked_and_throttled_while_the_others_commit(sb):
    """Five issuers with a token each; one revoked, one throttled (every request 429),
    then all five send four documents at once: the three others' documents are all
    committed, each on its first request (no 429, nothing re-sent, one token request);
    the revoked issuer's documents are refused (401, then its token request refused as
    wrong credentials) and the throttled one's get only 429s. Counted per issuer."""
    revoked, throttled, *others = TINS
    async with clients(sb) as opened:
        for client in opened.values():
            await client.token()
        sb.revoke_issuer(revoked)
        sb.throttle_issuer(throttled, retry_after=0)
        with instant_retries():
            batches = await asyncio.gather(
                *(opened[tin].submit_many(documents(tin)) for tin in TINS)
            )
    outcomes = dict(zip(TINS, batches, strict=True))
    for tin in others:
        assert [o.status for o in outcomes[tin]] == [OutcomeStatus.ACCEPTED] * 4
        assert len(sb.committed_in(client_id=tin)) == 4
        counts = sb.issuer_stats(tin)
        assert counts.documents == 4  # one request each: nobody held them back
        assert counts.submissions == {201: 4}
        assert (counts.throttled, counts.token_requests, counts.commits) == (0, 1, 4)
        assert counts.requests == 5
    assert not any(o.status is OutcomeStatus.ACCEPTED for o in outcomes[revoked])
    assert sb.committed_in(client_id=revoked) == {}
    gone = sb.issuer_stats(revoked)
    assert set(gone.submissions) == {401}
    assert (gone.token_requests, gone.tokens_issued, gone.commits) == (2, 1, 0)
    assert {r.fault for r in sb.requests_of(revoked)[1:]} == {"revoked"}
    assert not any(o.status is OutcomeStatus.ACCEPTED for o in outcomes[throttled])
    slow = sb.issuer_stats(throttled)
    assert slow.throttled == slow.documents == slow.submissions[429] > 4
    assert slow.commits == 0
    assert sb.commit_count == 12


async def test_a_revoked_key_is_refused_like_a_wrong_one_until_restored(sb):
    """revoke_issuer: its client-credentials grant is a 400 invalid_request and its refresh
    a 401 invalid_client (what wrong credentials get), its access token and refresh token
    are dead; another issuer is served. restore_issuer: a new token works, the old one
    stays revoked."""
    gone, other = TINS[0], TINS[1]
    _, tokens = await grant(sb, gone)
    assert (await post_document(sb, gone, tokens["access_token"], 1))[0] == 201
    sb.revoke_issuer(gone)
    assert await grant(sb, gone) == (
        400, {"error": "invalid_request", "error_description": "invalid client credentials"}
    )  # fmt: skip
    status, body = await grant(
        sb, gone, grant_type="refresh_token", refresh_token=tokens["refresh_token"]
    )
    assert (status, body["error"]) == (401, "invalid_client")
    assert (await post_document(sb, gone, tokens["access_token"], 2))[0] == 401
    status, theirs = await grant(sb, other)
    assert status == 200
    assert (await post_document(sb, other, theirs["access_token"], 1))[0] == 201
    sb.restore_issuer(gone)
    assert (await post_document(sb, gone, tokens["access_token"], 3))[0] == 401
    status, fresh = await grant(sb, gone)
    assert status == 200
    assert (await post_document(sb, gone, fresh["access_token"], 4))[0] == 201
    status, body = await grant(
        sb, gone, grant_type="refresh_token", refresh_token=tokens["refresh_token"]
    )
    assert (status, body["error"]) == (400, "invalid_grant")  # dropped with the key
    assert sb.issuer_stats(gone).commits == 2


async def test_a_throttle_with_a_rate_admits_a_burst_then_429_until_the_clock_moves():
    """throttle_issuer(rate=2, retry_after=3) on a fake clock: two requests pass, the
    third gets 429 with Retry-After: 3 (unprocessed); half a second later one more
    passes; another issuer is never refused; unthrottle_issuer serves it again."""
    clock = FakeClock()
    async with Sandbox(issuers=FIVE, clock=clock, key_algorithm="cv25519") as sb:
        slow, other = TINS[0], TINS[1]
        token = (await grant(sb, slow))[1]["access_token"]
        their = (await grant(sb, other))[1]["access_token"]
        sb.throttle_issuer(slow, rate=2, retry_after=3)
        assert [(await post_document(sb, slow, token, n))[0] for n in (1, 2)] == [201, 201]
        status, headers = await post_document(sb, slow, token, 3)
        assert (status, headers["Retry-After"]) == (429, "3")
        assert [(await post_document(sb, other, their, n))[0] for n in range(1, 6)] == [201] * 5
        clock.now += 0.5
        assert [(await post_document(sb, slow, token, n))[0] for n in (3, 4)] == [201, 429]
        sb.unthrottle_issuer(slow)
        assert (await post_document(sb, slow, token, 4))[0] == 201
        assert sb.issuer_stats(slow).throttled == 2
        assert sb.issuer_stats(other).throttled == 0
        assert len(sb.committed_in(client_id=slow)) == 4
        assert [r.fault for r in sb.requests_of(slow) if r.status == 429] == ["throttled"] * 2


async def test_a_throttled_issuers_operations_get_429_and_its_tokens_are_served(sb):
    """A throttled issuer's operation requests (here GetLastStatus) are 429 too, counted
    per issuer; its token requests are served."""
    slow = TINS[0]
    sb.throttle_issuer(slow, retry_after="Wed, 21 Oct 2026 07:28:00 GMT")
    status, tokens = await grant(sb, slow)
    assert status == 200
    headers = {"Authorization": f"Bearer {tokens['access_token']}", "APIKey": FIVE[slow]}
    url = f"{sb.base_url}/B2GInvoice/GetLastStatus?mark=1"
    status, answer, _ = await http("GET", url, headers=headers)
    assert (status, answer["Retry-After"]) == (429, "Wed, 21 Oct 2026 07:28:00 GMT")
    counts = sb.issuer_stats(slow)
    assert (counts.operations, counts.throttled, counts.tokens_issued) == (1, 1, 1)


def test_controls_name_a_registered_issuer():
    """Revoking, throttling, scripting or holding an issuer the environment does not
    have is a KeyError naming it (a typo, said at once); a bad rate is a ValueError."""
    sb = Sandbox(issuers=FIVE)
    for control in (
        lambda: sb.revoke_issuer("000000000"),
        lambda: sb.throttle_issuer("000000000"),
        lambda: sb.script(Fault.reset(), issuer="000000000"),
        lambda: sb.hold(issuer="000000000"),
        lambda: sb.revoke_issuer(TINS[0], environment="production"),
    ):
        with pytest.raises(KeyError):
            control()
    for rate in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="rate"):
            sb.throttle_issuer(TINS[0], rate=rate)


async def test_reset_serves_revoked_and_throttled_issuers_again(sb):
    """reset() forgets issuer faults with the other faults: a revoked issuer gets a token,
    a throttled one is served, and the counters start again."""
    sb.revoke_issuer(TINS[0])
    sb.throttle_issuer(TINS[1])
    assert (await grant(sb, TINS[0]))[0] == 400
    sb.reset()
    assert sb.issuer_stats(TINS[0]) == IssuerStats()
    token = (await grant(sb, TINS[0]))[1]["access_token"]
    assert (await post_document(sb, TINS[0], token, 1))[0] == 201
    token = (await grant(sb, TINS[1]))[1]["access_token"]
    assert (await post_document(sb, TINS[1], token, 1))[0] == 201


# --- the existing controls, aimed at one issuer -----------------------------------------


async def test_scripted_faults_for_one_issuer_are_taken_by_its_requests_only(sb):
    """script(..., issuer=A): the other issuers' documents pass untouched; A's next
    document gets the fault (503), the one after is committed. Operations and token
    requests take their own issuer scripts the same way."""
    a, b = TINS[0], TINS[1]
    sb.script(Fault.status(503), issuer=a)
    sb.script_operation(Fault.status(500), issuer=a)
    sb.script_token(Fault.status(502), issuer=b)
    status, _ = await grant(sb, b)
    assert status == 502
    token_a = (await grant(sb, a))[1]["access_token"]
    token_b = (await grant(sb, b))[1]["access_token"]
    assert [(await post_document(sb, b, token_b, n))[0] for n in (1, 2)] == [201, 201]
    assert (await post_document(sb, a, token_a, 1))[0] == 503
    assert (await post_document(sb, a, token_a, 1))[0] == 201
    statuses = []
    for tin, token in ((b, token_b), (a, token_a), (a, token_a)):
        headers = {"Authorization": f"Bearer {token}", "APIKey": FIVE[tin]}
        url = f"{sb.base_url}/B2GInvoice/GetLastStatus?mark=1"  # no such document: 404
        statuses.append((await http("GET", url, headers=headers))[0])
    assert statuses == [404, 500, 404]
    assert sb.issuer_stats(a).submissions == {503: 1, 201: 1}
    assert sb.issuer_stats(b).submissions == {201: 2}


async def test_holding_one_issuer_lets_the_others_through(sb):
    """hold(issuer=A): A's document waits at its gate (nothing committed) while B's and
    C's documents are all committed; release(issuer=A) lets it go on."""
    a, b, c = TINS[:3]
    async with clients(sb, [a, b, c]) as opened:
        sb.hold(issuer=a)
        held = asyncio.ensure_future(opened[a].submit_json(documents(a, 1)[0]))
        await sb.wait_held(1, issuer=a)
        for tin in (b, c):
            outcomes = await opened[tin].submit_many(documents(tin, 3))
            assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED] * 3
        assert (sb.held, sb.held_of(a), sb.held_of(b)) == (1, 1, 0)
        assert sb.committed_in(client_id=a) == {}
        assert not held.done()
        sb.release(issuer=a)
        result = await held
    assert sb.committed_in(client_id=a)[f"id:{a}-A-1"].record == result
    assert sb.held == 0


async def test_an_outage_still_stops_every_issuer(sb):
    """The outage switch is the provider's, not an issuer's: during a 503 outage every
    issuer's request is refused (and counted for its issuer), after it every one is served."""
    tokens = {tin: (await grant(sb, tin))[1]["access_token"] for tin in TINS[:2]}
    async with sb.outage("503"):
        for tin, token in tokens.items():
            assert (await post_document(sb, tin, token, 1))[0] == 503
    for tin, token in tokens.items():
        assert (await post_document(sb, tin, token, 1))[0] == 201
        assert sb.issuer_stats(tin).submissions == {503: 1, 201: 1}


# --- over HTTP: /_sandbox/issuers ----------------------------------------------------------


async def test_issuers_endpoints_show_and_control_one_issuer_without_keys(sb):
    """GET /_sandbox/issuers lists the registered issuers (paged) and /issuers/{tin} one:
    revoked, throttled, counters; POST .../revoke, /throttle, /unthrottle, /restore play
    the faults from another process. No API key appears in any answer."""
    tin = TINS[2]
    base = f"{sb.inspect_url}/issuers"
    status, _, listing = await http("GET", f"{base}?limit=3")
    assert (status, listing["total"], len(listing["issuers"])) == (200, 7, 3)  # 2 envs
    status, _, state = await http("POST", f"{base}/{tin}/throttle?rate=5&retry_after=2")
    assert (status, state["throttle"]) == (200, {"retry_after": 2, "rate": 5.0})
    status, _, state = await http("POST", f"{base}/{tin}/revoke")
    assert state["revoked"] is True
    assert (await grant(sb, tin))[0] == 400
    status, _, state = await http("GET", f"{base}/{tin}")
    assert state["counts"]["token_requests"] == 1
    for action in ("restore", "unthrottle"):
        status, _, state = await http("POST", f"{base}/{tin}/{action}")
        assert status == 200
    assert (state["revoked"], state["throttle"]) == (False, None)
    assert (await http("POST", f"{base}/000000000/revoke"))[0] == 404
    assert (await http("POST", f"{base}/{tin}/explode"))[0] == 404
    assert (await http("POST", f"{base}/{tin}/throttle?rate=-1"))[0] == 400
    assert (await http("GET", f"{base}/{tin}/revoke"))[0] == 405
    async with aiohttp.ClientSession() as session:
        for path in ("", "?limit=1000", f"/{tin}"):
            async with session.get(base + path) as answer:
                text = await answer.text()
            assert not any(key in text for key in FIVE.values())
            assert sb.client_secret not in text


# --- the service: --issuers FILE, --issuer-count N ----------------------------------------


def test_issuers_files_in_json_and_csv(tmp_path):
    """An issuers file is a JSON object TIN -> key, or CSV lines TIN,key with an optional
    header, comments and blank lines; write_issuers writes JSON with mode 0600."""
    two = sandbox_issuers(2)
    written = write_issuers(tmp_path / "issuers.json", two)
    assert oct(written.stat().st_mode & 0o777) == "0o600"
    assert read_issuers(written) == two
    csv = tmp_path / "issuers.csv"
    rows = "".join(f"{tin}, {key}\n" for tin, key in two.items())
    csv.write_text(f"tin,api_key\n# two issuers\n\n{rows}", encoding="utf-8")
    assert read_issuers(csv) == two


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"900000005": 12}', "not a string"),
        ('{"900000005": "secret-one", "900000005": "secret-two"}', "again, with another"),
        ('["secret-one"]', "JSON object"),
        ('{"900000005": "secret-one",', "column 28: a TIN"),
        ("900000005,secret-one,extra\n", "line 1"),
        ("900000005,secret-one\n900000005,secret-two\n", "line 2"),
        ("900000005,\n", "empty"),
    ],
)
def test_a_bad_issuers_file_says_where_and_never_quotes_a_key(tmp_path, text, problem):
    """A malformed issuers file is a ValueError naming the file, the line and the
    column, never a key."""
    path = tmp_path / "issuers.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=problem) as caught:
        read_issuers(path)
    assert str(path) in str(caught.value)
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    "tin", ["not-a-tin", "12345678", "1234567890", "094019246", "\uff1094019245"]
)
def test_an_issuers_file_of_something_that_is_no_tin_is_refused(tmp_path, tin):
    """An issuers file naming ``not-a-tin`` (or 8 or 10 digits, a wrong check digit,
    a full-width digit) is refused, naming that TIN and what a TIN is, never its key; a
    real TIN beside it does not save the file."""
    path = tmp_path / "issuers.csv"
    path.write_text(f"094019245,secret-one\n{tin},secret-two\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not a TIN") as caught:
        read_issuers(path)
    assert repr(tin) in str(caught.value)
    assert str(path) in str(caught.value)
    assert "secret" not in str(caught.value)


def _serve(arguments: list[str], cwd: Path) -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "invoicing_async", "sandbox", "--port", "0",
        "--key-algorithm", "cv25519", *arguments,
    ]  # fmt: skip
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd
    )


def _banner(process: subprocess.Popen[str]) -> list[str]:
    assert process.stdout is not None
    lines = []
    while not (line := process.stdout.readline()).startswith("press Ctrl-C"):
        assert line, process.stderr.read() if process.stderr else ""
        lines.append(line)
    return lines


def _token_status(base_url: str, tin: str, key: str) -> int:
    form = f"grant_type=client_credentials&client_id={tin}&client_secret={key}"
    with urllib.request.urlopen(f"{base_url}/oauth/token", data=form.encode()) as answer:  # noqa: S310
        return answer.status


@pytest.mark.parametrize("source", ["--issuer-count", "--issuers"])
def test_the_service_serves_many_issuers_and_never_prints_their_keys(tmp_path, source):
    """`invoicing-async sandbox --issuer-count 3 --seed 7` writes the issuers' credentials
    to DIR/issuers.json (mode 0600, the same keys as sandbox_issuers(3, seed=7)) and says
    where; `--issuers FILE` (CSV here) serves a file's issuers. Each issuer gets a token;
    no key of theirs is printed."""
    if source == "--issuers":
        issuers = sandbox_issuers(3, seed=None)
        csv = tmp_path / "mine.csv"
        csv.write_text("".join(f"{t},{k}\n" for t, k in issuers.items()), encoding="utf-8")
        arguments = ["--issuers", str(csv)]
    else:
        issuers = sandbox_issuers(3, seed=7)
        arguments = ["--issuer-count", "3", "--seed", "7", "--out", str(tmp_path / "out")]
    with _serve(arguments, tmp_path) as process:
        try:
            banner = _banner(process)
            base_url = banner[0].split()[-1]
            [line] = [line for line in banner if line.startswith("issuers:")]
            assert "3 more" in line
            if source == "--issuer-count":
                path = Path(line.split()[-1])
                assert path == (tmp_path / "out" / "issuers.json").resolve()
                assert oct(path.stat().st_mode & 0o777) == "0o600"
                assert json.loads(path.read_text(encoding="utf-8")) == issuers
            for tin, key in issuers.items():
                assert _token_status(base_url, tin, key) == 200
        finally:
            process.send_signal(signal.SIGINT)
            stdout, _ = process.communicate(timeout=30)
    assert process.returncode == 0
    assert "3 token request(s)" in stdout
    assert not any(key in "".join(banner) + stdout for key in issuers.values())


def test_the_service_refuses_a_bad_issuers_file_before_starting(tmp_path):
    """A malformed --issuers file, one that names something that is no TIN, or
    --issuers-out without --issuer-count, stops the command with a one-line usage error
    (exit status 2) that quotes no key."""
    bad = tmp_path / "bad.csv"
    bad.write_text("900000005,secret-one,extra\n", encoding="utf-8")
    no_tin = tmp_path / "no-tin.csv"
    no_tin.write_text("not-a-tin,secret-one\n", encoding="utf-8")
    for arguments in (
        ["--issuers", str(bad)],
        ["--issuers", str(no_tin)],
        ["--issuers-out", str(tmp_path / "x")],
    ):
        with _serve(arguments, tmp_path) as process:
            try:
                stdout, stderr = process.communicate(timeout=60)
            finally:
                if process.poll() is None:  # it started serving: a failure, not a hang
                    process.kill()
        assert process.returncode == 2, stderr
        assert "secret" not in stdout + stderr
        assert "Traceback" not in stderr
    assert not (tmp_path / "x").exists()
