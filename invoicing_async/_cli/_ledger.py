"""The ledger and outbox subcommands: ``outbox enqueue|status``, ``ledger``.

``--ledger`` (or ``$INVOICING_LEDGER``) names a SQLite file or a ``postgresql://`` URL.
Everything goes through the public API (:mod:`invoicing_async.outbox`,
:class:`~invoicing_async.Ledger`); ``worker`` is :mod:`._worker`'s. Commands that read
or mark entries never create a ledger: a mistyped path is an error, not an empty ledger.
``journal`` is the old name of ``ledger``, kept working (hidden) with a deprecation note.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sys
from typing import TYPE_CHECKING, Any

from invoicing_async._client.outbox import LedgerEntry, PostgresOutbox, open_outbox
from invoicing_async._core.convert import outcome_to_dict
from invoicing_async._core.entries import PARKED, PENDING, STATES
from invoicing_async._core.errors import LedgerError
from invoicing_async._core.outcomes import OutcomeStatus
from invoicing_async._durable.ledger import Ledger

from ._checking import add_check, report
from .common import UsageError, add_ledger, add_verbosity, ledger_url, parked_hint, shown_url
from .inputs import Unreadable, read

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator

    from .common import Commands

__all__ = ["DEPRECATED_COMMANDS", "existing", "register", "register_outbox"]

_STATUSES = [*STATES, *(status.value for status in OutcomeStatus)]
#: Old names of commands: they work, are not listed, and print a deprecation note.
DEPRECATED_COMMANDS = {"journal": "ledger"}
_ERROR_WIDTH = 100  # characters of an entry's error in `ledger show`


def _entry_json(entry: LedgerEntry) -> str:
    status = entry.status.value if isinstance(entry.status, OutcomeStatus) else entry.status
    return json.dumps(
        {
            "key": entry.key,
            "issuer": entry.issuer,
            "status": status,
            "final": entry.final,
            "maybe_committed": entry.maybe_committed,
            "failures": entry.failures,
            "available_at": entry.available_at.isoformat() if entry.available_at else None,
            "updated_at": entry.updated_at.isoformat() if entry.updated_at else None,
            "outcome": outcome_to_dict(entry.outcome) if entry.outcome else None,
        },
        ensure_ascii=False,
    )


@contextlib.asynccontextmanager
async def existing(args: argparse.Namespace) -> AsyncIterator[Ledger | PostgresOutbox]:
    """The ledger or outbox ``--ledger`` names, which must exist (nothing is created)."""
    url = ledger_url(args)
    store = open_outbox(url)
    if isinstance(store, PostgresOutbox):
        async with store:
            yield store
        return
    ledger = Ledger(store.path, create=False)
    try:
        await ledger.open()
    except LedgerError as exc:
        if exc.reason in ("missing", "unreadable"):
            raise UsageError(exc.message) from None
        raise
    try:
        yield ledger
    finally:
        await ledger.close()


async def _enqueue(args: argparse.Namespace) -> int:
    documents = []
    refused = unreadable = 0
    check = args.check or args.skip_invalid
    for source, document in read(args.documents or ["-"]):
        if isinstance(document, Unreadable):
            if not args.skip_invalid:
                raise UsageError(
                    f"{document.at(source)}: {document.why}: nothing was enqueued "
                    "(--skip-invalid enqueues the others)"
                )
            print(f"invoicing-async: {document.at(source)}: {document.why}", file=sys.stderr)
            unreadable += 1
            continue
        if report(source, document, rules=check):  # a member twice: refused unchecked too
            refused += 1
            continue
        documents.append(document)
    if refused and not args.skip_invalid:
        raise UsageError(
            f"{refused} document(s) the provider would refuse: nothing was enqueued "
            "(--skip-invalid enqueues the others)"
        )
    if not documents:
        raise UsageError("no documents: nothing to enqueue")
    async with open_outbox(ledger_url(args)) as outbox:
        keys = await outbox.enqueue(documents, encrypted=not args.json, issuer=args.issuer)
    skipped = [
        f"{refused} skipped: the provider would refuse them" if refused else "",
        f"{unreadable} skipped: not documents (see above)" if unreadable else "",
    ]
    print(f"enqueued {len(keys)} document(s)", *filter(None, skipped), sep=", ", file=sys.stderr)
    return 1 if refused or unreadable else 0


async def _status(args: argparse.Namespace) -> int:
    async with existing(args) as store:
        get = store.get if isinstance(store, Ledger) else store.status
        entry = await get(args.key, issuer=args.issuer)
    if entry is None:
        print(f"invoicing-async: no entry {args.key}", file=sys.stderr)
        return 1
    print(_entry_json(entry))
    return 0


def _entry_line(entry: LedgerEntry) -> str:
    """One entry for a person: key, status, attempts, last change, the short error."""
    status = entry.status.value if isinstance(entry.status, OutcomeStatus) else entry.status
    outcome = entry.outcome
    attempts = outcome.attempts if outcome is not None else 0
    when = entry.updated_at.strftime("%Y-%m-%d %H:%M:%SZ") if entry.updated_at else "-"
    parts = [entry.key, f"{status:<9}", f"{attempts} attempt{'' if attempts == 1 else 's'}", when]
    if entry.issuer is not None:
        parts.append(f"issuer {entry.issuer}")
    if entry.failures:
        parts.append(f"{entry.failures} failed round{'' if entry.failures == 1 else 's'}")
    later = entry.available_at
    if entry.status == PENDING and later is not None and later > dt.datetime.now(dt.timezone.utc):
        parts.append(f"next {later.strftime('%H:%M:%SZ')}")
    if outcome is not None and outcome.error is not None:
        error = " ".join(f"{type(outcome.error).__name__}: {outcome.error}".split())
        if len(error) > _ERROR_WIDTH:
            error = error[: _ERROR_WIDTH - 3] + "..."
        parts.append(error)
    elif outcome is not None and outcome.result is not None and outcome.result.mark:
        parts.append(f"mark {outcome.result.mark}")
    return "  ".join(parts)


def _counts_line(where: str, counts: dict[str, int]) -> str:
    total = sum(counts.values())
    if not total:
        return f"{where}: no entries"
    order = {name: n for n, name in enumerate(_STATUSES)}
    parts = [f"{n} {name}" for name, n in sorted(counts.items(), key=lambda i: order.get(i[0], 99))]
    return f"{where}: {total} entr{'y' if total == 1 else 'ies'}: {', '.join(parts)}"


async def _show(args: argparse.Namespace) -> int:
    async with existing(args) as store:
        counts = await store.counts()
        summary = _counts_line(f"ledger {shown_url(ledger_url(args))}", counts)
        if args.status:
            summary += f"; showing {args.status}"
        if counts.get(PARKED):
            summary += f"\n{parked_hint(counts[PARKED], ledger_url(args))}"
        print(summary, file=sys.stderr if args.json else sys.stdout)
        async for entry in store.entries(args.status):
            if args.issuer is None or entry.issuer == args.issuer:
                print(_entry_json(entry) if args.json else _entry_line(entry), flush=False)
    return 0


async def _mark(args: argparse.Namespace) -> int:
    """``retry`` and ``forget``: the keys given, or every entry with ``--status``."""
    if bool(args.keys) == bool(args.status):
        raise UsageError(f"ledger {args.action}: give the keys of the entries, or --status")
    async with existing(args) as store:
        mark = store.retry if args.action == "retry" else store.forget
        if args.keys:
            keys = list(args.keys)
            changed = await mark(keys, issuer=args.issuer)
        else:  # each entry of that status, by its own identity (issuer and key)
            whose: dict[str, list[str]] = {}
            async for entry in store.entries(args.status):
                if args.issuer is None or entry.issuer == args.issuer:
                    whose.setdefault(entry.issuer or "", []).append(entry.key)
            keys = [key for group in whose.values() for key in group]
            changed = 0
            for issuer, group in whose.items():
                changed += await mark(group, issuer=issuer)
    done = "marked to be sent again" if args.action == "retry" else "forgotten"
    print(f"{args.action}: {changed} of {len(keys)} entries {done}", file=sys.stderr)
    return 0 if changed == len(keys) else 1


def _issuer_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--issuer", metavar="TIN", help=what)


def _add_ledger_command(commands: Commands, name: str) -> None:
    """``ledger show|retry|forget`` (also under its old name, ``journal``)."""
    listed = name not in DEPRECATED_COMMANDS
    # An old name gets no help text: argparse then does not list it.
    shown: dict[str, Any] = {"help": "list ledger entries, re-send or forget them"}
    ledger = commands.add_parser(
        name,
        **(shown if listed else {}),
        description="Read and mark the entries of a ledger: a batch's file "
        "(submit --ledger FILE, ledger= in Python) or an outbox (a SQLite file or a "
        "postgresql:// URL). 'show' summarises the entries by status, then lists them; "
        "'retry' marks entries to be sent again by the next run or worker (even final "
        "ones, and parked ones: poison documents a worker gave up on); 'forget' deletes "
        "them. The ledger must exist: a path that is not a ledger is an error (exit 2), "
        "never an empty new one.",
    )
    if not listed:
        ledger.set_defaults(
            deprecated=(
                f"'{name}' is deprecated: use 'invoicing-async {DEPRECATED_COMMANDS[name]}'",
            )
        )
    add_verbosity(ledger)
    actions = ledger.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser(
        "show",
        help="a summary by status, then one line per entry",
        description="Print how many entries have each status, then one line per entry: "
        "its key, status, attempts, when it last changed (UTC), its issuer, its failed "
        "rounds, when a worker may send it next (if it waits) and a short error. --json "
        "prints each "
        "entry as a JSON line instead (the summary then goes to stderr).",
    )
    show.add_argument("--status", choices=_STATUSES, help="only the entries in this status")
    _issuer_option(show, "only that issuer's entries")
    show.add_argument(
        "--json", action="store_true", help="one JSON object per entry, with the full outcome"
    )
    add_ledger(show)
    show.set_defaults(handler=_show)
    for action, what in (
        ("retry", "mark entries to be sent again by the next run or worker, final ones too"),
        ("forget", "delete entries: the next run treats those documents as never seen"),
    ):
        marker = actions.add_parser(
            action,
            help=what.split(":")[0].split(",")[0],
            description=f"{what[0].upper()}{what[1:]}. Give the keys of the entries, or "
            "--status to take every entry in that status.",
        )
        marker.add_argument("keys", nargs="*", metavar="KEY", help="the entries' keys")
        marker.add_argument(
            "--status", choices=_STATUSES, help="every entry in this status (instead of keys)"
        )
        _issuer_option(marker, "only that issuer's entries (default: every issuer's)")
        add_ledger(marker)
        marker.set_defaults(handler=_mark)


def register_outbox(commands: Commands) -> None:
    """Add ``outbox`` (enqueue, status)."""
    outbox = commands.add_parser(
        "outbox",
        help="add documents to an outbox, or look one up",
        description="The transactional outbox from the command line: 'enqueue' adds "
        "documents (workers send them), 'status' prints one entry's status and last "
        "outcome as JSON. An outbox is a SQLite file or a PostgreSQL database "
        "(--ledger, or $INVOICING_LEDGER).",
    )
    add_verbosity(outbox)
    actions = outbox.add_subparsers(dest="outbox_action", required=True, metavar="ACTION")
    enqueue = actions.add_parser(
        "enqueue",
        help="add documents to the outbox",
        description="Add documents to the outbox (created if missing); a worker sends "
        "them. Nothing is enqueued if any input is not a document, nor, with --check, if "
        "the provider would refuse one; with --skip-invalid the others are, each one "
        "skipped said with its file and line.",
    )
    enqueue.add_argument(
        "documents", nargs="*", metavar="SOURCE", help="JSON / JSON Lines files, directories, -"
    )
    enqueue.add_argument("--json", action="store_true", help="send them to /Invoice/json")
    add_check(enqueue, skip=True)
    _issuer_option(enqueue, "whose documents they are (default: each one's Issuer.Vat)")
    add_ledger(enqueue)
    enqueue.set_defaults(handler=_enqueue)
    status = actions.add_parser(
        "status",
        help="one entry's status and outcome (JSON)",
        description="Print one entry's status and last outcome as a JSON line (exit 1 "
        "when there is no such entry). The outbox must exist.",
    )
    status.add_argument("key", help="the document's identity (e.g. id:…)")
    _issuer_option(status, "whose entry, when documents of several issuers have that key")
    add_ledger(status)
    status.set_defaults(handler=_status)


def register(commands: Commands) -> None:
    """Add ``ledger`` (show, retry, forget), and its old names hidden."""
    _add_ledger_command(commands, "ledger")
    for old in DEPRECATED_COMMANDS:
        _add_ledger_command(commands, old)
