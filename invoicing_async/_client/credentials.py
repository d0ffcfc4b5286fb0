"""Many issuers' credentials for the command line: a file, or a resolver named by path.

A platform's worker sends for every issuer whose documents are in its outbox. The
``invoicing-async`` command then builds an :class:`~invoicing_async.IssuerPool` instead
of a client, from one of (the first given wins):

* ``--credentials FILE`` or ``INVOICING_CREDENTIALS_FILE``: a file of ``{tin: api_key}``,
  JSON or CSV (:mod:`._credfile`: the formats, and errors that show no value), the
  format of ``invoicing-async sandbox --issuers FILE`` and of the file
  ``--issuer-count`` writes. The file is a :class:`CredentialsFile`: read again, off the
  event loop, when it changes (a key rotated while the worker runs), only once the
  change is complete (see its settle rule), the last good credentials kept in use while
  a changed file cannot be read.
* ``INVOICING_CREDENTIALS_RESOLVER=package.module:function``: a callable importable by
  that path, ``tin -> api_key`` (or ``None``: not one of ours), plain or ``async``, so
  keys can stay in a vault or the application's database; it is called once per
  issuer while the pool keeps that issuer, and again when the provider refuses the key
  it gave.

The resolver's exceptions are the pool's :class:`~invoicing_async.UnknownIssuerError`
for that issuer's documents.

.. versionadded:: 0.4.0
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._core.log import auth as log

from .credfile import MAX_FILE_SIZE, complete, parse_credentials, read_file, stamp_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from .credfile import Stamp

    Resolver = Callable[[str], Awaitable[str | None] | str | None]

__all__ = [
    "ENV_CREDENTIALS_FILE",
    "ENV_CREDENTIALS_RESOLVER",
    "LOOK_EVERY",
    "SETTLE",
    "SETTLE_INCOMPLETE",
    "CredentialsFile",
    "issuer_credentials",
    "load_resolver",
]

ENV_CREDENTIALS_FILE = "INVOICING_CREDENTIALS_FILE"
ENV_CREDENTIALS_RESOLVER = "INVOICING_CREDENTIALS_RESOLVER"
#: Seconds between two looks at a watched credentials file (has it changed?).
LOOK_EVERY = 0.25
#: Seconds a changed file must stay the same (size, modification time, inode) to be read.
SETTLE = 0.25
#: Seconds a CSV file whose last line has no newline must stay the same to be read.
SETTLE_INCOMPLETE = 2.0
#: The stamp of a file that is not there (or cannot be looked at).
_MISSING: Stamp = (-1, -1, -1, -1, -1)


@attrs.frozen
class _Look:
    """What one look at the file found (made in a thread, taken in on the loop).

    ``seen``: a version not read yet, and since when it is the same (settling);
    ``stamp``: the version read, then ``keys`` (``same``: as those in use) or
    ``refused`` (why it cannot be used).
    """

    seen: tuple[Stamp, float] | None = None
    stamp: Stamp | None = None
    keys: dict[str, str] | None = None
    same: bool = False
    refused: str | None = None


class CredentialsFile(Mapping[str, str]):
    """A credentials file as a pool's resolver: read again, off the loop, when it changes.

    Looked up, it answers from the credentials it holds: a lookup never reads the file.
    The file is read at start (as it is then), and read again by :meth:`look` (every
    ``every`` seconds while :meth:`start` watches it) or :meth:`reload` (``SIGHUP``),
    always in a thread, one read at a time: requests meanwhile make one more read, not
    one each.

    The settle rule: a file rewritten in place may be read between its writer's writes,
    and a half-written line still parses (a key cut short). A changed file is read only
    once it has stayed the same — its inode, size and modification time — for ``settle``
    seconds (``settle_incomplete`` for a CSV file whose last line has no newline at its
    end), and was the same before and after the read; it is then used only if every line
    is good, else the last good credentials stay in use, with one WARNING naming where
    the problems are. Writing a temporary file and renaming it over (an atomic rename)
    is the way to change it: a renamed file is never seen half written, whatever its
    writer's pace.

    :param clock: the monotonic clock the settle rule reads.
    :param limit: the largest file read, in bytes.
    :raises ValueError: the file cannot be read at first (see :mod:`._credfile`).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        settle: float = SETTLE,
        settle_incomplete: float = SETTLE_INCOMPLETE,
        every: float = LOOK_EVERY,
        limit: int = MAX_FILE_SIZE,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._settle = settle
        self._incomplete = max(settle, settle_incomplete)
        self._every = every
        self._limit = limit
        data, before, after = read_file(self.path, limit=limit)
        if before != after:
            raise ValueError(f"the credentials file {self.path} changed while it was read")
        self._keys = parse_credentials(self.path, data)
        #: The version last read (in use, or refused).
        self._taken = before
        #: A version not read yet, and since when it has been the same.
        self._seen: tuple[Stamp, float] | None = None
        #: How many times the credentials were read again and changed.
        self.revision = 0
        self._running: asyncio.Future[_Look] | None = None
        self._queued: asyncio.Future[bool] | None = None
        self._force = False
        self._listener: Callable[[], object] | None = None
        #: The loop it is watched on, and the timer of its next look.
        self._watching: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        return f"<CredentialsFile {str(self.path)!r} issuers={len(self._keys)}>"

    def __getitem__(self, tin: str) -> str:
        return self._keys[tin]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def look(self) -> asyncio.Future[bool]:
        """Look at the file (off the loop); read it if it changed and has settled.

        Done with whether the credentials changed.
        """
        return self._request(force=False)

    def reload(self) -> asyncio.Future[bool]:
        """Read the file again (``SIGHUP``): off the loop, once a change has settled.

        Done with whether the credentials changed. Any number of calls while a read is
        under way make one more read.
        """
        return self._request(force=True)

    def start(self, listener: Callable[[], object]) -> None:
        """Look at the file every ``every`` seconds on the running loop, until :meth:`stop`.

        ``listener`` is called (on the loop) whenever the credentials change.
        """
        self._listener = listener
        loop = asyncio.get_running_loop()
        if self._watching is not loop:
            self._watching = loop
            self._arm()

    def stop(self) -> None:
        """Stop looking at the file (a read under way ends on its own)."""
        self._listener = self._watching = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # --- internals -------------------------------------------------------------------------

    def _arm(self, _: object = None) -> None:
        """The next look in ``every`` seconds (the previous one done), while watched."""
        if self._watching is not None and self._timer is None:
            self._timer = self._watching.call_later(self._every, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.look().add_done_callback(self._arm)

    def _request(self, *, force: bool) -> asyncio.Future[bool]:
        """The read to come: this call's, or the one already waiting for its turn."""
        loop = asyncio.get_running_loop()
        self._force = self._force or force
        queued = self._queued
        if queued is None or queued.get_loop() is not loop:
            queued = self._queued = loop.create_future()
        if self._running is None:
            self._next(loop)
        return queued

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        future, self._queued = self._queued, None
        assert future is not None  # noqa: S101  (only called with one waiting)
        force, self._force = self._force, False
        running = self._running = loop.run_in_executor(None, self._look_now, force, self._clock())
        running.add_done_callback(functools.partial(self._done, future))

    def _done(self, future: asyncio.Future[bool], running: asyncio.Future[_Look]) -> None:
        self._running = None
        changed = False
        if running.cancelled():
            pass
        elif running.exception() is not None:
            log.warning(
                "the credentials file %s could not be looked at (%s); the credentials read "
                "before stay in use",
                self.path,
                type(running.exception()).__name__,
            )
        else:
            changed = self._take(running.result())
        if not future.done():
            future.set_result(changed)
        if self._queued is not None:
            self._next(self._queued.get_loop())

    def _look_now(self, force: bool, now: float) -> _Look:
        """One look (in a thread): what the file holds, if it is to be read now."""
        found = _stamp(self.path)
        settled = force and found == self._taken  # read again as it is (SIGHUP)
        if found == self._taken and not force:
            return _Look()
        seen = self._seen
        since = seen[1] if seen is not None and seen[0] == found else now
        if not settled and now - since < self._settle:
            return _Look(seen=(found, since))
        try:
            data, before, after = read_file(self.path, limit=self._limit)
        except ValueError as exc:
            return _Look(stamp=found, refused=str(exc))
        if before != found or after != found:  # changed meanwhile: it settles again
            return _Look(seen=(after, now))
        if not settled and not complete(data) and now - since < self._incomplete:
            return _Look(seen=(found, since))
        try:
            keys = parse_credentials(self.path, data)
        except ValueError as exc:
            return _Look(stamp=found, refused=str(exc))
        return _Look(stamp=found, keys=keys, same=keys == self._keys)

    def _take(self, look: _Look) -> bool:
        """Take in what a look found (on the loop); whether the credentials changed."""
        if look.stamp is None:
            self._seen = look.seen
            return False
        self._taken, self._seen = look.stamp, None
        if look.refused is not None:
            log.warning("%s; the credentials read before stay in use", look.refused)
            return False
        if look.keys is None or look.same:
            return False
        self._keys = look.keys
        self.revision += 1
        log.info("the credentials file %s changed: %d issuers", self.path, len(look.keys))
        if self._listener is not None:
            self._listener()
        return True


def _stamp(path: Path) -> Stamp:
    try:
        return stamp_of(path.stat())
    except OSError:
        return _MISSING


def load_resolver(spec: str) -> Resolver:
    """The callable ``package.module:function`` names.

    :raises ValueError: the name is malformed, cannot be imported, or is not callable.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{ENV_CREDENTIALS_RESOLVER}={spec!r}: expected package.module:function")
    try:
        found: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except ImportError as exc:
        raise ValueError(
            f"{ENV_CREDENTIALS_RESOLVER}: cannot import {module_name}: {exc}"
        ) from None
    except AttributeError:
        raise ValueError(f"{ENV_CREDENTIALS_RESOLVER}: {module_name} has no {attribute}") from None
    if not callable(found):
        raise ValueError(f"{ENV_CREDENTIALS_RESOLVER}: {spec} is not callable")  # noqa: TRY004
    resolver: Resolver = found
    return resolver


def issuer_credentials(
    environ: Mapping[str, str], *, file: str | None = None
) -> CredentialsFile | Resolver | None:
    """Many issuers' credentials, if given: ``file``, else the variables; else ``None``.

    :raises ValueError: see :func:`read_credentials` and :func:`load_resolver`.
    """
    path = (file or "").strip() or (environ.get(ENV_CREDENTIALS_FILE) or "").strip()
    if path:
        return CredentialsFile(path)
    spec = (environ.get(ENV_CREDENTIALS_RESOLVER) or "").strip()
    if spec:
        return load_resolver(spec)
    return None
