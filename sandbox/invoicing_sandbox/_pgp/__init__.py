"""The provider's side of OpenPGP: its secret keys and the decryptor.

Only a provider decrypts, so this code ships in the sandbox's distribution and not in
the client's. It reads messages with the client's own armor, packet framing, CFB and
ECDH KDF (through :mod:`invoicing_async._for_sandbox`): both ends of the wire share one
definition of each, and the interoperability tests prove the pair against GnuPG,
Sequoia, OpenPGP.js, RNP and Bouncy Castle.
"""

from __future__ import annotations

from ._decrypt import (
    Decryptor,
    IntegrityError,
    MalformedMessageError,
    MessageTooLargeError,
    NotIntegrityProtectedError,
    UnsupportedMessageError,
    WrongKeyError,
)
from ._secret import DecryptionKey, InvalidKeyError, OpenPGPError, load_decryption_keys

__all__ = [
    "DecryptionKey",
    "Decryptor",
    "IntegrityError",
    "InvalidKeyError",
    "MalformedMessageError",
    "MessageTooLargeError",
    "NotIntegrityProtectedError",
    "OpenPGPError",
    "UnsupportedMessageError",
    "WrongKeyError",
    "load_decryption_keys",
]
