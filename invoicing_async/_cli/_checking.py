"""``--check``: documents checked against the provider's rules before they are sent.

The command reads documents with their source (file and line); each problem
:func:`invoicing_async.documents.check` finds is said on stderr as
``invoicing-async: FILE:LINE: FIELD: MESSAGE`` (a warning says so and never refuses),
the first few of a document, then how many more.
``submit --check`` sends none of the documents with errors (each gets its ``rejected``
record, with :class:`~invoicing_async.InvalidDocumentError`'s problems) and the others
as before; ``outbox enqueue --check`` enqueues none of the input if one has errors,
unless ``--skip-invalid``.
"""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, Any

from invoicing_async._core.problems import Severity
from invoicing_async._doc.checked import ambiguities, problems_of

if TYPE_CHECKING:
    from .inputs import Source

__all__ = ["add_check", "report"]


def add_check(group: Any, *, skip: bool = False) -> None:
    """Add ``--check`` (and ``--skip-invalid``) to a parser or a group of its options."""
    group.add_argument(
        "--check",
        action="store_true",
        help="check each document against the provider's rules first: every problem is "
        "said with its file, line and field; a document the provider would refuse is "
        + ("not enqueued" if skip else "not sent (rejected, its problems in its record)"),
    )
    if skip:
        group.add_argument(
            "--skip-invalid",
            action="store_true",
            help="with --check: enqueue the valid documents, skipping those with errors "
            "and input that is not a document (default: enqueue nothing if one has "
            "errors or is not read); implies --check",
        )


#: Problems of one document said on stderr: the first ones, then how many more.
SHOWN = 10


def report(
    source: Source, document: Any, stream: IO[str] | None = None, *, rules: bool = True
) -> bool:
    """Say the problems of ``document`` on ``stream`` (stderr); whether one is an error.

    The first :data:`SHOWN`, then a count of the others: a document of a million bad
    lines is a dozen lines on stderr, not a million.

    :param rules: every rule (``--check``); ``False``: only a member written twice with
        different values, which is refused checked or not.
    """
    out = sys.stderr if stream is None else stream
    problems = problems_of(document) if rules else ambiguities(document)
    for problem in problems[:SHOWN]:
        label = "" if problem.severity is Severity.ERROR else "warning: "
        where = f"{problem.field}: " if problem.field else ""
        print(f"invoicing-async: {source}: {label}{where}{problem.message}", file=out)
    errors = sum(problem.severity is Severity.ERROR for problem in problems)
    more = len(problems) - SHOWN
    if more > 0:
        hidden = errors - sum(problem.severity is Severity.ERROR for problem in problems[:SHOWN])
        print(
            f"invoicing-async: {source}: and {_count(more, 'more problem')} "
            f"({_count(hidden, 'error')}, {_count(more - hidden, 'warning')})",
            file=out,
        )
    return errors > 0


def _count(number: int, what: str) -> str:
    return f"{number:,} {what}{'' if number == 1 else 's'}"
