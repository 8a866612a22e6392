"""CTAP 2.1 extensions end to end: python-fido2's Fido2Client (the browser) drives a
latchkey key over USB/IP with the WebAuthn extensions prf (hmac-secret and
hmac-secret-mc), credProtect, credBlob, largeBlob (largeBlobKey + largeBlobs) and
minPinLength; python-fido2's Fido2Server verifies every registration and assertion
signature over authenticator data that carries the extension outputs."""

from __future__ import annotations

import os

import pytest
from fido2.client import ClientError
from fido2.ctap2 import Ctap2
from fido2.ctap2.config import Config
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2
from fido2.utils import websafe_decode
from fido2.webauthn import ResidentKeyRequirement, UserVerificationRequirement

import rp

PIN = "4711"


class PinInteraction(rp.NoPinInteraction):
    """A user who touches the key and knows its PIN."""

    def __init__(self):
        super().__init__()
        self.pin_prompts = 0

    def request_pin(self, permissions, rp_id):
        self.pin_prompts += 1
        return PIN


@pytest.fixture
def device(usb, key):
    return usb.ctap(key["usbip"]["busid"])


@pytest.fixture
def client(device):
    return rp.make_client(device)


@pytest.fixture
def pin_client(device):
    ClientPin(Ctap2(device)).set_pin(PIN)
    interaction = PinInteraction()
    client = rp.make_client(device, interaction)
    client.interaction = interaction
    return client


def create(client, server, *, resident_key=False, uv=UserVerificationRequirement.DISCOURAGED,
           extensions=None, user=None):
    user = user or rp.new_user()
    options, state = server.register_begin(
        user, resident_key_requirement=ResidentKeyRequirement.REQUIRED if resident_key
        else ResidentKeyRequirement.DISCOURAGED,
        user_verification=uv, extensions=extensions)
    response = client.make_credential(options.public_key)
    auth_data = server.register_complete(state, response)
    return auth_data, response


def get(client, server, credentials, *, uv=UserVerificationRequirement.DISCOURAGED, extensions=None,
        allow=True):
    options, state = server.authenticate_begin(
        credentials if allow else None, user_verification=uv, extensions=extensions)
    selection = client.get_assertion(options.public_key)
    response = selection.get_response(0)
    server.authenticate_complete(state, credentials, response)
    return response


def test_get_info_advertises_fido_2_1_and_every_extension(device):
    info = Ctap2(device).get_info()
    assert "FIDO_2_1" in info.versions
    assert set(info.extensions) == {"credProtect", "hmac-secret", "hmac-secret-mc", "credBlob",
                                    "largeBlobKey", "minPinLength", "thirdPartyPayment"}
    assert info.options.get("largeBlobs") is True
    assert info.options.get("perCredMgmtRO") is True
    assert "ep" not in info.options, "enterprise attestation is off by default"
    assert info.max_large_blob is not None and info.max_large_blob >= 1024
    assert info.max_cred_blob_length == 32
    assert info.max_rpids_for_min_pin == 8
    # CTAP 2.2's getInfo keys, as python-fido2 parses them.
    assert info.attestation_formats == ["packed", "none"]
    assert info.pin_complexity_policy is False
    assert info.max_pin_length == 63
    assert info.authenticator_config_commands == [2, 3], "no enterprise certificate: no subcommand 1"


@pytest.mark.parametrize("resident_key", [False, True])
def test_prf_at_creation_and_assertion(client, resident_key):
    server = rp.make_server()
    first, second = os.urandom(32), os.urandom(32)
    auth_data, created = create(client, server, resident_key=resident_key,
                                extensions={"prf": {"eval": {"first": first}}})
    assert auth_data.extensions.get("hmac-secret") is True
    prf = created.client_extension_results["prf"]
    assert prf["enabled"] is True
    at_creation = prf["results"]["first"]  # hmac-secret-mc, base64url in the JSON form
    assert len(websafe_decode(at_creation)) == 32
    credential = auth_data.credential_data

    response = get(client, server, [credential], extensions={"prf": {"eval": {"first": first, "second": second}}})
    results = response.client_extension_results["prf"]["results"]
    assert results["first"] == at_creation, "hmac-secret-mc and hmac-secret agree"
    assert results["second"] != results["first"]
    again = get(client, server, [credential], extensions={"prf": {"eval": {"first": second}}})
    assert again.client_extension_results["prf"]["results"]["first"] == results["second"]


