"""``IssuerPool``: many issuers from one process, over real HTTP to the sandbox.

Each issuer is a client of the sandbox's environment with its own API key; the pool
routes every document to the issuer its ``Issuer.Vat`` names.
"""

from __future__ import annotations

import asyncio
import collections

import pytest

from invoicing_async import IssuerPool, OutcomeStatus, RetryPolicy, UnknownIssuerError
from invoicing_sandbox import Sandbox, sample_invoice

QUICK = RetryPolicy(base_delay=0, max_delay=0)
ISSUERS = {f"8000000{n:02d}": f"api-key-of-{n}" for n in range(1, 6)}


def documents_path(sb: Sandbox) -> list:
    return [r for r in sb.requests if r.path in ("/Invoice/secure", "/Invoice/json")]


@pytest.fixture
async def sb():
    async with Sandbox(key_algorithm="cv25519") as sandbox:
        for tin, key in ISSUERS.items():
            sandbox.add_client(sandbox.environment().name, tin, key)
        yield sandbox


def pool_for(sb: Sandbox, credentials=None, **kwargs) -> IssuerPool:
    kwargs.setdefault("provider_key", sb.provider_key)
    return IssuerPool(sb.base_url, ISSUERS if credentials is None else credentials, **kwargs)


async def test_each_document_goes_to_the_issuer_it_names(sb):
    """Single calls and a batch of documents of five issuers: each document is committed
    under the client its Issuer.Vat names, with one token request per issuer."""
    env = sb.environment().name
    async with pool_for(sb) as pool:
        alone = await pool.submit_secure(sample_invoice(1, issuer_vat="800000001"))
        assert alone.mark is not None
        mixed = [sample_invoice(n, issuer_vat=tin) for tin in ISSUERS for n in range(2, 6)]
        outcomes = await pool.submit_many(mixed, concurrency=8, retry=QUICK)
    assert [o.status for o in outcomes] == [OutcomeStatus.ACCEPTED] * len(mixed)
    for tin in ISSUERS:
        numbers = {doc.record.number for doc in sb.committed_in(env, tin).values()}
        assert numbers == ({"1"} if tin == "800000001" else set()) | {"2", "3", "4", "5"}
    assert sb.stats.token_requests == len(ISSUERS)
    assert {r.client_id for r in documents_path(sb)} == set(ISSUERS)


async def test_two_issuers_same_series_and_number_are_two_documents(sb):
    """``A/1`` of two issuers are two invoices: both accepted, neither a duplicate."""
    env = sb.environment().name
    async with pool_for(sb) as pool:
        first = await pool.submit_json(sample_invoice(1, issuer_vat="800000001"))
        second = await pool.submit_json(sample_invoice(1, issuer_vat="800000002"))
    assert first.mark != second.mark
    assert len(sb.committed_in(env, "800000001")) == len(sb.committed_in(env, "800000002")) == 1


async def test_an_unknown_issuer_is_refused_without_a_request(sb):
    """A document whose issuer the resolver does not know: UnknownIssuerError naming the
    issuer, before any request (no token request either); in a batch that document ends
    not_sent with that error and the others are accepted."""
    async with pool_for(sb) as pool:
        with pytest.raises(UnknownIssuerError, match="999999999") as caught:
            await pool.submit_json(sample_invoice(1, issuer_vat="999999999"))
        assert caught.value.issuer == "999999999"
        assert sb.requests == []
        batch = [
            sample_invoice(2, issuer_vat="999999999"),
            sample_invoice(3, issuer_vat="800000003"),
        ]
        outcomes = await pool.submit_many(batch, encrypted=False, retry=QUICK)
    assert [o.status for o in outcomes] == [OutcomeStatus.NOT_SENT, OutcomeStatus.ACCEPTED]
    assert isinstance(outcomes[0].error, UnknownIssuerError)
    assert outcomes[0].attempts == 0
    assert {r.client_id for r in sb.requests} == {"800000003"}


async def test_the_resolver_is_asked_once_per_issuer_and_never_leaks_the_key(sb, caplog):
    """An async resolver (a vault): 40 concurrent first uses of two issuers ask it once
    each; an unknown issuer is asked once and remembered; a resolver that fails is that
    issuer's UnknownIssuerError, its cause kept; no log line shows an API key."""
    asked = collections.Counter()

    async def vault(tin):
        asked[tin] += 1
        await asyncio.sleep(0)
        if tin == "800000004":
            raise ConnectionError("vault unreachable")
        return ISSUERS.get(tin)

    caplog.set_level("DEBUG", logger="invoicing_async")
    async with pool_for(sb, vault) as pool:
        documents = [
            sample_invoice(n, issuer_vat=("800000001", "800000002")[n % 2]) for n in range(40)
        ]
        results = await asyncio.gather(*(pool.submit_json(d) for d in documents))
        assert len({r.mark for r in results}) == 40
        for _ in range(3):
            with pytest.raises(UnknownIssuerError):
                await pool.submit_json(sample_invoice(1, issuer_vat="777777777"))
        with pytest.raises(UnknownIssuerError, match="resolver failed") as failed:
            await pool.submit_json(sample_invoice(1, issuer_vat="800000004"))
    assert isinstance(failed.value.__cause__, ConnectionError)
    assert asked == {"800000001": 1, "800000002": 1, "777777777": 1, "800000004": 1}
    assert not any(
        key in record.getMessage() for record in caplog.records for key in ISSUERS.values()
    )


