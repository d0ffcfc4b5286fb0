"""Small helpers shared by test modules."""

from __future__ import annotations

from invoicing_async import InvoicingError


async def once(client, document, *, encrypted=False, timeout=None):
    """One attempt at a document, without the single-call retries: the typed error of
    that one response (the mapping several tests check) reaches the caller as is."""
    [body] = await client._preparer.prepare_many([(document, encrypted)])
    if isinstance(body, InvoicingError):
        raise body
    return await client._session.send_body(body[0], encrypted=encrypted, timeout=timeout)


async def send_body(client, body, *, encrypted):
    """One attempt with exactly ``body`` (already encrypted, or deliberately broken)."""
    return await client._session.send_body(body, encrypted=encrypted)
