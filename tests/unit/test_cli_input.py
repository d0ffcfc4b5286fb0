"""The command's input readers: streamed, bounded by the largest document, on a deadline.

``invoicing-async submit`` reads JSON Lines and JSON arrays as streams: memory follows
the largest document it takes (``--max-document-size``), not the input, so a one-line
gigabyte is one refused entry at its line, never read whole; and with a deadline,
reading stops when it passes, inside a huge document too. The readers are checked here
against the whole-text parse they replace (the same entries, lines and columns), with
pieces small enough that every value straddles a boundary.
"""

from __future__ import annotations

import io
import json
import re
import tracemalloc

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from invoicing_async._cli import _scan
from invoicing_async._cli import inputs as _input
from invoicing_async._cli.inputs import NotRead, Unreadable, read

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MIB = 1024 * 1024


@pytest.fixture
def tiny_pieces(monkeypatch):
    """Read a few characters at a time: every value is cut by the window somewhere."""
    monkeypatch.setattr(_scan, "READ", 5)
    monkeypatch.setattr(_scan, "SKIP", 3)


def entries(path, **options) -> list[tuple[int, object]]:
    """``(line, document or Unreadable/NotRead)`` of one file, as ``read`` gives them."""
    return [(source.line, value) for source, value in read([str(path)], **options)]


# --- the whole-text parse the streaming readers replace: the oracle ----------------------

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def _oracle(text: str) -> list[tuple[int, object]]:
    """What the former reader gave for a .json text it held whole (its algorithm)."""

    def line_of(position: int) -> int:
        return text.count("\n", 0, position) + 1

    def skip(position: int) -> int:
        return _SPACE.match(text, position).end()

    def invalid(message: str, position: int) -> list[tuple[int, object]]:
        column = position - text.rfind("\n", 0, position)
        return [(line_of(position), Unreadable(f"invalid JSON ({message})", column))]

    start = skip(0)
    if start == len(text):
        return []
    elements: list[tuple[int, object]] = []
    try:
        if text[start] == "[":
            position = skip(start + 1)
            if text.startswith("]", position):
                position += 1
            else:
                while True:
                    value, end = _DECODER.raw_decode(text, position)
                    elements.append((position, value))
                    position = skip(end)
                    if text.startswith(",", position):
                        position = skip(position + 1)
                    elif text.startswith("]", position):
                        position += 1
                        break
                    else:
                        return invalid("Expecting ',' delimiter", position)
        else:
            value, position = _DECODER.raw_decode(text, start)
            elements.append((start, value))
    except json.JSONDecodeError as exc:
        return invalid(exc.msg, exc.pos)
    position = skip(position)
    if position != len(text):
        return invalid("Extra data after the JSON value", position)
    if text[start] == "[" and elements and not any(isinstance(v, dict) for _, v in elements):
        kinds = {_input._KINDS.get(_input._kind(v), "nulls") for _, v in elements}
        why = f"an array of {' and '.join(sorted(kinds))}, not of JSON objects: a document is an object"
        return [(line_of(start), Unreadable(why))]
    return [(line_of(p), v if isinstance(v, dict) else _input._not_object(v)) for p, v in elements]


_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_documents = st.dictionaries(st.text(max_size=6), _values, max_size=4)


@st.composite
def _json_texts(draw) -> str:
    """A .json text: an array (or one value) with any whitespace, perhaps broken."""
    items = draw(st.lists(_documents | _values, max_size=6))
    space = st.sampled_from(["", " ", "\n", "\n  ", "\t", "\r\n"])
    if draw(st.booleans()):
        text = draw(space) + "[" + draw(space)
        text += ("," + draw(space)).join(
            json.dumps(i, indent=draw(st.sampled_from([None, 1]))) for i in items
        )
        text += draw(space) + "]" + draw(space)
    else:
        text = draw(space) + json.dumps(items[0] if items else {}) + draw(space)
    if draw(st.integers(0, 3)) == 0 and text:  # break it: cut it, or put a character in
        at = draw(st.integers(0, len(text)))
        text = (
            text[:at]
            + draw(st.sampled_from(["", ",", "]", "x", '"', "{", "\\"]))
            + (text[at:] if draw(st.booleans()) else "")
        )
    return text


