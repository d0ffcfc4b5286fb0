"""The one seam the sandbox distribution may import: every private client name it uses.

``invoicing_sandbox`` (the ``invoicing-async-sandbox`` distribution) needs a few of the
client's private names, and this module lists every one of them. The sandbox imports
``invoicing_async`` through its public names and through this module, never through
another private module; ``tests/unit/test_layout.py`` holds it to that, and holds
``__all__`` to exactly what the sandbox imports (no name listed "just in case").

* OpenPGP: armor, packet framing and writing, CFB and the ECDH KDF. The sandbox writes its
  key pairs with them, and its own decryptor and secret-key reader
  (``invoicing_sandbox._pgp``) read messages with them: one definition of the wire for
  both ends, while the decryption code lives in the sandbox alone (the client never
  decrypts, and its wheel holds no decryption code).
* Documents: the one reader of their fields (:mod:`._fields`: names in any case, the
  ``EL`` prefix of a VAT number, numbers as text), how the provider binds a member
  written twice (:func:`~._binding.bound`: the last value read) and the one set of rules
  about them
  (:mod:`._checks`, public as ``invoicing_async.documents.check``): the sandbox reads a
  document and refuses it (400) exactly as ``check`` finds errors, naming the same field.
* The ``INVOICING_*`` variable names a running sandbox hands to its clients.
* The command: what a plugin's ``register(commands)`` and the ``demo`` use (``Commands``
  is a type, for annotations only). These are imported on first use: the command's
  package loads every subcommand and the client, which a sandbox started by a test
  never needs (importing it stays as cheap as before the seam).

The two distributions are released together: the sandbox requires this very client
version (``invoicing-async==`` the same version, in ``sandbox/pyproject.toml``, checked
by ``.ci/wheels.py``). So a name listed here keeps its meaning within a release line and
may change between releases only together with the sandbox; changing a client module
behind one of these names means checking the sandbox. Every other private name is the
client's alone, free to change.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from invoicing_async._client.credfile import read_credentials
from invoicing_async._client.env import (
    ENV_API_KEY,
    ENV_BASE_URL,
    ENV_CA_FILE,
    ENV_CLIENT_ID,
    ENV_PROVIDER_FINGERPRINT,
    ENV_PROVIDER_KEY,
)
from invoicing_async._core.problems import Problem
from invoicing_async._doc.binding import bound
from invoicing_async._doc.checks import (
    REQUIRED_FIELDS,
    check_digit,
    check_document,
    errors_of,
    valid_tin,
)
from invoicing_async._doc.fields import field, first, path, tin
from invoicing_async._doc.pgp import (
    AES_KEY_SIZES,
    CURVES,
    KDF_HASHES,
    PK_ECDH,
    PK_EDDSA,
    PK_RSA,
    ArmorError,
    PacketError,
    PublicKey,
    Reader,
    Tag,
    aes_cfb,
    armor,
    checksum16,
    dearmor,
    ecdh_kdf_param,
    ecdh_kek,
    encode_length,
    iter_packets,
    key_hash_prefix,
    mpi,
    packet,
    read_public_key,
)

if TYPE_CHECKING:
    # The command's names: at run time each is imported on first use (``__getattr__``
    # below), except ``Commands``, an alias the client defines for type checkers only.
    from invoicing_async._cli.common import Commands, add_verbosity, attach_progress
    from invoicing_async._cli.inputs import Source, UsageError
    from invoicing_async._cli.output import Progress, Tally, summary, write_record

__all__ = [
    "AES_KEY_SIZES",
    "CURVES",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_CA_FILE",
    "ENV_CLIENT_ID",
    "ENV_PROVIDER_FINGERPRINT",
    "ENV_PROVIDER_KEY",
    "KDF_HASHES",
    "PK_ECDH",
    "PK_EDDSA",
    "PK_RSA",
    "REQUIRED_FIELDS",
    "ArmorError",
    "Commands",
    "PacketError",
    "Problem",
    "Progress",
    "PublicKey",
    "Reader",
    "Source",
    "Tag",
    "Tally",
    "UsageError",
    "add_verbosity",
    "aes_cfb",
    "armor",
    "attach_progress",
    "bound",
    "check_digit",
    "check_document",
    "checksum16",
    "dearmor",
    "ecdh_kdf_param",
    "ecdh_kek",
    "encode_length",
    "errors_of",
    "field",
    "first",
    "iter_packets",
    "key_hash_prefix",
    "mpi",
    "packet",
    "path",
    "read_credentials",
    "read_public_key",
    "summary",
    "tin",
    "valid_tin",
    "write_record",
]

#: The command's names and their modules, imported on first use (see the module docstring).
_COMMAND = {
    "Progress": "invoicing_async._cli.output",
    "Source": "invoicing_async._cli.inputs",
    "Tally": "invoicing_async._cli.output",
    "UsageError": "invoicing_async._cli.inputs",
    "add_verbosity": "invoicing_async._cli.common",
    "attach_progress": "invoicing_async._cli.common",
    "summary": "invoicing_async._cli.output",
    "write_record": "invoicing_async._cli.output",
}


def __getattr__(name: str) -> Any:
    home = _COMMAND.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
