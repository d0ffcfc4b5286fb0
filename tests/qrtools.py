"""Reading QR codes back with a real decoder (Debian's zbar-tools), for the tests.

A helper module, not a test module.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

ZBARIMG = shutil.which("zbarimg")
needs_zbar = pytest.mark.skipif(ZBARIMG is None, reason="zbarimg (zbar-tools) not installed")


def decode(path) -> str:
    """What zbar reads in the image at ``path`` (raw bytes, as UTF-8)."""
    assert ZBARIMG is not None
    done = subprocess.run(
        [ZBARIMG, "--raw", "-q", "-Sbinary", str(path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode("utf-8").removesuffix("\n")
