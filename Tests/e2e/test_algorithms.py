"""Every credential algorithm latchkey offers, end to end: python-fido2's Fido2Client
registers and asserts, and a Fido2Server that accepts only that one algorithm verifies
the self attestation and every assertion signature (with `cryptography`)."""

from __future__ import annotations

import pytest
from fido2.client import ClientError
from fido2.cose import CoseKey
from fido2.ctap import CtapError

import rp

# COSE ids in latchkey's default getInfo order (COSEAlgorithm.defaultOrder).
DEFAULT_ORDER = [-7, -8, -35, -257, -36, -37, -47, -9, -51, -52, -19]


@pytest.fixture
def self_attesting(usb, make_key):
    key = make_key(attestation="self")
    device = usb.ctap(key["usbip"]["busid"])
    return rp.make_client(device), key


def test_get_info_lists_every_algorithm_in_the_default_order(self_attesting):
    client, key = self_attesting
    assert [a["alg"] for a in client.info.algorithms] == DEFAULT_ORDER
    assert key["options"]["algorithms"] == [
        "ES256", "EdDSA", "ES384", "RS256", "ES512", "PS256", "ES256K", "ESP256", "ESP384", "ESP512", "Ed25519"]


@pytest.mark.parametrize("resident_key", [False, True], ids=["wrapped", "discoverable"])
@pytest.mark.parametrize("algorithm", DEFAULT_ORDER, ids=lambda a: CoseKey.for_alg(a).__name__)
def test_register_and_assert(self_attesting, algorithm, resident_key):
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
