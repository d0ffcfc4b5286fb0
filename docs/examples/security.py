"""Security properties a deployment relies on, checked against the embedded sandbox.

The provider key is pinned by fingerprint; plain ``http`` is refused except on loopback;
the API key and tokens appear in no repr, log line, error or journal.
``python docs/examples/security.py``.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from pathlib import Path

from invoicing_async import (
    AuthenticationError,
    InvoicingClient,
    ProviderKey,
    ProviderKeyError,
)
from invoicing_sandbox import Sandbox, sample_invoice


def load_provider_key(path: Path, fingerprint: str) -> ProviderKey:
    """Load the provider's public key, refusing any key but the one expected.

    Take the fingerprint from the provider through another channel than the key file
    (its portal, a signed e-mail); spaces are allowed.
    """
    return ProviderKey.from_file(path, fingerprint=fingerprint)


class Recorder(logging.Handler):
    """Keeps every formatted log line of the library."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the line as a handler writing to a file or a log service would."""
        self.lines.append(self.format(record))


def ledger_text(directory: Path) -> str:
    """What the ledger (SQLite) and its WAL hold: keys, statuses, records."""
    files = sorted(directory.glob("batch.db*"))
    return "".join(file.read_bytes().decode("utf-8", "replace") for file in files)


async def main() -> None:
    """Check each property; an ``AssertionError`` means a deployment could leak."""
    library_log = logging.getLogger("invoicing_async")
    recorder = Recorder()
    library_log.addHandler(recorder)
    library_log.setLevel(logging.DEBUG)
    try:
        await _checks(recorder)
    finally:
        library_log.removeHandler(recorder)
        library_log.setLevel(logging.NOTSET)


async def _checks(recorder: Recorder) -> None:
    async with Sandbox() as sandbox:
        with tempfile.TemporaryDirectory() as tmp:
            # region pinning-check
            key_file = sandbox.write_public_key(Path(tmp, "provider.asc"))
            expected = sandbox.provider_key.fingerprint  # 40 hex digits
            spaced = " ".join(expected[i : i + 4] for i in range(0, 40, 4))
            assert load_provider_key(key_file, spaced).fingerprint == expected
            try:
                load_provider_key(key_file, "0" * 40)  # someone swapped the key file
            except ProviderKeyError as exc:
                assert exc.reason == "fingerprint_mismatch"
            else:
                raise AssertionError("a key with another fingerprint was accepted")
            # endregion pinning-check

            # region https
            for url in ("http://invoicing.example.com", "ftp://invoicing.example.com"):
                try:
                    InvoicingClient(url, sandbox.client_id, sandbox.client_secret)
                except ValueError:
                    pass  # refused before anything is sent
                else:
                    raise AssertionError(f"{url} was accepted")
            InvoicingClient("https://invoicing.example.com", "094019245", "api key")
            InvoicingClient("http://127.0.0.1:8080", "094019245", "api key")  # loopback
            # endregion https

            # region secrets
            secret = sandbox.client_secret
            journal = Path(tmp, "batch.db")
            async with InvoicingClient(
                sandbox.base_url,
                sandbox.client_id,
                secret,
                provider_key=sandbox.provider_key,
            ) as client:
                token = await client.token()
                invoices = [
                    sample_invoice(n, issuer_vat=sandbox.client_id) for n in range(5)
                ]
                outcomes = await client.submit_many(invoices, ledger=journal)
                assert all(outcome.ok for outcome in outcomes)
                sandbox.expire_tokens()  # the next request meets a 401, renews: logged
                # Another 401: this issuer's TIN does not match the API key.
                try:
                    await client.submit_secure(
                        sample_invoice(9, issuer_vat="094019245")
                    )
                except AuthenticationError as exc:
                    refusal = exc
                else:
                    raise AssertionError("another issuer's invoice was accepted")
                shown = [repr(client), repr(token), str(refusal), repr(refusal)]
            secrets = [secret, token.value, token.refresh_token or secret]
            written = ledger_text(Path(tmp))
            assert recorder.lines  # the library did log the renewal
            for text in [*shown, *recorder.lines, written]:
                assert not any(value in text for value in secrets)
            # endregion secrets


if __name__ == "__main__":
    asyncio.run(main())
