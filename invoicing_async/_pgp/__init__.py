"""OpenPGP for the client: armor, packet framing, the message composer, the provider's key.

:class:`ProviderKey` is the public face. The other names are shared with the sandbox,
which decrypts what the composer writes and writes its own keys: one definition of the
framing, the armor and the ECDH KDF for both sides.
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
