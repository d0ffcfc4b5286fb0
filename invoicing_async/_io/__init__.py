"""The wire and what it needs: attempts of one issuer's requests.

Owns: the transport (:mod:`.transport`: the only importer of aiohttp) and its seam
(:mod:`.mock`: answers from a function, for tests), tokens and their
stores (:mod:`.tokencache`, :mod:`.tokenstore`, :mod:`._sharedtoken`, Redis in
:mod:`.redisstore`), the loop of attempts every request runs (:mod:`.loop`: a document's,
an operation's, a token grant's), the channel of one issuer (:mod:`.channel`: its
credentials, its tokens, one request) and the channels of many (:mod:`.issuers`).

May import: the folders below it (``_core``, ``_doc``, ``_obs``), aiohttp, redis.
"""
