"""Interoperability with independent OpenPGP implementations: GnuPG and Sequoia.

Three directions, each against peers the project does not control:

* the library's messages (``ProviderKey.encrypt``) decrypt byte-exact in gpg and sq,
  with the promised shape (AES-256, SEIPD v1 with MDC, binary literal);
* messages gpg and sq make with their own choices (compression, padding, framing,
  cipher) reach the sandbox and are committed byte-exact, or are refused precisely when
  they use what the sandbox's key does not offer;
* the sandbox's own keys (written without PGPy) are accepted by gpg, and gpg's keys by
  the sandbox.

Every test needs ``gpg`` (or ``sq``) and skips without it.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import keyfactory as kf
import messagefactory as mf
import pytest
from helpers import send_body
from messagefactory import PAYLOAD

from invoicing_async import InvoicingClient, ProviderKey, ProviderKeyError, document_key
from invoicing_async._doc.document import serialize_document
from invoicing_sandbox import Sandbox, generate_keypair, sample_invoice
from invoicing_sandbox._keys import public_half
from invoicing_sandbox._pgp import Decryptor, UnsupportedMessageError

pytestmark = pytest.mark.interop

SQ = shutil.which("sq")
GPG = shutil.which("gpg")


@pytest.fixture(scope="session", params=["rsa3072", "cv25519"])
def pair_and_decryptor(request):
    return mf.keypair(request.param), mf.decryptor(request.param)


@pytest.fixture
def gnupg():
    if GPG is None:
        pytest.skip("gpg is not installed")
    # Short path: gpg-agent's socket path must fit in sun_path.
    home = tempfile.mkdtemp(prefix="gpg-", dir="/tmp")
    Path(home).chmod(0o700)
    try:
        yield mf.GnuPG(GPG, Path(home))
    finally:
        subprocess.run(
            ["gpgconf", "--homedir", home, "--kill", "all"], capture_output=True, check=False
        )
        shutil.rmtree(home, ignore_errors=True)


# --- the library's messages, decrypted by peers ------------------------------------------------


def _invoice() -> bytes:
    lines = [
        {
            "position": i,
            "description": f"Υπηρεσίες συμβούλου {i} — Αθήνα, «ειδική» τιμή",
            "unit_price": "1234.56 €",
            "quantity": i % 7 + 1,
        }
        for i in range(24)
    ]
    doc = {
        "invoice": "INV-2026-000042",
        "issuer": {"name": "Ωμέγα Ανώνυμη Εταιρεία", "city": "Αθήνα", "vat": "EL123456789"},
        "buyer": {"name": "Zürich Straße GmbH", "city": "Köln"},
        "currency": "EUR",
        "total": "€ 29 629,44",
        "lines": lines,
    }
    return json.dumps(doc, ensure_ascii=False, indent=2).encode()


INVOICE = _invoice()
LARGE = random.Random(20260101).randbytes(100 * 1024)  # binary: NULs, CR, LF, 0xFF

PAYLOADS = [
    pytest.param(INVOICE, id="invoice-json-4k"),
    pytest.param(b"", id="empty"),
    pytest.param(LARGE, id="random-100k"),
]

KEYS = [
    pytest.param(kf.rsa3072, id="rsa3072"),
    pytest.param(kf.cv25519, id="cv25519"),
    pytest.param(kf.nistp256, id="nistp256"),
    pytest.param(kf.rsa4096, id="rsa4096"),
]

CHOICE_KEYS = [
    pytest.param(kf.newest_subkey_expired, id="newest-expired"),
    pytest.param(kf.several_valid_subkeys, id="several-valid"),
    pytest.param(kf.newest_subkey_revoked, id="newest-revoked"),
    pytest.param(kf.newest_first_in_file, id="newest-stored-first"),
    pytest.param(kf.bad_binding_newest, id="newest-bad-binding"),
    pytest.param(kf.rsa_primary_encrypts, id="primary-encrypts"),
]

SQ_KEYS = [
    pytest.param(kf.sq_cv25519, id="sq-cv25519"),
    pytest.param(kf.sq_rsa3072, id="sq-rsa3072"),
    pytest.param(kf.sq_storage_only, id="sq-storage-only"),
]


def _encrypt(generated: kf.GeneratedKey, payload: bytes) -> bytes:
    message = ProviderKey.from_armored(generated.armored).encrypt(payload)
    assert isinstance(message, bytes)
    assert message.lstrip().startswith(b"-----BEGIN PGP MESSAGE-----")
    assert message.rstrip().endswith(b"-----END PGP MESSAGE-----")
    return message


def _assert_message_shape(generated: kf.GeneratedKey, result: kf.GpgDecryption) -> None:
    assert generated.expected_subkey is not None
    enc_to = [args[0].upper() for args in result.lines("ENC_TO")]
    assert enc_to == [generated.expected_subkey[-16:]], result.status
    info = result.lines("DECRYPTION_INFO")
    assert len(info) == 1, result.status
    mdc_method, sym_algo, *aead = info[0]
    assert mdc_method == "2", "SEIPD v1 with MDC (SHA-1) expected"
    assert sym_algo == "9", "AES-256 (algo 9) expected"
    assert aead in ([], ["0"]), "no AEAD (SEIPD v2 / OCB) expected"
    plaintext = result.lines("PLAINTEXT")
    assert len(plaintext) == 1
    assert plaintext[0][0] == "62", "literal data format 'b' (0x62) expected"
    assert result.lines("DECRYPTION_OKAY") == [[]]
    assert result.lines("GOODMDC") == [[]]
    assert not result.lines("DECRYPTION_FAILED")


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("factory", KEYS)
def test_gpg_decrypts_byte_exact(factory, payload: bytes):
    """GnuPG decrypts to the exact payload; the message is AES-256 SEIPD+MDC, literal 'b'."""
    generated = factory()
    message = _encrypt(generated, payload)
    result = kf.gpg_decrypt_status(generated, message)
    assert result.plaintext == payload
    _assert_message_shape(generated, result)


@pytest.mark.parametrize("factory", KEYS)
def test_gpg_decrypts_with_imported_secret_key(factory):
    """The helper path 'armored secret key -> fresh GnuPG home' also decrypts byte-exact."""
    generated = factory()
    assert generated.secret is not None
    assert kf.gpg_decrypt(generated.secret, _encrypt(generated, INVOICE)) == INVOICE


@pytest.mark.parametrize("factory", KEYS)
def test_gpg_list_packets_shows_mdc_and_binary_literal(factory):
    """GnuPG --list-packets: one PKESK to the chosen subkey, SEIPD with MDC, literal 'b'."""
    generated = factory()
    assert generated.expected_subkey is not None
    dump = kf.gpg_list_packets(generated, _encrypt(generated, INVOICE))
    pkesk = [line for line in dump.splitlines() if line.startswith(":pubkey enc packet:")]
    assert len(pkesk) == 1, dump
    assert f"keyid {generated.expected_subkey[-16:]}" in pkesk[0], dump
    assert ":encrypted data packet:" in dump
    assert "mdc_method: 2" in dump
    assert ":aead encrypted packet:" not in dump
    assert "mode b (62)" in dump
    assert ":symkey enc packet:" not in dump, "no password-based session key expected"


@pytest.mark.parametrize("factory", CHOICE_KEYS)
def test_message_goes_to_the_chosen_subkey(factory):
    """The message is encrypted to the subkey the contract chooses (not PGPy's first one)."""
    generated = factory()
    message = _encrypt(generated, INVOICE)
    result = kf.gpg_decrypt_status(generated, message)
    assert result.plaintext == INVOICE
    _assert_message_shape(generated, result)


def test_each_encryption_uses_a_fresh_session_key():
    """Encrypting the same payload twice gives different ciphertexts, both decrypting right."""
    generated = kf.cv25519()
    key = ProviderKey.from_armored(generated.armored)
    first, second = key.encrypt(INVOICE), key.encrypt(INVOICE)
    assert first != second
    assert kf.gpg_decrypt(generated, first) == INVOICE
    assert kf.gpg_decrypt(generated, second) == INVOICE


def test_ciphertext_does_not_leak_the_plaintext():
    """The armored message contains no recognisable fragment of the invoice."""
    generated = kf.rsa3072()
    message = _encrypt(generated, INVOICE)
    assert b"INV-2026-000042" not in message
    assert "Αθήνα".encode() not in message


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("factory", KEYS)
def test_sq_decrypts_byte_exact(factory, payload: bytes):
    """Sequoia (sq decrypt --recipient-key) recovers the exact payload."""
    kf.require_sq()
    generated = factory()
    assert generated.secret is not None
    assert kf.sq_decrypt(generated.secret, _encrypt(generated, payload)) == payload


@pytest.mark.parametrize("factory", SQ_KEYS)
def test_sq_generated_keys_round_trip(factory):
    """Keys made by sq key generate work: sq and gpg both decrypt byte-exact."""
    generated = factory()
    assert generated.secret is not None
    message = _encrypt(generated, INVOICE)
    assert kf.sq_decrypt(generated.secret, message) == INVOICE
    result = kf.gpg_decrypt_status(generated, message)
    assert result.plaintext == INVOICE
    _assert_message_shape(generated, result)


# --- peers' messages, decrypted by the sandbox ---------------------------------------------------


def sq_encrypt(public_key: str, plaintext: bytes, *options: str) -> bytes:
    with tempfile.TemporaryDirectory() as home:
        cert = Path(home) / "provider.asc"
        cert.write_text(public_key)
        command = [SQ, "encrypt", "--recipient-cert", str(cert), *options]
        env = {**os.environ, "SEQUOIA_HOME": home, "HOME": home}
        return subprocess.run(
            command, input=plaintext, capture_output=True, check=True, env=env, timeout=60
        ).stdout


def gpg_encrypt(public_key: str, fingerprint: str, plaintext: bytes, *options: str) -> bytes:
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "GNUPGHOME": home}
        key_path = Path(home) / "provider.asc"
        key_path.write_text(public_key)
        run = {"env": env, "capture_output": True, "timeout": 60}
        subprocess.run([GPG, "--batch", "--quiet", "--import", str(key_path)], check=True, **run)
        command = [GPG, "--batch", "--quiet", "--trust-model", "always", *options]
        command += ["--encrypt", "--recipient", fingerprint]
        return subprocess.run(command, input=plaintext, check=True, **run).stdout


