"""Many issuers in one sandbox: their credentials, and the two faults of one issuer. Pure.

A platform that files for thousands of companies holds thousands of credentials (each
issuer's TIN as its client id, its API key). The sandbox keeps them as it keeps one: a
``dict`` per environment, so registering 10,000 costs a few megabytes and every request
still finds its issuer with a dictionary look-up. :func:`sandbox_issuers` makes as many
as a test wants, with deterministic TINs and keys.

Two failures of *one* issuer, while the others go on, are played here:

* **revocation** (:class:`Credentials`): the issuer's API key is refused from now on.
  A provider that revokes a key (the account closed, the key rotated in its portal, a
  leak reported) refuses it as it refuses a wrong one, without saying why: a token
  request gets the answer of wrong credentials (``400 invalid_request`` for
  ``client_credentials``, ``401 invalid_client`` for a refresh), its refresh tokens are
  dropped, its access tokens are revoked (``401``), and every call is refused since the
  service checks the ``APIKey`` header on each one. A restored key is accepted again,
  but the tokens revoked with it stay revoked: the client authenticates anew;
* **throttling** (:class:`Throttle`): the issuer's document and operation requests are
  answered ``429 Too Many Requests`` with ``Retry-After``, always or above a rate, before
  anything is read or processed, as a per-account rate limiter in front of a service.

Both are per environment: the key of an issuer here is ``(environment, tin)``.

.. versionadded:: 0.4.0
"""

from __future__ import annotations

import base64
import hashlib
import math
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from ._faults import Fault
from ._replies import Reply, fault_reply
from ._rules import with_check_digit

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "Credentials",
    "IssuerKey",
    "IssuerState",
    "Throttle",
    "check_issuers",
    "sandbox_issuers",
]

#: An issuer of one environment: ``(environment, tin)``.
IssuerKey = tuple[str, str]

#: The first 8 digits of :func:`sandbox_issuers`' TINs count up from here (its TINs
#: begin with 9, the sandbox's default client's with 1).
_FIRST_BASE = 90_000_000
_LAST_BASE = 99_999_999


def sandbox_issuers(count: int, *, start: int = 0, seed: int | str | None = 0) -> dict[str, str]:
    """``count`` issuers, ``{tin: api_key}``: for ``Sandbox(issuers=...)`` and the clients.

    TINs are 9 digits with a valid check digit, ``9000000`` followed by a counter from
    ``start`` (so ``start=count`` gives the next, disjoint ones); API keys are shaped like
    ``secrets.token_urlsafe(32)``, derived from ``seed`` and the TIN, so the same call
    gives the same mapping (``seed=None``: random keys). About a tenth of a second for
    10,000.

    .. versionadded:: 0.4.0
    """
    if count < 0 or start < 0:
        raise ValueError("count and start must not be negative")
    if _FIRST_BASE + start + count - 1 > _LAST_BASE:
        raise ValueError(f"at most {_LAST_BASE - _FIRST_BASE + 1} issuers")
    issuers = {}
    for base in range(_FIRST_BASE + start, _FIRST_BASE + start + count):
        tin = with_check_digit(str(base))
        issuers[tin] = _api_key(seed, tin)
    return issuers


def _api_key(seed: int | str | None, tin: str) -> str:
    if seed is None:
        return secrets.token_urlsafe(32)
    digest = hashlib.sha256(f"invoicing-sandbox-issuer:{seed}:{tin}".encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def check_issuers(issuers: Mapping[str, str], known: Mapping[str, str]) -> dict[str, str]:
    """``issuers`` as a new dict, once each is a TIN and a key that ``known`` agrees with.

    Checked whole before anything is registered: a bad entry is a ``ValueError`` (or a
    ``TypeError``) naming the TIN, never the key, and nothing of the batch is lost or half
    added.
    """
    checked: dict[str, str] = {}
    for tin, key in issuers.items():
        if not isinstance(tin, str) or not isinstance(key, str):
            raise TypeError(f"issuer TINs and API keys are strings (TIN {str(tin)[:20]!r})")
        if not tin or not key or tin != tin.strip() or key != key.strip():
            raise ValueError(f"issuer {tin[:20]!r}: empty, or spaces around the TIN or key")
        if known.get(tin, key) != key:
            raise ValueError(f"client {tin!r} already exists with another API key")
        checked[tin] = key
    return checked


class Credentials(Mapping[str, str]):
    """An environment's ``{client_id: api_key}`` as the token endpoint sees it.

    A revoked issuer is missing, so its grant is refused exactly as wrong credentials
    are; the others are the environment's own dict, looked up as they are.
    """

    def __init__(self, environment: str, clients: Mapping[str, str], state: IssuerState) -> None:
        self._environment = environment
        self._clients = clients
        self._state = state

    def __getitem__(self, client_id: str) -> str:
        if (self._environment, client_id) in self._state.revoked:
            raise KeyError(client_id)
        return self._clients[client_id]

    def __iter__(self) -> Iterator[str]:
        return (c for c in self._clients if (self._environment, c) not in self._state.revoked)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@attrs.define
class Throttle:
    """One issuer's rate limit: a token bucket on the sandbox's clock.

    ``rate`` requests a second, in bursts of up to ``max(1, rate)``; ``None``: every
    request is refused. A refusal is the 429 with ``Retry-After: retry_after``.
    """

    retry_after: int | str
    rate: float | None
    updated: float
    allowance: float = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.allowance = self.burst

    @property
    def burst(self) -> float:
        """Requests admitted at once after a quiet second."""
        return max(1.0, self.rate) if self.rate is not None else 0.0

    def admit(self, now: float) -> bool:
        """Whether a request arriving ``now`` is within the rate (and counts it if so)."""
        if self.rate is None:
            return False
        elapsed = max(0.0, now - self.updated)
        self.allowance = min(self.burst, self.allowance + elapsed * self.rate)
        self.updated = now
        if self.allowance >= 1.0:
            self.allowance -= 1.0
            return True
        return False

    def refusal(self) -> Reply:
        """The 429 a request over the limit gets, unprocessed."""
        return fault_reply(Fault.status(429, retry_after=self.retry_after))


class IssuerState:
    """Which issuers are revoked, which are throttled (see the module docstring)."""

    def __init__(self) -> None:
        self.revoked: set[IssuerKey] = set()
        self.throttles: dict[IssuerKey, Throttle] = {}

    def throttle(
        self, key: IssuerKey, *, retry_after: int | str, rate: float | None, now: float
    ) -> None:
        """Throttle ``key`` (replacing an earlier throttle of it)."""
        if rate is not None and (not math.isfinite(rate) or rate <= 0):
            raise ValueError("rate must be a positive number of requests a second, or None")
        if isinstance(retry_after, int) and retry_after < 0:
            raise ValueError("retry_after must not be negative")
        self.throttles[key] = Throttle(retry_after, rate, now)

    def refusal(self, key: IssuerKey, now: float) -> Reply | None:
        """The 429 for a request of ``key`` arriving ``now``, or ``None``: go on."""
        throttle = self.throttles.get(key)
        if throttle is None or throttle.admit(now):
            return None
        return throttle.refusal()
