"""The ``invoicing-async`` command: submit, token, key, the ledger and outbox, operations.

Every subcommand goes through the public API. Bad input ends with one line on stderr and
a non-zero exit status, never a traceback; outcomes are written (and flushed) one line at
a time, so whatever was submitted before a failure is in the output file.

Exit status: 0 all documents accepted (or the check passed), 1 some document was not
accepted (or the check failed), 2 bad usage or input, 130 interrupted, 141 the output
pipe was closed (``| head``), quietly. ``worker`` and ``submit`` add theirs for services
(:mod:`._service`): 3 a drain that left entries for an operator, 78 a refused
configuration, 128 + the signal when a signal stopped them.

Subcommands live in modules that expose ``register(commands)`` (see :mod:`.common`);
:data:`REGISTERS` lists this package's, each module imported here (none through
another). Other distributions add theirs through the ``invoicing_async.commands`` entry
point group: the sandbox distribution (``invoicing-async-sandbox``) adds ``demo`` and
``sandbox`` when it is installed; without it, those commands say how to install it
(:mod:`._missing`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import os
import sys
from typing import TYPE_CHECKING

from invoicing_async._cli import _day, _ledger, _missing, _operations, _pos, _submit, _worker
from invoicing_async._client.client import InvoicingClient
from invoicing_async._client.env import ssl_context
from invoicing_async._core.errors import InvoicingError, ProviderKeyError, ValidationError
from invoicing_async._doc.pgp import ProviderKey

from ._service import add_token_store, token_cache
from .common import (
    UsageError,
    add_credentials,
    add_verbosity,
    configure_logging,
    settings,
    verbosity,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from .common import Commands

__all__ = ["PLUGINS", "REGISTERS", "main"]

#: The exit status of a command whose output pipe was closed (128 + SIGPIPE).
_BROKEN_PIPE = 141


# --- subcommands of this module ----------------------------------------------------------


async def _cmd_token(args: argparse.Namespace) -> int:
    found = settings(args)
    base_url = str(found.base_url)
    try:
        context = ssl_context(found.ca_file)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    async with (
        token_cache(args) as cache,
        InvoicingClient(
            base_url,
            str(found.client_id),
            str(found.api_key),
            token_attempts=2,
            ssl=context,
            token_cache=cache,
        ) as client,
    ):
        token = await client.token()
    print(
        f"credentials accepted by {base_url}: {token.token_type} token valid for "
        f"{token.expires_in:.0f} s, refresh token {'issued' if token.refresh_token else 'none'}"
    )
    if args.show_token:
        print(token.value)
    return 0


# What to do about a refusal whose message does not already say what to ask for.
_KEY_ADVICE = {
    "unreadable": "give the provider's public key file (-----BEGIN PGP PUBLIC KEY BLOCK-----)",
    "secret_key": "ask the provider for its PUBLIC key, and keep this secret key private",
    "fingerprint_mismatch": "confirm the fingerprint with the provider by another channel",
}


def _cmd_key(args: argparse.Namespace) -> int:
    try:
        key = ProviderKey.from_file(args.file, fingerprint=args.fingerprint)
    except ProviderKeyError as exc:
        explanation = " ".join(str(exc.message).split())  # one line, whatever the message
        advice = _KEY_ADVICE.get(exc.reason)
        if advice and advice.split()[0] not in explanation:
            explanation = f"{explanation}; {advice}"
        print(f"verdict:      REFUSED ({exc.reason}): {explanation}")
        return 1
    print(f"fingerprint:  {key.fingerprint}")
    print(f"encrypts to:  {key.subkey_fingerprint} ({key.algorithm})")
    print(f"expires:      {key.expires_at.isoformat() if key.expires_at else 'never'}")
    if args.fingerprint:
        print("pin:          matches --fingerprint (the key is the one you expect)")
    print("verdict:      usable")
    return 0


def register(commands: Commands) -> None:
    """Add ``token`` and ``key``."""
    token = commands.add_parser(
        "token",
        help="check credentials against an environment",
        description="Ask the environment's token endpoint for a token: prints its lifetime "
        "(the token itself only with --show-token).",
    )
    add_verbosity(token)
    add_credentials(token)
    add_token_store(token)
    token.add_argument("--show-token", action="store_true", help="print the access token")
    token.set_defaults(handler=_cmd_token)

    key = commands.add_parser(
        "key",
        help="inspect a provider public key file",
        description="Fingerprints, the subkey documents would be encrypted to, its "
        "algorithm and expiry, and the verdict: usable, or why not.",
    )
    add_verbosity(key)
    key.add_argument("file", help="the provider's public key (ASCII armored or binary)")
    key.add_argument("--fingerprint", help="the fingerprint the key must have")
    key.set_defaults(handler=_cmd_key)


# --- entry point ---------------------------------------------------------------------

#: What adds subcommands (``register(commands)``), in the order --help lists them.
REGISTERS = (
    _submit.register,
    register,
    _ledger.register_outbox,
    _worker.register,
    _ledger.register,
    _operations.register,
    _day.register,
    _pos.register,
)
#: The entry point group of other distributions' subcommands (``register(commands)``).
PLUGINS = "invoicing_async.commands"


def _plugins() -> list[Callable[[Commands], object]]:
    """The ``register`` functions other installed distributions offer (the sandbox's)."""
    from importlib.metadata import entry_points  # noqa: PLC0415  (only the command needs it)

    return [entry.load() for entry in sorted(entry_points(group=PLUGINS), key=lambda e: e.name)]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("invoicing-async")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    return _build()[0]


def _build() -> tuple[argparse.ArgumentParser, Commands]:
    """The command's parser, and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="invoicing-async",
        description="Submit invoices to the e-invoicing provider, or try it on a sandbox.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="print the version"
    )
    add_verbosity(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    for register in _plugins():  # first: the sandbox's demo is where to start
        register(commands)
    for adding in REGISTERS:
        adding(commands)
    commands.metavar = "{" + ",".join(_offered(commands)) + "}"
    start = "Start with 'invoicing-async demo'"
    if "demo" not in commands.choices:
        start += f" (it comes with {_missing.SANDBOX_DISTRIBUTION}: install that first)"
    parser.epilog = f"Run 'invoicing-async COMMAND --help' for a command's options. {start}."
    return parser, commands


def _offered(commands: Commands) -> list[str]:
    """The commands --help lists: old names still work but are not offered."""
    return [name for name in commands.choices if name not in _ledger.DEPRECATED_COMMANDS]


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the reader left, and the exit's flush must not fail."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    parser, commands = _build()
    words = sys.argv[1:] if argv is None else argv
    word = _missing.command_word(words)
    if word is not None and word not in commands.choices:
        # Not argparse's "invalid choice" (every name, hidden ones too, and nothing on
        # what to install): what the user can do about it.
        print(
            f"invoicing-async: {_missing.unknown_command(word, _offered(commands))}",
            file=sys.stderr,
        )
        return 2
    args = parser.parse_args(words)
    configure_logging(verbosity(args))
    for note in getattr(args, "deprecated", ()):
        print(f"invoicing-async: {note}", file=sys.stderr)
    try:
        status = args.handler(args)
        if inspect.iscoroutine(status):
            status = asyncio.run(status)
        return int(status)
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as a tool killed by SIGPIPE.
        _quiet_stdout()
        return _BROKEN_PIPE
    except UsageError as exc:
        print(f"invoicing-async: {exc}", file=sys.stderr)
        return 2
    except (InvoicingError, ValueError, OSError) as exc:
        print(f"invoicing-async: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, (ValueError, ProviderKeyError, ValidationError)) else 1
    except KeyboardInterrupt:
        print("invoicing-async: interrupted", file=sys.stderr)
        return 130
