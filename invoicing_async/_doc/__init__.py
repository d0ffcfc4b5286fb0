"""A document before it leaves: read, identified, checked, serialised, encrypted.

Owns: the one reader of a document's members (:mod:`.fields`, the provider's binding of
names: :mod:`.binding`), its key, identity and bytes (:mod:`.document`, which imports no
typed module: the kinds of documents that are no mapping are registered by theirs), its
preparation and the pacing of that work on the loop (:mod:`.prepare`, :mod:`.pacer`), OpenPGP
(:mod:`.pgp`), the typed documents, their JSON and their checks (:mod:`.types`,
:mod:`.typedjson`, :mod:`.checks`, :mod:`.amounts`, :mod:`.checked`, and each type's
rules: :mod:`.kinds`), the receipt QR
codes (:mod:`.qr`).

May import: :mod:`invoicing_async._core`, cryptography (and segno, in :mod:`.qr`).
"""
