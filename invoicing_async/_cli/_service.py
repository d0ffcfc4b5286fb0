"""What the commands that run as services share: stop signals, exit codes, shared tokens.

``worker`` and ``submit`` run under systemd, Docker and Kubernetes, which stop a
service with ``SIGTERM`` and, after a grace period, ``SIGKILL``:

* :class:`Signals` turns the first ``SIGTERM`` or ``SIGINT`` into a graceful stop (the
  command's own: claim or read nothing more, let the requests out end within
  ``--grace`` seconds), the second into a stop at once, and ``SIGHUP`` into a reload of
  the credentials;
* the exit codes (documented in ``docs/cli.rst``): :data:`EXIT_WAITING` when a drain
  ends with entries only an operator can release, :data:`EXIT_CONFIG` (``EX_CONFIG`` of
  ``sysexits.h``) when the configuration is refused, ``128 + signal`` when a second
  signal stopped the command at once;
* ``--token-store`` (``INVOICING_TOKEN_STORE``): access tokens shared in Redis by every
  process of a fleet (:class:`~invoicing_async.redis.RedisTokenStore`), encrypted with
  the key ``INVOICING_TOKEN_STORE_KEY`` or ``--token-store-key-file`` names.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from invoicing_async._client.worker import DEFAULT_GRACE
from invoicing_async._io.tokencache import TokenCache

from .inputs import UsageError

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator, Callable, Iterator

__all__ = [
    "ENV_TOKEN_STORE",
    "ENV_TOKEN_STORE_KEY",
    "EXIT_CONFIG",
    "EXIT_WAITING",
    "Signals",
    "add_grace",
    "add_token_store",
    "token_cache",
]

#: A drain (``worker --until-empty``) ended with entries only an operator can release:
#: refused or missing credentials, parked documents.
EXIT_WAITING = 3
#: The configuration is refused: the outbox database refuses the worker's credentials,
#: the outbox is of a newer format, not an outbox (``EX_CONFIG``, sysexits.h).
EXIT_CONFIG = 78
ENV_GRACE = "INVOICING_STOP_GRACE"
ENV_TOKEN_STORE = "INVOICING_TOKEN_STORE"  # noqa: S105  (a variable's name)
ENV_TOKEN_STORE_KEY = "INVOICING_TOKEN_STORE_KEY"  # noqa: S105  (a variable's name)
_KEY_SIZES = (16, 24, 32)


class Signals:
    """``SIGTERM``/``SIGINT``: a graceful stop, then at once; ``SIGHUP``: a reload.

    :param stop: called at the first stop signal.
    :param now: called at the second.
    :param reload: called at ``SIGHUP`` (``None``: it is said that nothing reloads).
    :param grace: the seconds the graceful stop allows (said on stderr).
    """

    def __init__(
        self,
        *,
        stop: Callable[[], object],
        now: Callable[[], object],
        reload: Callable[[], object] | None = None,
        grace: float,
    ) -> None:
        self._stop = stop
        self._now = now
        self._reload = reload
        self._grace = grace
        #: The first stop signal received, if any.
        self.received: signal.Signals | None = None
        #: Whether a second stop signal came.
        self.forced = False

    @property
    def exit_status(self) -> int:
        """``128 + the signal``: the status of a command a signal stopped."""
        return 128 + int(self.received or signal.SIGTERM)

    @contextlib.contextmanager
    def installed(self) -> Iterator[Signals]:
        """Handle the signals on the running loop for the block (where it can)."""
        loop = asyncio.get_running_loop()
        installed = []
        for number, handler in (
            (signal.SIGTERM, self._stopping),
            (signal.SIGINT, self._stopping),
            (getattr(signal, "SIGHUP", None), self._hangup),
        ):
            if number is None:
                continue
            try:
                loop.add_signal_handler(number, handler, number)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
                continue
            installed.append(number)
        try:
            yield self
        finally:
            for number in installed:
                loop.remove_signal_handler(number)

    def _stopping(self, number: signal.Signals) -> None:
        name = signal.Signals(number).name
        if self.received is None:
            self.received = signal.Signals(number)
            print(
                f"invoicing-async: {name}: stopping: nothing new is started, the requests "
                f"out may end within {self._grace:g} s; a second signal stops at once",
                file=sys.stderr,
                flush=True,
            )
            self._stop()
        elif not self.forced:
            self.forced = True
            print(f"invoicing-async: {name} again: stopping at once", file=sys.stderr, flush=True)
            self._now()

    def _hangup(self, _number: signal.Signals) -> None:
        if self._reload is None:
            print(
                "invoicing-async: SIGHUP: nothing to reload (one issuer's credentials: "
                "restart to change them)",
                file=sys.stderr,
                flush=True,
            )
            return
        print("invoicing-async: SIGHUP: reading the credentials again", file=sys.stderr)
        self._reload()


def add_grace(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--grace SECONDS`` (``INVOICING_STOP_GRACE``)."""
    parser.add_argument(
        "--grace",
        type=float,
        metavar="SECONDS",
        help="after SIGTERM or SIGINT, the seconds the requests in flight may take to end "
        f"(default: ${ENV_GRACE}, else {DEFAULT_GRACE:g}; keep it under the orchestrator's "
        "own: Kubernetes kills after 30 s); a second signal stops at once",
    )


