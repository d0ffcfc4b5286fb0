"""The ``invoicing-async`` command: demo, sandbox, submit, token, key.

Every subcommand goes through the public API. Bad input ends with one line on stderr and
a non-zero exit status, never a traceback; outcomes are written (and flushed) one line at
a time, so whatever was submitted before a failure is in the output file.

Exit status: 0 all documents accepted (or the check passed), 1 some document was not
accepted (or the check failed), 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from invoicing_async._cli._input import UsageError, document_identity, read_documents
from invoicing_async._cli._ledger import add_commands as add_ledger_commands
from invoicing_async._cli._output import run_batch, summary
from invoicing_async._client import InvoicingClient
from invoicing_async._errors import InvoicingError, ProviderKeyError, ValidationError
from invoicing_async._outcomes import OutcomeStatus, RetryPolicy
from invoicing_async._pgp import ProviderKey

__all__ = ["main"]

ENV_BASE_URL = "INVOICING_BASE_URL"
ENV_CLIENT_ID = "INVOICING_CLIENT_ID"
ENV_API_KEY = "INVOICING_API_KEY"
ENV_PROVIDER_KEY = "INVOICING_PROVIDER_KEY"


# --- subcommands ---------------------------------------------------------------------


def _sandbox_module() -> Any:
    from invoicing_async import sandbox  # noqa: PLC0415  (aiohttp.web and key generation only when needed)

    return sandbox


async def _cmd_demo(args: argparse.Namespace) -> int:
    sandbox = _sandbox_module()
    output = Path(args.output)
    started = time.perf_counter()
    async with sandbox.Sandbox(key_algorithm=args.key_algorithm) as sb:
        documents = sandbox.sample_invoices(args.count, issuer_vat=sb.client_id, seed=args.seed)
        # Show every outcome: a few documents were sent before, a few are invalid.
        duplicates = max(1, args.count // 50)
        for document in documents[-max(1, args.count // 100) :]:
            document["Summaries"]["TotalGrossValue"] = -1
        setup = time.perf_counter() - started
        print(
            f"sandbox {sb.base_url} ({sb.provider_key.algorithm} provider key, "
            f"ready in {setup:.1f} s); submitting {args.count} invoices, "
            f"concurrency {args.concurrency}",
            file=sys.stderr,
        )
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client:
            for document in documents[:duplicates]:  # "sent by yesterday's run"
                await client.submit_json(document)
            if args.faults:  # only the batch meets faults; it retries them safely
                sb.random_faults(
                    rate=args.faults, seed=args.seed, kinds=sandbox.DEFAULT_RANDOM_KINDS
                )
            with output.open("w", encoding="utf-8") as out:
                stream = client.submit_stream(
                    documents, concurrency=args.concurrency, encrypted=not args.json
                )
                counts, elapsed = await run_batch(stream, output=out, total=len(documents))
            extra = {
                "tokens": f"{sb.stats.token_requests} request(s)",
                "committed": f"{sb.commit_count} by the sandbox",
                "results": str(output),
            }
    print(summary(counts, elapsed, extra))
    return 0


async def _cmd_sandbox(args: argparse.Namespace) -> int:
    sandbox = _sandbox_module()
    async with sandbox.Sandbox(
        host=args.host, port=args.port, key_algorithm=args.key_algorithm
    ) as sb:
        key_path = Path(args.public_key_out)
        sb.write_public_key(key_path)
        print(f"base URL:      {sb.base_url}")
        print(f"client id:     {sb.client_id}")
        print(f"API key:       {sb.client_secret}")
        print(f"provider key:  {key_path} ({sb.provider_key.fingerprint})")
        for name in sb.environments[1:]:
            env = sb.environment(name)
            print(f"environment {name}: {env.base_url} client id {env.client_id}")
        print("press Ctrl-C to stop", flush=True)
        stop = asyncio.Event()
        with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
            import signal  # noqa: PLC0415

            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    return 0


def _credentials(args: argparse.Namespace) -> tuple[str, str, str]:
    base_url = args.base_url or os.environ.get(ENV_BASE_URL)
    client_id = args.client_id or os.environ.get(ENV_CLIENT_ID)
    # A trailing newline from a shell, a file or a .env line is never part of a key.
    api_key = (os.environ.get(ENV_API_KEY) or "").strip() or None
    if args.api_key_file:
        try:
            api_key = Path(args.api_key_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UsageError(f"cannot read the API key file: {exc.strerror}") from None
    missing = [
        name
        for name, value in (
            (f"--base-url or {ENV_BASE_URL}", base_url),
            (f"--client-id or {ENV_CLIENT_ID}", client_id),
            (f"--api-key-file or {ENV_API_KEY}", api_key),
        )
        if not value
    ]
    if missing:
        raise UsageError("missing " + ", ".join(missing))
    return str(base_url), str(client_id), str(api_key)


def _provider_key(args: argparse.Namespace) -> ProviderKey:
    path = args.provider_key or os.environ.get(ENV_PROVIDER_KEY)
    if not path:
        raise UsageError(f"missing --provider-key or {ENV_PROVIDER_KEY} (or use --json)")
    return ProviderKey.from_file(path, fingerprint=args.fingerprint)


async def _cmd_submit(args: argparse.Namespace) -> int:
    base_url, client_id, api_key = _credentials(args)
    key = None if args.json else _provider_key(args)
    documents = read_documents(args.documents or ["-"])
    output_cm: Any
    if args.output == "-":
        output_cm = contextlib.nullcontext(sys.stdout)
    else:
        output_cm = Path(args.output).open("a", encoding="utf-8")  # noqa: SIM115
    async with InvoicingClient(base_url, client_id, api_key, provider_key=key) as client:
        with output_cm as output:
            stream = client.submit_stream(
                documents,
                concurrency=args.concurrency,
                encrypted=not args.json,
                journal=args.journal,
                retry=RetryPolicy(attempt_timeout=args.timeout),
                deadline=args.deadline,
                key=document_identity,
            )
            counts, elapsed = await run_batch(stream, output=output, total=None)
    print(summary(counts, elapsed, {}), file=sys.stderr)
    failed = sum(n for status, n in counts.items() if status not in _OK)
    return 1 if failed else 0


_OK = (OutcomeStatus.ACCEPTED, OutcomeStatus.DUPLICATE)


async def _cmd_token(args: argparse.Namespace) -> int:
    base_url, client_id, api_key = _credentials(args)
    async with InvoicingClient(base_url, client_id, api_key, token_attempts=2) as client:
        token = await client.token()
    print(
        f"credentials accepted by {base_url}: {token.token_type} token valid for "
        f"{token.expires_in:.0f} s, refresh token {'issued' if token.refresh_token else 'none'}"
    )
    if args.show_token:
        print(token.value)
    return 0


# What to do about a refusal whose message does not already say what to ask for.
_KEY_ADVICE = {
    "unreadable": "give the provider's public key file (-----BEGIN PGP PUBLIC KEY BLOCK-----)",
    "secret_key": "ask the provider for its PUBLIC key, and keep this secret key private",
    "fingerprint_mismatch": "confirm the fingerprint with the provider by another channel",
}


def _cmd_key(args: argparse.Namespace) -> int:
    try:
        key = ProviderKey.from_file(args.file, fingerprint=args.fingerprint)
    except ProviderKeyError as exc:
        explanation = " ".join(str(exc.message).split())  # one line, whatever the message
        advice = _KEY_ADVICE.get(exc.reason)
        if advice and advice.split()[0] not in explanation:
            explanation = f"{explanation}; {advice}"
        print(f"verdict:      REFUSED ({exc.reason}): {explanation}")
        return 1
    print(f"fingerprint:  {key.fingerprint}")
    print(f"encrypts to:  {key.subkey_fingerprint} ({key.algorithm})")
    print(f"expires:      {key.expires_at.isoformat() if key.expires_at else 'never'}")
    print("verdict:      usable")
    return 0


# --- entry point ---------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="invoicing-async",
        description="Submit invoices to the e-invoicing provider, or try it on a sandbox.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="submit sample invoices to an embedded sandbox")
    demo.add_argument("--count", type=int, default=300, help="invoices to submit (300)")
    demo.add_argument("--concurrency", type=int, default=32, help="in flight at once (32)")
    demo.add_argument("--output", default="demo-results.jsonl", help="JSON Lines results file")
    demo.add_argument("--json", action="store_true", help="use /Invoice/json (no encryption)")
    demo.add_argument(
        "--faults", type=float, default=0.05, help="share of requests hit by a fault (0.05)"
    )
    demo.add_argument("--seed", type=int, default=1, help="seed of documents and faults")
    demo.add_argument(
        "--key-algorithm", default="rsa3072", choices=["rsa3072", "rsa2048", "cv25519"]
    )

    sandbox = commands.add_parser("sandbox", help="run the sandbox provider in the foreground")
    sandbox.add_argument("--host", default="127.0.0.1")
    sandbox.add_argument("--port", type=int, default=8080)
    sandbox.add_argument("--public-key-out", default="sandbox-provider.asc")
    sandbox.add_argument(
        "--key-algorithm", default="rsa3072", choices=["rsa3072", "rsa2048", "cv25519"]
    )

    def add_credentials(command: argparse.ArgumentParser) -> None:
        command.add_argument("--base-url", help=f"environment base URL (${ENV_BASE_URL})")
        command.add_argument("--client-id", help=f"issuer TIN (${ENV_CLIENT_ID})")
        command.add_argument(
            "--api-key-file", help=f"file holding the API key (default: ${ENV_API_KEY})"
        )

    submit = commands.add_parser("submit", help="submit documents to the provider")
    add_credentials(submit)
    submit.add_argument("documents", nargs="*", help="JSON / JSON Lines files, directories, -")
    submit.add_argument("--provider-key", help=f"provider public key file (${ENV_PROVIDER_KEY})")
    submit.add_argument("--fingerprint", help="pin the provider key's fingerprint")
    submit.add_argument("--json", action="store_true", help="use /Invoice/json (no encryption)")
    submit.add_argument("--concurrency", type=int, default=16)
    submit.add_argument(
        "--timeout", type=float, default=30.0, help="seconds for one attempt of a document (30)"
    )
    submit.add_argument(
        "--deadline", type=float, help="seconds for the whole run; unsent documents end not_sent"
    )
    submit.add_argument("--output", default="-", help="JSON Lines results file, appended (-)")
    submit.add_argument("--journal", help="ledger file (SQLite): rerun to resume safely")

    token = commands.add_parser("token", help="check credentials against an environment")
    add_credentials(token)
    token.add_argument("--show-token", action="store_true", help="print the access token")

    add_ledger_commands(commands, add_credentials)

    key = commands.add_parser("key", help="inspect a provider public key file")
    key.add_argument("file")
    key.add_argument("--fingerprint", help="the fingerprint the key must have")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "key":
            return _cmd_key(args)
        if hasattr(args, "ledger_command"):
            return int(asyncio.run(args.ledger_command(args, _credentials, _provider_key)))
        command = {
            "demo": _cmd_demo,
            "sandbox": _cmd_sandbox,
            "submit": _cmd_submit,
            "token": _cmd_token,
        }[args.command]
        return asyncio.run(command(args))
    except UsageError as exc:
        print(f"invoicing-async: {exc}", file=sys.stderr)
        return 2
    except (InvoicingError, ValueError, OSError) as exc:
        print(f"invoicing-async: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, (ValueError, ProviderKeyError, ValidationError)) else 1
    except KeyboardInterrupt:
        print("invoicing-async: interrupted", file=sys.stderr)
        return 130
