"""The ledger and outbox subcommands: ``outbox enqueue|status``, ``worker``, ``journal``.

``--ledger`` (or ``$INVOICING_LEDGER``) names a SQLite file or a ``postgresql://`` URL.
Everything goes through the public :mod:`invoicing_async.outbox` API; entries are
printed as JSON lines (key, status, final, maybe committed, the last outcome).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from invoicing_async._client import InvoicingClient
from invoicing_async._convert import outcome_to_dict
from invoicing_async._outcomes import OutcomeStatus, RetryPolicy
from invoicing_async.outbox import LedgerEntry, open_outbox

from ._common import UsageError, add_credentials, add_verbosity, key_and_tls, settings
from ._input import Unreadable, read

if TYPE_CHECKING:
    import argparse

    from ._common import Commands

__all__ = ["register"]

ENV_LEDGER = "INVOICING_LEDGER"
_STATUSES = ["pending", "in_flight", *(status.value for status in OutcomeStatus)]


def _entry_json(entry: LedgerEntry) -> str:
    status = entry.status.value if isinstance(entry.status, OutcomeStatus) else entry.status
    return json.dumps(
        {
            "key": entry.key,
            "status": status,
            "final": entry.final,
            "maybe_committed": entry.maybe_committed,
            "updated_at": entry.updated_at.isoformat() if entry.updated_at else None,
            "outcome": outcome_to_dict(entry.outcome) if entry.outcome else None,
        },
        ensure_ascii=False,
    )


def _outbox(args: argparse.Namespace) -> Any:
    url = args.ledger or os.environ.get(ENV_LEDGER)
    if not url:
        raise UsageError(f"missing --ledger or {ENV_LEDGER} (a SQLite file or postgresql:// URL)")
    return open_outbox(url)


async def _enqueue(args: argparse.Namespace) -> int:
    documents = []
    for source, document in read(args.documents or ["-"]):
        if isinstance(document, Unreadable):
            raise UsageError(f"{source}: {document.why}: nothing was enqueued")
        documents.append(document)
    if not documents:
        raise UsageError("no documents: nothing to enqueue")
    async with _outbox(args) as outbox:
        keys = await outbox.enqueue(documents, encrypted=not args.json)
    print(f"enqueued {len(keys)} document(s)", file=sys.stderr)
    return 0


async def _status(args: argparse.Namespace) -> int:
    async with _outbox(args) as outbox:
        entry = await outbox.status(args.key)
    if entry is None:
        print(f"invoicing-async: no entry {args.key}", file=sys.stderr)
        return 1
    print(_entry_json(entry))
    return 0


async def _worker(args: argparse.Namespace) -> int:
    found = settings(args)
    key, ssl = key_and_tls(found, json_only=args.json)
    async with (
        _outbox(args) as outbox,
        InvoicingClient(
            str(found.base_url), str(found.client_id), str(found.api_key), provider_key=key, ssl=ssl
        ) as client,
    ):
        counts = await outbox.run_worker(
            client,
            concurrency=args.concurrency,
            stop_when_empty=args.until_empty,
            retry=RetryPolicy(attempt_timeout=args.timeout),
        )
    print(
        "worker done: " + ", ".join(f"{n} {status.value}" for status, n in counts.items()),
        file=sys.stderr,
    )
    return 0


async def _journal(args: argparse.Namespace) -> int:
    async with _outbox(args) as outbox:
        if args.action == "show":
            async for entry in outbox.entries(args.status):
                print(_entry_json(entry), flush=False)
            return 0
        if not args.keys:
            raise UsageError(f"journal {args.action}: give the keys of the entries")
        changed = await (outbox.retry if args.action == "retry" else outbox.forget)(args.keys)
    print(f"{args.action}: {changed} of {len(args.keys)} entries", file=sys.stderr)
    return 0 if changed == len(args.keys) else 1


def register(commands: Commands) -> None:
    """Add ``outbox`` (enqueue, status), ``worker`` and ``journal`` (show, retry, forget)."""

    def ledger_option(parser: argparse.ArgumentParser) -> None:
        add_verbosity(parser)
        parser.add_argument(
            "--ledger",
            metavar="URL",
            help=f"a SQLite file or a postgresql:// URL (default: ${ENV_LEDGER})",
        )

    outbox = commands.add_parser("outbox", help="add documents to an outbox, or look one up")
    actions = outbox.add_subparsers(dest="outbox_action", required=True)
    enqueue = actions.add_parser("enqueue", help="add documents to the outbox")
    enqueue.add_argument(
        "documents", nargs="*", metavar="SOURCE", help="JSON / JSON Lines files, directories, -"
    )
    enqueue.add_argument("--json", action="store_true", help="send them to /Invoice/json")
    ledger_option(enqueue)
    enqueue.set_defaults(handler=_enqueue)
    status = actions.add_parser("status", help="one entry's status and outcome (JSON)")
    status.add_argument("key", help="the document's identity (e.g. id:…)")
    ledger_option(status)
    status.set_defaults(handler=_status)

    worker = commands.add_parser("worker", help="send what an outbox holds (run many)")
    add_credentials(worker, provider_key=True)
    ledger_option(worker)
    worker.add_argument(
        "--json", action="store_true", help="no provider key: send to /Invoice/json"
    )
    worker.add_argument(
        "--concurrency", type=int, default=16, metavar="N", help="documents in flight (16)"
    )
    worker.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="for one attempt (30)"
    )
    worker.add_argument(
        "--until-empty", action="store_true", help="exit once nothing is pending or in flight"
    )
    worker.set_defaults(handler=_worker)

    journal = commands.add_parser("journal", help="list, re-send or forget ledger entries")
    journal.add_argument("action", choices=["show", "retry", "forget"], help="what to do")
    journal.add_argument("keys", nargs="*", help="the entries to retry or forget")
    journal.add_argument("--status", choices=_STATUSES, help="show only entries in this status")
    ledger_option(journal)
    journal.set_defaults(handler=_journal)