@FUZZ
@given(_json_texts())
@example('[\n  {"Series": "A",\n   "Number" 7}\n]\n')
@example("[1, 2, 3]")
@example('[{"a": 1}, 12345678901234567890, tru')
@example('{"a": "\\u12')
def test_arrays_read_in_pieces_give_what_the_whole_text_gives(tmp_path_factory, text):
    """A .json text read a few characters at a time gives the entries (documents,
    refusals, and where each is: line and column) that parsing it whole gave."""
    path = tmp_path_factory.mktemp("json") / "in.json"
    path.write_text(text, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_scan, "READ", 5)
        patch.setattr(_scan, "SKIP", 3)
        assert entries(path) == _oracle(path.read_text(encoding="utf-8-sig"))


@FUZZ
@given(st.lists(_documents | _values | st.just("{not json"), max_size=6), st.booleans())
def test_json_lines_read_in_pieces(tmp_path_factory, items, blank):
    """JSON Lines read in pieces: one entry per non-blank line, at its line number."""
    lines = [i if isinstance(i, str) and i.startswith("{not") else json.dumps(i) for i in items]
    if blank:
        lines.insert(0, "")
    path = tmp_path_factory.mktemp("jsonl") / "in.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expected = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            expected.append(number)
    got = entries(path)
    assert [line for line, _ in got] == expected
    for (_, value), line in zip(got, [line for line in lines if line.strip()], strict=True):
        parsed = None if line.startswith("{not") else json.loads(line)
        assert value == parsed if isinstance(parsed, dict) else isinstance(value, Unreadable)


# --- documents larger than the limit ----------------------------------------------------


def test_a_line_over_the_limit_is_refused_at_its_line_with_its_size(tmp_path, tiny_pieces):
    """A JSON Lines line over the limit is one refused entry at its line number, naming
    its size in bytes (UTF-8: "é" counts 2) and the limit; the lines after it are read."""
    huge = json.dumps({"Notes": "é" * 600}, ensure_ascii=False)
    path = tmp_path / "in.jsonl"
    path.write_text(f'{{"a": 1}}\n{huge}\n{{"b": 2}}\n', encoding="utf-8")
    got = entries(path, max_size=1000)
    assert got[0] == (1, {"a": 1})
    assert got[2] == (3, {"b": 2})
    line, refused = got[1]
    size = len(huge.encode())
    assert (line, refused.size) == (2, size)
    assert f"{size:,} bytes" in refused.why
    assert "1,000 bytes" in refused.why


def test_a_line_of_few_characters_but_many_bytes_is_measured_in_bytes(tmp_path):
    """The limit counts bytes: 600 characters of 2 bytes each exceed 1,000 bytes."""
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"n": "é" * 600}, ensure_ascii=False) + "\n", encoding="utf-8")
    [(_, refused)] = entries(path, max_size=1000)
    assert isinstance(refused, Unreadable)
    assert refused.size > 1000


@pytest.mark.parametrize(
    "huge",
    [
        '{"Notes": "' + 'x\\\\y\\"' * 400 + '", "k": [1, {"a": "]}"}]}',
        '"' + "q" * 3000 + '\\\\"',
        "1" + "5" * 3000,
        "[" + ",".join(["[1, {}]"] * 500) + "]",
    ],
    ids=["object", "string", "number", "array"],
)
def test_an_element_over_the_limit_is_skipped_and_the_others_read(tmp_path, tiny_pieces, huge):
    """An array element over the limit (an object with escaped quotes and brackets in
    its strings, a string ending in a backslash, a number, an array) is skipped
    without being parsed: one refused entry at its line with its exact size, and the
    elements after it are read from where it ends."""
    text = '[\n  {"a": 1},\n  ' + huge + ',\n  {"b": [1, 2, {"c": "d\\"]"}]}\n]\n'
    json.loads(text)  # valid JSON, so only the size is refused
    path = tmp_path / "in.json"
    path.write_text(text)
    got = entries(path, max_size=1000)
    assert got[0] == (2, {"a": 1})
    assert got[2] == (4, {"b": [1, 2, {"c": 'd"]'}]})
    assert got[1][0] == 3
    assert got[1][1].size == len(huge.encode())


