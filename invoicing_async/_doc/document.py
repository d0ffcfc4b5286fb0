"""A document's bytes and its identity.

The library imposes no schema: a document is any JSON-serialisable mapping, a typed
document (:mod:`invoicing_async.documents`, turned into its JSON by the :class:`Kind`
its module registers), or the exact bytes to send; a document marked
:class:`~._checked.Checked` is checked here too, where it is serialised. Two questions
are asked of it, and answered here only:

* :func:`serialize_document`: which bytes go on the wire (compact UTF-8 JSON, or the
  caller's own bytes unchanged);
* :func:`document_key`: which identity the provider detects duplicates by, so that a
  re-sent document is recognised and a resumed batch skips what it already settled
  (:func:`identify`, where a document enters to be sent: the same, and an ambiguous
  document refused, :mod:`._binding`);
* :func:`foreign_fields`: whether a result record belongs to the document sent (its
  series, number and internal document id, when both sides have them).

A document travels through the package as one value at each stage: what the caller gave
(a document, or a :class:`Submission` with its own send options), then a
:class:`Prepared` document (body, identity and content digest, computed once), then its
:class:`~invoicing_async.Outcome`.

Documents come from callers and may be anything: every failure to read one becomes that
document's :class:`~invoicing_async.ValidationError` (or, for identity, a content hash),
never an exception that would stop a batch.

:func:`dumps` is the one compact JSON encoder of the package (documents, request bodies,
the sandbox's replies).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs

from invoicing_async._core.errors import (
    AmbiguousDocumentError,
    DocumentTooLargeError,
    InvoicingError,
    ValidationError,
)

from .binding import suspect, twins, twins_of_text
from .fields import folded, tin, too_long_in

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Callable
    from typing import TypeAlias

    from invoicing_async._core.models import DocumentResult

    from .types import DocumentBase

__all__ = [
    "DEFAULT_MAX_DOCUMENT_SIZE",
    "Checked",
    "Document",
    "Identity",
    "Kind",
    "Prepared",
    "SendOptions",
    "Submission",
    "check_size",
    "describe",
    "document_key",
    "dumps",
    "foreign_fields",
    "identify",
    "keyed",
    "kind_of",
    "register_kind",
    "send_options",
    "serialize_document",
    "size_limit",
    "utf8_size",
]

#: What the library accepts as a document: a mapping, a typed document, or its JSON (bytes
#: are sent as they are); any of them marked to be checked first.
Document: TypeAlias = (
    "Mapping[str, Any] | DocumentBase | Checked | bytes | bytearray | memoryview | str"
)


@attrs.frozen(slots=True)
class Checked:
    """A document checked before it is sent (see :func:`invoicing_async.documents.checked`).

    Its identity is the document's; serialising it raises
    :class:`~invoicing_async.InvalidDocumentError` when the provider would refuse it.
    """

    document: Any = attrs.field(repr=False)


@attrs.frozen(slots=True)
class Kind:
    """What is written and identified of a kind of document that is no mapping.

    The modules that make such documents register theirs when they are loaded
    (:func:`register_kind`: the typed documents' :mod:`.typedjson`, :mod:`.checked`):
    this module imports none of them, and a client that sends dicts never loads them.
    """

    #: ``plain(document, subject)``: what is serialised (a mapping, bytes, or another
    #: document of a registered kind). :raises InvoicingError: it is no document to send.
    plain: Callable[[Any, str], Any]
    #: ``describe(document)``: its key and identity (:func:`describe`).
    describe: Callable[[Any], tuple[str, Identity]]


#: The registered kinds, by class (a subclass found by its bases, then kept).
_KINDS: dict[type, Kind] = {}


def register_kind(cls: type, kind: Kind) -> None:
    """Make documents of ``cls`` (and its subclasses) documents of ``kind``."""
    _KINDS[cls] = kind


def kind_of(document: Any) -> Kind | None:
    """The registered kind of ``document``, ``None`` if it is of none."""
    cls = document.__class__
    kind = _KINDS.get(cls)
    if kind is None:
        kind = next((_KINDS[base] for base in cls.__mro__ if base in _KINDS), None)
        if kind is not None:
            _KINDS[cls] = kind
    return kind


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON, non-ASCII kept as is; ``NaN`` and infinities refused.

    :raises ValueError: for ``NaN``/infinities (not JSON); :raises TypeError: for values
        JSON cannot represent.
    """
    return _ENCODER.encode(value).encode("utf-8")


# One encoder for every call: json.dumps with arguments builds a new one each time.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def serialize_document(
    document: Document, max_size: int | None = None, *, subject: str = "the document"
) -> bytes:
    """The exact bytes to send for ``document``.

    A mapping becomes compact UTF-8 JSON (non-ASCII kept as is); bytes are sent unchanged,
    so a caller that already serialised (or signed) the document controls every byte.
    Anything else, a mapping that is not JSON-serialisable or whose keys collide in JSON
    (``{1: …, "1": …}``), or one that fails while being read, raises
    :class:`~invoicing_async.ValidationError` with ``status=None``: nothing was sent. A
    mapping (a typed document's JSON too) that holds a member twice with different
    values (``Series`` and ``series``, in any of its objects) raises
    :class:`~invoicing_async.AmbiguousDocumentError` (JSON text is looked at where it is
    identified: :func:`identify`).

    A document larger than ``max_size`` bytes (``None``: no limit) raises
    :class:`~invoicing_async.DocumentTooLargeError`: bytes given are measured as they
    are, before they are copied; a mapping's JSON text is measured before it is encoded
    (it has at least as many bytes as characters), so an oversized one is never held
    twice.

    :param subject: what an error calls the document (``document 3``).
    """
    if isinstance(document, (bytes, bytearray, memoryview)):
        size = document.nbytes if isinstance(document, memoryview) else len(document)
        check_size(size, max_size, subject=subject)
        return bytes(document)
    if not isinstance(document, (str, Mapping)):
        return serialize_document(_plain(document, subject), max_size, subject=subject)
    try:
        text = document if isinstance(document, str) else _ENCODER.encode(document)
        if max_size is not None and len(text) > max_size:
            # Refused before a second copy exists; and the text is gone before the
            # error is raised: its traceback's frame would keep it as long as the outcome.
            size = utf8_size(text)
            del text
            check_size(size, max_size, subject=subject)
        body = text.encode("utf-8")
        del text
        if not isinstance(document, str):
            _refuse_doubles(document, subject)
    except RecursionError:
        raise ValidationError(f"{subject} is nested too deeply to serialise") from None
    except (TypeError, ValueError) as exc:
        why = _too_long(document) if isinstance(exc, ValueError) else None
        raise ValidationError(f"{subject} cannot be serialised to JSON: {why or exc}") from None
    except InvoicingError:
        raise
    except Exception as exc:  # noqa: BLE001  (a caller's mapping may raise anything)
        raise ValidationError(
            f"{subject} cannot be read: {type(exc).__name__}: {str(exc)[:200]}"
        ) from None
    size = len(body)
    if max_size is not None and size > max_size:
        del body
        check_size(size, max_size, subject=subject)
    return body


