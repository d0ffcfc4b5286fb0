"""Ship both distributions as users receive them: build, check, install, smoke-test.

Run by ``.ci/run`` and ``nox -s wheels`` (``python3 .ci/wheels.py [--keep DIR]``). The test
suite runs on editable installs of the checkout, where a file missing from a wheel (the
``py.typed`` marker, a data file, an entry point) goes unseen; this script sees it:

1. ``python -m build`` makes the sdist of the client and of the sandbox, and each wheel
   *from its sdist*, so a file the sdist lacks fails here too.
2. ``twine check --strict``: the metadata and the README render as an index shows them.
3. The file lists: every file of each package in the checkout (``py.typed`` included) is
   in its wheel and its sdist, and nothing but the package and its metadata is in the
   wheel; the ``invoicing-async`` console script and the ``invoicing_async.commands`` and
   ``pytest11`` entry points are declared; the sandbox requires this very client version;
   the client's wheel holds no decryption code (the decryptor and the secret-key reader
   are the sandbox's).
4. A fresh virtual environment, used from a folder outside the checkout so that nothing
   of the checkout can be imported: the client wheel alone (``invoicing-async demo``
   says to install the sandbox, with the command to paste, exit status 2); that command
   run as printed; then ``invoicing-async --version``, the demo, the getting-started
   example and the testing guide's pytest file (the sandbox's fixtures, as a user's
   suite uses them), with both packages imported from the environment.

Each step prints what it checked; the first failure stops the script with exit status 1.
"""

from __future__ import annotations

import argparse
import configparser
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Each distribution: its project folder, its package, the entry points it must declare.
DISTRIBUTIONS = {
    "invoicing_async": (
        ROOT,
        {"console_scripts": {"invoicing-async": "invoicing_async._cli:main"}},
    ),
    "invoicing_sandbox": (
        ROOT / "sandbox",
        {
            "pytest11": {"invoicing_sandbox": "invoicing_sandbox._pytest_plugin"},
            "invoicing_async.commands": {"sandbox": "invoicing_sandbox._cli:register"},
        },
    ),
}
#: Modules only a provider needs (the decryptor, the secret-key reader): the sandbox's
#: wheel ships them, the client's must not, for the client never decrypts.
PROVIDER_ONLY = {"_decrypt", "_secret"}
#: Tools of the check, from the package index: pinned, so a new release cannot fail CI
#: on unchanged code.
TOOLS = ["build==1.6.1", "twine==7.0.0"]
_STARTED = time.monotonic()


class CheckError(Exception):
    """A check failed: the message says which and why."""


