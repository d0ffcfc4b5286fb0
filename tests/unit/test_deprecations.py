"""Renamed public names keep working for one release, with a DeprecationWarning.

Each old name does what it did, warns with the new way to do it, and points the warning
at the caller's line (so ``-W error`` and warning filters find the user's code).
"""

from __future__ import annotations

import pytest
from sandboxtools import FakeClock, client_for, invoice

from invoicing_async import AccessToken, Ledger, OutcomeStatus, TokenCache, document_key
from invoicing_async._tokencache import CredentialsKey
from invoicing_sandbox import Sandbox

KEY = CredentialsKey.of("http://127.0.0.1:1/test", "094019245", "api-key")


async def test_journal_argument_still_names_the_ledger(tmp_path):
    """submit_many(journal=PATH) records in that ledger like ledger=PATH, and warns."""
    path = tmp_path / "batch.db"
    async with Sandbox() as sb, client_for(sb) as client:
        with pytest.warns(DeprecationWarning, match="journal= argument") as caught:
            [outcome] = await client.submit_many([invoice(sb, 1)], journal=path)
        assert caught[0].filename == __file__
        with pytest.raises(TypeError, match="ledger= only"):
            await client.submit_many([invoice(sb, 2)], journal=path, ledger=path)
    assert outcome.status is OutcomeStatus.ACCEPTED
    async with Ledger(path) as ledger:
        entry = await ledger.get(outcome.key)
    assert entry is not None
    assert entry.final


async def test_prepare_and_send_prepared_still_send_once():
    """prepare(), prepare_many() and send_prepared() work as in 0.2, each with a warning."""
    async with Sandbox() as sb, client_for(sb) as client:
        document = invoice(sb, 1)
        with pytest.warns(DeprecationWarning, match=r"prepare\(\)"):
            body = await client.prepare(document, encrypted=True)
        with pytest.warns(DeprecationWarning, match=r"prepare_many\(\)"):
            [again] = await client.prepare_many([document], encrypted=True)
        assert isinstance(again, bytes)
        with pytest.warns(DeprecationWarning, match=r"send_prepared\(\)"):
            result = await client.send_prepared(body, encrypted=True)
    assert sb.committed[document_key(document)].record == result


async def test_token_cache_machinery_names_still_answer():
    """TokenCache.get/peek/fresh/recover/confirm/invalidate warn and behave as before."""
    clock = FakeClock()
    cache = TokenCache(clock=clock)
    grants = 0

    async def fetch(_previous):
        nonlocal grants
        grants += 1
        return AccessToken(
            value=f"AT-{grants}", token_type="Bearer", expires_in=900, obtained_at=clock.now
        )

    with pytest.warns(DeprecationWarning, match=r"TokenCache\.get\(\)"):
        token = await cache.get(KEY, fetch)
    with pytest.warns(DeprecationWarning, match=r"TokenCache\.peek\(\)"):
        assert cache.peek(KEY) == token
    with pytest.warns(DeprecationWarning, match=r"TokenCache\.fresh\(\)"):
        assert cache.fresh(KEY) == token
    with pytest.warns(DeprecationWarning, match=r"TokenCache\.confirm\(\)"):
        cache.confirm(KEY, token)
    with pytest.warns(DeprecationWarning, match=r"TokenCache\.recover\(\)"):
        await cache.recover(KEY, token, fetch)
    with pytest.warns(DeprecationWarning, match=r"TokenCache\.invalidate\(\)"):
        cache.invalidate(KEY, token)
    assert cache.requests(KEY) == grants


async def test_ledger_batch_hooks_still_answer(tmp_path):
    """The 0.2 batch hooks on Ledger warn and still do what they did."""
    async with Ledger(tmp_path / "batch.db") as ledger:
        with pytest.warns(DeprecationWarning, match=r"Ledger\.acquire"):
            await ledger.acquire()
        with pytest.warns(DeprecationWarning, match=r"Ledger\.sending"):
            await ledger.sending("id:a", 0)
        with pytest.warns(DeprecationWarning, match=r"Ledger\.lookup"):
            found = await ledger.lookup(["id:a"])
        assert found["id:a"].status == "in_flight"
        with pytest.warns(DeprecationWarning, match=r"Ledger\.will_send"):
            ledger.will_send(["id:b"])
        with pytest.warns(DeprecationWarning, match=r"Ledger\.unmark"):
            ledger.unmark()
        with pytest.warns(DeprecationWarning, match=r"Ledger\.flush"):
            await ledger.flush()
        with pytest.warns(DeprecationWarning, match=r"Ledger\.file"):
            assert ledger.file is not None
        with pytest.warns(DeprecationWarning, match=r"Ledger\.release"):
            ledger.release()
        assert await ledger.get("id:b") is None


def test_the_sandbox_old_place_answers_with_the_new_package():
    """``from invoicing_async.sandbox import Sandbox`` still works (the sandbox is its own
    package now), with a warning pointing at the caller's line."""
    import invoicing_sandbox  # noqa: PLC0415
    from invoicing_async import sandbox  # noqa: PLC0415

    with pytest.warns(DeprecationWarning, match="invoicing_sandbox") as caught:
        old = sandbox.Sandbox
    assert old is invoicing_sandbox.Sandbox
    assert caught[0].filename == __file__
