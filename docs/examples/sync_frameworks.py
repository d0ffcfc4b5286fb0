"""Invoices from synchronous code: a WSGI application with a ``BlockingClient``.

The application is plain WSGI, the interface Django and Flask applications are served
through, so that it runs here without either framework. ``main()`` starts the sandbox,
serves the application with a threaded WSGI server on loopback and rings up sales from
sixteen tills at once: ``python docs/examples/sync_frameworks.py``.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from urllib.error import HTTPError
from urllib.request import Request, urlopen
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from invoicing_async import (
    AuthenticationError,
    DuplicateDocumentError,
    InvoicingError,
    ValidationError,
)
from invoicing_async.blocking import BlockingClient
from invoicing_sandbox import Sandbox, sample_invoice

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


# region app
def create_app(invoicing: BlockingClient) -> Callable[..., list[bytes]]:
    """The WSGI application: ``POST /invoices`` submits a sale's invoice.

    ``invoicing`` is the one client of the process: every worker thread of the WSGI
    server calls it, and all of them share its connections and its token.
    """

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        size = int(environ.get("CONTENT_LENGTH") or 0)
        invoice = json.loads(environ["wsgi.input"].read(size))
        answer: dict[str, Any]
        try:
            # Blocks this thread only, 20 s at most, safe retries included.
            result = invoicing.submit_secure(invoice, timeout=20)
            status, answer = "201 Created", receipt(result)
        except DuplicateDocumentError as exc:  # sold before: the same receipt
            if exc.result is None:
                raise
            status, answer = "200 OK", receipt(exc.result)
        except ValidationError as exc:  # refused for good: fix the invoice
            status, answer = "422 Unprocessable Entity", {"error": exc.message}
        except AuthenticationError:  # our credentials: an operator must look
            status, answer = "502 Bad Gateway", {"error": "credentials refused"}
        except InvoicingError as exc:  # the same invoice, again, later
            status, answer = "503 Service Unavailable", {"error": str(exc)}
        body = json.dumps(answer).encode()
        start_response(status, [("Content-Type", "application/json")])
        return [body]

    return app


def receipt(result: Any) -> dict[str, Any]:
    """What the till prints: the authority's mark and uid, and the QR code's url."""
    return {"mark": result.mark, "uid": result.uid, "qr": result.qr_code_string}


# endregion app


# region serve
class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """A WSGI server with a thread per request (as gunicorn's gthread workers)."""

    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    """Requests without an access log line each."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """No access log on stderr."""


def serve(environ: Mapping[str, str], ring_up: Callable[[str], None]) -> None:
    """Create the client, serve the application, and close the client at the end."""
    with BlockingClient.from_env(environ) as invoicing:  # one client for the process
        server = make_server(
            "127.0.0.1", 0, create_app(invoicing),
            server_class=ThreadingWSGIServer, handler_class=QuietHandler,
        )  # fmt: skip
        worker = threading.Thread(target=server.serve_forever)
        worker.start()
        try:
            ring_up(f"http://127.0.0.1:{server.server_port}/invoices")
        finally:
            server.shutdown()
            worker.join()
            server.server_close()
    # Leaving the block closed the client: its connections, its event loop's thread.


# endregion serve


# region main
def post(url: str, invoice: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """One till's request."""
    request = Request(url, data=json.dumps(invoice).encode(), method="POST")  # noqa: S310
    request.add_header("Content-Type", "application/json")
    try:
        with urlopen(request, timeout=60) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except HTTPError as error:
        return error.code, json.loads(error.read())


async def main() -> None:
    """Sixteen tills at once against the WSGI app, the sandbox behind it."""
    async with Sandbox() as sandbox:
        with tempfile.TemporaryDirectory() as tmp:
            # What the deployment's environment would hold (the key file goes to tmp).
            environ = sandbox.client_variables(tmp)
            sales = [sample_invoice(n, issuer_vat=sandbox.client_id) for n in range(48)]
            broken = sample_invoice(99, issuer_vat=sandbox.client_id)
            broken["Details"] = []  # an invoice without lines: the provider refuses it

            def ring_up(url: str) -> None:
                with ThreadPoolExecutor(16) as tills:
                    answers = list(tills.map(lambda sale: post(url, sale), sales))
                assert [status for status, _ in answers] == [201] * 48
                # A till that lost the answer sends the sale again: the same receipt.
                assert post(url, sales[0]) == (200, answers[0][1])
                status, refusal = post(url, broken)
                assert status == 422
                print("refused:", refusal["error"])

            # The sandbox runs on this event loop; the WSGI server and the client's own
            # event loop run in other threads.
            await asyncio.to_thread(serve, environ, ring_up)
        assert sandbox.stats.token_requests == 1  # one token for every thread
        assert sandbox.commit_count == 48
        assert all(held.commits == 1 for held in sandbox.committed.values())


# endregion main


if __name__ == "__main__":
    asyncio.run(main())