def step(text: str) -> None:
    print(f"[wheels {time.monotonic() - _STARTED:5.0f} s] {text}", flush=True)


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a command; its output, or :class:`CheckError` with that output."""
    words = [str(word) for word in command]
    done = subprocess.run(
        words, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    if done.returncode:
        raise CheckError(
            f"{shlex.join(words)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        )
    return done.stdout + done.stderr


def venv(path: Path) -> dict[str, str]:
    """A fresh virtual environment; the environment variables of a shell that activated it."""
    run(sys.executable, "-m", "venv", path, cwd=path.parent)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["VIRTUAL_ENV"] = str(path)
    env["PATH"] = f"{path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def package_files(project: Path, package: str) -> set[str]:
    """The files of ``package`` in the checkout, as paths inside a wheel."""
    return {
        path.relative_to(project).as_posix()
        for path in (project / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def build(dist: Path, tools: dict[str, str]) -> dict[str, tuple[Path, Path]]:
    """Both sdists and wheels in ``dist``: package -> (wheel, sdist)."""
    built = {}
    dist.mkdir()
    for package, (project, _entry_points) in DISTRIBUTIONS.items():
        run("python", "-m", "build", "--outdir", dist / package, project, cwd=dist, env=tools)
        [wheel] = (dist / package).glob("*.whl")
        [sdist] = (dist / package).glob("*.tar.gz")
        built[package] = (wheel, sdist)
        step(f"built {sdist.name} and, from it, {wheel.name}")
    files = [str(path) for pair in built.values() for path in pair]
    run("twine", "check", "--strict", *files, cwd=dist, env=tools)
    step("twine check --strict: both sdists and wheels pass")
    return built


def check_wheel(package: str, wheel: Path, sdist: Path, version: str) -> None:
    """The wheel's and sdist's file lists, the entry points, the metadata."""
    project, entry_points = DISTRIBUTIONS[package]
    expected = package_files(project, package)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [info] = {name.split("/")[0] for name in names if ".dist-info/" in name}
        points = configparser.ConfigParser(delimiters=("=",))
        points.read_string(archive.read(f"{info}/entry_points.txt").decode())
        metadata = archive.read(f"{info}/METADATA").decode()
    missing = expected - names
    if missing:
        raise CheckError(f"{wheel.name} lacks files of the checkout: {sorted(missing)}")
    stray = {name.split("/")[0] for name in names} - {package, info}
    if stray:
        raise CheckError(f"{wheel.name} holds more than its package: {sorted(stray)}")
    provider_only = sorted(name for name in names if Path(name).stem in PROVIDER_ONLY)
    if package == "invoicing_async" and provider_only:
        raise CheckError(f"{wheel.name} holds the sandbox's decryption code: {provider_only}")
    if f"{package}/py.typed" not in names:
        raise CheckError(f"{wheel.name} has no {package}/py.typed: users' type checkers skip it")
    for group, wanted in entry_points.items():
        found = dict(points[group]) if points.has_section(group) else {}
        for name, target in wanted.items():
            if found.get(name, "").strip() != target:
                raise CheckError(f"{wheel.name}: entry point {group} {name} = {target} missing")
    if "Requires-Python: >=3.10" not in metadata:
        raise CheckError(f"{wheel.name}: Requires-Python is not >=3.10")
    if package == "invoicing_sandbox" and f"Requires-Dist: invoicing-async=={version}" not in (
        metadata
    ):
        raise CheckError(f"{wheel.name} does not require invoicing-async=={version}")
    with tarfile.open(sdist) as archive:
        top = f"{sdist.name.removesuffix('.tar.gz')}/"
        in_sdist = {name.removeprefix(top) for name in archive.getnames()}
    for needed in {"pyproject.toml", "README.rst", "PKG-INFO"} | expected:
        if needed not in in_sdist:
            raise CheckError(f"{sdist.name} lacks {needed}")
    step(
        f"{wheel.name}: {len(expected)} package files (py.typed included), "
        f"entry points {', '.join(entry_points)}; the sdist has them too"
    )


def smoke(work: Path, built: dict[str, tuple[Path, Path]], version: str) -> None:
    """Install the wheels into a fresh environment and use them from outside the checkout."""
    env = venv(work / "venv")
    client_wheel, sandbox_wheel = built["invoicing_async"][0], built["invoicing_sandbox"][0]
    # Beside each other, as a user keeps them (the missing-sandbox advice looks there).
    wheels = work / "wheels"
    wheels.mkdir()
    for wheel in (client_wheel, sandbox_wheel):
        shutil.copy(wheel, wheels)
    home = work / "project"
    home.mkdir()
    run("python", "-m", "pip", "install", "-q", wheels / client_wheel.name, cwd=home, env=env)
    step(f"installed {client_wheel.name} alone into a fresh environment")
    done = subprocess.run(
        ["invoicing-async", "demo"], cwd=home, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    advice = done.stderr.strip()
    if done.returncode != 2 or "comes with the sandbox distribution" not in advice:
        raise CheckError(f"demo without the sandbox: exit {done.returncode}: {advice}")
    command = advice.split(" with: ", 1)[1]
    if str(wheels / sandbox_wheel.name) not in command:
        raise CheckError(
            f"the advice does not name the sandbox wheel beside the client's: {advice}"
        )
    run(*shlex.split(command), cwd=home, env=env)
    step(f"'invoicing-async demo' without the sandbox: exit 2, ran its advice: {command}")
    run(
        "python", "-m", "pip", "install", "-q", f"{wheels / sandbox_wheel.name}[pytest]",
        cwd=home, env=env,
    )  # fmt: skip
    where = run(
        "python", "-c",
        "import invoicing_async, invoicing_sandbox; "
        "print(invoicing_async.__file__); print(invoicing_sandbox.__file__)",
        cwd=home, env=env,
    ).split()  # fmt: skip
    for path in where:
        if not Path(path).is_relative_to(work / "venv"):
            raise CheckError(f"imported from outside the environment: {path}")
    step("both packages import from the environment's site-packages")
    shown = run("invoicing-async", "--version", cwd=home, env=env).strip()
    if shown != f"invoicing-async {version}":
        raise CheckError(f"--version says {shown!r}")
    run("invoicing-async", "demo", cwd=home, env=env)  # exit 0: every outcome as expected
    results = (home / "demo-results.jsonl").read_text(encoding="utf-8").splitlines()
    if len(results) != 300:
        raise CheckError(f"the demo wrote {len(results)} results, not 300")
    step("'invoicing-async demo': exit status 0, 300 results written")
    examples = ROOT / "docs" / "examples"
    shutil.copy(examples / "getting_started.py", home)
    run("python", "getting_started.py", cwd=home, env=env)
    tests = home / "tests"
    tests.mkdir()
    shutil.copy(examples / "test_with_sandbox.py", tests)
    outcome = run("python", "-m", "pytest", "-p", "no:cacheprovider", "tests", cwd=home, env=env)
    # As many passed as the guide's file holds, and nothing else (failed, error, skipped).
    expected = len(
        re.findall(
            r"^(?:async )?def test_",
            (tests / "test_with_sandbox.py").read_text(encoding="utf-8"),
            flags=re.MULTILINE,
        )
    )
    summary = re.search(r"=+ (.*) in [\d.]+s", outcome)
    counts = {
        word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary.group(1) if summary else "")
    }
    if counts.pop("passed", 0) != expected or set(counts) - {"warning", "warnings"}:
        raise CheckError(f"the smoke tests did not pass ({expected} expected):\n{outcome}")
    step(f"the getting-started example runs; the testing guide's tests: {expected} passed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--keep", type=Path, help="build in DIR and keep it (default: a temp dir)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="invoicing-wheels-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        tools = venv(work / "tools")
        run("python", "-m", "pip", "install", "-q", *TOOLS, cwd=work, env=tools)
        step(f"tools: {', '.join(TOOLS)}")
        built = build(work / "dist", tools)
        version = built["invoicing_async"][0].name.split("-")[1]
        for package, (wheel, sdist) in built.items():
            check_wheel(package, wheel, sdist, version)
        smoke(work, built, version)
    except CheckError as exc:
        print(f"wheels: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    step("wheels: built, checked, installed and smoke-tested")
    return 0


if __name__ == "__main__":
    sys.exit(main())
