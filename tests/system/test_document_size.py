"""Documents larger than the limit: refused as themselves, before any work, never a key problem.

The library refuses a document whose serialised JSON (or the bytes given) exceeds
``max_document_size`` before it is encrypted: a batch's outcome ``rejected`` with
:class:`DocumentTooLargeError` (its size and the limit), the other documents going on; a
single call raises it. A provider's ``413`` is the same refusal. The sandbox answers a
message whose data exceeds its limit with 413, as a web server would, never with the
400 "cannot be decrypted" a client reads as the wrong provider key.
"""

from __future__ import annotations

import json
import tracemalloc

import pytest
from messagefactory import compressed, crafted, keypair, literal
from sandboxtools import client_for, invoice, raw, requests_to

from invoicing_async import DocumentTooLargeError, OutcomeStatus, ValidationError
from invoicing_async._doc.document import DEFAULT_MAX_DOCUMENT_SIZE, dumps
from invoicing_sandbox import Sandbox

MIB = 1024 * 1024


@pytest.fixture
async def sb():
    async with Sandbox(key_algorithm="cv25519") as sandbox:
        yield sandbox


def documents_posted(sb: Sandbox) -> int:
    return len(requests_to(sb, "/Invoice/secure")) + len(requests_to(sb, "/Invoice/json"))


async def test_eight_50_mib_documents_are_refused_before_encryption(sb):
    """Eight 50 MiB documents among two invoices: each refused when it is prepared,
    before it is encrypted or sent (rejected, no attempt, its size and the limit), the
    invoices accepted, and the batch's memory a bounded few times one document (the
    issue measured +2.2 GB)."""
    notes = "x" * (50 * MIB)  # one string for all: the documents the caller holds
    documents = [invoice(sb, 1), *({**invoice(sb, n), "Notes": notes} for n in range(2, 10))]
    documents.append(invoice(sb, 10))
    async with client_for(sb) as client:
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            outcomes = await client.submit_many(documents)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    statuses = [o.status for o in outcomes]
    assert statuses == [
        OutcomeStatus.ACCEPTED,
        *[OutcomeStatus.REJECTED] * 8,
        OutcomeStatus.ACCEPTED,
    ]
    for outcome, document in zip(outcomes[1:9], documents[1:9], strict=True):
        error = outcome.error
        assert isinstance(error, DocumentTooLargeError)
        assert (error.status, error.limit, outcome.attempts) == (None, DEFAULT_MAX_DOCUMENT_SIZE, 0)
        assert error.size == len(dumps(document))
        assert f"{error.size:,} bytes" in error.message
    assert documents_posted(sb) == 2
    assert peak - before < 200 * MIB, f"peak {(peak - before) / MIB:.0f} MiB"


async def test_a_single_call_raises_before_sending(sb):
    """submit_secure and submit_json raise DocumentTooLargeError for a document over the
    limit, and send nothing; bytes are measured as they are."""
    big = {**invoice(sb, 1), "Notes": "x" * 4000}
    async with client_for(sb, max_document_size=3000) as client:
        for call in (client.submit_secure, client.submit_json):
            for document in (big, json.dumps(big).encode()):
                with pytest.raises(DocumentTooLargeError) as info:
                    await call(document)
                assert info.value.limit == 3000
        await client.submit_secure(invoice(sb, 2))
    assert documents_posted(sb) == 1


async def test_a_batch_takes_its_own_limit(sb):
    """submit_many(max_document_size=…) refuses by its own limit; the client's stays."""
    larger = {**invoice(sb, 1), "Notes": "x" * 4000}
    async with client_for(sb) as client:
        outcomes = await client.submit_many([larger, invoice(sb, 2)], max_document_size=3000)
        assert [o.status for o in outcomes] == [OutcomeStatus.REJECTED, OutcomeStatus.ACCEPTED]
        assert outcomes[0].error.limit == 3000
        [again] = await client.submit_many([larger])
        assert again.status is OutcomeStatus.ACCEPTED


