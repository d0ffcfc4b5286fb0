"""Many issuers' credentials for the command line: the file's formats, its errors, a resolver.

An error about a credentials file names the file, the line and the column, never a value
of the file (a key may stand where a TIN goes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading

import pytest

from invoicing_async._client import credentials as _credentials
from invoicing_async._client.credentials import CredentialsFile, issuer_credentials, load_resolver
from invoicing_async._client.credfile import read_credentials

KEYS = {"094019245": "key-of-the-first-shop", "800123456": 'key,of "the" second'}


def test_a_json_object_and_csv_lines_give_the_same_credentials(tmp_path):
    """A JSON object ``{tin: key}``, and CSV lines (a header, a comment, blank lines, a key
    quoted because it holds a comma and quotes) read as the same mapping."""
    as_json = tmp_path / "keys.json"
    as_json.write_text(json.dumps(KEYS), encoding="utf-8")
    as_csv = tmp_path / "keys.csv"
    as_csv.write_text(
        "tin,api_key\n# the shops\n\n094019245,key-of-the-first-shop\n"
        '800123456,"key,of ""the"" second"\n',
        encoding="utf-8",
    )
    assert read_credentials(as_json) == KEYS
    assert read_credentials(as_csv) == KEYS


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("094019245,key-of-the-first-shop,extra\n", "line 1: expected TIN,API key"),
        (
            "094019245,key-of-the-first-shop\n094019245,another-key\n",
            "line 2, column 1: the TIN of line 1 again",
        ),
        ('{"094019245": ["key-of-the-first-shop"]}', "column 15: the API key is not a string"),
        ('["key-of-the-first-shop"]', "a JSON object of TIN to API key"),
        ("094019245,key-of-the-first-shop\n800123456,\n", "line 2, column 2: the API key is"),
        ("# nothing\n", "names no issuer"),
    ],
)
def test_a_malformed_file_is_named_with_its_line_and_never_a_key(tmp_path, text, said):
    """Each malformed file is a ValueError saying what and where (file, line, column),
    without the key of any line."""
    path = tmp_path / "keys.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="credentials file") as refused:
        read_credentials(path)
    assert said in str(refused.value)
    assert str(path) in str(refused.value)
    assert "key-of-the-first-shop" not in str(refused.value)
    assert "another-key" not in str(refused.value)


def test_a_missing_file_is_named(tmp_path):
    """A file that is not there: the error names it and says why."""
    with pytest.raises(ValueError, match=r"cannot read the credentials file .*missing\.json"):
        read_credentials(tmp_path / "missing.json")


def test_the_file_option_wins_then_the_file_variable_then_the_resolver(tmp_path):
    """``--credentials`` over ``INVOICING_CREDENTIALS_FILE`` over the resolver variable;
    none of them: ``None`` (one issuer's client)."""
    given = tmp_path / "given.json"
    given.write_text(json.dumps({"094019245": "a"}), encoding="utf-8")
    named = tmp_path / "named.json"
    named.write_text(json.dumps({"800123456": "b"}), encoding="utf-8")
    environ = {
        "INVOICING_CREDENTIALS_FILE": str(named),
        "INVOICING_CREDENTIALS_RESOLVER": "json:loads",
    }
    assert issuer_credentials(environ, file=str(given)) == {"094019245": "a"}
    assert issuer_credentials(environ) == {"800123456": "b"}
    assert issuer_credentials({"INVOICING_CREDENTIALS_RESOLVER": "json:loads"}) is json.loads
    assert issuer_credentials({}) is None


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("json.loads", "expected package.module:function"),
        ("no_such_module_here:f", "cannot import no_such_module_here"),
        ("json:no_such_function", "json has no no_such_function"),
        ("json:__doc__", "is not callable"),
    ],
)
def test_a_resolver_that_cannot_be_loaded_says_why(spec, said):
    """A malformed, missing or uncallable resolver name is a ValueError saying which."""
    with pytest.raises(ValueError, match="INVOICING_CREDENTIALS_RESOLVER") as refused:
        load_resolver(spec)
    assert said in str(refused.value)


