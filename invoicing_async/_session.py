"""One request's life: a token from the shared cache, the 401 policy, prepare, send.

:class:`Session` strings the sans-I/O steps of :mod:`._protocol` together over a
:class:`~._transport.Transport`: it gets a token (once for all callers, through the
:class:`~._auth.TokenCache`), builds the request, sends it, recovers from a 401 caused by
the token, and turns the response into a record or a typed error with the client's
secrets scrubbed from any provider text. It makes one attempt per call; retrying a
document is decided by its callers (:mod:`._batch`, the client's single calls).

Preparing documents (serialising and encrypting) is here too, because it is the other
half of sending one: :func:`prepare_chunk` runs in a worker thread or process.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from . import _protocol as proto
from ._auth import CredentialsKey, TokenCache
from ._documents import serialize_document
from ._errors import (
    AuthenticationError,
    ClientStateError,
    InvoicingError,
    MalformedResponseError,
    ProviderKeyError,
    RateLimitError,
    ServerError,
    TransportError,
)
from ._redact import mentions, redact_error, redact_record

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from ._documents import Document
    from ._models import AccessToken, DocumentResult
    from ._outcomes import RetryPolicy
    from ._pgp import ProviderKey
    from ._transport import Transport

__all__ = ["Session", "prepare_chunk"]

#: Retries of one request after 401s (a replaced token, a forced new one, a young one).
_MAX_401_RETRIES = 3

auth_log = logging.getLogger("invoicing_async.auth")


class Session:
    """Everything one request needs; shared by the client's single calls and batches.

    :param token_retry: how the idempotent token endpoint is retried on connection
        failures, 429 and 5xx.
    """

    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        *,
        transport: Transport,
        token_cache: TokenCache,
        provider_key: ProviderKey | None,
        encrypt_executor: concurrent.futures.Executor | None,
        token_retry: RetryPolicy,
    ) -> None:
        self._base_url = base_url
        self._client_id = client_id
        self._client_secret = client_secret
        self._transport = transport
        self._cache = token_cache
        self._credentials = CredentialsKey.of(base_url, client_id, client_secret)
        self._provider_key = provider_key
        self._executor = encrypt_executor
        self._token_retry = token_retry
        # Tokens used lately: scrubbed from provider text that echoes them.
        self._recent_secrets: collections.deque[str] = collections.deque(maxlen=8)

    def __repr__(self) -> str:
        return f"<Session {self._base_url} client_id={self._client_id!r}>"

    def ensure_usable(self) -> None:
        """Raise :class:`~invoicing_async.ClientStateError` if nothing can be sent."""
        self._transport.ensure_usable()

    @property
    def limit(self) -> int:
        """The connection pool size: more documents in flight would only queue for it."""
        return self._transport.limit

    @property
    def prepare_parallelism(self) -> tuple[int, int]:
        """``(documents per chunk, chunks in preparation at once)`` for bulk preparation.

        A process pool gets bigger chunks and two per core in flight, so no worker idles
        while the parent pickles the next chunk; threads share the GIL, and two chunks
        under way keep one busy.
        """
        if isinstance(self._executor, concurrent.futures.ProcessPoolExecutor):
            return 32, 2 * max(1, min(os.cpu_count() or 1, 32))
        return 16, 2

    @property
    def provider_key(self) -> ProviderKey | None:
        """The provider key documents are encrypted to."""
        return self._provider_key

    # --- preparing -------------------------------------------------------------------------

    async def prepare_many(
        self, documents: Sequence[Document], *, encrypted: bool
    ) -> list[bytes | InvoicingError]:
        """Serialise (and encrypt) documents in one executor call; errors in their places.

        One call per chunk amortises the hand-over to the thread or process pool, which
        costs as much as encrypting a 4 KB invoice.
        """
        if not encrypted:
            # Serialising alone is a few tens of µs: a hand-over to a thread would cost
            # more than it saves, and with the GIL it runs no faster there.
            return [_serialized(document) for document in documents]
        key = self._provider_key
        if key is None:
            error = ProviderKeyError(
                "no provider key to encrypt to: give the client provider_key=", reason="missing"
            )
            return [error for _ in documents]
        items: list[Any] = list(documents)
        if isinstance(self._executor, concurrent.futures.ProcessPoolExecutor):
            # Only bytes cross to another process: any document pickles that way, and a
            # document that cannot be serialised is refused here, alone.
            items = [_serialized(document) for document in items]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, prepare_chunk, key, items)

    # --- sending ---------------------------------------------------------------------------

    async def send_prepared(
        self,
        payload: bytes,
        *,
        encrypted: bool,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        timeout: float | None = None,
    ) -> DocumentResult:
        """Send a prepared body once (plus one retry after a 401 the token may have caused)."""

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
        secrets = self._secrets()
        return redact_record(result, secrets) if mentions(response.body, secrets) else result

    async def send_call(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        content_type: str | None = None,
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> proto.Response:
        """One authenticated request (plus the 401 recovery): the response as received.

        Any status comes back; reading it, and scrubbing :meth:`known_secrets` from
        what the provider says, is the caller's part.
        """
        proto.check_path(path)

        def build(token: AccessToken) -> proto.Request:
            return proto.build_call_request(
                self._base_url,
                method,
                path,
                token=token,
                api_key=self._client_secret,
                body=body,
                params=params,
                content_type=content_type,
            )

        return await self._authorized(build, timeout=timeout)

    def known_secrets(self) -> list[str]:
        """The API key and the tokens in use lately: never to be handed on."""
        return self._secrets()

    # --- tokens ----------------------------------------------------------------------------

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
        """Send with a token; after a 401 a new token may cure, retry (see the cache).

        Whether a 401 is the token's fault is decided by
        :meth:`~invoicing_async.TokenCache.recover`, per credentials for every caller of
        the cache: a replaced token is swapped for the current one, a new token is
        forced at most once per cooldown, and a 401 after that is the request's answer.
        """
        token = await self._token_within(timeout)
        response = await self._transport.send(build(token), timeout=timeout)
        waited = False
        for _ in range(_MAX_401_RETRIES):
            if response.status != 401:
                break
            retry_with = await self._recover(token, timeout)
            if retry_with is None or (waited and retry_with.value == token.value):
                break
            # The same token back: the cache waited for a young token to propagate; once.
            waited = waited or retry_with.value == token.value
            auth_log.debug("401: retrying with an access token")
            token = retry_with
            response = await self._transport.send(build(token), timeout=timeout)
        if response.status != 401:
            self._cache.confirm(self._credentials, token)  # the provider knows this token
        return response

    async def _recover(self, refused: AccessToken, timeout: float | None) -> AccessToken | None:
        """The cache's verdict on a 401, in the call's time budget (see :meth:`_token_within`)."""
        return await self._within(
            self._cache.recover(self._credentials, refused, self._fetch_token), timeout
        )

    async def _token_within(self, timeout: float | None) -> AccessToken:
        """A token for a call, in the call's time budget.

        A failure to get one means the call was certainly not sent: it is reported as a
        :class:`TransportError` with ``maybe_sent=False`` (refused credentials stay an
        :class:`AuthenticationError`), so bulk submission neither rejects the document
        nor calls it possibly committed.
        """
        token = self._cache.fresh(self._credentials)
        if token is not None:
            return token  # the common case: no task, no timer
        found = await self._within(self.token(), timeout)
        assert found is not None  # noqa: S101  (token() returns a token or raises)
        return found

    @staticmethod
    async def _within(
        work: Awaitable[AccessToken | None], timeout: float | None
    ) -> AccessToken | None:
        # asyncio.wait, not wait_for: wait_for on 3.10/3.11 can swallow a cancellation
        # that arrives as the token does, and a cancelled batch would keep running.
        fetch = asyncio.ensure_future(work)
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
        except (AuthenticationError, ClientStateError):
            raise
        except InvoicingError as exc:
            raise TransportError(f"no access token, nothing sent: {exc}", maybe_sent=False) from exc

    async def _fetch_token(self, refresh_with: AccessToken | None) -> AccessToken:
        """One grant for the cache: a refresh of ``refresh_with``, or client credentials.

        A refresh gets one attempt (on any failure the cache falls back to client
        credentials); client credentials are retried as ``token_retry`` says.
        """
        return await self._token_request(refresh_with)

    async def _token_request(self, refresh_with: AccessToken | None) -> AccessToken:
        """One token grant, retried on failures of the idempotent token endpoint.

        The refresh token is read from ``refresh_with`` where it is used and never held
        in a local variable: tracebacks formatted with locals must not show it.
        """
        clock = self._cache.clock
        # A refresh gets one attempt: on any failure the cache falls back to client
        # credentials, which are retried as the policy says.
        policy = self._token_retry
        attempts = policy.max_attempts if refresh_with is None else 1
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
                if attempt >= attempts:
                    raise
                delay = policy.delay(attempt, retry_after=getattr(exc, "retry_after", None))
                auth_log.debug("token request failed (%s); retrying in %.2f s", exc, delay)
                await asyncio.sleep(delay)
            else:
                return token

    def _checked(self, parse: Callable[[proto.Response], Any], response: proto.Response) -> Any:
        try:
            return parse(response)
        except InvoicingError as exc:
            raise redact_error(exc, self._secrets()) from None

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
            prepared.append(key.encrypt(serialize_document(document)))
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
