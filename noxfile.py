"""Developer sessions: ``nox -s tests unit system wheels lint typing bench soak docs``."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typing"]
nox.options.reuse_existing_virtualenvs = True

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The default suite, with branch coverage."""
    session.install("-e", ".[test]", "-e", "./sandbox[pytest]")
    # coverage run, not pytest --cov: the sandbox's pytest plugin imports the package
    # before pytest-cov would start measuring, hiding module-level lines.
    session.run("coverage", "run", "-m", "pytest", *session.posargs)
    session.run("coverage", "report")


@nox.session(python="3.12")
def unit(session: nox.Session) -> None:
    """The fast suite: logic, and the client on MockTransport; no socket (tests/unit)."""
    session.install("-e", ".[test]", "-e", "./sandbox[pytest]")
    session.run("pytest", "tests/unit", *session.posargs)


@nox.session(python="3.12")
def system(session: nox.Session) -> None:
    """The system suite: commands, servers, peers, processes, docs (tests/system)."""
    session.install("-e", ".[test]", "-e", "./sandbox[pytest]")
    session.run("pytest", "tests/system", *session.posargs)


@nox.session(python="3.12")
def wheels(session: nox.Session) -> None:
    """Both distributions as users receive them: built, checked, installed, smoke-tested.

    The same script CI runs (``.ci/wheels.py``; ``-- --keep DIR`` keeps the wheels).
    """
    session.run("python", ".ci/wheels.py", *session.posargs)


@nox.session(python="3.12")
def soak(session: nox.Session) -> None:
    """Long chaos soaks and crash/resume runs (marked slow)."""
    session.install("-e", ".[test]", "-e", "./sandbox[pytest]")
    session.run("pytest", "-m", "slow", "--run-slow", *session.posargs)


@nox.session(python="3.12")
def lint(session: nox.Session) -> None:
    """Lint and format check (ruff)."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", "invoicing_async", "sandbox", "tests", "benchmarks", "docs")
    session.run("ruff", "format", "--check", "invoicing_async", "sandbox")


@nox.session(python="3.12")
def typing(session: nox.Session) -> None:
    """Type check (mypy --strict) of both packages."""
    session.install("-e", ".[typing]", "-e", "./sandbox")
    session.run("mypy")


@nox.session(python="3.12")
def bench(session: nox.Session) -> None:
    """The benchmarks (``-- --quick`` for the smoke run)."""
    session.install("-e", ".[test,bench]", "-e", "./sandbox")
    session.run("python", "-m", "benchmarks", *session.posargs)


@nox.session(python="3.12")
def docs(session: nox.Session) -> None:
    """The documentation site (furo), warnings as errors: ``docs/_build/html``."""
    session.install("-e", ".[docs]", "-e", "./sandbox[pytest]")
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html")
