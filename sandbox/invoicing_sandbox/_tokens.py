"""The sandbox's token endpoint and bearer check, sans I/O.

Grants follow RFC 6749 as a standards-compliant server (oauthlib) applies it:

* ``client_credentials`` with ``client_id`` and ``client_secret`` in the form;
* ``refresh_token``, which also requires the client to authenticate (section 6): without
  ``client_id``/``client_secret``, or with wrong ones, the answer is
  ``401 invalid_client``; a refresh token that is unknown, expired, of another client
  or already used is ``400 invalid_grant``. Refresh tokens rotate: each is good once.

Two behaviours of multi-node providers can be switched on, so a client's 401 policy can
be tested over real HTTP:

* ``propagation_delay``: a new access token is unknown to the provider (401
  ``invalid_token``) for that many seconds after issue, as with replication lag;
* ``revoke_on_issue``: issuing an access token revokes the client's earlier ones.

Two more, set on a running sandbox (:meth:`Tokens.replicate`, :meth:`Tokens.revoke_after`):

* ``nodes``: the provider has that many nodes and requests (token grants included)
  alternate between them; a new token is known at once to the node that issued it and
  to the others ``propagation_delay`` seconds later (with one node, the token is unknown
  everywhere for that long);
* ``revoke_after``: every access token is revoked that many seconds after its issue.
"""

from __future__ import annotations

import itertools
import secrets
from typing import TYPE_CHECKING, Any

import attrs

from ._replies import NO_STORE, Reply, error_reply, oauth_error
from ._wire import dumps

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ._records import SandboxStats

__all__ = ["Tokens"]

_BEARER_CHALLENGE = (("WWW-Authenticate", 'Bearer error="invalid_token"'),)


@attrs.define
class _Token:
    environment: str
    client_id: str
    expires_at: float
    known_at: float = float("-inf")
    #: The node that issued it (it knows the token at once); -1: every node waits.
    node: int = -1
    revoked_at: float = float("inf")


def _invalid_client(description: str) -> Reply:
    body = dumps({"error": "invalid_client", "error_description": description})
    challenge = (("WWW-Authenticate", 'Bearer error="invalid_client"'),)
    return Reply(401, body, headers=NO_STORE + challenge)


