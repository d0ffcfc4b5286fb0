"""Share access tokens across processes and machines through Redis.

::

    from invoicing_async import InvoicingClient, TokenCache
    from invoicing_async.redis import RedisTokenStore

    cache = TokenCache(store=RedisTokenStore("redis://127.0.0.1:6379/0"))
    async with InvoicingClient(base_url, tin, api_key, token_cache=cache) as client: ...

Needs the optional extra: ``pip install 'invoicing-async[redis]'``.

How it stays correct with many processes on many hosts:

* **One fetch for the fleet.** A process that needs a token takes a lock with
  ``SET lock owner NX PX ttl`` (a random owner value); the others wait for it on a pub/sub
  channel (with a bounded poll of the lock as the fallback) and read the token it stores.
  The lock is released and extended only by a Lua script that checks the owner, and kept
  alive by a heartbeat while the fetch runs: a holder that dies (SIGKILL) delays the
  others by at most the lock's TTL.
* **Fencing.** Taking the lock draws a generation number (``INCR``); a token is stored
  only if its generation is newer than the stored one, so a holder whose lock expired
  mid-fetch can never overwrite its successor's token.
* **Redis's clock.** A token is stored with ``PX`` = its remaining lifetime and read back
  with ``PTTL``: no wall clocks are compared across hosts; a safety margin is taken off.
* **Rotating refresh tokens.** Renewal uses the stored refresh token, the only one in
  use; a refused refresh first re-reads the store (see
  :class:`~invoicing_async.TokenCache`), then falls back to client credentials.
* **Secrets.** Keys are named by client id and a digest of environment, client id and
  API key (never the key itself); values can be encrypted with AES-256-GCM under a key
  you supply (``encryption_key``), bound to the key name they are stored under.
* **Redis down or slow** (when the process starts, too: a fleet starts in any order).
  Every Redis call has a timeout; on any failure the process falls back to its
  in-process single flight (one WARNING until Redis answers again) and tries Redis again
  after a capped, jittered backoff (half a second, doubling up to ``retry_after``
  seconds). An extra token request is acceptable, a failed invoice is not. Meanwhile a
  process renews with client credentials: the refresh token it knows is the fleet's,
  which a sibling may have rotated already.
* **Redis back.** Sharing resumes with the next call: a call that meets a connection
  the restart closed is tried once more on a new one, and the pool's idle connections
  are dropped after a failure, so stale connections cost no fallback (and no token
  request) once Redis answers. A restarted, empty Redis is filled by the next renewal.

This is the only module that imports :mod:`redis`.

.. versionadded:: 0.2.0
"""

from invoicing_async._io.redisstore import RedisTokenStore

__all__ = ["RedisTokenStore"]
