"""The unit suite stands on no socket: :mod:`socketguard` fails a unit test that opens one.

A unit test that needs an answer from the provider stands on
:class:`invoicing_async.testing.MockTransport`; one that needs real HTTP (the sandbox, a
metrics server, Redis, PostgreSQL) belongs in ``tests/system``, and the sandbox's own
tests in ``sandbox/tests``.
"""

from __future__ import annotations

from socketguard import (
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
    socket_guard,
)

__all__ = ["pytest_runtest_call", "pytest_runtest_setup", "pytest_runtest_teardown", "socket_guard"]
