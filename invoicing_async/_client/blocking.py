"""The client for synchronous code: :class:`BlockingClient`, and :class:`BlockingPool`.

The body of :mod:`invoicing_async.blocking` (the guide to it is that face's docstring).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import os
import threading
import typing
import weakref

from invoicing_async._core.errors import ClientStateError as _ClientStateError

# Private aliases: the module's namespace holds only its public names.
from .client import InvoicingClient as _InvoicingClient
from .env import client_arguments as _client_arguments
from .pool import IssuerPool as _IssuerPool
from .surface import Submitter as _Submitter
from .surface import present as _present

if typing.TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
    from types import TracebackType

    from typing_extensions import Unpack

    from invoicing_async._io.tokencache import TokenCache

    from .engine import ClientOptions

__all__ = ["BlockingClient", "BlockingPool"]

_T = typing.TypeVar("_T")
_A = typing.TypeVar("_A", bound=_Submitter)
_B = typing.TypeVar("_B", bound="_Blocking[typing.Any]")
_P = typing.ParamSpec("_P")


class _Portal:
    """An event loop running in a daemon thread, started on first use in a process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0
        self.closed = False

    def submit(self, function: Callable[[], Awaitable[_T]]) -> concurrent.futures.Future[_T]:
        """Schedule ``function()`` on the loop (started if need be); its future.

        Under the lock, so that a :meth:`stop` coming after it finds it running and
        waits for it.
        """
        with self._lock:
            loop = self._started()
            return asyncio.run_coroutine_threadsafe(_awaited(function), loop)

    def _started(self) -> asyncio.AbstractEventLoop:
        """The running loop of this process (call with the lock held)."""
        if self.closed:
            raise _ClientStateError("the client is closed")
        if self._loop is not None and self._pid != os.getpid():
            raise _ClientStateError(
                "this BlockingClient was used before the process forked, and its "
                "event loop stayed in the parent: create the client in each worker "
                "process (or use it only after the fork)"
            )
        if self._loop is None:
            started = threading.Event()
            self._loop = asyncio.new_event_loop()
            self._pid = os.getpid()
            self._thread = threading.Thread(
                target=self._run, args=(self._loop, started), name="invoicing", daemon=True
            )
            self._thread.start()
            started.wait()
        return self._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(started.set)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def stop(self, last: Callable[[], Awaitable[object]]) -> None:
        """Let the calls in flight finish, run ``last()``, stop the loop and its thread.

        New calls are refused from the start.
        """
        if self._thread is threading.current_thread():
            raise _ClientStateError("close a BlockingClient from outside its own calls")
        with self._lock:
            if self.closed:
                return
            self.closed = True
            loop, thread = self._loop, self._thread
            if loop is None or thread is None or self._pid != os.getpid():
                return
        future = asyncio.run_coroutine_threadsafe(_after_the_others(last), loop)
        try:
            future.result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()


async def _awaited(function: Callable[[], Awaitable[_T]]) -> _T:
    return await function()


async def _after_the_others(function: Callable[[], Awaitable[_T]]) -> _T:
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if others:
        await asyncio.wait(others)
    return await function()


