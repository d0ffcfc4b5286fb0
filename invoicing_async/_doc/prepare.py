"""Preparing documents: serialised, encrypted to the provider's key.

:class:`Preparer` turns documents into the bytes to send. Without an
``encrypt_executor`` a document of up to :data:`INLINE_MAX` bytes is encrypted on the
event loop, by the single call that sends it or by a batch's preparing task (paced per
turn of the loop: :mod:`._pacer`): encrypting a 4 KB invoice (~0.1 ms) costs
less than handing it to a thread, which adds no throughput under the GIL and gets the
GIL back from a busy loop only every switch interval. A larger document goes to the
loop's thread pool. With an ``encrypt_executor`` (a process pool that uses every core),
a batch hands chunks of documents over, because the hand-over itself costs about as
much as encrypting a 4 KB invoice.

Each document's failure (it cannot be serialised, or there is no usable key) is kept in
its place, as its :class:`~invoicing_async.InvoicingError`: one bad document never stops
the others.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import time
from typing import TYPE_CHECKING, Any

from invoicing_async._core.errors import MISSING_PROVIDER_KEY, InvoicingError, ProviderKeyError

from .document import DEFAULT_MAX_DOCUMENT_SIZE, serialize_document

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .pgp import ProviderKey

__all__ = ["INLINE_MAX", "Body", "Preparer", "prepare_chunk"]

#: A prepared body: ``(bytes to send, serialised document)``, or why it cannot be sent.
Body = tuple[bytes, bytes] | InvoicingError

#: Largest serialised document a single call encrypts on the event loop (bytes): less
#: CPU than a hand-over to a thread costs for an invoice of that size.
INLINE_MAX = 32 * 1024


class Preparer:
    """Serialises and encrypts documents for one client.

    :param provider_key: the key documents for ``/Invoice/secure`` are encrypted to.
    :param executor: where encryption runs (``None``: the loop's default thread pool).
    :param max_document_size: larger serialised documents are refused, not encrypted.
    """

    def __init__(
        self,
        provider_key: ProviderKey | None,
        executor: concurrent.futures.Executor | None,
        max_document_size: int = DEFAULT_MAX_DOCUMENT_SIZE,
    ) -> None:
        self.provider_key = provider_key
        self.executor = executor
        self.max_document_size = max_document_size

    @property
    def parallelism(self) -> tuple[int, int]:
        """``(documents per chunk, chunks in preparation at once)`` for bulk work.

        Without an ``encrypt_executor`` nothing is handed over (``(1, 0)``): a batch
        prepares its documents on the loop, one at a time with :meth:`prepare_one`, in
        one task ahead of its workers, paced per turn of the loop. Threads add no
        throughput to CPU work under the GIL, and a hand-over per chunk costs a batch
        on a busy loop more than it spares: the thread gets the GIL back from the loop
        only every switch interval, and the loop waits for it in turn.

        A process pool gets chunks of 32 and two per core in flight, so no worker idles
        while the parent pickles the next chunk; another executor of the caller's
        (threads) chunks of 16, two under way.
        """
        if self.executor is None:
            return 1, 0
        if isinstance(self.executor, concurrent.futures.ProcessPoolExecutor):
            return 32, 2 * max(1, min(os.cpu_count() or 1, 32))
        return 16, 2

    async def prepare_many(self, documents: Sequence[tuple[Any, bool]]) -> list[Body]:
        """Each ``(document, encrypted)`` as its body; those encrypted in one hand-over."""
        limit = self.max_document_size
        secret = [i for i, (_, encrypted) in enumerate(documents) if encrypted]
        if not secret:  # serialising alone costs less than a hand-over to a thread
            return [_serialized(document, limit) for document, _ in documents]
        bodies: list[Body] = [
            _serialized(document, limit) if not encrypted else _UNSET
            for document, encrypted in documents
        ]
        key = self.provider_key
        if key is None:
            missing = ProviderKeyError(MISSING_PROVIDER_KEY, reason="missing")
            return [missing if body is _UNSET else body for body in bodies]
        items = [documents[i][0] for i in secret]
        serialized = isinstance(self.executor, concurrent.futures.ProcessPoolExecutor)
        if serialized:
            # Only bytes cross to another process: any document pickles that way, and
            # one that cannot be serialised is refused here, alone.
            items = [_serialized(item, limit) for item in items]
        loop = asyncio.get_running_loop()
        encrypted = await loop.run_in_executor(
            self.executor, prepare_chunk, key, items, serialized, limit
        )
        for i, body in zip(secret, encrypted, strict=True):
            bodies[i] = body
        return bodies

    def prepare_here(self, document: Any, *, encrypted: bool) -> Body | tuple[None, bytes]:
        """One document's body, made here on the loop if it should be.

        A small document is encrypted on the event loop when no executor was given: a
        hand-over to a thread (waking it, the GIL passed back and forth) costs about as
        much as encrypting a 4 KB invoice, for nothing it could overlap with. A large
        one, or any with an ``encrypt_executor`` of the caller's, goes to the executor:
        ``(None, serialised)`` says so (:meth:`prepare_one` does it).
        """
        body = _serialized(document, self.max_document_size)
        if not encrypted or isinstance(body, InvoicingError):
            return body
        key = self.provider_key
        if key is None:
            return ProviderKeyError(MISSING_PROVIDER_KEY, reason="missing")
        plain = body[1]
        if self.executor is None and len(plain) <= INLINE_MAX:
            try:
                return key.encrypt(plain), plain
            except InvoicingError as exc:
                return exc
        return None, plain

    async def prepare_one(self, document: Any, *, encrypted: bool) -> Body:
        """One document's body, for a single call or a batch's worker.

        Made on the loop as :meth:`prepare_here` says, else in the executor.
        """
        body = self.prepare_here(document, encrypted=encrypted)
        if isinstance(body, InvoicingError):
            return body
        made, plain = body
        if made is not None:
            return made, plain
        return await self.elsewhere(plain)

    async def elsewhere(self, plain: bytes) -> Body:
        """A serialised document encrypted in the executor (a large one, or any with one)."""
        key = self.provider_key
        assert key is not None  # noqa: S101  (prepare_here sends only those it can encrypt)
        loop = asyncio.get_running_loop()
        chunk = functools.partial(prepare_chunk, key, [(plain, plain)], serialized=True)
        [prepared] = await loop.run_in_executor(self.executor, chunk)
        return prepared


def prepare_chunk(
    key: ProviderKey, documents: list[Any], serialized: bool, max_size: int | None = None
) -> list[Body]:
    """Serialise (unless ``serialized``: bodies already) and encrypt documents.

    Runs in a worker thread or process.
    """
    prepared: list[Body] = []
    for document in documents:
        body = document if serialized else _serialized(document, max_size)
        if isinstance(body, tuple):
            try:
                body = (key.encrypt(body[1]), body[1])
            except InvoicingError as exc:  # one document's error, kept in its place
                body = exc
        prepared.append(body)
        # Offer the GIL between documents: the event loop's thread, back from a socket
        # call, would otherwise wait up to the switch interval (5 ms) for it. After the
        # last one too: the worker may take the next chunk at once.
        time.sleep(0)
    return prepared


_UNSET: Any = object()


def _serialized(document: Any, max_size: int | None = None) -> Body:
    if isinstance(document, InvoicingError):  # refused where it was identified (a batch's)
        return document
    try:
        plain = serialize_document(document, max_size)
    except InvoicingError as exc:
        return exc
    return plain, plain
