"""The rest of a day's operations, run: credits, payments, IRIS, the listing, a PDF.

Each operation is a named call of the table (:data:`~invoicing_async._core.safety.OPERATIONS`)
run by :mod:`.operations` as often as its class allows; its request and its answer are
:mod:`invoicing_async._core.day`'s typed records, and the provider's refusals become the
operation's own errors there (:func:`~invoicing_async._core.day.refusal`). What is new
here is only what needs I/O: the listing's pages fetched one at a time (memory bounded by
one page, the ``NextPage`` header followed and never looped), the wait for an IRIS payment
on a clock and a sleep the caller may replace, and a PDF streamed to a file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import tempfile
import time
from typing import IO, TYPE_CHECKING, Any

import attrs

from invoicing_async._core import day
from invoicing_async._core import protocol as proto
from invoicing_async._core.convert import result_from_json
from invoicing_async._core.errors import InvoicingError, MalformedResponseError
from invoicing_async._core.log import operations as log
from invoicing_async._core.machine import Attempts
from invoicing_async._core.outcomes import OutcomeStatus
from invoicing_async._core.safety import Safety, credit_safety
from invoicing_async._io.loop import Named, drive

from . import operations as ops

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import AsyncIterator, Awaitable, Callable

    from invoicing_async._core.models import DocumentResult
    from invoicing_async._core.retry import RetryPolicy
    from invoicing_async._io.channel import Channel
    from invoicing_async._io.transport import Transport

__all__ = [
    "DEFAULT_MAX_PDF_SIZE",
    "credit",
    "document_pdf",
    "documents_issued",
    "initiate_instant_payment",
    "instant_payment_status",
    "update_payment",
    "wait_for_instant_payment",
]

#: The largest PDF :func:`document_pdf` writes by default (a receipt's is a few KB).
DEFAULT_MAX_PDF_SIZE = 20 * 1024 * 1024


async def _answer(
    channel: Channel,
    name: str,
    given: ops.Payload,
    options: ops.Options,
    *,
    declared: Safety | None = None,
) -> ops.OperationResult:
    """Operation ``name``'s answer; a refusal raised as the operation's own error."""
    call = ops.named_call(
        name,
        path_params=given.path_params,
        body=given.encoded(),
        params=given.query(),
        safety=options.safety,
        declared=declared,
    )
    try:
        return await ops.perform_answer(
            channel, call, policy=options.policy, timeout=options.timeout
        )
    except InvoicingError as exc:
        typed = day.refusal(name, exc)
        if typed is exc:
            raise
        raise typed from None


async def credit(
    channel: Channel,
    *,
    mark: int,
    authentication_code: str,
    series: str,
    number: str,
    internal_id: str,
    relate_credit: bool,
    prevent_document_mapping: bool,
    options: ops.Options,
) -> day.CreditResult:
    """``POST /Invoice/credit``, its class decided by ``relate_credit``."""
    body = day.credit_body(
        channel.client_id,
        mark=mark,
        authentication_code=authentication_code,
        series=series,
        number=number,
        internal_id=internal_id,
        relate_credit=relate_credit,
        prevent_document_mapping=prevent_document_mapping,
    )
    declared = credit_safety(relate_credit=relate_credit)
    answer = await _answer(channel, "credit", ops.Payload(body), options, declared=declared)
    record = None
    if isinstance(answer.body, dict) and answer.body:
        with contextlib.suppress(Exception):  # a record when there is one; {} documented
            record = result_from_json(answer.body)
    return day.CreditResult(
        original_mark=mark,
        series=series,
        number=number,
        internal_id=internal_id,
        relate_credit=relate_credit,
        status=answer.status,
        record=record,
        attempts=answer.attempts,
    )


async def update_payment(
    channel: Channel, mark: int, payments: list[day.CardPayment], options: ops.Options
) -> day.PaymentUpdateResult:
    """``POST /Invoice/updatePayment``: the payments of document ``mark``."""
    body = day.payment_body(channel.client_id, mark, payments)
    answer = await _answer(channel, "update_payment", ops.Payload(body), options)
    return day.parse_payment_update(mark, answer.body, answer.attempts)


async def initiate_instant_payment(
    channel: Channel, request: day.InstantPaymentRequest, options: ops.Options
) -> day.InstantPayment:
    """``InitiatePayment``: an IRIS payment started, its QR and ids."""
    given = ops.Payload(request.to_json(channel.client_id))
    answer = await _answer(channel, "initiate_instant_payment", given, options)
    return day.parse_instant_payment(answer.body, request.validity_minutes)


async def instant_payment_status(
    channel: Channel, end_to_end_id: str, options: ops.Options
) -> day.InstantPaymentStatus:
    """``GetPaymentStatus``: an IRIS payment's status (a read)."""
    if not isinstance(end_to_end_id, str) or not end_to_end_id.strip():
        raise ValueError("end_to_end_id must be a non-empty string")
    given = ops.Payload(None, {"endToEndDiasId": end_to_end_id})
    answer = await _answer(channel, "instant_payment_status", given, options)
    return day.parse_payment_status(answer.body, end_to_end_id)


