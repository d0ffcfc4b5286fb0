"""The provider's state, sans I/O: environments, tokens, commits, cancellations, the log.

Everything the sandbox *decides* happens here, in plain synchronous methods that take
request fields and return a :class:`~._replies.Reply`; the aiohttp application only
reads requests, decrypts, applies faults and writes replies. So the rules a client is
tested against (token rotation, duplicate detection, at-most-once cancellation) can be
unit-tested without a socket or an event loop.

There is no ``await`` in this module. Driven from one event loop, a look-up and the
commit that follows it are therefore one step: duplicate detection is exact without a
lock.
"""

from __future__ import annotations

import base64
import collections
import itertools
import re
import secrets
import types
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ._issuers import Credentials, IssuerState, check_issuers
from ._records import CommittedDocument, RequestRecord, SandboxStats
from ._replies import Reply, error_reply
from ._rules import (
    build_record,
    cancellation_mark,
    check_document,
    issuer_vat,
    parse_document,
    random_tin,
)
from ._tokens import Tokens
from ._wire import document_identity, dumps

if TYPE_CHECKING:
    import datetime as dt
    import random
    from collections.abc import Callable, Iterable, Mapping

    from ._issuers import IssuerKey

__all__ = ["Environment", "Exchange", "Provider", "Route", "Submission"]

_ENV_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_FIRST_MARK = 400001000000001
#: The domain of records made before the sandbox listens (never the case when served).
_NOWHERE = "https://sandbox.invoicing.invalid"

#: What a request asked for, as far as the log and the counters care.
Route = Literal["token", "document", "cancel", "operation", "other"]


@attrs.define
class Environment:
    """One environment (``test``, ``production`` …): its clients and their API keys."""

    name: str
    clients: dict[str, str]  # client_id -> API key
    default_client: str


@attrs.define
class Exchange:
    """What the log records about one request, filled in while it is handled."""

    seq: int
    environment: str | None
    route: Route
    method: str
    path: str
    query: dict[str, str]
    status: int | None = None
    fault: str | None = None
    identity: str | None = None
    client_id: str | None = None
    attempt: int | None = None
    #: What the counters record if no status line is sent: ``drop`` or ``reset``.
    dropped: str = "drop"
    #: Who the request comes from, authenticated or not (see ``RequestRecord.issuer``).
    issuer: str | None = None

    @property
    def issuer_key(self) -> IssuerKey | None:
        """``(environment, issuer)`` when both are known: what per-issuer state is keyed by."""
        issuer = self.issuer or self.client_id
        if self.environment is None or issuer is None:
            return None
        return self.environment, issuer

    def log_line(self, seconds: float) -> str:
        """One line for the request log: what arrived, what was answered, how long it took.

        Never a credential: the path, the document's identity, the client id (a TIN).
        """
        where = f"/{self.environment}{self.path}" if self.environment else self.path
        answer = str(self.status) if self.status is not None else self.dropped
        parts = [f"{self.method} {where} -> {answer}"]
        if self.identity is not None:
            parts.append(f"document {self.identity} attempt {self.attempt}")
        if self.client_id is not None:
            parts.append(f"client {self.client_id}")
        if self.fault is not None:
            parts.append(f"fault {self.fault}")
        return ", ".join(parts) + f" ({seconds * 1000:.1f} ms)"

    def record(self) -> RequestRecord:
        """The frozen log entry."""
        return RequestRecord(
            seq=self.seq,
            environment=self.environment,
            method=self.method,
            path=self.path,
            status=self.status,
            fault=self.fault,
            identity=self.identity,
            client_id=self.client_id,
            issuer=self.issuer or self.client_id,
            attempt=self.attempt,
            query=self.query,
        )


@attrs.frozen
class Submission:
    """A document that passed every check and waits for its commit."""

    #: ``(environment, client_id, identity)``: what duplicates are detected by.
    key: tuple[str, str, str]
    document: dict[str, Any]
    body: bytes
    encrypted: bool


