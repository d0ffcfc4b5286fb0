"""What the subcommands share: credentials options, logging, the registration protocol.

A module of subcommands exposes ``register(commands)``: it adds its parsers to
``commands`` (the ``add_subparsers`` object) and gives each a ``handler`` default, a
function of the parsed arguments returning the exit status (a coroutine function is run
with :func:`asyncio.run`). :mod:`.command` lists the modules; adding one is one line.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import IO, TYPE_CHECKING, Any

from invoicing_async._client.client import InvoicingClient
from invoicing_async._client.credentials import (
    ENV_CREDENTIALS_FILE,
    ENV_CREDENTIALS_RESOLVER,
    CredentialsFile,
    issuer_credentials,
)
from invoicing_async._client.env import (
    ENV_API_KEY,
    ENV_API_KEY_FILE,
    ENV_BASE_URL,
    ENV_CA_FILE,
    ENV_CLIENT_ID,
    ENV_PROVIDER_FINGERPRINT,
    ENV_PROVIDER_KEY,
    Settings,
    read_settings,
    ssl_context,
)
from invoicing_async._client.pool import IssuerPool
from invoicing_async._doc.pgp import ProviderKey

from .inputs import UsageError

if TYPE_CHECKING:
    import ssl
    from collections.abc import Awaitable, Callable, Sequence

    from invoicing_async._client.credentials import Resolver

    from .output import Progress

    Handler = Callable[[argparse.Namespace], "int | Awaitable[int]"]
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]  # noqa: SLF001

__all__ = [
    "DEFAULT_CONCURRENCY",
    "ENV_LEDGER",
    "DeprecatedOption",
    "UsageError",
    "add_concurrency",
    "add_credentials",
    "add_ledger",
    "add_verbosity",
    "attach_progress",
    "configure_logging",
    "issuers",
    "key_and_tls",
    "ledger_url",
    "parked_hint",
    "sender",
    "settings",
    "shown_url",
    "verbosity",
]

LIBRARY_LOGGER = "invoicing_async"
ENV_CREDENTIALS_RECHECK = "INVOICING_CREDENTIALS_RECHECK"
#: The ledger or outbox (a SQLite file or a ``postgresql://`` URL) when ``--ledger`` is not given.
ENV_LEDGER = "INVOICING_LEDGER"
#: Documents in flight by default: the library's own default (``submit_stream``,
#: ``run_worker``), so the command and the code behave the same.
DEFAULT_CONCURRENCY = 32


class DeprecatedOption(argparse.Action):
    """An option's old spelling: hidden from --help, stores into the new option's dest.

    Using it adds a note to ``deprecated`` (printed once on stderr by the command).
    """

    def __init__(
        self, option_strings: list[str], dest: str, *, replacement: str, **kwargs: Any
    ) -> None:
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)
        self.replacement = replacement

    def __call__(
        self,
        parser: argparse.ArgumentParser,  # noqa: ARG002  (argparse's signature)
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        note = f"{option_string} is deprecated: use {self.replacement}"
        namespace.deprecated = (*getattr(namespace, "deprecated", ()), note)


def add_verbosity(parser: argparse.ArgumentParser) -> None:
    """``-v/--verbose``, on the main parser and on every subcommand."""
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS,
        help="log what happens: -v retries and requests (INFO), -vv everything (DEBUG)",
    )


def add_ledger(parser: argparse.ArgumentParser) -> None:
    """``-v`` and ``--ledger URL``: the ledger or outbox a command works on."""
    add_verbosity(parser)
    parser.add_argument(
        "--ledger",
        metavar="URL",
        help=f"a SQLite file or a postgresql:// URL (default: ${ENV_LEDGER})",
    )


def add_concurrency(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--concurrency N``: documents in flight, the library's default by default."""
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"documents in flight ({DEFAULT_CONCURRENCY})",
    )


