"""``InvoicingClient``: the public façade.

The client owns the transport (unless the caller brought an aiohttp session) and wires
the layers a document goes down through, in one direction: it is identified
(:mod:`._documents`), prepared (:mod:`._prepare`), delivered (:mod:`._delivery`: the
retry rules), each attempt sent by the :class:`~._session.Session` (token, 401 policy,
parsing) over the :class:`~._transport.Transport`; many documents go through a
:class:`~._batch.Batch`, with a ledger's journal (:mod:`._ledger`) when one is given.
This module only wires and documents.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from typing import TYPE_CHECKING, Any

from . import _calls as ops
from . import _protocol as proto
from ._batch import Batch, BatchOptions, collect
from ._delivery import Delivery
from ._deprecation import deprecated
from ._documents import (
    DEFAULT_MAX_DOCUMENT_SIZE,
    Document,
    Prepared,
    SendOptions,
    describe,
    document_key,
    size_limit,
)
from ._env import client_arguments
from ._errors import InvoicingError
from ._ledger._sqlite_ledger import journal as ledger_journal
from ._outcomes import OutcomeStatus, RetryPolicy
from ._prepare import Preparer
from ._session import Session
from ._tokencache import TokenCache
from ._transport import DEFAULT_MAX_RESPONSE_SIZE, ClientSession, Transport

if TYPE_CHECKING:
    import concurrent.futures
    import datetime as dt
    import ssl
    from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable, Mapping, Sequence
    from types import TracebackType

    from ._journal import Journal
    from ._ledger._sqlite_ledger import Ledger
    from ._models import AccessToken, DocumentResult
    from ._operations import OperationResult
    from ._outcomes import BatchProgress, Outcome
    from ._pgp import ProviderKey
    from ._safety import Safety

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
    :param encrypt_executor: where encryption runs: by default the loop's thread pool. A
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
        self._base_url = proto.check_base_url(base_url)
        self._retry = retry if retry is not None else RetryPolicy()
        self._client_id = client_id
        self._cache = token_cache if token_cache is not None else TokenCache()
        self._transport = Transport(
            session=session,
            limit=limit,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            total_timeout=timeout,
            max_response_size=max_response_size,
            ssl=ssl,
        )
        self._preparer = Preparer(provider_key, encrypt_executor, size_limit(max_document_size))
        self._session = Session(
            self._base_url,
            client_id,
            client_secret,
            transport=self._transport,
            token_cache=self._cache,
            token_retry=RetryPolicy(
                max_attempts=max(1, token_attempts), base_delay=0.1, max_delay=2.0
            ),
        )

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
        await self._transport.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP session if the client created it."""
        await self._transport.close()

    @property
    def base_url(self) -> str:
        """The environment's base URL."""
        return self._base_url

    @property
    def token_cache(self) -> TokenCache:
        """The token cache this client uses (shared or its own)."""
        return self._cache

    @property
    def limit(self) -> int:
        """The connection pool size."""
        return self._transport.limit

    @property
    def encrypt_executor(self) -> concurrent.futures.Executor | None:
        """Where documents are prepared (``None``: the event loop's default thread pool)."""
        return self._preparer.executor

    @property
    def provider_key(self) -> ProviderKey | None:
        """The provider key documents are encrypted to."""
        return self._preparer.provider_key

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
        return await self._submit(document, options, retry=retry, timeout=timeout)

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
        return await self._submit(document, options, retry=retry, timeout=timeout)

    async def _submit(
        self,
        document: Document,
        options: SendOptions,
        *,
        retry: RetryPolicy | None,
        timeout: float | None,
    ) -> DocumentResult:
        self._session.ensure_usable()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        key, identity = describe(document)
        body = await self._preparer.prepare_one(document, encrypted=options.encrypted)
        if isinstance(body, InvoicingError):
            raise body
        prepared = Prepared(key, identity, body[0], options, plain=body[1])
        delivery = Delivery(
            key=key, index=0, identity=identity, policy=retry or self._retry, deadline=deadline
        )
        outcome = await delivery.run(functools.partial(self._session.send, prepared))
        if outcome.status is OutcomeStatus.ACCEPTED and outcome.result is not None:
            return outcome.result
        assert outcome.error is not None  # noqa: S101  (every other outcome carries one)
        raise outcome.error

    async def prepare(self, document: Document, *, encrypted: bool) -> bytes:
        """Serialise (and encrypt) ``document`` into the body to send.

        .. deprecated:: 0.3.0 single calls and batches prepare documents themselves.
        """
        deprecated("InvoicingClient.prepare()", _PREPARED)
        [body] = await self._preparer.prepare_many([(document, encrypted)])
        if isinstance(body, InvoicingError):
            raise body
        return body[0]

    async def prepare_many(
        self, documents: Sequence[Document], *, encrypted: bool
    ) -> list[bytes | InvoicingError]:
        """Prepare several documents in one executor call.

        .. deprecated:: 0.3.0 single calls and batches prepare documents themselves.
        """
        deprecated("InvoicingClient.prepare_many()", _PREPARED)
        bodies = await self._preparer.prepare_many([(doc, encrypted) for doc in documents])
        return [body if isinstance(body, InvoicingError) else body[0] for body in bodies]

    async def send_prepared(
        self,
        payload: bytes,
        *,
        encrypted: bool,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        timeout: float | None = None,
    ) -> DocumentResult:
        """Send a body made by :meth:`prepare` once (plus one retry after a 401).

        .. deprecated:: 0.3.0 use :meth:`submit_secure` / :meth:`submit_json` (bytes
           are sent as they are), which also retry safely.
        """
        deprecated(
            "InvoicingClient.send_prepared()",
            "submit_secure()/submit_json() send bytes as they are, and retry safely",
        )
        return await self._session.send_body(
            payload,
            encrypted=encrypted,
            send_method=send_method,
            time_stamp=time_stamp,
            timeout=timeout,
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
        journal: str | os.PathLike[str] | Ledger | None = None,
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
        ledger = _ledger_argument(ledger, journal)
        if ledger is None:
            return await collect(self._batch(options, None), documents)
        async with ledger_journal(ledger, resend_ambiguous=options.retry.resend_ambiguous) as j:
            return await collect(self._batch(options, j), documents)

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
        journal: str | os.PathLike[str] | Ledger | None = None,
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
        :param journal: the former name of ``ledger``.
        :param max_document_size: the largest document sent, in bytes (default: the
            client's): a larger one ends ``rejected`` with
            :class:`~invoicing_async.DocumentTooLargeError`, and the others go on.

        Close the generator (``async with contextlib.aclosing(...)``) to stop early: the
        workers are cancelled and documents in flight are recorded as unknown.

        .. versionchanged:: 0.3.0 ``ledger`` (``journal`` is deprecated);
           :class:`~invoicing_async.Submission` inputs.
        .. versionchanged:: 0.4.0 ``max_document_size``.
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
        return self._stream(documents, options, _ledger_argument(ledger, journal))

    async def _stream(
        self,
        documents: Iterable[Any] | AsyncIterable[Any],
        options: BatchOptions,
        ledger: str | os.PathLike[str] | Ledger | None,
    ) -> AsyncGenerator[Outcome, None]:
        if ledger is None:
            async with contextlib.aclosing(self._batch(options, None).run(documents)) as run:
                async for outcome in run:
                    yield outcome
            return
        self._session.ensure_usable()  # before the ledger is locked
        async with (
            ledger_journal(ledger, resend_ambiguous=options.retry.resend_ambiguous) as j,
            contextlib.aclosing(self._batch(options, j).run(documents)) as run,
        ):
            async for outcome in run:
                yield outcome

    def _batch(self, options: BatchOptions, journal: Journal | None) -> Batch:
        """A batch of this client's documents (an outbox worker's too)."""
        preparer, limit = self._preparer, options.max_document_size
        if limit is not None and limit != preparer.max_document_size:
            preparer = Preparer(preparer.provider_key, preparer.executor, size_limit(limit))
        return Batch(preparer, self._session, options, journal)

    def _offline_signature(self, text: str) -> str:
        """The provider's offline QR signature: the hex SHA-1 of ``text`` and the API key.

        The key is read where it is used: a :class:`~invoicing_async.Deferral` signs its
        receipts without ever holding it.
        """
        return self._session.offline_signature(text)

    # --- other operations ----------------------------------------------------------------
    # Each declares its safety class in one table (invoicing_async._safety.OPERATIONS);
    # invoicing_async._calls builds the call, invoicing_async._operations sends it as
    # often as the class allows.

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
            self._session,
            "cancel_delivery_note",
            ops.Payload(payload, params, mark=mark),
            ops.Options(safety, retry or self._retry, timeout),
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
            self._session,
            "cancel_receiving_note",
            ops.Payload(payload, params, mark=mark),
            ops.Options(safety, retry or self._retry, timeout),
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
            self._session,
            "request_pos_signature",
            ops.Payload(payload, params, path_params={"issuerTin": issuer_tin}),
            ops.Options(safety, retry or self._retry, timeout),
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
            self._session,
            "sign_pos_transaction",
            ops.Payload(payload, params),
            ops.Options(safety, retry or self._retry, timeout),
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
            self._session,
            "reseed_b2g_invoice",
            ops.Payload(document, params),
            ops.Options(safety, retry or self._retry, timeout),
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
            self._session,
            "get_last_b2g_status",
            ops.Payload(None, params, mark=mark),
            ops.Options(safety, retry or self._retry, timeout),
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
            self._session,
            "upload_invoice_file",
            ops.Upload(file, content_type, filename, fields, params),
            ops.Options(safety, retry or self._retry, timeout),
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
            self._session,
            "upload_media",
            ops.Upload(file, content_type, filename, fields, params),
            ops.Options(safety, retry or self._retry, timeout),
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
            self._session,
            method,
            path,
            ops.Payload(json, params),
            ops.Options(safety, retry or self._retry, timeout),
        )
        return result.body

    async def token(self) -> AccessToken:
        """A valid access token from the shared cache (fetched once for all callers)."""
        return await self._session.token()


#: Why the client's preparing methods are deprecated.
_PREPARED = "single calls and batches prepare documents themselves"


def _ledger_argument(
    ledger: str | os.PathLike[str] | Ledger | None,
    journal: str | os.PathLike[str] | Ledger | None,
) -> str | os.PathLike[str] | Ledger | None:
    """``ledger=``, or the deprecated ``journal=`` it replaces."""
    if journal is None:
        return ledger
    if ledger is not None:
        raise TypeError("give ledger= only (journal= is its deprecated name)")
    deprecated("the journal= argument", "use ledger=", depth=2)
    return journal


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