def refusal_of(path, text: str) -> str:
    """What reading a credentials file of ``text`` is refused with."""
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="credentials file") as refused:
        read_credentials(path)
    return str(refused.value)


def test_every_malformed_line_is_reported_not_only_the_first(tmp_path):
    """A CSV file with three bad lines among good ones: one error names each of them
    (line 2: a third field, line 4: an empty key, line 5: a TIN again with another key),
    so the operator fixes the file once, and no TIN or key of any line is shown."""
    said = refusal_of(
        tmp_path / "keys.csv",
        "094019245,key-of-the-first-shop\n"
        "800123456,key-of-the-second,extra\n"
        "800123457,key-of-the-third\n"
        "800123458,\n"
        "094019245,another-key\n",
    )
    assert "line 2: expected TIN,API key" in said
    assert "line 4, column 2: the API key is empty" in said
    assert "line 5, column 1: the TIN of line 1 again" in said
    assert "line 3" not in said
    for key in ("key-of-the-first-shop", "key-of-the-second", "key-of-the-third", "another-key"):
        assert key not in said
    assert "80012345" not in said


def test_every_bad_issuer_of_a_json_file_is_reported(tmp_path):
    """A JSON object with two keys that are not strings and one empty key, a member a
    line: the error says where each of the three is, never a TIN nor a key."""
    said = refusal_of(
        tmp_path / "keys.json",
        json.dumps(
            {"094019245": 1, "800123456": "good-key", "800123457": [], "800123458": ""},
            indent=1,
        ),
    )
    assert "line 2, column 15: the API key is not a string" in said
    assert "line 4, column 15: the API key is not a string" in said
    assert "line 5, column 15: the API key is empty" in said
    assert "line 3" not in said
    assert not any(tin in said for tin in ("094019245", "800123456", "800123457", "800123458"))
    assert "good-key" not in said


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX file modes")
def test_a_credentials_file_others_can_read_is_used_with_a_warning(tmp_path, caplog):
    """A credentials file of mode 0644 (readable by every user of the machine) is read,
    with one WARNING naming the file, its mode and the fix (chmod 600); a 0600 file is
    read without a word. The warning shows no key."""
    open_file = tmp_path / "open.json"
    open_file.write_text(json.dumps(KEYS), encoding="utf-8")
    open_file.chmod(0o644)
    private = tmp_path / "private.json"
    private.write_text(json.dumps(KEYS), encoding="utf-8")
    private.chmod(0o600)
    with caplog.at_level(logging.WARNING, logger="invoicing_async"):
        assert read_credentials(private) == KEYS
        assert caplog.records == []
        assert read_credentials(open_file) == KEYS
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING
    message = warning.getMessage()
    assert str(open_file) in message
    assert "0644" in message
    assert f"chmod 600 {open_file}" in message
    assert all(key not in message for key in KEYS.values())


