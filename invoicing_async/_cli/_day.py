"""``reconcile``, ``update-payment`` and ``instant-payment-status``: the end of a day.

``reconcile DAY`` compares what a ledger (or an outbox) says was accepted that day with
what the provider lists as issued that day (:meth:`InvoicingClient.documents_issued
<invoicing_async.InvoicingClient.documents_issued>`), by mark, and prints one JSON line
for each document missing on either side, and for each entry of the day whose outcome
is not settled (it cannot be matched). Exit status 0 when both sides agree, 1 otherwise.

``update-payment`` registers a card payment made later (an at-most-once write: never
re-sent after a lost answer), and ``instant-payment-status`` reads an IRIS payment's
status (a read), waiting for a final one with ``--wait``. Each prints one JSON line
with its ``outcome`` (``done``, ``refused``, ``unknown``, ``failed``), as ``cancel`` does.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import TYPE_CHECKING, Any

from invoicing_async._core.convert import error_to_dict
from invoicing_async._core.day import CardPayment
from invoicing_async._core.errors import InvoicingError, UnknownOutcomeError
from invoicing_async._core.outcomes import HELD, OutcomeStatus

from ._ledger import existing
from ._operations import configured_client, outcome_of
from .common import UsageError, add_credentials, add_ledger, add_verbosity, settings

if TYPE_CHECKING:
    import argparse
    from collections.abc import Awaitable, Callable

    from invoicing_async._client.client import InvoicingClient
    from invoicing_async._core.entries import LedgerEntry

    from .common import Commands

__all__ = ["register"]

_PAYMENT_RULE = (
    "A payment is an at-most-once write: it is re-sent only when the request certainly "
    "did not reach the provider (connection refused, 429, 503). When the answer is lost "
    "the outcome is 'unknown' (exit 1): the provider's pages give no read of a payment, "
    "so compare the terminal's record with the provider's before sending it again."
)


def register(commands: Commands) -> None:
    """Add ``reconcile``, ``update-payment`` and ``instant-payment-status``."""
    reconcile = commands.add_parser(
        "reconcile",
        help="compare a ledger or outbox with the documents the provider lists for a day",
        description="List the documents the provider holds as issued on DAY "
        "(GET /api/invoice/getdocuments, every page) and compare them, by mark, with the "
        "issuer's entries of the ledger or outbox (--ledger) accepted that day. Prints one JSON "
        'line for each document missing on either side ({"missing": "at_provider"} or '
        '{"missing": "in_ledger"}) and for each entry of the day whose outcome is not '
        'settled ({"unsettled": KEY}), and a summary on stderr. Exit status: 0 both '
        "sides agree, 1 something is missing or unsettled, 2 bad usage.",
    )
    add_ledger(reconcile)
    reconcile.add_argument("day", metavar="DAY", help="the day, YYYY-MM-DD (UTC)")
    reconcile.add_argument(
        "--issuer",
        metavar="TIN",
        help="the issuer whose entries and documents are compared (default: the client's)",
    )
    _add_timeout(reconcile, "for each page of the listing, retries included (60)")
    add_credentials(reconcile)
    reconcile.set_defaults(handler=_cmd_reconcile)

    payment = commands.add_parser(
        "update-payment",
        help="register a card payment of an issued document (at most once)",
        description="Register the card payment of a document issued earlier "
        "(POST /Invoice/updatePayment), named by its MARK, and print one JSON line with "
        "the payment mark. Sign the payment for the mark first (SignPos) and give what "
        "the terminal did with --payment. "
        + _PAYMENT_RULE
        + " Exit status: 0 registered, 1 refused, unknown or failed, 2 bad usage.",
    )
    add_verbosity(payment)
    payment.add_argument("mark", metavar="MARK", help="the paid document's mark")
    payment.add_argument(
        "--payment",
        action="append",
        default=[],
        required=True,
        metavar="JSON",
        help="a payment method as the provider names its members (paymentMethodTypeCode, "
        "amount, transactionId, providersSignature, posInput, terminalId, tipAmount); "
        "repeatable",
    )
    _add_timeout(payment, "for the whole call, retries included (60)")
    add_credentials(payment)
    payment.set_defaults(handler=_cmd_update_payment)

    status = commands.add_parser(
        "instant-payment-status",
        help="read an IRIS payment's status (GetPaymentStatus)",
        description="Read an IRIS instant payment's status "
        "(GET /paymentsapi/IrisPayments/GetPaymentStatus) and print one JSON line: "
        "Pending, Completed, Expired or Failed, and whether it is final. A read is "
        "repeated freely on failures that may pass. With --wait, ask again every "
        "--interval seconds until the status is final or the seconds are over. Exit "
        "status: 0 read (final, with --wait), 1 refused, failed or still pending, 2 bad "
        "usage.",
    )
    add_verbosity(status)
    status.add_argument("id", metavar="END_TO_END_ID", help="the payment's endToEndDiasId")
    status.add_argument(
        "--wait", type=float, metavar="SECONDS", help="wait this long for a final status"
    )
    status.add_argument(
        "--interval", type=float, default=2.0, metavar="SECONDS", help="between reads (2)"
    )
    _add_timeout(status, "for each read, retries included (60)")
    add_credentials(status)
    status.set_defaults(handler=_cmd_instant_status)


def _add_timeout(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help=text)


# --- reconcile ------------------------------------------------------------------------------


async def _cmd_reconcile(args: argparse.Namespace) -> int:
    try:
        day = dt.date.fromisoformat(args.day)
    except ValueError:
        raise UsageError(f"DAY must be a date written YYYY-MM-DD, got {args.day!r}") from None
    issuer = args.issuer or str(settings(args).client_id)
    ours, unsettled = await _ledger_side(args, day, issuer)
    listed: set[int] = set()
    missing_in_ledger = 0
    async with configured_client(args) as client:
        async for record in client.documents_issued(issuer, day, timeout=args.timeout):
            if record.mark is None:
                continue
            listed.add(record.mark)
            if record.mark not in ours:
                missing_in_ledger += 1
                _line(
                    {
                        "missing": "in_ledger",
                        "mark": record.mark,
                        "series": record.series,
                        "number": record.number,
                        "internal_id": record.internal_id,
                        "invoice_type": record.extra.get("invoiceTypeCode"),
                        "cancellation_mark": record.cancellation_mark,
                    }
                )
    missing_at_provider = [mark for mark in ours if mark not in listed]
    for mark in missing_at_provider:
        entry = ours[mark]
        _line({"missing": "at_provider", "mark": mark, "key": entry.key, "issuer": entry.issuer})
    for entry in unsettled:
        status = entry.status.value if isinstance(entry.status, OutcomeStatus) else entry.status
        _line({"unsettled": entry.key, "status": status, "issuer": entry.issuer})
    print(
        f"reconcile {day.isoformat()}: {len(ours)} accepted in the ledger, {len(listed)} "
        f"listed by the provider: {missing_in_ledger} missing in the ledger, "
        f"{len(missing_at_provider)} missing at the provider, {len(unsettled)} unsettled",
        file=sys.stderr,
    )
    return 1 if missing_in_ledger or missing_at_provider or unsettled else 0


async def _ledger_side(
    args: argparse.Namespace, day: dt.date, issuer: str
) -> tuple[dict[int, LedgerEntry], list[LedgerEntry]]:
    """``issuer``'s entries held by the provider on ``day`` by mark, and those unsettled.

    An entry that names no issuer (written by 0.3) counts as the issuer's.
    """
    ours: dict[int, LedgerEntry] = {}
    unsettled: list[LedgerEntry] = []
    async with existing(args) as store:
        async for entry in store.entries():
            if entry.issuer not in (None, issuer):
                continue
            mark = _held_mark(entry)
            if mark is not None and _day_of(entry) == day:
                ours[mark] = entry
            elif mark is None and not entry.final and _changed_on(entry) == day:
                unsettled.append(entry)
    return ours, unsettled


def _held_mark(entry: LedgerEntry) -> int | None:
    """The mark of a document the provider holds by the entry's outcome, else ``None``."""
    outcome = entry.outcome
    if outcome is None or outcome.status not in HELD or outcome.result is None:
        return None
    return outcome.result.mark


