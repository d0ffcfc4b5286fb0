"""An embedded fake of the e-invoicing provider, for tests, demos and benchmarks.

:class:`Sandbox` runs the provider's API (token endpoint, ``/Invoice/secure``,
``/Invoice/json``, cancellation) on the running event loop, over real loopback HTTP, with
duplicate detection that makes re-sending safe (or, with ``duplicate_detection=False``,
without it), and a ground truth (:attr:`Sandbox.committed`, :attr:`Sandbox.requests`) to
check clients against. :class:`Fault` injects the failures real networks and providers
produce (resets, lost answers, truncated bodies, hangs), scripted or at random but
reproducible. The provider's key pair is generated once per process
(:func:`cached_keypair`), and the sandbox decrypts what GnuPG, Sequoia and the library
send. :meth:`Sandbox.outage` plays the provider being down (connections refused,
requests hanging, 503s) until switched back. The pytest plugin provides the
``invoicing_sandbox`` and ``invoicing_client`` fixtures.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from ._faults import DEFAULT_RANDOM_KINDS, Fault
from ._keys import SandboxKeyPair, cached_keypair, generate_keypair
from ._records import CommittedDocument, RequestRecord, SandboxEnvironment, SandboxStats
from ._samples import SANDBOX_CLIENT_ID, sample_invoice, sample_invoices
from ._sandbox import Sandbox

__all__ = [
    "DEFAULT_RANDOM_KINDS",
    "SANDBOX_CLIENT_ID",
    "CommittedDocument",
    "Fault",
    "RequestRecord",
    "Sandbox",
    "SandboxEnvironment",
    "SandboxKeyPair",
    "SandboxStats",
    "cached_keypair",
    "generate_keypair",
    "sample_invoice",
    "sample_invoices",
]
