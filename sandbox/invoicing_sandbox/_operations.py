"""The provider's other operations in the sandbox, sans I/O: their state, rules, replies.

The aiohttp application (:mod:`._app`) reads a request into an
:class:`~._bodies.OperationCall` (after its scripted fault, its method and its
credentials are checked) and writes the :class:`~._replies.Reply` decided here.
Cancellations are the provider state's own (:meth:`~._provider.Provider.cancel`); the
rest of a day has a module each, with the provider's pages it follows: credits
(:mod:`._credits`), delayed card payments (:mod:`._payments`), IRIS payments
(:mod:`._iris`), the listing of issued documents and their PDFs (:mod:`._listing`).
This module routes to them and keeps the state of the operations below.

What the provider's documentation we had gives of these operations is their method and
path. Every request and reply shape below is the sandbox's own, kept minimal and
written in the service's usual style (``success``, ``message``, ``statusCode``):

``POST /Invoice/cancelDeliveryNote``, ``POST /Invoice/cancelReceivingNote``
    ``mark`` as a query parameter or in a JSON body. Cancels a held document once (200,
    ``cancellationMark``); again: 409 with the original ``cancellationMark``.
``POST /PosSignatures/{issuerTin}``
    A JSON object, signed for the issuer in the path (who must be the client: else 401).
``POST /PosTransactions/signpos``
    A JSON object with ``issuerTin`` (the client's), signed; the answer's
    ``signedDataInput`` is what the signature covers (the POS's ``posInput``). The same
    data again gives the same signature and signs nothing new (:mod:`._pos`). Its
    ``mark`` names the document a delayed card payment is for (:mod:`._payments`).
``POST /B2GInvoice/ReSeedInvoice``
    The held document again: same identity, changes only in ``BuyerReference``,
    ``ContractReference``, ``ProjectReference``, ``OrderReference`` (a B2G document
    carries a buyer or order reference, the Peppol rule). Answers its record (same
    mark); a repeat of the last re-forward is a 409 with the record.
``GET /B2GInvoice/GetLastStatus?mark=``
    Any held document's ``lastStatus`` (``committed``, ``reseeded``, ``cancelled``),
    ``cancellationMark`` and ``reseeds``.
``POST /Invoice/File``, ``POST /media/upload``
    ``multipart/form-data`` with one file part (and, for ``File``, an optional ``mark``
    of a held document); stored, 201 with an ``id``, ``size`` and ``sha256``.
"""

from __future__ import annotations

import base64
import hashlib
import time
from typing import TYPE_CHECKING, Any

import attrs

from ._credits import ROUTES as CREDIT_ROUTES
from ._credits import Credits
from ._iris import ROUTES as IRIS_ROUTES
from ._iris import Iris
from ._listing import PUBLIC_ROUTES, Listing
from ._listing import ROUTES as LISTING_ROUTES
from ._payments import ROUTES as PAYMENT_ROUTES
from ._payments import Payments
from ._pos import ALGORITHM, PosSignature, PosSigner, canonical
from ._replies import Reply, error_reply
from ._rules import cancellation_mark, parse_document
from ._wire import document_identity, dumps

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ._bodies import OperationCall
    from ._provider import Exchange, Provider

__all__ = [
    "PUBLIC_ROUTES",
    "ROUTES",
    "Operations",
    "ReSeeded",
    "StoredUpload",
]

#: ``(method, path below the environment, name)`` of every operation served here.
ROUTES: tuple[tuple[str, str, str], ...] = (
    ("POST", "/Invoice/cancelDeliveryNote", "cancelDeliveryNote"),
    ("POST", "/Invoice/cancelReceivingNote", "cancelReceivingNote"),
    ("POST", "/PosSignatures/{issuerTin}", "PosSignatures"),
    ("POST", "/PosTransactions/signpos", "signpos"),
    ("POST", "/B2GInvoice/ReSeedInvoice", "ReSeedInvoice"),
    ("GET", "/B2GInvoice/GetLastStatus", "GetLastStatus"),
    ("POST", "/Invoice/File", "File"),
    ("POST", "/media/upload", "upload"),
    *CREDIT_ROUTES,
    *PAYMENT_ROUTES,
    *IRIS_ROUTES,
    *LISTING_ROUTES,
)
_METHODS = {name: method for method, _, name in (*ROUTES, *PUBLIC_ROUTES)}
#: The fields a ReSeed may change.
REFERENCES = ("BuyerReference", "ContractReference", "ProjectReference", "OrderReference")
_MULTIPART = "multipart/form-data"