async def submit_foreign(sb: Sandbox, encrypt, number: int) -> None:
    """Encrypt document ``number`` with ``encrypt`` and check the sandbox commits it."""
    document = sample_invoice(number, issuer_vat=sb.client_id, lines=3)
    plaintext = serialize_document(document)
    body = await asyncio.to_thread(encrypt, plaintext)
    async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
        result = await send_body(client, body, encrypted=True)
    committed = sb.committed[document_key(document)]
    assert committed.body == plaintext  # byte-exact
    assert committed.encrypted
    assert committed.record == result


@pytest.mark.skipif(SQ is None, reason="sq (Sequoia) is not installed")
@pytest.mark.parametrize("algorithm", ["cv25519", "rsa3072"])
@pytest.mark.parametrize(
    "options",
    [
        (),
        ("--compression", "none"),
        ("--compression", "zip"),
        ("--compression", "zlib"),
        ("--binary",),
    ],
    ids=["default-pad", "uncompressed", "zip", "zlib", "binary"],
)
async def test_sequoia_encrypted_document_is_accepted(algorithm, options):
    """A document ``sq encrypt`` encrypts to the sandbox's public key (armored or binary,
    padded, uncompressed or compressed with zip or zlib) is decrypted and committed byte-exact.
    """
    async with Sandbox(key_algorithm=algorithm) as sb:
        await submit_foreign(
            sb, lambda plaintext: sq_encrypt(sb.public_key_armored, plaintext, *options), 1
        )