def _too_long(document: Any) -> str | None:
    """Which field of ``document`` is an int of more digits than Python writes, if one is."""
    found = too_long_in(document)
    if found is None:
        return None
    field, digits = found
    return f"{field or 'it'} is an integer of {digits:,} digits, more than Python writes"


def _refuse_doubles(document: Mapping[str, Any], subject: str) -> None:
    """Refuse a mapping with keys that collide in JSON, or a member written twice.

    One pass over it tells whether a name is not text (only such a key can collide with
    another in JSON: ``1`` and ``"1"``) and whether two may be one member to the
    provider (:func:`~._binding.suspect`); the exact walks run only then.

    :raises ValidationError: keys that become one JSON key.
    :raises AmbiguousDocumentError: a member written twice, with different values.
    """
    if not suspect(document):
        return
    collision = _key_collision(document)
    if collision is not None:
        raise ValidationError(
            f"{subject} has keys that become the same JSON key {collision!r}: "
            "a JSON object must not repeat a key"
        )
    doubled = twins(document)
    if doubled:
        raise AmbiguousDocumentError.of(doubled, subject=subject)


def _plain(document: Any, subject: str) -> Any:
    """A typed or checked document as what is serialised: its JSON object (or bytes).

    :raises InvalidDocumentError: a checked document the provider would refuse.
    :raises ValidationError: anything else that is not a document.
    """
    kind = kind_of(document)
    if kind is not None:
        return kind.plain(document, subject)
    raise ValidationError(
        f"a document must be a mapping, a typed document or bytes, not {type(document).__name__}"
    )