@attrs.frozen(kw_only=True)
class StoredUpload:
    """A file the sandbox stored (``/Invoice/File``, ``/media/upload``).

    .. versionadded:: 0.3.0
    """

    #: ``upload-1``, ``upload-2`` … in order of arrival.
    id: str
    environment: str
    client_id: str
    #: The path it was sent to, e.g. ``/Invoice/File``.
    path: str
    filename: str
    content_type: str
    data: bytes = attrs.field(repr=False)
    #: The form's text fields.
    fields: dict[str, str] = attrs.field(factory=dict, hash=False)
    #: The mark of the held document it belongs to, when named (``/Invoice/File``).
    mark: int | None = None

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of :attr:`data`."""
        return hashlib.sha256(self.data).hexdigest()

    def summary(self) -> dict[str, Any]:
        """What the inspection endpoints say about it: every field but the content."""
        return {**_shown(self, "data"), "size": len(self.data), "sha256": self.sha256}


@attrs.frozen(kw_only=True)
class ReSeeded:
    """A held B2G document the sandbox forwarded again (``/B2GInvoice/ReSeedInvoice``).

    .. versionadded:: 0.3.0
    """

    identity: str
    environment: str
    client_id: str
    #: The held document's mark: a re-forward gets no new one.
    mark: int | None
    #: The reference fields as forwarded.
    references: dict[str, Any] = attrs.field(hash=False)
    document: dict[str, Any] = attrs.field(eq=False, repr=False)


class Operations:
    """The state and rules of the other operations (see the module docstring)."""

    def __init__(
        self,
        provider: Provider,
        salt: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        page_size: int = 100,
    ) -> None:
        self._provider = provider
        self._signer = PosSigner(salt)
        #: The rest of a day (:mod:`._credits`, :mod:`._payments`, :mod:`._iris`,
        #: :mod:`._listing`): each its own state and rules.
        self.credits = Credits(provider)
        self.payments = Payments(provider, lambda: self.pos_signatures)
        self.iris = Iris(provider, self._signer, salt, clock)
        self.listing = Listing(provider, page_size)
        self._handlers: dict[str, Callable[[Exchange, OperationCall], Reply]] = {
            "credit": self.credits.handle,
            "updatePayment": self.payments.handle,
            "InitiatePayment": self.iris.initiate,
            "GetPaymentStatus": self.iris.status,
            "getdocuments": self.listing.documents,
            "pdf": self.listing.pdf,
            "cancelDeliveryNote": self._cancel_delivery_note,
            "cancelReceivingNote": self._cancel_receiving_note,
            "PosSignatures": self._pos_signatures,
            "signpos": self._signpos,
            "ReSeedInvoice": self._reseed,
            "GetLastStatus": self._last_status,
            "File": self._upload,
            "upload": self._upload,
        }
        self.reset()

    def reset(self) -> None:
        """Forget signatures, re-forwards, uploads, credits, payments (keys stay)."""
        self._signatures: dict[tuple[str, str, str, bytes], PosSignature] = {}
        self._reseeds: list[ReSeeded] = []
        self._uploads: list[StoredUpload] = []
        for part in (self.credits, self.payments, self.iris):
            part.reset()

    # --- what tests read -------------------------------------------------------------------

    @property
    def pos_signatures(self) -> list[PosSignature]:
        """Every POS signature issued, in order."""
        return list(self._signatures.values())

    @property
    def reseeds(self) -> list[ReSeeded]:
        """Every re-forward, in order."""
        return list(self._reseeds)

    @property
    def uploads(self) -> list[StoredUpload]:
        """Every stored file, in order."""
        return list(self._uploads)

    def pos_public_key(self, issuer_tin: str) -> bytes:
        """The issuer's raw Ed25519 public key (see :mod:`._pos`)."""
        return self._signer.public_key(issuer_tin)

    # --- requests ----------------------------------------------------------------------------

    @staticmethod
    def method_of(name: str) -> str:
        """The HTTP method operation ``name`` takes."""
        return _METHODS[name]

    def handle(self, name: str, exchange: Exchange, call: OperationCall) -> Reply:
        """The reply to an authenticated request for operation ``name``."""
        return self._handlers[name](exchange, call)

    def _cancel_delivery_note(self, exchange: Exchange, call: OperationCall) -> Reply:
        return self._provider.cancel(exchange, call.query.get("mark"), call.body)

    def _cancel_receiving_note(self, exchange: Exchange, call: OperationCall) -> Reply:
        mark = call.query.get("mark")
        return self._provider.cancel(exchange, mark, call.body, what="receiving note")

    def _pos_signatures(self, exchange: Exchange, call: OperationCall) -> Reply:
        payload = parse_document(call.body)
        if isinstance(payload, Reply):
            return payload
        return self._sign(exchange, "PosSignatures", call.path_params["issuerTin"], payload)

    def _signpos(self, exchange: Exchange, call: OperationCall) -> Reply:
        payload = parse_document(call.body)
        if isinstance(payload, Reply):
            return payload
        issuer = payload.get("issuerTin")
        if not isinstance(issuer, str) or not issuer:
            message = "a string is required"
            return error_reply(
                400, f"issuerTin: {message}", errors=[{"field": "issuerTin", "message": message}]
            )
        return self._sign(exchange, "signpos", issuer, payload)

    def _sign(
        self, exchange: Exchange, operation: str, issuer: str, payload: dict[str, Any]
    ) -> Reply:
        """Sign for ``issuer`` (the client itself); the same data again signs nothing new."""
        environment, client_id = exchange.environment or "", exchange.client_id or ""
        if issuer != client_id:
            return error_reply(401, "the issuer's TIN does not match the API key")
        key = (environment, client_id, operation, canonical(payload))
        held = self._signatures.get(key)
        if held is None:
            held = PosSignature(
                environment=environment,
                client_id=client_id,
                issuer_tin=issuer,
                operation=operation,
                payload=payload,
                signature=self._signer.sign(issuer, payload),
            )
        else:
            held = attrs.evolve(held, requests=held.requests + 1)
        self._signatures[key] = held
        answer = {
            "success": True,
            "message": "signed",
            "statusCode": "Success",
            "issuerTin": issuer,
            "algorithm": ALGORITHM,
            "signature": held.signature,
            # What the signature covers: the POS's posInput (updatePayment checks it).
            "signedDataInput": canonical(payload).decode("utf-8"),
        }
        return Reply(200, dumps(answer))

    def _reseed(self, exchange: Exchange, call: OperationCall) -> Reply:
        document = parse_document(call.body)
        if isinstance(document, Reply):
            return document
        environment, client_id = exchange.environment or "", exchange.client_id or ""
        identity = document_identity(document)
        found = self._provider.holding(environment, client_id, identity=identity)
        if found is None:
            return error_reply(404, f"no document {identity}")
        held, record = found
        exchange.identity = identity
        refusal = _reseed_refusal(held.document, document, cancelled=held.cancellation_mark)
        if refusal is not None:
            return refusal
        scope = (environment, client_id, identity)
        last = next((r for r in reversed(self._reseeds) if _scope(r) == scope), None)
        if last is not None and last.document == document:
            return Reply(409, record)  # forwarded as it is already
        self._reseeds.append(
            ReSeeded(
                identity=identity,
                environment=environment,
                client_id=client_id,
                mark=held.record.mark,
                references={k: document[k] for k in REFERENCES if k in document},
                document=document,
            )
        )
        return Reply(200, record)

    def _last_status(self, exchange: Exchange, call: OperationCall) -> Reply:
        mark = cancellation_mark(call.query.get("mark"), b"")
        if isinstance(mark, Reply):
            return mark
        environment, client_id = exchange.environment or "", exchange.client_id or ""
        found = self._provider.holding(environment, client_id, mark=mark)
        if found is None:
            return error_reply(404, f"no document with mark {mark}")
        held, _ = found
        exchange.identity = held.identity
        scope = (environment, client_id, held.identity)
        reseeds = sum(1 for r in self._reseeds if _scope(r) == scope)
        if held.cancellation_mark is not None:
            last = "cancelled"
        else:
            last = "reseeded" if reseeds else "committed"
        answer = {
            "success": True,
            "statusCode": "Success",
            "mark": mark,
            "uid": held.record.uid,
            "internalId": held.record.internal_id,
            "lastStatus": last,
            "cancellationMark": held.cancellation_mark,
            "reseeds": reseeds,
        }
        return Reply(200, dumps(answer))

    def _upload(self, exchange: Exchange, call: OperationCall) -> Reply:
        if call.content_type != _MULTIPART:
            return error_reply(415, "Content-Type must be multipart/form-data")
        if len(call.files) != 1 or not call.files[0].data:
            message = "one file part, not empty, is required"
            return error_reply(400, message, errors=[{"field": "file", "message": message}])
        environment, client_id = exchange.environment or "", exchange.client_id or ""
        mark = None
        text = call.query.get("mark", call.fields.get("mark"))
        if text is not None and exchange.path == "/Invoice/File":
            found = cancellation_mark(text, b"")
            if isinstance(found, Reply):
                return found
            if self._provider.holding(environment, client_id, mark=found) is None:
                return error_reply(404, f"no document with mark {found}")
            mark = found
        [part] = call.files
        stored = StoredUpload(
            id=f"upload-{len(self._uploads) + 1}",
            environment=environment,
            client_id=client_id,
            path=exchange.path,
            filename=part.filename,
            content_type=part.content_type,
            data=part.data,
            fields=dict(call.fields),
            mark=mark,
        )
        self._uploads.append(stored)
        answer = {
            "success": True,
            "message": "stored",
            "statusCode": "Success",
            "id": stored.id,
            "fileName": stored.filename,
            "size": len(stored.data),
            "sha256": stored.sha256,
        }
        if mark is not None:
            answer["mark"] = mark
        return Reply(201, dumps(answer))

    # --- /_sandbox/ ------------------------------------------------------------------------

    def inspect(self, route: str) -> Reply | None:
        """The inspection endpoints of these operations (``None``: not one of them).

        ``uploads``, ``uploads/{id}`` (with the content in base64), ``pos-signatures``,
        ``pos-keys/{issuerTin}``, ``reseeds``, ``credits``, ``payment-updates``,
        ``iris-payments``, ``iris-payments/{endToEndDiasId}``.
        """
        if route == "uploads":
            return _json({"uploads": [u.summary() for u in self._uploads]})
        if route.startswith("uploads/"):
            wanted = route[len("uploads/") :]
            for upload in self._uploads:
                if upload.id == wanted:
                    content = base64.b64encode(upload.data).decode("ascii")
                    return _json({**upload.summary(), "content_base64": content})
            return error_reply(404, f"no upload {wanted}"[:300])
        if route == "pos-signatures":
            return _json({"signatures": [attrs.asdict(s) for s in self._signatures.values()]})
        if route.startswith("pos-keys/"):
            tin = route[len("pos-keys/") :]
            public = base64.b64encode(self.pos_public_key(tin)).decode("ascii")
            return _json({"issuerTin": tin, "algorithm": ALGORITHM, "publicKey": public})
        if route == "reseeds":
            return _json({"reseeds": [_shown(r, "document") for r in self._reseeds]})
        for part in (self.credits, self.payments, self.iris):
            answer = part.inspect(route)
            if answer is not None:
                return answer
        return None

    def control(self, route: str) -> Reply | None:
        """``POST /_sandbox/{route}``: settle an IRIS payment (``None``: no such control)."""
        return self.iris.control(route)


