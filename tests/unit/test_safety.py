"""The table of safety classes and the decision core's rules for them, as pure functions:
no I/O, no event loop."""

from __future__ import annotations

import pytest

from invoicing_async import (
    DuplicateDocumentError,
    MalformedResponseError,
    ProviderTimeoutError,
    RateLimitError,
    Safety,
    ServerError,
    TransportError,
    ValidationError,
)
from invoicing_async._core.safety import OPERATIONS, default_safety, operation_for, tighten
from invoicing_async._core.table import (
    certainly_not_processed,
    duplicate_means_success,
    may_resend,
    maybe_processed,
)

READ, DEDUPLICATED, UPLOAD, AT_MOST_ONCE = (
    Safety.READ,
    Safety.DEDUPLICATED_WRITE,
    Safety.UPLOAD,
    Safety.AT_MOST_ONCE_WRITE,
)


@pytest.mark.parametrize("safety", list(Safety))
def test_every_class_resends_what_certainly_was_not_sent(safety):
    """A request that certainly never reached the provider may be sent again, whatever
    its class and policy."""
    assert may_resend(safety, maybe_sent=False)
    assert may_resend(safety, maybe_sent=False, resend_ambiguous=False)


@pytest.mark.parametrize(
    ("safety", "resend"),
    [(READ, True), (DEDUPLICATED, True), (UPLOAD, False), (AT_MOST_ONCE, False)],
)
def test_after_an_ambiguous_failure_only_reads_and_deduplicated_writes_are_resent(safety, resend):
    """After a failure that may have been processed: reads and deduplicated writes are
    re-sent; uploads and at-most-once writes never."""
    assert may_resend(safety, maybe_sent=True) is resend


def test_resend_ambiguous_false_tightens_writes_not_reads():
    """RetryPolicy(resend_ambiguous=False) stops a deduplicated write's re-send after an
    ambiguous failure; a read has no effect to repeat and is still re-read."""
    assert not may_resend(DEDUPLICATED, maybe_sent=True, resend_ambiguous=False)
    assert may_resend(READ, maybe_sent=True, resend_ambiguous=False)


@pytest.mark.parametrize("safety", list(Safety))
def test_a_409_is_success_only_for_a_deduplicated_write_after_its_own_attempt(safety):
    """A 409 after this call's own ambiguous attempt is that attempt's success for a
    deduplicated write only; a 409 to a first attempt is always "done before"."""
    assert duplicate_means_success(safety, after_own_attempt=True) is (safety is DEDUPLICATED)
    assert not duplicate_means_success(safety, after_own_attempt=False)


def test_classes_are_ordered_from_loosest_to_strictest():
    """READ < DEDUPLICATED_WRITE < UPLOAD < AT_MOST_ONCE_WRITE."""
    assert [s.strictness for s in (READ, DEDUPLICATED, UPLOAD, AT_MOST_ONCE)] == [0, 1, 2, 3]


@pytest.mark.parametrize("declared", list(Safety))
def test_a_call_may_tighten_its_class(declared):
    """No request keeps the declared class; any stricter one is taken."""
    assert tighten(declared, None) is declared
    for requested in Safety:
        if requested.strictness >= declared.strictness:
            assert tighten(declared, requested) is requested


def test_loosening_is_refused_with_value_error():
    """An at-most-once write is never loosened silently: asking raises ValueError that
    names both classes; the same for any loosening."""
    with pytest.raises(ValueError, match=r"DEDUPLICATED_WRITE.*AT_MOST_ONCE_WRITE"):
        tighten(AT_MOST_ONCE, DEDUPLICATED)
    with pytest.raises(ValueError, match="loosen"):
        tighten(UPLOAD, READ)
    with pytest.raises(ValueError, match="loosen"):
        tighten(DEDUPLICATED, READ)


@pytest.mark.parametrize(
    ("method", "safety"),
    [
        ("GET", READ),
        ("get", READ),
        ("HEAD", READ),
        ("POST", AT_MOST_ONCE),
        ("DELETE", AT_MOST_ONCE),
    ],
)
def test_unknown_operations_get_the_safest_class_for_their_method(method, safety):
    """An operation the table does not know: a read for GET/HEAD, else at most once."""
    assert default_safety(method) is safety