def _seeded_secret(rng: random.Random) -> str:
    """An API key shaped like ``secrets.token_urlsafe(32)``, reproducible from the seed."""
    return base64.urlsafe_b64encode(rng.randbytes(32)).rstrip(b"=").decode("ascii")


class Provider:
    """The embedded provider's state and rules (see the module docstring).

    :param environments: environment names; the first is the default.
    :param rng: draws the clients' TINs (and API keys when ``seeded``).
    :param salt: derives the random-looking values of result records.
    :param duplicate_detection: with ``False`` a re-sent document is committed again.
    :param default_client_id: the first environment's client (TIN); random when ``None``.
    :param require_fields: refuse (400) documents missing a field the provider requires;
        with ``False`` fields are checked only when present.
    """

    def __init__(
        self,
        *,
        environments: Iterable[str],
        rng: random.Random,
        seeded: bool,
        salt: str,
        clock: Callable[[], float],
        expires_in: float,
        refresh_expires_in: float,
        domain: str | None,
        duplicate_detection: bool = True,
        default_client_id: str | None = None,
        token_propagation_delay: float = 0.0,
        revoke_tokens_on_issue: bool = False,
        require_fields: bool = True,
    ) -> None:
        names = list(environments)
        if not names or len(set(names)) != len(names):
            raise ValueError("environments must be distinct names, at least one")
        for name in names:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"environment name {name!r} is not a simple path segment")
        self.tokens = Tokens(
            clock=clock,
            expires_in=expires_in,
            refresh_expires_in=refresh_expires_in,
            propagation_delay=token_propagation_delay,
            revoke_on_issue=revoke_tokens_on_issue,
        )
        self.environments: dict[str, Environment] = {}
        used: set[str] = set()
        for name in names:
            tin = default_client_id if name == names[0] and default_client_id else random_tin(rng)
            while tin in used:
                tin = random_tin(rng)
            used.add(tin)
            secret = _seeded_secret(rng) if seeded else secrets.token_urlsafe(32)
            self.environments[name] = Environment(name, {tin: secret}, tin)
        self.default = names[0]
        self.salt = salt
        self._clock = clock
        self._domain = domain.rstrip("/") if domain else None
        #: The running sandbox's root URL: the domain of its records when none is given.
        self.public_url: str | None = None
        self._duplicate_detection = duplicate_detection
        self.require_fields = require_fields
        self._marks = itertools.count(_FIRST_MARK)
        self.reset()

    def reset(self) -> None:
        """Forget documents, log, stats, tokens, issuer faults; credentials stay, marks count on."""
        self.tokens.reset()
        self._store: dict[tuple[str, str, str], CommittedDocument] = {}
        self._record_bodies: dict[tuple[str, str, str], bytes] = {}
        self._by_identity: dict[str, CommittedDocument] = {}
        self._by_mark: dict[tuple[str, str, int], tuple[str, str, str]] = {}
        self._attempts: collections.Counter[tuple[str, str, str]] = collections.Counter()
        self._log: list[RequestRecord] = []
        self._seq = itertools.count(1)
        self.stats = SandboxStats()
        self.commit_count = 0
        self.issuers = IssuerState()

    # --- environments and clients ------------------------------------------------------

    def environment(self, name: str | None = None) -> Environment:
        """Environment ``name`` (default: the first); ``KeyError`` names the known ones."""
        env = self.environments.get(name or self.default)
        if env is None:
            raise KeyError(f"no environment {name!r}; have {', '.join(self.environments)}")
        return env

    def add_client(self, environment: str, client_id: str, client_secret: str) -> None:
        """Register another issuer (TIN and API key) in ``environment``."""
        if not client_id or not client_secret:
            raise ValueError("client_id and client_secret are required")
        env = self.environment(environment)
        if env.clients.get(client_id, client_secret) != client_secret:
            raise ValueError(f"client {client_id!r} already exists with another API key")
        env.clients[client_id] = client_secret

    def add_issuers(self, environment: str | None, issuers: Mapping[str, str]) -> None:
        """Register many issuers (``{tin: api_key}``) in ``environment``, all or none."""
        env = self.environment(environment)
        env.clients.update(check_issuers(issuers, env.clients))

    def issuer(self, environment: str | None, tin: str) -> IssuerKey:
        """``(environment, tin)`` of a registered issuer; ``KeyError`` if there is none."""
        env = self.environment(environment)
        if tin not in env.clients:
            raise KeyError(f"no issuer {tin!r} in environment {env.name!r}")
        return env.name, tin

    def revoke_issuer(self, environment: str | None, tin: str) -> None:
        """Refuse the issuer's credentials from now on (see ``_issuers``); others go on."""
        key = self.issuer(environment, tin)
        self.issuers.revoked.add(key)
        self.tokens.revoke_client(*key)

    def rotate_issuer(self, environment: str | None, tin: str, api_key: str) -> None:
        """Replace the issuer's API key: the old one is refused, its tokens revoked."""
        key = self.issuer(environment, tin)
        if not api_key or api_key != api_key.strip():
            raise ValueError(f"issuer {tin!r}: an empty API key, or spaces around it")
        self.environment(environment).clients[tin] = api_key
        self.tokens.revoke_client(*key)

    def restore_issuer(self, environment: str | None, tin: str) -> None:
        """Accept a revoked issuer's credentials again (its revoked tokens stay revoked)."""
        self.issuers.revoked.discard(self.issuer(environment, tin))

    def throttle_issuer(
        self,
        environment: str | None,
        tin: str,
        *,
        retry_after: int | str,
        rate: float | None,
    ) -> None:
        """Answer the issuer's document and operation requests 429 (above ``rate``/s)."""
        key = self.issuer(environment, tin)
        self.issuers.throttle(key, retry_after=retry_after, rate=rate, now=self._clock())

    def unthrottle_issuer(self, environment: str | None, tin: str) -> None:
        """Serve the issuer's requests normally again."""
        self.issuers.throttles.pop(self.issuer(environment, tin), None)

    def attribute(self, exchange: Exchange, authorization: str) -> None:
        """Note who a bearer request comes from (its token's client), before any check."""
        if exchange.environment is not None:
            exchange.issuer = self.tokens.owner(exchange.environment, authorization)

    def throttled(self, exchange: Exchange) -> Reply | None:
        """The 429 of a throttled issuer's request over its rate, or ``None``: go on."""
        key = exchange.issuer_key
        if key is None or not self.issuers.throttles:
            return None
        refusal = self.issuers.refusal(key, self._clock())
        if refusal is not None:
            exchange.fault = "throttled"
        return refusal

    # --- the request log ---------------------------------------------------------------

    def begin(
        self, environment: str | None, route: Route, method: str, path: str, query: dict[str, str]
    ) -> Exchange:
        """Open the log entry of a request to ``path`` (``/{environment}/…``).

        A request outside the known environments is logged with ``environment=None``, the
        route ``other`` and its full path.
        """
        known = environment is not None and environment in self.environments
        if known and route == "token":
            self.stats.token_requests += 1
        return Exchange(
            seq=next(self._seq),
            environment=environment if known else None,
            route=route if known else "other",
            method=method,
            path=path[len(environment) + 1 :] if known and environment else path,
            query=query,
        )

    def finish(self, exchange: Exchange) -> None:
        """Log a finished request and count it: a submission by its outcome, its issuer's."""
        self._log.append(exchange.record())
        outcome = exchange.status if exchange.status is not None else exchange.dropped
        if exchange.route == "document":
            self.stats.submissions[outcome] += 1
        key = exchange.issuer_key
        if key is None:
            return
        counts = self.stats.issuer(*key)
        counts.requests += 1
        if exchange.route == "token":
            counts.token_requests += 1
            if exchange.status == 200:
                counts.tokens_issued += 1
        elif exchange.route == "document":
            counts.submissions[outcome] += 1
        elif exchange.route == "operation":
            counts.operations += 1
        if exchange.fault == "throttled":
            counts.throttled += 1

    @property
    def requests(self) -> list[RequestRecord]:
        """Every finished request, in order of arrival."""
        return sorted(self._log, key=lambda record: record.seq)

    # --- tokens --------------------------------------------------------------------------

    def grant(self, form: Mapping[str, Any], environment: str, exchange: Exchange) -> Reply:
        """Issue tokens for a client-credentials or refresh grant, or refuse (see ``_tokens``)."""
        env = self.environment(environment)
        self.name_issuer(exchange, form)
        clients: Mapping[str, str] = env.clients
        if self.issuers.revoked:  # a revoked issuer's grant is refused as wrong credentials
            clients = Credentials(env.name, env.clients, self.issuers)
        reply, client_id = self.tokens.grant(form, env.name, clients, self.stats)
        if client_id is not None:
            exchange.client_id = client_id
        elif exchange.issuer_key in self.issuers.revoked:
            exchange.fault = "revoked"
        return reply

    def name_issuer(self, exchange: Exchange, form: Mapping[str, Any] | None) -> None:
        """Note who a token request comes from: the ``client_id`` it names, if registered."""
        env = self.environments.get(exchange.environment or "")
        named = str(form.get("client_id") or "") if form is not None else ""
        if env is not None and named in env.clients:
            exchange.issuer = named

    def authenticate(
        self, environment: str, authorization: str, api_key: str, exchange: Exchange
    ) -> Reply | None:
        """Check the bearer token and the API key: the 401 to send, or ``None``."""
        env = self.environment(environment)
        client_id, refusal = self.tokens.check(env.name, authorization)
        if refusal is not None or client_id is None:
            if exchange.issuer_key in self.issuers.revoked:
                exchange.fault = "revoked"
            return refusal
        expected = env.clients.get(client_id, "").encode()
        revoked = (env.name, client_id) in self.issuers.revoked
        if revoked or not secrets.compare_digest(api_key.encode(), expected):
            if revoked:
                exchange.fault = "revoked"
            return error_reply(401, "the API key is missing or not valid")
        exchange.client_id = client_id
        return None

    def expire_tokens(self) -> None:
        """Make every access token issued so far expired."""
        self.tokens.expire()

    def revoke_refresh_tokens(self) -> None:
        """Invalidate every refresh token issued so far."""
        self.tokens.revoke_refresh()

    # --- documents -------------------------------------------------------------------------

    def admit(self, exchange: Exchange, body: bytes, *, encrypted: bool) -> Submission | Reply:
        """Parse and check an authenticated client's document: the submission, or the refusal.

        Counts the attempt: random faults are decided per identity and attempt number.
        """
        document = parse_document(body)
        if isinstance(document, Reply):
            return document
        client_id = exchange.client_id or ""
        vat = issuer_vat(document)
        if vat is not None and vat != client_id:
            return error_reply(401, "the issuer's VAT number does not match the API key")
        problems = check_document(document, require=self.require_fields)
        if problems:
            return error_reply(
                400,
                "; ".join(f"{p.field}: {p.message}" for p in problems),
                errors=[{"field": p.field, "message": p.message} for p in problems],
            )
        key = (exchange.environment or "", client_id, document_identity(document))
        self._attempts[key] += 1
        exchange.identity, exchange.attempt = key[2], self._attempts[key]
        return Submission(key, document, body, encrypted)

    def commit(self, submission: Submission, now: dt.datetime) -> Reply:
        """Commit a new document (201), or answer a known one with its record (409).

        Without duplicate detection a known document is committed again: a new mark, one
        more in ``commits``, 201.
        """
        key = submission.key
        known = self._record_bodies.get(key)
        if known is not None and self._duplicate_detection:
            return Reply(409, known)
        environment, client_id, identity = key
        mark = self.new_mark()
        record, record_body = build_record(
            submission.document,
            identity=identity,
            scope=(environment, client_id),
            mark=mark,
            domain=self.domain_of(environment),
            salt=self.salt,
            now=now,
        )
        previous = self._store.get(key)
        committed = CommittedDocument(
            identity=identity,
            environment=environment,
            client_id=client_id,
            record=record,
            record_body=record_body,
            document=submission.document,
            body=submission.body,
            encrypted=submission.encrypted,
            commits=previous.commits + 1 if previous is not None else 1,
        )
        self._store[key] = committed
        self._record_bodies[key] = record_body
        if previous is None:
            self._by_identity.setdefault(identity, committed)
        elif self._by_identity.get(identity) is previous:
            self._by_identity[identity] = committed
        self._by_mark[environment, client_id, mark] = key
        self.commit_count += 1
        self.stats.issuer(environment, client_id).commits += 1
        return Reply(201, record_body)

    def new_mark(self) -> int:
        """The next mark: a document's, a cancellation's, a payment's (never one twice)."""
        return next(self._marks)

    def domain_of(self, environment: str) -> str:
        """The public domain of ``environment``'s records (their ``url`` is below it).

        The ``domain`` given, else the sandbox's own address for the environment
        (:attr:`public_url`), so that a record's url is served by the sandbox.
        """
        if self._domain is not None:
            return self._domain
        return f"{self.public_url or _NOWHERE}/{environment}"

    @property
    def committed(self) -> Mapping[str, CommittedDocument]:
        """Every committed document by identity (read-only, live; first scope wins)."""
        return types.MappingProxyType(self._by_identity)

    def all_committed(self) -> list[CommittedDocument]:
        """Every committed document of every environment and client, in commit order."""
        return list(self._store.values())

    def committed_in(self, environment: str, client_id: str) -> dict[str, CommittedDocument]:
        """The documents committed by one client of one environment, by identity."""
        return {
            identity: doc
            for (name, cid, identity), doc in self._store.items()
            if name == environment and cid == client_id
        }

    # --- cancellations ---------------------------------------------------------------------

    def holding(
        self, environment: str, client_id: str, *, mark: int | None = None, identity: str = ""
    ) -> tuple[CommittedDocument, bytes] | None:
        """The document one client holds by ``mark`` or ``identity``, and its record's bytes."""
        key = self._by_mark.get((environment, client_id, mark)) if mark is not None else None
        key = key or (environment, client_id, identity)
        committed = self._store.get(key)
        return None if committed is None else (committed, self._record_bodies[key])

    def cancel(
        self,
        exchange: Exchange,
        query_mark: str | None,
        body: bytes,
        *,
        what: str = "delivery note",
    ) -> Reply:
        """Cancel a document (a delivery or receiving note) at most once: then a 409."""
        mark = cancellation_mark(query_mark, body)
        if isinstance(mark, Reply):
            return mark
        key = self._by_mark.get((exchange.environment or "", exchange.client_id or "", mark))
        if key is None:
            return error_reply(404, f"no document with mark {mark}")
        exchange.identity = key[2]
        committed = self._store[key]
        if committed.cancellation_mark is not None:
            return Reply(
                409,
                dumps(
                    {
                        "success": False,
                        "message": "the document is already cancelled",
                        "statusCode": "Conflict",
                        "mark": mark,
                        "cancellationMark": committed.cancellation_mark,
                    }
                ),
            )
        cancellation = self.new_mark()
        updated = attrs.evolve(committed, cancellation_mark=cancellation)
        self._store[key] = updated
        if self._by_identity.get(key[2]) is committed:
            self._by_identity[key[2]] = updated
        answer = {
            "success": True,
            "message": f"the {what} was cancelled",
            "statusCode": "Success",
            "mark": mark,
            "cancellationMark": cancellation,
        }
        return Reply(200, dumps(answer))