def _reseed_refusal(
    held: Mapping[str, Any], document: Mapping[str, Any], *, cancelled: int | None
) -> Reply | None:
    """Why ``document`` may not be forwarded again in place of ``held``, or ``None``."""
    if cancelled is not None:
        return error_reply(400, f"the document is cancelled (cancellation mark {cancelled})")
    if not (held.get("BuyerReference") or held.get("OrderReference")):
        return error_reply(400, "not a B2G document: it has no BuyerReference or OrderReference")
    missing = object()
    changed = sorted(
        name
        for name in set(held) | set(document)
        if name not in REFERENCES and held.get(name, missing) != document.get(name, missing)
    )
    if not changed:
        return None
    message = "only " + ", ".join(REFERENCES) + " may change"
    return error_reply(
        400,
        f"{', '.join(changed)}: {message}",
        errors=[{"field": name, "message": message} for name in changed],
    )


def _scope(reseeded: ReSeeded) -> tuple[str, str, str]:
    return (reseeded.environment, reseeded.client_id, reseeded.identity)


def _shown(record: Any, hidden: str) -> dict[str, Any]:
    """An attrs record as a JSON-able dict, without its ``hidden`` field."""
    return attrs.asdict(record, filter=lambda attribute, _: attribute.name != hidden)


def _json(data: Any) -> Reply:
    return Reply(200, dumps(data))
