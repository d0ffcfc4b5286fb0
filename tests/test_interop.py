# Copyright (c) 2026 the invoicing_async developers. MIT License.
"""Independent OpenPGP implementations decrypt what ``ProviderKey.encrypt`` produces.

GnuPG (and Sequoia ``sq`` when installed) must recover the payload byte for
byte, and GnuPG's status/packet output must show the promised message shape:
encrypted to the chosen subkey, AES-256, SEIPD v1 with MDC, binary literal.
"""

from __future__ import annotations

import json
import random

import keyfactory as kf
import pytest

from invoicing_async import ProviderKey

pytestmark = pytest.mark.interop


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