def _day_of(entry: LedgerEntry) -> dt.date | None:
    """The day the document was issued (its record's), else the day the entry changed."""
    result = entry.outcome.result if entry.outcome is not None else None
    if result is not None and result.date_issued is not None:
        issued = result.date_issued
        if issued.tzinfo is not None:
            issued = issued.astimezone(dt.timezone.utc)
        return issued.date()
    return _changed_on(entry)


def _changed_on(entry: LedgerEntry) -> dt.date | None:
    changed = entry.updated_at
    return changed.astimezone(dt.timezone.utc).date() if changed is not None else None


def _line(record: dict[str, Any]) -> None:
    print(json.dumps(record, ensure_ascii=False), flush=False)


# --- the operator's calls -------------------------------------------------------------------


async def _cmd_update_payment(args: argparse.Namespace) -> int:
    if not (args.mark.isascii() and args.mark.isdigit()):
        raise UsageError(f"MARK must be a number, got {args.mark!r}")
    mark = int(args.mark)
    payments = [_payment(text) for text in args.payment]

    async def call(client: InvoicingClient) -> dict[str, Any]:
        result = await client.update_payment(mark, payments, timeout=args.timeout)
        return {
            "operation": "POST /Invoice/updatePayment",
            "mark": result.mark,
            "payment_mark": result.payment_mark,
            "message": result.message,
            "attempts": result.attempts,
        }

    return await _run(args, call, done=lambda _: True)