@pytest.mark.skipif(GPG is None, reason="gpg (GnuPG) is not installed")
@pytest.mark.parametrize(
    "options",
    [
        ("--armor",),
        ("--armor", "--compress-algo", "none"),
        ("--armor", "--compress-algo", "zlib", "--cipher-algo", "AES128"),
        ("--armor", "--compress-algo", "zip", "--cipher-algo", "AES192"),
        (),  # binary
    ],
    ids=["default", "uncompressed", "zlib-aes128", "zip-aes192", "binary"],
)
async def test_gnupg_encrypted_document_to_a_cv25519_key_is_accepted(options):
    """GnuPG (ECDH on Curve25519, with other compression and cipher choices than its
    defaults, armored or binary) encrypts a document the sandbox commits byte-exact.
    """
    async with Sandbox(key_algorithm="cv25519") as sb:
        fingerprint = sb.provider_key.fingerprint

        def encrypt(plaintext: bytes) -> bytes:
            return gpg_encrypt(sb.public_key_armored, fingerprint, plaintext, *options)

        await submit_foreign(sb, encrypt, 2)


@pytest.mark.parametrize(
    ("encrypt_with", "options", "reason"),
    [
        pytest.param(
            "gpg",
            ("--armor", "--cipher-algo", "CAMELLIA256"),
            "symmetric algorithm 13",
            id="gpg-camellia256",
        ),
        pytest.param(
            "gpg",
            ("--armor", "--compress-algo", "bzip2"),
            "compression algorithm 3",
            id="gpg-bzip2",
        ),
        pytest.param("sq", ("--compression", "bzip2"), "compression algorithm 3", id="sq-bzip2"),
    ],
)
async def test_choices_no_sandbox_key_offers_are_refused(encrypt_with, options, reason):
    """Camellia and BZip2, which the sandbox's key does not offer and a provider need not
    accept, are refused with 400 naming the algorithm (a refusal of the message, not of
    the document: ProviderKeyError); nothing is committed.
    """
    if (GPG if encrypt_with == "gpg" else SQ) is None:
        pytest.skip(f"{encrypt_with} is not installed")
    async with Sandbox(key_algorithm="cv25519") as sb:
        fingerprint = sb.provider_key.fingerprint
        document = sample_invoice(3, issuer_vat=sb.client_id, lines=3)
        plaintext = serialize_document(document)
        if encrypt_with == "gpg":
            body = await asyncio.to_thread(
                gpg_encrypt, sb.public_key_armored, fingerprint, plaintext, *options
            )
        else:
            body = await asyncio.to_thread(sq_encrypt, sb.public_key_armored, plaintext, *options)
        async with InvoicingClient(sb.base_url, sb.client_id, sb.client_secret) as client:
            with pytest.raises(ProviderKeyError, match=reason) as refused:
                await send_body(client, body, encrypted=True)
        assert refused.value.status == 400
        assert refused.value.reason == "not_decryptable"
        assert sb.commit_count == 0


