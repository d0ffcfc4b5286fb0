"""Sphinx configuration of the invoicing_async documentation.

Build it with ``nox -s docs`` or, in an environment with ``.[docs]`` installed::

    sphinx-build -W --keep-going -b html docs docs/_build/html

The reference pages are generated from the public modules' ``__all__`` by the local
extension in ``_ext/invoicing_docs.py``; the code examples are files under ``examples/``
that ``tests/test_docs.py`` runs against the embedded sandbox.
"""

from __future__ import annotations

import sys
from pathlib import Path

import invoicing_async

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "invoicing_async"
author = "invoicing_async developers"
copyright = "invoicing_async developers"  # noqa: A001  (Sphinx's name for it)
release = invoicing_async.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "invoicing_docs",
]

exclude_patterns = ["_build", "examples"]
templates_path: list[str] = []
root_doc = "index"

# Every cross-reference must resolve: a renamed public name breaks the build, not a link.
nitpicky = True
# Names from the standard library and dependencies: there is no intersphinx (the build
# runs without a network), so references to them are plain text, not links.
nitpick_ignore_regex = [
    # Private types in the signatures of objects the library makes for its users (a
    # MetricsServer from serve_metrics, an AmbiguousDocumentError from its twins):
    # users never build them, and the private names are no API to link to.
    ("py:class", r"Twin|invoicing_async\._obs\.(_http\.HttpPort|server\._Pages)"),
    (
        "py:.*",
        (
            r"(aiohttp|asyncio|attrs|collections|concurrent|contextlib|datetime|decimal|dt|enum"
            r"|os|pathlib|random|redis|ssl|types|typing|typing_extensions)(\..*)?"
        ),
    ),
    (
        "py:.*",
        (
            r"(Any|Awaitable|AsyncGenerator|AsyncIterable|AsyncIterator|Callable|Iterable"
            r"|Iterator|Literal|Mapping|Sequence|Path|PathLike|Self|TracebackType"
            r"|ClientSession)"  # aiohttp's, under the name the client's signature uses
        ),
    ),
    (
        "py:class",
        (
            r"(bool|bytes|bytearray|memoryview|dict|float|int|list|str|tuple|set"
            r"|frozenset|object|None|Exception|BaseException|Counter|Decimal)"
        ),
    ),
    # Private names that public signatures use today; none of them is importable from a
    # public module, so there is nothing to link to. Matched by their own name only, so
    # that moving them between private modules changes nothing here.
    ("py:class", r"(invoicing_async\..*\.)?Document"),  # the document type alias
    ("py:class", r"(invoicing_async\..*\.)?CredentialsKey"),  # TokenCache's key
    ("py:class", r"sqlite3\.Connection"),  # SqliteOutbox.enqueue's connection (stdlib)
    ("py:class", r"_typing\.Any"),  # typing.Any in invoicing_async.outbox (kept private)
    ("py:class", r"(invoicing_async\..*\.)?Algorithm"),  # the sandbox's key algorithms
    ("py:class", r"_[AT]"),  # type variables of the blocking clients: what they run, its result
    ("py:class", r"(invoicing_async\.documents\.)?_D"),  # from_json's: the class asked for
    ("py:class", r"(invoicing_async\..*\.)?OutageMode"),  # the sandbox's outages
    ("py:class", r"(invoicing_sandbox\..*\.)?IrisStatus"),  # an IRIS payment's status
]

# Built by factory methods, not by calling the class: the attrs constructor is private.
invoicing_no_signature = ["invoicing_async.ProviderKey"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
autodoc_class_signature = "mixed"
add_module_names = False
python_use_unqualified_type_names = True

html_theme = "furo"
html_title = f"invoicing_async {release}"
html_static_path = ["_static"]
html_css_files = ["invoicing.css"]
html_show_sourcelink = False
html_theme_options = {
    "navigation_with_keys": True,
}
pygments_style = "friendly"
pygments_dark_style = "monokai"
