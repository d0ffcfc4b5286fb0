"""Many issuers' credentials for the command line: the file's formats, its errors, a resolver.

An error about a credentials file names the file, the line and the TIN, never a key.
"""

from __future__ import annotations

import json

import pytest

from invoicing_async._credentials import issuer_credentials, load_resolver, read_credentials

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
