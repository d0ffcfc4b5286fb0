"""What a client gives the layers above it: the named seam of deferrals, workers and batches.

An :class:`Engine` is what an :class:`~invoicing_async.InvoicingClient` is made of
besides its typed methods: the transport, the :class:`~._prepare.Preparer` (the
provider key, and where encryption runs), the default :class:`~invoicing_async.RetryPolicy`
of single calls, and the issuer's :class:`~._channel.Channel`. A
:class:`~invoicing_async.Deferral`, an outbox worker and the CLI use a client only
through its engine (:func:`engine_of`), and only through the methods below:

* :meth:`Engine.prepare`: a document's body, or why it cannot be sent;
* :meth:`Engine.deliver`: send one prepared document within a deadline and say its
  outcome (a single call, a sale);
* :meth:`Engine.batch`: a batch of documents over a journal (a ledger, an outbox's
  claims);
* :meth:`Engine.offline_signature`: sign an offline QR url with the issuer's API key,
  which never leaves the channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import weakref
from typing import TYPE_CHECKING, Any

from ._batch import Batch
from ._delivery import Delivery

if TYPE_CHECKING:
    from collections.abc import Collection

    from ._batch import BatchOptions
    from ._channel import Channel
    from ._decision import Kind
    from ._documents import Prepared
    from ._journal import Journal
    from ._outcomes import Outcome
    from ._prepare import Body, Preparer
    from ._retry import RetryPolicy
    from ._transport import Transport

__all__ = ["Engine", "attach", "engine_of"]


class Engine:
    """One issuer's sending machinery, as the layers above a client use it."""

    def __init__(
        self, transport: Transport, preparer: Preparer, retry: RetryPolicy, channel: Channel
    ) -> None:
        self._transport = transport
        self._preparer = preparer
        self._retry = retry
        self._channel = channel

    def __repr__(self) -> str:
        return f"<Engine {self._channel!r}>"

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy of single calls."""
        return self._retry

    @property
    def channel(self) -> Channel:
        """The issuer's channel (its token, its requests)."""
        return self._channel

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

    async def deliver(
        self,
        prepared: Prepared,
        *,
        deadline: float | None,
        policy: RetryPolicy | None = None,
        decisive: Collection[Kind] = frozenset(),
        grace: float | None = None,
    ) -> Outcome:
        """Send one prepared document until its outcome is known (a single call, a sale).

        :param deadline: loop time by which it must end (``None``: the policy's bounds).
        :param policy: the retry policy (default: the client's).
        :param decisive: kinds of answer that end the attempts at once.
        :param grace: a safety net past ``deadline``: a step outside the delivery's own
            bounds that hangs is cut off then, and the outcome is what it was.
        """
        delivery = Delivery(
            prepared.key,
            0,
            prepared.identity,
            policy=policy or self._retry,
            deadline=deadline,
            decisive=decisive,
        )
        run = delivery.run(functools.partial(self._channel.send, prepared))
        if grace is None or deadline is None:
            return await run
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

    def batch(self, options: BatchOptions, journal: Journal | None) -> Batch:
        """A batch of this client's documents over ``journal`` (``None``: no journal)."""
        return Batch(self._preparer, self._channel, options, journal)

    def offline_signature(self, text: str) -> str:
        """The provider's offline QR signature of ``text`` (see :mod:`invoicing_async.qr`)."""
        return self._channel.offline_signature(text)


_ENGINES: weakref.WeakKeyDictionary[object, Engine] = weakref.WeakKeyDictionary()


def attach(owner: object, engine: Engine) -> None:
    """Make ``engine`` the one :func:`engine_of` finds for ``owner`` (a client)."""
    _ENGINES[owner] = engine


def engine_of(owner: object) -> Engine:
    """The engine of a client.

    :raises TypeError: ``owner`` is not a client of this library.
    """
    try:
        return _ENGINES[owner]
    except (KeyError, TypeError):
        raise TypeError(f"expected an InvoicingClient, not {type(owner).__name__}") from None
