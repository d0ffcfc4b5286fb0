"""``InvoicingClient``: one issuer's client.

Its document methods are a :class:`~._surface.Submitter`'s (written once for a client
and a pool); what is its own is one issuer's credentials (its
:class:`~._channel.Channel`) and the other operations, each declared with its safety
class in one table (:data:`~._safety.OPERATIONS`) and run by :mod:`._operations` with
one body (the decision core decides how often). This module only wires and documents.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import IO, TYPE_CHECKING, Any

from invoicing_async._core import protocol as proto
from invoicing_async._core.day import CardPayment, InstantPayment
from invoicing_async._io.channel import Channel, OneIssuer
from invoicing_async._send import day as dayops
from invoicing_async._send import operations as ops

from .engine import Engine
from .env import client_arguments
from .surface import Submitter, bind

if TYPE_CHECKING:
    import concurrent.futures
    import datetime as dt
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

    from typing_extensions import Unpack

    from invoicing_async._core.day import (
        CreditResult,
        InstantPaymentRequest,
        InstantPaymentStatus,
        PaymentUpdateResult,
    )
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

    # --- the rest of a day: credits, payments, IRIS, the listing --------------------------
    # Their requests and answers are typed (invoicing_async._core.day); they run as the
    # other operations do (invoicing_async._send.day).

    def _options(
        self, safety: Safety | None, retry: RetryPolicy | None, timeout: float | None
    ) -> ops.Options:
        return ops.Options(safety, self._engine.policy(retry, batch=False), timeout)

    async def credit(
        self,
        original: DocumentResult | None = None,
        *,
        series: str,
        number: str,
        internal_id: str,
        mark: int | None = None,
        authentication_code: str | None = None,
        relate_credit: bool = False,
        prevent_document_mapping: bool = False,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> CreditResult:
        """``POST /Invoice/credit``: the provider issues a credit of a document it holds.

        A return at the till: the credit of a retail receipt (11.1) is a credit receipt
        (11.4); of an invoice, a correlated credit (5.1, ``relate_credit=True``) or an
        uncorrelated one (5.2). The credit carries the original's lines.

        Its safety class follows the provider's repeat rules
        (:class:`~invoicing_async.Safety`, see :doc:`/operations`): a document may get
        many 5.2 and 11.4 credits, and the provider knows a credit by its
        ``internal_id``, so ``relate_credit=False`` is a ``DEDUPLICATED_WRITE`` (re-sent
        after a lost answer; the ``409`` that then answers is this call's own credit).
        A document gets one 5.1, so ``relate_credit=True`` is an ``AT_MOST_ONCE_WRITE``:
        never re-sent after a lost answer.

        :param original: the original's record (its ``mark`` and
            ``authentication_code``), or give ``mark`` and ``authentication_code``.
        :param series: the credit's series, ``number`` its number, ``internal_id`` its
            unique internal id (what identifies it to the provider).
        :param relate_credit: a correlated credit (5.1) of an invoice; ignored by the
            provider for a retail receipt.
        :returns: the credit issued; its ``mark`` when the provider answered its record.
        :raises DocumentNotFoundError: the issuer has no document of this mark with this
            authentication code.
        :raises CreditRefusedError: the original cannot get this credit (``reason``:
            ``correlated_already``, ``is_a_credit``, ``cancelled``, ``refused``).
        :raises DuplicateDocumentError: a credit with this ``internal_id`` was issued
            before this call.
        :raises UnknownOutcomeError: a correlated credit's answer was lost: list the
            day's documents (:meth:`documents_issued`) before sending it again.
        :raises ValueError: the original is not named, or a member is empty.

        .. versionadded:: 0.5.0
        """
        if original is not None:
            mark = original.mark if mark is None else mark
            code = original.authentication_code
            authentication_code = code if authentication_code is None else authentication_code
        if mark is None or authentication_code is None:
            raise ValueError("name the original: its record, or mark and authentication_code")
        return await dayops.credit(
            self._channel,
            mark=mark,
            authentication_code=authentication_code,
            series=series,
            number=number,
            internal_id=internal_id,
            relate_credit=relate_credit,
            prevent_document_mapping=prevent_document_mapping,
            options=self._options(safety, retry, timeout),
        )

    async def update_payment(
        self,
        mark: int,
        payments: CardPayment | Sequence[CardPayment],
        *,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> PaymentUpdateResult:
        """``POST /Invoice/updatePayment``: a document issued earlier, paid by card now.

        Sign the payment for ``mark`` first (:meth:`sign_pos_transaction`), run the
        terminal, then send what it did as a :class:`~invoicing_async.CardPayment`.

        ``AT_MOST_ONCE_WRITE``: the provider's pages document neither a read of a
        payment nor that a payment sent again is recognised, so a lost answer is not
        re-sent (a payment recorded twice is worse than one to check). The sandbox
        answers the same payment sent again with its first payment mark: where the
        provider is known to do so, re-send it on an unknown outcome.

        :param mark: the paid document's mark.
        :param payments: the payment, or several (a card and a tip …).
        :returns: the payment's own mark (``payment_mark``).
        :raises DocumentNotFoundError: the issuer has no document ``mark``.
        :raises PaymentConflictError: the transaction is recorded for the document with
            other details.
        :raises ValidationError: the provider refused the payment (a signature SignPos
            did not give for this mark, a cancelled document …).
        :raises UnknownOutcomeError: the answer was lost; it was not re-sent.

        .. versionadded:: 0.5.0
        """
        given = [payments] if isinstance(payments, CardPayment) else list(payments)
        options = self._options(safety, retry, timeout)
        return await dayops.update_payment(self._channel, mark, given, options)

    async def initiate_instant_payment(
        self,
        request: InstantPaymentRequest,
        *,
        safety: Safety | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> InstantPayment:
        """``InitiatePayment``: start an IRIS instant payment; the QR the payer scans.

        ``AT_MOST_ONCE_WRITE``: each request starts a new payment. After a lost answer
        it is not re-sent: start a new one (the lost one's QR was never shown, and it
        expires unpaid within its validity). Then follow it with
        :meth:`wait_for_instant_payment`; once ``Completed``, the document carries
        payment method 8 with ``authorisation_request_id`` as its ``TransactionId``.

        :raises DocumentNotFoundError: the request names a mark the issuer does not have.
        :raises ValidationError: the provider refused the request.
        :raises UnknownOutcomeError: the answer was lost; start a new payment.

        .. versionadded:: 0.5.0
        """
        options = self._options(safety, retry, timeout)
        return await dayops.initiate_instant_payment(self._channel, request, options)

    async def instant_payment_status(
        self,
        payment: InstantPayment | str,
        *,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> InstantPaymentStatus:
        """``GetPaymentStatus``: an IRIS payment's status. ``READ``: repeated freely.

        :param payment: the payment started, or its ``endToEndDiasId``.
        :raises DocumentNotFoundError: the issuer started no such payment.

        .. versionadded:: 0.5.0
        """
        e2e = payment.end_to_end_id if isinstance(payment, InstantPayment) else payment
        options = self._options(None, retry, timeout)
        return await dayops.instant_payment_status(self._channel, e2e, options)

    async def wait_for_instant_payment(
        self,
        payment: InstantPayment | str,
        *,
        within: float | None = None,
        interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> InstantPaymentStatus:
        """Poll :meth:`instant_payment_status` until the status is final, within a time.

        :param within: seconds to keep asking (on ``clock``); by default the payment's
            validity plus 30 s (the provider says ``Expired`` once it is over), or 3.5
            minutes for an id alone.
        :param interval: seconds between two reads.
        :param clock: a monotonic clock, and ``sleep`` the wait between reads: tests give
            fakes, so that no real time passes.
        :param timeout: seconds for each read.
        :returns: the last status read: final, or ``Pending`` (``final`` false) when
            ``within`` ran out first.

        .. versionadded:: 0.5.0
        """
        if within is None:
            minutes = payment.validity_minutes if isinstance(payment, InstantPayment) else 3
            within = minutes * 60 + _IRIS_GRACE

        def read() -> Awaitable[InstantPaymentStatus]:
            return self.instant_payment_status(payment, retry=retry, timeout=timeout)

        return await dayops.wait_for_instant_payment(
            read, within=within, interval=interval, clock=clock, sleep=sleep
        )

    def documents_issued(
        self,
        issuer: str | None,
        since: dt.date,
        until: dt.date | None = None,
        *,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[DocumentResult]:
        """The documents the issuer issued from ``since`` to ``until`` (both included).

        ``GET /api/invoice/getdocuments/{IssuerVatNumber}/{PageNumber}/``, a page at a
        time, following the ``NextPage`` header; each page is a ``READ`` (repeated
        freely) and only one is held at a time, so memory does not grow with the day::

            async for record in client.documents_issued(None, day):
                ...

        Each is the document's result record as the provider lists it (its
        ``cancellation_mark`` as it is now; ``extra["invoiceTypeCode"]`` its type).

        :param issuer: the issuer's TIN (``None``: the client's).
        :param until: the last day (default: ``since``).
        :param timeout: seconds for each page.
        :raises MalformedResponseError: a page is not an array of records, is over the
            client's ``max_response_size``, or its ``NextPage`` does not lead on.

        .. versionadded:: 0.5.0
        """
        return dayops.documents_issued(
            self._channel,
            self._client_id if issuer is None else issuer,
            since,
            since if until is None else until,
            policy=self._engine.policy(retry, batch=False),
            timeout=timeout,
        )

    async def document_pdf(
        self,
        document: DocumentResult | str,
        target: str | os.PathLike[str] | IO[bytes],
        *,
        max_size: int = dayops.DEFAULT_MAX_PDF_SIZE,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> int:
        """Stream a document's PDF (``GET {url}/pdf``) to a file; the bytes written.

        The url is the record's public one (what the receipt's QR shows): no credential
        is sent to it, and no redirect followed.

        :param document: its record, or its url.
        :param target: a path (written whole or not at all: through a temporary file
            beside it; a ``READ``, retried) or a binary file object (written as the PDF
            arrives; one attempt).
        :param max_size: the largest PDF written, in bytes.
        :raises MalformedResponseError: the PDF is over ``max_size``, cut short, or not
            a PDF.
        :raises ValueError: the record has no url, or it is not ``https``.

        .. versionadded:: 0.5.0
        """
        return await dayops.document_pdf(
            self._engine.transport,
            document,
            target,
            max_size=max_size,
            policy=self._engine.policy(retry, batch=False),
            timeout=timeout,
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


#: Seconds :meth:`InvoicingClient.wait_for_instant_payment` asks past a payment's validity.
_IRIS_GRACE = 30.0


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
