"""Shared test configuration."""

from __future__ import annotations

import inspect
import types

import aiohttp
import aioresponses.core


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