async def wait_for_instant_payment(
    read: Callable[[], Awaitable[day.InstantPaymentStatus]],
    *,
    within: float,
    interval: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> day.InstantPaymentStatus:
    """Read the status until it is final or ``within`` seconds (on ``clock``) are over.

    The last status read is returned: final, or ``Pending`` when the time ran out. No
    sleep outlasts the time left.
    """
    if interval <= 0:
        raise ValueError("interval must be above 0")
    deadline = clock() + within
    status = await read()
    while day.poll_again(status, clock(), deadline):
        await sleep(min(interval, max(deadline - clock(), 0.0)))
        status = await read()
    return status


async def documents_issued(
    channel: Channel,
    issuer: str,
    since: dt.date,
    until: dt.date,
    *,
    policy: RetryPolicy,
    timeout: float | None,
) -> AsyncIterator[DocumentResult]:
    """The issuer's documents issued from ``since`` to ``until``, a page at a time.

    Each page is read (and retried, a read) on its own, with ``timeout`` for it; only one
    page is held at a time.
    """
    if until < since:
        raise ValueError("until is before since")
    params = {"From": day.yyyymmdd(since), "dateTo": day.yyyymmdd(until)}
    page: int | None = 1
    while page is not None:
        call = ops.named_call(
            "documents_issued", path_params={"issuerTin": issuer, "page": str(page)}, params=params
        )
        number = page

        def ok(response: proto.Response, number: int = number) -> tuple[int, Any]:
            body = proto.parse_json_response(response, f"the listing's page {number}")
            return response.status, (
                day.page_documents(body, number),
                response.headers.get("NextPage"),
            )

        _, (documents, header), _ = await ops.perform(
            channel, call, ok, policy=policy, timeout=timeout, needs_record=False
        )
        page = day.next_page(header, number, empty=not documents)
        for document in documents:
            yield document
        del documents


def pdf_url(source: DocumentResult | str) -> str:
    """The PDF's url: ``{url}/pdf`` of a record's (or a document's) public url.

    :raises ValueError: the record has no url, or the url is not ``https`` (or loopback).
    """
    url = source if isinstance(source, str) else source.url
    if not url:
        raise ValueError("the record has no url: the provider gave none")
    url = url.rstrip("/")
    if not url.endswith("/pdf"):
        url += "/pdf"
    proto.check_base_url(url)
    return url


async def document_pdf(
    transport: Transport,
    source: DocumentResult | str,
    target: str | os.PathLike[str] | IO[bytes],
    *,
    max_size: int,
    policy: RetryPolicy,
    timeout: float | None,
) -> int:
    """Stream the PDF of ``source`` to ``target``; the bytes written.

    To a path, through a temporary file beside it renamed into place once whole (a read:
    retried, each attempt from the start); to a binary file object, as it arrives (one
    attempt: what was written cannot be taken back).
    """
    url = pdf_url(source)
    if max_size < 1:
        raise ValueError("max_size must be at least 1")
    if isinstance(target, (str, os.PathLike)):
        path = pathlib.Path(target)
        return await _to_path(
            transport, url, path, max_size=max_size, policy=policy, timeout=timeout
        )
    once = attrs.evolve(policy, max_attempts=1)

    async def into_file(attempt_timeout: float | None) -> int:
        size, kind = await transport.download(
            url, target.write, limit=max_size, timeout=attempt_timeout
        )
        _check_pdf(kind)
        return size

    return await _read(url, into_file, once, timeout)


async def _to_path(
    transport: Transport,
    url: str,
    path: pathlib.Path,
    *,
    max_size: int,
    policy: RetryPolicy,
    timeout: float | None,
) -> int:
    async def into_path(attempt_timeout: float | None) -> int:
        handle, name = await asyncio.to_thread(
            tempfile.mkstemp, prefix=f".{path.name}.", suffix=".part", dir=path.parent or "."
        )
        try:
            with os.fdopen(handle, "wb") as file:
                size, kind = await transport.download(
                    url, file.write, limit=max_size, timeout=attempt_timeout
                )
            _check_pdf(kind)
            await asyncio.to_thread(os.replace, name, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(name)  # noqa: PTH108
            raise
        return size

    return await _read(url, into_path, policy, timeout)


async def _read(
    url: str,
    attempt: Callable[[float | None], Awaitable[int]],
    policy: RetryPolicy,
    timeout: float | None,
) -> int:
    """Run ``attempt`` as a read: as often as the policy allows."""
    loop = asyncio.get_running_loop()
    what = "GET {url}/pdf"
    attempts = Attempts(
        Safety.READ,
        policy,
        deadline=None if timeout is None else loop.time() + timeout,
        needs_record=False,
        subject=what,
        find_out="read it again later",
    )
    end = await drive(
        attempts, attempt, subject=Named(what, {"invoicing.operation": what}), log=log
    )
    if end.status is OutcomeStatus.ACCEPTED and isinstance(end.result, int):
        return end.result
    assert end.error is not None  # noqa: S101  (every other ending carries one)
    del url
    raise end.error


def _check_pdf(kind: str | None) -> None:
    if kind not in (None, "", "application/pdf", "application/octet-stream"):
        raise MalformedResponseError(f"the document's PDF came as {kind[:64]!r}", status=200)
