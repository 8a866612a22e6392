"""Every credential algorithm latchkey offers, end to end: python-fido2's Fido2Client
registers and asserts, and a Fido2Server that accepts only that one algorithm verifies
the self attestation and every assertion signature (with `cryptography`; ML-DSA needs
cryptography 47+ on OpenSSL 3.5+, as PyPI's wheels are, and is skipped without it)."""

from __future__ import annotations

import base64
import os
import subprocess

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from fido2.client import ClientError
from fido2.cose import CoseKey
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2

import rp

# COSE ids in latchkey's default getInfo order (COSEAlgorithm.defaultOrder).
DEFAULT_ORDER = [-7, -8, -35, -257, -36, -37, -47, -9, -51, -52, -19, -49, -50]
MLDSA = {"ML-DSA-65": -49, "ML-DSA-87": -50}


def needs_mldsa():
    if -49 not in CoseKey.supported_algorithms():
        pytest.skip("this cryptography cannot verify ML-DSA (47+ on OpenSSL 3.5+ can)")


@pytest.fixture
def self_attesting(usb, make_key):
    key = make_key(attestation="self")
    device = usb.ctap(key["usbip"]["busid"])
    return rp.make_client(device), key


def test_get_info_lists_every_algorithm_in_the_default_order(self_attesting):
    client, key = self_attesting
    assert [a["alg"] for a in client.info.algorithms] == DEFAULT_ORDER
    assert key["options"]["algorithms"] == [
        "ES256", "EdDSA", "ES384", "RS256", "ES512", "PS256", "ES256K", "ESP256", "ESP384", "ESP512", "Ed25519",
        "ML-DSA-65", "ML-DSA-87"]


@pytest.mark.parametrize("resident_key", [False, True], ids=["wrapped", "discoverable"])
@pytest.mark.parametrize("algorithm", DEFAULT_ORDER, ids=str)
def test_register_and_assert(self_attesting, algorithm, resident_key):
    if algorithm in MLDSA.values():
        needs_mldsa()
    client, _ = self_attesting
    server = rp.make_server(algorithm)
    reg = rp.register(client, server, resident_key=resident_key)
    assert reg.fmt == "packed"
    assert rp.key_algorithm(reg.credential) == algorithm
    first = rp.authenticate(client, server, [reg.credential], allow=True)
    second = rp.authenticate(client, server, [reg.credential], allow=not resident_key)
    assert first.credential_id == second.credential_id == reg.credential.credential_id
    assert second.sign_count > first.sign_count


def test_a_key_offers_only_its_configured_algorithms(usb, make_key):
    key = make_key(options={"algorithms": ["RS256", "es384"]})
    assert key["options"]["algorithms"] == ["RS256", "ES384"]
    client = rp.make_client(usb.ctap(key["usbip"]["busid"]))
    assert [a["alg"] for a in client.info.algorithms] == [-257, -35]
    reg = rp.register(client, rp.make_server(-35), resident_key=False)
    assert rp.key_algorithm(reg.credential) == -35
    with pytest.raises(ClientError) as refused:
        rp.register(client, rp.make_server(-7), resident_key=False)
    assert isinstance(refused.value.cause, CtapError)
    assert refused.value.cause.code == CtapError.ERR.UNSUPPORTED_ALGORITHM


def test_an_unknown_algorithm_name_is_a_bad_request(control):
    control.post("/v1/keys", {"name": "bad-algorithms", "uhid": False, "algorithms": ["ES999"]}, expect=400)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.mark.parametrize("kind", ["RS256", "PS256", "ES384", "ES512", "ES256K"])
def test_seeded_keys_of_every_type_sign(usb, control, key, kind):
    """WebDriver-style seeding with the test's own PKCS#8 key: the assertion verifies
    with that key; a non-resident seed of a derived-key type is refused."""
    if kind in ("RS256", "PS256"):
        private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    else:
        curve = {"ES384": ec.SECP384R1(), "ES512": ec.SECP521R1(), "ES256K": ec.SECP256K1()}[kind]
        private_key = ec.generate_private_key(curve)
    pkcs8 = private_key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
    if kind == "PS256":
        # id-RSASSA-PSS PKCS#8 (what latchkey reads as PS256), made by openssl.
        pkcs8 = subprocess.run(["openssl", "genpkey", "-algorithm", "RSA-PSS", "-pkeyopt", "rsa_keygen_bits:2048",
                                "-outform", "DER"], capture_output=True, check=True).stdout
        private_key = serialization.load_der_private_key(pkcs8, None)
    body = {"credentialId": _b64url(os.urandom(32)), "rpId": rp.RP_ID, "privateKey": _b64url(pkcs8),
            "userHandle": _b64url(os.urandom(16)), "signCount": 0}
    control.post(f"/v1/keys/{key['name']}/credentials", {**body, "isResidentCredential": False}, expect=400)
    doc = control.post(f"/v1/keys/{key['name']}/credentials", {**body, "isResidentCredential": True}, expect=201)
    assert doc["algorithm"] == CoseKey.for_name(kind).ALGORITHM
    client_data_hash = os.urandom(32)
    assertion = Ctap2(usb.ctap(key["usbip"]["busid"])).get_assertion(rp.RP_ID, client_data_hash)
    signed = bytes(assertion.auth_data) + client_data_hash
    public_key = private_key.public_key()
    if kind == "RS256":
        public_key.verify(assertion.signature, signed, padding.PKCS1v15(), hashes.SHA256())
    elif kind == "PS256":
        public_key.verify(assertion.signature, signed, padding.PSS(padding.MGF1(hashes.SHA256()), 32), hashes.SHA256())
    else:
        digest = {"ES384": hashes.SHA384(), "ES512": hashes.SHA512(), "ES256K": hashes.SHA256()}[kind]
        public_key.verify(assertion.signature, signed, ec.ECDSA(digest))


@pytest.mark.parametrize("kind", MLDSA)
def test_seeded_mldsa_keys_sign_and_may_be_non_resident(usb, control, key, kind):
    """An ML-DSA key is kept as its seed, so a seeded one may be non-resident too; the
    PKCS#8 is what `cryptography` writes (RFC 9881's seed form), and the assertion
    verifies with that key's public half."""
    needs_mldsa()
    from cryptography.hazmat.primitives.asymmetric import mldsa

    private_key = {"ML-DSA-65": mldsa.MLDSA65PrivateKey, "ML-DSA-87": mldsa.MLDSA87PrivateKey}[kind].generate()
    pkcs8 = private_key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
    body = {"credentialId": _b64url(os.urandom(32)), "rpId": rp.RP_ID, "privateKey": _b64url(pkcs8),
            "userHandle": _b64url(os.urandom(16)), "signCount": 0, "isResidentCredential": False}
    doc = control.post(f"/v1/keys/{key['name']}/credentials", body, expect=201)
    assert doc["algorithm"] == MLDSA[kind] and doc["isResidentCredential"] is False
    # A non-discoverable credential's ID is its seed wrapped under the key's secret.
    wrapped = base64.urlsafe_b64decode(doc["credentialId"] + "=" * (-len(doc["credentialId"]) % 4))
    client_data_hash = os.urandom(32)
    ctap = Ctap2(usb.ctap(key["usbip"]["busid"]))
    assertion = ctap.get_assertion(rp.RP_ID, client_data_hash, allow_list=[{"type": "public-key", "id": wrapped}])
    private_key.public_key().verify(assertion.signature, bytes(assertion.auth_data) + client_data_hash)
