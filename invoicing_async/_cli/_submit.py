"""``invoicing-async submit``: documents from files or stdin to the provider, one record each.

Every input entry gets exactly one output record (a JSON line): the outcome's public
dict (:func:`invoicing_async.outcome_to_dict`) with ``index`` (its position in the input)
and ``source`` (file and line). Entries that are not documents are refused here with
what is wrong and where, and are never sent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from invoicing_async._core.errors import (
    DocumentTooLargeError,
    LedgerError,
    TransportError,
    ValidationError,
)
from invoicing_async._core.outcomes import Outcome, OutcomeStatus
from invoicing_async._core.retry import RetryPolicy
from invoicing_async._doc.checked import checked
from invoicing_async._doc.document import DEFAULT_MAX_DOCUMENT_SIZE, document_key
from invoicing_async._durable.ledger import Ledger

from ._checking import add_check, report
from ._service import Signals, add_grace, add_token_store, grace_of, token_cache
from .common import (
    DeprecatedOption,
    UsageError,
    add_concurrency,
    add_credentials,
    add_verbosity,
    attach_progress,
    issuers,
    key_and_tls,
    sender,
    settings,
)
from .inputs import NotRead, Source, Unreadable, count_documents, read
from .output import Progress, Tally, summary, write_record

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Iterator

    from .common import Commands

__all__ = ["register", "run_batch"]


def register(commands: Commands) -> None:
    """Add ``submit``."""
    submit = commands.add_parser(
        "submit",
        help="submit documents to the provider",
        description=(
            "Submit JSON documents (invoices) from files, directories of *.json / *.jsonl "
            "files, or standard input, with bounded concurrency and safe retries. One JSON "
            "line per input entry is written (outcome, source file and line); a summary and "
            "a progress line go to stderr. SIGTERM or SIGINT stops it gracefully: nothing "
            "more is read, the documents read already may end within --grace seconds, then "
            "the summary says how to resume; a second signal stops it at once. Exit status: 0 "
            "all accepted, 1 some not, 2 bad usage or no documents, 130 interrupted (SIGINT, "
            "Ctrl-C), 143 stopped by SIGTERM."
        ),
    )
    add_verbosity(submit)
    submit.add_argument(
        "documents",
        nargs="*",
        metavar="SOURCE",
        help="a .json file (an object or an array of objects), a .jsonl file (one object a "
        "line), a directory of them, or - for standard input",
    )
    add_credentials(submit, provider_key=True, many=True)
    options = submit.add_argument_group("sending")
    options.add_argument(
        "--json", action="store_true", help="send to /Invoice/json, unencrypted (no key needed)"
    )
    add_concurrency(options)
    options.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="for one attempt of a document (30)",
    )
    options.add_argument(
        "--deadline",
        type=float,
        metavar="SECONDS",
        help="for the whole run, reading included; documents not sent by then end not_sent",
    )
    options.add_argument(
        "--max-document-size",
        type=_size,
        default=DEFAULT_MAX_DOCUMENT_SIZE,
        metavar="BYTES",
        help="refuse (rejected, never read whole) a document larger than this, in bytes "
        "of JSON text; K, M and G suffixes are KiB, MiB and GiB "
        f"({DEFAULT_MAX_DOCUMENT_SIZE // 1024 // 1024}M)",
    )
    options.add_argument(
        "--output",
        default="-",
        metavar="FILE",
        help="write the JSON Lines records to FILE, appended to what it holds (a resumed "
        "run adds its records after those of the run it resumes; default: standard output)",
    )
    options.add_argument(
        "--ledger",
        metavar="FILE",
        help="a ledger file (SQLite; created if missing): after a crash or Ctrl-C, the "
        "same command resumes, skipping settled documents and re-sending only those in "
        "flight. 'invoicing-async ledger show --ledger FILE' lists its entries",
    )
    options.add_argument(
        "--journal", action=DeprecatedOption, dest="ledger", replacement="--ledger"
    )
    options.add_argument(
        "--no-progress", action="store_true", help="no progress line, even on a terminal"
    )
    add_check(options)
    add_grace(options)
    add_token_store(submit)
    submit.set_defaults(handler=_submit)


#: What the batch records for a document it stops in flight.
_CUT_SHORT = (OutcomeStatus.UNKNOWN, OutcomeStatus.NOT_SENT)


class _Keys:
    """The batch's ``key=``: each document's identity, remembered by input position.

    The batch identifies documents once each, in input order, as it reads them; after
    an interruption the keys say which documents to look for in the ledger.
    """

    def __init__(self) -> None:
        self.by_index: dict[int, str] = {}
        self._next = 0

    def __call__(self, document: Any) -> str:
        index, self._next = self._next, self._next + 1
        key = document_key(document)  # may raise: the batch refuses the document alone
        self.by_index[index] = key
        return key


async def run_batch(
    stream: AsyncGenerator[Outcome, None],
    *,
    output: IO[str],
    tally: Tally,
    sources: dict[int, tuple[int, Source]],
    progress: Progress,
) -> None:
    """Write each outcome of ``stream`` as a record as it settles, counting it."""
    attach_progress(progress)
    try:
        async with contextlib.aclosing(stream) as outcomes:
            async for outcome in outcomes:
                index, source = sources.pop(outcome.index, (outcome.index, Source("?", 0)))
                write_record(output, outcome, index, source)
                tally.add(outcome)
                progress.update()
    finally:
        progress.close()
        attach_progress(None)


def _documents(
    entries: Iterator[tuple[Source, Any]],
    sources: dict[int, tuple[int, Source]],
    output: IO[str],
    tally: Tally,
    max_size: int,
    *,
    check: bool = False,
) -> Iterator[Any]:
    """The documents to send; entries that are not are reported and recorded here.

    An unreadable entry is ``rejected`` (a document over the limit with
    :class:`~invoicing_async.DocumentTooLargeError`); input the deadline left unread
    is ``not_sent``. With ``check``, each document's problems are said with its source,
    and one the provider would refuse goes to the batch marked ``checked``: refused
    there, never sent, its outcome recorded (in the ledger too) like any refusal.
    """
    sent = 0
    for position, (source, value) in enumerate(entries):
        tally.read += 1
        if isinstance(value, (Unreadable, NotRead)):
            refused = _refused(position, source, value, max_size)
            write_record(output, refused, position, source)
            tally.add(refused, unreadable=isinstance(value, Unreadable))
        else:
            sources[sent] = (position, source)
            sent += 1
            yield checked(value) if check and report(source, value) else value


def _refused(position: int, source: Source, value: Unreadable | NotRead, max_size: int) -> Outcome:
    """The outcome of an input entry that is not sent, said on stderr too."""
    if isinstance(value, NotRead):
        message = f"{source}: the rest of the input was not read: {value.why}"
        print(f"invoicing-async: {message}", file=sys.stderr)
        return Outcome(
            index=position, key=f"unread:{source}", status=OutcomeStatus.NOT_SENT,
            error=TransportError(f"not sent: {message}", maybe_sent=False),
        )  # fmt: skip
    where = value.at(source)
    why = value.why if value.size is None else f"{value.why} (--max-document-size)"
    print(f"invoicing-async: {where}: {why}", file=sys.stderr)
    error: ValidationError = ValidationError(f"{where}: {why}")
    if value.size is not None:
        error = DocumentTooLargeError(error.message, size=value.size, limit=max_size)
    return Outcome(
        index=position, key=f"unreadable:{source}", status=OutcomeStatus.REJECTED, error=error
    )


_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3}


def _size(text: str) -> int:
    """``--max-document-size``: bytes, or KiB/MiB/GiB with a K, M or G suffix."""
    number = text.strip().removesuffix("B").removesuffix("b").removesuffix("i")
    scale = _UNITS.get(number[-1:].lower(), 1)
    if scale > 1:
        number = number[:-1]
    if not (number.isascii() and number.isdigit()) or int(number) < 1:
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (such as 1048576 or 10M)")
    return int(number) * scale


def _check_input(args: argparse.Namespace) -> list[str]:
    sources: list[str] = args.documents
    if not sources:
        if sys.stdin.isatty():
            raise UsageError(
                "no documents given: name files or directories, or - to read standard input"
            )
        sources = ["-"]
    if "-" in sources and sys.stdin.isatty():
        print(
            "invoicing-async: reading documents from the terminal, one JSON object a line; "
            "end with Ctrl-D",
            file=sys.stderr,
        )
    return sources


async def _submit(args: argparse.Namespace) -> int:
    credentials = issuers(args)
    found = settings(args, many=credentials is not None)
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    sources = _check_input(args)
    key, ssl = key_and_tls(found, json_only=args.json)
    tally, entries = _opened(args, sources)
    output_path = None if args.output == "-" else Path(args.output)
    output_cm: Any = (
        contextlib.nullcontext(sys.stdout)
        if output_path is None
        else output_path.open("a", encoding="utf-8")
    )
    progress = Progress(tally)
    progress.enabled = progress.enabled and not args.no_progress
    interrupted = False
    positions: dict[int, tuple[int, Source]] = {}
    keys = _Keys()
    started = time.time()
    stop = asyncio.Event()
    running: list[asyncio.Future[None]] = []
    signals = Signals(
        stop=stop.set, now=lambda: [run.cancel() for run in running], grace=grace_of(args)
    )
    with output_cm as output:
        try:
            async with (
                token_cache(args) as cache,
                sender(
                    found, credentials, args=args, provider_key=key, ssl=ssl,
                    max_document_size=args.max_document_size, token_cache=cache,
                ) as client,
            ):  # fmt: skip
                documents = _documents(
                    entries, positions, output, tally, args.max_document_size, check=args.check
                )
                stream = client.submit_stream(
                    _until(stop, documents),
                    concurrency=args.concurrency,
                    encrypted=not args.json,
                    ledger=args.ledger,
                    retry=RetryPolicy(attempt_timeout=args.timeout),
                    deadline=args.deadline,
                    key=keys,
                )
                batch = run_batch(
                    stream, output=output, tally=tally, sources=positions, progress=progress
                )
                running.append(asyncio.ensure_future(batch))
                with signals.installed():
                    await _within_grace(running[0], stop, grace_of(args))
            if signals.received is not None:
                interrupted = True
                await _account_for_unsettled(
                    args.ledger, positions, keys, output, tally, started=started
                )
        except (asyncio.CancelledError, KeyboardInterrupt):
            interrupted = True
            await _account_for_unsettled(
                args.ledger, positions, keys, output, tally, started=started
            )
            if signals.received is None:
                raise
        finally:
            extra = {}
            if output_path is not None:
                extra["results"] = f"{output_path} ({tally.settled} records appended)"
            print(summary(tally, extra), file=sys.stderr)
            if interrupted:
                print(_resume_hint(args, tally), file=sys.stderr)
    if signals.received is not None:
        return signals.exit_status
    return 1 if tally.failed else 0


def _opened(args: argparse.Namespace, sources: list[str]) -> tuple[Tally, Iterator[Any]]:
    """The run's tally and its input entries, the first read already (none: UsageError)."""
    progress_wanted = not args.no_progress and sys.stderr.isatty()
    # Reading counts against the deadline too: a huge input must not outlast it.
    limits: dict[str, Any] = {
        "max_size": args.max_document_size,
        "deadline": None if args.deadline is None else time.monotonic() + args.deadline,
    }
    tally = Tally(total=count_documents(sources, **limits) if progress_wanted else None)
    entries = read(sources, **limits)
    first = next(entries, None)  # before connecting: empty input is a usage error
    if first is None:
        raise UsageError(f"no documents in {', '.join(sources)}: nothing to submit")
    return tally, _chain(first, entries)


