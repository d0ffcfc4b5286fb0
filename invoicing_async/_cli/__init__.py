"""The ``invoicing-async`` command (entry point :func:`main`)."""

from __future__ import annotations

from ._main import main

__all__ = ["main"]
