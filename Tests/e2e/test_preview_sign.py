"""previewSign (the drafted WebAuthn sign extension, v4) end to end: a key switched to it
through the control API, python-fido2's Fido2Client with PreviewSignExtension as the
browser, and every signature checked with `cryptography` directly against the public key
registration returned (for ESP256-split-ARKG, the key the RP derives from the returned
seed), not through python-fido2's own verification."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from fido2 import cbor
from fido2.client import DefaultClientDataCollector, Fido2Client
from fido2.cose import ESP256_SPLIT_ARKG_PLACEHOLDER, CoseKey
from fido2.ctap2 import Ctap2
from fido2.ctap2.extensions import PreviewSignExtension
from fido2.utils import sha256, websafe_decode, websafe_encode
from fido2.webauthn import ResidentKeyRequirement, UserVerificationRequirement

import rp

ESP256, ES256, ESP256_SPLIT = -9, -7, -300


def point(cose: CoseKey) -> ec.EllipticCurvePublicKey:
    assert cose[1] == 2 and cose[-1] == 1, f"not a P-256 EC2 key: {cose}"
    return ec.EllipticCurvePublicNumbers(
        int.from_bytes(cose[-2], "big"), int.from_bytes(cose[-3], "big"), ec.SECP256R1()).public_key()


def register(device, algorithm: int):
    client = Fido2Client(device, client_data_collector=DefaultClientDataCollector(rp.ORIGIN),
                         user_interaction=rp.NoPinInteraction(), extensions=[PreviewSignExtension()])
    server = rp.make_server()
    options, state = server.register_begin(
        rp.new_user(), resident_key_requirement=ResidentKeyRequirement.DISCOURAGED,
        user_verification=UserVerificationRequirement.DISCOURAGED)
    result = client.make_credential({
        **options["publicKey"],
        "extensions": {"previewSign": {"generateKey": {"algorithms": [algorithm]}}},
    })
    credential = server.register_complete(state, result).credential_data
    generated = result.client_extension_results.previewSign.generated_key
    assert generated.algorithm == algorithm
    return client, server, credential, generated


def sign(client, server, credential, key_handle: bytes, tbs: bytes, args: dict | None = None) -> bytes:
    options, state = server.authenticate_begin(
        [credential], user_verification=UserVerificationRequirement.DISCOURAGED)
    inputs = {"keyHandle": key_handle, "tbs": tbs}
    if args is not None:
        inputs["additionalArgs"] = cbor.encode(args)
    result = client.get_assertion({
        **options["publicKey"],
        "extensions": {"previewSign": {"signByCredential": {websafe_encode(credential.credential_id): inputs}}},
    })
    response = result.get_response(0)
    server.authenticate_complete(state, [credential], response)
    return websafe_decode(response.client_extension_results["previewSign"]["signature"])


def test_offered_only_when_switched_on(usb, make_key):
    plain = Ctap2(usb.ctap(make_key()["usbip"]["busid"])).get_info()
    assert "previewSign" not in plain.extensions
    doc = make_key(options={"hasPreviewSign": True})
    assert doc["options"]["hasPreviewSign"] is True
    assert "previewSign" in Ctap2(usb.ctap(doc["usbip"]["busid"])).get_info().extensions


@pytest.mark.parametrize("algorithm", [ESP256, ES256, ESP256_SPLIT])
def test_signature_verifies_with_the_registered_key(usb, make_key, algorithm):
    device = usb.ctap(make_key(options={"hasPreviewSign": True})["usbip"]["busid"])
    client, server, credential, generated = register(device, algorithm)
    public_key = CoseKey.parse(cbor.decode(websafe_decode(generated["publicKey"])))
    message = os.urandom(100)
    prehashed = algorithm == ESP256_SPLIT
    signature = sign(client, server, credential, generated.key_handle, sha256(message) if prehashed else message)
    point(public_key).verify(signature, message, ec.ECDSA(hashes.SHA256()))
    point(public_key).verify(signature, sha256(message), ec.ECDSA(Prehashed(hashes.SHA256())))


def test_arkg_signature_verifies_with_the_rp_derived_key(usb, make_key):
    device = usb.ctap(make_key(options={"hasPreviewSign": True})["usbip"]["busid"])
    client, server, credential, generated = register(device, ESP256_SPLIT_ARKG_PLACEHOLDER)
    seed = CoseKey.parse(cbor.decode(websafe_decode(generated["publicKey"])))
    assert seed[3] == -65700 and seed[-3] == ESP256
    derived, args = seed.derive_public_key(os.urandom(32), b"latchkey e2e")
    message = b"signed with a key the authenticator never announced"
    signature = sign(client, server, credential, generated.key_handle, sha256(message), args)
    point(derived).verify(signature, message, ec.ECDSA(hashes.SHA256()))
