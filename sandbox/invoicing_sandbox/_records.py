"""The records the sandbox shows tests: its ground truth and its request log.

Frozen values (except the counters), built by the provider state (:mod:`._provider`)
and read through :class:`~invoicing_sandbox.Sandbox`.
"""

from __future__ import annotations

import collections
from typing import Any

import attrs

from invoicing_async import DocumentResult  # noqa: TC001  (for get_type_hints)

__all__ = [
    "CommittedDocument",
    "IssuerStats",
    "RequestRecord",
    "SandboxEnvironment",
    "SandboxStats",
]


@attrs.frozen
class SandboxEnvironment:
    """One environment of the sandbox (``test``, ``production`` …) and a client of it.

    .. versionadded:: 0.1.0
    """

    name: str
    #: ``http://127.0.0.1:PORT/{name}``: pass it as the client's ``base_url``.
    base_url: str
    #: The issuer's TIN (9 digits with a valid check digit).
    client_id: str
    #: The API key.
    client_secret: str = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class CommittedDocument:
    """A document the sandbox holds: the ground truth tests compare clients against.

    .. versionadded:: 0.1.0
    """

    #: The identity duplicates are detected by (``id:…``, ``doc:…`` or ``sha256:…``).
    identity: str
    environment: str
    client_id: str
    #: The result record answered with 201 (and sent unchanged with every 409), as the
    #: client library reads it.
    record: DocumentResult
    #: The same record exactly as the sandbox wrote it (the provider's JSON).
    record_body: bytes = attrs.field(repr=False)
    #: The document as parsed JSON.
    document: dict[str, Any] = attrs.field(eq=False, hash=False, repr=False)
    #: The document's bytes exactly as received (after decryption).
    body: bytes = attrs.field(repr=False)
    #: Whether it arrived encrypted (``/Invoice/secure``).
    encrypted: bool
    #: Times it was committed: 1 with duplicate detection (a re-send is answered 409), the
    #: invariant a test of exactly-once checks; more when ``Sandbox(duplicate_detection=False)``
    #: committed a re-sent document again (this record is then the latest commit).
    commits: int = 1
    #: Set once the document was cancelled (``/Invoice/cancelDeliveryNote``).
    cancellation_mark: int | None = None


@attrs.frozen(kw_only=True)
class RequestRecord:
    """One request the sandbox received, in :attr:`Sandbox.requests`.

    .. versionadded:: 0.1.0
    """

    #: Arrival order, from 1.
    seq: int
    #: The environment named by the path, or ``None`` for an unknown one.
    environment: str | None
    method: str
    #: The path below the environment, e.g. ``/Invoice/secure``.
    path: str
    #: The status line sent, or ``None`` when the connection was dropped without one.
    status: int | None
    #: The injected fault's name (``status:503``, ``commit_then_drop`` …), or ``None``.
    fault: str | None = None
    #: The document's identity, when the request carried a readable document.
    identity: str | None = None
    #: The authenticated client, when known.
    client_id: str | None = None
    #: The issuer the request came from, authenticated or not: the client its bearer token
    #: was issued to (the token valid or not), or the ``client_id`` a token request named
    #: (when the environment has that client). ``None`` when neither is known.
    #:
    #: .. versionadded:: 0.4.0
    issuer: str | None = None
    #: For documents: this request's attempt number for that identity (from 1).
    attempt: int | None = None
    #: Query parameters as received (``sendMethod``, ``timeStamp`` …).
    query: dict[str, str] = attrs.field(factory=dict, eq=False, hash=False)


@attrs.define
class IssuerStats:
    """One issuer's counters since the sandbox started (or was last reset).

    Read them with :meth:`Sandbox.issuer_stats() <invoicing_sandbox.Sandbox.issuer_stats>`
    or :attr:`SandboxStats.by_issuer`. A request counts for the issuer it came from
    (:attr:`RequestRecord.issuer`), whatever it was answered.

    .. versionadded:: 0.4.0
    """

    #: Every request of the issuer: token, document and operation requests.
    requests: int = 0
    #: Requests to ``/oauth/token`` naming it (both grants, refused ones too).
    token_requests: int = 0
    #: Of those, the ones answered with a token.
    tokens_issued: int = 0
    #: Requests to the other operations (cancellations, POS signatures, uploads …).
    operations: int = 0
    #: Documents committed (each re-commit too, without duplicate detection).
    commits: int = 0
    #: Requests answered 429 because the issuer is throttled
    #: (:meth:`Sandbox.throttle_issuer() <invoicing_sandbox.Sandbox.throttle_issuer>`).
    throttled: int = 0
    #: Document requests by outcome, as :attr:`SandboxStats.submissions`.
    submissions: collections.Counter[int | str] = attrs.field(factory=collections.Counter)

    @property
    def documents(self) -> int:
        """Document requests, whatever their outcome."""
        return sum(self.submissions.values())


@attrs.define
class SandboxStats:
    """Counters since the sandbox started (or was last reset).

    .. versionadded:: 0.1.0
    .. versionchanged:: 0.4.0 :attr:`by_issuer`.
    """

    #: Requests to ``/oauth/token`` (both grants).
    token_requests: int = 0
    #: Of those, ``grant_type=refresh_token``.
    refresh_requests: int = 0
    #: Document submissions by outcome: the status line sent (201, 409, 400 …), or
    #: ``"reset"`` (connection reset before processing) / ``"drop"`` (closed without a
    #: status line after processing, or a hung request given up).
    submissions: collections.Counter[int | str] = attrs.field(factory=collections.Counter)
    #: Each issuer's counters, by ``(environment, tin)``: only of the issuers that sent
    #: a request (10,000 registered issuers cost nothing here until they do).
    by_issuer: dict[tuple[str, str], IssuerStats] = attrs.field(factory=dict)

    def issuer(self, environment: str, tin: str) -> IssuerStats:
        """``tin``'s counters in ``environment``, made on first use."""
        stats = self.by_issuer.get((environment, tin))
        if stats is None:
            stats = self.by_issuer[environment, tin] = IssuerStats()
        return stats
