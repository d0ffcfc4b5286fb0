"""Documents that are no mapping are registered by their modules: the document module
(serialising, identifying every document of every call) imports none of them, and a
client that sends dicts never loads the typed models or their checks."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from invoicing_async import ValidationError
from invoicing_async._doc import document as _document
from invoicing_async._doc.document import (
    Kind,
    describe,
    kind_of,
    register_kind,
    serialize_document,
)

#: The modules of typed and checked documents: loaded only by those who use them.
TYPED = (
    "invoicing_async._doc.types",
    "invoicing_async._doc.typedjson",
    "invoicing_async._doc.checked",
)


def test_a_client_sending_dicts_never_loads_the_typed_documents():
    script = (
        "import sys, invoicing_async\n"
        "from invoicing_async._doc.document import serialize_document, document_key\n"
        "serialize_document({'Series': 'A', 'Number': 1})\n"
        "document_key({'Series': 'A'}); document_key(b'{}')\n"
        f"print([m for m in {TYPED!r} if m in sys.modules])\n"
        "import invoicing_async.documents\n"
        f"print(all(m in sys.modules for m in {TYPED!r}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[:2] == ["[]", "True"]


def test_the_document_module_imports_no_typed_module_where_it_runs():
    """No import of them in its body or its functions (only for type checking)."""
    tree = ast.parse(Path(_document.__file__).read_text(encoding="utf-8"))
    checking = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for node in ast.walk(block)
    }
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and id(node) not in checking
    }
    assert not imported & {"types", "typedjson", "checked", "checks"}


class _Note:
    """A document kind of a test's own: sent as its text, keyed by it."""

    def __init__(self, text: str) -> None:
        self.text = text


class _Memo(_Note):
    pass


@pytest.fixture
def note_kind():
    kind = Kind(
        lambda note, _subject: {"Note": note.text},
        lambda note: (f"note:{note.text}", _document.Identity()),
    )
    register_kind(_Note, kind)
    yield kind
    for cls in (_Note, _Memo):
        _document._KINDS.pop(cls, None)


def test_a_registered_kind_is_written_and_identified_by_its_module(note_kind):
    assert serialize_document(_Memo("x")) == b'{"Note":"x"}'  # a subclass, by its base
    assert kind_of(_Memo("x")) is note_kind
    assert describe(_Note("y"))[0] == "note:y"


def test_an_object_of_no_kind_is_no_document():
    with pytest.raises(ValidationError, match="a document must be a mapping"):
        serialize_document(_Note("x"))  # type: ignore[arg-type]
    assert describe(_Note("x"))[0].startswith("sha256:")
