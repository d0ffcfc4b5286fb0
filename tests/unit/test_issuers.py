"""The issuers' channels of a pool: made from the resolver, kept while in use, closed idle.

``Issuers`` on its own, with a fake clock and no request: what is kept, what is closed,
and when the resolver is asked. Through real HTTP in test_pool.py.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from invoicing_async import CredentialsError, RetryPolicy, TokenCache, UnknownIssuerError
from invoicing_async._client.credentials import CredentialsFile
from invoicing_async._io.issuers import Issuers
from invoicing_async._io.transport import Transport

KEYS = {f"80000000{n}": f"api-key-of-{n}" for n in range(1, 6)}
A, B, C, D, E = KEYS


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Vault:
    """A resolver over ``keys`` that notes every TIN it is asked about."""

    def __init__(self, keys=KEYS) -> None:
        self.keys = dict(keys)
        self.asked: list[str] = []

    def __call__(self, tin: str) -> str | None:
        self.asked.append(tin)
        return self.keys.get(tin)


def issuers(resolver=KEYS, **kwargs) -> Issuers:
    kwargs.setdefault("clock", Clock())
    return Issuers(
        "https://provider.example",
        resolver,
        transport=Transport(),
        token_cache=TokenCache(),
        token_retry=RetryPolicy(),
        **kwargs,
    )


async def test_an_idle_issuer_is_closed_after_idle_seconds_one_in_use_never():
    """An issuer no one uses is closed once ``idle`` seconds passed since its last use
    (at the next release): used again, it is resolved again. One in use stays however
    long it is held, and one idle for less is kept."""
    clock = Clock()
    resolver = Vault()
    asked = resolver.asked

    pool = issuers(resolver, idle=60, clock=clock)
    held = await pool.acquire(A)
    pool.release(await pool.acquire(B))
    clock.now += 59
    pool.release(await pool.acquire(C))
    assert len(pool) == 3
    clock.now += 2  # B idle for 61 s, C for 2 s, A in use for 61 s
    pool.release(await pool.acquire(D))
    assert len(pool) == 3  # A, C, D
    assert await pool.acquire(A) is held
    for tin in (B, C):
        pool.release(await pool.acquire(tin))
    assert asked == [A, B, C, D, B]


async def test_past_max_issuers_the_least_recently_used_idle_go_never_one_in_use():
    """With more than ``max_issuers`` kept, idle issuers are closed least recently used
    first; an issuer in use is never closed, even the least recently used: the next
    idle one goes instead."""
    resolver = Vault()
    asked = resolver.asked

    pool = issuers(resolver, max_issuers=2)
    oldest = await pool.acquire(A)  # held throughout
    pool.release(await pool.acquire(B))
    pool.release(await pool.acquire(C))  # three kept: B, the idle least recently used, goes
    assert len(pool) == 2
    pool.release(await pool.acquire(D))  # C goes
    assert len(pool) == 2
    assert await pool.acquire(A) is oldest
    pool.release(await pool.acquire(B))
    assert asked == [A, B, C, D, B]  # B was closed, so asked again


@pytest.mark.parametrize("resolver", [KEYS, KEYS.get], ids=["mapping", "function"])
async def test_a_resolver_that_answers_at_once_gives_the_channel_without_waiting(resolver):
    """A mapping or a plain function: a new issuer's channel is made at once, without
    waiting for a turn of the event loop (a batch reading the documents of thousands of
    new issuers is not held up one turn each)."""
    pool = issuers(resolver)
    acquiring = pool.acquire(A)
    with pytest.raises(StopIteration) as done:
        acquiring.send(None)  # runs to its end without suspending
    assert done.value.value.client_id == A
    unknown = pool.acquire("999999999")
    with pytest.raises(UnknownIssuerError, match="999999999"):
        unknown.send(None)


async def test_an_async_resolver_is_asked_once_for_concurrent_first_uses():
    """An async resolver (a vault) is asked once for any number of concurrent first uses
    of an issuer, and every caller gets the same channel."""
    asked = []

    async def vault(tin):
        asked.append(tin)
        await asyncio.sleep(0)
        return KEYS.get(tin)

    pool = issuers(vault)
    channels = await asyncio.gather(*(pool.acquire(A) for _ in range(20)))
    assert asked == [A]
    assert len({id(channel) for channel in channels}) == 1


class RefusingCache(TokenCache):
    """A token cache whose refusals the test decides: the credentials of ``refused``
    digests count as refused by the token endpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: set[str] = set()

    def _refused(self, key) -> bool:
        return key.secret_digest in self.refused


async def test_a_refused_issuer_is_resolved_again_at_most_once_per_recheck_and_a_new_key_is_used():
    """An issuer whose credentials the token endpoint refused is resolved again at its
    next use once ``recheck_refused`` seconds have passed since it was last resolved,
    not before; the resolver's same key keeps the channel (and what its token cache
    knows), another key gives the issuer a new channel; an issuer not refused is never
    asked about again."""
    clock = Clock()
    resolver = Vault()
    vault, asked = resolver.keys, resolver.asked

    cache = RefusingCache()
    pool = Issuers(
        "https://provider.example", resolver, transport=Transport(), token_cache=cache,
        token_retry=RetryPolicy(), recheck_refused=30, clock=clock,
    )  # fmt: skip
    first = await pool.acquire(A)
    pool.release(await pool.acquire(B))
    cache.refused.add(first.tokens.key.secret_digest)  # A's key refused
    clock.now += 29
    assert await pool.acquire(A) is first  # not yet
    clock.now += 1
    assert await pool.acquire(A) is first  # asked again: the same key
    assert asked == [A, B, A]
    vault[A] = "a-rotated-key"
    clock.now += 10
    assert await pool.acquire(A) is first  # 10 s since it was asked: not again yet
    clock.now += 20
    rotated = await pool.acquire(A)
    assert rotated is not first
    assert rotated.tokens.key.secret_digest != first.tokens.key.secret_digest
    pool.release(await pool.acquire(B))
    assert asked == [A, B, A, A]  # B, never refused, was not asked again


