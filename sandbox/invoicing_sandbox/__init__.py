"""An embedded fake of the e-invoicing provider, for tests, demos and benchmarks.

:class:`Sandbox` runs the provider's API (token endpoint, ``/Invoice/secure``,
``/Invoice/json``, and the other operations: cancellations, POS signatures, ReSeed,
status reads, uploads, credits, delayed card payments, IRIS payments, the listing of
issued documents and their PDFs) on the running event loop, over real loopback HTTP, with
duplicate detection that makes re-sending safe (or, with ``duplicate_detection=False``,
without it), and a ground truth (:attr:`Sandbox.committed`, :attr:`Sandbox.requests`) to
check clients against. :class:`Fault` injects the failures real networks and providers
produce (resets, lost answers, truncated bodies, hangs), scripted or at random but
reproducible. The provider's key pair is generated once per process
(:func:`cached_keypair`), and the sandbox decrypts what GnuPG, Sequoia and the library
send. :meth:`Sandbox.outage` plays the provider being down (connections refused,
requests hanging, 503s) until switched back. It serves any number of issuers
(:func:`sandbox_issuers`, ``Sandbox(issuers=...)``), and can revoke or throttle one of
them while the others go on. The pytest plugin provides the
``invoicing_sandbox``, ``invoicing_client`` and ``invoicing_env`` fixtures.

Its own distribution, ``invoicing-async-sandbox``: a client application installs it for
its tests, not in production. Importing this package costs nothing until a name is
used (each is imported on first use), so the pytest plugin it registers does not slow
down test runs that do not use its fixtures.

.. versionadded:: 0.1.0 as ``invoicing_async.sandbox``
.. versionchanged:: 0.3.0 its own distribution and package, ``invoicing_sandbox``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._credits import IssuedCredit
    from ._faults import DEFAULT_RANDOM_KINDS, Fault
    from ._iris import IrisPayment
    from ._issuers import sandbox_issuers
    from ._keys import SandboxKeyPair, cached_keypair, generate_keypair
    from ._operations import ReSeeded, StoredUpload
    from ._payments import PaymentUpdate
    from ._pos import PosSignature, verify_pos_signature
    from ._records import (
        CommittedDocument,
        IssuerStats,
        RequestRecord,
        SandboxEnvironment,
        SandboxStats,
    )
    from ._samples import SANDBOX_CLIENT_ID, sample_invoice, sample_invoices
    from ._sandbox import Sandbox

__all__ = [
    "DEFAULT_RANDOM_KINDS",
    "SANDBOX_CLIENT_ID",
    "CommittedDocument",
    "Fault",
    "IrisPayment",
    "IssuedCredit",
    "IssuerStats",
    "PaymentUpdate",
    "PosSignature",
    "ReSeeded",
    "RequestRecord",
    "Sandbox",
    "SandboxEnvironment",
    "SandboxKeyPair",
    "SandboxStats",
    "StoredUpload",
    "cached_keypair",
    "generate_keypair",
    "sample_invoice",
    "sample_invoices",
    "sandbox_issuers",
    "verify_pos_signature",
]

#: Where each public name lives; imported on first use (see the module docstring).
_HOMES = {
    "DEFAULT_RANDOM_KINDS": "_faults",
    "SANDBOX_CLIENT_ID": "_samples",
    "CommittedDocument": "_records",
    "Fault": "_faults",
    "IrisPayment": "_iris",
    "IssuedCredit": "_credits",
    "IssuerStats": "_records",
    "PaymentUpdate": "_payments",
    "PosSignature": "_pos",
    "ReSeeded": "_operations",
    "RequestRecord": "_records",
    "Sandbox": "_sandbox",
    "SandboxEnvironment": "_records",
    "SandboxKeyPair": "_keys",
    "SandboxStats": "_records",
    "StoredUpload": "_operations",
    "cached_keypair": "_keys",
    "generate_keypair": "_keys",
    "sample_invoice": "_samples",
    "sample_invoices": "_samples",
    "sandbox_issuers": "_issuers",
    "verify_pos_signature": "_pos",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
