"""Helpers of the sandbox's own tests: a fake clock and a caller of the provider's API.

A helper module, not a test module. :class:`Caller` talks to a running sandbox as the
provider's clients do (a bearer token from ``/oauth/token`` and the ``APIKey`` header),
with aiohttp's client, and hands back each answer whole (status, headers, body), so a
test looks at the wire answer itself.
"""

from __future__ import annotations

import json as jsonlib
from typing import TYPE_CHECKING, Any

import aiohttp
import attrs

from invoicing_sandbox import sample_invoice

if TYPE_CHECKING:
    from collections.abc import Mapping

    from invoicing_sandbox import Sandbox


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@attrs.frozen
class Answer:
    """One answer: its status, headers and body bytes."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return jsonlib.loads(self.body)


class Caller:
    """One issuer's client of the sandbox's API: a session, a token and the API key."""

    def __init__(self, sb: Sandbox, *, environment: str | None = None, tin: str | None = None):
        env = sb.environment(environment, client_id=tin)
        self.sandbox = sb
        self.base_url = env.base_url
        self.tin = env.client_id
        self.api_key = env.client_secret
        self.token = ""
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Caller:
        self._session = aiohttp.ClientSession()
        form = {
            "grant_type": "client_credentials",
            "client_id": self.tin,
            "client_secret": self.api_key,
        }
        answer = await self.call("POST", "/oauth/token", data=form, authenticate=False)
        assert answer.status == 200, answer.body
        self.token = answer.json()["access_token"]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._session is not None
        await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None
        return self._session

    def headers(self) -> dict[str, str]:
        """The credentials every call of the API carries."""
        return {"Authorization": f"Bearer {self.token}", "APIKey": self.api_key}

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        authenticate: bool = True,
        url: str | None = None,
    ) -> Answer:
        """``method path`` below the environment (or ``url``), answered whole."""
        sent = {**(self.headers() if authenticate else {}), **(headers or {})}
        target = url if url is not None else self.base_url + path
        async with self.session.request(
            method, target, json=json, data=data, params=params, headers=sent
        ) as response:
            return Answer(response.status, response.headers, await response.read())

    async def submit(self, document: dict[str, Any]) -> dict[str, Any]:
        """Submit ``document`` (``/Invoice/json``) and return its record (201)."""
        answer = await self.call("POST", "/Invoice/json", json=document)
        assert answer.status == 201, answer.body
        return answer.json()

    async def submit_sample(self, number: int, **kwargs: Any) -> dict[str, Any]:
        """Submit sample invoice ``number`` of this issuer; its record."""
        kwargs.setdefault("lines", 2)
        return await self.submit(sample_invoice(number, issuer_vat=self.tin, **kwargs))

    async def sign_pos(self, mark: int | None, **fields: Any) -> dict[str, Any]:
        """SignPos for ``mark`` (the provider's fields, ``paymentAmount`` 10 by default)."""
        payload = {
            "nspCode": "CommonWeb",
            "issuerTin": self.tin,
            "issueDate": "2026-11-22T10:00:00",
            "branchCode": 0,
            "invoiceTypeCode": "1.1",
            "series": "A",
            "identifier": "1",
            "mark": mark,
            "paymentAmount": 10,
            "totalNetAmount": 8.06,
            "totalVatAmount": 1.94,
            "totalAmount": 10,
            "terminalId": "T-1",
            "signatureDurationType": "H_24",
            **fields,
        }
        answer = await self.call("POST", "/PosTransactions/signpos", json=payload)
        assert answer.status == 200, answer.body
        return answer.json()
