"""Fixtures of the sandbox's own tests: a running sandbox on a fake clock, and a caller.

The tests drive the sandbox over real loopback HTTP with aiohttp's client (the
sandbox's own dependency), through :class:`daytools.Caller`, which holds a token and
the API key as the provider's clients send them.
"""

from __future__ import annotations

import pytest
from daytools import Caller, FakeClock

from invoicing_sandbox import Sandbox


@pytest.fixture
def clock() -> FakeClock:
    """The sandbox's clock: moved by hand (token lifetimes, IRIS payment validity)."""
    return FakeClock()


@pytest.fixture
def sandbox_options() -> dict:
    """Keyword arguments of the ``sb`` sandbox (a test module may override it)."""
    return {}


@pytest.fixture
async def sb(clock, sandbox_options):
    """A running sandbox (Curve25519 key: fast to make) on the fake clock."""
    async with Sandbox(key_algorithm="cv25519", clock=clock, **sandbox_options) as sandbox:
        yield sandbox


@pytest.fixture
async def caller(sb):
    """The default issuer's caller: a token, its API key, an aiohttp session."""
    async with Caller(sb) as calling:
        yield calling