class Clock:
    """The settle rule's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def replace(path, text: str) -> None:
    """Write ``text`` as operators and secret managers do: a new file renamed over."""
    temporary = path.with_name(path.name + ".new")
    temporary.write_text(text, encoding="utf-8")
    temporary.chmod(0o600)
    temporary.replace(path)  # an atomic rename


def private(path, text: str):
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


async def settled(credentials: CredentialsFile, clock: Clock) -> bool:
    """Look (the change is seen), let the settle interval pass, look again (it is read)."""
    first = await credentials.look()
    clock.now += 0.25
    return await credentials.look() or first


async def test_a_credentials_file_replaced_while_in_use_is_read_again(tmp_path):
    """A credentials file as a running worker sees it: replaced by an atomic rename, it
    is read once it has stayed the same for the settle interval, and lookups give the
    new keys; a replacement that cannot be read (half a JSON object) keeps the last good
    credentials in use, and is read as soon as it is fixed."""
    path = private(tmp_path / "keys.json", json.dumps({"094019245": "old-key"}))
    clock = Clock()
    credentials = CredentialsFile(path, clock=clock)
    assert credentials.get("094019245") == "old-key"
    revision = credentials.revision

    replace(path, json.dumps({"094019245": "new-key", "800123456": "another"}))
    assert await credentials.look() is False  # seen, not read: it may still change
    assert credentials.get("094019245") == "old-key"
    clock.now += 0.25
    assert await credentials.look() is True
    assert credentials.get("094019245") == "new-key"
    assert credentials.get("800123456") == "another"
    assert credentials.revision > revision
    assert await credentials.look() is False  # unchanged since
    replace(path, '{"094019245": ')  # half a file
    assert await settled(credentials, clock) is False
    assert credentials.get("094019245") == "new-key"
    replace(path, json.dumps({"094019245": "newest-key"}))
    assert await settled(credentials, clock) is True
    assert credentials.get("094019245") == "newest-key"


async def test_a_file_rewritten_in_place_is_read_only_once_its_writer_is_done(tmp_path):
    """A CSV file rewritten in place (not renamed) by a writer that writes a line in two
    writes: a look between the two writes never takes the key cut short (before: the
    provider received ``client_secret='K1-000024-'``). A version is read only once it
    has stayed the same for the settle interval; a last line without its newline only
    after ``settle_incomplete`` (a writer slow to finish its line), so a file that ends
    without a newline is still read in the end."""
    path = private(tmp_path / "keys.csv", "094019245,K0-000024-old-key\n")
    clock = Clock()
    credentials = CredentialsFile(path, clock=clock, settle=0.25, settle_incomplete=2.0)
    with path.open("w", encoding="utf-8") as file:  # the same file: truncated, rewritten
        file.write("094019245,K1-000024-")
        file.flush()
        assert await credentials.look() is False  # between the writes: seen, not read
        clock.now += 0.5  # the writer is slow: the version settles, its line unfinished
        assert await credentials.look() is False
        assert credentials["094019245"] == "K0-000024-old-key"
        file.write("ABCDEF\n")  # the second write
    assert await credentials.look() is False  # a new version: it settles again
    assert credentials["094019245"] == "K0-000024-old-key"
    clock.now += 0.25
    assert await credentials.look() is True
    assert credentials["094019245"] == "K1-000024-ABCDEF"

    private(path, "094019245,K2-without-a-newline")  # hand-written, no final newline
    assert await settled(credentials, clock) is False
    clock.now += 2.0
    assert await credentials.look() is True
    assert credentials["094019245"] == "K2-without-a-newline"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
async def test_a_named_pipe_in_the_files_place_is_refused_never_waited_for(tmp_path, caplog):
    """A credentials file replaced by a symbolic link to a named pipe (nobody writes to
    it): a look returns at once, keeps the last good credentials and says why in one
    WARNING naming the file (before: the read waited for a writer forever, on the event
    loop, and nothing was sent any more); given at start, it is refused at once."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    path = private(tmp_path / "keys.json", json.dumps({"094019245": "good-key"}))
    clock = Clock()
    credentials = CredentialsFile(path, clock=clock)
    link = tmp_path / "link"
    link.symlink_to(pipe)
    link.replace(path)
    with caplog.at_level(logging.WARNING, logger="invoicing_async"):
        assert await asyncio.wait_for(settled(credentials, clock), 10) is False
        assert await asyncio.wait_for(settled(credentials, clock), 10) is False
    assert credentials["094019245"] == "good-key"
    [warning] = [r.getMessage() for r in caplog.records if "not a regular file" in r.getMessage()]
    assert str(path) in warning
    opening = asyncio.ensure_future(asyncio.to_thread(CredentialsFile, pipe))
    try:
        with pytest.raises(ValueError, match="not a regular file"):
            await asyncio.wait_for(asyncio.shield(opening), 10)
    finally:
        if not opening.done():  # today's code waits for a writer: be one, to end it
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
            with contextlib.suppress(Exception):
                await opening


def test_a_file_larger_than_the_limit_is_refused(tmp_path):
    """A credentials file larger than the limit is refused, saying so, unread."""
    path = private(tmp_path / "keys.csv", "094019245,key\n" * 1000)
    with pytest.raises(ValueError, match="larger than 1,000 bytes"):
        CredentialsFile(path, limit=1000)


