"""``invoicing-async cancel`` and ``status``: the operator's cancellation and status read.

Both print one JSON line: the operation, its ``outcome`` (``done``, ``refused``,
``unknown``, ``failed``), and the answer (``status``, ``mark``, ``cancellation_mark``,
``body``) or the error (:func:`~invoicing_async._core.convert.error_to_dict`). Exit status 0
when done, 1 otherwise, 2 for bad usage.

A cancellation is an at-most-once write (:mod:`invoicing_async._core.safety`): it is never
re-sent after a lost answer, and the command then says to check with ``status``.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from invoicing_async._client.client import InvoicingClient
from invoicing_async._core.convert import error_to_dict
from invoicing_async._core.errors import (
    AuthenticationError,
    DuplicateDocumentError,
    InvoicingError,
    UnexpectedStatusError,
    UnknownOutcomeError,
    ValidationError,
)

from .common import UsageError, add_credentials, add_verbosity, key_and_tls, settings

if TYPE_CHECKING:
    import argparse
    from collections.abc import Awaitable, Callable

    from invoicing_async._send.operations import OperationResult

    from .common import Commands

__all__ = ["configured_client", "outcome_of", "register"]

_NOTES = ("delivery-note", "receiving-note")

_CANCEL_RULE = (
    "A cancellation takes effect at most once, so it is re-sent only when the request "
    "certainly did not reach the provider (connection refused, 429, 503). When the "
    "answer is lost it is NOT re-sent: the outcome is 'unknown' (exit 1); check with "
    "'invoicing-async status MARK' before cancelling again. Cancelling a cancelled note "
    "is refused (409) with the original cancellation mark."
)


def register(commands: Commands) -> None:
    """Add ``cancel`` and ``status``."""
    cancel = commands.add_parser(
        "cancel",
        help="cancel a delivery or receiving note (at most once)",
        description="Cancel a delivery note (/Invoice/cancelDeliveryNote) or a receiving "
        "note (/Invoice/cancelReceivingNote) named by its mark, and print one JSON line. "
        + _CANCEL_RULE
        + " Exit status: 0 cancelled, 1 refused, unknown or failed, 2 bad usage.",
    )
    add_verbosity(cancel)
    cancel.add_argument("note", choices=_NOTES, help="what to cancel")
    _add_call_options(cancel, mark_help="the note's mark, sent as the mark query parameter")
    cancel.add_argument(
        "--payload",
        metavar="JSON",
        help="a JSON object to send as the body, as the provider's documentation asks",
    )
    cancel.set_defaults(handler=_cmd_cancel)

    status = commands.add_parser(
        "status",
        help="read a document's last status (GetLastStatus)",
        description="Read a document's last status (/B2GInvoice/GetLastStatus) and print "
        "one JSON line: whether it is cancelled (cancellation_mark) and what the provider "
        "says. A read is repeated freely on failures that may pass. Exit status: 0 read, "
        "1 refused or failed, 2 bad usage.",
    )
    add_verbosity(status)
    _add_call_options(status, mark_help="the document's mark, sent as the mark query parameter")
    status.set_defaults(handler=_cmd_status)


def _add_call_options(parser: argparse.ArgumentParser, *, mark_help: str) -> None:
    parser.add_argument("mark", nargs="?", metavar="MARK", help=mark_help)
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another query parameter (repeatable)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="for the whole call, retries included (60)",
    )
    add_credentials(parser)


async def _cmd_cancel(args: argparse.Namespace) -> int:
    payload = _payload(args.payload)
    if args.mark is None and payload is None:
        raise UsageError("give the note's MARK (or --payload)")
    mark = _mark(args.mark)

    async def call(client: InvoicingClient) -> OperationResult:
        cancel = (
            client.cancel_delivery_note
            if args.note == "delivery-note"
            else client.cancel_receiving_note
        )
        return await cancel(mark, payload=payload, params=_params(args.param), timeout=args.timeout)

    return await _run(args, call, mark=mark)


async def _cmd_status(args: argparse.Namespace) -> int:
    if args.mark is None and not args.param:
        raise UsageError("give the document's MARK (or --param)")
    mark = _mark(args.mark)

    async def call(client: InvoicingClient) -> OperationResult:
        return await client.get_last_b2g_status(
            mark, params=_params(args.param), timeout=args.timeout
        )

    return await _run(args, call, mark=mark)


async def _run(
    args: argparse.Namespace,
    call: Callable[[InvoicingClient], Awaitable[OperationResult]],
    *,
    mark: int | None,
) -> int:
    """Make the call with the configured client; print its line; the exit status."""
    record: dict[str, Any]
    async with configured_client(args) as client:
        try:
            result = await call(client)
        except InvoicingError as exc:
            record = {"outcome": outcome_of(exc), "error": error_to_dict(exc)}
            if isinstance(exc, DuplicateDocumentError) and exc.result is not None:
                record["cancellation_mark"] = exc.result.cancellation_mark
            if isinstance(exc, UnknownOutcomeError):
                record["next"] = f"invoicing-async status {mark if mark is not None else 'MARK'}"
                print(
                    "invoicing-async: the outcome is unknown and the request was not re-sent; "
                    f"check with: {record['next']}",
                    file=sys.stderr,
                )
        else:
            record = {
                "operation": result.operation,
                "outcome": "done",
                "status": result.status,
                "mark": result.mark,
                "cancellation_mark": result.cancellation_mark,
                "attempts": result.attempts,
                "body": result.body,
            }
    print(json.dumps(record, ensure_ascii=False), flush=True)
    return 0 if record["outcome"] == "done" else 1


def configured_client(args: argparse.Namespace) -> InvoicingClient:
    """The client the options and the ``INVOICING_*`` variables configure (JSON only)."""
    found = settings(args)
    _, context = key_and_tls(found, json_only=True)
    return InvoicingClient(
        str(found.base_url), str(found.client_id), str(found.api_key), ssl=context
    )


def outcome_of(error: InvoicingError) -> str:
    """``unknown`` (may have taken effect), ``refused`` (a definite answer), ``failed``."""
    if isinstance(error, UnknownOutcomeError):
        return "unknown"
    definite = (ValidationError, AuthenticationError, DuplicateDocumentError, UnexpectedStatusError)
    return "refused" if isinstance(error, definite) else "failed"


def _mark(text: str | None) -> int | None:
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()):
        raise UsageError(f"MARK must be a number, got {text!r}")
    return int(text)


def _params(pairs: list[str]) -> dict[str, str] | None:
    params = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--param takes NAME=VALUE, got {pair!r}")
        params[name] = value
    return params or None


def _payload(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--payload is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise UsageError("--payload must be a JSON object")
    return payload
