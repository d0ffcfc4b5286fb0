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

from invoicing_async._cli._input import UsageError, read_documents
from invoicing_async._client import InvoicingClient
from invoicing_async._convert import outcome_to_json
from invoicing_async._outcomes import OutcomeStatus, RetryPolicy
from invoicing_async.outbox import LedgerEntry, open_outbox

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

__all__ = ["add_commands"]

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
            "outcome": outcome_to_json(entry.outcome) if entry.outcome else None,
        },
        ensure_ascii=False,
    )


def _outbox(args: argparse.Namespace) -> Any:
    url = args.ledger or os.environ.get(ENV_LEDGER)
    if not url:
        raise UsageError(f"missing --ledger or {ENV_LEDGER} (a SQLite file or postgresql:// URL)")
    return open_outbox(url)


async def _enqueue(args: argparse.Namespace, *_: Any) -> int:
    documents = list(read_documents(args.documents or ["-"]))
    async with _outbox(args) as outbox:
        keys = await outbox.enqueue(documents, encrypted=not args.json)
    print(f"enqueued {len(keys)} document(s)", file=sys.stderr)
    return 0


async def _status(args: argparse.Namespace, *_: Any) -> int:
    async with _outbox(args) as outbox:
        entry = await outbox.status(args.key)
    if entry is None:
        print(f"invoicing-async: no entry {args.key}", file=sys.stderr)
        return 1
    print(_entry_json(entry))
    return 0


async def _worker(
    args: argparse.Namespace,
    credentials: Callable[[argparse.Namespace], tuple[str, str, str]],
    provider_key: Callable[[argparse.Namespace], Any],
) -> int:
    base_url, client_id, api_key = credentials(args)
    key = None if args.json else provider_key(args)
    async with (
        _outbox(args) as outbox,
        InvoicingClient(base_url, client_id, api_key, provider_key=key) as client,
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


async def _journal(args: argparse.Namespace, *_: Any) -> int:
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


def add_commands(commands: Any, add_credentials: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add the subcommands (each sets ``ledger_command``)."""

    def ledger_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--ledger", help=f"SQLite file or postgresql:// URL (${ENV_LEDGER})")

    outbox = commands.add_parser("outbox", help="add documents to an outbox, or look one up")
    actions = outbox.add_subparsers(dest="outbox_action", required=True)
    enqueue = actions.add_parser("enqueue", help="add documents to the outbox")
    enqueue.add_argument("documents", nargs="*", help="JSON / JSON Lines files, directories, -")
    enqueue.add_argument("--json", action="store_true", help="send to /Invoice/json")
    ledger_option(enqueue)
    enqueue.set_defaults(ledger_command=_enqueue)
    status = actions.add_parser("status", help="one entry's status and outcome (JSON)")
    status.add_argument("key", help="the document's identity (e.g. id:…)")
    ledger_option(status)
    status.set_defaults(ledger_command=_status)

    worker = commands.add_parser("worker", help="send what an outbox holds (run many)")
    add_credentials(worker)
    ledger_option(worker)
    worker.add_argument("--provider-key", help="provider public key file")
    worker.add_argument("--fingerprint", help="pin the provider key's fingerprint")
    worker.add_argument("--json", action="store_true", help="no provider key: JSON only")
    worker.add_argument("--concurrency", type=int, default=16)
    worker.add_argument("--timeout", type=float, default=30.0, help="seconds per attempt (30)")
    worker.add_argument(
        "--until-empty", action="store_true", help="exit once nothing is pending or in flight"
    )
    worker.set_defaults(ledger_command=_worker)

    journal = commands.add_parser("journal", help="list, re-send or forget ledger entries")
    journal.add_argument("action", choices=["show", "retry", "forget"])
    journal.add_argument("keys", nargs="*", help="entries to retry or forget")
    journal.add_argument("--status", choices=_STATUSES, help="show only this status")
    ledger_option(journal)
    journal.set_defaults(ledger_command=_journal)
