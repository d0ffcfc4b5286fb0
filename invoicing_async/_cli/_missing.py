"""What the command says about a subcommand it does not have.

``demo`` and ``sandbox`` come with the sandbox distribution (``invoicing-async-sandbox``),
not with the client. A new user who installed the client alone and typed
``invoicing-async demo`` got argparse's "invalid choice" with every registered name,
hidden aliases included, and no word about what to install. The command now says which
distribution brings the command and how to install it into this environment: where the
client's own install record (PEP 610's ``direct_url.json``) says it came from a checkout
or a wheel, the advice names the sandbox of that same checkout, or the sandbox wheel
lying beside it, as a command to paste. A word that is no command at all is answered
with the commands ``--help`` lists, without the hidden old names.
"""

from __future__ import annotations

import json
import shlex
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["SANDBOX_COMMANDS", "SANDBOX_DISTRIBUTION", "command_word", "unknown_command"]

#: The distribution that brings :data:`SANDBOX_COMMANDS` (through the commands entry point).
SANDBOX_DISTRIBUTION = "invoicing-async-sandbox"
#: The commands the sandbox distribution adds.
SANDBOX_COMMANDS = frozenset({"demo", "sandbox"})
_CLIENT_DISTRIBUTION = "invoicing-async"


def command_word(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option.

    The main parser's own options (``-h``, ``--version``, ``-v``) take no value, so the
    first other word is the command.
    """
    for word in argv:
        if word == "--":
            continue
        if not word.startswith("-"):
            return word
    return None


def unknown_command(word: str, offered: list[str]) -> str:
    """The one-line answer to ``invoicing-async WORD`` when there is no such command."""
    if word in SANDBOX_COMMANDS:
        return (
            f"'{word}' comes with the sandbox distribution, {SANDBOX_DISTRIBUTION}, which "
            f"is not installed in this environment; install it beside {_CLIENT_DISTRIBUTION} "
            f"with: {_sandbox_install()}"
        )
    return (
        f"there is no command '{word}'; the commands are {', '.join(offered)} "
        "('invoicing-async --help' says what each does)"
    )


def _sandbox_install() -> str:
    """The command that installs the sandbox from where the client came from."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    try:
        client = metadata.distribution(_CLIENT_DISTRIBUTION)
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        client = None
    origin = _origin(client)
    if origin is not None:
        path, editable = origin
        if (path / "sandbox" / "pyproject.toml").is_file():  # a checkout of the project
            option = "-e " if editable else ""
            return f"{pip} {option}{shlex.quote(str(path / 'sandbox'))}"
        if path.suffix == ".whl" and client is not None:
            wheels = sorted(path.parent.glob(f"invoicing_async_sandbox-{client.version}-*.whl"))
            if wheels:
                return f"{pip} {shlex.quote(str(wheels[-1]))}"
    return (
        f"{pip} /path/to/invoicing_async/sandbox (the sandbox folder of the checkout the "
        "client came from; or its wheel, invoicing_async_sandbox-*.whl, built beside "
        "the client's)"
    )


def _origin(client: metadata.Distribution | None) -> tuple[Path, bool] | None:
    """The local folder or file the client was installed from, and whether editable."""
    if client is None:
        return None
    text = client.read_text("direct_url.json")
    if not text:
        return None
    try:
        record = json.loads(text)
        url = urlsplit(record["url"])
        editable = bool(record.get("dir_info", {}).get("editable", False))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if url.scheme != "file":
        return None
    return Path(unquote(url.path)), editable
