"""The sending machinery behind a client or a pool: the one place that builds its parts.

An :class:`Engine` is what an :class:`~invoicing_async.InvoicingClient` (one issuer) or
an :class:`~invoicing_async.IssuerPool` (many) is made of besides its typed methods
(:mod:`.surface`). :meth:`Engine.of` builds the parts and the engine holds them, as
attributes the callers take what they need from: the :attr:`~Engine.transport`, the
:attr:`~Engine.preparer` (the provider key, and where encryption runs), the shared
:attr:`~Engine.cache` of tokens, and the issuers' :attr:`~Engine.channels` (a
:class:`~invoicing_async._io.channel.Channels`: one issuer for a client, a resolver's
for a pool); with them the default :class:`~invoicing_async.RetryPolicy` of single
calls. A :class:`~invoicing_async.Deferral`, an outbox worker and the command reach it
with :func:`~.surface.engine_of`; what it does with the parts:

* :meth:`Engine.submit`: a single call, a document's record or its error raised;
* :meth:`Engine.deliver`: send one prepared document to its issuer within a deadline and
  say its outcome (a single call, a sale);
* :meth:`Engine.batch`: a batch of documents over a journal (a ledger's, opened by the
  surface; an outbox's claims);
* :meth:`Engine.signer`: what signs an offline QR url with the issuer's API key, which
  never leaves its channel.

It knows no ledger and no outbox: what records a batch is handed to it as a journal.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, TypedDict

from invoicing_async._core import calls
from invoicing_async._core.errors import InvoicingError
from invoicing_async._core.outcomes import OutcomeStatus
from invoicing_async._core.retry import RetryPolicy
from invoicing_async._doc.document import (
    DEFAULT_MAX_DOCUMENT_SIZE,
    Prepared,
    describe,
    identify,
    size_limit,
)
from invoicing_async._doc.prepare import Preparer
from invoicing_async._io.tokencache import TokenCache
from invoicing_async._io.transport import DEFAULT_MAX_RESPONSE_SIZE, Transport
from invoicing_async._io.waits import within
from invoicing_async._obs.hooks import install as install_telemetry
from invoicing_async._send.batch import Batch
from invoicing_async._send.delivery import Delivery

if TYPE_CHECKING:
    import concurrent.futures
    import ssl
    from collections.abc import Awaitable, Callable

    from invoicing_async._core.models import DocumentResult
    from invoicing_async._core.outcomes import Outcome
    from invoicing_async._doc.document import Document, SendOptions
    from invoicing_async._doc.pgp import ProviderKey
    from invoicing_async._io.channel import Channels
    from invoicing_async._io.mock import MockTransport
    from invoicing_async._io.transport import ClientSession
    from invoicing_async._send.batch import BatchOptions
    from invoicing_async._send.journal import Journal

__all__ = ["ClientOptions", "Engine"]


class ClientOptions(TypedDict, total=False):
    """The keywords a client and a pool take, all optional.

    :class:`~invoicing_async.InvoicingClient`'s and :class:`~invoicing_async.IssuerPool`'s
    (and their blocking twins'): their meaning and defaults are documented on
    :class:`~invoicing_async.InvoicingClient`.

    .. versionadded:: 0.5.0
    """

    provider_key: ProviderKey | None
    session: ClientSession | None
    token_cache: TokenCache | None
    limit: int
    connect_timeout: float
    read_timeout: float
    timeout: float | None
    max_response_size: int
    ssl: ssl.SSLContext | None
    encrypt_executor: concurrent.futures.Executor | None
    token_attempts: int
    retry: RetryPolicy | None
    max_document_size: int
    transport: MockTransport | None


#: The keywords a client and a pool take.
_OPTIONS = ClientOptions.__optional_keys__


class Engine:
    """The sending machinery of a client or a pool, as the layers above them use it."""

    def __init__(
        self,
        base_url: str,
        transport: Transport,
        preparer: Preparer,
        *,
        retry: RetryPolicy,
        cache: TokenCache,
        channels: Channels,
        owns_transport: bool = True,
    ) -> None:
        self.base_url = base_url
        #: The connection pool every issuer shares.
        self.transport = transport
        #: Serialises and encrypts documents (the provider key, where encryption runs).
        self.preparer = preparer
        self._retry = retry
        #: The token cache every issuer shares.
        self.cache = cache
        #: Which channel sends a document of an issuer.
        self.channels = channels
        self._owns_transport = owns_transport
        # Its calls' spans and metrics: the OpenTelemetry hook, installed once per process.
        install_telemetry()

    @classmethod
    def of(
        cls,
        base_url: str,
        options: ClientOptions,
        channels: Callable[[Transport, TokenCache, RetryPolicy], Channels],
    ) -> Engine:
        """An engine with the transport, preparer and cache ``options`` describe.

        Every default of the constructors' keywords is decided here. Its channels are
        what ``channels(transport, cache, token_retry)`` makes.

        :raises TypeError: a keyword that is not an option (a typo).
        """
        unknown = options.keys() - _OPTIONS
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
        transport: Transport | None = options.get("transport")  # a test's MockTransport
        if transport is None:
            transport = Transport(
                session=options.get("session"),
                limit=options.get("limit", 100),
                connect_timeout=options.get("connect_timeout", 10.0),
                read_timeout=options.get("read_timeout", 60.0),
                total_timeout=options.get("timeout", 120.0),
                max_response_size=options.get("max_response_size", DEFAULT_MAX_RESPONSE_SIZE),
                ssl=options.get("ssl"),
            )
        elif options.get("session") is not None:
            raise TypeError("give a transport or a session, not both")
        cache = options.get("token_cache") or TokenCache()
        preparer = Preparer(
            options.get("provider_key"),
            options.get("encrypt_executor"),
            size_limit(options.get("max_document_size", DEFAULT_MAX_DOCUMENT_SIZE)),
        )
        attempts = max(1, options.get("token_attempts", 4))
        token_retry = RetryPolicy(max_attempts=attempts, base_delay=0.1, max_delay=2.0)
        return cls(
            base_url,
            transport,
            preparer,
            retry=options.get("retry") or RetryPolicy(),
            cache=cache,
            channels=channels(transport, cache, token_retry),
        )

    def __repr__(self) -> str:
        return f"<Engine {self.channels!r}>"

    def sharing(self, channels: Channels) -> Engine:
        """An engine of ``channels`` on this one's connections, cache and key.

        It closes nothing (a pool's client: the pool owns the connections).
        """
        return Engine(
            self.base_url,
            self.transport,
            self.preparer,
            retry=self._retry,
            cache=self.cache,
            channels=channels,
            owns_transport=False,
        )

    async def close(self) -> None:
        """Close the connections, if this engine made them."""
        if self._owns_transport:
            await self.transport.close()

    def policy(self, retry: RetryPolicy | None, *, batch: bool) -> RetryPolicy:
        """The retry policy of a call: its own, else the default (one place decides).

        A single call (and an operation) defaults to the client's ``retry``; a batch to
        ``RetryPolicy()``, whose budget and breaker are the batch's.
        """
        if retry is not None:
            return retry
        return RetryPolicy() if batch else self._retry

    async def submit(
        self,
        document: Document,
        options: SendOptions,
        *,
        issuer: str | None = None,
        retry: RetryPolicy | None,
        timeout: float | None,
    ) -> DocumentResult:
        """A single call: ``document``'s record, or its error raised.

        :param issuer: overrides the issuer the document names (``Issuer.Vat``).
        """
        refused = None
        try:
            key, identity = identify(document)
        except InvoicingError as exc:  # ambiguous: raised as the call's answer, unsent
            (key, identity), refused = describe(document), exc
        if issuer is not None:
            identity = identity._replace(issuer=issuer)
        fields = calls.document_fields(key, identity.issuer)
        with calls.calling("invoicing.submit", "document", fields):
            if refused is not None:
                raise refused
            self.transport.ensure_usable()
            deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
            body = await self.preparer.prepare_one(document, encrypted=options.encrypted)
            if isinstance(body, InvoicingError):
                raise body
            prepared = Prepared(key, identity, body[0], options, plain=body[1])
            outcome = await self.deliver(prepared, deadline=deadline, policy=retry)
            if outcome.status is OutcomeStatus.ACCEPTED and outcome.result is not None:
                return outcome.result
            assert outcome.error is not None  # noqa: S101  (every other outcome carries one)
            raise outcome.error

    async def deliver(
        self,
        prepared: Prepared,
        *,
        deadline: float | None,
        policy: RetryPolicy | None = None,
        sale: bool = False,
        grace: float | None = None,
    ) -> Outcome:
        """Send one prepared document to its issuer until its outcome is known.

        :param deadline: loop time by which it must end (``None``: the policy's bounds).
        :param policy: the retry policy (default: the single calls').
        :param sale: a sale: the answers that end a sale end the attempts at once.
        :param grace: a safety net past ``deadline``: a step outside the delivery's own
            bounds that hangs is cut off then, and the outcome is what it was.
        :raises UnknownIssuerError: no credentials for the document's issuer.
        """
        channel = await self.channels.acquire(prepared.identity.issuer)
        delivery = Delivery(
            prepared.key,
            0,
            prepared.identity,
            policy=self.policy(policy, batch=False),
            deadline=deadline,
            sale=sale,
        )
        run = delivery.run(channel, prepared)
        try:
            if grace is None or deadline is None:
                return await run
            return await _cut_off(delivery, run, deadline, grace)
        finally:
            self.channels.release(channel)

    def batch(self, options: BatchOptions, journal: Journal | None) -> Batch:
        """A batch of documents over ``journal`` (``None``: no journal)."""
        preparer, limit = self.preparer, options.max_document_size
        if limit is not None and limit != preparer.max_document_size:  # the batch's own
            preparer = Preparer(preparer.provider_key, preparer.executor, size_limit(limit))
        return Batch(preparer, self.transport, self.channels, options, journal)

    async def signer(self, issuer: str | None) -> Callable[[str], str]:
        """What signs an offline QR url with ``issuer``'s API key (see :mod:`~invoicing_async.qr`).

        The key stays in the issuer's channel: the signer is its method.

        :raises UnknownIssuerError: no credentials for ``issuer``.
        """
        channel = await self.channels.acquire(issuer)
        self.channels.release(channel)
        return channel.offline_signature


async def _cut_off(
    delivery: Delivery, run: Awaitable[Outcome], deadline: float, grace: float
) -> Outcome:
    """``run``'s outcome, or the delivery's as it is when ``grace`` past ``deadline``."""
    loop = asyncio.get_running_loop()
    task = await within(run, max(0.0, deadline - loop.time()) + grace)
    return task.result() if task is not None else delivery.interrupted()
