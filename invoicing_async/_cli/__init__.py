"""The ``invoicing-async`` command (entry point :func:`main`)."""

from __future__ import annotations

from .command import main

__all__ = ["main"]
