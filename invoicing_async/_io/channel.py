"""An issuer's channel to the provider: its credentials, its tokens, one request at a time.

:class:`Channel` holds one issuer's credentials (its TIN as ``client_id``, its API key)
and strings the sans-I/O steps of :mod:`._protocol` together over the shared
:class:`~._transport.Transport`: it gets a token (once for all callers, through its
:class:`~._tokencache.Tokens` view of the shared cache), builds the request, sends it,
recovers from a 401 caused by the token, and turns the response into a record or a
typed error with the issuer's secrets scrubbed from any provider text. It makes one
attempt per call; whether to try again is the decision core's (:mod:`._decision`), for
its token grants too.

Which channel sends a document of an issuer is a :class:`Channels`' choice: a client's
:class:`OneIssuer`, or a pool's :class:`~.issuers.Issuers` (a resolver's channels).
"""

from __future__ import annotations

import collections
import hashlib
import logging
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from invoicing_async._core import calls
from invoicing_async._core import protocol as proto
from invoicing_async._core.errors import AuthenticationError, InvoicingError, TransportError
from invoicing_async._core.log import auth as auth_log
from invoicing_async._core.machine import Attempts, End
from invoicing_async._core.outcomes import OutcomeStatus
from invoicing_async._core.redact import found_in, needles, redact_error, redact_record
from invoicing_async._core.safety import Safety
from invoicing_async._core.unauthorized import TokenRetries, without_token

from .loop import Named, drive
from .tokencache import CredentialsKey, TokenCache, Tokens
from .waits import within

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Awaitable, Callable, Mapping

    from invoicing_async._core.models import AccessToken, DocumentResult
    from invoicing_async._core.retry import RetryPolicy
    from invoicing_async._doc.document import Prepared

    from .transport import Transport

__all__ = ["Channel", "Channels", "OneIssuer"]


