"""Helpers for testing code that uses :mod:`invoicing_async`.

Retries back off with real delays (exponential, with jitter, or as ``Retry-After``
asks). In a test suite those seconds add up; switch them off, process-wide, while
keeping every retry and its classification exactly as in production::

    from invoicing_async.testing import instant_retries

    def test_my_batch_survives_faults():
        with instant_retries():
            ...

Unit tests without a socket stand on :class:`MockTransport`: a function of yours gets
each request the client would send and returns the answer::

    from invoicing_async.testing import MockTransport, Request, Response, respond, token_response

    def provider(request: Request) -> Response:
        if request.path == "/oauth/token":
            return token_response()
        return respond(200, {"mark": 400001234567890, "uid": "8F2C"})

    client = InvoicingClient(base_url, tin, api_key, transport=MockTransport(provider))

The embedded provider to test against over real HTTP is :mod:`invoicing_sandbox`.

.. versionadded:: 0.2.0
.. versionchanged:: 0.5.0 :class:`MockTransport`, :class:`Request`, :class:`Response`,
   :func:`respond` and :func:`token_response`.
"""

from __future__ import annotations

import contextlib
import typing

from ._core import retry as _retry
from ._core.protocol import Request, Response
from ._core.retry import set_instant_retries
from ._io.mock import MockTransport, respond, token_response

if typing.TYPE_CHECKING:  # the module's namespace holds only its public names
    from collections.abc import Iterator

__all__ = [
    "MockTransport",
    "Request",
    "Response",
    "instant_retries",
    "respond",
    "set_instant_retries",
    "token_response",
]


@contextlib.contextmanager
def instant_retries() -> Iterator[None]:
    """Within the block, every backoff delay (documents and token requests) is zero.

    The previous setting is restored on exit, so blocks nest.
    """
    previous = _retry.retries_are_instant()
    set_instant_retries(True)
    try:
        yield
    finally:
        set_instant_retries(previous)
