"""What is stored of a deferred sale that certainly never left: stamped, whatever the hook does.

A document issued while the business could not reach its provider is stamped so, as the
provider's regime defines: ``TransmissionFailure: 1`` (2 and 3 are the provider's and an
ERP's losses of connection). A sale deferred before any request of it could have
reached the provider is such a document, and the identity rule lets it change
(``docs/guides/pos-backend.rst``). :func:`stamp_sale` makes what is stored and sent:

1. the application's ``stamp`` hook, if any, is given the sale as the till gave it (a
   mapping, a typed document, JSON bytes or text; a checked one unwrapped) and returns
   the document to store, of any of these kinds, with the same identity;
2. ``TransmissionFailure: 1`` is written into the JSON object of what it returned (a
   mapping, or a typed document's JSON: the typed document itself is never rebuilt, so
   its computed amounts, its checks and its identity stay its own), unless that object
   carries the member already (in any spelling: the provider reads names in any case);
   bytes and text are the caller's exact bytes, and stay so.

A hook that raises, or returns what cannot stand for the sale (no document, a coroutine,
another identity, a document the provider would refuse, one that cannot be sent), never
costs the sale: the sale as given is stored (``TransmissionFailure: 1`` written), and
the hook's failure is
logged (an ERROR on ``invoicing_async.deferral``) and kept with the deferral
(``DeferredReceipt.stamp_error``). Refusing the sale instead would stop a till selling
for as long as both the outage and the hook's bug last (a hook that fails fails for
every deferred sale), which is what a deferral exists to prevent; the sale as given was
checked and stamped as the regime requires, so the provider takes it, and only the
hook's additions are missing, which the receipt and the log say.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from invoicing_async._core.errors import InvalidDocumentError, InvoicingError
from invoicing_async._core.log import deferral as log
from invoicing_async._doc.checked import Checked, problems_of
from invoicing_async._doc.checks import errors_of
from invoicing_async._doc.document import identify, serialize_document
from invoicing_async._doc.typedjson import document_to_json
from invoicing_async._doc.types import DocumentBase

if TYPE_CHECKING:
    from collections.abc import Callable

    from invoicing_async._doc.document import Identity

__all__ = ["TRANSMISSION_FAILURE", "Stamp", "stamp_sale"]

#: The provider's member that says a document was issued during a loss of connection
#: (its value 1: the business's connection to the provider).
TRANSMISSION_FAILURE = "TransmissionFailure"
_FOLDED = TRANSMISSION_FAILURE.lower()
_DOCUMENTS = (Mapping, DocumentBase, bytes, bytearray, memoryview, str)


class Stamp(NamedTuple):
    """What is stored of a sale that never left."""

    #: The serialised document to store and send.
    body: bytes
    #: It differs from the sale as given: ``TransmissionFailure`` written, or the hook's
    #: document stored.
    stamped: bool
    #: Why the hook's document is not the one stored, in words (``None``: it is, or
    #: there is no hook).
    error: str | None


class _Unusable(Exception):  # noqa: N818  (never raised out of this module)
    """The hook returned what cannot stand for the sale (the reason in words)."""


def stamp_sale(
    document: Any,
    key: str,
    identity: Identity,
    *,
    plain: bytes,
    hook: Callable[[Any], Any] | None,
    transmission_failure: bool,
    max_size: int | None,
) -> Stamp:
    """The stamped sale ``document`` (identity ``key``, serialised as ``plain``).

    Never raises for what the hook does: see the module's docstring.
    """
    error = None
    if hook is not None:
        try:
            body = _through(
                hook, document, key, identity,
                transmission_failure=transmission_failure, max_size=max_size,
            )  # fmt: skip
            return Stamp(body, stamped=True, error=None)
        except _Unusable as exc:
            error = f"the stamp hook returned {exc}"
            log.error("invoice %s: %s; deferred without the hook's changes", key, error)
        except Exception as exc:  # noqa: BLE001  (the application's hook: logged, kept)
            error = f"the stamp hook raised {type(exc).__name__}: {str(exc)[:200]}"
            log.error(
                "invoice %s: %s; deferred without the hook's changes", key, error, exc_info=exc
            )
    if transmission_failure:
        try:
            stamped = _stamped(document)
            if stamped is not None:
                return Stamp(serialize_document(stamped, max_size), stamped=True, error=error)
        except Exception as exc:  # noqa: BLE001  (a caller's mapping may raise anything)
            log.warning("invoice %s: deferred without %s: %s", key, TRANSMISSION_FAILURE, exc)
    return Stamp(plain, stamped=False, error=error)


def _through(
    hook: Callable[[Any], Any],
    document: Any,
    key: str,
    identity: Identity,
    *,
    transmission_failure: bool,
    max_size: int | None,
) -> bytes:
    """The serialised document ``hook`` returns for ``document``, stamped.

    :raises _Unusable: it is not a document of the same identity the provider would take.
    """
    result = hook(document)
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()  # never awaited: no warning
        raise _Unusable("a coroutine: the hook must be a plain function returning the document")
    if isinstance(result, Checked):
        result = result.document
    if not isinstance(result, _DOCUMENTS):
        raise _Unusable(
            f"{type(result).__name__}, not a document (a mapping, a typed document, or its JSON)"
        )
    try:
        same = identify(result) == (key, identity)
    except InvoicingError as exc:  # JSON text holding a member twice with two values
        raise _Unusable(f"a document the library refuses: {exc}") from None
    if not same:
        raise _Unusable(
            "a document of another identity: it may change a document, never its issuer, "
            "series, number or internal document id"
        )
    errors = errors_of(problems_of(result))
    if errors:
        refusal = InvalidDocumentError(errors, subject="it")
        raise _Unusable(f"a document that fails the provider's rules ({refusal})")
    stamped = _stamped(result) if transmission_failure else None
    try:
        return serialize_document(result if stamped is None else stamped, max_size)
    except InvoicingError as exc:
        raise _Unusable(f"a document that cannot be sent: {exc}") from None


def _stamped(document: Any) -> dict[str, Any] | None:
    """The JSON object of ``document`` with ``TransmissionFailure: 1``; ``None``: as it is.

    ``None`` for bytes and text, and for an object that carries the member already (in
    any spelling, not ``null``: its own value is kept); a ``null`` member is replaced, so
    that the object never holds the name twice.
    """
    if isinstance(document, DocumentBase):
        data: Mapping[Any, Any] = document_to_json(document)
    elif isinstance(document, Mapping):
        data = document
    else:
        return None
    stamped: dict[str, Any] = {}
    for name, value in data.items():
        if type(name) is str and len(name) == len(_FOLDED) and name.lower() == _FOLDED:
            if value is not None:
                return None
            continue
        stamped[name] = value
    stamped[TRANSMISSION_FAILURE] = 1
    return stamped
