"""The unit suite's socket guard (tests/unit/conftest.py): it catches every way in."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import pytest


@pytest.fixture
def guard(socket_guard):
    """The guard. Each test forgets the attempts it made on purpose before it ends, or
    the guard's verdict would fail it (as it must fail any other)."""
    return socket_guard


def test_connecting_a_socket_is_refused_with_what_to_do(guard):
    """``socket.create_connection`` (``socket.connect``) fails with a clear message."""
    with pytest.raises(guard.blocked, match=r"tests/unit opens no socket.*MockTransport"):
        socket.create_connection(("127.0.0.1", 9))
    [attempt] = guard.forget()
    assert attempt.startswith("socket.connect(('127.0.0.1', 9)): tests/unit opens no socket")


@pytest.mark.parametrize("name", ["connect", "connect_ex", "bind"])
def test_each_socket_method_is_refused(guard, name):
    """connect, connect_ex and bind, on any socket."""
    with socket.socket() as sock, pytest.raises(guard.blocked):
        getattr(sock, name)(("127.0.0.1", 0))
    assert len(guard.forget()) == 1


async def test_asyncio_connections_and_servers_are_refused(guard):
    """The event loop's ways: create_connection, create_server, create_datagram_endpoint,
    and the Unix-socket ones."""
    loop = asyncio.get_running_loop()
    attempts = [
        loop.create_connection(asyncio.Protocol, "127.0.0.1", 9),
        loop.create_server(asyncio.Protocol, "127.0.0.1", 0),
        loop.create_datagram_endpoint(asyncio.DatagramProtocol, local_addr=("127.0.0.1", 0)),
        loop.create_unix_connection(asyncio.Protocol, "/nonexistent"),
        loop.create_unix_server(asyncio.Protocol, "/nonexistent"),
        asyncio.open_connection("127.0.0.1", 9),
    ]
    for attempt in attempts:
        with pytest.raises(guard.blocked):
            await attempt
    shown = guard.forget()
    assert len(shown) == len(attempts)
    assert shown[0].startswith("BaseEventLoop.create_connection('127.0.0.1', 9): ")
    assert shown[2].startswith("BaseEventLoop.create_datagram_endpoint(local_addr=")


async def test_a_socketpair_and_the_loops_self_pipe_are_allowed(guard):
    """asyncio's self-pipe is a socketpair: the loop (this test's) runs, and a pair works."""
    first, second = socket.socketpair()
    with first, second:
        first.sendall(b"x")
        assert second.recv(1) == b"x"
    await asyncio.sleep(0)  # the loop wakes through its self-pipe
    assert guard.attempts == []


def test_an_attempt_the_code_swallowed_still_fails_the_test(guard):
    """Code that catches the error (a batch goes on after one failure) does not hide the
    attempt: the guard's verdict fails the test with the same message."""
    with contextlib.suppress(guard.blocked):
        socket.create_connection(("127.0.0.1", 9))
    with pytest.raises(pytest.fail.Exception, match="tests/unit opens no socket"):
        guard.check()
    assert guard.attempts == []  # reported once


def test_the_guard_is_off_outside_unit_tests(guard):
    """Uninstalled, the real functions are back (a system test in the same session)."""
    guard.uninstall()
    try:
        assert "blocked" not in socket.socket.connect.__qualname__
        assert "blocked" not in asyncio.base_events.BaseEventLoop.create_connection.__qualname__
    finally:
        guard.install()
    assert "blocked" in socket.socket.connect.__qualname__
