"""Local Sphinx extension: documentation generated from the *public* API only.

The package's private modules are being moved and split; the documentation must survive
that. So nothing here names a private module:

``.. autopublic:: MODULE``
    Documents names of ``MODULE.__all__`` with autodoc, under their public name
    (``invoicing_async.InvoicingClient``, never ``invoicing_async._client.client.…``).
    ``:names: A B`` picks some (a group on the page); ``:remaining:`` documents every
    name of ``__all__`` not documented yet, so a name added to ``__all__`` appears in
    the reference without anyone editing the docs. A name not in ``__all__`` is an error.

``.. invoicing-error-tree::``
    The exception tree drawn in the docstring of the module that defines
    :class:`invoicing_async.InvoicingError`: one source for the tree.

``.. invoicing-cli-help:: [SUBCOMMAND]``
    The output of ``invoicing-async [SUBCOMMAND] --help``, run at build time.

``.. invoicing-fixtures::``
    The pytest fixtures of the plugin registered under the ``pytest11`` entry point
    ``invoicing_async``, with their docstrings, as ``fixture`` objects (``:fixture:`` role).

Private paths that autodoc still produces (base classes, type hints evaluated to the
defining module) are mapped to the public name of the same object; a private name with
no public twin is reported by Sphinx's nitpicky mode, so it is seen and fixed.
"""

from __future__ import annotations

import enum
import importlib
import importlib.metadata
import inspect
import os
import re
import subprocess
import sys
import typing
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.directives.code import LiteralInclude
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from sphinx.environment import BuildEnvironment

log = logging.getLogger(__name__)

#: The modules whose ``__all__`` is the public API.
PUBLIC_MODULES = ("invoicing_async", "invoicing_sandbox", "invoicing_async.testing")


def _public_names() -> dict[int, str]:
    """``id(object) -> "module.name"`` for every public object (first module wins)."""
    found: dict[int, str] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            found.setdefault(id(getattr(module, name)), f"{module_name}.{name}")
    return found