def _until(stop: asyncio.Event, documents: Iterator[Any]) -> Iterator[Any]:
    """``documents`` until ``stop`` is set: then nothing more is read."""
    while not stop.is_set():
        document = next(documents, _END)
        if document is _END:
            return
        yield document


_END = object()


async def _within_grace(run: asyncio.Future[None], stop: asyncio.Event, grace: float) -> None:
    """Until ``run`` ends; once ``stop`` is set, ``grace`` seconds at most, then cut it off.

    What it cuts off, it records (the batch's ledger, the records of what settled);
    ``run``'s failure is raised; a cut ``run`` is a ``CancelledError``.
    """
    asked = asyncio.ensure_future(stop.wait())
    waited: list[asyncio.Future[Any]] = [run, asked]
    try:
        await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        if not run.done():
            await asyncio.wait([run], timeout=grace)
    finally:
        asked.cancel()
        run.cancel()
        while not run.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([run])
    run.result()


async def _account_for_unsettled(
    ledger_path: str | None,
    positions: dict[int, tuple[int, Source]],
    keys: _Keys,
    output: IO[str],
    tally: Tally,
    *,
    started: float,
) -> None:
    """After an interruption: what became of the documents read but not reported.

    The batch recorded each document in flight in the ledger (``unknown``, or
    ``not_sent`` if its request never left), and outcomes that settled as the batch
    stopped; those get their record now. The rest were never started. Without a ledger
    nothing tells them apart: they all count as not started.
    """
    found: dict[str, Any] = {}
    wanted = [keys.by_index[index] for index in positions if index in keys.by_index]
    if ledger_path is not None and wanted:
        with contextlib.suppress(LedgerError):
            async with Ledger(ledger_path, create=False) as ledger:
                for key in wanted:
                    entry = await ledger.get(key)
                    if entry is not None:
                        found[key] = entry
    for index, (position, source) in sorted(positions.items()):
        entry = found.get(keys.by_index.get(index, ""))
        recent = entry is not None and entry.updated_at and entry.updated_at.timestamp() >= started
        if entry is not None and recent and entry.outcome is not None:
            write_record(output, entry.outcome, position, source)
            tally.add(entry.outcome)
            tally.in_flight += entry.outcome.status in _CUT_SHORT
            del positions[index]
    tally.not_started = len(positions)


def _chain(
    first: tuple[Source, Any], rest: Iterator[tuple[Source, Any]]
) -> Iterator[tuple[Source, Any]]:
    yield first
    yield from rest


def _resume_hint(args: argparse.Namespace, tally: Tally) -> str:
    again = "invoicing-async " + shlex.join(sys.argv[1:])
    settled = f"interrupted after {tally.settled} document(s)"
    if args.ledger:
        return (
            f"{settled}. To resume, run the same command again:\n  {again}\n"
            f"The ledger {args.ledger} skips settled documents and re-sends those that "
            "were in flight; the provider answers one it already holds with its record."
        )
    return (
        f"{settled}. Running the command again re-sends every document: those the "
        "provider already holds come back as duplicates, never committed twice. Add "
        "--ledger FILE to skip settled documents on the next run:\n"
        f"  {again} --ledger FILE"
    )
