"""Every decision in one place: the decision core's table, every wait from one function.

What an answer or an error means — whether to send again, what a request ends as, a
sale's reason to defer, an overload, what a batch or an issuer's lane does with it, the
401 rule — is decided by the decision core (the package ``invoicing_async._decision``)
alone; every wait's length comes from ``invoicing_async._core.retry``. These tests read the
client's modules and fail on a decision made anywhere else, whatever its function is
called:

* looking at an error's class (``isinstance``, ``except``) for anything more specific
  than :class:`~invoicing_async.InvoicingError`, outside the modules listed in
  :data:`READS_ERRORS` (each says why it may);
* naming a :class:`~invoicing_async._decision.Kind`, or comparing a status code;
* reading an error's message for a word (``"timed out" in error.message``);
* computing a backoff (``delay * 2``, ``base ** n``) outside ``_retry``.
"""

from __future__ import annotations

import ast

import pytest
from test_layout import MODULES

import invoicing_async._core.errors as errors_module
from invoicing_async._core.errors import InvoicingError, LedgerError

CORE = "invoicing_async._core"
CLIENT = {name: path for name, path in MODULES.items() if name.startswith("invoicing_async")}


def _in_core(module: str) -> bool:
    return module == CORE or module.startswith(CORE + ".")


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

#: Modules that look at an error's class without deciding what to do about it.
READS_ERRORS = {
    # The tree itself: its classes' own methods.
    "invoicing_async._core.errors",
    # Where answers become errors: the protocol turns responses into them, the transport
    # failures of the connection (a body unreadable on a refusal is read as empty).
    "invoicing_async._core.protocol",
    "invoicing_async._io.transport",
    # Scrubbing the records a 409 or a foreign record carries, and writing errors out.
    "invoicing_async._core.redact",
    "invoicing_async._core.convert",
    # Catching its own refusal to re-raise it unchanged (a refused credential is not a
    # "no token" failure), and a record's check against the document sent.
    "invoicing_async._io.channel",
    "invoicing_async._send.delivery",
    # The token cache remembers refused credentials for its cooldown (its own state).
    "invoicing_async._io.tokencache",
    # An operation's 409 gets the provider's words in its message.
    "invoicing_async._send.operations",
    # The pool remembers an unknown issuer; the command prints and exits.
    "invoicing_async._io.issuers",
}


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
    """Lines that grow a wait by hand: ``delay * 2``, ``pause ** n``, ``delay *= 2``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Pow)):
            operands = [node.left, node.right]
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Mult, ast.Pow)):
            operands = [node.target]
        else:
            continue
        if any(map(_mentions_a_wait, operands)):
            lines.append(node.lineno)
    return lines


def _tree(module: str) -> ast.AST:
    return ast.parse(CLIENT[module].read_text(encoding="utf-8"))


OUTSIDE_CORE = sorted(name for name in CLIENT if not _in_core(name))


@pytest.mark.parametrize("module", OUTSIDE_CORE)
def test_only_the_core_tells_errors_apart(module):
    """Outside the decision core (and the modules that make, scrub or print errors), no
    module asks which error an attempt failed with: it asks the core what follows."""
    if module in READS_ERRORS or module.startswith(
        ("invoicing_async._cli", "invoicing_async._doc.pgp")
    ):
        pytest.skip("makes, scrubs or prints errors (READS_ERRORS); the key's own (_pgp)")
    assert _error_tests(_tree(module)) == []


@pytest.mark.parametrize("module", OUTSIDE_CORE)
def test_only_the_core_names_kinds_and_status_codes(module):
    """No module outside the core names a ``Kind`` or compares a status code (the
    protocol reads statuses to make errors; the transport reads them to read bodies)."""
    tree = _tree(module)
    assert _kind_members(tree) == []
    if module not in {"invoicing_async._core.protocol", "invoicing_async._io.transport"}:
        assert _status_compares(tree) == []


@pytest.mark.parametrize("module", sorted(CLIENT))
def test_no_decision_reads_an_errors_text(module):
    """What an error means is its class and fields, never a word in its message."""
    assert _message_reads(_tree(module)) == []


@pytest.mark.parametrize("module", sorted(CLIENT))
def test_every_wait_comes_from_the_one_backoff(module):
    """No module but ``_retry`` grows a wait by hand: every wait is ``backoff()``'s."""
    if module == "invoicing_async._core.retry":
        pytest.skip("the one backoff function")
    assert _backoff_arithmetic(_tree(module)) == []


def test_the_rules_are_defined_in_the_core_alone():
    """Whether a failure may have been processed, and what may follow it: functions of
    these names are defined in the decision core and nowhere else."""
    rules = {"may_resend", "maybe_processed", "certainly_not_processed", "duplicate_means_success"}
    rules |= {"may_have_committed", "classify", "reason_of", "deferral", "overloaded"}
    defined = {
        name
        for name in CLIENT
        for node in ast.walk(_tree(name))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in rules
    }
    assert {name for name in defined if not _in_core(name)} == set()


def test_the_checks_catch_what_they_are_for():
    """Each check finds the pattern it forbids (a check that finds nothing proves nothing)."""
    source = ast.parse(
        "if isinstance(error, RateLimitError) or error.status == 503: pass\n"
        "try: pass\nexcept (TransportError, ValueError): pass\n"
        "kind = Kind.THROTTLED\n"
        "no_answer = 'timed out' in error.message\n"
        "delay = min(delay * 2, 60)\n"
        "pause *= 2\n"
    )
    assert sorted(name for _, name in _error_tests(source)) == ["RateLimitError", "TransportError"]
    assert _status_compares(source) == [1]
    assert _kind_members(source) == [4]
    assert _message_reads(source) == [5]
    assert sorted(_backoff_arithmetic(source)) == [6, 7]
