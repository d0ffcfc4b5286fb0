"""The command's readers against hostile input: each bad document its own refusal.

A JSON Lines file (or a JSON array) of good documents with one hostile entry among them
(a number of a million digits, an amount of 4,400, objects nested 100,000 deep, a byte
that is not UTF-8): the hostile entry is one :class:`Unreadable` at its own line, saying
what is wrong and, where it can, in which field; the documents around it are read as
they are. ``tests/system/test_cli_hostile.py`` runs the command on the same files.
"""

from __future__ import annotations

import io
import json
import tracemalloc

import pytest

from invoicing_async._cli import _scan
from invoicing_async._cli._checking import SHOWN, report
from invoicing_async._cli.inputs import Source, Unreadable, read

GOOD = [{"Series": "A", "Number": n, "Notes": "Παράδειγμα"} for n in range(1, 7)]
MILLION = "1" * 10**6
MIB = 1024 * 1024

#: A hostile entry (its JSON text, as bytes) and what its refusal says.
HOSTILE = {
    "a number of a million digits": (
        b'{"Series": "B", "Number": ' + MILLION.encode() + b"}",
        "Number: is a number of 1,000,000 digits",
    ),
    "an amount of 4,400 digits": (
        b'{"Series": "B", "Details": [{"NetTotal": 1.5}, {"NetTotal": -' + b"9" * 4400 + b"}]}",
        "Details[1].NetTotal: is a number of 4,400 digits",
    ),
    "objects nested 100,000 deep": (
        b'{"a":' * 10**5 + b"1" + b"}" * 10**5,
        "nested too deeply to be read",
    ),
    "arrays nested 100,000 deep": (
        b'{"Details": ' + b"[" * 10**5 + b"]" * 10**5 + b"}",
        "nested too deeply to be read",
    ),
    "a byte that is not UTF-8": (
        b'{"Series": "\xff", "Notes": "\xce\xb1"}',
        "not UTF-8 text (byte 0xFF)",
    ),
}


def _entries(path, **options) -> list[tuple[int, object]]:
    return [(source.line, value) for source, value in read([str(path)], **options)]


def _jsonl(hostile: bytes) -> bytes:
    lines = [json.dumps(d, ensure_ascii=False).encode() for d in GOOD]
    return b"\n".join([*lines[:3], hostile, *lines[3:]]) + b"\n"


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_line_is_its_own_refusal_and_the_others_are_read(tmp_path, name):
    """3 good lines, a hostile one, 3 good ones: six documents at lines 1-3 and 5-7, and
    one Unreadable at line 4 saying what is wrong (and in which field), never an
    exception and never a refusal of the other lines."""
    hostile, why = HOSTILE[name]
    path = tmp_path / "in.jsonl"
    path.write_bytes(_jsonl(hostile))
    got = _entries(path)
    assert [line for line, _ in got] == [1, 2, 3, 4, 5, 6, 7]
    assert [value for line, value in got if line != 4] == GOOD
    refused = got[3][1]
    assert isinstance(refused, Unreadable)
    assert why in refused.why
    assert len(refused.why) < 200  # the text of the number is never repeated


