"""OpenPGP: armor, packet framing, the message composer, the provider's key, the decryptor.

:class:`ProviderKey` is the client's public face. The decryptor (:class:`Decryptor`, the
secret keys it reads and its :class:`OpenPGPError` family) is the sandbox's: it lives
here beside the composer, so both ends of the wire share one definition of the framing,
the armor, CFB and the ECDH KDF. The packet writers are shared with the sandbox's key
generation.
"""

from __future__ import annotations

from ._armor import ArmorError, armor, crc24, dearmor
from ._compose import AES_KEY_SIZES, KDF_HASHES, aes_cfb, ecdh_kdf_param, ecdh_kek
from ._decrypt import (
    Decryptor,
    IntegrityError,
    MalformedMessageError,
    MessageTooLargeError,
    NotIntegrityProtectedError,
    UnsupportedMessageError,
    WrongKeyError,
)
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
from ._secret import DecryptionKey, InvalidKeyError, OpenPGPError, load_decryption_keys

__all__ = [
    "AES_KEY_SIZES",
    "CURVES",
    "KDF_HASHES",
    "PK_ECDH",
    "PK_EDDSA",
    "PK_RSA",
    "ArmorError",
    "DecryptionKey",
    "Decryptor",
    "IntegrityError",
    "InvalidKeyError",
    "MalformedMessageError",
    "MessageTooLargeError",
    "NotIntegrityProtectedError",
    "OpenPGPError",
    "PacketError",
    "ProviderKey",
    "PublicKey",
    "Reader",
    "Tag",
    "UnsupportedMessageError",
    "WrongKeyError",
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
    "load_decryption_keys",
    "mpi",
    "packet",
    "read_public_key",
]
