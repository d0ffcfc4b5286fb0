"""A point-of-sale backend: an aiohttp application that submits each sale's invoice.

The application holds one :class:`~invoicing_async.InvoicingClient` for its whole life
(created in ``cleanup_ctx`` from the ``INVOICING_*`` variables, closed on shutdown), so
every request handler shares one connection pool and one token cache. ``main()`` runs
it on loopback against the embedded sandbox and plays a till:
``python docs/examples/pos_backend.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from invoicing_async import (
    AuthenticationError,
    DocumentResult,
    DuplicateDocumentError,
    InvoicingClient,
    InvoicingError,
    ProviderKeyError,
    TokenCache,
    UnknownOutcomeError,
    ValidationError,
)
from invoicing_sandbox import Sandbox, sample_invoice

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

log = logging.getLogger("pos_backend")


# region client
ENVIRON = web.AppKey("environ", dict)
TOKENS = web.AppKey("tokens", TokenCache)
INVOICING = web.AppKey("invoicing", InvoicingClient)


async def invoicing_client(app: web.Application) -> AsyncIterator[None]:
    """One client for the application's lifetime (``cleanup_ctx``).

    Configured by the ``INVOICING_*`` variables, as the command is: the base URL, the
    issuer's TIN, the API key (or a file holding it), the provider's key file pinned by
    its fingerprint. A swapped key file is refused here, before the app serves.
    """
    async with InvoicingClient.from_env(
        app[ENVIRON], token_cache=app[TOKENS]
    ) as client:
        app[INVOICING] = client
        yield


# endregion client


# region handler
def receipt(result: DocumentResult) -> dict[str, Any]:
    """What the till prints: the authority's mark and uid, and the QR code's url."""
    return {"mark": result.mark, "uid": result.uid, "qr": result.qr_code_string}


async def post_invoice(request: web.Request) -> web.Response:
    """``POST /invoices``: submit the sale's invoice; answer with the receipt fields."""
    invoice = await request.json()
    client = request.app[INVOICING]
    try:
        # A customer is waiting: 20 s for the whole call, safe retries included (a
        # lost answer is re-sent, and the provider's 409 returns the original record).
        result = await client.submit_secure(invoice, timeout=20)
    except DuplicateDocumentError as exc:
        # Sent before this call: by this till's earlier try, or by anyone. The
        # provider holds the invoice and sent back its original record.
        if exc.result is None:
            raise web.HTTPBadGateway(
                text="duplicate without the original record"
            ) from None
        return web.json_response(receipt(exc.result), status=200)
    except ProviderKeyError:
        # Our copy of the provider's key cannot be used, or the provider cannot decrypt
        # what was encrypted to it (it rotated its key): configuration, not the invoice.
        # An operator must look; the same invoice goes through once the key is fixed.
        log.exception("invoicing is misconfigured: the provider key")
        return web.json_response(
            {"error": "invoicing is misconfigured", "retry": True}, status=503
        )
    except ValidationError as exc:
        # A definite refusal: fix the invoice; sending it again will not help.
        return web.json_response({"error": exc.message}, status=422)
    except AuthenticationError:
        # Our credentials (or the issuer's TIN) were refused: an operator must look.
        return web.json_response({"error": "invoicing credentials refused"}, status=502)
    except UnknownOutcomeError as exc:
        # Retries ran out after failures that may have been committed: the provider may
        # or may not hold the invoice. The till sends the *same* invoice again later;
        # the provider's duplicate detection turns a committed one into a 409 (above).
        return web.json_response({"error": str(exc), "retry": True}, status=503)
    except InvoicingError as exc:
        # Certainly not committed (the provider is down or overloaded): try again later.
        return web.json_response({"error": str(exc), "retry": True}, status=503)
    return web.json_response(receipt(result), status=201)


# endregion handler


# region app
def create_app(
    environ: Mapping[str, str] = os.environ, *, token_cache: TokenCache | None = None
) -> web.Application:
    """The POS backend; apps (or clients) given one ``token_cache`` share tokens."""
    app = web.Application()
    app[ENVIRON] = dict(environ)
    app[TOKENS] = token_cache if token_cache is not None else TokenCache()
    app.cleanup_ctx.append(invoicing_client)
    app.router.add_post("/invoices", post_invoice)
    return app


# endregion app


# region main
async def main() -> None:
    """Run the backend on loopback against the sandbox and ring up some sales."""
    async with Sandbox() as sandbox, _environment(sandbox) as environ:
        runner = web.AppRunner(create_app(environ))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        pos_url = f"http://127.0.0.1:{runner.addresses[0][1]}/invoices"
        try:
            async with aiohttp.ClientSession() as till:

                async def ring_up(
                    invoice: dict[str, Any],
                ) -> tuple[int, dict[str, Any]]:
                    async with till.post(pos_url, json=invoice) as response:
                        return response.status, await response.json()

                # 20 tills at once, right after start-up: one token request serves all.
                sales = [
                    sample_invoice(n, issuer_vat=sandbox.client_id) for n in range(20)
                ]
                answers = await asyncio.gather(*(ring_up(sale) for sale in sales))
                assert [status for status, _ in answers] == [201] * 20
                assert sandbox.stats.token_requests == 1

                # A till that did not get the answer sends the same sale again: it gets
                # the same receipt, and the provider still holds the invoice once.
                status, again = await ring_up(sales[0])
                assert (status, again) == (200, answers[0][1])

                # An invalid invoice is refused for good, with the provider's reason.
                broken = sample_invoice(99, issuer_vat=sandbox.client_id)
                broken["Summaries"]["TotalGrossValue"] = -1
                status, refusal = await ring_up(broken)
                assert status == 422
                print("refused:", refusal["error"])
        finally:
            await runner.cleanup()  # closes the invoicing client (cleanup_ctx)
        assert sandbox.commit_count == 20
        assert all(held.commits == 1 for held in sandbox.committed.values())


# endregion main


@contextlib.asynccontextmanager
async def _environment(sandbox: Sandbox) -> AsyncIterator[dict[str, str]]:
    """The ``INVOICING_*`` variables a deployment would set, for the sandbox."""
    with tempfile.TemporaryDirectory() as tmp:
        yield sandbox.client_variables(tmp)  # the provider key goes into tmp