async def test_gpg_encrypted_document_is_accepted():
    """A message GnuPG encrypts to the sandbox's public key (compressed, MDC) is
    decrypted and committed byte-exact.
    """
    if GPG is None:
        pytest.skip("gpg is not installed")
    async with Sandbox() as sb:
        doc = sample_invoice(1, issuer_vat=sb.client_id, lines=2)
        plaintext = serialize_document(doc)
        encrypted = await asyncio.to_thread(
            gpg_encrypt, sb.public_key_armored, sb.provider_key.fingerprint, plaintext, "--armor"
        )
        assert encrypted.startswith(b"-----BEGIN PGP MESSAGE-----")
        async with InvoicingClient(
            sb.base_url, sb.client_id, sb.client_secret, provider_key=sb.provider_key
        ) as client:
            result = await send_body(client, encrypted, encrypted=True)
    assert sb.committed[document_key(doc)].body == plaintext
    assert sb.committed[document_key(doc)].record == result


# --- the sandbox's decryptor and keys, against GnuPG ----------------------------------------------


GPG_VARIANTS = [
    pytest.param((), id="default"),
    pytest.param(("--armor",), id="armor"),
    pytest.param(("--compress-algo", "none"), id="compress-none"),
    pytest.param(("-z", "0"), id="z0"),
    pytest.param(("--compress-algo", "zip"), id="zip"),
    pytest.param(("--throw-keyids",), id="throw-keyids"),
    pytest.param(("--cipher-algo", "AES128"), id="aes128"),
]


