"""The façade tests and demos use: :class:`Sandbox`, its lifecycle and its test-facing API.

It wires three parts together and adds nothing of their logic: the provider state
(:mod:`._provider`, which decides every answer), the fault plan (:mod:`._faults`) and
the aiohttp server (:mod:`._app`), plus the key pair the server decrypts with.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._app import Server
from ._dayfacade import DayFacade
from ._environ import client_variables
from ._faults import DEFAULT_RANDOM_KINDS, Fault, FaultPlan
from ._gate import Gate
from ._inspect import Inspector
from ._keys import Algorithm, KeyMaterial, cached_keypair, key_material
from ._operations import Operations
from ._pos import verify_pos_signature
from ._provider import Provider
from ._records import (
    CommittedDocument,
    IssuerStats,
    RequestRecord,
    SandboxEnvironment,
    SandboxStats,
)
from ._samples import SANDBOX_CLIENT_ID
from ._tls import ServerCertificate, default_names

if TYPE_CHECKING:
    import os
    import ssl
    from collections.abc import AsyncIterator, Callable, Iterable, Mapping
    from types import TracebackType

    from invoicing_async import ProviderKey

    from ._faults import Queue
    from ._issuers import IssuerKey
    from ._operations import ReSeeded, StoredUpload
    from ._outage import OutageMode
    from ._pos import PosSignature

__all__ = ["Sandbox"]


class Sandbox(DayFacade):
    """An embedded fake of the e-invoicing provider, for tests, demos and benchmarks.

    ::

        async with Sandbox() as sb:
            async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret,
                                       provider_key=sb.provider_key) as client:
                result = await client.submit_secure(invoice)
            assert sb.committed[document_key(invoice)].record == result

    :param host: interface to listen on (loopback by default; ``0.0.0.0`` for every one,
        as a service in a container, which wants ``tls=True`` too).
    :param port: TCP port; 0 picks a free one (read it from :attr:`port`).
    :param tls: serve HTTPS with a certificate made at start by a private CA; clients
        trust it with :meth:`client_ssl_context` or the file :meth:`write_ca_certificate`
        writes (the client sends an API key in clear to loopback only).
    :param tls_names: the host names and addresses the certificate is valid for (default:
        loopback and this machine's names; add a docker-compose service name here).
    :param public_host: the host written into :attr:`url` and the base URLs (default:
        the listen host, or the first of ``tls_names`` / ``127.0.0.1`` when listening on
        every interface).
    :param client_id: the default environment's client id (TIN): by default the issuer
        of :func:`~invoicing_sandbox.sample_invoice`, so samples are accepted as
        they come. The other environments draw theirs.
    :param key_algorithm: ``rsa3072``, ``rsa2048`` or ``cv25519``; the key is generated
        once per process and shared.
    :param key_file: an armored *secret* key to use instead.
    :param expires_in: access token lifetime in seconds.
    :param refresh_expires_in: refresh token lifetime in seconds.
    :param seed: makes credentials and records reproducible (marks still follow commits).
    :param clock: the clock token expiry and IRIS payments' validity are read against
        (pass the fake clock a :class:`~invoicing_async.TokenCache` uses, to test expiry
        without waiting).
    :param domain: the public domain written into result records and QR urls (a
        record's ``url`` is ``{domain}/v/{signature}``). By default the sandbox's own
        address and the environment (``{url}/test``), so ``GET {record.url}/pdf``
        fetches the document's PDF from the sandbox.
    :param environments: environment names; the first is the default.
    :param max_body_size: largest request body accepted, and largest document once
        decrypted and decompressed (413 beyond, never a 400 "cannot be decrypted").
    :param max_in_flight: document requests the provider processes at once; beyond
        that it answers 429 (``Retry-After: 0``) without processing. ``None``: no limit.
    :param duplicate_detection: ``False`` commits a re-sent document again (a new mark,
        201, ``commits`` counting up) like a provider without duplicate detection: for
        tests of ``RetryPolicy(resend_ambiguous=False)``.
    :param token_propagation_delay: seconds a new access token is unknown (401) after issue.
    :param revoke_tokens_on_issue: issuing a token revokes the client's earlier ones.
    :param require_fields: refuse (400, with the provider's list of field errors) a
        document missing a field the provider requires: ``Issuer.Vat``, ``Series``,
        ``Number``, ``DateIssued``, ``InvoiceTypeCode``, ``Details`` (not empty) and
        ``Summaries`` with ``TotalNetAmount``, ``TotalVATAmount`` and
        ``TotalGrossValue``. The rules (and those of the amounts) are the client's
        :func:`invoicing_async.documents.check`: a document is refused for its errors,
        names read in any case. ``False`` checks fields only when present (and the
        issuer's VAT against the API key only when there is one): for tests that send odd
        documents on purpose.
    :param issuers: more issuers of the default environment, ``{tin: api_key}`` (see
        :meth:`add_issuers`, and :func:`~invoicing_sandbox.sandbox_issuers` to make many).
    :param page_size: documents a page of ``GET /api/invoice/getdocuments/…`` holds.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.3.0 required fields are enforced; ``require_fields``.
    .. versionchanged:: 0.4.0 ``issuers``.
    .. versionchanged:: 0.5.0 documents read in any case, the ``EL`` prefix of the
       issuer's VAT number accepted, the provider's names (``InvoiceTypeCode``,
       ``TotalNetAmount``, ``TotalVATAmount``) and the client's rules of amounts.
    .. versionchanged:: 0.5.0 credits, delayed card payments, IRIS payments, the listing
       of issued documents and their PDFs; ``page_size``; ``domain`` is by default the
       sandbox's own address.
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
        domain: str | None = None,
        environments: Iterable[str] = ("test", "production"),
        max_body_size: int = 16 * 1024 * 1024,
        duplicate_detection: bool = True,
        max_in_flight: int | None = None,
        tls: bool = False,
        tls_names: Iterable[str] | None = None,
        public_host: str | None = None,
        client_id: str = SANDBOX_CLIENT_ID,
        token_propagation_delay: float = 0.0,
        revoke_tokens_on_issue: bool = False,
        require_fields: bool = True,
        issuers: Mapping[str, str] | None = None,
        page_size: int = 100,
    ) -> None:
        salt = secrets.token_hex(16) if seed is None else f"seed:{seed}"
        self._provider = Provider(
            environments=environments,
            rng=random.Random(salt),
            seeded=seed is not None,
            salt=salt,
            clock=clock,
            expires_in=expires_in,
            refresh_expires_in=refresh_expires_in,
            domain=domain,
            duplicate_detection=duplicate_detection,
            default_client_id=client_id,
            token_propagation_delay=token_propagation_delay,
            revoke_tokens_on_issue=revoke_tokens_on_issue,
            require_fields=require_fields,
        )
        if issuers:
            self._provider.add_issuers(None, issuers)
        self._operations = Operations(self._provider, salt, clock=clock, page_size=page_size)
        self._host = host
        self._tls_names = list(tls_names) if tls_names is not None else default_names(host)
        wildcard = host in ("", "0.0.0.0", "::")  # noqa: S104  (comparing, not binding)
        default_public = (self._tls_names[0] if tls_names else "127.0.0.1") if wildcard else host
        self._public_host = public_host or default_public
        self._certificate: ServerCertificate | None = None
        self._tls = tls
        self._requested_port = port
        self._key_algorithm: Algorithm = key_algorithm
        self._key_file = key_file
        self._max_body_size = max_body_size
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._max_in_flight = max_in_flight
        self._faults = FaultPlan()
        self._gate = Gate()
        self._token_gate = Gate()
        self._material: KeyMaterial | None = None
        self._server: Server | None = None
        self._port = 0

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "not running"
        return f"<Sandbox {where} environments={','.join(self.environments)}>"

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
        if self._server is not None:
            raise RuntimeError("the sandbox is already running")
        if self._material is None:
            # Generating an RSA key takes about a second (once per process): not on the loop.
            self._material = await asyncio.to_thread(self._load_key)
        context = None
        if self._tls:
            if self._certificate is None:
                self._certificate = ServerCertificate(self._tls_names)
            context = self._certificate.server_context()
        inspector = Inspector(
            self._provider, self._material.public_armored, operations=self._operations
        )
        server = Server(
            self._provider,
            self._faults,
            self._material.decryptor,
            max_body_size=self._max_body_size,
            max_in_flight=self._max_in_flight,
            inspector=inspector,
            operations=self._operations,
            gate=self._gate,
            token_gate=self._token_gate,
        )
        self._port = await server.start(self._host, self._requested_port, context)
        self._server = server
        inspector.base_url = self._provider.public_url = self.url

    async def close(self) -> None:
        """Stop listening and wait for requests in flight.

        Hung, delayed and trickling responses are ended first, so this takes
        milliseconds; a request whose client already left still completes its commit.
        """
        server, self._server = self._server, None
        if server is not None:
            await server.close()

    async def run_forever(self, stop: asyncio.Event | None = None) -> None:
        """Serve until ``stop`` is set (or the task is cancelled), for the command line."""
        started_here = self._server is None
        if started_here:
            await self.start()
        try:
            await (stop or asyncio.Event()).wait()
        finally:
            if started_here:
                await self.close()

    def _load_key(self) -> KeyMaterial:
        if self._material is not None:
            return self._material
        if self._key_file is not None:
            return key_material(Path(self._key_file).read_text(encoding="ascii"), None)
        pair = cached_keypair(self._key_algorithm)
        return key_material(pair.private_armored, pair.public_armored)

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
        host = f"[{self._public_host}]" if ":" in self._public_host else self._public_host
        return f"{'https' if self._tls else 'http'}://{host}:{self._port}"

    @property
    def inspect_url(self) -> str:
        """Where the read-only endpoints are: ``{url}/_sandbox`` (stats, documents …).

        .. versionadded:: 0.2.0
        """
        return f"{self.url}/_sandbox"

    @property
    def ca_certificate(self) -> str | None:
        """The PEM of the CA that signed the TLS certificate (``None`` without ``tls``).

        .. versionadded:: 0.2.0
        """
        self._running()
        return self._certificate.ca_pem if self._certificate is not None else None

    def write_ca_certificate(self, path: str | os.PathLike[str]) -> Path:
        """Write :attr:`ca_certificate` to ``path`` (for ``INVOICING_CA_FILE``) and return it.

        .. versionadded:: 0.2.0
        """
        self._running()
        if self._certificate is None:
            raise RuntimeError("the sandbox serves plain http: start it with tls=True")
        return self._certificate.write_ca(path)

    def client_ssl_context(self) -> ssl.SSLContext | None:
        """A verifying context trusting this sandbox, for ``InvoicingClient(ssl=...)``.

        ``None`` without ``tls`` (plain http on loopback needs none).

        .. versionadded:: 0.2.0
        """
        self._running()
        return self._certificate.client_context() if self._certificate is not None else None

    @property
    def base_url(self) -> str:
        """The default environment's base URL."""
        return self.environment().base_url

    @property
    def client_id(self) -> str:
        """The default environment's client id (the issuer's TIN)."""
        return self._provider.environment().default_client

    @property
    def client_secret(self) -> str:
        """The default environment's API key."""
        env = self._provider.environment()
        return env.clients[env.default_client]

    @property
    def environments(self) -> tuple[str, ...]:
        """Environment names, the default first."""
        return tuple(self._provider.environments)

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

    def client_variables(self, directory: str | os.PathLike[str]) -> dict[str, str]:
        """The ``INVOICING_*`` variables ``InvoicingClient.from_env()`` needs to reach it.

        Writes the provider key (``provider.asc``) and, with TLS, the CA (``ca.pem``)
        into ``directory``; the key is pinned by its fingerprint.

        .. versionadded:: 0.3.0
        """
        return client_variables(self, Path(directory))

    def environment(
        self, name: str | None = None, *, client_id: str | None = None
    ) -> SandboxEnvironment:
        """Base URL and credentials of environment ``name`` (default: the first)."""
        env = self._provider.environment(name)
        client = client_id or env.default_client
        if client not in env.clients:
            raise KeyError(f"no client {client!r} in environment {env.name!r}")
        return SandboxEnvironment(env.name, f"{self.url}/{env.name}", client, env.clients[client])

    def add_client(self, environment: str, client_id: str, client_secret: str) -> None:
        """Register another issuer (TIN and API key) in ``environment``."""
        self._provider.add_client(environment, client_id, client_secret)

    def add_issuers(self, issuers: Mapping[str, str], *, environment: str | None = None) -> None:
        """Register many issuers at once, ``{tin: api_key}``, in ``environment`` (the default).

        All or none: a TIN or key that is not a non-empty string, or a TIN registered
        with another key, is an error naming the TIN (never the key), and nothing of
        ``issuers`` is added. Cheap: 10,000 issuers are a dict of 10,000 entries, and a
        request finds its issuer by a look-up (see :func:`~invoicing_sandbox.sandbox_issuers`).
        A client of one of them: ``environment(client_id=tin)`` has its base URL and key.

        .. versionadded:: 0.4.0
        """
        self._provider.add_issuers(environment, issuers)

    @property
    def committed(self) -> Mapping[str, CommittedDocument]:
        """Every committed document by identity (read-only, live).

        Identities are scoped per environment and client; should two scopes hold the same
        identity, this shows the first and :meth:`committed_in` tells them apart.
        """
        return self._provider.committed

    def committed_in(
        self, environment: str | None = None, client_id: str | None = None
    ) -> dict[str, CommittedDocument]:
        """The documents committed by one client of one environment, by identity."""
        env = self._provider.environment(environment)
        return self._provider.committed_in(env.name, client_id or env.default_client)

    @property
    def commit_count(self) -> int:
        """Commits since start or :meth:`reset`.

        With duplicate detection (the default) this is the number of documents held.
        """
        return self._provider.commit_count

    @property
    def requests(self) -> list[RequestRecord]:
        """Every finished request, in order of arrival.

        .. versionadded:: 0.1.0
        """
        return self._provider.requests

    @property
    def stats(self) -> SandboxStats:
        """Counters of token requests and submissions by outcome (and by issuer)."""
        return self._provider.stats

    def issuer_stats(self, tin: str, *, environment: str | None = None) -> IssuerStats:
        """One issuer's counters: requests, token requests, commits, 429s of its throttle.

        All zero for an issuer that sent nothing (live otherwise, like :attr:`stats`). A
        test of many issuers says by counts what the others met: "no 429, every document
        committed on its first request", whatever the machine's speed.

        .. versionadded:: 0.4.0
        """
        counts = self._provider.stats.by_issuer.get(self._issuer(tin, environment))
        return counts if counts is not None else IssuerStats()

    def requests_of(self, tin: str, *, environment: str | None = None) -> list[RequestRecord]:
        """Every finished request of one issuer (see :attr:`RequestRecord.issuer`), in order.

        .. versionadded:: 0.4.0
        """
        name, _ = self._issuer(tin, environment)
        return [r for r in self.requests if r.issuer == tin and r.environment == name]

    @property
    def uploads(self) -> list[StoredUpload]:
        """Every file stored by ``/Invoice/File`` and ``/media/upload``, in order.

        .. versionadded:: 0.3.0
        """
        return self._operations.uploads

    @property
    def pos_signatures(self) -> list[PosSignature]:
        """Every POS signature issued, in order (one per distinct signed data).

        .. versionadded:: 0.3.0
        """
        return self._operations.pos_signatures

    @property
    def reseeds(self) -> list[ReSeeded]:
        """Every B2G document forwarded again by ``/B2GInvoice/ReSeedInvoice``, in order.

        .. versionadded:: 0.3.0
        """
        return self._operations.reseeds

    def pos_public_key(self, issuer_tin: str) -> bytes:
        """The raw Ed25519 public key the sandbox signs ``issuer_tin``'s POS data with.

        .. versionadded:: 0.3.0
        """
        return self._operations.pos_public_key(issuer_tin)

    def verify_pos_signature(
        self, issuer_tin: str, payload: Mapping[str, Any], signature: str
    ) -> bool:
        """Whether ``signature`` (base64) is this sandbox's signature of ``payload``.

        .. versionadded:: 0.3.0
        """
        return verify_pos_signature(self.pos_public_key(issuer_tin), payload, signature)

    # --- what tests control ---------------------------------------------------------------

    def reset(self) -> None:
        """Forget documents, requests, stats, tokens and faults (credentials stay).

        Credits, payments and IRIS payments go too (and their settling on their own).

        Issuers revoked or throttled are served normally again.

        Marks keep increasing: a mark is never handed out twice by one sandbox.
        """
        self._provider.reset()
        self._operations.reset()
        self._faults.clear()
        self._gate.release()
        self._token_gate.release()

    def script(
        self, *faults: Fault | None, issuer: str | None = None, environment: str | None = None
    ) -> None:
        """Queue faults for the next document requests, in arrival order (``None``: none).

        With ``issuer`` (a TIN of ``environment``), for the next requests of that issuer
        only: they take these before the shared ones, the other issuers never do.

        .. versionchanged:: 0.4.0 ``issuer`` and ``environment``.
        """
        self._script("documents", faults, issuer, environment)

    def script_operation(
        self, *faults: Fault | None, issuer: str | None = None, environment: str | None = None
    ) -> None:
        """Queue faults for the next requests to the other operations, in arrival order.

        Cancellations, POS signatures, ReSeed, GetLastStatus, uploads, credits, payments,
        IRIS payments, the listing of documents and their PDFs take these (not
        :meth:`script`'s); ``None`` lets a request through unfaulted. ``issuer``: as for
        :meth:`script`.

        .. versionadded:: 0.3.0
        .. versionchanged:: 0.4.0 ``issuer`` and ``environment``.
        """
        self._script("operations", faults, issuer, environment)

    def script_token(
        self,
        *faults: Fault | None,
        refresh_only: bool = False,
        issuer: str | None = None,
        environment: str | None = None,
    ) -> None:
        """Queue faults for the next ``/oauth/token`` requests (or refresh grants only).

        ``issuer``: for the token requests naming that ``client_id`` only, as for
        :meth:`script`.

        .. versionchanged:: 0.4.0 ``issuer`` and ``environment``.
        """
        self._script("refresh" if refresh_only else "tokens", faults, issuer, environment)

    def _script(
        self,
        queue: Queue,
        faults: tuple[Fault | None, ...],
        issuer: str | None,
        environment: str | None,
    ) -> None:
        key = self._issuer(issuer, environment) if issuer is not None else None
        self._faults.queue(queue, key).extend(faults)

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

    def poison(self, identity: str, fault: Fault | None) -> None:
        """Make one document fail the same way on every attempt (``None``: cure it).

        A poison document: every request for ``identity`` (the document's key, such as
        ``id:…``) gets ``fault`` (``Fault.status(500)``, ``Fault.reset()`` …), however
        many times it is retried, until cured (or :meth:`reset`). Other documents are
        served as usual; a fault scripted with :meth:`script` still comes first. Count
        its requests in :attr:`requests` (``identity``).

        .. versionadded:: 0.4.0
        """
        self._faults.poison(identity, fault)

    def set_latency(self, seconds: float, *, jitter: float = 0.0) -> None:
        """Delay every document request by ``seconds``, plus up to ``jitter`` at random.

        Like a real provider's processing time (``0`` turns it off); stays through
        :meth:`reset`.

        .. versionadded:: 0.2.0
        """
        self._faults.set_latency(seconds, jitter)

    async def set_outage(self, mode: OutageMode | None, *, seconds: float | None = None) -> None:
        """Start an outage of the provider (``None``: end it), for ``seconds`` if given.

        ``"refuse"``: every connection is refused (open ones are dropped); the port stays
        reserved, so the provider comes back on the same URL. ``"hang"``: requests are
        accepted and never answered (nothing is processed) until the client gives up or
        the outage ends. ``"503"``: every request is answered 503 at once, unprocessed.
        The provider's routes (the token endpoint too) are affected; ``/_sandbox/``
        stays up except while connections are refused. Over HTTP:
        ``POST /_sandbox/outage?mode=hang&seconds=30`` (``refuse`` needs ``seconds``).

        .. versionadded:: 0.3.0
        """
        self._running()
        assert self._server is not None  # noqa: S101  (_running says so)
        await self._server.outage.set(mode, seconds=seconds)

    @contextlib.asynccontextmanager
    async def outage(
        self, mode: OutageMode, *, seconds: float | None = None
    ) -> AsyncIterator[Sandbox]:
        """An outage for the block: ``async with sandbox.outage("hang"): ...``.

        See :meth:`set_outage`; the provider is back to normal when the block ends.

        .. versionadded:: 0.3.0
        """
        await self.set_outage(mode, seconds=seconds)
        try:
            yield self
        finally:
            if self._server is not None:
                await self.set_outage(None)

    @property
    def outage_mode(self) -> OutageMode | None:
        """The outage under way (``"refuse"``, ``"hang"``, ``"503"``), or ``None``.

        .. versionadded:: 0.3.0
        """
        return self._server.outage.mode if self._server is not None else None

    @property
    def outage_hits(self) -> int:
        """Requests an outage met so far (answered 503, or held while hanging).

        .. versionadded:: 0.3.0
        """
        return self._server.outage.hits if self._server is not None else 0

    def hold(
        self, *, after: int = 0, issuer: str | None = None, environment: str | None = None
    ) -> None:
        """Hold document requests before processing them, until :meth:`release`.

        The next ``after`` requests pass; the following ones wait (nothing committed),
        counted by :attr:`held`. For tests that must act while a batch is certainly
        still running (an interrupt, a kill, a restart): a gate, not a latency that hopes
        to be long enough. :meth:`reset` and :meth:`close` release them too.

        With ``issuer`` (a TIN of ``environment``), only that issuer's requests (``after``
        of them pass), held on arrival, before they are read; the others go on. Holding
        again while requests are held keeps them held.

        .. versionadded:: 0.3.0
        .. versionchanged:: 0.4.0 ``issuer`` and ``environment``.
        """
        key = self._issuer(issuer, environment) if issuer is not None else None
        self._gate.hold(after, key)

    def release(self, *, issuer: str | None = None, environment: str | None = None) -> None:
        """Let the held document requests go on (and commit), and the later ones pass.

        Every held request, or only ``issuer``'s (held by ``hold(issuer=...)``).

        .. versionadded:: 0.3.0
        .. versionchanged:: 0.4.0 ``issuer`` and ``environment``.
        """
        self._gate.release(self._issuer(issuer, environment) if issuer is not None else None)

    @property
    def held(self) -> int:
        """Document requests waiting at the gate (see :meth:`hold`), of every issuer.

        .. versionadded:: 0.3.0
        """
        return self._gate.held

    def held_of(self, tin: str, *, environment: str | None = None) -> int:
        """Document requests of one issuer waiting at its gate (``hold(issuer=tin)``).

        .. versionadded:: 0.4.0
        """
        return self._gate.held_of(self._issuer(tin, environment))

    async def wait_held(
        self, count: int = 1, *, issuer: str | None = None, environment: str | None = None
    ) -> None:
        """Return once at least ``count`` document requests are held (see :meth:`hold`).

        With ``issuer``: held at that issuer's gate.

        .. versionadded:: 0.3.0
        .. versionchanged:: 0.4.0 ``issuer`` and ``environment``.
        """
        key = self._issuer(issuer, environment) if issuer is not None else None
        await self._gate.wait_held(count, key)

    def hold_tokens(self, *, after: int = 0) -> None:
        """Hold ``/oauth/token`` requests before granting anything, until :meth:`release_tokens`.

        The next ``after`` requests pass; the following ones wait (no token issued),
        counted by :attr:`tokens_held`: a test acts while a client certainly waits for
        its token, so that none of its document requests has left. :meth:`reset` and
        :meth:`close` release them too.

        .. versionadded:: 0.5.0
        """
        self._token_gate.hold(after)

    def release_tokens(self) -> None:
        """Let the held token requests go on (and be granted), and the later ones pass.

        .. versionadded:: 0.5.0
        """
        self._token_gate.release()

    @property
    def tokens_held(self) -> int:
        """Token requests waiting at their gate (see :meth:`hold_tokens`).

        .. versionadded:: 0.5.0
        """
        return self._token_gate.held

    async def wait_tokens_held(self, count: int = 1) -> None:
        """Return once at least ``count`` token requests are held (see :meth:`hold_tokens`).

        .. versionadded:: 0.5.0
        """
        await self._token_gate.wait_held(count)

    # --- one issuer's faults, while the others go on ---------------------------------------

    def revoke_issuer(self, tin: str, *, environment: str | None = None) -> None:
        """Revoke an issuer's API key: its credentials are refused from now on.

        As a provider refuses a revoked key, like a wrong one and without saying why:
        its token requests get the answer of wrong credentials (``400 invalid_request``,
        a refresh ``401 invalid_client``), its refresh tokens are dropped, its access
        tokens revoked (``401``), and every call is refused. The other issuers are not
        affected. Logged as the fault ``revoked``.

        .. versionadded:: 0.4.0
        """
        self._provider.revoke_issuer(environment, tin)

    def rotate_issuer(self, tin: str, api_key: str, *, environment: str | None = None) -> None:
        """Replace an issuer's API key, as its owner rotating it in the provider's portal.

        From now on the old key is refused like a wrong one (token requests get the
        answer of wrong credentials), the tokens issued to it are revoked (``401``), and
        ``api_key`` is accepted. The other issuers are not affected.

        .. versionadded:: 0.5.0
        """
        self._provider.rotate_issuer(environment, tin, api_key)

    def restore_issuer(self, tin: str, *, environment: str | None = None) -> None:
        """Accept a revoked issuer's API key again; its revoked tokens stay revoked.

        .. versionadded:: 0.4.0
        """
        self._provider.restore_issuer(environment, tin)

    def throttle_issuer(
        self,
        tin: str,
        *,
        retry_after: int | str = 1,
        rate: float | None = None,
        environment: str | None = None,
    ) -> None:
        """Answer an issuer's document and operation requests ``429`` with ``Retry-After``.

        Every request (``rate=None``), or those above ``rate`` a second (a token bucket
        on the sandbox's ``clock``, in bursts of up to ``max(1, rate)``). Refused at
        arrival, before anything is read or processed, with ``Retry-After: retry_after``
        (seconds, or an HTTP date); token requests are served. The other issuers are
        served normally; :attr:`IssuerStats.throttled
        <invoicing_sandbox.IssuerStats.throttled>` counts the 429s, logged as the fault
        ``throttled``. Throttling again replaces the earlier throttle.

        .. versionadded:: 0.4.0
        """
        self._provider.throttle_issuer(environment, tin, retry_after=retry_after, rate=rate)

    def unthrottle_issuer(self, tin: str, *, environment: str | None = None) -> None:
        """Serve a throttled issuer normally again.

        .. versionadded:: 0.4.0
        """
        self._provider.unthrottle_issuer(environment, tin)

    def _issuer(self, tin: str, environment: str | None) -> IssuerKey:
        return self._provider.issuer(environment, tin)

    def set_token_lag(self, seconds: float, *, nodes: int = 2) -> None:
        """Be a provider of ``nodes`` nodes that learn a new token ``seconds`` late.

        Requests (token grants included) alternate between the nodes; a token is known
        at once to the node that issued it and to the others ``seconds`` later, like a
        replicated token store. With ``nodes=1`` a new token is unknown everywhere for
        that long (as ``token_propagation_delay``). Stays through :meth:`reset`.

        .. versionadded:: 0.3.0
        """
        self._provider.tokens.replicate(nodes, seconds)

    def set_token_revocation(self, after: float | None) -> None:
        """Revoke every access token issued from now on ``after`` seconds after its issue.

        ``None`` turns it off. Stays through :meth:`reset`.

        .. versionadded:: 0.3.0
        """
        self._provider.tokens.revoke_after(after)

    def expire_tokens(self) -> None:
        """Make every access token issued so far expired (to test 401 recovery)."""
        self._provider.expire_tokens()

    def revoke_refresh_tokens(self) -> None:
        """Invalidate every refresh token issued so far."""
        self._provider.revoke_refresh_tokens()

    @property
    def _inflight(self) -> set[asyncio.Task[Any]]:
        """Requests being handled: what a test waits on for the sandbox to settle."""
        return self._server.inflight if self._server is not None else set()

    def _running(self) -> None:
        if self._server is None:
            raise RuntimeError("the sandbox is not running: use `async with Sandbox()`")
