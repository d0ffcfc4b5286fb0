"""A pytest plugin that fails a test opening a socket: the unit suite's guard.

``tests/unit/conftest.py`` applies it to the unit tests; ``-p socketguard`` (with this
folder on the path) applies it to every test of a run, as the docs' example is run.

While a test under ``tests/unit`` is set up, run and torn down, connecting or binding a
socket (``socket.socket.connect``, ``connect_ex``, ``bind``: ``socket.create_connection``
and ``socket.create_server`` included) and asyncio's ``create_connection``,
``create_server``, ``create_unix_connection``, ``create_unix_server`` and
``create_datagram_endpoint`` raise :class:`SocketBlockedError`. The attempt is also
recorded, and the test fails at teardown with the same message, so a test whose code
swallows the error (a batch keeps going after one failure) fails too.

``socket.socketpair`` is allowed: asyncio's event loop makes its self-pipe with it.

A unit test that needs an answer from the provider stands on
:class:`invoicing_async.testing.MockTransport`; one that needs real HTTP (the sandbox, a
metrics server, Redis, PostgreSQL) belongs in ``tests/system``.
"""

from __future__ import annotations

import asyncio
import asyncio.base_events
import importlib
import socket
import sys
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Generator

#: What to do instead, in every message of the guard.
_INSTEAD = (
    "tests/unit opens no socket: stand on invoicing_async.testing.MockTransport, "
    "or move the test to tests/system"
)


class SocketBlockedError(RuntimeError):
    """A unit test tried to open a socket (not an ``OSError``: nothing retries it)."""


class SocketGuard:
    """Patches the ways to open a socket while it is on; records every attempt."""

    #: What a refused attempt raises.
    blocked = SocketBlockedError

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self._saved: list[tuple[object, str, object]] = []

    def _block(self, owner: object, name: str, *, awaitable: bool) -> None:
        original = getattr(owner, name)
        guard = self

        def blocked(*args: object, **kwargs: object) -> object:
            # args[0] is the socket or the loop; a loop's protocol factory follows.
            shown = _shown(args[2:] if awaitable else args[1:], kwargs)
            where = f"{owner.__name__}.{name}({shown})"  # type: ignore[attr-defined]
            message = f"{where}: {_INSTEAD}"
            guard.attempts.append(message)
            if isinstance(args[0], socket.socket):
                args[0].close()  # refused, and not left for the collector to warn about
            raise SocketBlockedError(message)

        async def blocked_async(*args: object, **kwargs: object) -> object:
            return blocked(*args, **kwargs)

        self._saved.append((owner, name, original))
        setattr(owner, name, blocked_async if awaitable else blocked)

    def install(self) -> None:
        """Block every way in; idempotent."""
        if self._saved:
            return
        for name in ("connect", "connect_ex", "bind"):
            self._block(socket.socket, name, awaitable=False)
        loops = [asyncio.base_events.BaseEventLoop]
        if sys.platform != "win32":  # the Unix-socket ones are the selector loop's own
            loops.append(importlib.import_module("asyncio.unix_events")._UnixSelectorEventLoop)
        for loop in loops:
            for name in (
                "create_connection",
                "create_server",
                "create_datagram_endpoint",
                "create_unix_connection",
                "create_unix_server",
            ):
                if name in vars(loop):
                    self._block(loop, name, awaitable=True)

    def uninstall(self) -> None:
        """Put every patched function back."""
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)

    def forget(self) -> list[str]:
        """The attempts recorded so far, forgotten (for the guard's own tests)."""
        attempts, self.attempts = self.attempts, []
        return attempts

    def check(self) -> None:
        """Fail the test if it tried to open a socket (even if its code caught the error)."""
        if self.attempts:
            attempts = self.forget()
            pytest.fail("\n".join(dict.fromkeys(attempts)), pytrace=False)


def _shown(args: tuple[object, ...], kwargs: dict[str, object]) -> str:
    """Where the call went: its address arguments, short."""
    given = [repr(arg) for arg in args[:2]]
    given += [f"{key}={value!r}" for key, value in kwargs.items() if key.endswith(("addr", "path"))]
    return ", ".join(given)[:120]


_GUARD = SocketGuard()


def _guarded() -> Generator[None, object, object]:
    """A runtest hook's body: the guard on around the phase, then its verdict."""
    _GUARD.install()
    try:
        result = yield
    finally:
        _GUARD.uninstall()
    _GUARD.check()
    return result


# From a conftest, the hooks see only the items under its folder: tests/unit.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guarded())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guarded())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _guarded())


@pytest.fixture
def socket_guard() -> SocketGuard:
    """The guard, for the tests of the guard itself."""
    return _GUARD
