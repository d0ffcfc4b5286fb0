"""The wire and what it needs: attempts of one issuer's requests.

Owns: the transport (:mod:`.transport`: the only importer of aiohttp) and its seam
(:mod:`.mock`: answers from a function, for tests), tokens and their
stores (:mod:`.tokencache`, :mod:`.tokenstore`, :mod:`._sharedtoken`, Redis in
:mod:`.redisstore`), the loop of attempts every request runs (:mod:`.loop`: a document's,
an operation's, a token grant's), the channel of one issuer (:mod:`.channel`: its
credentials, its tokens, one request; and which channel sends an issuer's documents: a
client's one) and the channels of many (:mod:`.issuers`: a pool's), and the library's
asyncio waits (:mod:`.waits`: :func:`~.waits.pause`, :func:`~.waits.within`).

May import: ``_core`` and ``_doc``, aiohttp, redis; never ``_obs``: what telemetry sees
is told as events (:mod:`invoicing_async._core.calls`).
"""