@pytest.mark.parametrize("protocol", [PinProtocolV1, PinProtocolV2])
def test_hmac_secret_differs_with_user_verification(device, pin_client, protocol):
    """Raw hmac-secret through python-fido2's extension with each PIN protocol: the
    output with UV differs from the one without, each stable."""
    from fido2.ctap2.extensions import HmacSecretExtension
    ctap = Ctap2(device)
    server = rp.make_server()
    auth_data, _ = create(pin_client, server, extensions={"prf": {}})
    credential = auth_data.credential_data
    salt = os.urandom(32)

    def evaluate(uv: bool) -> bytes:
        client_pin = ClientPin(ctap, protocol())
        key_agreement, shared_secret = client_pin._get_shared_secret()
        salt_enc = client_pin.protocol.encrypt(shared_secret, salt)
        extension = {1: key_agreement, 2: salt_enc, 3: client_pin.protocol.authenticate(shared_secret, salt_enc),
                     4: client_pin.protocol.VERSION}
        client_data_hash = os.urandom(32)
        kwargs = {}
        if uv:
            token = ClientPin(ctap, protocol()).get_pin_token(
                PIN, ClientPin.PERMISSION.GET_ASSERTION, rp.RP_ID)
            kwargs = {"pin_uv_param": protocol().authenticate(token, client_data_hash),
                      "pin_uv_protocol": protocol.VERSION}
        assertion = ctap.get_assertion(rp.RP_ID, client_data_hash,
                                       [{"type": "public-key", "id": credential.credential_id}],
                                       extensions={HmacSecretExtension.NAME: extension}, **kwargs)
        assert assertion.auth_data.is_user_verified() == uv
        return client_pin.protocol.decrypt(shared_secret, assertion.auth_data.extensions["hmac-secret"])

    without_uv, with_uv = evaluate(False), evaluate(True)
    assert len(without_uv) == len(with_uv) == 32
    assert without_uv != with_uv
    assert evaluate(False) == without_uv and evaluate(True) == with_uv


def test_cred_protect_required_needs_user_verification(pin_client, client):
    server = rp.make_server()
    auth_data, _ = create(pin_client, server, resident_key=True,
                          uv=UserVerificationRequirement.REQUIRED,
                          extensions={"credentialProtectionPolicy": "userVerificationRequired",
                                      "enforceCredentialProtectionPolicy": True})
    assert auth_data.extensions["credProtect"] == 3
    credential = auth_data.credential_data

    # Without UV the key does not know the credential, by ID or by discovery.
    with pytest.raises(ClientError):
        get(client, server, [credential], uv=UserVerificationRequirement.DISCOURAGED)
    with pytest.raises(ClientError):
        get(client, server, [credential], uv=UserVerificationRequirement.DISCOURAGED, allow=False)
    verified = get(pin_client, server, [credential], uv=UserVerificationRequirement.REQUIRED)
    assert verified.response.authenticator_data.is_user_verified()


def test_cred_protect_optional_with_list_hides_from_discovery(client):
    server = rp.make_server()
    auth_data, _ = create(client, server, resident_key=True,
                          extensions={"credentialProtectionPolicy":
                                      "userVerificationOptionalWithCredentialIDList"})
    assert auth_data.extensions["credProtect"] == 2
    credential = auth_data.credential_data
    assert get(client, server, [credential]).raw_id == credential.credential_id
    with pytest.raises(ClientError):
        get(client, server, [credential], allow=False)


@pytest.mark.parametrize("resident_key", [False, True])
def test_cred_blob(client, resident_key):
    server = rp.make_server()
    blob = b"per-credential RP data, 32 byte"
    auth_data, _ = create(client, server, resident_key=resident_key, extensions={"credBlob": blob})
    assert auth_data.extensions["credBlob"] is True
    response = get(client, server, [auth_data.credential_data], extensions={"getCredBlob": True})
    assert response.response.authenticator_data.extensions["credBlob"] == blob


def test_large_blob_write_then_read(pin_client):
    server = rp.make_server()
    auth_data, created = create(pin_client, server, resident_key=True,
                                uv=UserVerificationRequirement.REQUIRED,
                                extensions={"largeBlob": {"support": "required"}})
    assert created.client_extension_results["largeBlob"]["supported"] is True
    credential = auth_data.credential_data
    data = os.urandom(700)
    written = get(pin_client, server, [credential], uv=UserVerificationRequirement.REQUIRED,
                  extensions={"largeBlob": {"write": data}})
    assert written.client_extension_results["largeBlob"]["written"] is True
    read = get(pin_client, server, [credential], uv=UserVerificationRequirement.REQUIRED,
               extensions={"largeBlob": {"read": True}})
    # Client extension results are the JSON form: bytes as base64url.
    assert websafe_decode(read.client_extension_results["largeBlob"]["blob"]) == data


def test_min_pin_length_only_for_named_rps(device, pin_client):
    ctap = Ctap2(device)
    server = rp.make_server()
    auth_data, _ = create(pin_client, server, extensions={"minPinLength": True})
    assert not (auth_data.extensions or {}).get("minPinLength"), "example.com is not named yet"

    token = ClientPin(ctap).get_pin_token(PIN, ClientPin.PERMISSION.AUTHENTICATOR_CFG)
    Config(ctap, ClientPin(ctap).protocol, token).set_min_pin_length(min_pin_length=6, rp_ids=[rp.RP_ID])
    auth_data, _ = create(pin_client, server, extensions={"minPinLength": True})
    assert auth_data.extensions["minPinLength"] == 6
