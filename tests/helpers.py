"""Small helpers shared by test modules."""

from __future__ import annotations

import contextlib
import sys

from invoicing_async import InvoicingError

#: Python code that answers Ctrl-C (SIGINT) with KeyboardInterrupt, as in a terminal,
#: whatever the process inherited: a suite started in the background by a shell without
#: job control ignores SIGINT, its children inherit that, and Python keeps an ignored
#: SIGINT ignored (started under GNU ``timeout`` instead, they do not: how the suite was
#: started must not decide whether a child's Ctrl-C test passes).
_CTRL_C = "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "


def module_with_ctrl_c(module: str, prog: str, *args: str) -> list[str]:
    """The command line of ``python -m module args`` (``sys.argv[0]`` ``prog``) with Ctrl-C."""
    code = f"sys.argv[0] = {prog!r}; runpy.run_module({module!r}, run_name='__main__')"
    return [sys.executable, "-c", _CTRL_C + code, *args]


def script_with_ctrl_c(path: str, *args: str) -> list[str]:
    """The command line of ``python path args`` with Ctrl-C."""
    code = "sys.argv.pop(0); runpy.run_path(sys.argv[0], run_name='__main__')"
    return [sys.executable, "-c", _CTRL_C + code, path, *args]


async def once(client, document, *, encrypted=False, timeout=None):
    """One attempt at a document, without the single-call retries: the typed error of
    that one response (the mapping several tests check) reaches the caller as is."""
    [body] = await client._engine.preparer.prepare_many([(document, encrypted)])
    if isinstance(body, InvoicingError):
        raise body
    return await client._channel.send_body(body[0], encrypted=encrypted, timeout=timeout)


async def send_body(client, body, *, encrypted):
    """One attempt with exactly ``body`` (already encrypted, or deliberately broken)."""
    return await client._channel.send_body(body, encrypted=encrypted)


async def collect(batch, documents):
    """Every outcome of a batch, in input order (what ``submit_many`` gives)."""
    async with contextlib.aclosing(batch.run(documents)) as outcomes:
        collected = [outcome async for outcome in outcomes]
    return sorted(collected, key=lambda outcome: outcome.index)