@pytest.mark.parametrize(
    ("error", "maybe", "not_processed"),
    [
        (TransportError("refused", maybe_sent=False), False, True),
        (TransportError("reset", maybe_sent=True), True, False),
        (RateLimitError("429", status=429), False, True),
        (ServerError("503", status=503), False, True),
        (ServerError("500", status=500), True, False),
        (ServerError("502", status=502), True, False),
        (ProviderTimeoutError("408", status=408), True, False),
        (MalformedResponseError("cut short", status=200), True, False),
        (MalformedResponseError("redirect", status=307), False, False),
        (ValidationError("400", status=400), False, False),
        (DuplicateDocumentError("409"), False, False),
    ],
)
def test_failures_are_classified_once(error, maybe, not_processed):
    """Whether a failure may have been processed, or certainly was not: 503 and 429
    say the request was not handled; a reset, a read timeout, 408 and other 5xx may
    have been; definite answers are neither (they are the answer)."""
    assert maybe_processed(error) is maybe
    assert certainly_not_processed(error) is not_processed


def test_every_operation_declares_its_class():
    """The table: documents and signatures are deduplicated writes, cancellations at
    most once, uploads uploads, the status read a read; each says how to find out."""
    classes = {name: spec.safety for name, spec in OPERATIONS.items()}
    assert classes == {
        "submit_secure": DEDUPLICATED,
        "submit_json": DEDUPLICATED,
        "cancel_delivery_note": AT_MOST_ONCE,
        "cancel_receiving_note": AT_MOST_ONCE,
        "request_pos_signature": DEDUPLICATED,
        "sign_pos_transaction": DEDUPLICATED,
        "reseed_b2g_invoice": DEDUPLICATED,
        "get_last_b2g_status": READ,
        "upload_invoice_file": UPLOAD,
        "upload_media": UPLOAD,
        "credit": AT_MOST_ONCE,
        "update_payment": AT_MOST_ONCE,
        "initiate_instant_payment": AT_MOST_ONCE,
        "instant_payment_status": READ,
        "documents_issued": READ,
    }
    assert all(spec.find_out for spec in OPERATIONS.values())
    assert "status" in OPERATIONS["cancel_delivery_note"].find_out


def test_every_named_operation_is_a_client_method():
    """Each table entry names the InvoicingClient method that calls it."""
    from invoicing_async import InvoicingClient  # noqa: PLC0415

    for name in OPERATIONS:
        assert callable(getattr(InvoicingClient, name)), name


@pytest.mark.parametrize(
    ("method", "path", "name"),
    [
        ("POST", "/Invoice/cancelDeliveryNote", "cancel_delivery_note"),
        ("post", "/invoice/CANCELDELIVERYNOTE?mark=1", "cancel_delivery_note"),
        ("POST", "/PosSignatures/094019245", "request_pos_signature"),
        ("POST", "/PosTransactions/SignPos", "sign_pos_transaction"),
        ("GET", "/B2GInvoice/GetLastStatus", "get_last_b2g_status"),
        ("POST", "/B2GInvoice/GetLastStatus", None),
        ("POST", "/PosSignatures/1/2", None),
        ("GET", "/api/invoice/getdocuments/094019245/3/", "documents_issued"),
        ("GET", "/api/invoice/getdocuments/094019245/3", "documents_issued"),
        ("GET", "/api/invoice/getdocuments/094019245/", None),
        ("POST", "/Invoice/credit", "credit"),
        ("POST", "/Invoice/somethingElse", None),
    ],
)
def test_operation_for_finds_known_operations_case_insensitively(method, path, name):
    """request() finds a known operation by method and path (ASP.NET ignores case, so
    /PosTransactions/SignPos is signpos), its path parameter included."""
    found = operation_for(method, path)
    assert (found.name if found is not None else None) == name


def test_a_credit_that_may_repeat_is_deduplicated_and_a_correlated_one_at_most_once():
    """The provider's repeat rules: many 5.2 and 11.4 credits of a document, known by
    their internalId (re-sent after a lost answer, 409 its own); one 5.1 (never re-sent
    after a lost answer). request() takes the table's, the stricter."""
    from invoicing_async._core.safety import credit_safety  # noqa: PLC0415

    assert credit_safety(relate_credit=False) is DEDUPLICATED
    assert credit_safety(relate_credit=True) is AT_MOST_ONCE
    assert OPERATIONS["credit"].safety is AT_MOST_ONCE
