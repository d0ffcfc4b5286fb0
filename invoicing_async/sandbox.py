"""The sandbox's old place: ``invoicing_async.sandbox`` is now ``invoicing_sandbox``.

.. deprecated:: 0.3.0
   The embedded provider is its own distribution, ``invoicing-async-sandbox``, and
   package, :mod:`invoicing_sandbox` (install it beside the client for tests and demos).
   The names here are that package's, each with a :class:`DeprecationWarning`; this
   module goes away in the next release.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._deprecation import deprecated

__all__: list[str] = []


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        package = importlib.import_module("invoicing_sandbox")
    except ImportError:
        raise ImportError(
            "the sandbox is its own distribution now: pip install invoicing-async-sandbox "
            "(from a checkout: pip install -e ./sandbox), then import invoicing_sandbox"
        ) from None
    value = getattr(package, name)
    deprecated(
        f"invoicing_async.sandbox.{name}",
        "import it from invoicing_sandbox (the invoicing-async-sandbox distribution)",
    )
    return value
