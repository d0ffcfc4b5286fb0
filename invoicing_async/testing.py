"""Helpers for testing code that uses :mod:`invoicing_async`.

Retries back off with real delays (exponential, with jitter, or as ``Retry-After``
asks). In a test suite those seconds add up; switch them off, process-wide, while
keeping every retry and its classification exactly as in production::

    from invoicing_async.testing import instant_retries

    def test_my_batch_survives_faults():
        with instant_retries():
            ...

The embedded provider to test against is :mod:`invoicing_sandbox`.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import contextlib
import typing

from ._core import retry as _retry
from ._core.retry import set_instant_retries

if typing.TYPE_CHECKING:  # the module's namespace holds only its public names
    from collections.abc import Iterator

__all__ = ["instant_retries", "set_instant_retries"]


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