#: The largest document the client sends unless told otherwise (``max_document_size``),
#: in bytes of its serialised JSON: 10 MiB. The provider documents no limit; an invoice
#: is a few kilobytes, one with thousands of lines a megabyte or two, and 10 MiB stays
#: within what web servers in front of such APIs commonly take once encrypted and
#: armored (about 1.36 times as large: 14 MiB).
DEFAULT_MAX_DOCUMENT_SIZE = 10 * 1024 * 1024


def check_size(size: int, limit: int | None, *, subject: str = "the document") -> None:
    """Refuse a document of ``size`` bytes if it exceeds ``limit`` (``None``: no limit).

    :raises DocumentTooLargeError: with the size and the limit in its message.
    """
    if limit is not None and size > limit:
        raise DocumentTooLargeError(
            f"{subject} is {size:,} bytes, more than the limit of {limit:,} bytes: "
            "split it, or raise max_document_size if the provider takes more",
            size=size,
            limit=limit,
        )


def size_limit(limit: int) -> int:
    """``limit`` if it is a positive number of bytes, else ``ValueError``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"max_document_size must be a positive number of bytes, not {limit!r}")
    return limit


def utf8_size(text: str) -> int:
    """The bytes ``text`` encodes to in UTF-8, without holding its encoding whole.

    :raises UnicodeEncodeError: a lone surrogate (not encodable).
    """
    if text.isascii():  # O(1) in CPython: a flag of the string
        return len(text)
    step = 1 << 20
    return sum(len(text[i : i + step].encode("utf-8")) for i in range(0, len(text), step))


_CONTAINERS = (dict, list, tuple)


def _key_collision(document: Mapping[str, Any]) -> str | None:
    """A JSON key two of a mapping's keys turn into, or ``None``.

    ``json`` writes the keys ``1`` and ``"1"`` both as ``"1"``; only a mapping with a
    key that is not a string can collide, and the walk finds those with the key types
    collected in C, pushing containers only.
    """
    stack: list[Any] = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if set(map(type, value)) - {str}:
                seen: set[str] = set()
                for key in value:
                    text = key if isinstance(key, str) else json.dumps(key).strip('"')
                    if text in seen:
                        return text
                    seen.add(text)
            stack.extend([item for item in value.values() if isinstance(item, _CONTAINERS)])
        else:
            stack.extend([item for item in value if isinstance(item, _CONTAINERS)])
    return None


class Identity(NamedTuple):
    """The fields of a document a result record must agree with (``None``: absent).

    And the issuer whose credentials send it (``Issuer.Vat``). A named tuple: one is made
    for every document of a batch.
    """

    series: str | None = None
    number: str | None = None
    internal_id: str | None = None
    #: ``Issuer.Vat``: whose document it is (an :class:`~invoicing_async.IssuerPool`
    #: routes it to that issuer's credentials).
    issuer: str | None = None


def document_key(document: Document) -> str:
    """The identity the provider detects duplicates by.

    ``DistributionDetails.InternalDocumentId`` when present (``id:…``), else issuer VAT,
    series and number (``doc:…``), else a SHA-256 of the serialised document
    (``sha256:…``). Never raises: a document that cannot be read has a content hash.

    The fields are read as the provider reads them: names in any case
    (``distributionDetails.internalDocumentId`` too), and the issuer's VAT number
    without its country prefix (``EL123456783`` is the TIN ``123456783``).

    .. versionchanged:: 0.5.0 field names in any case; the ``EL`` prefix dropped.
    """
    return describe(document)[0]


def identify(document: Any, *, subject: str = "the document") -> tuple[str, Identity]:
    """:func:`describe` a document that enters to be sent, refusing ambiguous JSON text.

    The object a JSON text holds with a member written twice with different values (two
    spellings, or one name twice in the text: :mod:`._binding`) is read otherwise by the
    provider than here: refused, before anything is sent. The text is read once, as
    :func:`describe` reads it. A mapping (or a typed document) is refused where it is
    serialised (:func:`serialize_document`: the one pass over it).

    :param subject: what the error calls the document (``document 3``).
    :raises AmbiguousDocumentError: naming both members of each twin.
    """
    if not isinstance(document, (bytes, bytearray, memoryview, str)):
        return describe(document)
    try:
        data, found = twins_of_text(
            bytes(document) if isinstance(document, memoryview) else document
        )
    except (ValueError, RecursionError):  # no JSON: identified by its bytes
        return describe(document)
    if found:
        raise AmbiguousDocumentError.of(found, subject=subject)
    return describe(data)


def describe(document: Any) -> tuple[str, Identity]:
    """The document's key (as :func:`document_key`) and its identity fields, in one read."""
    try:
        return _describe(document)
    except Exception:  # noqa: BLE001  (a caller's mapping may raise anything)
        return "sha256:" + hashlib.sha256(repr(type(document)).encode()).hexdigest(), _NO_IDENTITY


