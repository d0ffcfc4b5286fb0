"""Many issuers' credentials for the command line: the file's formats, its errors, a resolver.

An error about a credentials file names the file, the line and the TIN, never a key.
"""

from __future__ import annotations

import json
import logging
import os

import pytest

from invoicing_async._credentials import (
    CredentialsFile,
    issuer_credentials,
    load_resolver,
    read_credentials,
)

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
        ("094019245,key-of-the-first-shop\n094019245,another-key\n", "line 2: '094019245' again"),
        ('{"094019245": ["key-of-the-first-shop"]}', "API key of '094019245' is not a string"),
        ('["key-of-the-first-shop"]', "a JSON object of TIN to API key"),
        ("094019245,key-of-the-first-shop\n800123456,\n", "an empty TIN or API key"),
        ("# nothing\n", "names no issuer"),
    ],
)
def test_a_malformed_file_is_named_with_its_line_and_never_a_key(tmp_path, text, said):
    """Each malformed file is a ValueError saying what and where (file, line, TIN),
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
    so the operator fixes the file once, and no key of any line is shown."""
    said = refusal_of(
        tmp_path / "keys.csv",
        "094019245,key-of-the-first-shop\n"
        "800123456,key-of-the-second,extra\n"
        "800123457,key-of-the-third\n"
        "800123458,\n"
        "094019245,another-key\n",
    )
    assert "line 2: expected TIN,API key" in said
    assert "line 4:" in said
    assert "'800123458'" in said
    assert "line 5: '094019245' again" in said
    assert "line 3" not in said
    for key in ("key-of-the-first-shop", "key-of-the-second", "key-of-the-third", "another-key"):
        assert key not in said


def test_every_bad_issuer_of_a_json_file_is_reported(tmp_path):
    """A JSON object with two keys that are not strings and one empty key: the error
    names the three TINs, never a key."""
    said = refusal_of(
        tmp_path / "keys.json",
        json.dumps({"094019245": 1, "800123456": "good-key", "800123457": [], "800123458": ""}),
    )
    assert "'094019245'" in said
    assert "'800123457'" in said
    assert "'800123458'" in said
    assert "800123456" not in said
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


def test_a_credentials_file_replaced_while_in_use_is_read_again(tmp_path):
    """A credentials file as a running worker sees it: replaced by an atomic rename
    (the new key written to a temporary file, renamed over the old one), the next look
    up gives the new key; a replacement that cannot be read (a malformed line) keeps
    the last good credentials in use, and is read as soon as it is fixed."""
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"094019245": "old-key"}), encoding="utf-8")
    path.chmod(0o600)
    credentials = CredentialsFile(path)
    assert credentials.get("094019245") == "old-key"
    revision = credentials.revision

    def replace(text: str) -> None:
        temporary = tmp_path / "keys.json.new"
        temporary.write_text(text, encoding="utf-8")
        temporary.chmod(0o600)
        temporary.replace(path)  # an atomic rename

    replace(json.dumps({"094019245": "new-key", "800123456": "another"}))
    assert credentials.refresh() is True
    assert credentials.get("094019245") == "new-key"
    assert credentials.get("800123456") == "another"
    assert credentials.revision > revision
    assert credentials.refresh() is False  # unchanged since
    replace('{"094019245": ')  # half a file
    assert credentials.refresh() is False
    assert credentials.get("094019245") == "new-key"
    replace(json.dumps({"094019245": "newest-key"}))
    assert credentials.refresh() is True
    assert credentials.get("094019245") == "newest-key"
