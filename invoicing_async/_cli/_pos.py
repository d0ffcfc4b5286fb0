"""The POS subcommands: ``backlog`` (deferred sales waiting) and ``qr`` (a receipt's code).

``backlog --outbox URL`` counts the sales a :class:`~invoicing_async.Deferral` deferred
that are not transmitted yet, and how long the oldest has waited; with ``--warn-after``
it exits 1 when that is too long (for a monitoring check). ``qr`` prints a QR code for a
terminal, or writes it as PNG or SVG: of a text given, or of an outbox entry's receipt
(the provider's ``qrCodeString`` once transmitted, the offline QR url before).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invoicing_async._client.outbox import _till, open_outbox
from invoicing_async._doc import qr
from invoicing_async._send.journal import Ref

from .common import ENV_LEDGER, UsageError, add_verbosity

if TYPE_CHECKING:
    import argparse

    from .common import Commands

__all__ = ["register"]


def _outbox(args: argparse.Namespace) -> Any:
    url = args.outbox or os.environ.get(ENV_LEDGER)
    if not url:
        raise UsageError(f"missing --outbox or {ENV_LEDGER} (a SQLite file or postgresql:// URL)")
    if not url.startswith(("postgresql://", "postgres://")):
        path = Path(url.removeprefix("sqlite:///"))
        if not path.is_file():
            raise UsageError(f"no outbox at {path}")
    return open_outbox(url)


async def _backlog(args: argparse.Namespace) -> int:
    async with _outbox(args) as outbox:
        till = _till(outbox)
        await till.open()
        count, oldest, parked = await till.deferrals.backlog()
    age = max(0.0, dt.datetime.now(dt.timezone.utc).timestamp() - oldest) if oldest else 0.0
    since = dt.datetime.fromtimestamp(oldest, dt.timezone.utc).isoformat() if oldest else None
    late = args.warn_after is not None and oldest is not None and age > args.warn_after
    if args.json:
        print(
            json.dumps(
                {"count": count, "oldest": since, "age_seconds": round(age, 3), "parked": parked}
            )
        )
    elif count:
        print(f"{count} deferred sale(s) waiting; the oldest since {since} ({age:.0f} s)")
        if parked:
            print(
                f"{parked} of them parked: the drainer gave up on them after failed rounds "
                "(poison documents); they need attention: 'invoicing-async ledger show "
                "--status parked', then 'ledger retry --status parked' sends them again"
            )
    else:
        print("no deferred sale is waiting")
    if late:
        print(
            f"invoicing-async: the oldest deferred sale has waited {age:.0f} s "
            f"(more than --warn-after {args.warn_after:g})",
            file=sys.stderr,
        )
    return 1 if late else 0


async def _receipt_text(args: argparse.Namespace) -> str:
    async with _outbox(args) as outbox:
        entry = await outbox.status(args.key, issuer=args.issuer)
        till = _till(outbox)
        await till.open()
        issuer = args.issuer if entry is None else entry.issuer
        deferral = await till.deferrals.get(Ref.of(args.key, issuer))
    result = entry.outcome.result if entry is not None and entry.outcome is not None else None
    if result is not None and result.qr_code_string:
        return str(result.qr_code_string)
    if deferral is not None and deferral.offline_qr:
        print(f"{args.key}: not transmitted yet: the offline QR", file=sys.stderr)
        return deferral.offline_qr
    raise UsageError(f"{args.key}: no QR code in the outbox (no record, no offline QR)")


def _qr(args: argparse.Namespace) -> int:
    if (args.text is None) == (args.key is None):
        raise UsageError("give the text to encode, or --key with --outbox")
    text = args.text if args.text is not None else asyncio.run(_receipt_text(args))
    if text == "-":
        text = sys.stdin.read().strip()
    if args.png:
        Path(args.png).write_bytes(qr.render_png(text, scale=args.scale))
    elif args.svg:
        Path(args.svg).write_text(qr.render_svg(text, scale=args.scale), encoding="utf-8")
    else:
        print(qr.render_text(text), end="")
    return 0


def register(commands: Commands) -> None:
    """Add ``backlog`` and ``qr``."""

    def outbox_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--outbox",
            metavar="URL",
            help=f"a SQLite file or a postgresql:// URL (default: ${ENV_LEDGER})",
        )

    backlog = commands.add_parser(
        "backlog",
        help="deferred sales not yet transmitted: how many, how old",
        description="Count the sales deferred into an outbox (Deferral) that the provider "
        "has not received yet, the age of the oldest, and how many of them are parked "
        "(poison documents the drainer gave up on: they need attention). Exit status 1 "
        "with --warn-after when the oldest has waited longer.",
    )
    add_verbosity(backlog)
    outbox_option(backlog)
    backlog.add_argument(
        "--warn-after", type=float, metavar="SECONDS", help="exit 1 if the oldest is older"
    )
    backlog.add_argument("--json", action="store_true", help="one JSON object")
    backlog.set_defaults(handler=_backlog)

    code = commands.add_parser(
        "qr",
        help="print a receipt's QR code (terminal, PNG or SVG)",
        description="Render a QR code: of TEXT (- reads it from stdin), or of an outbox "
        "entry's receipt (--key): the provider's qrCodeString, or before transmission the "
        "offline QR url. Needs the qr extra (segno).",
    )
    add_verbosity(code)
    code.add_argument("text", nargs="?", help="the text to encode (a qrCodeString, a url)")
    code.add_argument("--key", help="an outbox entry's identity (with --outbox)")
    code.add_argument(
        "--issuer",
        metavar="TIN",
        help="whose entry (an outbox of many issuers where several have that key)",
    )
    outbox_option(code)
    code.add_argument("--png", metavar="FILE", help="write a PNG image instead")
    code.add_argument("--svg", metavar="FILE", help="write an SVG image instead")
    code.add_argument(
        "--scale", type=int, default=4, metavar="N", help="pixels per module in images (4)"
    )
    code.set_defaults(handler=_qr)
