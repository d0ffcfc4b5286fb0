"""Helpers for testing code that uses :mod:`invoicing_async`.

Retries back off with real delays (exponential, with jitter, or as ``Retry-After``
asks). In a test suite those seconds add up; switch them off, process-wide, while
keeping every retry and its classification exactly as in production::

    from invoicing_async.testing import instant_retries

    def test_my_batch_survives_faults():
        with instant_retries():
            ...

The embedded provider to test against is :mod:`invoicing_async.sandbox`.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ._outcomes import retries_are_instant, set_instant_retries

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["instant_retries", "set_instant_retries"]


@contextlib.contextmanager
def instant_retries() -> Iterator[None]:
    """Within the block, every backoff delay (documents and token requests) is zero.

    The previous setting is restored on exit, so blocks nest.
    """
    previous = retries_are_instant()
    set_instant_retries(True)
    try:
        yield
    finally:
        set_instant_retries(previous)
