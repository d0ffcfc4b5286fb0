"""What a client or a pool gives the layers above it: the named seam of deferrals, workers.

An :class:`Engine` is what an :class:`~invoicing_async.InvoicingClient` (one issuer) or
an :class:`~invoicing_async.IssuerPool` (many) is made of besides its typed methods: the
transport, the :class:`~._prepare.Preparer` (the provider key, and where encryption
runs), the default :class:`~invoicing_async.RetryPolicy` of single calls, the shared
:class:`~invoicing_async.TokenCache`, and the issuers' channels (:class:`Channels`: one
for a client, a resolver's for a pool). A :class:`~invoicing_async.Deferral`, an outbox
worker and the command use a client or a pool only through its engine
(:func:`engine_of`), and only through the methods below:

* :meth:`Engine.prepare`: a document's body, or why it cannot be sent;
* :meth:`Engine.deliver`: send one prepared document to its issuer within a deadline and
  say its outcome (a single call, a sale);
* :meth:`Engine.batch`: a batch of documents over a journal (a ledger, an outbox's
  claims);
* :meth:`Engine.signer`: what signs an offline QR url with the issuer's API key, which
  never leaves its channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import weakref
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from . import _telemetry as telemetry
from ._batch import Batch, collect
from ._channel import Channel
from ._delivery import Delivery
from ._documents import DEFAULT_MAX_DOCUMENT_SIZE, Prepared, describe, size_limit
from ._errors import InvoicingError
from ._ledger._sqlite_ledger import ledger_journal
from ._outcomes import OutcomeStatus
from ._prepare import Preparer
from ._retry import RetryPolicy
from ._tokencache import TokenCache
from ._transport import DEFAULT_MAX_RESPONSE_SIZE, ClientSession, Transport

if TYPE_CHECKING:
    import concurrent.futures
    import os
    import ssl
    from collections.abc import (
        AsyncGenerator,
        AsyncIterable,
        Awaitable,
        Callable,
        Iterable,
    )

    from ._batch import BatchOptions, Route
    from ._documents import Document, SendOptions
    from ._journal import Journal
    from ._ledger._sqlite_ledger import Ledger
    from ._models import DocumentResult
    from ._outcomes import Outcome
    from ._pgp import ProviderKey
    from ._prepare import Body

__all__ = ["Channels", "Engine", "OneIssuer", "Settings", "attach", "engine_of"]


class Channels(Protocol):
    """Which channel sends a document of an issuer (see :mod:`._issuers`)."""

    async def acquire(self, issuer: str | None) -> Channel:
        """The channel of ``issuer``, kept until :meth:`release`.

        ``None``: the document names no issuer.

        :raises UnknownIssuerError: there are no credentials for it.
        """

    def release(self, channel: Channel) -> None:
        """The caller is done with ``channel``."""


class OneIssuer:
    """A client's channels: its one channel, whatever issuer a document names.

    A document of another issuer is sent with the client's credentials, as it always
    was: the provider answers 401 when its VAT number does not match the API key.
    """

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    async def acquire(self, issuer: str | None) -> Channel:  # noqa: ARG002  (one issuer)
        """The client's channel."""
        return self.channel

    def release(self, channel: Channel) -> None:
        """Nothing to release."""


@attrs.frozen(kw_only=True)
class Settings:
    """How a client or a pool talks to the provider (their constructors' keywords)."""

    provider_key: ProviderKey | None = None
    session: ClientSession | None = None
    token_cache: TokenCache | None = None
    limit: int = 100
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    timeout: float | None = 120.0
    max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE
    ssl: ssl.SSLContext | None = None
    encrypt_executor: concurrent.futures.Executor | None = None
    token_attempts: int = 4
    retry: RetryPolicy | None = None
    max_document_size: int = attrs.field(default=DEFAULT_MAX_DOCUMENT_SIZE, converter=size_limit)

    def transport(self) -> Transport:
        """The transport these settings describe."""
        return Transport(
            session=self.session,
            limit=self.limit,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            total_timeout=self.timeout,
            max_response_size=self.max_response_size,
            ssl=self.ssl,
        )

    def token_retry(self) -> RetryPolicy:
        """How the token endpoint is retried."""
        return RetryPolicy(max_attempts=max(1, self.token_attempts), base_delay=0.1, max_delay=2.0)