class Tokens:
    """Access and refresh tokens of every environment (see the module docstring)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        expires_in: float,
        refresh_expires_in: float,
        propagation_delay: float = 0.0,
        revoke_on_issue: bool = False,
    ) -> None:
        if expires_in <= 0 or refresh_expires_in <= 0:
            raise ValueError("token lifetimes must be positive")
        if propagation_delay < 0:
            raise ValueError("propagation_delay must not be negative")
        self._clock = clock
        self._expires_in = expires_in
        self._refresh_expires_in = refresh_expires_in
        self.propagation_delay = propagation_delay
        self.revoke_on_issue = revoke_on_issue
        self.nodes = 1
        self.revoke_delay: float | None = None
        self._next_node = itertools.count()
        self.reset()

    def replicate(self, nodes: int, delay: float) -> None:
        """``nodes`` nodes that learn a token issued by another one ``delay`` s late."""
        if nodes < 1 or delay < 0:
            raise ValueError("nodes must be at least 1 and the delay not negative")
        self.nodes, self.propagation_delay = nodes, delay

    def revoke_after(self, seconds: float | None) -> None:
        """Revoke every access token issued from now on ``seconds`` after its issue."""
        if seconds is not None and seconds < 0:
            raise ValueError("seconds must not be negative")
        self.revoke_delay = seconds

    def _node(self) -> int:
        """The node this request reaches: they take turns."""
        return next(self._next_node) % self.nodes

    def reset(self) -> None:
        """Forget every token."""
        self._access: dict[str, _Token] = {}
        self._refresh: dict[str, _Token] = {}

    def grant(
        self,
        form: Mapping[str, Any],
        environment: str,
        clients: Mapping[str, str],
        stats: SandboxStats,
    ) -> tuple[Reply, str | None]:
        """Answer a grant: the reply, and the client id it authenticated (if any)."""
        grant = str(form.get("grant_type") or "")
        now = self._clock()
        client_id = str(form.get("client_id") or "")
        secret = str(form.get("client_secret") or "").encode()
        expected = clients.get(client_id)
        authenticated = expected is not None and secrets.compare_digest(secret, expected.encode())
        if grant == "client_credentials":
            if not client_id or not secret:
                return oauth_error(
                    "invalid_request", "client_id and client_secret are required"
                ), None
            if not authenticated:
                return oauth_error("invalid_request", "invalid client credentials"), None
        elif grant == "refresh_token":
            stats.refresh_requests += 1
            if not client_id or not secret:
                return _invalid_client("client authentication is required"), None
            if not authenticated:
                return _invalid_client("invalid client credentials"), None
            presented = str(form.get("refresh_token") or "")
            old = self._refresh.get(presented)
            if (
                old is None
                or old.environment != environment
                or old.client_id != client_id
                or now >= old.expires_at
            ):
                return oauth_error("invalid_grant", "the refresh token is invalid or expired"), None
            del self._refresh[presented]  # rotation: a refresh token is good once
        elif not grant:
            return oauth_error("invalid_request", "grant_type is required"), None
        else:
            return oauth_error("unsupported_grant_type", f"grant_type {grant[:40]!r}"), None
        return self._issue(environment, client_id, now), client_id

    def _issue(self, environment: str, client_id: str, now: float) -> Reply:
        if self.revoke_on_issue:
            for value in [
                value
                for value, token in self._access.items()
                if token.environment == environment and token.client_id == client_id
            ]:
                del self._access[value]
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        revoke = self.revoke_delay
        self._access[access] = _Token(
            environment,
            client_id,
            now + self._expires_in,
            now + self.propagation_delay,
            node=self._node() if self.nodes > 1 else -1,
            revoked_at=now + revoke if revoke is not None else float("inf"),
        )
        self._refresh[refresh] = _Token(environment, client_id, now + self._refresh_expires_in)
        expires_in = self._expires_in
        body = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": int(expires_in) if float(expires_in).is_integer() else expires_in,
            "refresh_token": refresh,
        }
        return Reply(200, dumps(body), headers=NO_STORE)

    def check(self, environment: str, authorization: str) -> tuple[str | None, Reply | None]:
        """The client a bearer token belongs to, or the 401 to answer."""
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            reply = error_reply(
                401, "missing bearer token", headers=(("WWW-Authenticate", "Bearer"),)
            )
            return None, reply
        token = self._access.get(value.strip())
        now = self._clock()
        node = self._node() if self.nodes > 1 else -1
        # Unknown while young: everywhere with one node, else but where it was issued.
        unknown_here = (
            token is not None and now < token.known_at and (token.node < 0 or token.node != node)
        )
        if token is None or token.environment != environment or unknown_here:
            return None, error_reply(
                401, "the access token is not valid", headers=_BEARER_CHALLENGE
            )
        if now >= token.revoked_at:
            return None, error_reply(401, "the access token was revoked", headers=_BEARER_CHALLENGE)
        if now >= token.expires_at:
            expired = "the access token has expired"
            return None, error_reply(401, expired, headers=_BEARER_CHALLENGE)
        return token.client_id, None

    def expire(self) -> None:
        """Make every access token issued so far expired."""
        for token in self._access.values():
            token.expires_at = float("-inf")

    def revoke_refresh(self) -> None:
        """Invalidate every refresh token issued so far."""
        self._refresh.clear()

    def owner(self, environment: str, authorization: str) -> str | None:
        """The client a bearer token was issued to, whether or not it is still good.

        Who a request comes from, before anything is decided about it (an issuer's
        throttle, its scripted faults, its gate): a look-up, not a check.
        """
        scheme, _, value = authorization.partition(" ")
        token = self._access.get(value.strip()) if scheme.lower() == "bearer" else None
        return token.client_id if token is not None and token.environment == environment else None

    def revoke_client(self, environment: str, client_id: str) -> None:
        """Revoke the client's access tokens (401 from now on) and drop its refresh tokens."""
        now = self._clock()
        for token in self._access.values():
            if token.environment == environment and token.client_id == client_id:
                token.revoked_at = min(token.revoked_at, now)
        for value, token in list(self._refresh.items()):
            if token.environment == environment and token.client_id == client_id:
                del self._refresh[value]