async def test_reload_has_every_issuer_resolved_again_at_its_next_use():
    """``reload()`` (SIGHUP): every issuer, refused or not, is resolved again at its
    next use (a changed key gives a new channel, the same key keeps it), and an issuer
    the resolver did not know is asked about again at once."""
    resolver = Vault()
    vault, asked = resolver.keys, resolver.asked

    pool = issuers(resolver, forget_unknown=3600)
    a, b = await pool.acquire(A), await pool.acquire(B)
    with pytest.raises(UnknownIssuerError):
        await pool.acquire("800000099")
    vault[A], vault["800000099"] = "a-rotated-key", "a-new-shop"
    revision = pool.revision
    pool.reload()
    assert pool.revision > revision
    assert await pool.acquire(A) is not a
    assert await pool.acquire(B) is b
    assert (await pool.acquire("800000099")).client_id == "800000099"
    assert asked == [A, B, "800000099", A, B, "800000099"]


async def test_a_credentials_file_changed_is_taken_in_by_refresh_without_reading(tmp_path):
    """A pool over a credentials file: once the file, replaced, has been read again (off
    the loop, by its own looks), ``refresh()`` bumps the revision, so that every issuer
    is resolved again from the new file at its next use; an unchanged file changes
    nothing. ``refresh()`` and lookups never read the file themselves."""
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({A: "old-key", B: "b-key"}), encoding="utf-8")
    path.chmod(0o600)
    clock = Clock()
    credentials = CredentialsFile(path, clock=clock, every=3600)  # the test looks itself
    pool = issuers(credentials)
    old = await pool.acquire(A)
    revision = pool.refresh()
    assert await credentials.look() is False
    assert pool.refresh() == revision  # unchanged
    new = tmp_path / "keys.new"
    new.write_text(json.dumps({A: "new-key", B: "b-key"}), encoding="utf-8")
    new.chmod(0o600)
    new.replace(path)
    assert pool.refresh() == revision  # not read yet: nothing known of the change
    assert (await pool.acquire(A)) is old
    await credentials.look()
    clock.now += 1
    changed = pool.changed()
    assert await credentials.look() is True
    assert changed.done()  # a worker waiting for new credentials is told
    assert pool.refresh() > revision
    fresh = await pool.acquire(A)
    assert fresh is not old
    assert fresh.tokens.key.secret_digest != old.tokens.key.secret_digest
    pool.clear()


async def test_a_distrusted_issuer_is_resolved_again_once_its_recheck_is_due():
    """An issuer whose requests the provider refused while its token still lived (a key
    revoked, answered 401 with a valid token: a batch stopped its documents, and the
    worker says so with ``distrust``) is resolved again like one whose token request was
    refused: at its next use once ``recheck_refused`` seconds passed, a new key giving a
    new channel; after that it is trusted again."""
    clock = Clock()
    resolver = Vault()
    vault, asked = resolver.keys, resolver.asked

    pool = issuers(resolver, recheck_refused=30, clock=clock)
    first = await pool.acquire(A)
    pool.distrust(A)
    pool.distrust("800000099")  # an issuer it does not keep: nothing to do
    vault[A] = "a-rotated-key"
    assert await pool.acquire(A) is first  # not due yet
    clock.now += 30
    rotated = await pool.acquire(A)
    assert rotated is not first
    clock.now += 60
    assert await pool.acquire(A) is rotated  # trusted again: not asked again
    assert asked == [A, A]


@pytest.mark.parametrize(
    ("secret", "said"),
    [
        ("k" * 10_000, "it has 10,000 characters, more than the 4,096"),
        ("line-one\r\nAPIKey: line-two", "a character a header value cannot carry"),
        ("clé-de-l'émetteur", "a character a header value cannot carry"),
        (" padded ", "spaces around it"),
    ],
)
async def test_a_key_that_cannot_be_sent_is_a_credentials_error_of_its_issuer(secret, said):
    """The resolver gives an API key the ``APIKey`` header cannot carry (10,000
    characters, past the 8 KiB servers take for a header; a CR/LF; a character beyond
    ASCII; spaces a server drops): a CredentialsError of that issuer before any request,
    saying why without the key (before: the 10,000-character key was sent, the provider
    answered 400 and the documents ended rejected), remembered as an unknown issuer is;
    the other issuers are served."""
    vault = Vault({**KEYS, A: secret})
    pool = issuers(vault, forget_unknown=60)
    for _ in range(2):
        with pytest.raises(CredentialsError, match=f"issuer {A}.*cannot be sent") as refused:
            await pool.acquire(A)
        assert said in str(refused.value)
        assert secret not in str(refused.value)
        assert secret not in repr(refused.value)
    assert vault.asked == [A]  # remembered: asked once
    assert (await pool.acquire(B)).client_id == B
