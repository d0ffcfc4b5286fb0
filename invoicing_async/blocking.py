"""The client for synchronous code: :class:`BlockingClient`, and :class:`BlockingPool`.

Django and Flask views, Celery tasks and plain scripts call functions, not coroutines.
A :class:`BlockingClient` runs one :class:`~invoicing_async.InvoicingClient` on one
event loop in a background thread (the shape of anyio's blocking portal) and gives every
thread of the process a blocking call into it::

    from invoicing_async.blocking import BlockingClient

    invoicing = BlockingClient.from_env()       # once, when the application starts

    def checkout(request):                      # any thread of the WSGI server
        result = invoicing.submit_secure(invoice, timeout=20)
        ...

    invoicing.close()                           # when the application stops

The guarantees are the async client's: the calls of every thread share one connection
pool and one token cache (a burst of requests after a deploy makes one token request),
retries are as safe, and errors are the same typed errors, raised in the calling thread.

.. versionadded:: 0.3.0
"""

from invoicing_async._client.blocking import BlockingClient, BlockingPool

__all__ = ["BlockingClient", "BlockingPool"]
