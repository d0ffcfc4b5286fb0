"""``IssuerPool``: one process, many issuers.

The pool owns what every issuer shares — one connection pool, one provider key, one
token cache — and hands each document to the issuer it names (``Issuer.Vat``, or the
``issuer=`` given): that issuer's channel, made on first use from the credentials
resolver and closed when idle (:mod:`._issuers`). Its document methods are a
:class:`~._surface.Submitter`'s, written once for a client and a pool; batches mix
issuers and isolate them from each other (:mod:`._batch`); operations run through
:meth:`IssuerPool.client`, an :class:`~invoicing_async.InvoicingClient` of one issuer on
the pool's connections. A :class:`~invoicing_async.Deferral` and an outbox worker serve
every issuer of the pool. This module only wires and documents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from invoicing_async._core import protocol as proto
from invoicing_async._io.issuers import Issuers

from .client import borrowed_client
from .engine import Engine
from .surface import Submitter

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from typing_extensions import Unpack

    from invoicing_async._core.retry import RetryPolicy
    from invoicing_async._io.tokencache import TokenCache
    from invoicing_async._io.transport import Transport

    from .client import InvoicingClient
    from .engine import ClientOptions

__all__ = ["IssuerPool"]


class IssuerPool(Submitter):
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
        max_issuers: int = 10_000,
        idle: float = 900.0,
        forget_unknown: float = 60.0,
        recheck_refused: float = 30.0,
        **options: Unpack[ClientOptions],
    ) -> None:
        base_url = proto.check_base_url(base_url)

        def issuers(transport: Transport, cache: TokenCache, token_retry: RetryPolicy) -> Issuers:
            return Issuers(
                base_url,
                credentials,
                transport=transport,
                token_cache=cache,
                token_retry=token_retry,
                max_issuers=max_issuers,
                idle=idle,
                forget_unknown=forget_unknown,
                recheck_refused=recheck_refused,
            )

        self._engine = engine = Engine.of(base_url, options, issuers)
        issuer_channels = engine.channels
        assert isinstance(issuer_channels, Issuers)  # noqa: S101  (made just above)
        self._issuers = issuer_channels

    def __repr__(self) -> str:
        return f"<IssuerPool {self._engine.base_url} issuers={len(self._issuers)}>"

    async def close(self) -> None:
        """Close the connections (if the pool created them) and forget every issuer."""
        self._issuers.clear()
        await self._engine.close()

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
