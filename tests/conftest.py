"""Shared test configuration."""

from __future__ import annotations

import inspect
import logging
import os
import types
import uuid

import aiohttp
import aioresponses.core
import pytest

from invoicing_async.testing import set_instant_retries


def _patch_aioresponses_for_aiohttp_314() -> None:
    """aiohttp 3.14 made ``ClientResponse(stream_writer=...)`` required; aioresponses 0.7.9
    (the latest release) does not pass it (pnuckowski/aioresponses#289). aiohttp 3.14 is a
    security release, so the test helper is adapted rather than aiohttp pinned back.
    """
    parameters = inspect.signature(aiohttp.ClientResponse.__init__).parameters
    if "stream_writer" not in parameters:
        return

    class _Response(aiohttp.ClientResponse):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("stream_writer", types.SimpleNamespace(output_size=0))
            super().__init__(*args, **kwargs)

    aioresponses.core.ClientResponse = _Response


_patch_aioresponses_for_aiohttp_314()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A real redis-server for the whole session (loopback, temp dir, no persistence);
    skips only when the binary is absent (CI installs it)."""
    from redisserver import BINARY, SKIP_REASON, RedisServer  # noqa: PLC0415

    if BINARY is None:
        pytest.skip(SKIP_REASON)
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server):
    """The session's Redis, emptied for this test."""
    redis_server.flush()
    return redis_server.url


@pytest.fixture(autouse=True)
def _restore_backoff():
    """A test that switches backoff off with the public hook does not leak it to others."""
    yield
    set_instant_retries(False)


@pytest.fixture(autouse=True)
def _restore_library_logging():
    """A test that runs the command in this process (``main([...])``) configures the
    library's logger as a command does (its own handler on stderr, no propagation): put
    it back, so later tests' log capture sees the library's records."""
    logger = logging.getLogger("invoicing_async")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


def pytest_addoption(parser):
    parser.addoption(
        "--run-slow", action="store_true", help="also run long soaks marked slow (nox -s soak)"
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="long soak: run with --run-slow (nox -s soak)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server for the whole run (see tests/pgserver.py); skips without one."""
    from pgserver import PostgresServer, find_binaries  # noqa: PLC0415

    bin_dir = find_binaries()
    if bin_dir is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL binaries are missing in CI: .ci/run installs postgresql")
        pytest.skip("PostgreSQL binaries not found (apt-get install postgresql)")
    with PostgresServer(bin_dir) as server:
        yield server


@pytest.fixture
def postgres_dsn(postgres_server):
    """A fresh database on the session's server, dropped after the test."""
    name = f"t{uuid.uuid4().hex[:12]}"
    postgres_server.sql(f'CREATE DATABASE "{name}"')
    yield postgres_server.dsn.rsplit("/", 1)[0] + "/" + name
    postgres_server.sql(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 192 KiB tmpfs mounted for the test (as root, as CI runs); unmounted after."""
    import subprocess  # noqa: PLC0415

    mount = tmp_path / "full"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=192k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)
