"""A platform sending for many issuers: one IssuerPool, credentials from a resolver.

A cloud POS or an accounting platform keeps each issuer's API key in a vault or in its
own database; the pool asks for a key the first time it needs one, sends each invoice
with the credentials of the issuer its ``Issuer.Vat`` names, and refuses, before any
request, the invoice of an issuer it has no key for. ``main()`` runs it against the
embedded sandbox with 50 issuers: ``python docs/examples/many_issuers.py``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from invoicing_async import IssuerPool, OutcomeStatus, ProviderKey, UnknownIssuerError
from invoicing_sandbox import Sandbox, sample_invoice, sandbox_issuers

if TYPE_CHECKING:
    from collections.abc import Mapping


class Vault:
    """Stands in for a secret store: API keys by TIN, read asynchronously."""

    def __init__(self, keys: Mapping[str, str]) -> None:
        self._keys = dict(keys)
        self.reads = 0

    async def read(self, tin: str) -> str | None:
        """The API key of ``tin``, or ``None``: not one of ours."""
        self.reads += 1
        await asyncio.sleep(0)  # a network round trip in real life
        return self._keys.get(tin)


# region pool
async def send_for_every_shop(
    base_url: str, vault: Vault, key: ProviderKey, invoices: list[dict[str, Any]]
) -> dict[str, int]:
    """Every shop's invoices in one batch; how many of each outcome."""

    async def api_key_of(tin: str) -> str | None:  # your vault, your database
        return await vault.read(tin)  # None: not one of ours

    counts: dict[str, int] = {}
    async with IssuerPool(base_url, api_key_of, provider_key=key) as pool:
        first = await pool.submit_secure(invoices[0])  # to invoices[0]["Issuer"]["Vat"]
        assert first.mark is not None
        outcomes = await pool.submit_many(invoices[1:], concurrency=64)
        for outcome in outcomes:  # each says whose it is: outcome.issuer
            counts[outcome.status.value] = counts.get(outcome.status.value, 0) + 1
        # One issuer's operations: its own client.
        client = await pool.client(invoices[0]["Issuer"]["Vat"])
        status = await client.get_last_b2g_status(first.mark)
        assert status.mark == first.mark
    return counts


# endregion pool


# region unknown
async def send_for_a_stranger(base_url: str, vault: Vault, key: ProviderKey) -> str:
    """An invoice of an issuer the vault has no key for: refused, nothing sent."""
    async with IssuerPool(base_url, vault.read, provider_key=key) as pool:
        try:
            await pool.submit_secure(sample_invoice(1, issuer_vat="094019245"))
        except UnknownIssuerError as exc:
            return exc.issuer
    raise AssertionError("an unknown issuer's invoice was sent")


# endregion unknown


async def main() -> None:
    """Against the sandbox: 500 invoices of 50 issuers, then a stranger's."""
    issuers = sandbox_issuers(50)
    tins = list(issuers)
    async with Sandbox(issuers=issuers) as sandbox:
        vault = Vault(issuers)
        invoices = [
            sample_invoice(n, issuer_vat=tins[n % 50], lines=1) for n in range(500)
        ]
        counts = await send_for_every_shop(
            sandbox.base_url, vault, sandbox.provider_key, invoices
        )
        assert counts == {OutcomeStatus.ACCEPTED.value: 499}, counts
        assert vault.reads == 50, vault.reads  # once per issuer, not per invoice
        assert sandbox.commit_count == 500
        assert all(sandbox.issuer_stats(tin).token_requests == 1 for tin in tins)
        requests = len(sandbox.requests)
        refused = await send_for_a_stranger(
            sandbox.base_url, vault, sandbox.provider_key
        )
        assert refused == "094019245"
        assert len(sandbox.requests) == requests  # refused before any request
    print("500 invoices of 50 issuers accepted, each key read once; a stranger refused")


if __name__ == "__main__":
    asyncio.run(main())