def test_memory_follows_the_limit_not_the_document(tmp_path):
    """Reading a 64 MiB line and a 64 MiB array element with a 1 MiB limit allocates a
    few MiB, not the document: neither is ever held whole."""
    line = tmp_path / "in.jsonl"
    array = tmp_path / "in.json"
    with line.open("w") as out:
        out.write('{"a": 1}\n{"Notes": "')
        for _ in range(64):
            out.write("x" * MIB)
        out.write('"}\n{"b": 2}\n')
    with array.open("w") as out:
        out.write('[{"a": 1},\n{"Notes": "')
        for _ in range(64):
            out.write("x" * MIB)
        out.write('"},\n{"b": 2}]\n')
    for path in (line, array):
        tracemalloc.start()
        try:
            got = entries(path, max_size=MIB)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert [type(value).__name__ for _, value in got] == ["dict", "Unreadable", "dict"]
        assert got[1][1].size == 64 * MIB + len('{"Notes": ""}')
        assert peak < 8 * MIB, f"{path.name}: peak {peak / MIB:.1f} MiB"


# --- the deadline -------------------------------------------------------------------------


class Ticks:
    """A clock that moves one unit each time it is read: a deadline of N is N readings."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> float:
        self.now += 1
        return self.now


def _huge_between(path, *, array: bool) -> None:
    """Five documents, a 64 MiB one, five more (lines 1-5, 6, 7-11)."""
    documents = [json.dumps({"n": n}) for n in range(10)]
    with path.open("w") as out:
        out.write("[" if array else "")
        out.write((",\n" if array else "\n").join(documents[:5]) + (",\n" if array else "\n"))
        out.write('{"Notes": "')
        for _ in range(64):
            out.write("x" * MIB)
        out.write('"}' + (",\n" if array else "\n"))
        out.write((",\n" if array else "\n").join(documents[5:]) + ("]\n" if array else "\n"))


def test_the_deadline_stops_reading_inside_a_huge_line(tmp_path):
    """Reading stops when the deadline passes, inside a 64 MiB line: the documents read
    before it are given, then one NotRead entry at the huge line, and nothing after."""
    path = tmp_path / "in.jsonl"
    _huge_between(path, array=False)
    clock = Ticks()
    got = entries(path, max_size=MIB, deadline=20, clock=clock)
    assert got[:5] == [(n + 1, {"n": n}) for n in range(5)]
    assert got[5:] == [(6, NotRead("the deadline passed before it was read"))]
    assert clock.now < 64  # stopped well inside the huge line


def test_the_deadline_while_an_array_is_checked_sends_none_of_it(tmp_path):
    """A deadline passing while an array is checked (its first reading) stops there: the
    file is one NotRead entry from its first line, none of its documents given; the
    other sources named are NotRead too, without being opened."""
    path = tmp_path / "in.json"
    _huge_between(path, array=True)
    other = tmp_path / "other.jsonl"
    other.write_text('{"a": 1}\n')
    got = list(read([str(path), str(other)], max_size=MIB, deadline=20, clock=Ticks()))
    assert [(source.file, source.line, type(value)) for source, value in got] == [
        (str(path), 1, NotRead),
        (str(other), 1, NotRead),
    ]


def test_the_deadline_while_an_array_is_given(tmp_path):
    """A deadline passing inside the huge element while the checked array is given:
    the documents before it, then NotRead at its line."""
    path = tmp_path / "in.json"
    _huge_between(path, array=True)
    checked = Ticks()
    entries(path, max_size=MIB, clock=checked)  # no deadline: how many readings a pass takes
    clock = Ticks()
    got = entries(path, max_size=MIB, deadline=checked.now + 110, clock=clock)
    assert [value for _, value in got[:5]] == [{"n": n} for n in range(5)]
    assert got[5:] == [(6, NotRead("the deadline passed before it was read"))]


def test_standard_input_array_is_spooled_not_held(tmp_path):
    """An array on standard input (not JSON Lines) is spooled to a temporary file and
    read like a file: a huge element is refused, the others given."""
    text = '[{"a": 1},\n"' + "x" * 5000 + '",\n{"b": 2}]'
    got = [(s.line, v) for s, v in read(["-"], stdin=io.StringIO(text), max_size=1000)]
    assert got[0] == (1, {"a": 1})
    assert (got[1][0], got[1][1].size) == (2, 5002)
    assert got[2] == (3, {"b": 2})