class Engine:
    """The sending machinery of a client or a pool, as the layers above them use it."""

    def __init__(
        self,
        transport: Transport,
        preparer: Preparer,
        retry: RetryPolicy,
        cache: TokenCache,
        channels: Channels,
    ) -> None:
        self._transport = transport
        self._preparer = preparer
        self._retry = retry
        self._cache = cache
        self._channels = channels

    @classmethod
    def of(
        cls, settings: Settings, channels: Callable[[Transport, TokenCache], Channels]
    ) -> Engine:
        """An engine with the transport, preparer and cache ``settings`` describe.

        Its channels are what ``channels(transport, cache)`` makes.
        """
        transport = settings.transport()
        cache = settings.token_cache if settings.token_cache is not None else TokenCache()
        return cls(
            transport,
            Preparer(settings.provider_key, settings.encrypt_executor, settings.max_document_size),
            settings.retry if settings.retry is not None else RetryPolicy(),
            cache,
            channels(transport, cache),
        )

    def __repr__(self) -> str:
        return f"<Engine {self._channels!r}>"

    @property
    def transport(self) -> Transport:
        """The connection pool every issuer shares."""
        return self._transport

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy of single calls."""
        return self._retry

    @property
    def cache(self) -> TokenCache:
        """The token cache every issuer shares."""
        return self._cache

    @property
    def channels(self) -> Channels:
        """Which channel sends a document of an issuer."""
        return self._channels

    @property
    def preparer(self) -> Preparer:
        """Serialises and encrypts documents."""
        return self._preparer

    def ensure_usable(self) -> None:
        """Raise :class:`~invoicing_async.ClientStateError` if nothing can be sent."""
        self._transport.ensure_usable()

    async def prepare(self, document: Any, *, encrypted: bool) -> Body:
        """``(body, serialised document)``, or why the document cannot be sent."""
        return await self._preparer.prepare_one(document, encrypted=encrypted)

    @telemetry.traced("invoicing.submit")
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
        self.ensure_usable()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        key, identity = describe(document)
        if issuer is not None:
            identity = identity._replace(issuer=issuer)
        telemetry.describe(key, identity)
        body = await self.prepare(document, encrypted=options.encrypted)
        if isinstance(body, InvoicingError):
            raise body
        prepared = Prepared(key, identity, body[0], options, plain=body[1])
        outcome = await self.deliver(prepared, deadline=deadline, policy=retry)
        if outcome.status is OutcomeStatus.ACCEPTED and outcome.result is not None:
            return outcome.result
        assert outcome.error is not None  # noqa: S101  (every other outcome carries one)
        raise outcome.error

    async def collect(
        self,
        documents: Iterable[Any] | AsyncIterable[Any],
        options: BatchOptions,
        ledger: str | os.PathLike[str] | Ledger | None,
    ) -> list[Outcome]:
        """Every outcome of a batch, in input order (``submit_many``)."""
        if ledger is None:
            return await collect(self.batch(options, None), documents)
        self.ensure_usable()  # before the ledger is locked
        async with ledger_journal(ledger, resend_ambiguous=options.retry.resend_ambiguous) as j:
            return await collect(self.batch(options, j), documents)

    async def stream(
        self,
        documents: Iterable[Any] | AsyncIterable[Any],
        options: BatchOptions,
        ledger: str | os.PathLike[str] | Ledger | None,
    ) -> AsyncGenerator[Outcome, None]:
        """A batch's outcomes as they settle (``submit_stream``)."""
        async with contextlib.AsyncExitStack() as stack:
            journal = None
            if ledger is not None:
                self.ensure_usable()  # before the ledger is locked
                resend = options.retry.resend_ambiguous
                journal = await stack.enter_async_context(
                    ledger_journal(ledger, resend_ambiguous=resend)
                )
            run = self.batch(options, journal).run(documents)
            outcomes = await stack.enter_async_context(contextlib.aclosing(run))
            async for outcome in outcomes:
                yield outcome

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
        channel = await self._channels.acquire(prepared.identity.issuer)
        delivery = Delivery(
            prepared.key,
            0,
            prepared.identity,
            policy=policy or self._retry,
            deadline=deadline,
            sale=sale,
        )
        run = delivery.run(functools.partial(channel.send, prepared))
        try:
            if grace is None or deadline is None:
                return await run
            return await _cut_off(delivery, run, deadline, grace)
        finally:
            self._channels.release(channel)

    @property
    def limit(self) -> int:
        """The connection pool size (0: unlimited)."""
        return self._transport.limit

    @property
    def per_issuer(self) -> bool:
        """Whether documents go to the issuers they name (a pool), not one issuer."""
        return not isinstance(self._channels, OneIssuer)

    async def acquire(self, issuer: str | None) -> Channel:
        """The channel of ``issuer``'s documents (see :class:`Channels`)."""
        return await self._channels.acquire(issuer)

    def release(self, route: Route) -> None:
        """A batch no longer sends through ``route`` (a channel of this engine)."""
        assert isinstance(route, Channel)  # noqa: S101  (acquire gives channels)
        self._channels.release(route)

    def batch(self, options: BatchOptions, journal: Journal | None) -> Batch:
        """A batch of documents over ``journal`` (``None``: no journal)."""
        preparer, limit = self._preparer, options.max_document_size
        if limit is not None and limit != preparer.max_document_size:  # the batch's own
            preparer = Preparer(preparer.provider_key, preparer.executor, size_limit(limit))
        return Batch(preparer, self, options, journal)

    async def signer(self, issuer: str | None) -> Callable[[str], str]:
        """What signs an offline QR url with ``issuer``'s API key (see :mod:`~invoicing_async.qr`).

        The key stays in the issuer's channel: the signer is its method.

        :raises UnknownIssuerError: no credentials for ``issuer``.
        """
        channel = await self._channels.acquire(issuer)
        self._channels.release(channel)
        return channel.offline_signature


async def _cut_off(
    delivery: Delivery, run: Awaitable[Outcome], deadline: float, grace: float
) -> Outcome:
    """``run``'s outcome, or the delivery's as it is when ``grace`` past ``deadline``."""
    task = asyncio.ensure_future(run)
    loop = asyncio.get_running_loop()
    try:
        done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - loop.time()) + grace)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if done:
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return delivery.interrupted()


_ENGINES: weakref.WeakKeyDictionary[object, Engine] = weakref.WeakKeyDictionary()


def attach(owner: object, engine: Engine) -> None:
    """Make ``engine`` the one :func:`engine_of` finds for ``owner`` (a client, a pool)."""
    _ENGINES[owner] = engine


def engine_of(owner: object) -> Engine:
    """The engine of a client or a pool.

    :raises TypeError: ``owner`` is neither.
    """
    try:
        return _ENGINES[owner]
    except (KeyError, TypeError):
        raise TypeError(
            f"expected an InvoicingClient or an IssuerPool, not {type(owner).__name__}"
        ) from None
