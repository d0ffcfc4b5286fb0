"""The client for synchronous code: :class:`BlockingClient`, and :class:`BlockingPool`.

Django and Flask views, Celery tasks and plain scripts call functions, not coroutines.
A :class:`BlockingClient` runs one :class:`~invoicing_async.InvoicingClient` on one
event loop in a background thread (the shape of anyio's blocking portal) and gives every
thread of the process a blocking call into it::

    from invoicing_async.blocking import BlockingClient

    invoicing = BlockingClient.from_env()       # once, when the application starts

    def checkout(request):                      # any thread of the WSGI server
        result = invoicing.submit_secure(invoice, timeout=20)
        ...

    invoicing.close()                           # when the application stops

The guarantees are the async client's: the calls of every thread share one connection
pool and one token cache (a burst of requests after a deploy makes one token request),
retries are as safe, and errors are the same typed errors, raised in the calling thread.

.. versionadded:: 0.3.0
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import typing
import weakref

# Private aliases: the module's namespace holds only its public names.
from ._client import InvoicingClient as _InvoicingClient
from ._documents import document_key as _document_key
from ._env import client_arguments as _client_arguments
from ._errors import ClientStateError as _ClientStateError
from ._pool import IssuerPool as _IssuerPool

if typing.TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Awaitable, Callable, Iterable, Mapping
    from types import TracebackType

    from ._client import InvoicingClient
    from ._documents import Document
    from ._ledger._sqlite_ledger import Ledger
    from ._models import AccessToken, DocumentResult
    from ._outcomes import BatchProgress, Outcome
    from ._retry import RetryPolicy
    from ._tokencache import TokenCache

__all__ = ["BlockingClient", "BlockingPool"]

_T = typing.TypeVar("_T")
_A = typing.TypeVar("_A")
_B = typing.TypeVar("_B", bound="_Blocking[typing.Any]")


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
        self, base_url: str, client_id: str, client_secret: str, **options: typing.Any
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
        return f"<BlockingClient {self._target.base_url} client_id={self._client_id!r}>"

    @property
    def base_url(self) -> str:
        """The environment's base URL."""
        return self._target.base_url

    @property
    def token_cache(self) -> TokenCache:
        """The token cache every call of every thread shares."""
        return self._target.token_cache

    # --- calls -------------------------------------------------------------------------

    def submit_secure(
        self,
        document: Document,
        *,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> DocumentResult:
        """:meth:`~invoicing_async.InvoicingClient.submit_secure`, blocking.

        :raises DuplicateDocumentError: the provider held the document before this call;
            its ``result`` is the original record.
        :raises UnknownOutcomeError: the provider may or may not hold the document:
            re-send the identical document later.
        :raises InvoicingError: any other failure, typed.
        """
        return self._submit(document, send_method, time_stamp, retry, timeout, encrypted=True)

    def submit_json(
        self,
        document: Document,
        *,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> DocumentResult:
        """:meth:`~invoicing_async.InvoicingClient.submit_json`, blocking."""
        return self._submit(document, send_method, time_stamp, retry, timeout, encrypted=False)

    def _submit(
        self,
        document: Document,
        send_method: str | None,
        time_stamp: dt.datetime | str | None,
        retry: RetryPolicy | None,
        timeout: float | None,
        *,
        encrypted: bool,
    ) -> DocumentResult:
        def call(client: InvoicingClient) -> Awaitable[DocumentResult]:
            submit = client.submit_secure if encrypted else client.submit_json
            return submit(
                document, send_method=send_method, time_stamp=time_stamp, retry=retry,
                timeout=timeout,
            )  # fmt: skip

        return self.run(call)

    def submit_many(
        self,
        documents: Iterable[typing.Any],
        *,
        concurrency: int = 32,
        encrypted: bool = True,
        ledger: str | os.PathLike[str] | Ledger | None = None,
        retry: RetryPolicy | None = None,
        deadline: float | None = None,
        on_progress: Callable[[BatchProgress], object] | None = None,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        key: Callable[[typing.Any], str] | None = None,
        max_document_size: int | None = None,
    ) -> list[Outcome]:
        """:meth:`~invoicing_async.InvoicingClient.submit_many`, blocking.

        ``documents`` is read in the calling thread first (database cursors and ORM
        querysets often belong to their thread); ``on_progress`` and ``key`` (by
        default :func:`~invoicing_async.document_key`) are called on the client's event
        loop thread. One outcome per document, in input order.
        """
        items = list(documents)
        identity = _document_key if key is None else key
        return self.run(
            lambda client: client.submit_many(
                items,
                concurrency=concurrency,
                encrypted=encrypted,
                ledger=ledger,
                retry=retry,
                deadline=deadline,
                on_progress=on_progress,
                send_method=send_method,
                time_stamp=time_stamp,
                key=identity,
                max_document_size=max_document_size,
            )
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        json: typing.Any = None,
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> typing.Any:
        """:meth:`~invoicing_async.InvoicingClient.request`, blocking."""
        return self.run(
            lambda client: client.request(method, path, json=json, params=params, timeout=timeout)
        )

    def token(self) -> AccessToken:
        """:meth:`~invoicing_async.InvoicingClient.token`, blocking."""
        return self.run(lambda client: client.token())


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
        return f"<BlockingPool {self._target.base_url}>"

    @property
    def base_url(self) -> str:
        """The environment's base URL."""
        return self._target.base_url

    @property
    def token_cache(self) -> TokenCache:
        """The token cache every issuer's tokens live in."""
        return self._target.token_cache

    def submit_secure(
        self,
        document: Document,
        *,
        issuer: str | None = None,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> DocumentResult:
        """:meth:`~invoicing_async.IssuerPool.submit_secure`, blocking.

        :raises UnknownIssuerError: no credentials for the document's issuer.
        """
        return self.run(
            lambda pool: pool.submit_secure(
                document, issuer=issuer, send_method=send_method, time_stamp=time_stamp,
                retry=retry, timeout=timeout,
            )
        )  # fmt: skip

    def submit_json(
        self,
        document: Document,
        *,
        issuer: str | None = None,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> DocumentResult:
        """:meth:`~invoicing_async.IssuerPool.submit_json`, blocking."""
        return self.run(
            lambda pool: pool.submit_json(
                document, issuer=issuer, send_method=send_method, time_stamp=time_stamp,
                retry=retry, timeout=timeout,
            )
        )  # fmt: skip

    def submit_many(self, documents: Iterable[typing.Any], **options: typing.Any) -> list[Outcome]:
        """:meth:`~invoicing_async.IssuerPool.submit_many`, blocking (its keywords).

        ``documents`` is read in the calling thread first, as
        :meth:`BlockingClient.submit_many` does.
        """
        items = list(documents)
        return self.run(lambda pool: pool.submit_many(items, **options))
