"""Reading back what was issued: the paged listing, and a document's PDF. Sans I/O.

``GET /api/invoice/getdocuments/{IssuerVatNumber}/{PageNumber}/?From=YYYYMMDD&dateTo=YYYYMMDD``
    The provider's page "Retrieving a document"
    (https://developers.s1ecos.com/retrieving-a-document-869812m0) and the design guide
    (§12): the issuer's documents issued from ``From`` to ``dateTo``, a JSON array, a
    page at a time; a ``NextPage`` response header leads on.
``GET {url}/pdf``
    A document's PDF, below its public url (the record's ``url``, ``{domain}/v/{signature}``,
    the QR a receipt prints): anyone holding the receipt reads it, so it takes no
    credentials.

What the pages leave open, and what the sandbox does:

* Pages are numbered from 1 and hold :attr:`Listing.page_size` documents (100 by
  default, ``Sandbox(page_size=…)``), in the order of their marks. ``NextPage`` is the
  number of the next page when there is one; the last page has no ``NextPage`` header.
  A page past the last is an empty array.
* ``PageNumber`` is an integer from 1 to 2147483647 (an ASP.NET ``int`` route value);
  anything else is ``400``. ``From`` and ``dateTo`` are required, 8 digits of a real
  date; ``dateTo`` before ``From`` is ``400``. Both days count; a document's day is its
  ``DateIssued`` in UTC.
* ``IssuerVatNumber`` (``EL`` or not) must be the client's: another issuer's is ``401``,
  the service's answer to a VAT number that does not match the API key.
* Each element is the document's result record as the sandbox answered it, with its
  ``cancellationMark`` as it is now and its ``invoiceTypeCode``; credits are listed as
  the documents they are.
* The PDF is the sandbox's own one-page summary (:mod:`._pdf`); an unknown signature
  is ``404``. The PDF is looked for in the environment of the path.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from invoicing_async._for_sandbox import field, tin

from ._bodies import Fields
from ._pdf import text_pdf
from ._replies import Reply, error_reply
from ._rules import invoice_type
from ._wire import dumps

if TYPE_CHECKING:
    from ._bodies import OperationCall
    from ._provider import Exchange, Provider
    from ._records import CommittedDocument

__all__ = ["MAX_PAGE", "PUBLIC_ROUTES", "ROUTES", "Listing"]

ROUTES: tuple[tuple[str, str, str], ...] = (
    # The trailing slash of the provider's path is optional, as ASP.NET routes have it.
    ("GET", "/api/invoice/getdocuments/{IssuerVatNumber}/{PageNumber}{slash:/?}", "getdocuments"),
)
#: Routes that take no credentials: a document's public url is printed on paper.
PUBLIC_ROUTES: tuple[tuple[str, str, str], ...] = (("GET", "/v/{signature}/pdf", "pdf"),)
#: The largest page number (``int.MaxValue``).
MAX_PAGE = 2**31 - 1
_PAGE_DIGITS = len(str(MAX_PAGE))


class Listing:
    """The listing of issued documents and their PDFs (see the module)."""

    def __init__(self, provider: Provider, page_size: int = 100) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self._provider = provider
        #: Documents a page holds.
        self.page_size = page_size

    def documents(self, exchange: Exchange, call: OperationCall) -> Reply:
        """The reply to an authenticated ``getdocuments``: a page of the issuer's documents."""
        query = Fields(call.query)
        page = _page(call.path_params.get("PageNumber", ""), query)
        start, end = _day(query, "From"), _day(query, "dateTo")
        if start is not None and end is not None and end < start:
            query.note("dateTo", "is before From")
        refusal = query.refusal()
        if refusal is not None or page is None or start is None or end is None:
            return refusal or error_reply(400, "PageNumber, From, dateTo: are required")
        environment, client_id = exchange.environment or "", exchange.client_id or ""
        if tin(call.path_params.get("IssuerVatNumber", "")) != client_id:
            return error_reply(401, "the IssuerVatNumber does not match the API key")
        issued = sorted(
            (
                doc
                for doc in self._provider.committed_in(environment, client_id).values()
                if start <= _issue_day(doc) <= end
            ),
            key=lambda doc: doc.record.mark or 0,
        )
        first_index = (page - 1) * self.page_size
        shown = issued[first_index : first_index + self.page_size]
        headers: tuple[tuple[str, str], ...] = ()
        if first_index + self.page_size < len(issued):
            headers = (("NextPage", str(page + 1)),)
        return Reply(200, dumps([_entry(doc) for doc in shown]), headers=headers)

    def pdf(self, exchange: Exchange, call: OperationCall) -> Reply:
        """The reply to ``GET {url}/pdf``: the document's PDF, streamed."""
        signature = call.path_params.get("signature", "")
        environment = exchange.environment or ""
        found = [
            doc
            for doc in self._provider.all_committed()
            if doc.environment == environment and doc.record.signature == signature
        ]
        if not found:
            return error_reply(404, f"no document at /v/{signature[:64]}")
        doc = found[-1]
        exchange.identity = doc.identity  # no client: a public url, read by anyone
        record = doc.record
        lines = [
            f"{invoice_type(doc.document) or 'Document'} {record.series}/{record.number}",
            f"Issuer VAT {doc.client_id}",
            f"Issued {record.date_issued.isoformat() if record.date_issued else ''}",
            f"MARK {record.mark}",
            f"UID {record.uid}",
            f"Total {_total(doc.document)}",
            f"Verify at {record.url}",
        ]
        if doc.cancellation_mark is not None:
            lines.append(f"CANCELLED (cancellation mark {doc.cancellation_mark})")
        disposition = f'inline; filename="{record.mark}.pdf"'
        return Reply(
            200,
            text_pdf(lines),
            content_type="application/pdf",
            headers=(("Content-Disposition", disposition),),
            stream=True,
        )


def _page(text: str, query: Fields) -> int | None:
    """The page number of the path: ASCII digits, from 1 to :data:`MAX_PAGE`."""
    # Its length first: int() of a million digits is slow (and over 4300 raises).
    if text.isascii() and text.isdigit() and len(text) <= _PAGE_DIGITS:
        page = int(text)
        if 1 <= page <= MAX_PAGE:
            return page
    query.note("PageNumber", f"must be an integer from 1 to {MAX_PAGE}")
    return None


def _day(query: Fields, name: str) -> dt.date | None:
    """A ``YYYYMMDD`` query value (its name in any case) as a date."""
    text = query.text(name)
    if text is None:
        return None
    if len(text) == 8 and text.isascii() and text.isdigit():
        try:
            return dt.date(int(text[:4]), int(text[4:6]), int(text[6:]))
        except ValueError:
            pass
    query.note(name, "must be a date written YYYYMMDD")
    return None


def _issue_day(doc: CommittedDocument) -> dt.date:
    issued = doc.record.date_issued
    return issued.astimezone(dt.timezone.utc).date() if issued is not None else dt.date.min


def _total(document: dict[str, Any]) -> str:
    summaries = field(document, "Summaries")
    total = field(summaries, "TotalGrossValue") if isinstance(summaries, dict) else None
    return "" if total is None else str(total)


def _entry(doc: CommittedDocument) -> dict[str, Any]:
    """One element of the listing: the record, as it stands now."""
    entry: dict[str, Any] = json.loads(doc.record_body)
    entry["cancellationMark"] = doc.cancellation_mark
    entry["invoiceTypeCode"] = invoice_type(doc.document) or None
    return entry
