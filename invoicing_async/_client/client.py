"""``InvoicingClient``: one issuer's client.

Its document methods are a :class:`~._surface.Submitter`'s (written once for a client
and a pool); what is its own is one issuer's credentials (its
:class:`~._channel.Channel`) and the other operations, each declared with its safety
class in one table (:data:`~._safety.OPERATIONS`) and run by :mod:`._operations` with
one body (the decision core decides how often). This module only wires and documents.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from invoicing_async._core import protocol as proto
from invoicing_async._io.channel import Channel
from invoicing_async._send import operations as ops

from .engine import Engine, OneIssuer
from .env import client_arguments
from .surface import Submitter, bind

if TYPE_CHECKING:
    import concurrent.futures
    from collections.abc import Mapping

    from typing_extensions import Unpack

    from invoicing_async._core.models import AccessToken, DocumentResult
    from invoicing_async._core.retry import RetryPolicy
    from invoicing_async._core.safety import Safety
    from invoicing_async._doc.pgp import ProviderKey
    from invoicing_async._io.tokencache import TokenCache
    from invoicing_async._io.transport import Transport
    from invoicing_async._send.operations import OperationResult

    from .engine import ClientOptions

__all__ = ["InvoicingClient"]


class InvoicingClient(Submitter):
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
    :param transport: a :class:`~invoicing_async.testing.MockTransport` answering every
        request (the token's too) with a function of yours instead of the network: the
        seam unit tests stand on (:doc:`/guides/testing`). Not with ``session``.

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.4.0 ``max_document_size``.
    .. versionchanged:: 0.5.0 ``transport``.
    """

    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        **options: Unpack[ClientOptions],
    ) -> None:
        problem = _credentials_problem(client_id, client_secret)
        if problem is not None:
            del client_secret  # a traceback formatted with locals must not show it
            raise ValueError(problem)
        base_url = proto.check_base_url(base_url)

        def one_issuer(
            transport: Transport, cache: TokenCache, token_retry: RetryPolicy
        ) -> OneIssuer:
            return OneIssuer(
                Channel(
                    base_url,
                    client_id,
                    client_secret,
                    transport=transport,
                    token_cache=cache,
                    token_retry=token_retry,
                )
            )

        self._setup(Engine.of(base_url, options, one_issuer))

    def _setup(self, engine: Engine) -> None:
        channels = engine.channels
        assert isinstance(channels, OneIssuer)  # noqa: S101  (a client's engine has one)
        self._engine = engine
        self._channel = channels.channel
        self._client_id = channels.channel.client_id

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
        engine = getattr(self, "_engine", None)
        base_url = engine.base_url if engine is not None else "(not configured)"
        return f"<InvoicingClient {base_url} client_id={getattr(self, '_client_id', None)!r}>"

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

    async def token(self) -> AccessToken:
        """A valid access token from the shared cache (fetched once for all callers)."""
        return await self._channel.token()

    # --- other operations ----------------------------------------------------------------
    # Each declares its safety class in one table (invoicing_async._core.safety.OPERATIONS);
    # invoicing_async._send.operations builds the call and runs it as often as the class
    # allows (the decision core decides). One body: _operation.

    async def _operation(
        self,
        name: str,
        given: ops.Payload | ops.Upload,
        safety: Safety | None,
        retry: RetryPolicy | None,
        timeout: float | None,
    ) -> OperationResult:
        options = ops.Options(safety, self._engine.policy(retry, batch=False), timeout)
        return await ops.run(self._channel, name, given, options)

    async def _cancel(
        self,
        name: str,
        mark: int | str | None = None,
        *,
        payload: Mapping[str, Any] | bytes | None = None,
        params: Mapping[str, str] | None = None,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> OperationResult:
        return await self._operation(
            name, ops.Payload(payload, params, mark=mark), safety, retry, timeout
        )

    cancel_delivery_note = bind(
        _cancel,
        "cancel_delivery_note",
        name="cancel_delivery_note",
        doc="""``POST /Invoice/cancelDeliveryNote``: cancel a delivery note, at most once.

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
        """,
    )
    cancel_receiving_note = bind(
        _cancel,
        "cancel_receiving_note",
        name="cancel_receiving_note",
        doc="""``POST /Invoice/cancelReceivingNote``: the same as :meth:`cancel_delivery_note`.

        .. versionadded:: 0.3.0
        """,
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
        given = ops.Payload(payload, params, path_params={"issuerTin": issuer_tin})
        return await self._operation("request_pos_signature", given, safety, retry, timeout)

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
        given = ops.Payload(payload, params)
        return await self._operation("sign_pos_transaction", given, safety, retry, timeout)

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
        options = ops.Options(safety, self._engine.policy(retry, batch=False), timeout)
        given = ops.Payload(document, params)
        return await ops.run_for_record(self._channel, "reseed_b2g_invoice", given, options)

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
        given = ops.Payload(None, params, mark=mark)
        return await self._operation("get_last_b2g_status", given, safety, retry, timeout)

    async def _upload(
        self,
        name: str,
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
        given = ops.Upload(file, content_type, filename, fields, params)
        return await self._operation(name, given, safety, retry, timeout)

    upload_invoice_file = bind(
        _upload,
        "upload_invoice_file",
        name="upload_invoice_file",
        doc="""``POST /Invoice/File``: upload a file as ``multipart/form-data``.

        ``UPLOAD``: re-sent only when the request certainly did not reach the provider.

        :param file: the file's bytes, or its path (read off the event loop).
        :param content_type: the file's media type, e.g. ``application/pdf``.
        :param filename: the name sent (default: the path's name, or ``file``).
        :param fields: more form fields, sent before the file.
        :raises UnknownOutcomeError: the provider may or may not hold the file.

        .. versionadded:: 0.3.0
        """,
    )
    upload_media = bind(
        _upload,
        "upload_media",
        name="upload_media",
        doc="""``POST /media/upload``: the same as :meth:`upload_invoice_file`.

        .. versionadded:: 0.3.0
        """,
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
        options = ops.Options(safety, self._engine.policy(retry, batch=False), timeout)
        given = ops.Payload(json, params)
        result = await ops.run_free(self._channel, method, path, given, options)
        return result.body


def _credentials_problem(client_id: str, client_secret: str) -> str | None:
    """Why the credentials cannot be used, in words that do not include them."""
    if not client_id or not client_secret:
        return "client_id (TIN) and client_secret (API key) are required"
    if any(ord(char) < 32 or ord(char) == 127 for char in client_id):
        return (
            "client_id contains a newline or another control character: check the file or "
            "variable it was read from"
        )
    problem = proto.check_api_key(client_secret)
    if problem is not None:
        return (
            f"client_secret (the API key) cannot be sent: {problem}: check the file or "
            "variable it was read from"
        )
    return None


def borrowed_client(engine: Engine, channel: Channel) -> InvoicingClient:
    """A client of ``channel``'s issuer on ``engine``'s connections, cache and key.

    What :meth:`IssuerPool.client <invoicing_async.IssuerPool.client>` gives: closing it
    closes nothing; the pool owns the connections.
    """
    client = InvoicingClient.__new__(InvoicingClient)
    client._setup(engine.sharing(OneIssuer(channel)))  # noqa: SLF001  (this module's class)
    return client
