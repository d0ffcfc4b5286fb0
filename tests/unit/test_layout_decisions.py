"""Every decision in one place: the core (``invoicing_async._core``), every wait from one back-off.

What an answer or an error means — whether to send again, what a request ends as, a
sale's reason to defer, an overload, a 409 with another document's record, what a failed
token request is, whether a ledger entry is final, sent again, charged or parked — is
decided in the core alone (h11's Rule 1: everything that affects the state machine lives
there), and the core is pure: it waits for nothing. These tests read the client's
modules and fail on a decision made anywhere else, whatever its function is called.
They hold no list of modules allowed to decide; the rules are:

* **Errors are told apart where they are made.** Outside the core, a module names a
  specific error class (anything but :class:`~invoicing_async.InvoicingError` and
  :class:`~invoicing_async.LedgerError`) in an ``except`` or an ``isinstance`` only if it
  constructs that class itself: a boundary translating its own failures (the transport
  turns aiohttp's into ``TransportError`` and ``MalformedResponseError``, the issuers
  make ``UnknownIssuerError`` and ``CredentialsError`` and remember them, the PGP stage
  its ``ProviderKeyError``; a sub-package such as ``_doc.pgp`` is one boundary). Every
  other module catches ``InvoicingError`` and asks the core what follows. The command
  (``_cli``) is the one folder that names errors to print them and choose an exit code:
  nothing it decides goes back to the provider.
* No module outside the core names a ``Kind`` or compares an answer's ``.status`` with a
  number.
* No module reads an error's message for a word.
* No module but the one that defines ``backoff`` grows a wait by hand (``delay * 2``,
  ``base ** n``, ``delay *= 2``, ``delay += step``).
* The rules of :data:`RULES` are defined in the core, each of them, and nowhere else
  (a private copy of a constant, ``_ANSWERED``, counts).
* The core imports nothing that waits or keeps time (asyncio, threads, sockets, a clock).
"""

from __future__ import annotations

import ast
import functools

import pytest
from test_layout import MODULES

import invoicing_async._core.errors as errors_module
from invoicing_async._core.errors import InvoicingError, LedgerError

CORE = "invoicing_async._core"
CLIENT = {name: path for name, path in MODULES.items() if name.startswith("invoicing_async")}


def _in_core(module: str) -> bool:
    return module == CORE or module.startswith(CORE + ".")


def _in_command(module: str) -> bool:
    return module == "invoicing_async._cli" or module.startswith("invoicing_async._cli.")


#: Error classes whose test is a decision: every subclass of InvoicingError but the root
#: (catching every failure is no decision) and LedgerError (the ledger's own failures,
#: never a provider's answer).
SPECIFIC = {
    name
    for name, value in vars(errors_module).items()
    if isinstance(value, type)
    and issubclass(value, InvoicingError)
    and value not in (InvoicingError, LedgerError)
}

#: The decisions, defined in the core and nowhere else: what an answer means (the
#: table), what may follow it (the safety class, the machine), the 401 rule and a failed
#: token request, a 409 with another document's record, what an ending says of the
#: provider, a durable entry's rules, and the one back-off.
RULES = {
    # the table and the safety classes
    "classify",
    "may_resend",
    "maybe_processed",
    "certainly_not_processed",
    "duplicate_means_success",
    "ending_of",
    "retry_reason",
    "refused_by_provider",
    "needs_operator",
    "last_answer",
    "deferral",
    "held_record",
    "foreign_record",
    "done_before",
    "tighten",
    # the machine and the 401 rule
    "Attempts",
    "sent_nothing",
    "TokenRetries",
    "without_token",
    "refusal_kept",
    "after_refresh",
    # what an ending says of the provider
    "HELD",
    "ANSWERED",
    # a durable entry (the ledger's and the outbox's rules)
    "Verdict",
    "decide",
    "is_final",
    "needs_fingerprint",
    "requeue",
    "charged",
    "parks",
    "wait_after_round",
    # every wait
    "backoff",
    "Backoff",
}

#: What the core never imports: it waits for nothing and keeps no time of its own.
WAITING = {"asyncio", "threading", "socket", "selectors", "concurrent", "time", "aiohttp"}


