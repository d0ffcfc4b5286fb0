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

Sans I/O like the provider: a request's method, path and query in, a
:class:`~._replies.Reply` out. Never an API key or a token: the index names client ids
only. Inspection requests are not in the request log and not counted.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import TYPE_CHECKING, Any

from ._replies import METHOD_NOT_ALLOWED, Reply, error_reply
from ._wire import dumps

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._operations import Operations
    from ._provider import Provider
    from ._records import CommittedDocument, RequestRecord

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
        if method not in ("GET", "HEAD"):
            return METHOD_NOT_ALLOWED
        route = path.strip("/")
        try:
            if route == "":
                return self._index()
            if route == "stats":
                return self._stats()
            if route == "documents":
                return self._documents(query)
            if route.startswith("documents/"):
                return self._document(urllib.parse.unquote(route[len("documents/") :]))
            if route == "requests":
                return self._requests(query)
            if route == "provider-key":
                return Reply(200, self._public_key.encode("ascii"), content_type="text/plain")
            answer = self._operations.inspect(route) if self._operations is not None else None
            if answer is not None:
                return answer
        except ValueError as exc:
            return error_reply(400, str(exc))
        return error_reply(404, f"no such sandbox endpoint: {PREFIX}/{route}"[:300])

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
        if self._operations is not None:
            endpoints += ["uploads", "uploads/{id}", "pos-signatures", "pos-keys/{issuerTin}"]
            endpoints.append("reseeds")
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
