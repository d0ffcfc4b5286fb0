"""The embedded provider: an aiohttp.web application on the running event loop.

One server holds every environment as a path prefix (``/test``, ``/production``), each
with its own credentials and its own tokens, like the real service's separate hosts.
State lives in plain dictionaries touched only from the event loop, so the checks that
make duplicate detection exact (look up, then commit) run without an ``await`` between
them and need no lock. Decryption, the one CPU-heavy step, runs in a small thread pool:
``cryptography`` releases the GIL for the RSA operation, so it scales with cores and the
loop stays free for the clients that usually share it.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import datetime as dt
import functools
import itertools
import os
import random
import re
import secrets
import time
import types
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from aiohttp import web

from invoicing_async._crypto import ProviderKey

from . import _faults
from ._faults import DEFAULT_RANDOM_KINDS, Fault, FaultPlan, Reply
from ._openpgp import (
    Algorithm,
    Decryptor,
    NotIntegrityProtectedError,
    OpenPGPError,
    SandboxKeyPair,
    generate_keypair,
)
from ._records import (
    NO_STORE,
    CommittedDocument,
    RequestRecord,
    SandboxEnvironment,
    SandboxStats,
    build_record,
    check_document,
    document_identity,
    dumps,
    error_reply,
    issuer_vat,
    oauth_error,
    parse_document,
    random_tin,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Mapping
    from types import TracebackType

    _Handler = Callable[[web.Request, "_Env", "_Exchange"], Awaitable[web.StreamResponse]]
    _AiohttpHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]

__all__ = ["Sandbox", "cached_keypair", "serve"]

_ENV_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_FIRST_MARK = 400001000000001
_JSON_TYPES = frozenset({"application/json", "text/json"})
_PGP_TYPES = frozenset({"application/pgp-encrypted", "application/octet-stream"})


@functools.cache
def cached_keypair(algorithm: Algorithm = "rsa3072") -> SandboxKeyPair:
    """A key pair per algorithm, generated once per process (RSA-3072 takes ~1 s).

    Every sandbox in a process shares it unless given ``key_file``; tests need a
    provider key, not a fresh one each.
    """
    return generate_keypair(algorithm)


@attrs.frozen
class _KeyMaterial:
    decryptor: Decryptor
    public_armored: str
    provider_key: ProviderKey


@functools.lru_cache(maxsize=8)
def _key_material(private_armored: str, public_armored: str | None) -> _KeyMaterial:
    """Parse a secret key once: the decryptor and the public half, shared by sandboxes."""
    decryptor = Decryptor(private_armored)
    if public_armored is None:
        public_armored = _public_half(private_armored)
    return _KeyMaterial(decryptor, public_armored, ProviderKey.from_armored(public_armored))


def _public_half(private_armored: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PGPy's own and cryptography's deprecation notes
        import pgpy  # noqa: PLC0415  (only for a key_file: the public half is not in it)

        key, _ = pgpy.PGPKey.from_blob(private_armored)
        if key.is_public:
            raise ValueError("key_file must hold a secret key (the sandbox decrypts with it)")
        return str(key.pubkey)


@attrs.define
class _Token:
    environment: str
    client_id: str
    expires_at: float


@attrs.define
class _Env:
    name: str
    clients: dict[str, str]  # client_id -> API key
    default_client: str


@attrs.define
class _Exchange:
    """What the journal records about one request, filled in as it is handled."""

    seq: int
    environment: str | None
    method: str
    path: str
    query: dict[str, str]
    status: int | None = None
    fault: str | None = None
    identity: str | None = None
    client_id: str | None = None
    attempt: int | None = None
    dropped: str = "drop"

    def record(self) -> RequestRecord:
        return RequestRecord(
            seq=self.seq,
            environment=self.environment,
            method=self.method,
            path=self.path,
            status=self.status,
            fault=self.fault,
            identity=self.identity,
            client_id=self.client_id,
            attempt=self.attempt,
            query=self.query,
        )


def _seeded_secret(rng: random.Random) -> str:
    """An API key shaped like ``secrets.token_urlsafe(32)``, reproducible from the seed."""
    return base64.urlsafe_b64encode(rng.randbytes(32)).rstrip(b"=").decode("ascii")


class Sandbox:
    """An embedded fake of the e-invoicing provider, for tests, demos and benchmarks.

    ::

        async with Sandbox() as sb:
            async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret,
                                       provider_key=sb.provider_key) as client:
                result = await client.submit_secure(invoice)
            assert sb.committed[document_key(invoice)].record == result

    :param host: interface to listen on (loopback by default).
    :param port: TCP port; 0 picks a free one (read it from :attr:`port`).
    :param key_algorithm: ``rsa3072``, ``rsa2048`` or ``cv25519``; the key is generated
        once per process and shared.
    :param key_file: an armored *secret* key to use instead.
    :param expires_in: access token lifetime in seconds.
    :param refresh_expires_in: refresh token lifetime in seconds.
    :param seed: makes credentials and records reproducible (marks still follow commits).
    :param clock: the clock token expiry is read against (pass the fake clock a
        :class:`~invoicing_async.TokenCache` uses, to test expiry without waiting).
    :param domain: the public domain written into result records and QR urls.
    :param environments: environment names; the first is the default.
    :param max_body_size: largest request body accepted (413 beyond).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        key_algorithm: Algorithm = "rsa3072",
        key_file: str | os.PathLike[str] | None = None,
        expires_in: float = 900,
        refresh_expires_in: float = 7 * 24 * 3600,
        seed: int | str | None = None,
        clock: Callable[[], float] = time.monotonic,
        domain: str = "https://sandbox.invoicing.invalid",
        environments: Iterable[str] = ("test", "production"),
        max_body_size: int = 16 * 1024 * 1024,
    ) -> None:
        names = list(environments)
        if not names or len(set(names)) != len(names):
            raise ValueError("environments must be distinct names, at least one")
        for name in names:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"environment name {name!r} is not a simple path segment")
        if expires_in <= 0 or refresh_expires_in <= 0:
            raise ValueError("token lifetimes must be positive")
        self._host = host
        self._requested_port = port
        self._key_algorithm: Algorithm = key_algorithm
        self._key_file = key_file
        self._expires_in = expires_in
        self._refresh_expires_in = refresh_expires_in
        self._clock = clock
        self._domain = domain.rstrip("/")
        self._max_body_size = max_body_size
        self._salt = secrets.token_hex(16) if seed is None else f"seed:{seed}"
        rng = random.Random(self._salt)
        self._envs: dict[str, _Env] = {}
        used: set[str] = set()
        for name in names:
            tin = random_tin(rng)
            while tin in used:
                tin = random_tin(rng)
            used.add(tin)
            secret = secrets.token_urlsafe(32) if seed is None else _seeded_secret(rng)
            self._envs[name] = _Env(name, {tin: secret}, tin)
        self._default = names[0]
        self._marks = itertools.count(_FIRST_MARK)
        self._faults = FaultPlan()
        self._material: _KeyMaterial | None = None
        self._runner: web.AppRunner | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._stopping = asyncio.Event()  # set by close(): ends hangs, latency, trickles
        self._inflight: set[asyncio.Task[Any]] = set()
        self._port = 0
        self._init_state()

    def _init_state(self) -> None:
        self._access: dict[str, _Token] = {}
        self._refresh: dict[str, _Token] = {}
        self._store: dict[tuple[str, str, str], CommittedDocument] = {}
        self._record_bodies: dict[tuple[str, str, str], bytes] = {}
        self._by_identity: dict[str, CommittedDocument] = {}
        self._by_mark: dict[tuple[str, str, int], tuple[str, str, str]] = {}
        self._attempts: dict[tuple[str, str, str], int] = {}
        self._journal: list[RequestRecord] = []
        self._seq = itertools.count(1)
        self._stats = SandboxStats()
        self._commit_count = 0
        self._faults.clear()

    def __repr__(self) -> str:
        where = self.url if self._runner is not None else "not running"
        return f"<Sandbox {where} environments={','.join(self._envs)}>"

    # --- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Sandbox:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Load the key and start listening (on the running loop)."""
        if self._runner is not None:
            raise RuntimeError("the sandbox is already running")
        if self._material is None:
            # Generating an RSA key takes about a second (once per process): not on the loop.
            self._material = await asyncio.to_thread(self._load_key)
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=self._max_body_size)
        for path, handler, document in (
            ("/{env}/oauth/token", self._token, False),
            ("/{env}/Invoice/secure", self._secure, True),
            ("/{env}/Invoice/json", self._json, True),
            ("/{env}/Invoice/cancelDeliveryNote", self._cancel, False),
            ("/{tail:.*}", self._not_found, False),
        ):
            app.router.add_route("*", path, self._route(handler, document=document))
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=min(8, os.cpu_count() or 2), thread_name_prefix="invoicing-sandbox"
        )
        runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=2.0,
            # Explicit although it is aiohttp's default: a client that disconnects must
            # not cancel the commit of a document it already sent.
            handler_cancellation=False,
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, self._host, self._requested_port).start()
        except BaseException:
            await runner.cleanup()
            self._executor.shutdown()
            raise
        self._port = int(runner.addresses[0][1])
        self._runner = runner

    async def close(self) -> None:
        """Stop listening and wait for requests in flight.

        Hung, delayed and trickling responses are ended first, so this takes
        milliseconds; a request whose client already left still completes its commit.
        """
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._stopping.set()
        await runner.cleanup()
        if self._inflight:
            # Handlers of connections the client closed: aiohttp no longer tracks them.
            _, pending = await asyncio.wait(set(self._inflight), timeout=5.0)
            for task in pending:  # pragma: no cover - a handler stuck despite _stopping
                task.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    async def run_forever(self, stop: asyncio.Event | None = None) -> None:
        """Serve until ``stop`` is set (or the task is cancelled), for the command line."""
        started_here = self._runner is None
        if started_here:
            await self.start()
        try:
            await (stop or asyncio.Event()).wait()
        finally:
            if started_here:
                await self.close()

    def _load_key(self) -> _KeyMaterial:
        if self._material is not None:
            return self._material
        if self._key_file is not None:
            return _key_material(Path(self._key_file).read_text(encoding="ascii"), None)
        pair = cached_keypair(self._key_algorithm)
        return _key_material(pair.private_armored, pair.public_armored)

    # --- what tests read ---------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port listened on."""
        self._running()
        return self._port

    @property
    def url(self) -> str:
        """The server's root URL (environments are path prefixes below it)."""
        self._running()
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}"

    @property
    def base_url(self) -> str:
        """The default environment's base URL."""
        return self.environment().base_url

    @property
    def client_id(self) -> str:
        """The default environment's client id (the issuer's TIN)."""
        return self._envs[self._default].default_client

    @property
    def client_secret(self) -> str:
        """The default environment's API key."""
        env = self._envs[self._default]
        return env.clients[env.default_client]

    @property
    def environments(self) -> tuple[str, ...]:
        """Environment names, the default first."""
        return tuple(self._envs)

    @property
    def provider_key(self) -> ProviderKey:
        """The sandbox's public key, ready for ``InvoicingClient(provider_key=...)``."""
        return self._load_key().provider_key

    @property
    def public_key_armored(self) -> str:
        """The sandbox's public key as ASCII armor (for gpg, sq, or a key file)."""
        return self._load_key().public_armored

    def write_public_key(self, path: str | os.PathLike[str]) -> Path:
        """Write the armored public key to ``path`` and return it."""
        target = Path(path)
        target.write_text(self.public_key_armored, encoding="ascii")
        return target

    def environment(
        self, name: str | None = None, *, client_id: str | None = None
    ) -> SandboxEnvironment:
        """Base URL and credentials of environment ``name`` (default: the first)."""
        env = self._env(name)
        client = client_id or env.default_client
        if client not in env.clients:
            raise KeyError(f"no client {client!r} in environment {env.name!r}")
        return SandboxEnvironment(env.name, f"{self.url}/{env.name}", client, env.clients[client])

    def add_client(self, environment: str, client_id: str, client_secret: str) -> None:
        """Register another issuer (TIN and API key) in ``environment``."""
        if not client_id or not client_secret:
            raise ValueError("client_id and client_secret are required")
        env = self._env(environment)
        if env.clients.get(client_id, client_secret) != client_secret:
            raise ValueError(f"client {client_id!r} already exists with another API key")
        env.clients[client_id] = client_secret

    @property
    def committed(self) -> Mapping[str, CommittedDocument]:
        """Every committed document by identity (read-only, live).

        Identities are scoped per environment and client; should two scopes hold the same
        identity, this shows the first and :meth:`committed_in` tells them apart.
        """
        return types.MappingProxyType(self._by_identity)

    def committed_in(
        self, environment: str | None = None, client_id: str | None = None
    ) -> dict[str, CommittedDocument]:
        """The documents committed by one client of one environment, by identity."""
        env = self._env(environment)
        client = client_id or env.default_client
        return {
            identity: doc
            for (name, cid, identity), doc in self._store.items()
            if name == env.name and cid == client
        }

    @property
    def commit_count(self) -> int:
        """Commits since start or :meth:`reset` (equal to the number of documents held)."""
        return self._commit_count

    @property
    def journal(self) -> list[RequestRecord]:
        """Every finished request, in order of arrival."""
        return sorted(self._journal, key=lambda record: record.seq)

    @property
    def stats(self) -> SandboxStats:
        """Counters of token requests and submissions by outcome."""
        return self._stats

    # --- what tests control ---------------------------------------------------------------

    def reset(self) -> None:
        """Forget documents, journal, stats, tokens and faults (credentials stay).

        Marks keep increasing: a mark is never handed out twice by one sandbox.
        """
        self._init_state()

    def script(self, *faults: Fault | None) -> None:
        """Queue faults for the next document requests, in arrival order (``None``: none)."""
        self._faults.documents.extend(faults)

    def script_token(self, *faults: Fault | None) -> None:
        """Queue faults for the next ``/oauth/token`` requests."""
        self._faults.tokens.extend(faults)

    def random_faults(
        self,
        rate: float = 0.3,
        *,
        seed: int | str = 1,
        kinds: Iterable[Fault] = DEFAULT_RANDOM_KINDS,
        max_per_document: int = 3,
    ) -> None:
        """Inject faults at random into document requests (``rate=0`` turns them off).

        Whether attempt *n* of a document is faulted, and how, depends only on ``seed``,
        the document's identity and *n*: the same batch meets the same faults however
        its requests interleave. At most ``max_per_document`` attempts of a document are
        faulted, so a client that retries enough always succeeds. Scripted faults, when
        queued, come first.
        """
        self._faults.set_random(rate, seed, kinds, max_per_document)

    def expire_tokens(self) -> None:
        """Make every access token issued so far expired (to test 401 recovery)."""
        for token in self._access.values():
            token.expires_at = float("-inf")

    def revoke_refresh_tokens(self) -> None:
        """Invalidate every refresh token issued so far."""
        self._refresh.clear()

    # --- request plumbing -------------------------------------------------------------------

    def _running(self) -> None:
        if self._runner is None:
            raise RuntimeError("the sandbox is not running: use `async with Sandbox()`")

    def _env(self, name: str | None) -> _Env:
        env = self._envs.get(name or self._default)
        if env is None:
            raise KeyError(f"no environment {name!r}; have {', '.join(self._envs)}")
        return env

    def _route(self, handler: _Handler, *, document: bool = False) -> _AiohttpHandler:
        """Wrap ``handler`` with what every request gets: journal, stats, task tracking.

        Handler tasks are tracked because aiohttp forgets the task of a connection the
        client already closed: :meth:`close` waits for them, so every commit in flight
        completes and no task outlives the sandbox.
        """

        async def route(request: web.Request) -> web.StreamResponse:
            env = self._envs.get(request.match_info.get("env", ""))
            exchange = _Exchange(
                seq=next(self._seq),
                environment=env.name if env else None,
                method=request.method,
                path=request.path[len(env.name) + 1 :] if env else request.path,
                query=dict(request.query),
            )
            task = asyncio.current_task()
            if task is not None:
                self._inflight.add(task)
            try:
                if env is None:
                    return await self._send(request, self._unknown(request), None, exchange)
                return await handler(request, env, exchange)
            finally:
                self._journal.append(exchange.record())
                if document and env is not None:
                    outcome = exchange.status if exchange.status is not None else exchange.dropped
                    self._stats.submissions[outcome] += 1
                if task is not None:
                    self._inflight.discard(task)

        return route

    async def _before(
        self, request: web.Request, fault: Fault | None, exchange: _Exchange
    ) -> web.StreamResponse | None:
        """Apply a before-commit fault; a response means: stop here and send it."""
        if fault is None:
            return None
        exchange.fault = fault.name
        if not fault.before_commit:
            return None
        if fault.kind == "latency":
            await _faults.sleep_unless(fault.seconds, self._stopping)
            return None
        if fault.kind == "status":
            reply = _faults.status_reply(fault)
            exchange.status = reply.status
            return reply.response()
        if fault.kind == "reset":
            _faults.abort(request, rst=True)
            exchange.dropped = "reset"
        else:  # hang
            await _faults.hang(request, self._stopping)
        return web.Response(status=204)  # never reaches the client: the connection is gone

    async def _send(
        self, request: web.Request, reply: Reply, fault: Fault | None, exchange: _Exchange
    ) -> web.StreamResponse:
        response, exchange.status = await _faults.write_reply(request, reply, fault, self._stopping)
        return response

    def _authenticate(self, request: web.Request, env: _Env, exchange: _Exchange) -> Reply | None:
        """Check the bearer token and the API key; the 401 to send, or ``None``."""
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        challenge = (("WWW-Authenticate", 'Bearer error="invalid_token"'),)
        if scheme.lower() != "bearer" or not value.strip():
            return error_reply(
                401, "missing bearer token", headers=(("WWW-Authenticate", "Bearer"),)
            )
        token = self._access.get(value.strip())
        if token is None or token.environment != env.name:
            return error_reply(401, "the access token is not valid", headers=challenge)
        if self._clock() >= token.expires_at:
            return error_reply(401, "the access token has expired", headers=challenge)
        api_key = request.headers.get("APIKey", "").encode()
        if not secrets.compare_digest(api_key, env.clients.get(token.client_id, "").encode()):
            return error_reply(401, "the API key is missing or not valid")
        exchange.client_id = token.client_id
        return None

    def _unknown(self, request: web.Request) -> Reply:
        return error_reply(404, f"no such operation: {request.method} {request.path}"[:300])

    async def _not_found(
        self, request: web.Request, _env: _Env, exchange: _Exchange
    ) -> web.StreamResponse:
        return await self._send(request, self._unknown(request), None, exchange)

    # --- token endpoint --------------------------------------------------------------------

    async def _token(
        self, request: web.Request, env: _Env, exchange: _Exchange
    ) -> web.StreamResponse:
        self._stats.token_requests += 1
        _, fault = self._faults.take(self._faults.tokens)
        early = await self._before(request, fault, exchange)
        if early is not None:
            return early
        if request.method != "POST":
            reply = _METHOD_NOT_ALLOWED
        else:
            reply = self._grant(await request.post(), env, exchange)
        return await self._send(request, reply, fault, exchange)

    def _grant(self, form: Mapping[str, Any], env: _Env, exchange: _Exchange) -> Reply:
        """Issue tokens for a client-credentials or refresh grant, or refuse (400)."""
        grant = str(form.get("grant_type") or "")
        now = self._clock()
        if grant == "client_credentials":
            client_id = str(form.get("client_id") or "")
            secret = str(form.get("client_secret") or "").encode()
            if not client_id or not secret:
                return oauth_error("invalid_request", "client_id and client_secret are required")
            expected = env.clients.get(client_id)
            if expected is None or not secrets.compare_digest(secret, expected.encode()):
                return oauth_error("invalid_request", "invalid client credentials")
        elif grant == "refresh_token":
            self._stats.refresh_requests += 1
            presented = str(form.get("refresh_token") or "")
            old = self._refresh.get(presented)
            if old is None or old.environment != env.name or now >= old.expires_at:
                return oauth_error("invalid_grant", "the refresh token is invalid or expired")
            del self._refresh[presented]  # rotation: a refresh token is good once
            client_id = old.client_id
        elif not grant:
            return oauth_error("invalid_request", "grant_type is required")
        else:
            return oauth_error("unsupported_grant_type", f"grant_type {grant[:40]!r}")
        exchange.client_id = client_id
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self._access[access] = _Token(env.name, client_id, now + self._expires_in)
        self._refresh[refresh] = _Token(env.name, client_id, now + self._refresh_expires_in)
        expires_in = self._expires_in
        body = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": int(expires_in) if float(expires_in).is_integer() else expires_in,
            "refresh_token": refresh,
        }
        return Reply(200, dumps(body), headers=NO_STORE)

    # --- documents ------------------------------------------------------------------------

    async def _secure(
        self, request: web.Request, env: _Env, exchange: _Exchange
    ) -> web.StreamResponse:
        return await self._document(request, env, exchange, encrypted=True)

    async def _json(
        self, request: web.Request, env: _Env, exchange: _Exchange
    ) -> web.StreamResponse:
        return await self._document(request, env, exchange, encrypted=False)

    async def _document(
        self, request: web.Request, env: _Env, exchange: _Exchange, *, encrypted: bool
    ) -> web.StreamResponse:
        """One submission: scripted fault, checks, random fault, commit, response."""
        scripted, fault = self._faults.take(self._faults.documents)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            reply = error_reply(413, "the request body is too large")
            return await self._send(request, reply, fault, exchange)
        early = await self._before(request, fault, exchange)
        if early is not None:
            return early
        accepted = await self._accept(request, env, body, exchange, encrypted=encrypted)
        if isinstance(accepted, Reply):
            return await self._send(request, accepted, fault, exchange)
        document, plaintext, key = accepted
        if not scripted:
            fault = self._faults.random_fault(key[2], exchange.attempt or 1)
            early = await self._before(request, fault, exchange)
            if early is not None:
                return early
        reply = self._commit(key, document, plaintext, encrypted=encrypted)
        return await self._send(request, reply, fault, exchange)

    async def _accept(
        self,
        request: web.Request,
        env: _Env,
        body: bytes,
        exchange: _Exchange,
        *,
        encrypted: bool,
    ) -> Reply | tuple[dict[str, Any], bytes, tuple[str, str, str]]:
        """Authenticate, decrypt, parse and check: the document, or the refusal to send."""
        if request.method != "POST":
            return _METHOD_NOT_ALLOWED
        refusal = self._authenticate(request, env, exchange)
        if refusal is not None:
            return refusal
        client_id = exchange.client_id or ""
        media = request.content_type
        if encrypted and media not in _PGP_TYPES:
            return error_reply(415, "Content-Type must be application/pgp-encrypted")
        if not encrypted and media not in _JSON_TYPES and not media.endswith("+json"):
            return error_reply(415, "Content-Type must be application/json")
        plaintext = await self._decrypt(body) if encrypted else body
        if isinstance(plaintext, Reply):
            return plaintext
        document = parse_document(plaintext)
        if isinstance(document, Reply):
            return document
        vat = issuer_vat(document)
        if vat is not None and vat != client_id:
            return error_reply(401, "the issuer's VAT number does not match the API key")
        problems = check_document(document)
        if problems:
            return error_reply(
                400,
                "; ".join(f"{p.field}: {p.message}" for p in problems),
                errors=[{"field": p.field, "message": p.message} for p in problems],
            )
        key = (env.name, client_id, document_identity(document))
        exchange.identity = key[2]
        exchange.attempt = self._attempts[key] = self._attempts.get(key, 0) + 1
        return document, plaintext, key

    async def _decrypt(self, body: bytes) -> bytes | Reply:
        """Decrypt in the sandbox's threads (the RSA operation releases the GIL)."""
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._executor, self._load_key().decryptor.decrypt, body
            )
        except NotIntegrityProtectedError:
            return error_reply(400, "message is not integrity protected")
        except OpenPGPError as exc:
            return error_reply(400, f"the message cannot be decrypted: {exc}")

    def _commit(
        self,
        key: tuple[str, str, str],
        document: dict[str, Any],
        plaintext: bytes,
        *,
        encrypted: bool,
    ) -> Reply:
        """Commit a new document (201), or answer a known one with its record (409).

        No ``await`` here: the look-up and the commit are one step for the event loop.
        """
        known = self._record_bodies.get(key)
        if known is not None:
            return Reply(409, known)
        environment, client_id, identity = key
        mark = next(self._marks)
        record, record_body = build_record(
            document,
            identity=identity,
            mark=mark,
            domain=self._domain,
            salt=self._salt,
            now=dt.datetime.now(dt.timezone.utc),
        )
        committed = CommittedDocument(
            identity=identity,
            environment=environment,
            client_id=client_id,
            record=record,
            document=document,
            body=plaintext,
            encrypted=encrypted,
        )
        self._store[key] = committed
        self._record_bodies[key] = record_body
        self._by_identity.setdefault(identity, committed)
        self._by_mark[environment, client_id, mark] = key
        self._commit_count += 1
        return Reply(201, record_body)

    # --- cancellation ---------------------------------------------------------------------

    async def _cancel(
        self, request: web.Request, env: _Env, exchange: _Exchange
    ) -> web.StreamResponse:
        if request.method != "POST":
            reply = _METHOD_NOT_ALLOWED
        else:
            reply = self._authenticate(request, env, exchange) or self._cancellation(
                _mark_of(request.query.get("mark"), await request.read()), env, exchange
            )
        return await self._send(request, reply, None, exchange)

    def _cancellation(self, mark: int | Reply, env: _Env, exchange: _Exchange) -> Reply:
        """Cancel a delivery note at most once: the second request is a 409."""
        if isinstance(mark, Reply):
            return mark
        key = self._by_mark.get((env.name, exchange.client_id or "", mark))
        if key is None:
            return error_reply(404, f"no document with mark {mark}")
        exchange.identity = key[2]
        committed = self._store[key]
        if committed.cancellation_mark is not None:
            body = {
                "success": False,
                "message": "the document is already cancelled",
                "statusCode": "Conflict",
                "mark": mark,
                "cancellationMark": committed.cancellation_mark,
            }
            return Reply(409, dumps(body))
        cancellation = next(self._marks)
        updated = attrs.evolve(committed, cancellation_mark=cancellation)
        self._store[key] = updated
        if self._by_identity.get(key[2]) is committed:
            self._by_identity[key[2]] = updated
        body = {
            "success": True,
            "message": "the delivery note was cancelled",
            "statusCode": "Success",
            "mark": mark,
            "cancellationMark": cancellation,
        }
        return Reply(200, dumps(body))


_METHOD_NOT_ALLOWED = error_reply(405, "use POST", headers=(("Allow", "POST"),))


def _mark_of(query: str | None, body: bytes) -> int | Reply:
    """The mark to cancel, from the JSON body (``{"mark": …}``) or the query string."""
    mark: Any = query
    if body.strip():
        data = parse_document(body)
        if isinstance(data, Reply):
            return data
        mark = data.get("mark", mark)
    if isinstance(mark, str) and mark.strip().isdigit():
        mark = int(mark)
    if isinstance(mark, int) and not isinstance(mark, bool):
        return mark
    message = "an integer is required"
    return error_reply(400, f"mark: {message}", errors=[{"field": "mark", "message": message}])


async def serve(sandbox: Sandbox, stop: asyncio.Event) -> None:
    """Run ``sandbox`` in the foreground until ``stop`` is set (the command line's loop)."""
    await sandbox.run_forever(stop)
