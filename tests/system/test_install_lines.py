"""Every install line of the README and the documentation works as written.

The lines are found by pattern, not listed here: every code block (``::`` literal blocks
and ``code-block`` directives) holding a ``pip install`` line, and every inline literal
holding one. Each block is run as a reader runs it, all its commands in order, in a
fresh virtual environment (activated), from an empty folder, or from a copy of the
checkout when a command names the project root (``.``, ``./sandbox``); the placeholder
``/path/to/invoicing_async`` (``/src`` in the compose file) is a clean copy of the
checkout. A ``demo`` or a test command in a block runs too, so "install, then run it"
is proven as one story.

Offline: pip runs with ``PIP_NO_INDEX`` and ``PIP_FIND_LINKS`` pointing at a wheelhouse
built once for the module (everything the lines install, and hatchling for building
the checkout), so the lines stay verbatim and no line reaches an index. The README's
test command runs the unit tests of the public API rather than the whole suite
(``PYTEST_ADDOPTS`` names them): that command is the one CI runs in full.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    ROOT / "README.rst",
    ROOT / "sandbox" / "README.rst",
    *sorted(page for page in (ROOT / "docs").rglob("*.rst") if "_build" not in page.parts),
]
PLACEHOLDER = "/path/to/invoicing_async"
#: What the copies of the checkout leave out: environments, caches, build output.
IGNORED = shutil.ignore_patterns(
    ".git", ".venv*", ".nox", "__pycache__", "*.egg-info", "_build", "dist", "build",
    ".pytest_cache", ".mypy_cache", ".ruff_cache", "demo-results.jsonl", ".coverage*",
)  # fmt: skip
#: The README's test command, narrowed: the public API's tests, through the plugin.
SMOKE_TESTS = "-p no:cacheprovider -q tests/unit/test_public_api.py"


class Block(NamedTuple):
    """Commands a page shows together, and how to run them."""

    where: str  # page:line
    kind: str  # shell, compose or inline
    commands: tuple[str, ...]

    @property
    def from_root(self) -> bool:
        """A command names the project root: run from (a copy of) the checkout."""
        return any(re.search(r"(^|\s)'?\.(/|\[|\s|$)", command) for command in self.commands)


_DIRECTIVE = re.compile(r"^(\s*)\.\. code-block::\s*(\S+)\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _code_blocks(text: str) -> list[tuple[int, int, str, list[str]]]:
    """``(first line, end line, language, body)`` of every literal block and
    code-block directive (lines counted from 1, the end excluded)."""
    lines = text.splitlines()
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        if directive:
            language = directive.group(2)
        elif line.rstrip().endswith("::") and not line.lstrip().startswith(".."):
            language = "literal"
        else:
            i += 1
            continue
        base, j = _indent(line), i + 1
        while j < len(lines) and (
            not lines[j].strip() or (directive and lines[j].strip().startswith(":"))
        ):
            j += 1
        body = []
        while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > base):
            body.append(lines[j])
            j += 1
        margin = min((_indent(b) for b in body if b.strip()), default=0)
        found.append((i + 1, j + 1, language, [b[margin:] for b in body if b.strip()]))
        i = j
    return found


def _commands(language: str, body: list[str], where: str) -> tuple[str, tuple[str, ...]]:
    if language == "console":
        return "shell", tuple(line[2:] for line in body if line.startswith("$ "))
    if language in ("literal", "bash", "sh", "shell"):
        return "shell", tuple(body)
    if language == "yaml":  # a compose service: `sh -c "pip install … && command …"`
        script = " ".join(" ".join(body).split('sh -c "', 1)[1].split('"', 1)[0].split())
        install, started = (part.strip() for part in script.split("&&", 1))
        # The service itself runs until stopped: its command is asked for --help.
        return "compose", (install, " ".join([*started.split()[:2], "--help"]))
    pytest.fail(f"{where}: an install line in a {language} block: teach this test to run it")
    raise AssertionError  # unreachable: pytest.fail raises


def install_blocks() -> list[Block]:
    """Every block and inline literal of the pages that holds a ``pip install`` line."""
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(ROOT).as_posix()
        lines = text.splitlines()
        for line, end, language, body in _code_blocks(text):
            lines[line : end - 1] = [""] * (end - 1 - line)  # prose only, for inline literals
            if any("pip install" in command for command in body):
                where = f"{name}:{line}"
                kind, commands = _commands(language, body, where)
                blocks.append(Block(where, kind, commands))
        prose = "\n".join(lines)
        for match in re.finditer(r"``(.+?)``", prose, re.DOTALL):
            if "pip install" in match.group(1):
                line = prose.count("\n", 0, match.start()) + 1
                command = " ".join(match.group(1).split())
                blocks.append(Block(f"{name}:{line}", "inline", (command,)))
    return blocks


def _distinct(blocks: list[Block]) -> list[Block]:
    """One block per distinct list of commands (comments aside), naming every place."""
    places: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for block in blocks:
        key = (block.kind, tuple(re.sub(r"\s+#\s.*$", "", c) for c in block.commands))
        places.setdefault(key, []).append(block.where)
    return [Block("+".join(where), kind, commands) for (kind, commands), where in places.items()]


BLOCKS = install_blocks()
DISTINCT = _distinct(BLOCKS)


def test_the_install_lines_are_found_where_readers_look():
    """The pattern finds the install lines of the README's first commands and install
    section, the landing page, getting started and the sandbox's README (a parser that
    finds nothing would make every other test here vacuous)."""
    pages = {block.where.split(":")[0] for block in BLOCKS}
    assert {"README.rst", "docs/index.rst", "docs/getting-started.rst"} <= pages
    assert "sandbox/README.rst" in pages
    commands = [command for block in BLOCKS for command in block.commands]
    assert any(command.endswith("invoicing-async demo") for command in commands)
    assert any("--find-links wheels" in command for command in commands)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A clean copy of the checkout: what ``/path/to/invoicing_async`` stands for."""
    copy = tmp_path_factory.mktemp("checkout") / "invoicing_async"
    shutil.copytree(ROOT, copy, ignore=IGNORED)
    return copy


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory, checkout):
    """Wheels of everything the lines install (from the index or pip's cache, once)."""
    house = tmp_path_factory.mktemp("wheelhouse")
    extras = "test,qr,redis,postgres" + (",docs" if sys.version_info >= (3, 11) else "")
    subprocess.run(
        [
            sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
            "-w", str(house), f"{checkout}[{extras}]", f"{checkout}/sandbox[pytest]",
            "hatchling", "editables", "nox",
        ],
        check=True, timeout=900,
    )  # fmt: skip
    return house