def add_credentials(
    parser: argparse.ArgumentParser, *, provider_key: bool = False, many: bool = False
) -> None:
    """The options naming an environment and its credentials (each with its variable).

    With ``many``, also ``--credentials``: many issuers' API keys (see :func:`issuers`).
    """
    group = parser.add_argument_group(
        "environment and credentials",
        "Each option wins over its environment variable; the API key is never an option "
        "(command lines are visible to other users): give it in a variable or a file.",
    )
    group.add_argument(
        "--base-url", metavar="URL", help=f"the environment's base URL (default: ${ENV_BASE_URL})"
    )
    group.add_argument(
        "--client-id", metavar="TIN", help=f"the issuer's TIN (default: ${ENV_CLIENT_ID})"
    )
    group.add_argument(
        "--api-key-file",
        metavar="FILE",
        help=(
            f"read the API key from FILE (default: the key itself in ${ENV_API_KEY}, "
            f"or the file named by ${ENV_API_KEY_FILE})"
        ),
    )
    group.add_argument(
        "--ca-file",
        metavar="PEM",
        help=(f"also trust the CA certificates in PEM, e.g. a sandbox's (default: ${ENV_CA_FILE})"),
    )
    if many:
        group.add_argument(
            "--credentials",
            metavar="FILE",
            help=(
                "send for many issuers, each document with the API key of the issuer it "
                "names: FILE holds a JSON object {TIN: API key} or CSV lines TIN,API key "
                f"(default: ${ENV_CREDENTIALS_FILE}, or the resolver named by "
                f"${ENV_CREDENTIALS_RESOLVER}=package.module:function); --client-id and "
                "the API key are then not needed. A file is read again when it changes, "
                "and on SIGHUP"
            ),
        )
        group.add_argument(
            "--credentials-recheck",
            type=float,
            metavar="SECONDS",
            help=(
                "when the provider refuses an issuer's API key, ask the resolver (or the "
                "file) for it again after SECONDS, doubling while it stays refused "
                f"(default: ${ENV_CREDENTIALS_RECHECK}, else 30)"
            ),
        )
    if provider_key:
        group.add_argument(
            "--provider-key",
            metavar="FILE",
            help=f"the provider's public key file (default: ${ENV_PROVIDER_KEY})",
        )
        group.add_argument(
            "--fingerprint",
            help=(
                f"the fingerprint the provider key must have (default: ${ENV_PROVIDER_FINGERPRINT})"
            ),
        )