def _names(node: ast.expr | None) -> list[ast.expr]:
    if node is None:
        return []
    return list(node.elts) if isinstance(node, ast.Tuple) else [node]


def _name_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _error_tests(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, class)`` of every isinstance/except naming a specific error class."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        tested: list[ast.expr] = []
        if (
            isinstance(node, ast.Call)
            and _name_of(node.func) == "isinstance"
            and len(node.args) == 2
        ):
            tested = _names(node.args[1])
        elif isinstance(node, ast.ExceptHandler):
            tested = _names(node.type)
        found.extend((node.lineno, name) for name in map(_name_of, tested) if name in SPECIFIC)
    return found


def _constructed(tree: ast.AST) -> set[str]:
    """The error classes a module makes: ``SomeError(...)`` called."""
    return {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and (name := _name_of(node.func)) in SPECIFIC
    }


def _is_status(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in {"status", "status_code"}


def _status_compares(tree: ast.AST) -> list[int]:
    """Lines comparing an ``.status`` with a number (``error.status == 503``)."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        if any(map(_is_status, operands)) and any(
            isinstance(o, ast.Constant) and isinstance(o.value, int) for o in operands
        ):
            lines.append(node.lineno)
    return lines


def _kind_members(tree: ast.AST) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Kind"
    ]


def _message_reads(tree: ast.AST) -> list[int]:
    """Lines testing a word in an error's text: ``"x" in error.message`` / ``str(error)``."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or not isinstance(node.ops[0], (ast.In, ast.NotIn)):
            continue
        right = node.comparators[0]
        text = (isinstance(right, ast.Attribute) and right.attr == "message") or (
            isinstance(right, ast.Call) and _name_of(right.func) == "str"
        )
        if text and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            lines.append(node.lineno)
    return lines


_WAITS = ("delay", "backoff", "pause", "wait", "interval", "sleep")


def _mentions_a_wait(node: ast.expr) -> bool:
    name = _name_of(node)
    return name is not None and any(word in name.lower() for word in _WAITS)


def _backoff_arithmetic(tree: ast.AST) -> list[int]:
    """Lines that grow a wait by hand: ``delay * 2``, ``pause ** n``, ``delay *= 2``,
    ``delay += step`` (a deadline, ``now + delay``, grows nothing)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Pow)):
            operands = [node.left, node.right]
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Mult, ast.Pow, ast.Add)):
            operands = [node.target]
        else:
            continue
        if any(map(_mentions_a_wait, operands)):
            lines.append(node.lineno)
    return lines


def _defined(tree: ast.Module) -> set[str]:
    """Functions and classes anywhere in a module, and its module-level constants; a
    private copy of a constant (``_ANSWERED``) counts as the name it copies."""
    names = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        names.update(target.id.lstrip("_") for target in targets if isinstance(target, ast.Name))
    return names


def _imported(tree: ast.AST) -> set[str]:
    """The top-level packages a module imports (at run time or for type checking).

    An exception class alone (``from asyncio import CancelledError``: what a call that
    was cancelled ends with) waits for nothing, and is not counted."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if all(alias.name.endswith("Error") for alias in node.names):
                continue
            found.add(node.module.split(".")[0])
    return found


@functools.cache  # each module read once per run (the checks only read the trees)
def _tree(module: str) -> ast.Module:
    return ast.parse(CLIENT[module].read_text(encoding="utf-8"))


def _boundary(module: str) -> list[str]:
    """The modules that make up ``module``'s boundary: itself, or its whole sub-package
    when it lies in a package inside a folder (``_doc.pgp._keys``: ``_doc.pgp``)."""
    package = ".".join(module.split(".")[:3])
    if package != module and CLIENT.get(package, CLIENT[module]).name == "__init__.py":
        return [name for name in CLIENT if name == package or name.startswith(package + ".")]
    return [module]


OUTSIDE_CORE = sorted(name for name in CLIENT if not _in_core(name))


def _undecided(module: str) -> list[tuple[int, str]]:
    """The error tests of ``module`` that are not its own errors' (see the module)."""
    if _in_core(module) or _in_command(module):
        return []
    made = set().union(*(_constructed(_tree(name)) for name in _boundary(module)))
    return [(line, name) for line, name in _error_tests(_tree(module)) if name not in made]


@pytest.mark.parametrize("module", OUTSIDE_CORE)
def test_only_the_core_tells_errors_apart(module):
    """Outside the core, an error class is named in an ``except`` or ``isinstance`` only
    by the boundary that makes it (or by the command, to print it): every other module
    asks the core what follows a failure."""
    assert _undecided(module) == []


def test_the_error_rule_sees_the_boundaries():
    """The rule reads real modules: the command and the boundaries do name errors."""
    assert _error_tests(_tree("invoicing_async._cli.command"))  # the command prints them
    assert _error_tests(_tree("invoicing_async._io.transport"))  # a boundary makes them
    assert _constructed(_tree("invoicing_async._io.transport")) >= {"MalformedResponseError"}
    assert "invoicing_async._doc.pgp._choice" in _boundary("invoicing_async._doc.pgp._keys")
    assert _boundary("invoicing_async._io.channel") == ["invoicing_async._io.channel"]


@pytest.mark.parametrize("module", OUTSIDE_CORE)
def test_only_the_core_names_kinds_and_status_codes(module):
    """No module outside the core names a ``Kind`` or compares a status code."""
    tree = _tree(module)
    assert _kind_members(tree) == []
    assert _status_compares(tree) == []


@pytest.mark.parametrize("module", sorted(CLIENT))
def test_no_decision_reads_an_errors_text(module):
    """What an error means is its class and fields, never a word in its message."""
    assert _message_reads(_tree(module)) == []


@functools.cache
def _backoff_home() -> list[str]:
    return [name for name in CLIENT if "backoff" in _defined(_tree(name))]


@pytest.mark.parametrize("module", sorted(CLIENT))
def test_every_wait_comes_from_the_one_backoff(module):
    """No module but the one that defines ``backoff`` (in the core) grows a wait by hand."""
    assert _backoff_home() == ["invoicing_async._core.retry"]
    if module not in _backoff_home():
        assert _backoff_arithmetic(_tree(module)) == []


def test_the_rules_are_defined_in_the_core_alone():
    """Each decision of :data:`RULES` is defined in the core, and nowhere else: a rule
    that moved out of the core, was copied, or no longer exists fails this."""
    where: dict[str, set[str]] = {rule: set() for rule in RULES}
    for module in CLIENT:
        for rule in _defined(_tree(module)) & RULES:
            where[rule].add(module)
    assert sorted(rule for rule, modules in where.items() if not modules) == []
    assert {
        rule: sorted(module for module in modules if not _in_core(module))
        for rule, modules in where.items()
        if any(not _in_core(module) for module in modules)
    } == {}


@pytest.mark.parametrize("module", sorted(name for name in CLIENT if _in_core(name)))
def test_the_core_waits_for_nothing(module):
    """The core is pure: no module of it imports asyncio, threads, sockets or a clock
    (the waits are ``invoicing_async._io.waits``')."""
    assert sorted(_imported(_tree(module)) & WAITING) == []


def test_the_checks_catch_what_they_are_for():
    """Each check finds the pattern it forbids (a check that finds nothing proves nothing)."""
    source = ast.parse(
        "if isinstance(error, RateLimitError) or error.status == 503: pass\n"
        "try: pass\nexcept (TransportError, ValueError): pass\n"
        "kind = Kind.THROTTLED\n"
        "no_answer = 'timed out' in error.message\n"
        "delay = min(delay * 2, 60)\n"
        "pause *= 2\n"
        "raise TransportError('x', maybe_sent=False)\n"
        "_ANSWERED = frozenset()\n"
        "def decide(): pass\n"
        "import asyncio.tasks\n"
        "wait += 0.5\n"
        "deadline = now + delay\n"
    )
    assert sorted(name for _, name in _error_tests(source)) == ["RateLimitError", "TransportError"]
    assert _constructed(source) == {"TransportError"}
    assert _status_compares(source) == [1]
    assert _kind_members(source) == [4]
    assert _message_reads(source) == [5]
    assert sorted(_backoff_arithmetic(source)) == [6, 7, 12]
    assert {"ANSWERED", "decide"} <= _defined(source)
    assert _imported(source) & WAITING == {"asyncio"}
