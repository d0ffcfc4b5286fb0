"""``invoicing-async sandbox``: the embedded provider as a service; ``demo``: a tour of it.

The service prints what it runs (URLs, credentials, where the provider key and the CA
certificate are, ready-to-paste ``export`` lines) and a summary when it stops. Files go
to a new private temporary directory, removed when it stops (or to ``--out``, kept, with
the provider's secret key so that a restart keeps the same key), never the current
directory. On a
network (``--host 0.0.0.0``) it serves HTTPS with a certificate from a CA it makes at
start: clients trust that CA (``INVOICING_CA_FILE``), and the client's refusal of plain
http beyond loopback stays as it is.

It serves many issuers too: ``--issuers FILE`` registers those of a credentials file
(:mod:`._issuerfile`), ``--issuer-count N`` makes N and writes their credentials to a
file only its owner can read; API keys of these are never printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invoicing_async import InvoicingClient
from invoicing_async._for_sandbox import (
    ENV_CA_FILE,
    ENV_PROVIDER_KEY,
    Progress,
    Source,
    Tally,
    UsageError,
    add_verbosity,
    attach_progress,
    summary,
    write_record,
)

if TYPE_CHECKING:
    from invoicing_async._for_sandbox import Commands

    from ._sandbox import Sandbox

__all__ = ["register"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")
DEFAULT_PORT = 8080
_ALGORITHMS = ["rsa3072", "rsa2048", "cv25519"]


def register(commands: Commands) -> None:
    """Add ``demo`` and ``sandbox``."""
    demo = commands.add_parser(
        "demo",
        help="submit sample invoices to an embedded sandbox",
        description="Start the sandbox on loopback, submit sample invoices (a few sent "
        "before, a few invalid, a share of the requests faulted), show progress and a "
        "summary, and write every outcome to a JSON Lines file.",
    )
    add_verbosity(demo)
    demo.add_argument("--count", type=int, default=300, help="invoices to submit (300)")
    demo.add_argument("--concurrency", type=int, default=32, help="in flight at once (32)")
    demo.add_argument(
        "--output", default="demo-results.jsonl", help="JSON Lines results (demo-results.jsonl)"
    )
    demo.add_argument("--json", action="store_true", help="use /Invoice/json (no encryption)")
    demo.add_argument(
        "--faults", type=float, default=0.05, help="share of requests hit by a fault (0.05)"
    )
    demo.add_argument("--seed", type=int, default=1, help="seed of documents and faults (1)")
    demo.add_argument(
        "--key-algorithm", default="rsa3072", choices=_ALGORITHMS, help="provider key (rsa3072)"
    )
    demo.set_defaults(handler=_demo)

    sandbox = commands.add_parser(
        "sandbox",
        help="run the sandbox provider as a service",
        description="Run the sandbox provider in the foreground until Ctrl-C or SIGTERM: "
        "for manual tests, or as a docker-compose / CI service (--host 0.0.0.0, served "
        "over HTTPS). Read-only endpoints under /_sandbox/ show what it received and holds.",
    )
    add_verbosity(sandbox)
    where = sandbox.add_argument_group("listening")
    where.add_argument("--host", default="127.0.0.1", help="interface (127.0.0.1; 0.0.0.0: all)")
    where.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"TCP port ({DEFAULT_PORT}; 0: any free)"
    )
    where.add_argument(
        "--tls",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve HTTPS with a certificate from a CA made at start (default: on unless "
        "listening on loopback only)",
    )
    where.add_argument(
        "--name",
        action="append",
        default=[],
        metavar="HOST",
        help="a host name clients use (repeatable; the first goes into the printed URLs): "
        "the docker-compose service name, say. The certificate is valid for these, "
        "loopback and this machine's names",
    )
    files = sandbox.add_argument_group("files")
    files.add_argument(
        "--out",
        metavar="DIR",
        help="write provider.asc, ca.pem and invoicing.env here, and keep them (with the "
        "provider's secret key, so a restart keeps the same provider key); default: a "
        "new private temporary directory, removed when the sandbox stops",
    )
    files.add_argument(
        "--public-key-out", metavar="FILE", help="the provider key's file (DIR/provider.asc)"
    )
    files.add_argument(
        "--key-algorithm", default="rsa3072", choices=_ALGORITHMS, help="provider key (rsa3072)"
    )
    files.add_argument(
        "--key-file",
        metavar="FILE",
        help="use this armored secret key (the same provider key on every run)",
    )
    behaviour = sandbox.add_argument_group("behaviour")
    behaviour.add_argument(
        "--seed", help="reproducible credentials and records (the same on every run)"
    )
    behaviour.add_argument(
        "--require-fields",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="refuse (400) documents missing a field the provider requires (default: on; "
        "--no-require-fields checks fields only when present, for odd test documents)",
    )
    behaviour.add_argument(
        "--faults",
        type=float,
        default=0.0,
        metavar="RATE",
        help="share of document requests hit by a random fault (0; 0.05: 5%%); at most 3 "
        "attempts of a document, so a client that retries gets through",
    )
    behaviour.add_argument(
        "--fault-seed", default="1", metavar="SEED", help="seed of the random faults (1)"
    )
    behaviour.add_argument(
        "--latency",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="delay every document request, like a provider's processing time (0)",
    )
    behaviour.add_argument(
        "--latency-jitter",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="plus a random delay up to SECONDS (0)",
    )
    many = sandbox.add_argument_group("many issuers")
    source = many.add_mutually_exclusive_group()
    source.add_argument(
        "--issuers",
        metavar="FILE",
        help="also serve the issuers of FILE, in the default environment: a JSON object "
        '{"TIN": "API key", ...} or CSV lines TIN,API key',
    )
    source.add_argument(
        "--issuer-count",
        type=int,
        metavar="N",
        help="also serve N issuers with generated TINs and API keys (the same keys on "
        "every run with --seed) and write their credentials, a JSON object, to "
        "DIR/issuers.json (mode 0600; the keys are never printed)",
    )
    many.add_argument(
        "--issuers-out",
        metavar="FILE",
        help="where --issuer-count writes the credentials (DIR/issuers.json)",
    )
    sandbox.set_defaults(handler=_sandbox)


def _sandbox_module() -> Any:
    import invoicing_sandbox as sandbox  # noqa: PLC0415  (aiohttp.web, key generation)

    return sandbox


async def _sandbox(args: argparse.Namespace) -> int:
    module = _sandbox_module()
    tls = args.tls if args.tls is not None else args.host not in _LOOPBACK
    names = list(args.name)
    if names:
        from ._tls import default_names  # noqa: PLC0415

        names += [n for n in default_names(args.host) if n not in names]
    issuers = _issuers(args)
    directory, cleanup = _files_directory(args)
    with cleanup:
        try:
            sb = module.Sandbox(
                host=args.host,
                port=args.port,
                key_algorithm=args.key_algorithm,
                key_file=args.key_file or _kept_key(args, directory),
                seed=args.seed,
                tls=tls,
                tls_names=names or None,
                public_host=args.name[0] if args.name else None,
                require_fields=args.require_fields,
                issuers=issuers,
            )
        except ValueError as exc:  # an issuer of the file clashes with the default client
            raise UsageError(str(exc)) from None
        started = time.monotonic()
        try:
            await sb.start()
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                why = "in use" if exc.errno == errno.EADDRINUSE else "not allowed"
                raise UsageError(
                    f"port {args.port} on {args.host} is {why}: use --port 0 for any free "
                    "port (the URLs printed say which), or another --port"
                ) from None
            raise
        try:
            await _serve(sb, args, directory, issuers or {})
        finally:
            await sb.close()
    print(_farewell(sb, time.monotonic() - started), flush=True)
    return 0


async def _serve(
    sb: Sandbox, args: argparse.Namespace, directory: Path, issuers: dict[str, str]
) -> None:
    if args.faults:
        sb.random_faults(rate=args.faults, seed=args.fault_seed)
    if args.latency or args.latency_jitter:
        sb.set_latency(args.latency, jitter=args.latency_jitter)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
    # Announced once Ctrl-C stops it: the banner says "press Ctrl-C to stop".
    _announce(sb, args, directory, issuers)
    await stop.wait()


def _issuers(args: argparse.Namespace) -> dict[str, str] | None:
    """The issuers ``--issuers`` reads or ``--issuer-count`` makes (checked before start)."""
    from ._issuerfile import read_issuers  # noqa: PLC0415
    from ._issuers import sandbox_issuers  # noqa: PLC0415

    if args.issuers_out and args.issuer_count is None:
        raise UsageError("--issuers-out names the file --issuer-count writes: add --issuer-count")
    if args.issuers:
        try:
            return read_issuers(args.issuers)
        except ValueError as exc:  # a file it cannot read too: the reason, its name
            raise UsageError(f"--issuers: {exc}") from None
    if args.issuer_count is None:
        return None
    if args.issuer_count < 0:
        raise UsageError("--issuer-count must not be negative")
    return sandbox_issuers(args.issuer_count, seed=args.seed)


def _files_directory(args: argparse.Namespace) -> tuple[Path, contextlib.ExitStack]:
    """Where the files go, and what removes them on exit (nothing for ``--out``)."""
    cleanup = contextlib.ExitStack()
    if args.out:
        directory = Path(args.out)
        directory.mkdir(parents=True, exist_ok=True)
    else:  # private, and removed on exit: it holds an API key
        directory = Path(tempfile.mkdtemp(prefix="invoicing-sandbox-"))
        cleanup.callback(shutil.rmtree, directory, ignore_errors=True)
    return directory, cleanup


#: The provider's key pair in ``--out``: a restart with the same ``--out`` reuses it.
_KEPT_PAIR = "provider-secret.asc"


def _kept_key(args: argparse.Namespace, directory: Path) -> Path | None:
    """The secret key an earlier run left in ``--out`` (written now if there is none).

    Apps that read ``provider.asc`` keep encrypting to the key they loaded, so a
    restarted sandbox must decrypt with the same one.
    """
    if not args.out:
        return None
    kept = directory / _KEPT_PAIR
    if not kept.exists():
        from ._keys import cached_keypair  # noqa: PLC0415

        _write_private(kept, cached_keypair(args.key_algorithm).private_armored)
    return kept


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)


def _announce(
    sb: Sandbox, args: argparse.Namespace, directory: Path, issuers: dict[str, str]
) -> None:
    variables = sb.client_variables(directory)
    key_path = Path(variables[ENV_PROVIDER_KEY])
    if args.public_key_out:
        key_path = sb.write_public_key(Path(args.public_key_out)).resolve()
        variables[ENV_PROVIDER_KEY] = str(key_path)
    ca_path = Path(variables[ENV_CA_FILE]) if ENV_CA_FILE in variables else None
    env_file = directory / "invoicing.env"
    _write_private(env_file, "".join(f"{name}={value}\n" for name, value in variables.items()))
    lines = [
        f"base URL:      {sb.base_url}",
        f"client id:     {sb.client_id}",
        f"API key:       {sb.client_secret}",
        f"provider key:  {key_path} ({sb.provider_key.fingerprint})",
    ]
    if ca_path is not None:
        lines.append(f"CA file:       {ca_path} (trust it: {ENV_CA_FILE} or --ca-file)")
    lines.append(f"listening:     {args.host}:{sb.port} ({'https' if ca_path else 'http'})")
    lines += [
        f"environment {name}: {sb.environment(name).base_url} "
        f"client id {sb.environment(name).client_id}"
        for name in sb.environments[1:]
    ]
    lines.append(f"inspect:       {sb.inspect_url}/ (stats, documents, requests)")
    lines += _issuer_lines(sb, args, directory, issuers)
    if args.faults or args.latency or args.latency_jitter:
        lines.append(
            f"faults:        {args.faults:.0%} of document requests (seed {args.fault_seed}); "
            f"latency {args.latency:g} s + up to {args.latency_jitter:g} s"
        )
    if args.seed is not None:
        lines.append(f"seed:          {args.seed} (credentials and records are reproducible)")
    lines.append(f"variables:     {env_file} (for docker compose's env_file), or:")
    lines += [f"  export {name}={value}" for name, value in variables.items()]
    lines.append("press Ctrl-C to stop")
    print("\n".join(lines), flush=True)


def _issuer_lines(
    sb: Sandbox, args: argparse.Namespace, directory: Path, issuers: dict[str, str]
) -> list[str]:
    """The banner's lines on the issuers of ``--issuers`` / ``--issuer-count`` (no key)."""
    where = f"environment {sb.environments[0]}"
    if args.issuers:
        return [f"issuers:       {len(issuers)} more from {args.issuers} ({where})"]
    if args.issuer_count is None:
        return []
    from ._issuerfile import write_issuers  # noqa: PLC0415

    written = write_issuers(args.issuers_out or directory / "issuers.json", issuers).resolve()
    what = "credentials (JSON, TIN to API key, mode 0600)"
    return [f"issuers:       {len(issuers)} more ({where}); {what}: {written}"]


