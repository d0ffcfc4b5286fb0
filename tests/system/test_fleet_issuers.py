"""A fleet across 1,000 issuers: three worker processes, one PostgreSQL outbox, Redis tokens.

The sandbox serves 1,000 issuers from this test's event loop; 3,000 invoices (three per
issuer, encrypted) wait in one PostgreSQL outbox; three ``pool_worker.py`` processes,
each an ``IssuerPool`` whose token cache is a ``RedisTokenStore`` on the suite's
``redis-server``, drain it together. Every invoice is committed once under its own
issuer, every worker takes a share, and no issuer's token is requested more than once
(the run is far shorter than a token's 900 s lifetime: one request per issuer per
lifetime, counted by the sandbox per issuer).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from invoicing_async.outbox import PostgresOutbox
from invoicing_sandbox import Sandbox, sample_invoice, sandbox_issuers

SCRIPT = Path(__file__).parent / "scripts" / "pool_worker.py"
ISSUERS = 1000
PER_ISSUER = 3


async def test_three_workers_share_an_outbox_of_1000_issuers_one_token_each(
    tmp_path, postgres_dsn, redis_url
):
    """3 worker processes, 1,000 issuers x 3 invoices in one PostgreSQL outbox: each
    invoice committed once, under its own issuer; each worker settles some; at most one
    token request per issuer across the fleet."""
    issuers = sandbox_issuers(ISSUERS)
    credentials = tmp_path / "issuers.json"
    credentials.write_text(json.dumps(issuers), encoding="utf-8")
    async with Sandbox(key_algorithm="cv25519", issuers=issuers) as sb:
        key_file = sb.write_public_key(tmp_path / "provider.asc")
        async with PostgresOutbox(postgres_dsn) as outbox:
            for n in range(PER_ISSUER):
                await outbox.enqueue(
                    [sample_invoice(n, issuer_vat=tin, lines=1) for tin in issuers]
                )
        workers = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                str(SCRIPT),
                postgres_dsn,
                sb.base_url,
                str(credentials),
                str(key_file),
                redis_url,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            for _ in range(3)
        ]
        for worker in workers:
            ready = await asyncio.wait_for(worker.stdout.readline(), 60)
            assert ready == b"ready\n", (ready, (await worker.stderr.read()).decode()[-3000:])
        for worker in workers:
            worker.stdin.write(b"go\n")
            await worker.stdin.drain()
        settled = []
        for worker in workers:
            out, err = await asyncio.wait_for(worker.communicate(), 120)
            assert worker.returncode == 0, err.decode()[-3000:]
            assert out.startswith(b"done "), out
            settled.append(json.loads(out[5:]))
        assert all(counts.get("accepted", 0) > 0 for counts in settled), settled
        assert sum(counts.get("accepted", 0) for counts in settled) == ISSUERS * PER_ISSUER
        assert sb.commit_count == ISSUERS * PER_ISSUER
        assert all(held.commits == 1 for held in sb.committed.values())
        for tin in issuers:
            stats = sb.issuer_stats(tin)
            assert stats.commits == PER_ISSUER
            assert stats.token_requests <= 1, (tin, stats)
        async with PostgresOutbox(postgres_dsn) as outbox:
            assert await outbox.counts() == {"accepted": ISSUERS * PER_ISSUER}
