"""Many issuers: each one's channel, made on first use from a credentials resolver.

An :class:`~invoicing_async.IssuerPool` serves any number of issuers over one
connection pool, one provider key and one token cache; what belongs to one issuer is its
:class:`~._channel.Channel` (its TIN as ``client_id``, its API key, its view of the
token cache). :class:`Issuers` makes a channel the first time an issuer is used, from
the resolver — a mapping ``{tin: api_key}``, or a callable (async or not) that returns
the API key of a TIN or ``None`` — called once per issuer while its channel lives, once
for any number of concurrent first uses.

Channels are kept while in use (:meth:`Issuers.acquire` / :meth:`Issuers.release`)
and, once idle, for ``idle`` seconds and up to ``max_issuers`` of them, least recently
used first out: memory stays bounded whatever the number of issuers ever seen. An
evicted issuer's token is dropped from the cache too (its lifetime is about as long as
the idle time); with a shared token store (Redis) the fleet still holds it.

An issuer the resolver does not know, or that it fails for, is a
:class:`~invoicing_async.UnknownIssuerError` for that issuer's documents before any
request: remembered for ``forget_unknown`` seconds, so a batch of such documents asks
the resolver once, not once each.

A key that cannot be sent (too long for a header, a character a header cannot carry:
:func:`~._protocol.check_api_key`) is a :class:`~invoicing_async.CredentialsError` of its
issuer, before any request, remembered as an unknown issuer is: its documents are not
sent, as when the provider refuses the key, and never end as a refusal of theirs.

Keys change while a pool runs (rotated by the issuer, revoked and replaced): an issuer
whose credentials the token endpoint refused is resolved again at its next use, at most
once every ``recheck_refused`` seconds; when the resolver gives another key, the issuer
gets a new channel with it (the old key's token is forgotten), and its documents go with
the new key. :meth:`Issuers.reload` (``IssuerPool.reload_credentials``, ``SIGHUP`` in
the command) has every issuer resolved again at its next use, and a resolver that watches
its source (a :class:`~._credentials.CredentialsFile`, watched while the pool is in use)
does so whenever the source changes; :meth:`Issuers.changed` tells a worker waiting for
an issuer. No key is logged, and no file is read on the event loop.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

from invoicing_async._core import protocol as proto
from invoicing_async._core.errors import CredentialsError, UnknownIssuerError
from invoicing_async._core.log import auth as log

from .channel import Channel

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable  # noqa: TC004  (the alias below is a type only)

    from invoicing_async._core.retry import RetryPolicy

    from .tokencache import TokenCache
    from .transport import Transport

__all__ = ["CredentialsResolver", "Issuers", "Reloadable", "check_issuer"]

#: Where an :class:`~invoicing_async.IssuerPool` finds each issuer's API key: a mapping
#: ``{tin: api_key}``, or a callable (async or not) that returns the API key of a TIN, or
#: ``None`` for an issuer it does not know.
#:
#: .. versionadded:: 0.4.0
CredentialsResolver = Union[  # noqa: UP007  (a runtime alias: documented, and 3.10's)
    Mapping[str, str],
    Callable[[str], Union[Awaitable[str | None], str | None]],  # noqa: UP007
]


#: What a pool refuses an issuer with before any request: no credentials, or a key that
#: cannot be sent.
Refusal = Union[UnknownIssuerError, CredentialsError]  # noqa: UP007  (a runtime alias)


@runtime_checkable
class Reloadable(Protocol):
    """A resolver that reads a source it can read again (a credentials file), off the loop.

    A protocol with one implementation, :class:`~invoicing_async.CredentialsFile`: it
    lives in ``_client``, above this folder, which an import of it would climb to.
    """

    #: How many times the credentials it holds changed (read again, and different).
    revision: int

    def reload(self) -> asyncio.Future[bool]:
        """Read the source again; done with whether the credentials changed."""

    def start(self, listener: Callable[[], object]) -> None:
        """Watch the source on the running loop; ``listener`` is told of every change."""

    def stop(self) -> None:
        """Stop watching the source."""


class _Slot:
    __slots__ = ("channel", "checked", "distrusted", "revision", "used", "users")

    def __init__(self, channel: Channel, used: float, revision: int) -> None:
        self.channel = channel
        self.used = used
        self.users = 0
        #: The credentials' revision its channel was resolved at (see ``Issuers.reload``).
        self.revision = revision
        #: When the resolver was last asked for it.
        self.checked = used
        #: The provider refused its requests (401/403): resolve it again when due.
        self.distrusted = False


class Issuers:
    """The channels of the issuers in use, made from a resolver (see the module docstring).

    :param max_issuers: idle channels kept at most (the least recently used go first).
    :param idle: seconds an idle channel is kept.
    :param forget_unknown: seconds an unknown issuer's refusal is remembered.
    :param recheck_refused: seconds at least between two questions to the resolver about
        an issuer whose credentials the token endpoint refused.
    """

    def __init__(
        self,
        base_url: str,
        resolver: CredentialsResolver,
        *,
        transport: Transport,
        token_cache: TokenCache,
        token_retry: RetryPolicy,
        max_issuers: int = 10_000,
        idle: float = 900.0,
        forget_unknown: float = 60.0,
        recheck_refused: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_issuers < 1 or min(idle, forget_unknown, recheck_refused) < 0:
            raise ValueError(
                "max_issuers must be positive; idle, forget_unknown and recheck_refused "
                "not negative"
            )
        self._base_url = base_url
        self._resolver = resolver
        #: The resolver, if it reads a source it can read again (a credentials file).
        self._source = _reloadable(resolver)
        #: The source's revision this pool's revision has taken in.
        self._source_revision = self._source.revision if self._source is not None else 0
        self._transport = transport
        self._cache = token_cache
        self._token_retry = token_retry
        self._max = max_issuers
        self._idle = idle
        self._forget_unknown = forget_unknown
        self._recheck = recheck_refused
        self._clock = clock
        #: Bumped by :meth:`reload` (and a resolver's source changed): every issuer is
        #: resolved again at its next use.
        self._revision = 0
        self._slots: dict[str, _Slot] = {}
        #: The issuers whose documents wait for an operator (refused or no credentials),
        #: as the outbox workers sending through this pool keep them: by TIN.
        self.waiting: dict[str, Any] = {}
        #: The slots no one uses, least recently used first: the only ones ever closed.
        #: Slots in use are not in it, so closing never scans past them.
        self._unused: collections.OrderedDict[str, _Slot] = collections.OrderedDict()
        self._resolving: dict[str, asyncio.Future[Channel]] = {}
        self._unknown: collections.OrderedDict[str, tuple[float, Refusal]] = (
            collections.OrderedDict()
        )
        #: Done at the next change of the credentials (see :meth:`changed`).
        self._change: asyncio.Future[None] | None = None

    #: Documents go to the issuer they name (see :class:`~.channel.Channels`).
    per_issuer = True

    def __repr__(self) -> str:
        return f"<Issuers {self._base_url} in use={len(self._slots)}>"

    @property
    def max_issuers(self) -> int:
        """Idle issuers whose channel is kept at most."""
        return self._max

    def __len__(self) -> int:
        """Issuers whose channel is kept now."""
        return len(self._slots)

    @property
    def recheck_refused(self) -> float:
        """Seconds at least between two questions about an issuer whose key was refused."""
        return self._recheck

    @property
    def revision(self) -> int:
        """How many times the credentials were reloaded (or their source changed)."""
        return self._revision

    def distrust(self, issuer: str) -> None:
        """The provider refused ``issuer``'s requests (a batch stopped its documents).

        Its credentials are resolved again at its next use once ``recheck_refused``
        seconds have passed, as those the token endpoint refused: a key revoked while
        its tokens still lived is replaced too.
        """
        slot = self._slots.get(issuer)
        if slot is not None:
            slot.distrusted = True

    def reload(self) -> None:
        """Resolve every issuer again at its next use: keys were rotated (``SIGHUP``).

        Issuers the resolver did not know are asked about again too. A resolver that
        reads a source (a credentials file) reads it again, off the event loop (many
        reloads meanwhile make one more read), and all this happens once it is read.
        """
        if self._source is not None:
            self._source.reload().add_done_callback(lambda _: self._changed())
        else:
            self._changed()

    def refresh(self) -> int:
        """The revision, once what the resolver's source read is taken in (no I/O).

        A source that changed (a credentials file read again) has every issuer
        resolved again at its next use.
        """
        source = self._source
        if source is not None and source.revision != self._source_revision:
            self._source_revision = source.revision
            self._changed()
        return self._revision

    def changed(self) -> asyncio.Future[None]:
        """Done at the next change of the credentials: a reload, or the source changed."""
        loop = asyncio.get_running_loop()
        if self._change is None or self._change.done() or self._change.get_loop() is not loop:
            self._change = loop.create_future()
        return self._change

    def _changed(self) -> None:
        self._revision += 1
        self._unknown.clear()
        if self._change is not None and not self._change.done():
            self._change.set_result(None)

    async def acquire(self, issuer: str | None) -> Channel:
        """The channel of ``issuer``, kept until :meth:`release`.

        :raises UnknownIssuerError: no issuer, or the resolver does not know it (or fails).
        :raises CredentialsError: the resolver gave a key that cannot be sent.
        """
        if self._source is not None:
            self._source.start(self.refresh)  # watched while the pool is used
            self.refresh()
        if issuer is None:
            raise UnknownIssuerError(
                "the document names no issuer (Issuer.Vat) and none was given (issuer=)",
                issuer=None,
            )
        slot = self._slots.get(issuer)
        if slot is not None and self._stale(slot):
            slot = await self._renewed(issuer, slot)
        if slot is None:
            channel = await self._resolved(issuer)
            slot = self._slots.get(issuer)
            if slot is None:
                slot = self._slots[issuer] = _Slot(channel, self._clock(), self._revision)
        if not slot.users:
            self._unused.pop(issuer, None)
        slot.users += 1
        return slot.channel

    def release(self, channel: Channel) -> None:
        """``channel`` is no longer used by this caller; idle ones may be closed."""
        issuer = channel.client_id
        slot = self._slots.get(issuer)
        if slot is not None and slot.channel is channel and slot.users:
            slot.users -= 1
            if not slot.users:
                slot.used = self._clock()
                self._unused[issuer] = slot  # the most recently used: last
        self._evict()

    def clear(self) -> None:
        """Forget every channel (the pool closed); stop watching the resolver's source."""
        if self._source is not None:
            self._source.stop()
        for slot in self._slots.values():
            slot.channel.tokens.forget()
        self._slots.clear()
        self._unused.clear()
        self._unknown.clear()

    # --- internals -------------------------------------------------------------------------

    def _stale(self, slot: _Slot) -> bool:
        """Whether to ask the resolver again: reloaded since, or its key refused."""
        if slot.revision != self._revision:
            return True
        refused = slot.distrusted or slot.channel.tokens.refused()
        return refused and self._clock() - slot.checked >= self._recheck

    async def _renewed(self, issuer: str, slot: _Slot) -> _Slot | None:
        """The resolver asked again about ``issuer``: its slot, a new one, or ``None``.

        The same key keeps the slot (and its token's state); another key replaces it (the
        old key's token forgotten; its users finish with it). An issuer the resolver no
        longer knows loses its slot: the caller resolves it anew, and is refused.
        """
        slot.revision, slot.checked, slot.distrusted = self._revision, self._clock(), False
        try:
            channel = await self._resolved(issuer)
        except (UnknownIssuerError, CredentialsError):
            self._drop(issuer, slot)
            return None
        if self._slots.get(issuer) is not slot:  # replaced meanwhile by another caller
            return self._slots.get(issuer)
        if channel.tokens.key == slot.channel.tokens.key:
            return slot
        log.info(
            "issuer %s: the credentials resolver gave another API key: its documents are "
            "sent with it",
            issuer,
            extra={"invoicing.issuer": issuer},
        )
        self._drop(issuer, slot)
        fresh = self._slots[issuer] = _Slot(channel, self._clock(), self._revision)
        return fresh

    def _drop(self, issuer: str, slot: _Slot) -> None:
        """Let go of ``slot``: its users finish with its channel; its token is forgotten."""
        if self._slots.get(issuer) is slot:
            del self._slots[issuer]
        self._unused.pop(issuer, None)
        slot.channel.tokens.forget()

    async def _resolved(self, issuer: str) -> Channel:
        """A new channel for ``issuer``: one resolver call for every concurrent caller.

        A mapping, or a callable that answers at once, gives it here without a task or a
        suspension: a batch reading the documents of 10,000 new issuers does not wait a
        turn of the event loop for each. An async resolver's answer is awaited once for
        every concurrent caller.
        """
        known = self._unknown.get(issuer)
        if known is not None:
            when, refusal = known
            if self._clock() - when < self._forget_unknown:
                raise _copy(refusal)
            del self._unknown[issuer]
        try:
            pending = self._resolving.get(issuer)
            if pending is None or pending.get_loop() is not asyncio.get_running_loop():
                answer = self._ask(issuer)
                if not inspect.isawaitable(answer):
                    return self._channel(issuer, answer)
                pending = asyncio.ensure_future(self._answered(issuer, answer))
                self._resolving[issuer] = pending
                pending.add_done_callback(lambda _: self._resolving.pop(issuer, None))
            return await asyncio.shield(pending)
        except (UnknownIssuerError, CredentialsError) as exc:
            raise _copy(exc) from exc.__cause__

    def _ask(self, issuer: str) -> Any:
        """The resolver's answer for ``issuer`` (an awaitable, from an async resolver)."""
        problem = check_issuer(issuer)
        if problem is not None:
            raise self._refused(issuer, UnknownIssuerError(problem, issuer=None))
        try:
            if isinstance(self._resolver, Mapping):
                return self._resolver.get(issuer)
            return self._resolver(issuer)
        except Exception as exc:
            raise self._refused(issuer, _failed(issuer, exc)) from exc

    async def _answered(self, issuer: str, answer: Awaitable[Any]) -> Channel:
        """The channel for what an async resolver answers."""
        try:
            secret = await answer
        except Exception as exc:
            raise self._refused(issuer, _failed(issuer, exc)) from exc
        return self._channel(issuer, secret)

    def _channel(self, issuer: str, secret: Any) -> Channel:
        """The channel of ``issuer`` with the API key the resolver gave, if it is one."""
        if not secret:
            raise self._refused(
                issuer,
                UnknownIssuerError(
                    f"no credentials for issuer {issuer}: the credentials resolver does not "
                    "know it",
                    issuer=issuer,
                ),
            )
        problem = proto.check_api_key(secret) if isinstance(secret, str) else "not text"
        if problem is not None:
            del secret  # a traceback formatted with locals must not show it
            raise self._refused(
                issuer,
                CredentialsError(
                    f"the credentials resolver gave issuer {issuer} an API key that cannot "
                    f"be sent: {problem}"
                ),
            )
        log.debug("issuer %s: credentials resolved", issuer, extra={"invoicing.issuer": issuer})
        return Channel(
            self._base_url,
            issuer,
            secret,
            transport=self._transport,
            token_cache=self._cache,
            token_retry=self._token_retry,
        )

    def _refused(self, issuer: str, refusal: Refusal) -> Refusal:
        """Remember ``refusal`` for ``forget_unknown`` seconds.

        At most as many refusals are kept as channels.
        """
        self._unknown[issuer] = (self._clock(), refusal)
        while len(self._unknown) > self._max:
            self._unknown.popitem(last=False)
        return refusal

    def _evict(self) -> None:
        """Close idle channels: past ``idle`` seconds, or the least recently used.

        The least recently used go while more than ``max_issuers`` are kept. Channels in
        use stay. Called at every release (a batch of many issuers releases one per
        document), it costs what it closes, whatever the number of issuers kept.
        """
        now = self._clock()
        unused = self._unused
        while unused:
            issuer, slot = next(iter(unused.items()))
            if len(self._slots) <= self._max and now - slot.used < self._idle:
                break  # least recently used first: the rest are fresher
            del unused[issuer]
            del self._slots[issuer]
            slot.channel.tokens.forget()


def _reloadable(resolver: object) -> Reloadable | None:
    return resolver if isinstance(resolver, Reloadable) else None


def check_issuer(issuer: str) -> str | None:
    """Why ``issuer`` cannot be a TIN sent as a ``client_id``, or ``None``."""
    if not issuer or len(issuer) > 64 or any(ord(c) < 33 or ord(c) == 127 for c in issuer):
        return f"not an issuer's tax number: {issuer[:64]!r}"
    return None


def _failed(issuer: str, exc: Exception) -> UnknownIssuerError:
    """The refusal of an issuer the resolver failed for (its exception is the cause)."""
    return UnknownIssuerError(
        f"no credentials for issuer {issuer}: the credentials resolver failed "
        f"({type(exc).__name__})",
        issuer=issuer,
    )


def _copy(error: Refusal) -> Refusal:
    """A refusal of its own for each caller (a shared exception's traceback grows)."""
    return copy.copy(error)  # its attributes, without its traceback