def test_a_byte_that_is_not_utf8_is_named_at_its_column(tmp_path):
    """The refusal of a line with a byte that is not UTF-8 points at its column."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(_jsonl(HOSTILE["a byte that is not UTF-8"][0]))
    refused = _entries(path)[3][1]
    assert refused.column == len('{"Series": "') + 1


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_element_of_an_array_is_its_own_refusal(tmp_path, name):
    """In a .json array (read in small pieces, so the hostile element straddles many of
    them), the hostile element is one Unreadable at its line and the other elements are
    given: the file is valid JSON, only that document cannot be read."""
    hostile, why = HOSTILE[name]
    elements = [json.dumps(d, ensure_ascii=False).encode() for d in GOOD]
    path = tmp_path / "in.json"
    path.write_bytes(b"[\n" + b",\n".join([*elements[:3], hostile, *elements[3:]]) + b"\n]\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_scan, "READ", 4096)
        got = _entries(path)
    assert [line for line, _ in got] == [2, 3, 4, 5, 6, 7, 8]
    assert [value for line, value in got if line != 5] == GOOD
    assert isinstance(got[3][1], Unreadable)
    assert why in got[3][1].why


@pytest.mark.parametrize("name", list(HOSTILE))
def test_standard_input_reads_past_a_hostile_line(name):
    """Standard input (bytes decoded as the interpreter does, strictly) read as JSON
    Lines: the hostile line is refused, even as the first line, and the others read."""
    hostile, why = HOSTILE[name]
    for data in (_jsonl(hostile), hostile + b"\n" + _jsonl(b"")):
        stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
        got = [value for _, value in read(["-"], stdin=stdin)]
        assert [value for value in got if not isinstance(value, Unreadable)] == GOOD
        refused = [value for value in got if isinstance(value, Unreadable)]
        assert why in refused[0].why
        assert len(refused) == 1


def test_a_byte_that_is_not_utf8_in_an_array_on_standard_input():
    """An array on standard input is spooled: a byte that is not UTF-8 survives the
    spool, and is the refusal of its element alone."""
    data = b'[{"a": 1},\n{"b": "\xe9t\xe9"},\n{"c": 3}]'
    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    got = [(source.line, value) for source, value in read(["-"], stdin=stdin)]
    assert got[0] == (1, {"a": 1})
    assert got[2] == (3, {"c": 3})
    assert "not UTF-8 text (byte 0xE9)" in got[1][1].why


def test_a_byte_that_is_not_utf8_between_values_is_said_so(tmp_path):
    """A byte that is not UTF-8 outside any string breaks the file (it is no JSON): one
    refusal at its line and column that says what it is."""
    path = tmp_path / "in.json"
    path.write_bytes(b'[{"a": 1},\n \xff {"b": 2}]')
    [(line, refused)] = _entries(path)
    assert (line, refused.column) == (2, 2)
    assert "not UTF-8 text (byte 0xFF)" in refused.why


def test_a_line_over_the_limit_with_a_byte_that_is_not_utf8_is_measured(tmp_path):
    """A line over the limit is measured in the bytes it has, a byte that is not UTF-8
    counting one: refused for its size, as any line over the limit."""
    line = b'{"n": "' + b"\xff" * 3000 + b'"}'
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a": 1}\n' + line + b"\n" + b'{"b": 2}\n')
    got = _entries(path, max_size=1000)
    assert got[0] == (1, {"a": 1})
    assert got[2] == (3, {"b": 2})
    assert got[1][1].size == len(line)


def test_a_hostile_line_takes_memory_of_its_size(tmp_path):
    """A line of a million-digit number, and one nested 100,000 deep, are refused in
    memory of a few times their size: never an int, a traceback or a text of their
    digits kept."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(_jsonl(HOSTILE["a number of a million digits"][0]))
    tracemalloc.start()
    try:
        got = _entries(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(got) == 7
    assert peak < 8 * MIB, f"peak {peak / MIB:.1f} MiB"


def test_a_document_of_many_problems_is_said_in_eleven_lines():
    """``--check``'s report of a document with 25 lines that are no objects and a
    warning: its first ten problems, then one line counting the 16 others by severity;
    whether it is refused is told by all of them."""
    document = {
        "Issuer": {"Vat": "123456783"}, "Series": "A", "Number": 1,
        "DateIssued": "2026-11-22", "InvoiceTypeCode": "11.1", "Details": [0] * 25,
        "Summaries": {"TotalNetAmount": 0, "TotalVATAmount": 0, "TotalGrossValue": 0},
        "CounterParty": {"Vat": "EL123456789"},
    }  # fmt: skip
    out = io.StringIO()
    assert report(Source("in.jsonl", 4), document, out) is True
    lines = out.getvalue().splitlines()
    assert len(lines) == SHOWN + 1
    assert lines[0].startswith("invoicing-async: in.jsonl:4: warning: CounterParty.Vat: ")
    assert lines[1] == "invoicing-async: in.jsonl:4: Details[0]: must be an object"
    assert lines[-1] == "invoicing-async: in.jsonl:4: and 16 more problems (16 errors, 0 warnings)"
