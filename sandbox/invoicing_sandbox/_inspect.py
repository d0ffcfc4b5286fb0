"""The sandbox's read-only endpoints, for tests and people: what it received and holds.

Served under ``/_sandbox/``, a path no environment can take (environment names start
with a letter or a digit), so they never collide with the provider's API::

    GET /_sandbox/                      what is here, environments and client ids
    GET /_sandbox/stats                 counters: token requests, submissions by status
    GET /_sandbox/documents             committed documents (?environment= &client_id=
                                        &offset= &limit=)
    GET /_sandbox/documents/{identity}  one document's status and record (404: not held)
    GET /_sandbox/requests              the request log (?since=SEQ &limit=)
    GET /_sandbox/provider-key          the provider's public key, ASCII armored
    GET /_sandbox/uploads               stored files (/Invoice/File, /media/upload)
    GET /_sandbox/uploads/{id}          one of them, its content in base64
    GET /_sandbox/pos-signatures        POS signatures issued
    GET /_sandbox/pos-keys/{issuerTin}  an issuer's POS public key (Ed25519, base64)
    GET /_sandbox/reseeds               B2G documents forwarded again
    GET /_sandbox/credits               credits issued (/Invoice/credit)
    GET /_sandbox/payment-updates       delayed card payments (/Invoice/updatePayment)
    GET /_sandbox/iris-payments         IRIS payments and their status
    GET /_sandbox/iris-payments/{id}    one of them (by endToEndDiasId)
    GET /_sandbox/issuers               issuers: revoked, throttled, counters
                                        (?environment= &offset= &limit=)
    GET /_sandbox/issuers/{tin}         one issuer (?environment=)

and, to play one issuer's faults from another process (a service's tests)::

    POST /_sandbox/issuers/{tin}/revoke      its credentials refused from now on
    POST /_sandbox/issuers/{tin}/restore     accepted again
    POST /_sandbox/issuers/{tin}/throttle    429 (?retry_after=SECONDS &rate=PER_SECOND)
    POST /_sandbox/issuers/{tin}/unthrottle  served normally again

and to settle an IRIS payment nobody will scan::

    POST /_sandbox/iris-payments/{id}/complete   the payer approved it (also fail, expire)

Sans I/O like the provider: a request's method, path and query in, a
:class:`~._replies.Reply` out. Never an API key or a token: the index names client ids
only. Inspection requests are not in the request log and not counted.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import TYPE_CHECKING, Any

import attrs

from ._replies import METHOD_NOT_ALLOWED, Reply, error_reply
from ._wire import dumps

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._operations import Operations
    from ._provider import Provider
    from ._records import CommittedDocument, IssuerStats, RequestRecord

__all__ = ["PREFIX", "Inspector"]

#: Where the read-only endpoints live.
PREFIX = "/_sandbox"
_MAX_LIMIT = 1000


def _summary(doc: CommittedDocument) -> dict[str, Any]:
    return {
        "identity": doc.identity,
        "environment": doc.environment,
        "client_id": doc.client_id,
        "status": "cancelled" if doc.cancellation_mark is not None else "committed",
        "mark": doc.record.mark,
        "uid": doc.record.uid,
        "commits": doc.commits,
        "encrypted": doc.encrypted,
        "cancellation_mark": doc.cancellation_mark,
    }


def _request(record: RequestRecord) -> dict[str, Any]:
    return {
        "seq": record.seq,
        "environment": record.environment,
        "method": record.method,
        "path": record.path,
        "status": record.status,
        "fault": record.fault,
        "identity": record.identity,
        "client_id": record.client_id,
        "issuer": record.issuer,
        "attempt": record.attempt,
    }


def _json(data: Any, status: int = 200) -> Reply:
    return Reply(status, dumps(data))


def _number(query: Mapping[str, str], name: str, default: int) -> int:
    text = query.get(name, "")
    if not text:
        return default
    if not text.isdigit():
        raise ValueError(f"{name} must be a non-negative integer")
    return int(text)


class Inspector:
    """Answers the read-only endpoints from the provider's state (see the module)."""

    def __init__(
        self,
        provider: Provider,
        public_key: str,
        base_url: str = "",
        operations: Operations | None = None,
    ) -> None:
        self._provider = provider
        self._operations = operations
        self._public_key = public_key
        self.base_url = base_url

    def answer(self, method: str, path: str, query: Mapping[str, str]) -> Reply:
        """The reply to ``method path`` (``path`` below :data:`PREFIX`)."""
        route = path.strip("/")
        if route.partition("/")[0] == "issuers":
            return self._issuers_route(method, route.split("/")[1:], query)
        if method not in ("GET", "HEAD"):
            operations = self._operations if method == "POST" else None
            control = operations.control(route) if operations is not None else None
            return control if control is not None else METHOD_NOT_ALLOWED
        whole = {"": self._index, "stats": self._stats, "provider-key": self._key}
        try:
            if route in whole:
                return whole[route]()
            if route == "documents":
                return self._documents(query)
            if route.startswith("documents/"):
                return self._document(urllib.parse.unquote(route[len("documents/") :]))
            if route == "requests":
                return self._requests(query)
            answer = self._operations.inspect(route) if self._operations is not None else None
            if answer is not None:
                return answer
        except ValueError as exc:
            return error_reply(400, str(exc))
        return error_reply(404, f"no such sandbox endpoint: {PREFIX}/{route}"[:300])

    def _key(self) -> Reply:
        return Reply(200, self._public_key.encode("ascii"), content_type="text/plain")

    def _index(self) -> Reply:
        provider = self._provider
        environments = [
            {
                "name": env.name,
                "base_url": f"{self.base_url}/{env.name}",
                "default_client_id": env.default_client,
                "client_ids": sorted(env.clients),
            }
            for env in provider.environments.values()
        ]
        endpoints = ["stats", "documents", "documents/{identity}", "requests", "provider-key"]
        endpoints += ["issuers", "issuers/{tin}"]
        if self._operations is not None:
            endpoints += ["uploads", "uploads/{id}", "pos-signatures", "pos-keys/{issuerTin}"]
            endpoints += ["reseeds", "credits", "payment-updates", "iris-payments"]
            endpoints.append("iris-payments/{endToEndDiasId}")
        return _json(
            {
                "environments": environments,
                "endpoints": [f"{PREFIX}/{name}" for name in endpoints],
            }
        )

    def _stats(self) -> Reply:
        provider = self._provider
        stats = provider.stats
        return _json(
            {
                "token_requests": stats.token_requests,
                "refresh_requests": stats.refresh_requests,
                "submissions": {str(k): n for k, n in sorted(stats.submissions.items(), key=str)},
                "commits": provider.commit_count,
                "documents": len(provider.all_committed()),
                "requests": len(provider.requests),
            }
        )

    def _documents(self, query: Mapping[str, str]) -> Reply:
        environment, client_id = query.get("environment"), query.get("client_id")
        offset = _number(query, "offset", 0)
        limit = min(_number(query, "limit", 100), _MAX_LIMIT)
        held = [
            doc
            for doc in self._provider.all_committed()
            if (not environment or doc.environment == environment)
            and (not client_id or doc.client_id == client_id)
        ]
        page = [_summary(doc) for doc in held[offset : offset + limit]]
        return _json({"total": len(held), "offset": offset, "documents": page})

    def _document(self, identity: str) -> Reply:
        held = [doc for doc in self._provider.all_committed() if doc.identity == identity]
        if not held:
            return _json({"identity": identity, "status": "not_found"}, 404)
        answer = [
            {**_summary(doc), "record": json.loads(doc.record_body), "document": doc.document}
            for doc in held
        ]
        # One identity in one scope is the rule; several scopes are listed, not hidden.
        return _json(answer[0] if len(answer) == 1 else {"identity": identity, "held": answer})

    def _requests(self, query: Mapping[str, str]) -> Reply:
        since = _number(query, "since", 0)
        limit = min(_number(query, "limit", _MAX_LIMIT), _MAX_LIMIT)
        records = [_request(r) for r in self._provider.requests if r.seq > since][:limit]
        return _json({"requests": records})

    # --- issuers -----------------------------------------------------------------------

    def _issuers_route(self, method: str, parts: list[str], query: Mapping[str, str]) -> Reply:
        """``issuers``, ``issuers/{tin}`` (GET) and ``issuers/{tin}/{action}`` (POST)."""
        reading = method in ("GET", "HEAD")
        try:
            if not parts and reading:
                return self._issuers(query)
            if len(parts) == 1 and reading:
                return self._issuer(parts[0], query)
            if len(parts) == 2 and method == "POST":
                return self._control(parts[0], parts[1], query)
        except ValueError as exc:
            return error_reply(400, str(exc))
        if len(parts) <= 2:
            allow = "POST" if len(parts) == 2 else "GET"
            return error_reply(405, f"use {allow}", headers=(("Allow", allow),))
        return error_reply(404, f"no such sandbox endpoint: {PREFIX}/issuers/..."[:300])

    def _issuers(self, query: Mapping[str, str]) -> Reply:
        environment = query.get("environment")
        offset = _number(query, "offset", 0)
        limit = min(_number(query, "limit", 100), _MAX_LIMIT)
        names = [environment] if environment else list(self._provider.environments)
        registered = [
            (env.name, tin) for env in map(self._provider.environment, names) for tin in env.clients
        ]
        page = [self._issuer_state(*key) for key in registered[offset : offset + limit]]
        return _json({"total": len(registered), "offset": offset, "issuers": page})

    def _issuer(self, tin: str, query: Mapping[str, str]) -> Reply:
        try:
            key = self._provider.issuer(query.get("environment"), urllib.parse.unquote(tin))
        except KeyError as exc:
            return error_reply(404, str(exc.args[0]))
        return _json(self._issuer_state(*key))

    def _issuer_state(self, environment: str, tin: str) -> dict[str, Any]:
        provider = self._provider
        counts = provider.stats.by_issuer.get((environment, tin))
        throttle = provider.issuers.throttles.get((environment, tin))
        return {
            "environment": environment,
            "client_id": tin,
            "revoked": (environment, tin) in provider.issuers.revoked,
            "throttle": (
                None
                if throttle is None
                else {"retry_after": throttle.retry_after, "rate": throttle.rate}
            ),
            "counts": _counts(counts) if counts is not None else None,
        }

    def _control(self, tin: str, action: str, query: Mapping[str, str]) -> Reply:
        """``POST /_sandbox/issuers/{tin}/{action}``: play (or end) one issuer's fault."""
        provider, environment = self._provider, query.get("environment")
        tin = urllib.parse.unquote(tin)
        try:
            if action == "revoke":
                provider.revoke_issuer(environment, tin)
            elif action == "restore":
                provider.restore_issuer(environment, tin)
            elif action == "throttle":
                retry_after = _number(query, "retry_after", 1)
                rate = float(query["rate"]) if query.get("rate") else None
                provider.throttle_issuer(environment, tin, retry_after=retry_after, rate=rate)
            elif action == "unthrottle":
                provider.unthrottle_issuer(environment, tin)
            else:
                message = "use revoke, restore, throttle or unthrottle"
                return error_reply(404, f"no such issuer action {action[:40]!r}: {message}")
        except KeyError as exc:
            return error_reply(404, str(exc.args[0]))
        return self._issuer(tin, query)


def _counts(counts: IssuerStats) -> dict[str, Any]:
    answer = attrs.asdict(counts)
    answer["submissions"] = {str(k): n for k, n in sorted(counts.submissions.items(), key=str)}
    answer["documents"] = counts.documents
    return answer
