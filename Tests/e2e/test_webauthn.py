"""WebAuthn ceremonies through python-fido2's Fido2Client over our USB/IP client, every
result verified by python-fido2's Fido2Server; and U2F through fido2.ctap1.Ctap1."""

from __future__ import annotations

import hashlib
import os

import pytest
from fido2.webauthn import UserVerificationRequirement
from fido2.cose import ES256
from fido2.ctap import CtapError
from fido2.ctap1 import APDU, ApduError, Ctap1
from fido2.ctap2 import Ctap2

import rp


@pytest.fixture
def client(usb, key):
    device = usb.ctap(key["usbip"]["busid"])
    interaction = rp.NoPinInteraction()
    c = rp.make_client(device, interaction)
    c.device, c.interaction = device, interaction
    return c


def test_get_info_over_usbip(client, key):
    info = client.info
    assert "FIDO_2_0" in info.versions and "U2F_V2" in info.versions
    assert info.options.get("rk") is True and info.options.get("up") is not False
    assert info.aaguid.hex() == key["aaguid"]
    assert {a["alg"] for a in info.algorithms} >= {-7, -8}
    assert not info.options.get("alwaysUv"), "alwaysUv breaks usernameless login"


@pytest.mark.parametrize("algorithm", ["ES256", "EdDSA"])
def test_discoverable_credential_then_usernameless_get(client, algorithm):
    server = rp.make_server(rp.ALGORITHMS[algorithm])
    reg = rp.register(client, server, resident_key=True)
    assert rp.key_algorithm(reg.credential) == rp.ALGORITHMS[algorithm]
    assert reg.user_present and reg.fmt == "packed"

    by_id = rp.authenticate(client, server, [reg.credential], allow=True)
    assert by_id.credential_id == reg.credential.credential_id

    usernameless = rp.authenticate(client, server, [reg.credential], allow=False)
    assert usernameless.credential_id == reg.credential.credential_id
    assert usernameless.user_handle == reg.user.id, "a discoverable assertion names its user"
    assert usernameless.count == 1
    assert usernameless.sign_count > by_id.sign_count >= reg.sign_count


@pytest.mark.parametrize("algorithm", ["ES256", "EdDSA"])
def test_non_discoverable_credential(client, control, key, algorithm):
    server = rp.make_server(rp.ALGORITHMS[algorithm])
    reg = rp.register(client, server, resident_key=False)
    assert rp.key_algorithm(reg.credential) == rp.ALGORITHMS[algorithm]
    first = rp.authenticate(client, server, [reg.credential], allow=True)
    second = rp.authenticate(client, server, [reg.credential], allow=True)
    assert first.credential_id == second.credential_id == reg.credential.credential_id
    assert second.sign_count > first.sign_count
    # Nothing is stored for it, so a usernameless request finds nothing.
    assert control.get(f"/v1/keys/{key['name']}/credentials") == []
    with pytest.raises(CtapError) as none:
        Ctap2(client.device).get_assertion(rp.RP_ID, os.urandom(32))
    assert none.value.code == CtapError.ERR.NO_CREDENTIALS


def test_several_discoverable_credentials_for_one_rp(client):
    server = rp.make_server()
    regs = [rp.register(client, server, resident_key=True) for _ in range(3)]
    # UV discouraged: the key offers clientPin, and python-fido2 refuses "preferred"
    # UV on a key whose PIN is not set (as it does with a hardware key).
    options, state = server.authenticate_begin(None, user_verification=UserVerificationRequirement.DISCOURAGED)
    selection = client.get_assertion(options.public_key)
    assertions = selection.get_assertions()
    assert len(assertions) == 3, "every discoverable credential is offered (getNextAssertion)"
    handles = set()
    for i in range(3):
        response = selection.get_response(i)
        server.authenticate_complete(state, [r.credential for r in regs], response)
        handles.add(response.response.user_handle)
    assert handles == {r.user.id for r in regs}


def test_exclude_list_stops_a_second_registration(client):
    server = rp.make_server()
    reg = rp.register(client, server, resident_key=True)
    with pytest.raises(Exception) as excluded:
        rp.register(client, server, resident_key=True, user=reg.user, exclude=[reg.credential])
    cause = getattr(excluded.value, "cause", excluded.value)
    assert getattr(cause, "code", None) == CtapError.ERR.CREDENTIAL_EXCLUDED, repr(excluded.value)


@pytest.mark.parametrize("attestation,fmt", [("self", "packed"), ("none", "none"), ("batch", "packed")])
def test_attestation_formats(usb, make_key, attestation, fmt):
    k = make_key(attestation=attestation)
    client = rp.make_client(usb.ctap(k["usbip"]["busid"]))
    server = rp.make_server()
    reg = rp.register(client, server, resident_key=False)
    assert reg.fmt == fmt


def test_u2f_register_and_authenticate(client):
    ctap1 = Ctap1(client.device)
    assert ctap1.get_version() == "U2F_V2"
    app_param = hashlib.sha256(rp.RP_ID.encode()).digest()  # as a WebAuthn client maps an RP ID
    client_param = os.urandom(32)
    registration = ctap1.register(client_param, app_param)
    registration.verify(app_param, client_param)  # fido-u2f attestation signature
    assert len(registration.public_key) == 65 and registration.public_key[0] == 0x04

    counters = []
    for _ in range(2):
        challenge = os.urandom(32)
        signature = ctap1.authenticate(challenge, app_param, registration.key_handle)
        signature.verify(app_param, challenge, registration.public_key)
        assert signature.user_presence & 0x01
        counters.append(signature.counter)
    assert counters[1] > counters[0]

    with pytest.raises(ApduError) as check_only:
        ctap1.authenticate(client_param, app_param, registration.key_handle, check_only=True)
    assert check_only.value.code == APDU.USE_NOT_SATISFIED, "check-only: a known key handle"
    other_app = hashlib.sha256(b"https://other.example").digest()
    with pytest.raises(ApduError) as wrong_app:
        ctap1.authenticate(client_param, other_app, registration.key_handle)
    assert wrong_app.value.code == APDU.WRONG_DATA, "a key handle is bound to its application"

    # A U2F registration is usable through CTAP2 as well (the same wrapped credential).
    client_data_hash = os.urandom(32)
    assertion = Ctap2(client.device).get_assertion(
        rp.RP_ID, client_data_hash, allow_list=[{"type": "public-key", "id": registration.key_handle}])
    assert assertion.credential["id"] == registration.key_handle
    assertion.verify(client_data_hash, ES256.from_ctap1(registration.public_key))
