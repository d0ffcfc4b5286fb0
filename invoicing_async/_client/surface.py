"""What an InvoicingClient and an IssuerPool offer, written once: options and documents.

Both are an :class:`~._engine.Engine` (the connections, the provider key, the token cache,
the issuers' channels) behind the same public surface:

* :class:`~._engine.ClientOptions`: the keywords both constructors take (and their
  blocking twins'), each with its default decided in one place (:meth:`Engine.of
  <invoicing_async._client.engine.Engine.of>`);
* :class:`Submitter`: the document methods — ``submit_secure``, ``submit_json``,
  ``submit_stream``, ``submit_many`` — defined once for both; a keyword is added in one
  place. The single calls are one implementation bound to each endpoint, and
  ``submit_many`` is ``submit_stream`` collected (:func:`bind`, :func:`collected`), so
  their keywords are listed once too.

A :class:`~invoicing_async.Deferral`, an outbox worker and the command reach the
engine of a client or a pool with :func:`engine_of`: explicitly, no registry.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from invoicing_async._doc.document import SendOptions, document_key
from invoicing_async._durable.ledger import ledger_journal
from invoicing_async._send.batch import BatchOptions

if TYPE_CHECKING:
    import datetime as dt
    import os
    from collections.abc import (
        AsyncGenerator,
        AsyncIterable,
        Callable,
        Coroutine,
        Iterable,
    )
    from types import TracebackType

    from invoicing_async._core.models import DocumentResult
    from invoicing_async._core.outcomes import BatchProgress, Outcome
    from invoicing_async._core.retry import RetryPolicy
    from invoicing_async._doc.document import Document
    from invoicing_async._durable.ledger import Ledger
    from invoicing_async._io.tokencache import TokenCache
    from invoicing_async._send.journal import Journal

    from .engine import Engine

__all__ = ["Submitter", "bind", "collected", "engine_of", "present"]

P = ParamSpec("P")
S = TypeVar("S")
T = TypeVar("T")
V = TypeVar("V")
_Self = TypeVar("_Self", bound="Submitter")


def bind(
    implementation: Callable[Concatenate[S, V, P], Coroutine[Any, Any, T]],
    value: V,
    *,
    name: str,
    doc: str,
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """A method that is ``implementation`` with its first argument after ``self`` bound.

    Two public methods that differ by one value (``submit_secure`` and ``submit_json``:
    the endpoint) keep one signature and one body. Its signature, as ``inspect`` and the
    documentation read it, is the implementation's without that argument.
    """

    async def method(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await implementation(self, value, *args, **kwargs)

    signature = inspect.signature(implementation)
    parameters = list(signature.parameters.values())
    present(
        method,
        signature.replace(
            parameters=[parameters[0], *parameters[2:]],
            return_annotation=_awaited(signature.return_annotation),
        ),
    )
    method.__name__ = name
    method.__qualname__ = implementation.__qualname__.rsplit(".", 1)[0] + "." + name
    method.__doc__ = doc
    method.__module__ = implementation.__module__
    return method


def present(function: Callable[..., Any], signature: inspect.Signature) -> None:
    """Have ``inspect`` and the documentation read ``signature`` as ``function``'s.

    Its annotations too: those of a generic wrapper (``P.args``, ``T``) would win over
    the signature's where the documentation resolves them.
    """
    function.__signature__ = signature  # type: ignore[attr-defined]
    function.__annotations__ = {
        name: parameter.annotation
        for name, parameter in signature.parameters.items()
        if parameter.annotation is not inspect.Parameter.empty
    } | {"return": signature.return_annotation}


def _awaited(annotation: Any) -> Any:
    """What a coroutine annotated ``annotation`` gives when awaited (as it is documented).

    An implementation that hands back its inner coroutine says ``Coroutine[Any, Any, X]``;
    the method, ``X``.
    """
    prefix = "Coroutine[Any, Any, "
    if isinstance(annotation, str) and annotation.startswith(prefix):
        return annotation[len(prefix) : -1]
    return annotation


def collected(
    stream: Callable[Concatenate[S, P], AsyncGenerator[Outcome, None]], *, name: str, doc: str
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, list[Outcome]]]:
    """A method that collects what ``stream`` yields, in input order.

    ``submit_many`` is ``submit_stream`` collected: the same keywords, listed once.
    """

    async def many(self: S, /, *args: P.args, **kwargs: P.kwargs) -> list[Outcome]:
        async with contextlib.aclosing(stream(self, *args, **kwargs)) as outcomes:
            found = [outcome async for outcome in outcomes]
        found.sort(key=lambda outcome: outcome.index)
        return found

    present(many, inspect.signature(stream).replace(return_annotation="list[Outcome]"))
    many.__name__ = name
    many.__qualname__ = stream.__qualname__.rsplit(".", 1)[0] + "." + name
    many.__doc__ = doc
    many.__module__ = stream.__module__
    return many


class Submitter:
    """The document methods of a client and a pool, over their engine."""

    _engine: Engine

    @property
    def base_url(self) -> str:
        """The environment's base URL."""
        return self._engine.base_url

    @property
    def token_cache(self) -> TokenCache:
        """The token cache its tokens live in (shared with other clients, or its own)."""
        return self._engine.cache

    async def __aenter__(self: _Self) -> _Self:  # noqa: PYI019  (Self: typing_extensions on 3.10)
        await engine_of(self).transport.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP session if it was made here (not a caller's ``session``)."""
        await self._engine.close()

    # --- one document ------------------------------------------------------------------

    def _submit(
        self,
        encrypted: bool,
        document: Document,
        *,
        issuer: str | None = None,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> Coroutine[Any, Any, DocumentResult]:
        options = SendOptions(encrypted=encrypted, send_method=send_method, time_stamp=time_stamp)
        return self._engine.submit(document, options, issuer=issuer, retry=retry, timeout=timeout)

    submit_secure = bind(
        _submit,
        True,  # noqa: FBT003  (the endpoint: /Invoice/secure)
        name="submit_secure",
        doc="""Encrypt ``document`` to the provider and ``POST /Invoice/secure``.

        Failures that may pass are retried as :class:`~invoicing_async.RetryPolicy`
        says, safely: the provider answers a document it already holds with 409 and its
        record, and a 409 after this call's own earlier attempt returns that record.

        :param document: a JSON-serialisable mapping, or the exact bytes to send.
        :param issuer: the issuer (TIN) whose document it is, when it does not name it
            in ``Issuer.Vat`` (or to override it). A pool sends it with that issuer's
            credentials; a client, whose credentials are its own, names it in the
            outcome.
        :param send_method: passed through as the ``sendMethod`` query parameter.
        :param time_stamp: ``timeStamp`` query parameter; an aware datetime is sent as
            ISO 8601 UTC with milliseconds.
        :param retry: this call's retry policy (default: the client's ``retry``).
        :param timeout: seconds for the whole call, retries and waits included; no
            attempt or backoff outlasts it. ``None``: bounded by the policy alone.
        :returns: the provider's result record for this document.
        :raises DuplicateDocumentError: the provider held the document before this call;
            its ``result`` is the original record when the provider sends it.
        :raises UnknownOutcomeError: retries ran out after a failure that may have been
            committed; re-send the identical document later to find out.
        :raises UnknownIssuerError: a pool has no credentials for the issuer; nothing
            was sent.
        :raises InvoicingError: any other failure, typed (see the error tree): the
            document was refused, or certainly not committed.

        .. versionchanged:: 0.2.0 retries safely; ``retry`` and ``timeout``.
        .. versionchanged:: 0.5.0 a client takes ``issuer`` too.
        """,
    )
    submit_json = bind(
        _submit,
        False,  # noqa: FBT003  (the endpoint: /Invoice/json)
        name="submit_json",
        doc=""":meth:`submit_secure` to ``POST /Invoice/json``: the document unencrypted.""",
    )

    # --- many documents ----------------------------------------------------------------

    async def submit_stream(
        self,
        documents: Iterable[Any] | AsyncIterable[Any],
        *,
        concurrency: int = 32,
        encrypted: bool = True,
        ledger: str | os.PathLike[str] | Ledger | None = None,
        retry: RetryPolicy | None = None,
        deadline: float | None = None,
        on_progress: Callable[[BatchProgress], object] | None = None,
        send_method: str | None = None,
        time_stamp: dt.datetime | str | None = None,
        key: Callable[[Any], str] = document_key,
        max_document_size: int | None = None,
        check: bool = False,
    ) -> AsyncGenerator[Outcome, None]:
        """Submit documents with bounded concurrency, yielding outcomes as they settle.

        A failure of one document never raises: it is in that document's
        :class:`~invoicing_async.Outcome`. Only cancellation and programming errors
        propagate. Each document goes to the issuer it names (``Issuer.Vat``, or a
        :class:`~invoicing_async.Submission`'s ``issuer``): a pool sends it with that
        issuer's credentials (one without credentials ends ``not_sent`` with an
        :class:`~invoicing_async.UnknownIssuerError`, before any request), issuers
        isolated from each other and served fairly (see :doc:`/guides/many-issuers`).

        :param documents: any iterable or async iterable of documents, consumed lazily:
            memory is bounded by ``concurrency``, not by the input. A
            :class:`~invoicing_async.Submission` among them is sent with its own options.
        :param concurrency: documents in flight at once (at most the connection pool size).
        :param encrypted: ``/Invoice/secure`` (default) or ``/Invoice/json``.
        :param ledger: a ledger file path (or a :class:`~invoicing_async.Ledger`):
            every document's ``sending`` is recorded before its request and its outcome
            after. Running the same batch again with it skips what is final, re-sends
            what was in flight (``409`` is then its own commit) and what failed for
            reasons that are not the document's. One process at a time sends from a
            ledger (a second gets :class:`~invoicing_async.LedgerError` at once).
        :param retry: a :class:`~invoicing_async.RetryPolicy` (default: ``RetryPolicy()``).
        :param deadline: seconds for the whole batch; documents not sent by then end
            ``NOT_SENT`` (or ``UNKNOWN`` if an earlier attempt may have been committed).
        :param on_progress: called with a :class:`~invoicing_async.BatchProgress` after
            every settled document.
        :param key: the identity of a document (default: :func:`document_key`).
        :param max_document_size: the largest document sent, in bytes (default: the
            client's): a larger one ends ``rejected`` with
            :class:`~invoicing_async.DocumentTooLargeError`, and the others go on.
        :param check: check each document before it is sent (the errors of
            :func:`invoicing_async.documents.check`): one the provider would refuse ends
            ``rejected`` with :class:`~invoicing_async.InvalidDocumentError`, unsent, and
            the others go on (as :func:`invoicing_async.documents.checked` does for one).

        Close the generator (``async with contextlib.aclosing(...)``) to stop early: the
        workers are cancelled and documents in flight are recorded as unknown.

        .. versionchanged:: 0.3.0 ``ledger`` (``journal`` is deprecated);
           :class:`~invoicing_async.Submission` inputs.
        .. versionchanged:: 0.4.0 ``journal`` is removed; ``max_document_size``.
        .. versionchanged:: 0.5.0 ``check``.
        """
        engine = self._engine
        options = BatchOptions(
            concurrency=concurrency,
            send=SendOptions(encrypted=encrypted, send_method=send_method, time_stamp=time_stamp),
            retry=engine.policy(retry, batch=True),
            deadline=deadline,
            on_progress=on_progress,
            key=key,
            max_document_size=max_document_size,
            check=check,
        )
        async with contextlib.AsyncExitStack() as stack:
            journal: Journal | None = None
            if ledger is not None:  # opened here: the engine knows no ledger
                engine.transport.ensure_usable()  # before the ledger is locked
                resend = options.retry.resend_ambiguous
                journal = await stack.enter_async_context(
                    ledger_journal(ledger, resend_ambiguous=resend)
                )
            run = engine.batch(options, journal).run(documents)
            outcomes = await stack.enter_async_context(contextlib.aclosing(run))
            async for outcome in outcomes:
                yield outcome

    submit_many = collected(
        submit_stream,
        name="submit_many",
        doc="""Submit many documents; one :class:`~invoicing_async.Outcome` each, in order.

        :meth:`submit_stream`, its outcomes collected and sorted by input position: the
        same parameters. A failure of one document never raises: it is in that
        document's outcome.
        """,
    )


def engine_of(owner: object) -> Engine:
    """The engine of a client or a pool (what a deferral and an outbox worker use).

    :raises TypeError: ``owner`` is neither.
    """
    if not isinstance(owner, Submitter):
        raise TypeError(f"expected an InvoicingClient or an IssuerPool, not {type(owner).__name__}")
    return owner._engine  # noqa: SLF001  (this module's class)