class Channel:
    """One issuer's requests: shared by its client's single calls, batches and operations.

    :param token_retry: how the idempotent token endpoint is retried on connection
        failures, 429 and 5xx (a ``READ`` in the decision core).
    """

    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        *,
        transport: Transport,
        token_cache: TokenCache,
        token_retry: RetryPolicy,
    ) -> None:
        self._base_url = base_url
        self._client_id = client_id
        self._client_secret = client_secret
        self._transport = transport
        self._tokens = Tokens(
            token_cache, CredentialsKey.of(base_url, client_id, client_secret), self._token_request
        )
        self._token_retry = token_retry
        # Tokens used lately: scrubbed from provider text that echoes them.
        self._recent_secrets: collections.deque[str] = collections.deque(maxlen=8)
        # What may_echo looks for, and the cached token it was made with.
        self._needles: tuple[bytes, ...] | None = None
        self._needles_token: AccessToken | None = None

    def __repr__(self) -> str:
        return f"<Channel {self._base_url} client_id={self._client_id!r}>"

    def ensure_usable(self) -> None:
        """Raise :class:`~invoicing_async.ClientStateError` if nothing can be sent."""
        self._transport.ensure_usable()

    @property
    def base_url(self) -> str:
        """The environment's base URL."""
        return self._base_url

    @property
    def client_id(self) -> str:
        """The issuer's TIN, its ``client_id``."""
        return self._client_id

    @property
    def tokens(self) -> Tokens:
        """This issuer's view of the shared token cache."""
        return self._tokens

    @property
    def limit(self) -> int:
        """The connection pool size: more documents in flight would only queue for it."""
        return self._transport.limit

    def offline_signature(self, text: str) -> str:
        """The provider's offline QR signature: the hex SHA-1 of ``text`` and the API key.

        Made here, where the API key is held: the key never leaves the channel.
        """
        signed = (text + self._client_secret).encode("utf-8")
        return hashlib.sha1(signed).hexdigest()  # noqa: S324  (the provider's algorithm)

    # --- sending ---------------------------------------------------------------------------

    def send(
        self,
        prepared: Prepared,
        *,
        timeout: float | None,
        leaving: Callable[[], object] | None = None,
    ) -> Awaitable[DocumentResult]:
        """One attempt at a prepared document: its record, or the typed error.

        Not a coroutine of its own: :meth:`send_body`'s, one frame fewer for every
        resumption while the request is out.
        """
        options = prepared.options
        return self.send_body(
            prepared.body,
            encrypted=options.encrypted,
            send_method=options.send_method,
            time_stamp=options.time_stamp,
            timeout=timeout,
            leaving=leaving,
        )

    async def send_body(
        self,
        body: bytes,
        *,
        encrypted: bool,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        timeout: float | None = None,
        leaving: Callable[[], object] | None = None,
    ) -> DocumentResult:
        """Send a body once (plus a retry after a 401 the token may have caused).

        ``leaving()`` is called just before each request leaves, its token in hand (see
        :meth:`_authorized`).
        """

        # A closure, not functools.partial: a partial's repr shows the API key, and
        # tracebacks formatted with locals print reprs.
        def build(token: AccessToken) -> proto.Request:
            return proto.build_document_request(
                self._base_url,
                token=token,
                api_key=self._client_secret,
                body=body,
                encrypted=encrypted,
                send_method=send_method,
                time_stamp=time_stamp,
            )

        response, reauth_in = await self._authorized(build, timeout=timeout, leaving=leaving)
        result: DocumentResult = self._checked(
            lambda r: proto.parse_document_response(r, encrypted=encrypted), response, reauth_in
        )
        return redact_record(result, self._secrets()) if self.may_echo(response.body) else result

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
        """One authenticated request (plus the 401 recovery): a 2xx response as received.

        Any other status is raised as its typed error, the issuer's secrets scrubbed
        from what the provider says (a 401 that a revoked token may have caused says
        when a new token may be requested, as a document's does). Reading a 2xx body,
        and scrubbing :meth:`known_secrets` from it, is the caller's part.
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

        response, reauth_in = await self._authorized(build, timeout=timeout)
        if response.ok:
            return response
        error = proto.error_for_response(response, f"{method.upper()} {path}")
        raise self._told(error, reauth_in)

    def known_secrets(self) -> list[str]:
        """The API key and the tokens in use lately: never to be handed on."""
        return self._secrets()

    def may_echo(self, body: bytes) -> bool:
        """Whether the provider's raw ``body`` may hold one of :meth:`known_secrets`.

        A byte search for secrets encoded once per token: a record's scan (and its copy)
        only when it may find one.
        """
        token = self._tokens.peek()
        if self._needles is None or token is not self._needles_token:
            self._needles, self._needles_token = needles(self._secrets()), token
        return found_in(body, self._needles)

    # --- tokens ----------------------------------------------------------------------------

    async def token(self) -> AccessToken:
        """A valid access token from the shared cache (fetched once for all callers)."""
        token = await self._tokens.get()
        if token.value not in self._recent_secrets:
            self._recent_secrets.append(token.value)
            if token.refresh_token:
                self._recent_secrets.append(token.refresh_token)
            self._needles = None
        return token

    async def _authorized(
        self,
        build: Callable[[AccessToken], proto.Request],
        *,
        timeout: float | None,
        leaving: Callable[[], object] | None = None,
    ) -> tuple[proto.Response, float | None]:
        """Send with a token; after a 401 a new token may cure, retry (see the cache).

        ``leaving()``, if given, is called just before each request leaves: until then
        the call waits for a token and nothing of it was sent (a call cut off then was
        certainly not sent); it may raise, and then nothing leaves.

        Which token to try after a 401 is the cache's (:meth:`~._tokencache.Tokens.recover`),
        per credentials for every caller: a replaced token is swapped for the current
        one, a young one is retried once it is old enough for every node of the provider
        to know it, a new token is forced at most once per cooldown. Whether to send
        again with it, and what the last 401 means, is the decision core's 401 rule
        (:class:`~._decision.TokenRetries`).

        Returns the response, and, for a 401 to a token the provider accepted before
        (it may have been revoked since) when the cooldown allowed no new one, the
        seconds until one may be requested (``None`` otherwise: a 401 to a token fetched
        for this request, or to one never accepted, is the request's own answer).
        """
        token = self._tokens.fresh()  # the common case: no task, no timer, no frame
        if token is None:
            token = await self._token_within(timeout)
        if leaving is not None:
            leaving()
        response = await self._transport.send(build(token), timeout=timeout)
        if not response.unauthorized:  # the common case: the provider knows this token
            self._tokens.confirm(token)
            return response, None
        retries = TokenRetries()
        while True:
            offered, forced = await self._recover(token, timeout)
            if offered is None or not retries.again(token.value, offered.value, forced=forced):
                break
            auth_log.debug("401: retrying with an access token")
            calls.retried("token refused")
            token = offered
            if leaving is not None:
                leaving()
            response = await self._transport.send(build(token), timeout=timeout)
            if not response.unauthorized:
                self._tokens.confirm(token)
                return response, None
        accepted = self._tokens.was_confirmed(token)
        return response, retries.wait(
            token.value, accepted_before=accepted, reauth_in=self._tokens.reauth_in()
        )

    async def _recover(
        self, refused: AccessToken, timeout: float | None
    ) -> tuple[AccessToken | None, bool]:
        """The cache's verdict on a 401, in the call's time budget (see :meth:`_token_within`).

        A budget that ends while the cache waits for a young token to be known leaves
        the 401 as the answer (``None``): the request was sent and answered. The flag
        says whether this call forced the new token.
        """
        forced = False

        async def recover() -> AccessToken | None:
            nonlocal forced
            token, forced = await self._tokens.recover(refused)
            return token

        found = await self._within(recover(), timeout, answered=True)
        return found, forced and found is not None

    async def _token_within(self, timeout: float | None) -> AccessToken:
        """A token for a call, in the call's time budget.

        A failure to get one means the call was certainly not sent: it is reported as a
        :class:`TransportError` with ``maybe_sent=False`` (refused credentials stay an
        :class:`AuthenticationError`), so bulk submission neither rejects the document
        nor calls it possibly committed.
        """
        found = await self._within(self.token(), timeout)
        assert found is not None  # noqa: S101  (token() returns a token or raises)
        return found

    @staticmethod
    async def _within(
        work: Awaitable[AccessToken | None], timeout: float | None, *, answered: bool = False
    ) -> AccessToken | None:
        # within (asyncio.wait), not wait_for: wait_for on 3.10/3.11 can swallow a
        # cancellation that arrives as the token does, and a cancelled batch would go on.
        fetch = await within(work, timeout)
        if fetch is None:
            if answered:
                return None  # the call's time is up: the answer it has is the answer
            raise TransportError(
                "timed out waiting for an access token, nothing sent", maybe_sent=False
            )
        try:
            return fetch.result()
        except InvoicingError as exc:
            error = without_token(exc)  # the core says what the call failed with
            if error is exc:
                raise
            raise error from exc

    async def _token_request(self, refresh_with: AccessToken | None) -> AccessToken:
        """One grant for the cache: a refresh of ``refresh_with``, or client credentials.

        The token endpoint is idempotent: a ``READ`` for the decision core. A refresh
        gets one attempt (on any failure the cache falls back to client credentials);
        client credentials are retried as ``token_retry`` says, on failures that may
        pass (connection failures, 429, 5xx, an unreadable answer).

        The refresh token is read from ``refresh_with`` where it is used and never held
        in a local variable: tracebacks formatted with locals must not show it.
        """
        clock = self._tokens.cache.clock
        policy = self._token_retry
        if refresh_with is not None:
            policy = attrs.evolve(policy, max_attempts=1)

        async def attempt(timeout: float | None) -> AccessToken:
            request = proto.build_token_request(
                self._base_url,
                self._client_id,
                self._client_secret,
                refresh_with.refresh_token if refresh_with is not None else None,
            )
            obtained_at = clock()
            response = await self._transport.send(request, timeout=timeout)
            token: AccessToken = self._checked(
                lambda r: proto.parse_token_response(
                    r, obtained_at=obtained_at, previous=refresh_with
                ),
                response,
            )
            return token

        attempts = Attempts(
            Safety.READ,
            policy,
            subject="the token request",
            find_out="request a token again",
        )
        grant = "client_credentials" if refresh_with is None else "refresh_token"
        fields = {"invoicing.issuer": self._client_id, "invoicing.grant": grant}
        with calls.calling("invoicing.token", "token", fields) as call:
            end = await drive(
                attempts,
                attempt,
                subject=Named("token request", fields),
                log=auth_log,
                retry_level=logging.DEBUG,
            )
            call.ended(end)
        return _answer(end)

    def _checked(
        self,
        parse: Callable[[proto.Response], Any],
        response: proto.Response,
        reauth_in: float | None = None,
    ) -> Any:
        """What ``parse`` reads from ``response``; its error as :meth:`_told` tells it."""
        try:
            return parse(response)
        except InvoicingError as exc:
            raise self._told(exc, reauth_in) from None

    def _told(self, error: InvoicingError, reauth_in: float | None) -> InvoicingError:
        """``error`` with the issuer's secrets scrubbed.

        A 401 that a revoked token may have caused also says when a new token may be
        requested (``reauth_in``).
        """
        error = redact_error(error, self._secrets())
        if reauth_in is not None and isinstance(error, AuthenticationError):
            error = self._no_new_token(error, reauth_in)
        return error

    def _no_new_token(self, error: AuthenticationError, reauth_in: float) -> AuthenticationError:
        """A 401 that may be the token's fault, when no new token may be requested yet."""
        cooldown = self._tokens.cache.reauth_cooldown
        return AuthenticationError(
            f"{error.message} (the access token may be at fault, a provider may revoke "
            f"tokens, but a 401 may force a new one only once per reauth_cooldown "
            f"({cooldown:g} s): the next in {reauth_in:.1f} s)",
            status=error.status,
            body=error.body,
            error=error.error,
            error_description=error.error_description,
            reauth_in=reauth_in,
        )

    def _secrets(self) -> list[str]:
        secrets = [self._client_secret, *self._recent_secrets]
        token = self._tokens.peek()
        if token is not None:
            secrets.append(token.value)
            if token.refresh_token:
                secrets.append(token.refresh_token)
        return secrets


class Channels(Protocol):
    """Which channel sends a document of an issuer: a client's, or a pool's.

    :class:`OneIssuer` or :class:`~.issuers.Issuers`: what a batch, a single call and
    an outbox worker take a document's channel from.
    """

    @property
    def max_issuers(self) -> int:
        """Idle issuers whose channel is kept at most (0: one issuer).

        A batch keeps as many idle issuers' lanes: a lane holds the issuer's limit,
        pause, breaker and budget while it holds no document, so that its documents
        coming again find it as it was.
        """

    @property
    def per_issuer(self) -> bool:
        """Whether documents go to the issuer they name (a pool), not one issuer.

        Each issuer then has its own breaker, retry budget, re-authentication waits and
        in-flight limit, and issuers take turns. ``False``: one issuer sends them all (a
        client).
        """

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

    #: One issuer: no idle ones are kept apart.
    max_issuers = 0
    #: Every document goes to the one issuer.
    per_issuer = False

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def __repr__(self) -> str:
        return f"<OneIssuer {self.channel!r}>"

    async def acquire(self, issuer: str | None) -> Channel:  # noqa: ARG002  (one issuer)
        """The client's channel."""
        return self.channel

    def release(self, channel: Channel) -> None:
        """Nothing to release."""


def _answer(end: End) -> AccessToken:
    """A token grant's ending: the token, or its error raised."""
    if end.status is OutcomeStatus.ACCEPTED:
        token: AccessToken = end.result
        return token
    assert end.error is not None  # noqa: S101  (every other ending carries one)
    raise end.error
