"""``InvoicingClient``: wires the transport, the token cache, the PGP stage and the protocol."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import logging
import random
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from . import _protocol as proto
from ._auth import CredentialsKey, TokenCache
from ._batch import submit_stream
from ._documents import Document, document_key, serialize_document
from ._errors import (
    AuthenticationError,
    InvoicingError,
    MalformedResponseError,
    RateLimitError,
    ServerError,
    TransportError,
    ValidationError,
)
from ._transport import DEFAULT_MAX_RESPONSE_SIZE, Transport

if TYPE_CHECKING:
    import datetime as dt
    import os
    import ssl
    from collections.abc import (
        AsyncIterable,
        AsyncIterator,
        Callable,
        Iterable,
        Mapping,
        Sequence,
    )
    from types import TracebackType

    import aiohttp

    from ._journal import Journal
    from ._models import AccessToken, DocumentResult
    from ._outcomes import BatchProgress, Outcome, RetryPolicy
    from ._pgp import ProviderKey

__all__ = ["InvoicingClient"]

#: A token younger than this (seconds) is not suspected when a 401 comes back.
_FRESH_TOKEN_AGE = 10.0

log = logging.getLogger("invoicing_async")


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

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        *,
        provider_key: ProviderKey | None = None,
        session: aiohttp.ClientSession | None = None,
        token_cache: TokenCache | None = None,
        limit: int = 100,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        timeout: float | None = 120.0,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        ssl: ssl.SSLContext | None = None,
        encrypt_executor: concurrent.futures.Executor | None = None,
        token_attempts: int = 4,
    ) -> None:
        if not client_id or not client_secret:
            raise ValueError("client_id (TIN) and client_secret (API key) are required")
        self._base_url = proto.check_base_url(base_url)
        self._client_id = client_id
        self._client_secret = client_secret
        self._provider_key = provider_key
        self._cache = token_cache if token_cache is not None else TokenCache()
        self._credentials = CredentialsKey.of(self._base_url, client_id, client_secret)
        self._transport = Transport(
            session=session,
            limit=limit,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            total_timeout=timeout,
            max_response_size=max_response_size,
            ssl=ssl,
        )
        self._executor = encrypt_executor
        self._token_attempts = max(1, token_attempts)
        # Tokens this client used lately: scrubbed from provider text that echoes them.
        self._recent_secrets: collections.deque[str] = collections.deque(maxlen=8)

    #: Token endpoint backoff: base and cap in seconds, with full jitter.
    _token_backoff: tuple[float, float] = (0.1, 2.0)

    def __repr__(self) -> str:
        return f"<InvoicingClient {self._base_url} client_id={self._client_id!r}>"

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
        return self._executor

    @property
    def provider_key(self) -> ProviderKey | None:
        """The provider key documents are encrypted to."""
        return self._provider_key

    # --- documents ---------------------------------------------------------------------

    async def submit_secure(
        self,
        document: Document,
        *,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
    ) -> DocumentResult:
        """Encrypt ``document`` to the provider and ``POST /Invoice/secure``.

        :param document: a JSON-serialisable mapping, or the exact bytes to send.
        :param send_method: passed through as the ``sendMethod`` query parameter.
        :param time_stamp: ``timeStamp`` query parameter; an aware datetime is sent as
            ISO 8601 UTC with milliseconds.
        :returns: the provider's result record.
        :raises DuplicateDocumentError: the provider already holds the document; its
            ``result`` is the original record when the provider sends it.
        """
        payload = await self.prepare(document, encrypted=True)
        return await self.send_prepared(
            payload, encrypted=True, send_method=send_method, time_stamp=time_stamp
        )

    async def submit_json(
        self,
        document: Document,
        *,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
    ) -> DocumentResult:
        """``POST /Invoice/json``: the same as :meth:`submit_secure`, unencrypted."""
        payload = await self.prepare(document, encrypted=False)
        return await self.send_prepared(
            payload, encrypted=False, send_method=send_method, time_stamp=time_stamp
        )

    async def prepare(self, document: Document, *, encrypted: bool) -> bytes:
        """Serialise (and encrypt) ``document`` into the body to send.

        Runs in ``encrypt_executor`` (a thread by default), never on the event loop.
        Re-sending the same prepared body is safe: the provider recognises the document,
        not the ciphertext.

        :raises ValidationError: the document cannot be serialised, or there is no
            provider key to encrypt to.
        """
        [payload] = await self.prepare_many([document], encrypted=encrypted)
        if isinstance(payload, InvoicingError):
            raise payload
        return payload

    async def prepare_many(
        self, documents: Sequence[Document], *, encrypted: bool
    ) -> list[bytes | InvoicingError]:
        """Prepare several documents in one executor call.

        Each document that cannot be prepared gets its error in its place. One call per
        chunk amortises the hand-over to the thread or process pool, which costs as much
        as encrypting a 4 KB invoice.
        """
        if not encrypted:
            # Serialising alone is a few tens of µs: a hand-over to a thread would cost
            # more than it saves, and with the GIL it runs no faster there.
            return [_serialized(document) for document in documents]
        key = self._provider_key
        if key is None:
            error = ValidationError("submit_secure needs a provider_key to encrypt to")
            return [error for _ in documents]
        items: list[Any] = list(documents)
        if isinstance(self._executor, concurrent.futures.ProcessPoolExecutor):
            # Only bytes cross to another process: any document pickles that way, and a
            # document that cannot be serialised is refused here, alone.
            items = [_serialized(document) for document in items]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, prepare_chunk, key, items)

    async def send_prepared(
        self,
        payload: bytes,
        *,
        encrypted: bool,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        timeout: float | None = None,
    ) -> DocumentResult:
        """Send a body made by :meth:`prepare` once (plus one retry after a 401)."""

        # A closure, not functools.partial: a partial's repr shows the API key, and
        # tracebacks formatted with locals print reprs.
        def build(token: AccessToken) -> proto.Request:
            return proto.build_document_request(
                self._base_url,
                token=token,
                api_key=self._client_secret,
                body=payload,
                encrypted=encrypted,
                send_method=send_method,
                time_stamp=time_stamp,
            )

        response = await self._authorized(build, timeout=timeout)
        result: DocumentResult = self._checked(proto.parse_document_response, response)
        return result

    # --- bulk ----------------------------------------------------------------------------

    async def submit_many(
        self,
        documents: Iterable[Any] | AsyncIterable[Any],
        *,
        concurrency: int = 32,
        encrypted: bool = True,
        journal: str | os.PathLike[str] | Journal | None = None,
        retry: RetryPolicy | None = None,
        deadline: float | None = None,
        on_progress: Callable[[BatchProgress], object] | None = None,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        key: Callable[[Any], str] = document_key,
    ) -> list[Outcome]:
        """Submit many documents; return one :class:`~invoicing_async.Outcome` each, in order.

        A failure of one document never raises: it is in that document's outcome. Only
        cancellation and programming errors propagate. See :meth:`submit_stream` for the
        parameters; this collects its outcomes and sorts them by input position.
        """
        outcomes = [
            outcome
            async for outcome in self.submit_stream(
                documents,
                concurrency=concurrency,
                encrypted=encrypted,
                journal=journal,
                retry=retry,
                deadline=deadline,
                on_progress=on_progress,
                send_method=send_method,
                time_stamp=time_stamp,
                key=key,
            )
        ]
        outcomes.sort(key=lambda outcome: outcome.index)
        return outcomes

    def submit_stream(
        self,
        documents: Iterable[Any] | AsyncIterable[Any],
        *,
        concurrency: int = 32,
        encrypted: bool = True,
        journal: str | os.PathLike[str] | Journal | None = None,
        retry: RetryPolicy | None = None,
        deadline: float | None = None,
        on_progress: Callable[[BatchProgress], object] | None = None,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        key: Callable[[Any], str] = document_key,
    ) -> AsyncIterator[Outcome]:
        """Submit documents with bounded concurrency, yielding outcomes as they settle.

        :param documents: any iterable or async iterable of documents, consumed lazily:
            memory is bounded by ``concurrency``, not by the input.
        :param concurrency: documents in flight at once (at most the connection pool size).
        :param encrypted: ``/Invoice/secure`` (default) or ``/Invoice/json``.
        :param journal: a path (or :class:`~invoicing_async.Journal`) for the write-ahead
            journal. Running the same batch again with it skips settled documents and
            re-sends those that were in flight.
        :param retry: a :class:`~invoicing_async.RetryPolicy`.
        :param deadline: seconds for the whole batch; documents not sent by then end
            ``NOT_SENT`` (or ``UNKNOWN`` if an earlier attempt may have been committed).
        :param on_progress: called with a :class:`~invoicing_async.BatchProgress` after
            every settled document.
        :param key: the identity of a document (default: :func:`document_key`).

        Close the iterator (``async with contextlib.aclosing(...)``) to stop early: the
        workers are cancelled and documents in flight are journaled as unknown.
        """
        return submit_stream(
            self,
            documents,
            concurrency=concurrency,
            encrypted=encrypted,
            journal=journal,
            retry=retry,
            deadline=deadline,
            on_progress=on_progress,
            send_method=send_method,
            time_stamp=time_stamp,
            key=key,
        )

    # --- other operations ----------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Call another operation (``/Invoice/cancelDeliveryNote``, ``/PosSignatures/…``).

        Authenticated like the document calls; ``json`` is sent as the body. Returns the
        decoded JSON answer (``None`` for an empty body) or raises the typed error.
        """
        if not path.startswith("/") or "://" in path:
            raise ValueError("path must be a path on the provider, such as '/Invoice/json'")
        body = None if json is None else _dumps(json)
        url = self._base_url + path
        if params:
            url += "?" + urlencode(dict(params))

        def build(token: AccessToken) -> proto.Request:
            headers = {
                "Authorization": f"Bearer {token.value}",
                "APIKey": self._client_secret,
                "Accept": proto.JSON_CONTENT_TYPE,
            }
            if body is not None:
                headers["Content-Type"] = proto.JSON_CONTENT_TYPE
            return proto.Request(method.upper(), url, headers, body)

        response = await self._authorized(build, timeout=timeout)
        return self._checked(
            lambda r: proto.parse_json_response(r, f"{method.upper()} {path}"), response
        )

    # --- tokens ------------------------------------------------------------------------

    async def token(self) -> AccessToken:
        """A valid access token from the shared cache (fetched once for all callers)."""
        token = await self._cache.get(self._credentials, self._fetch_token)
        if token.value not in self._recent_secrets:
            self._recent_secrets.append(token.value)
            if token.refresh_token:
                self._recent_secrets.append(token.refresh_token)
        return token

    async def _authorized(
        self, build: Callable[[AccessToken], proto.Request], *, timeout: float | None
    ) -> proto.Response:
        """Send with a token; after a 401 that may be the token's fault, retry once.

        The token that failed is dropped (unless already replaced), one new token is
        fetched and the call is retried once: a second 401 is the caller's answer.
        """
        token = await self._token_within(timeout)
        response = await self._transport.send(build(token), timeout=timeout)
        if response.status != 401 or not self._token_may_be_at_fault(response, token):
            return response
        log.debug("401 with a token that may have expired: fetching a new one, retrying once")
        self._cache.invalidate(self._credentials, token)
        token = await self._token_within(timeout)
        return await self._transport.send(build(token), timeout=timeout)

    async def _token_within(self, timeout: float | None) -> AccessToken:
        """A token for a document call, in the call's time budget.

        A failure to get one means the document was certainly not sent: it is reported
        as a :class:`TransportError` with ``maybe_sent=False`` (refused credentials stay
        an :class:`AuthenticationError`), so bulk submission neither rejects the document
        nor calls it possibly committed.
        """
        token = self._cache.fresh(self._credentials)
        if token is not None:
            return token  # the common case: no task, no timer
        # asyncio.wait, not wait_for: wait_for on 3.10/3.11 can swallow a cancellation
        # that arrives as the token does, and a cancelled batch would keep running.
        fetch = asyncio.ensure_future(self.token())
        try:
            done, _ = await asyncio.wait({fetch}, timeout=timeout)
        except asyncio.CancelledError:
            fetch.cancel()
            raise
        if not done:
            fetch.cancel()
            raise TransportError(
                "timed out waiting for an access token, nothing sent", maybe_sent=False
            )
        try:
            return fetch.result()
        except AuthenticationError:
            raise
        except InvoicingError as exc:
            raise TransportError(f"no access token, nothing sent: {exc}", maybe_sent=False) from exc

    def _token_may_be_at_fault(self, response: proto.Response, token: AccessToken) -> bool:
        """Whether a 401 could be cured by a new token.

        Yes when the provider says so (``WWW-Authenticate: … error="invalid_token"``) or
        when the token is more than a few seconds old; a 401 to a token just issued is
        about something else (the real service answers an issuer VAT that does not match
        the API key with 401), and a new token would only cost a request.
        """
        challenge = response.headers.get("WWW-Authenticate") or ""
        if "invalid_token" in challenge.lower():
            return True
        return self._cache.clock() - token.obtained_at > _FRESH_TOKEN_AGE

    async def _fetch_token(self, current: AccessToken | None) -> AccessToken:
        if current is not None and current.refresh_token:
            try:
                return await self._token_request(current)
            except AuthenticationError:
                log.debug("the refresh token was refused: using client credentials")
        return await self._token_request(None)

    async def _token_request(self, refresh_with: AccessToken | None) -> AccessToken:
        """One token grant, retried on failures of the idempotent token endpoint.

        The refresh token is read from ``refresh_with`` where it is used and never held
        in a local variable: tracebacks formatted with locals must not show it.
        """
        clock = self._cache.clock
        attempt = 0
        while True:
            attempt += 1
            request = proto.build_token_request(
                self._base_url,
                self._client_id,
                self._client_secret,
                refresh_with.refresh_token if refresh_with is not None else None,
            )
            obtained_at = clock()
            try:
                response = await self._transport.send(request)
                token: AccessToken = self._checked(
                    lambda r: proto.parse_token_response(
                        r,
                        obtained_at=obtained_at,  # noqa: B023  (called before the next turn)
                        previous=refresh_with,
                    ),
                    response,
                )
            except (TransportError, ServerError, RateLimitError, MalformedResponseError) as exc:
                if attempt >= self._token_attempts:
                    raise
                retry_after = getattr(exc, "retry_after", None)
                base, cap = self._token_backoff
                delay = retry_after or random.uniform(0, min(cap, base * 2**attempt))
                log.debug("token request failed (%s); retrying in %.2f s", exc, delay)
                await asyncio.sleep(delay)
            else:
                return token

    def _checked(self, parse: Callable[[proto.Response], Any], response: proto.Response) -> Any:
        try:
            return parse(response)
        except InvoicingError as exc:
            raise proto.redact_error(exc, self._secrets()) from None

    def _secrets(self) -> list[str]:
        secrets = [self._client_secret, *self._recent_secrets]
        token = self._cache.peek(self._credentials)
        if token is not None:
            secrets.append(token.value)
            if token.refresh_token:
                secrets.append(token.refresh_token)
        return secrets


def prepare_chunk(key: ProviderKey, documents: list[Any]) -> list[bytes | InvoicingError]:
    """Serialise and encrypt documents: runs in a worker thread or process."""
    prepared: list[bytes | InvoicingError] = []
    for document in documents:
        if isinstance(document, InvoicingError):  # refused while serialising
            prepared.append(document)
            continue
        try:
            body = serialize_document(document)
            prepared.append(key.encrypt(body))
        except InvoicingError as exc:  # one document's error, kept in its place
            prepared.append(exc)
        # Offer the GIL between documents: the event loop's thread, back from a socket
        # call, would otherwise wait up to the switch interval (5 ms) for it.
        time.sleep(0)
    return prepared


def _serialized(document: Any) -> bytes | InvoicingError:
    try:
        return serialize_document(document)
    except InvoicingError as exc:
        return exc


def _dumps(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
