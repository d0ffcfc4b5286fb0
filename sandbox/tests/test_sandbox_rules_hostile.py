"""The sandbox's document rules against hostile JSON: a 400 saying why, never an exception.

:func:`parse_document` is where every JSON body the sandbox takes is read (documents,
POS payloads, ReSeeds, cancellations); what it lets through, the rest of the provider
can represent and write back.
"""

from __future__ import annotations

import json

import pytest

from invoicing_sandbox._replies import Reply
from invoicing_sandbox._rules import MAX_DEPTH, cancellation_mark, parse_document


def refusal(body: bytes) -> str:
    reply = parse_document(body)
    assert isinstance(reply, Reply), reply
    assert reply.status == 400
    return json.loads(reply.body)["message"]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, f"nested more than {MAX_DEPTH} levels"),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, f"nested more than {MAX_DEPTH} levels"),
        (b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1), "nested more than"),
        (b'{"Series": "\xff"}', "not UTF-8 (byte 12)"),
        (b'{"Series": "\\ud800"}', "half a surrogate pair"),
        (b'{"Series": "\\udc00\\ud800"}', "half a surrogate pair"),
        (b'{"n": ' + b"1" * 5000 + b"}", "malformed JSON"),
        (b'{"n": NaN}', "NaN is not valid JSON"),
    ],
    ids=["array depth", "object depth", "one level too deep", "not utf-8", "high surrogate",
         "reversed pair", "5000 digits", "nan"],
)  # fmt: skip
def test_hostile_json_is_a_400_naming_why(body, why):
    """JSON nested 100,000 deep (which Python's parser meets with RecursionError), text
    that is not UTF-8, a lone surrogate escape (which no record could be written with),
    a number of 5,000 digits: each a 400 saying why."""
    assert why in refusal(body)


def test_what_is_within_the_rules_is_read():
    """MAX_DEPTH levels, and a surrogate pair escaped whole, are read."""
    deep = b'{"a":' * (MAX_DEPTH - 1) + b"1" + b"}" * (MAX_DEPTH - 1)
    assert isinstance(parse_document(deep), dict)
    assert parse_document(b'{"Series": "\\ud83d\\ude00"}') == {"Series": "\U0001f600"}


@pytest.mark.parametrize("mark", ["²", "1" * 5000, "-1", "1.5", ""])
def test_a_mark_that_is_not_one_is_a_400(mark):
    """A mark of a superscript digit, of 5,000 digits (int() raises for it), negative or
    not an integer: a 400, never an exception."""
    reply = cancellation_mark(mark, b"")
    assert isinstance(reply, Reply)
    assert reply.status == 400
