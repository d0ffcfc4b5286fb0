"""Documents as the provider's samples write them: any case, the VAT number with or
without its ``EL`` prefix, numbers as strings or numbers.

Each sample is tried as a new user would copy it, in PascalCase and in camelCase, with
the issuer's VAT number prefixed and bare: every variant has the same identity, goes to
the same issuer of an ``IssuerPool``, is accepted by the sandbox over real HTTP, has the
same offline QR, and is one entry of an outbox.
"""

from __future__ import annotations

import json

import pytest
from providersamples import SAMPLE_TIN, SAMPLES, camel, pascal, with_vat

from invoicing_async import (
    DuplicateDocumentError,
    IssuerPool,
    OutcomeStatus,
    RetryPolicy,
    document_key,
    qr,
)
from invoicing_async.outbox import SqliteOutbox
from invoicing_sandbox import Sandbox

QUICK = RetryPolicy(base_delay=0, max_delay=0)
API_KEY = "api-key-of-the-samples-issuer"


def variants(name: str) -> dict[str, dict]:
    """The sample ``name`` in both cases, its issuer's VAT number prefixed and bare."""
    document = SAMPLES[name]()
    out = {}
    for case, written in (("PascalCase", pascal(document)), ("camelCase", camel(document))):
        out[f"{case}, EL prefix"] = with_vat(written, "EL" + SAMPLE_TIN)
        out[f"{case}, bare"] = with_vat(written, SAMPLE_TIN)
    return out


@pytest.fixture
async def sb():
    async with Sandbox(key_algorithm="cv25519") as sandbox:
        sandbox.add_client(sandbox.environment().name, SAMPLE_TIN, API_KEY)
        yield sandbox


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_variant_has_the_identity_of_its_internal_document_id(name):
    """PascalCase or camelCase, prefixed or bare, as a mapping or as JSON bytes: the
    identity is ``id:<InternalDocumentId>`` (it was a content hash for camelCase)."""
    keys = set()
    for document in variants(name).values():
        keys.add(document_key(document))
        keys.add(document_key(json.dumps(document).encode()))
    internal = SAMPLES[name]()
    distribution = next(v for k, v in internal.items() if k.lower() == "distributiondetails")
    expected = next(v for k, v in distribution.items() if k.lower() == "internaldocumentid")
    assert keys == {f"id:{expected}"}


@pytest.mark.parametrize("name", sorted(SAMPLES))
async def test_every_variant_is_accepted_by_the_sandbox(sb, name):
    """Each variant is committed (201) under the samples' issuer, and 409 answers the
    next variant: the sandbox reads them as one document (it refused camelCase with 400
    and the prefixed VAT number with 401)."""
    env = sb.environment(client_id=SAMPLE_TIN)
    async with IssuerPool(
        env.base_url, {SAMPLE_TIN: API_KEY}, provider_key=sb.provider_key
    ) as pool:
        outcomes = await pool.submit_many(list(variants(name).values()), retry=QUICK)
    statuses = [o.status for o in outcomes]
    assert statuses.count(OutcomeStatus.ACCEPTED) + statuses.count(OutcomeStatus.DUPLICATE) == len(
        statuses
    ), [o.error for o in outcomes]
    committed = sb.committed_in(env.name, SAMPLE_TIN)
    assert len(committed) == 1
    [held] = committed.values()
    assert held.commits == 1
    assert {o.key for o in outcomes} == {held.identity}


async def test_a_pool_routes_every_variant_to_the_issuer_of_its_nine_digits(sb):
    """An IssuerPool knows the issuer by its TIN: a document naming it ``EL118058830``
    (as the samples do) goes to it; it was ``UnknownIssuerError: no credentials for
    issuer EL118058830`` before any request."""
    env = sb.environment(client_id=SAMPLE_TIN)
    async with IssuerPool(
        env.base_url, {SAMPLE_TIN: API_KEY}, provider_key=sb.provider_key
    ) as pool:
        for name in sorted(SAMPLES):
            first, *others = variants(name).values()
            result = await pool.submit_json(first)
            for document in others:  # the same document: its record again
                with pytest.raises(DuplicateDocumentError) as held:
                    await pool.submit_json(document)
                assert held.value.result == result, name
    assert sb.issuer_stats(SAMPLE_TIN).commits == len(SAMPLES)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_variant_has_the_same_offline_qr(name):
    """The offline QR url of a deferred sale reads the same fields whatever their case,
    and the issuer's TIN is written with its prefix either way."""
    urls = {
        qr.offline_qr_url(document, portal_url="https://portal.invalid", api_key="k")
        for document in variants(name).values()
    }
    assert len(urls) == 1
    [url] = urls
    assert f"issuerTin=EL{SAMPLE_TIN}&" in url


async def test_every_variant_is_one_outbox_entry(tmp_path):
    """Enqueued in any case and either way of writing the VAT number, a document is one
    entry of the outbox, under the issuer's TIN."""
    async with SqliteOutbox(tmp_path / "outbox.db") as outbox:
        for name in sorted(SAMPLES):
            keys = await outbox.enqueue(list(variants(name).values()))
            assert len(set(keys)) == 1
        counts = await outbox.counts()
        entries = [entry async for entry in outbox.entries()]
    assert sum(counts.values()) == len(SAMPLES)
    assert {entry.issuer for entry in entries} == {SAMPLE_TIN}
