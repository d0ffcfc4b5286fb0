"""Credit generation, ``POST /Invoice/credit``: a credit of an issued document. Sans I/O.

The provider's page (https://developers.s1ecos.com/invoicecredit-14702653e0) gives the
request, every member required: ``issuerTin``, the ``authenticationCode`` and ``mark``
of the issued document, the new credit's ``series``, ``number`` and ``internalId``,
``relateCredit`` and ``preventDocumentMapping``; and the answer, ``200`` with ``{}``.
The design guide (§12) adds what the provider's other pages say: ``relateCredit`` true
makes a correlated credit (5.1), false an uncorrelated one (5.2); an 11.1 retail
receipt is credited by an 11.4 credit receipt, ``relateCredit`` ignored; a document may
be credited many times by 11.4 and 5.2 credits, by a 5.1 only once.

What the pages leave open, and what the sandbox does:

* The credit is of the whole document: it carries the original's lines and summaries,
  its issuer's branch and counterpart, and (5.1, 11.4) the original's mark in
  ``CorrelatedInvoices``. It is issued now, and held like any document (its own mark,
  uid and url), so the listing of issued documents and its PDF show it.
* Its identity is its ``internalId``, the provider's uniqueness key for documents: the
  same credit sent again (after a lost answer) is answered ``409`` with the record of
  the credit held, as a document sent again is.
* A second 5.1 of one document (another ``internalId``) is refused ``400``, naming the
  first one's mark: a definite refusal, not the ``409`` of a request sent again.
* The original is looked for among the issuer's own documents, by mark, and its
  ``authenticationCode`` must be its record's: else ``404``, one answer for both.
* A credit of a credit (5.1, 5.2, 11.4) or of a cancelled document is refused ``400``.
* ``issuerTin`` (``EL`` or not) must be the client's: else ``401``, the service's answer
  to a VAT number that does not match the API key.
* ``preventDocumentMapping`` is kept on the credit (:attr:`IssuedCredit.prevent_document_mapping`)
  and changes nothing: the pages do not say what it prevents.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._for_sandbox import field, path

from ._bodies import read_object
from ._provider import Submission
from ._replies import Reply, error_reply
from ._rules import invoice_type
from ._wire import document_identity, dumps, format_timestamp

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._bodies import OperationCall
    from ._provider import Exchange, Provider
    from ._records import CommittedDocument

__all__ = ["ROUTES", "Credits", "IssuedCredit"]

ROUTES: tuple[tuple[str, str, str], ...] = (("POST", "/Invoice/credit", "credit"),)
#: The credit documents' types: not credited again.
CREDIT_TYPES = frozenset({"5.1", "5.2", "11.4"})


@attrs.frozen(kw_only=True)
class IssuedCredit:
    """A credit the sandbox issued for ``POST /Invoice/credit``.

    The credit itself is held like any document: ``Sandbox.committed[credit.identity]``.

    .. versionadded:: 0.5.0
    """

    environment: str
    client_id: str
    #: The credited document's mark and type (``1.1``, ``11.1`` …).
    original_mark: int
    original_type: str
    #: The credit's own mark, and its type: ``5.1``, ``5.2`` or ``11.4``.
    mark: int
    invoice_type: str
    #: Its identity (``id:`` and its ``internalId``), as documents are held by.
    identity: str
    series: str
    number: str
    internal_id: str
    relate_credit: bool
    prevent_document_mapping: bool


class Credits:
    """The credits issued, and the rules of ``/Invoice/credit`` (see the module)."""

    def __init__(
        self,
        provider: Provider,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc),
    ) -> None:
        self._provider = provider
        self._now = now
        self.reset()

    def reset(self) -> None:
        """Forget the credits (the credit documents go with the provider's reset)."""
        self.issued: list[IssuedCredit] = []

    def inspect(self, route: str) -> Reply | None:
        """``GET /_sandbox/credits``: the credits issued (``None``: not this route)."""
        if route != "credits":
            return None
        return Reply(200, dumps({"credits": [attrs.asdict(c) for c in self.issued]}))

    def handle(self, exchange: Exchange, call: OperationCall) -> Reply:
        """The reply to an authenticated ``POST /Invoice/credit``."""
        asked = _read_request(call.body)
        if isinstance(asked, Reply):
            return asked
        environment, client_id = exchange.environment or "", exchange.client_id or ""
        if asked.issuer != client_id:
            return error_reply(401, "the issuer's TIN does not match the API key")
        mark = asked.mark
        found = self._provider.holding(environment, client_id, mark=mark)
        if found is None or found[0].record.authentication_code != asked.code:
            return error_reply(404, f"no document with mark {mark} and this authenticationCode")
        original = found[0]
        numbers = {"DistributionDetails": {"InternalDocumentId": asked.internal_id}}
        identity = exchange.identity = document_identity(numbers)
        held = self._provider.holding(environment, client_id, identity=identity)
        if held is not None:  # this credit sent again (before the rules it passed once)
            return Reply(409, held[1])
        kind = self._kind(original, mark, relate=asked.relate)
        if isinstance(kind, Reply):
            return kind
        now = self._now()
        document = _credit_document(original.document, client_id, kind, mark)
        document.update(Series=asked.series, Number=asked.number)
        document["DateIssued"] = format_timestamp(now)
        document.update(numbers)
        key = (environment, client_id, identity)
        submission = Submission(key, document, dumps(document), encrypted=False)
        record = json.loads(self._provider.commit(submission, now).body)
        self.issued.append(
            IssuedCredit(
                environment=environment,
                client_id=client_id,
                original_mark=mark,
                original_type=invoice_type(original.document),
                mark=record["mark"],
                invoice_type=kind,
                identity=identity,
                series=asked.series,
                number=asked.number,
                internal_id=asked.internal_id,
                relate_credit=asked.relate,
                prevent_document_mapping=asked.prevent,
            )
        )
        return Reply(200, b"{}")

    def _kind(self, held: CommittedDocument, mark: int, *, relate: bool) -> str | Reply:
        """The credit's type (``5.1``, ``5.2``, ``11.4``), or why there can be none."""
        kind = invoice_type(held.document)
        if kind in CREDIT_TYPES:
            return error_reply(400, f"mark {mark} is a credit ({kind}): a credit is not credited")
        if held.cancellation_mark is not None:
            cancelled = held.cancellation_mark
            return error_reply(400, f"mark {mark} is cancelled (cancellation mark {cancelled})")
        if kind == "11.1":
            return "11.4"  # relateCredit is ignored: a retail receipt's credit is an 11.4
        if not relate:
            return "5.2"
        scope = (held.environment, held.client_id, mark)
        for earlier in self.issued:
            if _credited(earlier) == scope and earlier.invoice_type == "5.1":
                return error_reply(
                    400,
                    f"mark {mark} has a correlated credit (5.1) already, mark {earlier.mark}: "
                    "a document gets one 5.1; credit it further with relateCredit false (5.2)",
                )
        return "5.1"


@attrs.frozen
class _Request:
    issuer: str
    code: str
    mark: int
    series: str
    number: str
    internal_id: str
    relate: bool
    prevent: bool


def _read_request(body: bytes) -> _Request | Reply:
    """The request's members (names in any case), or the 400 naming every problem."""
    fields = read_object(body)
    if isinstance(fields, Reply):
        return fields
    read = (
        fields.vat("issuerTin"),
        fields.text("authenticationCode"),
        fields.mark("mark"),
        fields.text("series", numbers=True),
        fields.text("number", numbers=True),
        fields.text("internalId", numbers=True),
        fields.boolean("relateCredit"),
        fields.boolean("preventDocumentMapping"),
    )
    refusal = fields.refusal()
    if refusal is not None:
        return refusal
    issuer, code, mark, series, number, internal_id, relate, prevent = read
    # Every member was read (no problem was noted): none is None.
    return _Request(
        issuer or "", code or "", mark or 0, series or "", number or "", internal_id or "",
        bool(relate), bool(prevent),
    )  # fmt: skip


def _credited(credit: IssuedCredit) -> tuple[str, str, int]:
    return (credit.environment, credit.client_id, credit.original_mark)


def _credit_document(
    original: dict[str, Any], client_id: str, kind: str, mark: int
) -> dict[str, Any]:
    """The credit of the whole ``original`` (its lines and summaries), without its numbers."""
    branch = path(original, "Issuer", "BranchCode")
    document: dict[str, Any] = {
        "Issuer": {"Vat": client_id, "BranchCode": 0 if branch is None else branch},
        "InvoiceTypeCode": kind,
    }
    counterpart = field(original, "CounterParty")
    if counterpart is not None:
        document["CounterParty"] = copy.deepcopy(counterpart)
    if kind != "5.2":
        document["CorrelatedInvoices"] = [mark]
    document["Details"] = copy.deepcopy(field(original, "Details") or [])
    document["Summaries"] = copy.deepcopy(field(original, "Summaries") or {})
    return document