@pytest.mark.parametrize("options", GPG_VARIANTS)
def test_gnupg_encrypts_decryptor_decrypts(gnupg, pair_and_decryptor, options):
    """GnuPG encrypts to the generated public key; Decryptor returns the exact bytes.

    Data is streamed from stdin, so gpg uses partial body lengths.
    """
    pair, decryptor = pair_and_decryptor
    gnupg.import_key(pair.public_armored)
    data = (PAYLOAD * 3000)[:150_000] + os.urandom(2000)
    encrypted = gnupg.encrypt(mf.fingerprint(pair.public_armored), data, *options)
    if "--armor" in options:
        assert encrypted.startswith(b"-----BEGIN PGP MESSAGE-----")
    else:
        seipd_header = encrypted[
            len(b"".join(mf.packet(t, b) for t, b in mf.packets(encrypted)[:-1])) :
        ]
        assert seipd_header[0] == 0xD2  # new-format tag 18
        if options in {(), ("--throw-keyids",), ("--cipher-algo", "AES128")}:
            assert 224 <= seipd_header[1] < 255, "expected a partial body length"
    assert decryptor.decrypt(encrypted) == data


def test_gnupg_twofish_is_unsupported(gnupg):
    """A cipher we do not implement (Twofish) is UnsupportedMessageError."""
    cv_pair, cv_decryptor = mf.keypair("cv25519"), mf.decryptor("cv25519")
    gnupg.import_key(cv_pair.public_armored)
    encrypted = gnupg.encrypt(
        mf.fingerprint(cv_pair.public_armored), PAYLOAD, "--cipher-algo", "TWOFISH"
    )
    with pytest.raises(UnsupportedMessageError):
        cv_decryptor.decrypt(encrypted)


def test_gnupg_decrypts_pgpy_message_with_generated_private_key(gnupg, pair_and_decryptor):
    """GnuPG imports the generated secret key and decrypts a PGPy message for it.

    This proves the key pair is sane outside our own code.
    """
    pair, _ = pair_and_decryptor
    gnupg.import_key(pair.private_armored)
    message = mf.pgpy_armor(mf.pgpy_encrypt(pair.public_armored, PAYLOAD))
    assert gnupg.run("--decrypt", stdin=message.encode()) == PAYLOAD


