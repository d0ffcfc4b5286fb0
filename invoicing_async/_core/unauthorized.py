"""The 401 rule: a request sent again with another token, a 401, a failed token request.

A 401 may be the token's fault (a replaced token, one a node of the provider does not
know yet, a revoked one) or the request's answer (the API key, the issuer's VAT number).
The token cache says which token to try next, if any (:meth:`~._tokencache.Tokens.recover`:
the current one, the same one once old enough, or a new one forced at most once per
cooldown); :class:`TokenRetries` decides, for one request, whether to send it again
with that token, and what the 401 it is finally left with means:

* each token is waited for at most once, and a request is sent again at most
  :data:`MAX_TOKEN_RETRIES` times (a chain of 401s is short: this is a safety net);
* a 401 to a token fetched for this very request, or to one the provider never
  accepted, is the request's own answer (``AUTH``);
* a 401 to a token the provider accepted before may be a revoked token: the request
  waits for the next token, once the cooldown allows one (``REAUTH``, with the seconds
  until then).

A token request that fails is told apart here too (:func:`without_token`,
:func:`refusal_kept`, :func:`after_refresh`): the cache and the channel only do what
these say.

Tokens are named by their values, held here only for the life of one request.
"""

from __future__ import annotations

from typing import Literal, TypeGuard

from .errors import (
    AuthenticationError,
    ClientStateError,
    CredentialsError,
    InvoicingError,
    TransportError,
)

__all__ = [
    "MAX_TOKEN_RETRIES",
    "TokenRetries",
    "after_refresh",
    "refusal_kept",
    "without_token",
]

#: Re-sends of one request after 401s (a replaced token, a young one waited for, a forced
#: new one, that one waited for).
MAX_TOKEN_RETRIES = 4


class TokenRetries:
    """One request's re-sends after 401s (see the module docstring)."""

    __slots__ = ("_forced", "_left", "_waited")

    def __init__(self) -> None:
        self._left = MAX_TOKEN_RETRIES
        #: Tokens waited for (the cache held the request until the provider knew them).
        self._waited: set[str] = set()
        #: Tokens this request's own 401s made the cache fetch.
        self._forced: set[str] = set()

    def __repr__(self) -> str:  # never the tokens
        return f"<TokenRetries {MAX_TOKEN_RETRIES - self._left} re-send(s)>"

    def again(self, refused: str, offered: str | None, *, forced: bool) -> bool:
        """Whether to send the request again with ``offered`` after ``refused`` got a 401.

        :param offered: the token the cache offers (``None``: none may help).
        :param forced: the cache fetched ``offered`` because of this 401.
        """
        if self._left == 0 or offered is None or offered in self._waited:
            return False
        self._left -= 1
        if forced:
            self._forced.add(offered)
        if offered == refused:
            self._waited.add(refused)  # the cache waited for it to propagate
        return True

    def wait(self, token: str, *, accepted_before: bool, reauth_in: float) -> float | None:
        """After a final 401 to ``token``: seconds to wait for a new token, or ``None``.

        ``None``: the 401 is the request's answer (a token fetched for it, or one the
        provider never accepted).
        """
        if token in self._forced or not accepted_before:
            return None
        return reauth_in


def without_token(error: InvoicingError) -> InvoicingError:
    """What a call failed with when it could not get a token for its request.

    Refused credentials (or a 401 to the token request) and a closed client stay what
    they are; any other failure of the token request (the token endpoint unreachable,
    overloaded, unreadable) means the call was certainly not sent: a
    :class:`~invoicing_async.TransportError` with ``maybe_sent=False``, so that a batch
    neither rejects the document nor calls it possibly committed.
    """
    if isinstance(error, (AuthenticationError, ClientStateError)):
        return error
    return TransportError(f"no access token, nothing sent: {error}", maybe_sent=False)


def refusal_kept(error: BaseException) -> TypeGuard[CredentialsError]:
    """Whether a token request's failure is kept for the re-authentication cooldown.

    Refused credentials stay refused for a while: the callers that meet a 401 after the
    refusal (or whose documents come later) get it again without a token request each.
    """
    return isinstance(error, CredentialsError)


def after_refresh(error: BaseException) -> Literal["stop", "refused", "failed"]:
    """What follows a failed refresh grant.

    ``"stop"``: nothing more can be sent (a closed client): raised as it is;
    ``"refused"``: the refresh token was refused (``invalid_grant``): maybe a sibling
    rotated it, so the store is read again before falling back to client credentials;
    ``"failed"``: anything else: client credentials at once.
    """
    if isinstance(error, ClientStateError):
        return "stop"
    return "refused" if isinstance(error, CredentialsError) else "failed"