def grace_of(args: argparse.Namespace) -> float:
    """The grace ``--grace`` or its variable gives."""
    value = args.grace
    if value is None:
        text = os.environ.get(ENV_GRACE, "").strip()
        try:
            value = float(text) if text else DEFAULT_GRACE
        except ValueError:
            raise UsageError(f"${ENV_GRACE}={text!r} is not a number of seconds") from None
    if not value >= 0:
        raise UsageError("--grace must be 0 seconds or more")
    return float(value)


def add_token_store(parser: argparse.ArgumentParser) -> None:
    """``--token-store URL`` and ``--token-store-key-file FILE`` (each with its variable)."""
    group = parser.add_argument_group(
        "tokens shared by a fleet",
        "Every process given the same store fetches one access token per issuer for the "
        "whole fleet, not one each (needs the 'redis' extra).",
    )
    group.add_argument(
        "--token-store",
        metavar="URL",
        help=f"share access tokens in this Redis (redis://host:6379/0, rediss:// for TLS; "
        f"default: ${ENV_TOKEN_STORE})",
    )
    group.add_argument(
        "--token-store-key-file",
        metavar="FILE",
        help="store the tokens encrypted (AES-GCM) with the key in FILE: 16, 24 or 32 "
        f"bytes, raw or base64 (default: the key itself, base64, in ${ENV_TOKEN_STORE_KEY}); "
        "every process of the fleet needs the same key",
    )


@contextlib.asynccontextmanager
async def token_cache(args: argparse.Namespace) -> AsyncIterator[TokenCache | None]:
    """The token cache ``--token-store`` asks for (``None``: each process its own)."""
    url = (getattr(args, "token_store", None) or os.environ.get(ENV_TOKEN_STORE, "")).strip()
    if not url:
        yield None
        return
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise UsageError("--token-store takes a redis://, rediss:// or unix:// URL")
    key = _encryption_key(getattr(args, "token_store_key_file", None))
    try:
        from invoicing_async._io.redisstore import RedisTokenStore  # noqa: PLC0415  (the redis extra)
    except ImportError:
        raise UsageError(
            "--token-store needs the 'redis' extra: pip install 'invoicing-async[redis]'"
        ) from None
    store = RedisTokenStore(url, encryption_key=key)
    try:
        yield TokenCache(store=store)
    finally:
        await store.aclose()


def _encryption_key(path: str | None) -> bytes | None:
    """The store's encryption key: from the file, else the variable (base64); or none."""
    if path:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read --token-store-key-file {path}: {exc.strerror}") from None
        if len(data) in _KEY_SIZES:
            return data
        text, where = data.decode("ascii", "replace").strip(), f"--token-store-key-file {path}"
    else:
        text, where = os.environ.get(ENV_TOKEN_STORE_KEY, "").strip(), f"${ENV_TOKEN_STORE_KEY}"
        if not text:
            return None
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) not in _KEY_SIZES:
        raise UsageError(f"{where}: a key of 16, 24 or 32 bytes (raw, or base64) is needed")
    return key