@pytest.mark.parametrize("algo", ["cv25519", "rsa2048"])
def test_gnupg_generated_secret_key(gnupg, algo):
    """Decryptor loads a secret key generated and exported by GnuPG itself.

    That covers GnuPG's own MPI/scalar encodings; gpg then encrypts to it.
    """
    primary = "ed25519" if algo == "cv25519" else "rsa2048"
    uid = f"GnuPG {algo} <{algo}@invoicing.invalid>"
    loopback = ("--pinentry-mode", "loopback", "--passphrase", "")
    gnupg.run(*loopback, "--quick-generate-key", uid, primary, "cert", "never")
    fpr = next(
        line.split(":")[9]
        for line in gnupg.run("--with-colons", "--list-keys", uid).decode().splitlines()
        if line.startswith("fpr:")
    )
    gnupg.run(*loopback, "--quick-add-key", fpr, algo, "encr", "never")
    secret = gnupg.run(*loopback, "--armor", "--export-secret-keys", fpr)
    decryptor = Decryptor(secret)
    listing = gnupg.run("--with-colons", "--list-keys", fpr).decode().splitlines()
    subkey_id = next(line.split(":")[4] for line in listing if line.startswith("sub:"))
    assert subkey_id in decryptor.key_ids
    data = os.urandom(5000)
    assert decryptor.decrypt(gnupg.encrypt(fpr, data)) == data


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        pytest.param(("--compress-algo", "bzip2"), "compression algorithm 3", id="bzip2"),
        pytest.param(("--cipher-algo", "CAST5"), "symmetric algorithm 3", id="cast5"),
        pytest.param(("--cipher-algo", "CAMELLIA256"), "symmetric algorithm 13", id="camellia256"),
    ],
)
def test_gnupg_choices_no_sandbox_key_offers_are_unsupported(
    gnupg, pair_and_decryptor, options, reason
):
    """GnuPG told to use BZip2, CAST5 or Camellia (none of which the sandbox's key offers)
    gets UnsupportedMessageError naming the algorithm, not a misleading corruption error.
    """
    pair, decryptor = pair_and_decryptor
    gnupg.import_key(pair.public_armored)
    encrypted = gnupg.encrypt(mf.fingerprint(pair.public_armored), PAYLOAD, *options)
    with pytest.raises(UnsupportedMessageError, match=reason):
        decryptor.decrypt(encrypted)


@pytest.mark.parametrize("algorithm", ["rsa2048", "cv25519"])
def test_gnupg_verifies_the_generated_keys_signatures(gnupg, algorithm):
    """GnuPG imports a generated key pair, finds both self-signatures good and lists the
    primary as certify+sign and the subkey as encryption-only.
    """
    pair = generate_keypair(algorithm)
    gnupg.import_key(pair.private_armored)
    fpr = mf.fingerprint(pair.public_armored)
    listing = gnupg.run("--with-colons", "--check-sigs", fpr).decode()
    sigs = [line.split(":") for line in listing.splitlines() if line.startswith("sig:")]
    assert len(sigs) == 2, listing
    assert all(fields[1] == "!" for fields in sigs), listing  # "!": signature verified
    caps = [line.split(":")[11] for line in listing.splitlines() if line[:4] in ("pub:", "sub:")]
    assert caps[0].startswith("sc"), listing
    assert caps[1] == "e", listing


def test_sandbox_serves_a_gnupg_made_key_file(gnupg):
    """A secret key GnuPG made is a valid ``key_file``: the public half the sandbox derives
    (without PGPy) is what ``gpg --export`` gives, as ProviderKey reads it.
    """
    uid = "GnuPG provider <gnupg@invoicing.invalid>"
    loopback = ("--pinentry-mode", "loopback", "--passphrase", "")
    gnupg.run(*loopback, "--quick-generate-key", uid, "ed25519", "cert", "never")
    fpr = next(
        line.split(":")[9]
        for line in gnupg.run("--with-colons", "--list-keys", uid).decode().splitlines()
        if line.startswith("fpr:")
    )
    gnupg.run(*loopback, "--quick-add-key", fpr, "cv25519", "encr", "never")
    secret = gnupg.run(*loopback, "--armor", "--export-secret-keys", fpr).decode()
    exported = ProviderKey.from_armored(gnupg.run("--armor", "--export", fpr))
    derived = ProviderKey.from_armored(public_half(secret))
    assert (derived.fingerprint, derived.subkey_fingerprint) == (
        exported.fingerprint,
        exported.subkey_fingerprint,
    )
    assert derived.fingerprint == fpr.upper()