def issuers(
    args: argparse.Namespace, *, environ: dict[str, str] | None = None
) -> CredentialsFile | Resolver | None:
    """Many issuers' credentials (``--credentials`` or the variables), or ``None``.

    See :mod:`invoicing_async._client.credentials`; an unreadable file or resolver is a
    UsageError naming the file, the line and the column, never a value of the file.
    """
    try:
        return issuer_credentials(
            os.environ if environ is None else environ, file=getattr(args, "credentials", None)
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def ledger_url(args: argparse.Namespace) -> str:
    """The ledger or outbox ``--ledger`` (or ``$INVOICING_LEDGER``) names."""
    url: str | None = args.ledger or os.environ.get(ENV_LEDGER)
    if not url:
        raise UsageError(f"missing --ledger or {ENV_LEDGER} (a SQLite file or postgresql:// URL)")
    return url


def shown_url(url: str) -> str:
    """An outbox's URL without a password (a command line to copy is printed)."""
    scheme, sep, rest = url.partition("://")
    credentials, at, place = rest.rpartition("@")
    if not sep or not at or ":" not in credentials:
        return url
    return f"{scheme}://{credentials.split(':', 1)[0]}:***@{place}"


def parked_hint(parked: int, url: str) -> str:
    """What to do about parked entries, in words."""
    return (
        f"{parked} parked entr{'y' if parked == 1 else 'ies'} need attention: see "
        f"'invoicing-async ledger show --status parked --ledger {shown_url(url)}', send them "
        "again with 'ledger retry --status parked'"
    )


def sender(
    found: Settings,
    credentials: CredentialsFile | Resolver | None,
    *,
    args: argparse.Namespace | None = None,
    **options: Any,
) -> InvoicingClient | IssuerPool:
    """What sends: a pool of the issuers' ``credentials`` when given, else the client.

    ``args``: the pool's ``--credentials-recheck`` (or its variable).
    """
    if credentials is not None:
        if args is not None:
            options["recheck_refused"] = _recheck(args)
        return IssuerPool(str(found.base_url), credentials, **options)
    return InvoicingClient(str(found.base_url), str(found.client_id), str(found.api_key), **options)


def _recheck(args: argparse.Namespace) -> float:
    """The seconds ``--credentials-recheck`` (or its variable) gives; 30 by default."""
    value = getattr(args, "credentials_recheck", None)
    if value is None:
        text = os.environ.get(ENV_CREDENTIALS_RECHECK, "").strip()
        try:
            value = float(text) if text else 30.0
        except ValueError:
            raise UsageError(
                f"${ENV_CREDENTIALS_RECHECK}={text!r} is not a number of seconds"
            ) from None
    if not value >= 0:
        raise UsageError("--credentials-recheck must be 0 seconds or more")
    return float(value)


def settings(
    args: argparse.Namespace, *, environ: dict[str, str] | None = None, many: bool = False
) -> Settings:
    """The settings the options and the variables give; missing ones are a UsageError.

    :param many: the credentials of many issuers are given (:func:`issuers`): the
        issuer's own (``--client-id``, the API key) are not needed.
    """
    try:
        found = read_settings(
            os.environ if environ is None else environ,
            base_url=args.base_url,
            client_id=args.client_id,
            api_key_file=args.api_key_file,
            provider_key=getattr(args, "provider_key", None),
            fingerprint=getattr(args, "fingerprint", None),
            ca_file=args.ca_file,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    missing = found.missing(
        labels={
            "base_url": f"--base-url or ${ENV_BASE_URL}",
            "client_id": f"--client-id or ${ENV_CLIENT_ID}",
            "api_key": f"--api-key-file, ${ENV_API_KEY} or ${ENV_API_KEY_FILE}",
        }
    )
    if many:
        missing = missing[:1] if not found.base_url else []
    if missing:
        raise UsageError("missing " + ", ".join(missing))
    return found


def key_and_tls(
    found: Settings, *, json_only: bool
) -> tuple[ProviderKey | None, ssl.SSLContext | None]:
    """The provider key (none for ``--json``) and the TLS context the settings name."""
    key = None
    if not json_only:
        if not found.provider_key:
            raise UsageError(
                f"missing the provider's public key: documents are encrypted to it; give "
                f"--provider-key FILE or ${ENV_PROVIDER_KEY} (the provider publishes it; "
                "'invoicing-async key FILE' checks a key file)"
            )
        key = ProviderKey.from_file(found.provider_key, fingerprint=found.fingerprint)
    try:
        return key, ssl_context(found.ca_file)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


class _ProgressFriendlyHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes log records to stderr, clearing the progress line first."""

    def __init__(self, stream: IO[str]) -> None:
        super().__init__(stream)
        self.progress: Progress | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.progress is not None:
            self.progress.clear()
        super().emit(record)


_handler: _ProgressFriendlyHandler | None = None


def configure_logging(verbosity: int) -> None:
    """Library log records to stderr: WARNING, ``-v`` INFO, ``-vv`` DEBUG."""
    global _handler  # noqa: PLW0603  (one process, one command)
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logger = logging.getLogger(LIBRARY_LOGGER)
    if _handler is not None:
        logger.removeHandler(_handler)
    _handler = _ProgressFriendlyHandler(sys.stderr)
    _handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
    )
    logger.addHandler(_handler)
    logger.setLevel(level)
    logger.propagate = False


def attach_progress(progress: Progress | None) -> None:
    """Tell the log handler about the progress line to clear before each record."""
    if _handler is not None:
        _handler.progress = progress


def verbosity(args: argparse.Namespace) -> int:
    """How many ``-v`` were given, wherever on the command line."""
    return int(getattr(args, "verbose", 0) or 0)
