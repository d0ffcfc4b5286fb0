"""A throwaway PostgreSQL server for the outbox tests, started by the suite itself.

Debian's binaries (``/usr/lib/postgresql/<version>/bin``, or ``pg_ctl`` on the PATH)
run ``initdb`` and ``pg_ctl`` in a temporary directory, listening on 127.0.0.1 (a free
port) and on a Unix socket in that directory. initdb and the server refuse to run as
root: as root (CI), they run as the unprivileged ``postgres`` user through ``runuser``
(the user is created if missing). Without the binaries (a developer machine without
the ``postgresql`` package) :func:`find_binaries` returns ``None`` and the tests skip;
CI installs the package (``.ci/run``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "postgres"


def find_binaries() -> Path | None:
    """The directory holding initdb, pg_ctl and psql, or ``None``."""
    candidates = []
    base = Path("/usr/lib/postgresql")
    if base.is_dir():
        candidates += [
            v / "bin" for v in sorted(base.iterdir(), key=lambda p: p.name, reverse=True)
        ]
    found = shutil.which("pg_ctl")
    if found:
        candidates.append(Path(found).parent)
    for directory in candidates:
        if all((directory / name).exists() for name in ("initdb", "pg_ctl", "psql")):
            return directory
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """``with PostgresServer(bin_dir) as server: server.dsn``."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="invoicing-pg-"))
        self.data = self.root / "data"
        self.dsn = f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"
        self._as_root = os.geteuid() == 0 if hasattr(os, "geteuid") else False

    def _run(self, *args: str) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self._as_root:
            command = ["runuser", "-u", USER, "--", *command]
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=120, check=False
        )
        if completed.returncode:
            raise RuntimeError(f"{args[0]} failed: {completed.stderr[-2000:]}")

    def __enter__(self) -> PostgresServer:
        if self._as_root:
            if subprocess.run(["id", "-u", USER], capture_output=True, check=False).returncode:
                subprocess.run(
                    ["useradd", "--system", "--no-create-home", USER], check=True, timeout=60
                )
            shutil.chown(self.root, USER)
        self._run("initdb", "-D", str(self.data), "-U", USER, "--auth=trust", "-E", "UTF8")
        self.start()
        return self

    def start(self) -> None:
        """Start the server (again) on its port; returns once it accepts connections."""
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.root} -c fsync=off -c max_connections=100"
        )
        log = self.root / "server.log"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(log), "-w", "start")

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server: at once, as a crash would (``pg_ctl stop -m immediate``), or
        ``"fast"``, as a service manager's restart does (every session is ended with a
        FATAL message first)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def sql(self, statement: str) -> None:
        """Run one statement as the superuser (psql over the Unix socket)."""
        completed = subprocess.run(
            [str(self.bin_dir / "psql"), "-h", str(self.root), "-p", str(self.port), "-U", USER,
             "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", statement],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if completed.returncode:
            raise RuntimeError(f"psql failed: {completed.stderr[-2000:]}")

    def __exit__(self, *exc_info: object) -> None:
        with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