def _describe(document: Any) -> tuple[str, Identity]:  # noqa: C901  (one hot path, inlined)
    data: Any = document
    if isinstance(document, (bytes, bytearray, memoryview, str)):
        raw = (
            document.encode("utf-8", "surrogatepass")
            if isinstance(document, str)
            else bytes(document)
        )
        try:
            data = json.loads(raw)
        except ValueError:
            return "sha256:" + hashlib.sha256(raw).hexdigest(), _NO_IDENTITY
    if not isinstance(data, Mapping):
        return _described_other(data)
    # Read as the provider reads (_fields): names in any case, the VAT number's prefix
    # dropped. Each exact name is tried inline first and searched for only when missing:
    # a PascalCase document (read for every document of every batch) costs what it did.
    distribution = data.get("DistributionDetails")
    if distribution is None:
        distribution = folded(data, "DistributionDetails")
    internal = None
    if type(distribution) is dict or isinstance(distribution, Mapping):
        internal = distribution.get("InternalDocumentId")
        if internal is None:
            internal = folded(distribution, "InternalDocumentId")
    series, number, issuer = data.get("Series"), data.get("Number"), data.get("Issuer")
    if series is None or number is None or issuer is None:
        series = folded(data, "Series") if series is None else series
        number = folded(data, "Number") if number is None else number
        issuer = folded(data, "Issuer") if issuer is None else issuer
    vat = None
    if type(issuer) is dict or isinstance(issuer, Mapping):
        vat = issuer.get("Vat")
        if vat is None:
            vat = folded(issuer, "Vat")
        if not (vat.__class__ is str and vat.isdigit()):
            vat = tin(vat)
    return keyed(series, number, internal, vat, data)


def _described_other(data: Any) -> tuple[str, Identity]:
    """A document that is not a mapping: checked, typed, or no object at all."""
    kind = kind_of(data)
    if kind is not None:
        return kind.describe(data)
    return _content_key(data), _NO_IDENTITY


def keyed(
    series: Any, number: Any, internal: Any, vat: str | None, data: Any
) -> tuple[str, Identity]:
    """The key and identity of a document whose fields these are (``data``: the document)."""
    identity = Identity(
        None if series is None else str(series),
        None if number is None else str(number),
        str(internal) if internal else None,
        vat,
    )
    if internal:
        return f"id:{internal}", identity
    if vat and series is not None and number is not None:
        return f"doc:{vat}/{series}/{number}", identity
    return _content_key(data), identity


