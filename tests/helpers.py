"""Small helpers shared by test modules."""

from __future__ import annotations


async def once(client, document, *, encrypted=False, timeout=None):
    """One attempt at a document, without the single-call retries: the typed error of
    that one response (the mapping several tests check) reaches the caller as is."""
    payload = await client.prepare(document, encrypted=encrypted)
    return await client.send_prepared(payload, encrypted=encrypted, timeout=timeout)