async def _cmd_instant_status(args: argparse.Namespace) -> int:
    if args.interval <= 0 or (args.wait is not None and args.wait < 0):
        raise UsageError("--interval must be above 0 and --wait not negative")

    async def call(client: InvoicingClient) -> dict[str, Any]:
        if args.wait is None:
            status = await client.instant_payment_status(args.id, timeout=args.timeout)
        else:
            status = await client.wait_for_instant_payment(
                args.id, within=args.wait, interval=args.interval, timeout=args.timeout
            )
        return {
            "operation": "GET /paymentsapi/IrisPayments/GetPaymentStatus",
            "end_to_end_id": status.end_to_end_id,
            "payment_status": status.status,
            "final": status.final,
            "description": status.description,
            "completed_at": status.completed_at.isoformat() if status.completed_at else None,
        }

    return await _run(args, call, done=lambda line: args.wait is None or line["final"])


async def _run(
    args: argparse.Namespace,
    call: Callable[[InvoicingClient], Awaitable[dict[str, Any]]],
    *,
    done: Callable[[dict[str, Any]], bool],
) -> int:
    """Make the call; print its line; 0 when it is done (as ``done`` says), else 1."""
    async with configured_client(args) as client:
        try:
            record = {"outcome": "done", **(await call(client))}
        except InvoicingError as exc:
            record = {"outcome": outcome_of(exc), "error": error_to_dict(exc)}
            if isinstance(exc, UnknownOutcomeError):
                print(f"invoicing-async: the outcome is unknown: {exc.message}", file=sys.stderr)
    print(json.dumps(record, ensure_ascii=False), flush=True)
    return 0 if record["outcome"] == "done" and done(record) else 1


_PAYMENT_MEMBERS = {
    "paymentMethodTypeCode": "payment_method_type_code",
    "amount": "amount",
    "transactionId": "transaction_id",
    "providersSignature": "providers_signature",
    "posInput": "pos_input",
    "terminalId": "terminal_id",
    "tipAmount": "tip_amount",
}


def _payment(text: str) -> CardPayment:
    """A ``--payment`` JSON object as a :class:`CardPayment` (other members kept)."""
    try:
        given = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--payment is not JSON: {exc}") from None
    if not isinstance(given, dict):
        raise UsageError("--payment must be a JSON object")
    known = {_PAYMENT_MEMBERS[k]: v for k, v in given.items() if k in _PAYMENT_MEMBERS}
    extra = {k: v for k, v in given.items() if k not in _PAYMENT_MEMBERS}
    missing = [k for k in ("amount", "transactionId", "providersSignature") if k not in given]
    if missing:
        raise UsageError(f"--payment lacks {', '.join(missing)}")
    try:
        return CardPayment(**known, extra=extra)
    except TypeError as exc:
        raise UsageError(f"--payment: {exc}") from None
