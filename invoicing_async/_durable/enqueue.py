"""Documents made ready for an outbox: serialised once, keyed, fingerprinted.

Enqueuing an identity again replaces the stored document and makes the entry pending
again, unless it is final for that content: a document the provider holds stays done,
and so does one refused whose content did not change (the SQL is the same for both
backends, :data:`UPSERT_SET`). An entry in flight stays in flight (its request is out,
an identical document is not sent twice); if that request's content is then refused
while a changed document waits, the settlement puts the entry back to be sent (the
backends' ``_SETTLE`` compare the refused content's fingerprint with the stored one).

A poison document is not revived by being enqueued again unchanged (an application
that enqueues on every save): a parked entry stays parked, and one backing off keeps
its wait and its count of failed rounds. Changed content is a new document to the
budget: sent at once, with no failed rounds.

A document's identity is its issuer and its key: its ``Issuer.Vat`` (or the issuer
given to enqueue), ``''`` when it names none; an entry stored before issuers were
(0.3) is adopted by the first document of its key (:mod:`._identity`).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._doc.checked import Checked, require_valid
from invoicing_async._doc.document import describe, identify, serialize_document
from invoicing_async._send.journal import Ref

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["UPSERT_SET", "Ready", "ready"]

#: The same content as the stored document (a batch's ledger row has none).
_SAME = "COALESCE({t}.doc_fingerprint, '') = excluded.doc_fingerprint"
#: The ``ON CONFLICT (key, issuer) DO UPDATE SET`` clause of an enqueue (``{t}``: the table,
#: ``{now}``: the backend's time of day).
UPSERT_SET = (
    "document = excluded.document, encrypted = excluded.encrypted, "
    "doc_fingerprint = excluded.doc_fingerprint, "
    "state = CASE WHEN {t}.state = 'in_flight' THEN {t}.state "
    "WHEN {t}.final AND {t}.status IN ('accepted', 'duplicate') THEN {t}.state "
    "WHEN {t}.final AND {t}.fingerprint = excluded.doc_fingerprint THEN {t}.state "
    "WHEN {t}.state = 'parked' AND " + _SAME + " THEN {t}.state "
    "ELSE 'pending' END, "
    "failures = CASE WHEN {t}.state = 'in_flight' OR " + _SAME + " THEN {t}.failures "
    "ELSE 0 END, "
    "available_at = CASE WHEN " + _SAME + " THEN {t}.available_at ELSE {now} END"
)


@attrs.frozen
class Ready:
    """One document as stored in an outbox."""

    key: str
    body: bytes = attrs.field(repr=False)
    encrypted: bool
    fingerprint: str
    #: The issuer whose document it is (``""``: it names none).
    issuer: str = ""

    @property
    def ref(self) -> Ref:
        """The document's identity."""
        return Ref(self.issuer, self.key)


def ready(
    documents: Iterable[Any],
    *,
    encrypted: bool,
    key: Callable[[Any], str] | None,
    issuer: str | None = None,
    check: bool = False,
) -> list[Ready]:
    """Serialise every document; a document that cannot be serialised raises.

    Each is keyed (``key``, else :func:`~invoicing_async.document_key`) and belongs to
    ``issuer``, else to the issuer its ``Issuer.Vat`` names. With ``check``, each is
    checked first (:func:`invoicing_async.documents.check`'s errors); a document of
    :func:`invoicing_async.documents.checked` is checked with or without it (once).

    :raises InvalidDocumentError: a document the provider would refuse (``check``, or
        marked checked), naming its position (nothing is enqueued).
    :raises AmbiguousDocumentError: a document holding a member twice with different
        values, checked or not, naming its position (nothing is enqueued).
    :raises ValidationError: naming the document's position (nothing is enqueued).
    """
    out: list[Ready] = []
    for index, document in enumerate(documents):
        plain, subject = document, f"document {index}"
        if check or isinstance(document, Checked):
            # Checked here, once: serialising a Checked document would check it again.
            require_valid(document, subject=subject)
            if isinstance(document, Checked):
                plain = document.document
        # Refused naming its position: it cannot be serialised, is too large, or holds a
        # member twice (a mapping where it is serialised, JSON text where it is read).
        body = serialize_document(plain, subject=subject)
        text = isinstance(plain, (bytes, bytearray, memoryview, str))
        described, identity = identify(body, subject=subject) if text else describe(body)
        identity_key = key(document) if key is not None else described
        whose = issuer if issuer is not None else identity.issuer
        out.append(
            Ready(identity_key, body, encrypted, hashlib.sha256(body).hexdigest(), whose or "")
        )
    return out
