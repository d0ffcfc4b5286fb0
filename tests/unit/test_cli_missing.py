"""The command without the sandbox distribution: ``demo`` and ``sandbox`` say what to
install, and a command that does not exist is answered without hidden names.

The sandbox's commands are plugged in through an entry point; these tests take the
plugins away (as an environment with the client alone has none) and run ``main``.
"""

from __future__ import annotations

import importlib.metadata
import json
import shlex
import sys

import pytest

from invoicing_async._cli import command as _main
from invoicing_async._cli.command import main


@pytest.fixture
def client_alone(monkeypatch):
    """The command as installed without invoicing-async-sandbox: no plugins."""
    monkeypatch.setattr(_main, "_plugins", list)


class FakeDistribution:
    """The client's install record, as ``importlib.metadata`` reads it."""

    version = "1.2.3"

    def __init__(self, direct_url: dict | None) -> None:
        self._text = None if direct_url is None else json.dumps(direct_url)

    def read_text(self, name):
        return self._text if name == "direct_url.json" else None


def installed_from(monkeypatch, direct_url: dict | None) -> None:
    monkeypatch.setattr(
        importlib.metadata, "distribution", lambda _name: FakeDistribution(direct_url)
    )


@pytest.mark.parametrize("command", ["demo", "sandbox"])
def test_a_sandbox_command_without_the_sandbox_says_what_to_install(client_alone, capsys, command):
    """`invoicing-async demo` (or `sandbox`) with the client alone exits 2 with one line
    that names the sandbox distribution and a pip command, instead of argparse's list of
    choices (which held the hidden `journal` alias)."""
    status = main([command, "--count", "3"] if command == "demo" else [command])
    assert status == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"'{command}' comes with the sandbox distribution, invoicing-async-sandbox" in err
    assert "-m pip install" in err
    assert "journal" not in err
    assert "choose from" not in err


def test_options_before_the_command_do_not_hide_it(client_alone, capsys):
    """`invoicing-async -v demo` is answered the same way: options of the main parser
    come before the command word."""
    assert main(["-vv", "demo"]) == 2
    assert "invoicing-async-sandbox" in capsys.readouterr().err


def test_an_unknown_command_lists_the_offered_commands_only(client_alone, capsys):
    """A word that is no command gets the commands --help offers (no hidden old names),
    exit status 2."""
    assert main(["sumbit", "x.json"]) == 2
    err = capsys.readouterr().err
    assert "there is no command 'sumbit'" in err
    assert "submit, " in err
    assert "journal" not in err


def test_help_without_the_sandbox_says_the_demo_needs_it(client_alone, capsys):
    """--help still suggests starting with the demo, and says it needs the sandbox."""
    with pytest.raises(SystemExit) as stopped:
        main(["--help"])
    assert stopped.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Start with 'invoicing-async demo' (it comes with invoicing-async-sandbox" in out
    assert "demo" not in out.split("positional arguments", 1)[1].split("options:", 1)[0]


def test_installed_from_a_checkout_the_advice_names_its_sandbox_folder(
    client_alone, capsys, monkeypatch, tmp_path
):
    """A client installed from a checkout (editable or not) is told to install that
    checkout's sandbox folder, the same way, with this environment's Python."""
    (tmp_path / "sandbox").mkdir()
    (tmp_path / "sandbox" / "pyproject.toml").write_text("[project]\n")
    python = shlex.quote(sys.executable)
    installed_from(monkeypatch, {"url": tmp_path.as_uri(), "dir_info": {}})
    assert main(["demo"]) == 2
    assert f"with: {python} -m pip install {tmp_path / 'sandbox'}\n" in capsys.readouterr().err
    installed_from(monkeypatch, {"url": tmp_path.as_uri(), "dir_info": {"editable": True}})
    assert main(["demo"]) == 2
    assert f"with: {python} -m pip install -e {tmp_path / 'sandbox'}\n" in capsys.readouterr().err


def test_installed_from_a_wheel_the_advice_names_the_sandbox_wheel_beside_it(
    client_alone, capsys, monkeypatch, tmp_path
):
    """A client installed from a wheel is told to install the sandbox wheel of the same
    version lying beside it; without one, the path form to adapt."""
    wheel = tmp_path / "invoicing_async-1.2.3-py3-none-any.whl"
    installed_from(monkeypatch, {"url": wheel.as_uri(), "archive_info": {}})
    assert main(["demo"]) == 2
    assert "/path/to/invoicing_async/sandbox" in capsys.readouterr().err
    sandbox = tmp_path / "invoicing_async_sandbox-1.2.3-py3-none-any.whl"
    sandbox.touch()
    (tmp_path / "invoicing_async_sandbox-1.0.0-py3-none-any.whl").touch()  # not this one
    assert main(["demo"]) == 2
    assert f"-m pip install {sandbox}\n" in capsys.readouterr().err


@pytest.mark.parametrize(
    "record",
    [None, {}, {"url": "https://example.invalid/x.whl"}, {"url": 3}, ["not", "a", "record"]],
)
def test_an_install_record_from_elsewhere_gives_the_path_form(
    client_alone, capsys, monkeypatch, record
):
    """Installed from an index, a URL or with an unreadable record: the path form."""
    installed_from(monkeypatch, record)
    assert main(["sandbox"]) == 2
    assert "-m pip install /path/to/invoicing_async/sandbox" in capsys.readouterr().err