def _blocking(
    method: Callable[typing.Concatenate[typing.Any, _P], Coroutine[typing.Any, typing.Any, _T]],
    *,
    read_first: bool = False,
) -> Callable[typing.Concatenate[_Blocking[typing.Any], _P], _T]:
    """The blocking twin of an async method: the same parameters, the same result.

    Each blocking method is made from the method it mirrors, so that its parameters are
    written once. ``read_first``: its ``documents``, an iterable (the first argument, or
    by name), is read in the calling thread before the call (database cursors and ORM
    querysets often belong to their thread).
    """

    def call(self: _Blocking[typing.Any], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        if read_first and args:
            documents = typing.cast("Iterable[typing.Any]", args[0])
            args = (list(documents), *args[1:])  # type: ignore[assignment]
        elif read_first and "documents" in kwargs:
            kwargs["documents"] = list(typing.cast("Iterable[typing.Any]", kwargs["documents"]))
        return self.run(lambda target: method(target, *args, **kwargs))

    _present(call, inspect.signature(method))
    call.__name__ = method.__name__
    call.__qualname__ = f"_Blocking.{method.__name__}"
    call.__doc__ = (
        f":meth:`~invoicing_async.{_home(method)}.{method.__name__}`, blocking: the same "
        "parameters, the same result or typed error, in the calling thread."
        + (" The documents are read in the calling thread first." if read_first else "")
    )
    return call


def _home(method: Callable[..., typing.Any]) -> str:
    """The public class a method of the async API is documented on."""
    owner = method.__qualname__.split(".")[0]
    return "InvoicingClient" if owner in ("Submitter", "InvoicingClient") else owner


class _Blocking(typing.Generic[_A]):
    """What :class:`BlockingClient` and :class:`BlockingPool` share.

    An async object run on one event loop in a background thread, and blocking calls
    into it.
    """

    def __init__(self, target: _A, close: Callable[[], Awaitable[object]]) -> None:
        self._target = target
        self._portal = _Portal()
        # Closes the target at interpreter exit (or when collected) if close() was not
        # called; it holds the portal and the target, not this object.
        self._finalizer = weakref.finalize(self, self._portal.stop, close)

    def __enter__(self: _B) -> _B:  # noqa: PYI019  (Self: typing_extensions on 3.10)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP session and stop the event loop's thread; idempotent.

        Calls made afterwards raise :class:`~invoicing_async.ClientStateError`.
        """
        self._finalizer()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._portal.closed

    def run(self, call: Callable[[_A], Awaitable[_T]]) -> _T:
        """Run ``call(target)`` on the event loop; return its result.

        For what has no method here, e.g. an operation of the async client::

            blocking.run(lambda client: client.request("POST", path, json=body))

        ``call`` runs on the event loop's thread; the caller waits. If the waiting
        thread is interrupted (``KeyboardInterrupt``), the call is cancelled.
        """
        target = self._target
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise _ClientStateError(
                f"{type(self).__name__} was called from a running event loop, which it "
                f"would block: in async code, await an {type(target).__name__}'s methods "
                "instead"
            )
        future = self._portal.submit(lambda: call(target))
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise _ClientStateError("the call was cancelled") from None
        except BaseException:
            future.cancel()
            raise

    @property
    def base_url(self) -> str:
        """The environment's base URL."""
        return self._target.base_url

    @property
    def token_cache(self) -> TokenCache:
        """The token cache every call of every thread shares."""
        return self._target.token_cache

    submit_secure = _blocking(_Submitter.submit_secure)
    submit_json = _blocking(_Submitter.submit_json)
    submit_many = _blocking(_Submitter.submit_many, read_first=True)


def _no_session(options: Mapping[str, typing.Any]) -> None:
    if options.get("session") is not None:
        raise ValueError(
            "a blocking client makes its own HTTP session on its own event loop: leave out session="
        )


class BlockingClient(_Blocking[_InvoicingClient]):
    """An :class:`~invoicing_async.InvoicingClient` for synchronous code, safe to share.

    Takes the same arguments as :class:`~invoicing_async.InvoicingClient` (except
    ``session``: the client makes its own on its own loop). Create one per process (for
    an application, when it starts) and call it from any thread: the calls run
    concurrently on one event loop in a background thread, started at the first call.
    Each method blocks its caller until the async method it mirrors is done, and
    returns its result or raises its error.

    Use it as a context manager, or call :meth:`close` when the application stops.
    A client used before a ``fork`` stays with the parent: create it in each worker
    process (after the fork). Calling it from a coroutine (a running event loop) raises
    :class:`~invoicing_async.ClientStateError`: there, await the async client.

    .. versionadded:: 0.3.0
    """

    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        **options: Unpack[ClientOptions],
    ) -> None:
        _no_session(options)
        client = _InvoicingClient(base_url, client_id, client_secret, **options)
        super().__init__(client, client.close)
        self._client_id = client_id

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **options: typing.Any
    ) -> BlockingClient:
        """A client configured by the ``INVOICING_*`` variables.

        The same as :meth:`InvoicingClient.from_env()
        <invoicing_async.InvoicingClient.from_env>`; ``options`` win over the variables.

        :raises ValueError: a required variable is missing, or a file cannot be read.
        :raises ProviderKeyError: the provider key cannot be used, or fails its pin.
        """
        args, settings = _client_arguments(os.environ if environ is None else environ)
        return cls(*args, **{**settings, **options})

    def __repr__(self) -> str:
        return f"<BlockingClient {self.base_url} client_id={self._client_id!r}>"

    request = _blocking(_InvoicingClient.request)
    token = _blocking(_InvoicingClient.token)
    # The rest of a day (see docs/guides/tills-day.rst); documents_issued, an async
    # iterator, is read with run().
    credit = _blocking(_InvoicingClient.credit)
    update_payment = _blocking(_InvoicingClient.update_payment)
    initiate_instant_payment = _blocking(_InvoicingClient.initiate_instant_payment)
    instant_payment_status = _blocking(_InvoicingClient.instant_payment_status)
    wait_for_instant_payment = _blocking(_InvoicingClient.wait_for_instant_payment)
    document_pdf = _blocking(_InvoicingClient.document_pdf)


class BlockingPool(_Blocking[_IssuerPool]):
    """An :class:`~invoicing_async.IssuerPool` for synchronous code, safe to share.

    Takes the same arguments as :class:`~invoicing_async.IssuerPool` (except ``session``),
    and behaves as :class:`BlockingClient` does: one event loop in a background thread,
    one connection pool and one token cache for every issuer and every thread::

        invoicing = BlockingPool(base_url, credentials, provider_key=key)

        def checkout(request):                      # any thread, any shop
            return invoicing.submit_secure(invoice, timeout=20)   # to its Issuer.Vat

    .. versionadded:: 0.4.0
    """

    def __init__(
        self,
        base_url: str,
        credentials: Mapping[str, str] | Callable[[str], Awaitable[str | None] | str | None],
        **options: typing.Any,
    ) -> None:
        _no_session(options)
        pool = _IssuerPool(base_url, credentials, **options)
        super().__init__(pool, pool.close)

    def __repr__(self) -> str:
        return f"<BlockingPool {self.base_url}>"