def _is_private_path(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


def _resolve(dotted: str) -> Any:
    """The object at ``dotted`` (a module path followed by attributes), or ``None``."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for attribute in parts[split:]:
                value = getattr(value, attribute)
        except AttributeError:
            return None
        return value
    return None


def public_name_of(dotted: str) -> str | None:
    """The public name of the object a private path points to, if it has one."""
    value = _resolve(dotted)
    if value is None:
        return None
    return _public_names().get(id(value))


def _public_by_short_name(short: str) -> str | None:
    """The public name ending in ``.short``, when exactly one public object has it.

    A docstring in a private module may say :func:`set_instant_retries` meaning the
    public ``invoicing_async.testing.set_instant_retries``.
    """
    found = {full for full in _public_names().values() if full.rpartition(".")[2] == short}
    return found.pop() if len(found) == 1 else None


# --- autopublic ------------------------------------------------------------------------


class AutoPublic(SphinxDirective):
    """Autodoc for names of a public module's ``__all__``, by their public name."""

    required_arguments = 1
    option_spec: ClassVar[dict[str, Any]] = {
        "names": directives.unchanged_required,
        "remaining": directives.flag,
        "title": directives.unchanged_required,
    }

    def run(self) -> list[nodes.Node]:
        """Autodoc directives for the chosen names, parsed in place."""
        module_name = self.arguments[0]
        module = importlib.import_module(module_name)
        public = list(module.__all__)
        done: set[str] = self.env.temp_data.setdefault("autopublic_done", set())
        if "remaining" in self.options:
            names = [name for name in public if f"{module_name}.{name}" not in done]
        else:
            names = self.options.get("names", "").split()
            unknown = [name for name in names if name not in public]
            if unknown:
                msg = f"autopublic: {', '.join(unknown)} not in {module_name}.__all__"
                raise self.error(msg)
        lines: list[str] = []
        for name in names:
            full = f"{module_name}.{name}"
            if full in done:
                log.warning("autopublic: %s documented twice", full, location=self.get_location())
            done.add(full)
            lines.extend(_autodoc_lines(full, getattr(module, name)))
        self.env.note_dependency(inspect.getfile(module))
        if not names:
            return []
        result: list[nodes.Node] = []
        if "title" in self.options:
            result.append(nodes.rubric(self.options["title"], self.options["title"]))
        return result + self.parse_text_to_nodes("\n".join(lines))


def _autodoc_lines(full: str, value: Any) -> list[str]:
    if inspect.isclass(value):
        kind = "autoexception" if issubclass(value, BaseException) else "autoclass"
        lines = [f".. {kind}:: {full}", "   :members:", "   :undoc-members:"]
        if any(not _private_base(base) for base in value.__bases__ if base is not object):
            lines.append("   :show-inheritance:")  # "Bases: object" says nothing, nor a private one
        if any(_private_base(base) for base in value.__mro__[1:]):
            lines.append("   :inherited-members:")  # a private base's methods are its own
        return [*lines, ""]
    if callable(value):
        return [f".. autofunction:: {full}", ""]
    return [f".. autodata:: {full}", "   :no-value:", ""]


def _private_base(base: type) -> bool:
    """A base class of this project that its public classes stand for: not public itself."""
    if not base.__module__.startswith("invoicing"):
        return False
    return base.__name__.startswith("_") or id(base) not in _public_names()


# --- the error tree ----------------------------------------------------------------------


class ErrorTree(SphinxDirective):
    """The tree drawn in the docstring of the module defining ``InvoicingError``."""

    def run(self) -> list[nodes.Node]:
        """The docstring's literal block (the part after its ``::``), as text."""
        import invoicing_async  # noqa: PLC0415

        # The class presents its public module; its methods name the one defining it.
        module = sys.modules[invoicing_async.InvoicingError.__init__.__module__]
        self.env.note_dependency(inspect.getfile(module))
        lines = inspect.cleandoc(module.__doc__ or "").splitlines()
        start = next((i for i, line in enumerate(lines) if line.rstrip().endswith("::")), None)
        if start is None:
            raise self.error("no literal block (::) in the exception module's docstring")
        block: list[str] = []
        for line in lines[start + 1 :]:
            if line.strip() and not line.startswith(" "):
                break
            block.append(line)
        tree = inspect.cleandoc("\n".join(block))
        literal = nodes.literal_block(tree, tree)
        literal["language"] = "text"
        literal["classes"].append("invoicing-error-tree")  # styled in _static/invoicing.css
        return [literal]


# --- the command's help ------------------------------------------------------------------


def command_help(*args: str) -> str:
    """``invoicing-async ARGS --help``, as a user's terminal of 88 columns shows it."""
    env = {**os.environ, "COLUMNS": "88", "NO_COLOR": "1", "PYTHON_COLORS": "0"}
    completed = subprocess.run(  # noqa: S603  (our own command, fixed arguments)
        [sys.executable, "-m", "invoicing_async", *args, "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    if completed.returncode != 0:
        msg = f"invoicing-async {' '.join(args)} --help failed: {completed.stderr.strip()}"
        raise RuntimeError(msg)
    return completed.stdout.rstrip()


class CliHelp(SphinxDirective):
    """The ``--help`` output of the command or one of its subcommands."""

    optional_arguments = 2  # a command, and one of its actions (`ledger show`)

    def run(self) -> list[nodes.Node]:
        """A console block: the prompt, then the command's output."""
        _cli_docs(self.env).add(self.env.docname)
        try:
            text = command_help(*self.arguments)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            raise self.error(str(exc)) from None
        prompt = " ".join(["$ invoicing-async", *self.arguments, "--help"])
        literal = nodes.literal_block("", f"{prompt}\n{text}")
        literal["language"] = "console"
        return [literal]


# --- the pytest fixtures -------------------------------------------------------------------


def _plugin() -> Any:
    [entry] = [
        entry
        for entry in importlib.metadata.entry_points(group="pytest11")
        if entry.name == "invoicing_sandbox"
    ]
    return entry.load()


class Fixtures(SphinxDirective):
    """Each fixture the pytest plugin defines, with its docstring."""

    option_spec: ClassVar[dict[str, Any]] = {"no-index": directives.flag}

    def run(self) -> list[nodes.Node]:
        """A ``fixture`` object per name of the plugin's ``__all__``."""
        plugin = _plugin()
        self.env.note_dependency(inspect.getfile(plugin))
        names = list(getattr(plugin, "__all__", []))
        if not names:
            raise self.error("the pytest plugin defines no fixture (is pytest-asyncio installed?)")
        lines: list[str] = []
        for name in names:
            doc = inspect.cleandoc(getattr(plugin, name).__doc__ or "")
            lines += [f".. fixture:: {name}"]
            if "no-index" in self.options:
                lines.append("   :no-index:")
            lines.append("")
            lines += [f"   {line}" if line else "" for line in doc.splitlines()]
            lines.append("")
        return self.parse_text_to_nodes("\n".join(lines))


# --- literalinclude without trailing blank lines ------------------------------------------


class TrimmedLiteralInclude(LiteralInclude):
    """``literalinclude`` whose text ends at its last non-blank line.

    The formatter puts two blank lines between a function and the ``# endregion``
    comment that ends an included region; the page should not show them.
    """

    def run(self) -> list[nodes.Node]:
        """The included block, with trailing blank lines removed."""
        result = super().run()
        for node in result:
            for block in node.findall(nodes.literal_block):
                text = block.astext()
                trimmed = text.rstrip() + ("\n" if text.endswith("\n") else "")
                if trimmed != text and block.rawsource == text:
                    block.rawsource = trimmed
                    block.children = [nodes.Text(trimmed)]
        return result


# --- private paths to public names -------------------------------------------------------


def _process_bases(app: Sphinx, name: str, obj: Any, options: Any, bases: list[Any]) -> None:
    """Show public base classes only: a private base is replaced by its public bases."""
    public = _public_names()
    result: list[Any] = []

    def visit(base: Any) -> None:
        base = typing.get_origin(base) or base  # a generic base: its class
        if base is typing.Generic:
            return
        if base in (object, Exception, BaseException):
            result.append(base)
        elif id(base) in public:
            role = "exc" if issubclass(base, BaseException) else "class"
            result.append(f":py:{role}:`~{public[id(base)]}`")
        elif base.__module__.startswith("invoicing_async"):
            for parent in base.__bases__:
                visit(parent)
        else:
            result.append(base)

    for base in list(bases):
        visit(base)
    seen: list[Any] = []
    for base in result:
        if base not in seen:
            seen.append(base)
    bases[:] = seen


def _missing_reference(
    app: Sphinx, env: BuildEnvironment, node: Any, contnode: nodes.Element
) -> nodes.Element | None:
    """Resolve ``invoicing_async._x.Name`` to the public ``invoicing_async.Name``."""
    if node.get("refdomain") != "py":
        return None
    target = str(node.get("reftarget", "")).lstrip("~.")
    publics: list[str] = []
    if target.startswith("invoicing_async") and _is_private_path(target):
        publics.append(public_name_of(target) or "")
    elif "." not in target:
        publics.append(_public_by_short_name(target) or "")
    for public in filter(None, publics):
        domain = env.domains["py"]
        for reftype in ("class", "exc", "func", "data", "obj"):
            resolved = domain.resolve_xref(
                env, node["refdoc"], app.builder, reftype, public, node, contnode
            )
            if resolved is not None:
                resolved["reftitle"] = public
                return resolved
    return None


def _process_signature(
    app: Sphinx,
    what: str,
    name: str,
    obj: Any,
    options: Any,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str, str | None] | None:
    """Make signatures say what a user can pass.

    Classes built by factories (``invoicing_no_signature``) and enums show none; a
    default naming a private constant shows its value; attrs defaults show their value
    instead of the generated ``attr_dict[…].default``.
    """
    if name in app.config.invoicing_no_signature:
        return "", None
    if inspect.isclass(obj) and issubclass(obj, enum.Enum):
        return "", None  # "(value)": enums are not constructed by their users
    if not signature:
        return None
    signature = _constant_defaults(signature, sys.modules.get(obj.__module__))
    if inspect.isclass(obj) and attrs.has(obj):
        signature = _attrs_defaults(signature, obj)
    return signature, return_annotation


_CONSTANT_DEFAULT = re.compile(r"= ([A-Z][A-Z0-9_]+)\b")
_ATTRS_DEFAULT = re.compile(r"attr_dict\['(\w+)'\]\.default")


def _constant_defaults(signature: str, module: Any) -> str:
    """``= DEFAULT_MAX_RESPONSE_SIZE`` becomes ``= 4194304``: the name is private."""

    def value(match: re.Match[str]) -> str:
        found = getattr(module, match.group(1), None)
        if isinstance(found, (int, float, str)) and not isinstance(found, bool):
            return f"= {found!r}"
        return match.group(0)

    return _CONSTANT_DEFAULT.sub(value, signature)


def _attrs_defaults(signature: str, cls: type) -> str:
    """Defaults that attrs generates, and its ``NOTHING`` for factories, as values."""
    fields = attrs.fields_dict(cls)

    def made_by(default: Any) -> str:
        return f"{getattr(default.factory, '__name__', 'factory')}()"

    def value(match: re.Match[str]) -> str:
        default = fields[match.group(1)].default
        return made_by(default) if isinstance(default, attrs.Factory) else repr(default)  # type: ignore[arg-type]

    signature = _ATTRS_DEFAULT.sub(value, signature)
    for field in fields.values():
        if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            pattern = rf"(\b{field.name}: [^=]*= )NOTHING\b"
            signature = re.sub(pattern, rf"\g<1>{made_by(field.default)}", signature)
    return signature


def _public_titles(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Link tooltips name the public path (autodoc resolves via the private canonical one)."""
    for reference in doctree.findall(nodes.reference):
        title = reference.get("reftitle", "")
        if title.startswith("invoicing_async") and _is_private_path(title):
            reference["reftitle"] = public_name_of(title) or title


def _cli_docs(env: BuildEnvironment) -> set[str]:
    if not hasattr(env, "invoicing_cli_docs"):
        env.invoicing_cli_docs = set()  # type: ignore[attr-defined]
    return env.invoicing_cli_docs  # type: ignore[attr-defined,no-any-return]


def _always_outdated(
    app: Sphinx, env: BuildEnvironment, added: set[str], changed: set[str], removed: set[str]
) -> list[str]:
    """Pages showing the command's help are re-read: its output is not a file Sphinx sees."""
    return sorted(_cli_docs(env) & env.found_docs)


def _purge(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    _cli_docs(env).discard(docname)


def _merge(app: Sphinx, env: BuildEnvironment, docnames: set[str], other: Any) -> None:
    _cli_docs(env).update(_cli_docs(other))


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directives, the ``fixture`` object type and the event handlers."""
    app.add_config_value("invoicing_no_signature", [], "env", types=frozenset({list}))
    app.add_directive("literalinclude", TrimmedLiteralInclude, override=True)
    app.add_directive("autopublic", AutoPublic)
    app.add_directive("invoicing-error-tree", ErrorTree)
    app.add_directive("invoicing-cli-help", CliHelp)
    app.add_directive("invoicing-fixtures", Fixtures)
    app.add_object_type("fixture", "fixture", "pair: %s; pytest fixture")
    app.connect("autodoc-process-bases", _process_bases)
    app.connect("missing-reference", _missing_reference)
    app.connect("autodoc-process-signature", _process_signature)
    app.connect("doctree-resolved", _public_titles)
    app.connect("env-get-outdated", _always_outdated)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