def _farewell(sb: Sandbox, elapsed: float) -> str:
    stats = sb.stats
    submissions = ", ".join(f"{k} x{n}" for k, n in sorted(stats.submissions.items(), key=str))
    return (
        f"sandbox stopped after {elapsed:.1f} s: {len(sb.requests)} request(s), "
        f"{stats.token_requests} token request(s), {sb.commit_count} commit(s); "
        f"submissions by answer: {submissions or 'none'}"
    )


async def _demo(args: argparse.Namespace) -> int:
    module = _sandbox_module()
    output = Path(args.output)
    started = time.perf_counter()
    async with module.Sandbox(key_algorithm=args.key_algorithm) as sb:
        documents = module.sample_invoices(args.count, issuer_vat=sb.client_id, seed=args.seed)
        # Show every outcome: a few documents were sent before, a few are invalid.
        duplicates = max(1, args.count // 50)
        broken = max(1, args.count // 100)
        for document in documents[-broken:]:
            document["Summaries"]["TotalGrossValue"] = -1
        print(
            f"sandbox {sb.base_url} ({sb.provider_key.algorithm} provider key, ready in "
            f"{time.perf_counter() - started:.1f} s); submitting {args.count} invoices, "
            f"concurrency {args.concurrency}",
            file=sys.stderr,
        )
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client:
            for document in documents[:duplicates]:  # "sent by yesterday's run"
                await client.submit_json(document)
            if args.faults:  # only the batch meets faults; it retries them safely
                sb.random_faults(rate=args.faults, seed=args.seed)
            tally = Tally(total=len(documents))
            progress = Progress(tally)
            attach_progress(progress)
            with output.open("w", encoding="utf-8") as out:
                stream = client.submit_stream(
                    documents, concurrency=args.concurrency, encrypted=not args.json
                )
                async with contextlib.aclosing(stream) as outcomes:
                    async for outcome in outcomes:
                        source = Source("<samples>", outcome.index + 1)
                        write_record(out, outcome, outcome.index, source)
                        tally.add(outcome)
                        progress.update()
            progress.close()
            attach_progress(None)
        extra = {
            "tokens": f"{sb.stats.token_requests} request(s)",
            "committed": f"{sb.commit_count} by the sandbox",
            "results": str(output),
            "expected": f"{broken} rejected and {duplicates} duplicate(s): the demo breaks "
            f"{broken} invoice(s) on purpose (a negative TotalGrossValue) and sends "
            f"{duplicates} before the batch, to show every outcome; exit status 0",
        }
    print(summary(tally, extra))
    return 0