def _content_key(data: Any) -> str:
    kind = None if isinstance(data, Mapping) else kind_of(data)
    if kind is not None:  # a typed document: its JSON's
        with contextlib.suppress(InvoicingError, TypeError, ValueError):
            data = kind.plain(data, "the document")
    try:
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        canonical = repr(data)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


_NO_IDENTITY = Identity()


def foreign_fields(identity: Identity, record: DocumentResult) -> tuple[str, ...]:
    """The identity fields on which ``record`` and the document sent disagree.

    A field counts only when both sides have it: a record without a series says nothing
    about the series.
    """
    pairs = (
        ("series", identity.series, record.series),
        ("number", identity.number, record.number),
        ("internal_id", identity.internal_id, record.internal_id),
    )
    return tuple(
        name for name, sent, got in pairs if sent is not None and got is not None and sent != got
    )


@attrs.frozen(slots=True)
class SendOptions:
    """Where and how a document is sent: the endpoint and the query parameters."""

    #: ``/Invoice/secure`` (encrypted to the provider's key) or ``/Invoice/json``.
    encrypted: bool = True
    #: The ``sendMethod`` query parameter, passed through unchanged.
    send_method: str | None = None
    #: The ``timeStamp`` query parameter (an aware datetime is sent as ISO 8601 UTC).
    time_stamp: dt.datetime | str | None = None


@attrs.frozen(kw_only=True)
class Submission:
    """One document of a batch with its own send options (and, optionally, identity).

    A batch takes plain documents, sent as the batch's options say, and submissions
    mixed in, each sent as it says: a field left ``None`` takes the batch's value::

        await client.submit_many([invoice, Submission(document=note, encrypted=False)])

    .. versionadded:: 0.3.0
    """

    #: A JSON-serialisable mapping, a typed document, or the exact bytes to send.
    document: Document = attrs.field(repr=False)
    #: The document's identity, if the caller knows it (else the batch's ``key=``).
    key: str | None = None
    #: The issuer whose credentials send it, when the document does not name it in
    #: ``Issuer.Vat`` (or to override it): an :class:`~invoicing_async.IssuerPool`'s batch.
    #:
    #: .. versionadded:: 0.4.0
    issuer: str | None = None
    encrypted: bool | None = None
    send_method: str | None = None
    time_stamp: dt.datetime | str | None = None


def send_options(submission: Submission, default: SendOptions) -> SendOptions:
    """A submission's send options, completed by the batch's ``default``."""
    given = (submission.encrypted, submission.send_method, submission.time_stamp)
    if given == (None, None, None):
        return default
    return SendOptions(
        encrypted=default.encrypted if submission.encrypted is None else submission.encrypted,
        send_method=(
            default.send_method if submission.send_method is None else submission.send_method
        ),
        time_stamp=default.time_stamp if submission.time_stamp is None else submission.time_stamp,
    )


class Prepared:
    """A document ready to send: its body, identity, send options and content digest.

    Made once per document (the body off the event loop when it is encrypted) and then
    only read: every attempt sends the same body, the record is checked against the
    identity, and a ledger keys a definite refusal to the digest.
    """

    __slots__ = ("_digest", "_plain", "body", "identity", "key", "options")

    def __init__(
        self,
        key: str,
        identity: Identity,
        body: bytes,
        options: SendOptions,
        *,
        plain: bytes | None = None,
    ) -> None:
        self.key = key
        self.identity = identity
        #: The exact bytes sent (the serialised document, or its OpenPGP message).
        self.body = body
        self.options = options
        self._plain = body if plain is None else plain
        self._digest: str | None = None

    def __repr__(self) -> str:
        return f"<Prepared {self.key} {len(self.body)} bytes>"

    @property
    def digest(self) -> str:
        """SHA-256 (hex) of the serialised document: what a definite refusal refused.

        Computed on first use (only a refusal or a ledger's replay asks for it).
        """
        if self._digest is None:
            self._digest = hashlib.sha256(self._plain).hexdigest()
        return self._digest
