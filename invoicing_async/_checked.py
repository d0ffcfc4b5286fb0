"""Documents checked where they enter: the rules of :mod:`._checks` applied to any kind.

A document is a mapping, a typed document (:mod:`._doctypes`), or its JSON as bytes or
text; :func:`problems_of` reads each as the provider would (the JSON form) and returns
every problem the rules find. :func:`require_valid` raises
:class:`~invoicing_async.InvalidDocumentError` when one of them is an error: a
:class:`~invoicing_async.Deferral` calls it for each sale, ``outbox.enqueue(...,
check=True)`` for each document. :class:`Checked` marks a document to be checked where
it is serialised (:func:`~._documents.serialize_document`), so that a batch's document
the provider would refuse ends refused, unsent, in its own outcome.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from ._checks import check_document, errors_of
from ._convert import document_to_json
from ._doctypes import DocumentBase
from ._errors import InvalidDocumentError
from ._problems import SOURCES, Problem

__all__ = ["Checked", "json_form", "problems_of", "require_valid"]


@attrs.frozen(slots=True)
class Checked:
    """A document checked before it is sent (see :func:`invoicing_async.documents.checked`).

    Its identity is the document's; serialising it raises
    :class:`~invoicing_async.InvalidDocumentError` when the provider would refuse it.
    """

    document: Any = attrs.field(repr=False)


_NOT_AN_OBJECT = Problem("", "the document must be a JSON object", source=SOURCES["shape"])


def json_form(document: Any) -> Any:
    """What the provider reads of ``document``: the JSON object (a mapping) it is.

    A typed document's JSON, the object JSON bytes or text hold; anything else as it is
    (the rules then say it is not a JSON object).
    """
    if isinstance(document, Checked):
        document = document.document
    if isinstance(document, DocumentBase):
        return document_to_json(document)
    if isinstance(document, (bytes, bytearray, memoryview, str)):
        try:
            return json.loads(bytes(document) if not isinstance(document, str) else document)
        except (ValueError, RecursionError):
            return None
    return document


def problems_of(document: Any) -> list[Problem]:
    """Every problem of ``document`` (any kind): errors and warnings, in the rules' order."""
    data = json_form(document)
    if not isinstance(data, Mapping):
        return [_NOT_AN_OBJECT]
    return check_document(data)


def require_valid(document: Any) -> Any:
    """``document``'s JSON form, unless the provider would refuse it.

    :raises InvalidDocumentError: with the errors the rules found (warnings never
        refuse).
    """
    data = json_form(document)
    if not isinstance(data, Mapping):
        raise InvalidDocumentError([_NOT_AN_OBJECT])
    errors = errors_of(check_document(data))
    if errors:
        raise InvalidDocumentError(errors)
    return data