async def test_explicit_issuer_routes_a_document_without_issuer_vat():
    """A document without Issuer.Vat is routed by ``issuer=``; without it, it is refused
    before any request."""
    async with Sandbox(key_algorithm="cv25519", require_fields=False) as sb:
        sb.add_client(sb.environment().name, "800000005", ISSUERS["800000005"])
        bare = sample_invoice(1, issuer_vat="800000005")
        bare.pop("Issuer")
        async with pool_for(sb) as pool:
            await pool.submit_json(bare, issuer="800000005")
            with pytest.raises(UnknownIssuerError, match="names no issuer"):
                await pool.submit_json(bare)
        assert len(sb.committed_in(sb.environment().name, "800000005")) == 1
        assert len(documents_path(sb)) == 1


async def test_a_pool_client_runs_operations_for_its_issuer(sb):
    """``pool.client(tin)`` is an InvoicingClient of that issuer on the pool's
    connections: its token comes from the pool's cache, and closing it closes nothing."""
    async with pool_for(sb) as pool:
        result = await pool.submit_json(sample_invoice(9, issuer_vat="800000002"))
        client = await pool.client("800000002")
        status = await client.get_last_b2g_status(mark=result.mark)
        assert status.status == 200
        await client.close()
        again = await pool.submit_json(sample_invoice(10, issuer_vat="800000002"))
        assert again.mark is not None
    assert sb.stats.token_requests == 1


async def test_idle_issuers_are_closed_and_memory_stays_bounded(sb):
    """With ``max_issuers=2``, using five issuers one after another keeps at most two
    channels; an issuer used again after it was closed is resolved again."""
    asked = collections.Counter()

    def resolver(tin):
        asked[tin] += 1
        return ISSUERS.get(tin)

    async with pool_for(sb, resolver, max_issuers=2) as pool:
        for n, tin in enumerate(ISSUERS):
            await pool.submit_json(sample_invoice(n, issuer_vat=tin))
            assert pool.issuers_kept <= 2
        await pool.submit_json(sample_invoice(99, issuer_vat="800000001"))
    assert asked["800000001"] == 2
    assert all(asked[tin] == 1 for tin in list(ISSUERS)[1:])


async def test_a_submission_names_its_issuer_and_every_outcome_says_whose_it_is():
    """In a pool's batch a Submission's ``issuer`` routes a document without Issuer.Vat;
    each outcome carries its issuer, also through outcome_to_dict/outcome_from_dict."""
    from invoicing_async import Submission, outcome_from_dict, outcome_to_dict  # noqa: PLC0415

    async with Sandbox(key_algorithm="cv25519", require_fields=False) as sb:
        sb.add_client(sb.environment().name, "800000005", ISSUERS["800000005"])
        sb.add_client(sb.environment().name, "800000001", ISSUERS["800000001"])
        bare = sample_invoice(1, issuer_vat="800000005")
        bare.pop("Issuer")
        named = sample_invoice(2, issuer_vat="800000001")
        async with pool_for(sb) as pool:
            outcomes = await pool.submit_many(
                [Submission(document=bare, issuer="800000005"), named, bare],
                encrypted=False,
                retry=QUICK,
            )
    assert [o.status for o in outcomes] == [
        OutcomeStatus.ACCEPTED,
        OutcomeStatus.ACCEPTED,
        OutcomeStatus.NOT_SENT,
    ]
    assert [o.issuer for o in outcomes] == ["800000005", "800000001", None]
    assert isinstance(outcomes[2].error, UnknownIssuerError)
    assert outcome_from_dict(outcome_to_dict(outcomes[0])).issuer == "800000005"


async def test_a_key_rotated_in_the_vault_is_used_without_a_new_pool(sb):
    """An issuer rotates its API key at the provider; the platform writes the new key
    into its vault (the pool's async resolver). The pool's next batch meets the
    refusal of the old key for that issuer alone (its documents ``not_sent``, the other
    issuer's accepted); the batch after that asks the vault again and sends with the
    new key: accepted, with no new pool and no key in any log line."""
    vault = dict(ISSUERS)
    asked = collections.Counter()

    async def resolver(tin):
        asked[tin] += 1
        await asyncio.sleep(0)
        return vault.get(tin)

    a, b = "800000001", "800000002"
    async with pool_for(sb, resolver, recheck_refused=0) as pool:
        assert (await pool.submit_json(sample_invoice(1, issuer_vat=a))).mark
        sb.rotate_issuer(a, "a-rotated-key")
        vault[a] = "a-rotated-key"  # asked for again only once the old key is refused
        first = await pool.submit_many(
            [sample_invoice(2, issuer_vat=a), sample_invoice(3, issuer_vat=b)],
            encrypted=False,
            retry=QUICK,
        )
        assert [o.status for o in first] == [OutcomeStatus.NOT_SENT, OutcomeStatus.ACCEPTED]
        again = await pool.submit_many(
            [sample_invoice(2, issuer_vat=a)], encrypted=False, retry=QUICK
        )
        assert [o.status for o in again] == [OutcomeStatus.ACCEPTED]
    assert sb.issuer_stats(a).commits == 2
    assert asked[a] >= 2
    assert asked[b] == 1