@pytest.mark.parametrize("block", DISTINCT, ids=[block.where for block in DISTINCT])
def test_install_lines_work_as_written(block, checkout, wheelhouse, tmp_path):
    """The block's commands, as written, succeed in a fresh virtual environment: what
    they install installs (offline, from the wheelhouse), and what they run after it
    (the demo, the tests, the sandbox command) works."""
    if any("[docs]" in command for command in block.commands) and sys.version_info < (3, 11):
        pytest.skip("the docs extra's Sphinx needs Python 3.11+ (as README says)")
    if block.from_root:
        cwd = tmp_path / "invoicing_async"
        shutil.copytree(checkout, cwd)
    else:
        cwd = tmp_path / "project"
        cwd.mkdir()
    source = PLACEHOLDER if block.kind != "compose" else "/src"
    # One shell, as a reader types them; each command (a whole `a && b` list) must pass.
    script = "\n".join(
        f"{{\n{command.replace(source, str(checkout))}\n}} || exit $?" for command in block.commands
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PIP_", "PYTHON", "PYTEST", "VIRTUAL_ENV"))
    }
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        VIRTUAL_ENV=str(venv),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheelhouse),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTEST_ADDOPTS=SMOKE_TESTS,
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{block.where}:\n{script}\n{done.stdout}{done.stderr}"
