"""The decisions the core took over from the modules that apply them: pure, no socket.

A 409 with another document's record, an operation's 409 in the provider's words, the
409 an ending took for the request's own commit, a failed token request, and the
outbox's parking and waits between rounds.
"""

from __future__ import annotations

import pytest

from invoicing_async import RetryPolicy, Safety
from invoicing_async._core.entries import parks, wait_after_round
from invoicing_async._core.errors import (
    AuthenticationError,
    ClientStateError,
    CredentialsError,
    DuplicateDocumentError,
    ForeignRecordError,
    ServerError,
    TransportError,
)
from invoicing_async._core.machine import Attempts
from invoicing_async._core.models import DocumentResult
from invoicing_async._core.outcomes import ANSWERED, HELD, OutcomeStatus
from invoicing_async._core.table import done_before, foreign_record, held_record
from invoicing_async._core.unauthorized import after_refresh, refusal_kept, without_token

RECORD = DocumentResult(series="A", number="1")


def test_a_409s_record_is_the_one_to_check():
    """Only a 409 carries a record the delivery checks; its absence is no record."""
    assert held_record(DuplicateDocumentError("held", result=RECORD)) is RECORD
    assert held_record(DuplicateDocumentError("held")) is None
    assert held_record(ServerError("down", status=500)) is None


@pytest.mark.parametrize(("held", "status"), [(True, 409), (False, 201)])
def test_another_documents_record_is_a_foreign_record(held, status):
    """The record of another document says which fields differ, and what it came with."""
    error = foreign_record(RECORD, ("number",), held=held)
    assert isinstance(error, ForeignRecordError)
    assert (error.status, error.result, error.mismatches) == (status, RECORD, ("number",))
    assert "differs in number" in str(error)


def test_an_operations_409_says_what_was_done_before():
    """The provider's words go into the 409's message; other errors are left alone."""
    error = DuplicateDocumentError("409", body={"message": "already cancelled"})
    done_before(error, "POST /Invoice/cancelDeliveryNote")
    said = "POST /Invoice/cancelDeliveryNote: done before this call: already cancelled"
    assert error.message == said
    silent = DuplicateDocumentError("409", body={"code": 7})
    done_before(silent, "POST /x")
    assert silent.message == "409"
    other = ServerError("down", status=500)
    done_before(other, "POST /x")
    assert other.message == "down"


def test_the_409_taken_for_the_requests_own_commit_is_the_endings():
    """A re-sent deduplicated write answered 409 ends accepted, with that 409 as its
    commit; a first attempt's 409 is a duplicate, and a 2xx has no commit."""
    policy = RetryPolicy()
    conflict = DuplicateDocumentError("409", body={"mark": 1})
    ours = Attempts(Safety.DEDUPLICATED_WRITE, policy, maybe_committed=True, needs_record=False)
    ours.next(0.0)
    end = ours.failed(conflict, 0.0)
    assert (end.status, end.commit) == (OutcomeStatus.ACCEPTED, conflict)
    first = Attempts(Safety.DEDUPLICATED_WRITE, policy, needs_record=False)
    first.next(0.0)
    end = first.failed(conflict, 0.0)
    assert (end.status, end.commit) == (OutcomeStatus.DUPLICATE, None)
    answered = Attempts(Safety.DEDUPLICATED_WRITE, policy, maybe_committed=True)
    answered.next(0.0)
    assert answered.succeeded(RECORD).commit is None


def test_a_failed_token_request_means_nothing_was_sent():
    """Refused credentials and a closed client stay what they are; anything else says
    the call was certainly not sent."""
    for kept in (
        AuthenticationError("401", status=401),
        CredentialsError("invalid_client", status=400),
        ClientStateError("closed"),
    ):
        assert without_token(kept) is kept
    error = without_token(ServerError("token endpoint down", status=503))
    assert isinstance(error, TransportError)
    assert error.maybe_sent is False
    assert error.message.startswith("no access token, nothing sent: token endpoint down")


def test_what_follows_a_failed_refresh_and_which_refusal_is_kept():
    assert after_refresh(ClientStateError("closed")) == "stop"
    assert after_refresh(CredentialsError("invalid_grant", status=400)) == "refused"
    assert after_refresh(ServerError("down", status=500)) == "failed"
    assert refusal_kept(CredentialsError("invalid_client", status=400))
    assert not refusal_kept(AuthenticationError("401", status=401))
    assert not refusal_kept(ServerError("down", status=500))


def test_an_entry_parks_at_its_last_round():
    assert parks(10, RetryPolicy(max_rounds=10))
    assert not parks(9, RetryPolicy(max_rounds=10))
    assert not parks(10_000, RetryPolicy(max_rounds=None))


def test_only_the_rounds_that_count_grow_the_wait():
    """An outage's round waits the first round's (equal jitter: the upper half)."""
    policy = RetryPolicy(round_delay=2.0, max_round_delay=300.0)
    assert 1.0 <= wait_after_round(policy, 5, counted=False) <= 2.0
    assert 16.0 <= wait_after_round(policy, 5, counted=True) <= 32.0


def test_what_an_ending_says_of_the_provider():
    assert set(HELD) == {OutcomeStatus.ACCEPTED, OutcomeStatus.DUPLICATE}
    assert set(ANSWERED) == set(HELD) | {OutcomeStatus.REJECTED}
