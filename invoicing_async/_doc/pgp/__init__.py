"""OpenPGP: armor, packet framing, the message composer and the provider's key.

:class:`ProviderKey` is the client's public face. The client only encrypts: the decryptor
and the secret keys it reads are the sandbox's (``invoicing_sandbox._pgp``), built on the
framing, armor, CFB and the ECDH KDF exported here, which reach the sandbox through
:mod:`invoicing_async._for_sandbox`, so both ends of the wire share one definition. The
packet writers are shared with the sandbox's key generation.
"""

from __future__ import annotations

from ._armor import ArmorError, armor, crc24, dearmor
from ._compose import AES_KEY_SIZES, KDF_HASHES, aes_cfb, ecdh_kdf_param, ecdh_kek
from ._keys import ProviderKey
from ._packets import (
    CURVES,
    PK_ECDH,
    PK_EDDSA,
    PK_RSA,
    PacketError,
    PublicKey,
    Reader,
    Tag,
    checksum16,
    encode_length,
    iter_packets,
    key_hash_prefix,
    mpi,
    packet,
    read_public_key,
)

__all__ = [
    "AES_KEY_SIZES",
    "CURVES",
    "KDF_HASHES",
    "PK_ECDH",
    "PK_EDDSA",
    "PK_RSA",
    "ArmorError",
    "PacketError",
    "ProviderKey",
    "PublicKey",
    "Reader",
    "Tag",
    "aes_cfb",
    "armor",
    "checksum16",
    "crc24",
    "dearmor",
    "ecdh_kdf_param",
    "ecdh_kek",
    "encode_length",
    "iter_packets",
    "key_hash_prefix",
    "mpi",
    "packet",
    "read_public_key",
]