async def test_reloads_meanwhile_make_one_more_read_in_a_thread(tmp_path, monkeypatch):
    """100 reloads (SIGHUPs) of a file of 100,000 lines while one read is under way: two
    reads in all, both in a thread other than the event loop's (before: each SIGHUP read
    the file on the loop, 14.4 s of a stalled worker); lookups meanwhile answer from the
    credentials held, never reading."""
    lines = "".join(f"{800_000_000 + n},key-{n}\n" for n in range(100_000))
    path = private(tmp_path / "keys.csv", lines)
    credentials = CredentialsFile(path)
    threads: list[int] = []
    read = _credentials.read_file

    def counted(*args, **kwargs):
        threads.append(threading.get_ident())
        return read(*args, **kwargs)

    monkeypatch.setattr(_credentials, "read_file", counted)
    reloads = [credentials.reload() for _ in range(100)]
    assert credentials["800000007"] == "key-7"
    assert not any(reload.done() for reload in reloads)
    await asyncio.gather(*reloads)
    assert len(threads) == 2
    assert threading.get_ident() not in threads


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("SECRET-odd-csv-7788,\n", "line 1, column 2: the API key is empty"),
        (",SECRET-odd-csv-7788\n", "line 1, column 1: the TIN is empty"),
        ('{"SECRET-odd-json-7788": 7}', "line 1, column 26: the API key is not a string"),
        ('{\n  "SECRET-odd-json-7788": ""\n}', "line 2, column 27: the API key is empty"),
        ('{"SECRET-odd-json-7788 ": "x"}', "line 1, column 2: spaces around the TIN"),
        (
            '{"094019245": "SECRET-odd-json-7788",\n "094019245": "other"}',
            "line 2, column 2: the TIN of line 1, column 2 again, with another API key",
        ),
        (
            "094019245,SECRET-odd-csv-7788\n094019245,other\n",
            "line 2, column 1: the TIN of line 1 again, with another API key",
        ),
    ],
)
def test_a_key_written_where_the_tin_goes_is_never_printed(tmp_path, text, said):
    """A key written in the TIN's place (the columns swapped, a key on its own) is a
    value the error must not echo: the error names the line and the column (the field,
    in a CSV file; the character, in JSON) and what is wrong there, never a TIN or a key
    (before: ``line 1: issuer 'SECRET-odd-csv-7788': an empty TIN or API key``)."""
    refused = refusal_of(tmp_path / "keys.txt", text)
    assert said in refused
    assert "SECRET" not in refused
    assert "094019245" not in refused


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b'{"094019245": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "column 15: a value nested"),
        (b"094019245,key-one\n800123456,\xff\xfe\n", "line 2: not UTF-8 text"),
        (b"094019245,SECRET-one\n" + b"800123456,\n" * 100_000, "and 99,980 more"),
        (b'{"094019245": "SECRET-one"} {"more": 1}', "column 29: nothing may follow"),
    ],
)
def test_a_hostile_file_is_refused_saying_where_in_linear_time(tmp_path, data, said):
    """Hostile credentials files: JSON nested 100,000 levels deep, bytes that are not
    UTF-8, 100,000 bad lines (20 said, the rest counted), a second JSON value: each a
    ValueError saying where, never a value of the file."""
    path = tmp_path / "keys.txt"
    path.write_bytes(data)
    with pytest.raises(ValueError, match="credentials file") as refused:
        read_credentials(path)
    assert said in str(refused.value)
    assert "SECRET" not in str(refused.value)


def test_a_line_separator_inside_a_csv_field_does_not_end_its_line(tmp_path):
    """U+2028 (a line separator to ``str.splitlines``, not to CSV) inside a field: the
    line stays one line, and the key keeps it (the pool refuses such a key before any
    request: a header cannot carry it)."""
    path = private(tmp_path / "keys.csv", "094019245,key\u2028rest\n800123456,other\n")
    assert read_credentials(path) == {"094019245": "key\u2028rest", "800123456": "other"}
