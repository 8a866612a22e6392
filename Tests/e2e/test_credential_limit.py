"""A key's own limit of discoverable credentials (`maxDiscoverableCredentials`): getInfo's
remainingDiscoverableCredentials counts down from it, the credential past it is refused
with CTAP2_ERR_KEY_STORE_FULL through python-fido2 over USB/IP, and seeding one more
through the control API is a 507."""

from __future__ import annotations

import base64
import os

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from fido2.client import ClientError
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2

import rp


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_a_key_limited_to_two_refuses_the_third(usb, control, make_key):
    key = make_key(options={"maxDiscoverableCredentials": 2})
    assert key["options"]["maxDiscoverableCredentials"] == 2
    device = usb.ctap(key["usbip"]["busid"])
    client = rp.make_client(device)
    server = rp.make_server(-7)
    assert Ctap2(device).get_info().remaining_disc_creds == 2
    rp.register(client, server, resident_key=True)
    assert Ctap2(device).get_info().remaining_disc_creds == 1
    rp.register(client, server, resident_key=True)
    assert Ctap2(device).get_info().remaining_disc_creds == 0

    with pytest.raises(ClientError) as refused:
        rp.register(client, server, resident_key=True)
    assert isinstance(refused.value.cause, CtapError)
    assert refused.value.cause.code == CtapError.ERR.KEY_STORE_FULL
    # A non-discoverable credential takes no room.
    rp.register(client, server, resident_key=False)

    pkcs8 = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    seeded = {"credentialId": _b64url(os.urandom(32)), "rpId": rp.RP_ID, "privateKey": _b64url(pkcs8),
              "userHandle": _b64url(os.urandom(16)), "signCount": 0, "isResidentCredential": True}
    control.post(f"/v1/keys/{key['name']}/credentials", seeded, expect=507)
    assert control.get(f"/v1/keys/{key['name']}")["credentials"] == 2


@pytest.mark.parametrize("limit", [0, -1, 100_001, "10"])
def test_a_limit_out_of_range_is_a_bad_request(control, limit):
    control.post("/v1/keys", {"name": "bad-limit", "uhid": False, "maxDiscoverableCredentials": limit}, expect=400)
    control.get("/v1/keys/bad-limit", expect=404)


def test_the_default_limit_is_1000(usb, make_key):
    key = make_key()
    assert key["options"]["maxDiscoverableCredentials"] == 1000
    assert Ctap2(usb.ctap(key["usbip"]["busid"])).get_info().remaining_disc_creds == 1000
