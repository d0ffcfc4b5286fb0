"""``InvoicingClient``: the public façade.

The client owns the transport (unless the caller brought an aiohttp session) and wires
the layers a document goes down through, in one direction: it is identified
(:mod:`._documents`), prepared (:mod:`._prepare`), delivered (:mod:`._delivery`, driving
the decision core of :mod:`._decision`), each attempt sent by the issuer's
:class:`~._channel.Channel` (token, 401 policy, parsing) over the
:class:`~._transport.Transport`; many documents go through a :class:`~._batch.Batch`,
with a ledger's journal (:mod:`._ledger`) when one is given. The other operations run
through :mod:`._operations`. What the deferral, the outbox worker and the command use of
a client is its :class:`~._engine.Engine` (:func:`~._engine.engine_of`). This module only
wires and documents.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from . import _operations as ops
from . import _protocol as proto
from ._batch import BatchOptions
from ._channel import Channel
from ._documents import DEFAULT_MAX_DOCUMENT_SIZE, Document, SendOptions, document_key
from ._engine import Engine, OneIssuer, Settings, attach
from ._env import client_arguments
from ._retry import RetryPolicy
from ._transport import DEFAULT_MAX_RESPONSE_SIZE, ClientSession

if TYPE_CHECKING:
    import concurrent.futures
    import datetime as dt
    import ssl
    from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable, Mapping
    from types import TracebackType

    from ._ledger._sqlite_ledger import Ledger
    from ._models import AccessToken, DocumentResult
    from ._operations import OperationResult
    from ._outcomes import BatchProgress, Outcome
    from ._pgp import ProviderKey
    from ._safety import Safety
    from ._tokencache import TokenCache
    from ._transport import Transport

__all__ = ["InvoicingClient"]


class InvoicingClient:
    """An asyncio client for the provider's API.

    Use it as an async context manager (or call :meth:`close`)::

        async with InvoicingClient(base_url, tin, api_key, provider_key=key) as client:
            result = await client.submit_secure(invoice)

    :param base_url: the environment's base URL. ``https`` is required except on loopback.
    :param client_id: the issuer's tax id (TIN).
    :param client_secret: the API key; also sent as the ``APIKey`` header.
    :param provider_key: the provider's :class:`~invoicing_async.ProviderKey`, needed by
        :meth:`submit_secure`.
    :param session: an :class:`aiohttp.ClientSession` of yours; the client then does not
        close it.
    :param token_cache: a :class:`~invoicing_async.TokenCache` shared with other clients;
        by default each client has its own.
    :param limit: connection pool size (when the client creates its session).
    :param connect_timeout: seconds to connect; the wait for a free pool slot not counted.
    :param read_timeout: seconds without a byte from the provider.
    :param timeout: seconds for one whole request, or ``None``.
    :param max_response_size: largest response body read, in bytes.
    :param ssl: an :class:`ssl.SSLContext` trusting a private CA; verification is always on.
    :param encrypt_executor: where encryption runs: by default on the event loop, paced
        (a document over 32 KB in the loop's thread pool). A
        :class:`concurrent.futures.ProcessPoolExecutor` uses every core for bulk work.
    :param token_attempts: tries at the token endpoint on connection failures and 5xx.
    :param retry: the :class:`~invoicing_async.RetryPolicy` of single calls
        (:meth:`submit_secure`, :meth:`submit_json`) unless a call gives its own; by
        default ``RetryPolicy()``: up to 6 attempts of at most 30 s each, backing off up
        to 15 s (or as ``Retry-After`` asks, at most 120 s).
    :param max_document_size: the largest document sent, in bytes of its serialised JSON
        (or of the bytes given): a larger one is refused before it is encrypted, with
        :class:`~invoicing_async.DocumentTooLargeError` (a batch's outcome
        ``rejected``). Default: 10 MiB.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.4.0 ``max_document_size``.
    """

    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
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
    ) -> None:
        problem = _credentials_problem(client_id, client_secret)
        if problem is not None:
            del client_secret  # a traceback formatted with locals must not show it
            raise ValueError(problem)
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
        token_retry = settings.token_retry()

        def one_issuer(transport: Transport, cache: TokenCache) -> OneIssuer:
            channel = Channel(
                base_url,
                client_id,
                client_secret,
                transport=transport,
                token_cache=cache,
                token_retry=token_retry,
            )
            return OneIssuer(channel)

        engine = Engine.of(settings, one_issuer)
        channels = engine.channels
        assert isinstance(channels, OneIssuer)  # noqa: S101  (made just above)
        self._setup(engine, channels.channel, owns_transport=True)

    def _setup(self, engine: Engine, channel: Channel, *, owns_transport: bool) -> None:
        self._engine = engine
        self._channel = channel
        self._base_url = channel.base_url
        self._client_id = channel.client_id
        self._owns_transport = owns_transport
        attach(self, engine)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: Any) -> InvoicingClient:
        """A client configured by ``INVOICING_*`` variables, the same the command reads.

        ``INVOICING_BASE_URL``, ``INVOICING_CLIENT_ID`` and ``INVOICING_API_KEY`` (or
        ``INVOICING_API_KEY_FILE``) are required; ``INVOICING_PROVIDER_KEY`` (a key file,
        pinned by ``INVOICING_PROVIDER_FINGERPRINT``) and ``INVOICING_CA_FILE`` (a private
        CA, such as the sandbox's) are optional. ``options`` win over the variables.

        :raises ValueError: a required variable is missing, or a file cannot be read.
        :raises ProviderKeyError: the provider key cannot be used, or fails its pin.

        .. versionadded:: 0.2.0
        """
        args, settings = client_arguments(os.environ if environ is None else environ)
        return cls(*args, **{**settings, **options})

    def __repr__(self) -> str:
        # getattr: a traceback formatted with locals shows a client whose __init__ failed.
        base_url = getattr(self, "_base_url", "(not configured)")
        return f"<InvoicingClient {base_url} client_id={getattr(self, '_client_id', None)!r}>"

    async def __aenter__(self) -> InvoicingClient:
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
        """Close the HTTP session if the client created it.

        A client an :class:`~invoicing_async.IssuerPool` gave shares the pool's
        connections: closing it closes nothing (close the pool).
        """
        if self._owns_transport:
            await self._engine.transport.close()

    @property
    def base_url(self) -> str:
        """The environment's base URL."""
        return self._base_url

    @property
    def token_cache(self) -> TokenCache:
        """The token cache this client uses (shared or its own)."""
        return self._engine.cache

    @property
    def limit(self) -> int:
        """The connection pool size."""
        return self._engine.transport.limit

    @property
    def encrypt_executor(self) -> concurrent.futures.Executor | None:
        """Where documents are prepared (``None``: on the event loop, large ones in a thread)."""
        return self._engine.preparer.executor

    @property
    def provider_key(self) -> ProviderKey | None:
        """The provider key documents are encrypted to."""
        return self._engine.preparer.provider_key

    # --- documents ---------------------------------------------------------------------

    async def submit_secure(
        self,
        document: Document,
        *,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> DocumentResult:
        """Encrypt ``document`` to the provider and ``POST /Invoice/secure``.

        Failures that may pass are retried as :class:`~invoicing_async.RetryPolicy`
        says, safely: the provider answers a document it already holds with 409 and its
        record, and a 409 after this call's own earlier attempt returns that record.

        :param document: a JSON-serialisable mapping, or the exact bytes to send.
        :param send_method: passed through as the ``sendMethod`` query parameter.
        :param time_stamp: ``timeStamp`` query parameter; an aware datetime is sent as
            ISO 8601 UTC with milliseconds.
        :param retry: this call's retry policy (default: the client's ``retry``).
        :param timeout: seconds for the whole call, retries and waits included; no
            attempt or backoff outlasts it. ``None``: bounded by the policy alone.
        :returns: the provider's result record for this document.
        :raises DuplicateDocumentError: the provider held the document before this call;
            its ``result`` is the original record when the provider sends it.
        :raises UnknownOutcomeError: retries ran out after a failure that may have been
            committed; re-send the identical document later to find out.
        :raises InvoicingError: any other failure, typed (see the error tree): the
            document was refused, or certainly not committed.

        .. versionchanged:: 0.2.0 retries safely; ``retry`` and ``timeout``.
        """
        options = SendOptions(encrypted=True, send_method=send_method, time_stamp=time_stamp)
        return await self._engine.submit(document, options, retry=retry, timeout=timeout)

    async def submit_json(
        self,
        document: Document,
        *,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> DocumentResult:
        """``POST /Invoice/json``: the same as :meth:`submit_secure`, unencrypted."""
        options = SendOptions(encrypted=False, send_method=send_method, time_stamp=time_stamp)
        return await self._engine.submit(document, options, retry=retry, timeout=timeout)

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
        """Submit many documents; return one :class:`~invoicing_async.Outcome` each, in order.

        A failure of one document never raises: it is in that document's outcome. Only
        cancellation and programming errors propagate. See :meth:`submit_stream` for the
        parameters; this collects its outcomes and sorts them by input position.
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
        """Submit documents with bounded concurrency, yielding outcomes as they settle.

        :param documents: any iterable or async iterable of documents, consumed lazily:
            memory is bounded by ``concurrency``, not by the input. A
            :class:`~invoicing_async.Submission` among them is sent with its own options.
        :param concurrency: documents in flight at once (at most the connection pool size).
        :param encrypted: ``/Invoice/secure`` (default) or ``/Invoice/json``.
        :param ledger: a ledger file path (or a :class:`~invoicing_async.Ledger`):
            every document's ``sending`` is recorded before its request and its outcome
            after. Running the same batch again with it skips what is final, re-sends
            what was in flight (``409`` is then its own commit) and what failed for
            reasons that are not the document's. One process at a time sends from a
            ledger (a second gets :class:`~invoicing_async.LedgerError` at once).
        :param retry: a :class:`~invoicing_async.RetryPolicy`.
        :param deadline: seconds for the whole batch; documents not sent by then end
            ``NOT_SENT`` (or ``UNKNOWN`` if an earlier attempt may have been committed).
        :param on_progress: called with a :class:`~invoicing_async.BatchProgress` after
            every settled document.
        :param key: the identity of a document (default: :func:`document_key`).
        :param max_document_size: the largest document sent, in bytes (default: the
            client's): a larger one ends ``rejected`` with
            :class:`~invoicing_async.DocumentTooLargeError`, and the others go on.

        Close the generator (``async with contextlib.aclosing(...)``) to stop early: the
        workers are cancelled and documents in flight are recorded as unknown.

        .. versionchanged:: 0.3.0 ``ledger`` (``journal`` is deprecated);
           :class:`~invoicing_async.Submission` inputs.
        .. versionchanged:: 0.4.0 ``journal`` is removed; ``max_document_size``.
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
        return self._engine.stream(documents, options, ledger)

    # --- other operations ----------------------------------------------------------------
    # Each declares its safety class in one table (invoicing_async._safety.OPERATIONS);
    # invoicing_async._operations builds the call and runs it as often as the class
    # allows (the decision core decides).

    async def cancel_delivery_note(
        self,
        mark: int | str | None = None,
        *,
        payload: Mapping[str, Any] | bytes | None = None,
        params: Mapping[str, str] | None = None,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> OperationResult:
        """``POST /Invoice/cancelDeliveryNote``: cancel a delivery note, at most once.

        ``AT_MOST_ONCE_WRITE``: re-sent only when the request certainly did not reach
        the provider. The common keywords (``payload``, ``params``, ``safety``,
        ``retry``, ``timeout``) are described in :doc:`/operations`.

        :param mark: the note's mark, sent as the ``mark`` query parameter (or name the
            note in ``payload``/``params`` as the provider's documentation says).
        :returns: the answer; ``cancellation_mark`` is the cancellation's own mark.
        :raises DuplicateDocumentError: it was cancelled before (409); the original
            cancellation mark is in ``body`` (and ``result``) when the provider gives it.
        :raises UnknownOutcomeError: the request may have reached the provider and the
            answer was lost. It is not re-sent: read :meth:`get_last_b2g_status` first.

        .. versionadded:: 0.3.0
        """
        return await ops.run(
            self._channel,
            "cancel_delivery_note",
            ops.Payload(payload, params, mark=mark),
            ops.Options(safety, retry or self._engine.retry, timeout),
        )

    async def cancel_receiving_note(
        self,
        mark: int | str | None = None,
        *,
        payload: Mapping[str, Any] | bytes | None = None,
        params: Mapping[str, str] | None = None,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> OperationResult:
        """``POST /Invoice/cancelReceivingNote``: the same as :meth:`cancel_delivery_note`.

        .. versionadded:: 0.3.0
        """
        return await ops.run(
            self._channel,
            "cancel_receiving_note",
            ops.Payload(payload, params, mark=mark),
            ops.Options(safety, retry or self._engine.retry, timeout),
        )

    async def request_pos_signature(
        self,
        issuer_tin: str,
        payload: Mapping[str, Any] | bytes,
        *,
        params: Mapping[str, str] | None = None,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> OperationResult:
        """``POST /PosSignatures/{issuerTin}``: the provider's signature for ``payload``.

        ``DEDUPLICATED_WRITE``: signing the same data again yields a signature for the
        same data, so a lost answer is re-sent.

        .. versionadded:: 0.3.0
        """
        return await ops.run(
            self._channel,
            "request_pos_signature",
            ops.Payload(payload, params, path_params={"issuerTin": issuer_tin}),
            ops.Options(safety, retry or self._engine.retry, timeout),
        )

    async def sign_pos_transaction(
        self,
        payload: Mapping[str, Any] | bytes,
        *,
        params: Mapping[str, str] | None = None,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> OperationResult:
        """``POST /PosTransactions/signpos``: the signature a card terminal needs.

        ``payload`` carries the transaction (``issuerTin``, ``issueDate``,
        ``branchCode``, ``invoiceTypeCode``, ``series``, ``identifier``, amounts,
        ``terminalId``, ``signatureDurationType``). ``DEDUPLICATED_WRITE``, as
        :meth:`request_pos_signature`.

        .. versionadded:: 0.3.0
        """
        return await ops.run(
            self._channel,
            "sign_pos_transaction",
            ops.Payload(payload, params),
            ops.Options(safety, retry or self._engine.retry, timeout),
        )

    async def reseed_b2g_invoice(
        self,
        document: Mapping[str, Any] | bytes,
        *,
        params: Mapping[str, str] | None = None,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> DocumentResult:
        """``POST /B2GInvoice/ReSeedInvoice``: forward a held B2G document again.

        No new mark: the provider answers the document's record. Only its buyer,
        contract, project and order references may differ from the document it holds.
        ``DEDUPLICATED_WRITE``: after a lost answer it is re-sent, and a 409 then is
        the record this call's earlier attempt left.

        :raises DuplicateDocumentError: it was forwarded as it is before this call.

        .. versionadded:: 0.3.0
        """
        return await ops.run_for_record(
            self._channel,
            "reseed_b2g_invoice",
            ops.Payload(document, params),
            ops.Options(safety, retry or self._engine.retry, timeout),
        )

    async def get_last_b2g_status(
        self,
        mark: int | str | None = None,
        *,
        params: Mapping[str, str] | None = None,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> OperationResult:
        """``GET /B2GInvoice/GetLastStatus``: a document's last status, as the provider holds it.

        ``READ``: repeated freely. After an unknown cancellation, this says whether the
        document is cancelled (``cancellation_mark``).

        :param mark: sent as the ``mark`` query parameter (or give ``params``).

        .. versionadded:: 0.3.0
        """
        return await ops.run(
            self._channel,
            "get_last_b2g_status",
            ops.Payload(None, params, mark=mark),
            ops.Options(safety, retry or self._engine.retry, timeout),
        )

    async def upload_invoice_file(
        self,
        file: bytes | str | os.PathLike[str],
        *,
        content_type: str,
        filename: str | None = None,
        fields: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> OperationResult:
        """``POST /Invoice/File``: upload a file as ``multipart/form-data``.

        ``UPLOAD``: re-sent only when the request certainly did not reach the provider.

        :param file: the file's bytes, or its path (read off the event loop).
        :param content_type: the file's media type, e.g. ``application/pdf``.
        :param filename: the name sent (default: the path's name, or ``file``).
        :param fields: more form fields, sent before the file.
        :raises UnknownOutcomeError: the provider may or may not hold the file.

        .. versionadded:: 0.3.0
        """
        return await ops.run(
            self._channel,
            "upload_invoice_file",
            ops.Upload(file, content_type, filename, fields, params),
            ops.Options(safety, retry or self._engine.retry, timeout),
        )

    async def upload_media(
        self,
        file: bytes | str | os.PathLike[str],
        *,
        content_type: str,
        filename: str | None = None,
        fields: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> OperationResult:
        """``POST /media/upload``: the same as :meth:`upload_invoice_file`.

        .. versionadded:: 0.3.0
        """
        return await ops.run(
            self._channel,
            "upload_media",
            ops.Upload(file, content_type, filename, fields, params),
            ops.Options(safety, retry or self._engine.retry, timeout),
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Call any other operation; returns the decoded JSON answer (``None`` if empty).

        Authenticated like the document calls; ``json`` is sent as the body (bytes as
        they are). It runs under the class the table declares for ``method path``, a
        stricter ``safety`` if given; an operation the table does not know under
        ``safety``, by default ``READ`` for ``GET`` and ``AT_MOST_ONCE_WRITE`` for
        anything else (see :doc:`/operations`).

        :raises ValueError: ``safety`` would loosen a known operation's class.

        .. versionchanged:: 0.3.0 ``safety`` and ``retry``; retried as the class allows.
        """
        result = await ops.run_free(
            self._channel,
            method,
            path,
            ops.Payload(json, params),
            ops.Options(safety, retry or self._engine.retry, timeout),
        )
        return result.body

    async def token(self) -> AccessToken:
        """A valid access token from the shared cache (fetched once for all callers)."""
        return await self._channel.token()


def _credentials_problem(client_id: str, client_secret: str) -> str | None:
    """Why the credentials cannot be used, in words that do not include them."""
    if not client_id or not client_secret:
        return "client_id (TIN) and client_secret (API key) are required"
    for name, value in (("client_id", client_id), ("client_secret (the API key)", client_secret)):
        if any(ord(char) < 32 or ord(char) == 127 for char in value):
            return (
                f"{name} contains a newline or another control character: check the file "
                "or variable it was read from"
            )
    return None


def borrowed_client(engine: Engine, channel: Channel) -> InvoicingClient:
    """A client of ``channel``'s issuer on ``engine``'s connections, cache and key.

    What :meth:`IssuerPool.client <invoicing_async.IssuerPool.client>` gives: closing it
    closes nothing; the pool owns the connections.
    """
    client = InvoicingClient.__new__(InvoicingClient)
    issuer = Engine(
        engine.transport, engine.preparer, engine.retry, engine.cache, OneIssuer(channel)
    )
    client._setup(issuer, channel, owns_transport=False)  # noqa: SLF001  (this module's class)
    return client
