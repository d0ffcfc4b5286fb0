"""The exception tree: classification of failures, and errors that survive pickling."""

from __future__ import annotations

import pytest

from invoicing_async import (
    AuthenticationError,
    DuplicateDocumentError,
    InvoicingError,
    MalformedResponseError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    TransportError,
    ValidationError,
)
from invoicing_async._core.table import maybe_processed


@pytest.mark.parametrize(
    ("error", "committed"),
    [
        (TransportError("refused", maybe_sent=False), False),
        (TransportError("reset", maybe_sent=True), True),
        (ProviderTimeoutError("t", status=408), True),
        (ServerError("s", status=500), True),
        (ServerError("unavailable", status=503), False),
        (MalformedResponseError("m", status=201), True),
        (MalformedResponseError("redirect", status=302), False),
        (ValidationError("v", status=400), False),
        (AuthenticationError("a", status=401), False),
        (RateLimitError("r", status=429), False),
    ],
)
def test_maybe_processed(error, committed):
    """Failures after the provider may have processed the request count as maybe
    processed; a 503 says it was not handled (RFC 9110)."""
    assert maybe_processed(error) is committed


def test_errors_pickle():
    """Errors survive pickling (process pools, multiprocessing test runners)."""
    import pickle  # noqa: PLC0415

    error = DuplicateDocumentError("dup", status=409, body={"a": 1}, result=None)
    clone = pickle.loads(pickle.dumps(error))  # noqa: S301
    assert type(clone) is DuplicateDocumentError
    assert clone.status == 409
    assert clone.body == {"a": 1}
    assert str(clone) == str(error)
    assert isinstance(clone, InvoicingError)
