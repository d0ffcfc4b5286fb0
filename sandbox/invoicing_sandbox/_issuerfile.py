"""The issuers file of ``invoicing-async sandbox``: many issuers' credentials, in and out.

Two formats (a file whose first character other than white space is ``{`` or ``[`` is
read as JSON):

* JSON: one object, ``{"TIN": "API key", ...}``; what ``--issuer-count`` writes;
* CSV: one issuer a line, ``TIN,API key`` (quoted as CSV quotes, if need be); blank
  lines, lines starting with ``#``, and a first line naming the columns (``tin,api_key``;
  the first named ``tin``, ``client_id``, ``issuer`` or ``vat``) are skipped.

Each TIN must be one (the client's ``valid_tin``: 9 digits, the last a check digit): a
file naming ``not-a-tin`` is refused, not served. The file holds secrets. It is written
with 0600 permissions, and an error about it names the file, the line and the TIN, never
the line itself (a key would be in it).

.. versionadded:: 0.4.0
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from invoicing_async._for_sandbox import read_credentials, valid_tin

from ._issuers import check_issuers

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["read_issuers", "write_issuers"]


def read_issuers(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``{tin: api_key}`` of an issuers file; ``ValueError`` saying what is wrong where.

    The client's credentials-file reader (the same formats), then the sandbox's checks
    of each TIN and key.
    """
    issuers = read_credentials(Path(path))
    wrong = [tin for tin in issuers if not valid_tin(tin)]
    if wrong:
        shown = ", ".join(repr(tin[:20]) for tin in wrong[:10])
        more = f" and {len(wrong) - 10} more" if len(wrong) > 10 else ""
        raise ValueError(f"{path}: not a TIN (9 digits, the last a check digit): {shown}{more}")
    try:
        return check_issuers(issuers, {})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def write_issuers(path: str | os.PathLike[str], issuers: Mapping[str, str]) -> Path:
    """Write ``issuers`` as a JSON issuers file only its owner can read; its path."""
    target = Path(path)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if hasattr(os, "fchmod"):  # an existing file keeps its mode through O_CREAT
        os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump(dict(issuers), file, indent=0)
        file.write("\n")
    return target
