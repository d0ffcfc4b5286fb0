"""One way to say that a name is deprecated: the warning, pointed at the caller's line.

Renamed or privatised public names keep working for one release with a
:class:`DeprecationWarning` that names the replacement, so ``-W error`` and warning
filters find the user's code.
"""

from __future__ import annotations

import warnings

__all__ = ["deprecated"]


def deprecated(name: str, instead: str, *, depth: int = 1) -> None:
    """Warn that ``name`` is deprecated (``instead``: what to do), at the caller's line.

    ``depth``: how many frames of the library lie between the deprecated name and the
    caller (1: the deprecated function warns from its own body).
    """
    warnings.warn(
        f"{name} is deprecated and will be removed in the next release: {instead}",
        DeprecationWarning,
        stacklevel=2 + depth,
    )