@pytest.mark.parametrize("encrypted", [True, False], ids=["secure", "json"])
async def test_the_providers_413_is_a_refusal_of_that_document(encrypted):
    """A document the client takes but the provider does not (413, answered before the
    body is read) ends rejected after one attempt, never retried, and the batch's other
    documents are accepted."""
    async with Sandbox(key_algorithm="cv25519", max_body_size=MIB) as sb:
        big = {**invoice(sb, 2), "Notes": "x" * (3 * MIB)}
        async with client_for(sb, max_document_size=64 * MIB) as client:
            outcomes = await client.submit_many(
                [invoice(sb, 1), big, invoice(sb, 3)], encrypted=encrypted
            )
        assert [o.status for o in outcomes] == [
            OutcomeStatus.ACCEPTED, OutcomeStatus.REJECTED, OutcomeStatus.ACCEPTED,
        ]  # fmt: skip
        refused = outcomes[1]
        assert isinstance(refused.error, DocumentTooLargeError)
        assert (refused.error.status, refused.attempts) == (413, 1)
        assert f"the limit is {MIB} bytes" in refused.error.message
        assert sb.stats.submissions[413] == 1


async def test_an_oversized_document_does_not_stop_the_batch_as_a_key_problem():
    """The issue's case: a sandbox taking bodies up to 64 MiB, and a 20 MiB document.
    The client refuses it by its own limit (rejected) and sends the others; a client
    allowing it gets it accepted (the sandbox's decryption limit follows its body limit),
    where the sandbox answered 400 "cannot be decrypted: message exceeds size limit",
    read as ProviderKeyError, which stopped the whole batch."""
    async with Sandbox(key_algorithm="cv25519", max_body_size=64 * MIB) as sb:
        big = {**invoice(sb, 2), "Notes": "x" * (20 * MIB)}
        async with client_for(sb) as client:
            outcomes = await client.submit_many([invoice(sb, 1), big, invoice(sb, 3)])
        assert [o.status for o in outcomes] == [
            OutcomeStatus.ACCEPTED, OutcomeStatus.REJECTED, OutcomeStatus.ACCEPTED,
        ]  # fmt: skip
        assert isinstance(outcomes[1].error, DocumentTooLargeError)
        async with client_for(sb, max_document_size=32 * MIB) as client:
            [taken] = await client.submit_many([big])
        assert taken.status is OutcomeStatus.ACCEPTED


async def test_data_too_large_once_decrypted_is_413_not_undecryptable(tmp_path):
    """A small compressed message whose data inflates beyond the sandbox's limit is
    answered 413 with the limit, not 400 "cannot be decrypted"; the client reads that
    answer as DocumentTooLargeError."""
    key_file = tmp_path / "provider-secret.asc"
    key_file.write_text(keypair("cv25519").private_armored)
    document = json.dumps({"Notes": "x" * (2 * MIB)}).encode()
    message = crafted().message(compressed(2, literal(document)))
    assert len(message) < MIB // 100
    async with Sandbox(key_file=key_file, max_body_size=MIB) as sb:
        async with client_for(sb) as client:
            token = await client.token()
        env = sb.environment()
        headers = {
            "Authorization": f"Bearer {token.value}",
            "APIKey": env.client_secret,
            "Content-Type": "application/pgp-encrypted",
        }
        status, body = await raw(
            "POST", env.base_url + "/Invoice/secure", data=message, headers=headers
        )
    assert status == 413
    assert "decrypt" not in body["message"]
    assert f"limit of {MIB} bytes" in body["message"]
    from invoicing_async._core import protocol as proto  # noqa: PLC0415

    answer = proto.Response(status, {}, json.dumps(body).encode())
    with pytest.raises(ValidationError) as info:
        proto.parse_document_response(answer, encrypted=True)
    assert isinstance(info.value, DocumentTooLargeError)
