"""``IssuerPool``: one process, many issuers.

The pool owns what every issuer shares — one connection pool, one provider key, one
token cache — and hands each document to the issuer it names (``Issuer.Vat``, or the
``issuer=`` given): that issuer's channel, made on first use from the credentials
resolver and closed when idle (:mod:`._issuers`). Batches mix issuers and isolate them
from each other (:mod:`._batch`); operations run through :meth:`IssuerPool.client`, an
:class:`~invoicing_async.InvoicingClient` of one issuer on the pool's connections. A
:class:`~invoicing_async.Deferral` and an outbox worker serve every issuer of the pool.
This module only wires and documents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _protocol as proto
from ._batch import BatchOptions
from ._client import borrowed_client
from ._documents import DEFAULT_MAX_DOCUMENT_SIZE, SendOptions, document_key
from ._engine import Engine, Settings, attach
from ._issuers import Issuers
from ._retry import RetryPolicy
from ._transport import DEFAULT_MAX_RESPONSE_SIZE

if TYPE_CHECKING:
    import concurrent.futures
    import datetime as dt
    import os
    import ssl
    from collections.abc import (
        AsyncGenerator,
        AsyncIterable,
        Awaitable,
        Callable,
        Iterable,
        Mapping,
    )
    from types import TracebackType

    from ._client import InvoicingClient
    from ._documents import Document
    from ._ledger._sqlite_ledger import Ledger
    from ._models import DocumentResult
    from ._outcomes import BatchProgress, Outcome
    from ._pgp import ProviderKey
    from ._tokencache import TokenCache
    from ._transport import ClientSession, Transport

__all__ = ["IssuerPool"]


class IssuerPool:
    """Submit invoices for any number of issuers from one process.

    ::

        async with IssuerPool(base_url, {"094019245": KEY_1, "800123456": KEY_2},
                              provider_key=key) as pool:
            result = await pool.submit_secure(invoice)          # to invoice's Issuer.Vat
            outcomes = await pool.submit_many(invoices_of_many_issuers)
            client = await pool.client("094019245")             # its operations
            await client.cancel_delivery_note(mark)

    :param base_url: the environment's base URL (as :class:`InvoicingClient`'s).
    :param credentials: each issuer's API key by its TIN: a mapping, or a callable
        ``tin -> api_key`` (async or not; ``None``: unknown) so keys can live in a vault
        or the application's database. Called once per issuer while its channel is kept,
        once for any number of concurrent first uses; its failures and unknown issuers
        are an :class:`~invoicing_async.UnknownIssuerError` for that issuer's documents,
        before any request, remembered for ``forget_unknown`` seconds.
    :param max_issuers: idle issuers whose channel (and token) is kept at most; the
        least recently used go first. Issuers with documents in flight always stay.
    :param idle: seconds an idle issuer's channel is kept.
    :param forget_unknown: seconds an unknown issuer stays unknown before the resolver is
        asked again.
    :param recheck_refused: an issuer whose credentials the provider refused is resolved
        again at its next use, at most once every this many seconds: a key rotated in
        the resolver's store (or a credentials file) is used without a restart. See also
        :meth:`reload_credentials`.

    The other keywords are :class:`InvoicingClient`'s and apply to every issuer:
    ``token_cache`` (a :class:`~invoicing_async.TokenCache` with a
    :class:`~invoicing_async.redis.RedisTokenStore` gives a fleet one token per issuer),
    ``limit`` (connections shared by all issuers), ``retry`` (single calls).

    .. versionadded:: 0.4.0
    .. versionchanged:: 0.5.0 ``recheck_refused``; refused credentials are resolved again.
    """

    def __init__(
        self,
        base_url: str,
        credentials: Mapping[str, str] | Callable[[str], Awaitable[str | None] | str | None],
        *,
        provider_key: ProviderKey | None = None,
        session: ClientSession | None = None,
        token_cache: TokenCache | None = None,
        limit: int = 100,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        timeout: float | None = 120.0,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        ssl: ssl.SSLContext | None = None,
        encrypt_executor: concurrent.futures.Executor | None = None,
        token_attempts: int = 4,
        retry: RetryPolicy | None = None,
        max_document_size: int = DEFAULT_MAX_DOCUMENT_SIZE,
        max_issuers: int = 10_000,
        idle: float = 900.0,
        forget_unknown: float = 60.0,
        recheck_refused: float = 30.0,
    ) -> None:
        base_url = proto.check_base_url(base_url)
        settings = Settings(
            provider_key=provider_key,
            session=session,
            token_cache=token_cache,
            limit=limit,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            timeout=timeout,
            max_response_size=max_response_size,
            ssl=ssl,
            encrypt_executor=encrypt_executor,
            token_attempts=token_attempts,
            retry=retry,
            max_document_size=max_document_size,
        )

        def issuers(transport: Transport, cache: TokenCache) -> Issuers:
            return Issuers(
                base_url,
                credentials,
                transport=transport,
                token_cache=cache,
                token_retry=settings.token_retry(),
                max_issuers=max_issuers,
                idle=idle,
                forget_unknown=forget_unknown,
                recheck_refused=recheck_refused,
            )

        self._base_url = base_url
        self._engine = engine = Engine.of(settings, issuers)
        issuer_channels = engine.channels
        assert isinstance(issuer_channels, Issuers)  # noqa: S101  (made just above)
        self._issuers = issuer_channels
        attach(self, engine)

    def __repr__(self) -> str:
        return f"<IssuerPool {self._base_url} issuers={len(self._issuers)}>"

    async def __aenter__(self) -> IssuerPool:
        await self._engine.transport.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connections (if the pool created them) and forget every issuer."""
        self._issuers.clear()
        await self._engine.transport.close()

    @property
    def base_url(self) -> str:
        """The environment's base URL."""
        return self._base_url

    @property
    def token_cache(self) -> TokenCache:
        """The token cache every issuer's tokens live in."""
        return self._engine.cache

    @property
    def issuers_kept(self) -> int:
        """Issuers whose channel is kept now (in use, or idle and not yet closed)."""
        return len(self._issuers)

    def reload_credentials(self) -> None:
        """Ask the credentials resolver again about every issuer, at its next use.

        For keys rotated while the pool runs (an operator's ``SIGHUP``): an issuer whose
        key changed gets a new channel with it; documents in flight finish with the old.

        .. versionadded:: 0.5.0
        """
        self._issuers.reload()

    async def client(self, issuer: str) -> InvoicingClient:
        """An :class:`~invoicing_async.InvoicingClient` of ``issuer``, for its operations.

        It sends on the pool's connections, token cache and provider key; closing it
        closes nothing (the pool owns the connections).

        :raises UnknownIssuerError: there are no credentials for ``issuer``.
        """
        channel = await self._issuers.acquire(issuer)
        self._issuers.release(channel)
        return borrowed_client(self._engine, channel)

    # --- documents ---------------------------------------------------------------------

    async def submit_secure(
        self,
        document: Document,
        *,
        issuer: str | None = None,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> DocumentResult:
        """:meth:`InvoicingClient.submit_secure` for the issuer ``document`` names.

        :param issuer: the issuer's TIN, when the document does not name it in
            ``Issuer.Vat`` (or to override it).
        :raises UnknownIssuerError: no credentials for the issuer; nothing was sent.
        """
        options = SendOptions(encrypted=True, send_method=send_method, time_stamp=time_stamp)
        return await self._engine.submit(
            document, options, issuer=issuer, retry=retry, timeout=timeout
        )

    async def submit_json(
        self,
        document: Document,
        *,
        issuer: str | None = None,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> DocumentResult:
        """:meth:`submit_secure` to ``/Invoice/json``, unencrypted."""
        options = SendOptions(encrypted=False, send_method=send_method, time_stamp=time_stamp)
        return await self._engine.submit(
            document, options, issuer=issuer, retry=retry, timeout=timeout
        )

    # --- bulk ----------------------------------------------------------------------------

    async def submit_many(
        self,
        documents: Iterable[Any] | AsyncIterable[Any],
        *,
        concurrency: int = 32,
        encrypted: bool = True,
        ledger: str | os.PathLike[str] | Ledger | None = None,
        retry: RetryPolicy | None = None,
        deadline: float | None = None,
        on_progress: Callable[[BatchProgress], object] | None = None,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        key: Callable[[Any], str] = document_key,
        max_document_size: int | None = None,
    ) -> list[Outcome]:
        """:meth:`InvoicingClient.submit_many` over documents of any issuers.

        Each document goes to the issuer it names (``Issuer.Vat``, or a
        :class:`~invoicing_async.Submission`'s ``issuer``); one without credentials ends
        ``not_sent`` with an :class:`~invoicing_async.UnknownIssuerError`, before any
        request. Issuers are isolated from each other and served fairly (see
        :doc:`/guides/many-issuers`).
        """
        options = BatchOptions(
            concurrency=concurrency,
            send=SendOptions(encrypted=encrypted, send_method=send_method, time_stamp=time_stamp),
            retry=retry or RetryPolicy(),
            deadline=deadline,
            on_progress=on_progress,
            key=key,
            max_document_size=max_document_size,
        )
        return await self._engine.collect(documents, options, ledger)

    def submit_stream(
        self,
        documents: Iterable[Any] | AsyncIterable[Any],
        *,
        concurrency: int = 32,
        encrypted: bool = True,
        ledger: str | os.PathLike[str] | Ledger | None = None,
        retry: RetryPolicy | None = None,
        deadline: float | None = None,
        on_progress: Callable[[BatchProgress], object] | None = None,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        key: Callable[[Any], str] = document_key,
        max_document_size: int | None = None,
    ) -> AsyncGenerator[Outcome, None]:
        """:meth:`InvoicingClient.submit_stream` over documents of any issuers."""
        options = BatchOptions(
            concurrency=concurrency,
            send=SendOptions(encrypted=encrypted, send_method=send_method, time_stamp=time_stamp),
            retry=retry or RetryPolicy(),
            deadline=deadline,
            on_progress=on_progress,
            key=key,
            max_document_size=max_document_size,
        )
        return self._engine.stream(documents, options, ledger)
