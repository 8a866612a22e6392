"""Key administration through the control API of the real latchkeyd, checked against
what a FIDO client sees over USB/IP (python-fido2's ClientPin and getInfo): a PIN set
or changed through the API is the PIN clientPIN knows, both spend the same retries,
settings show in getInfo, user names in the credential list, and a reset keeps the
key's identity. Plus latchkeyctl against the real daemon, and no PIN in its log."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2
from fido2.ctap2.blob import LargeBlobs
from fido2.ctap2.pin import ClientPin

import rp
from conftest import REPO

# Distinctive, so that the daemon's log can be searched for them.
PIN = "pin-Xq7-first"
NEW_PIN = "pin-Zr9-second"


def pin_path(key: dict) -> str:
    return f"/v1/keys/{key['name']}/pin"


def test_a_pin_set_through_the_api_is_the_pin_client_pin_knows(usb, control, key):
    assert control.get(pin_path(key)) == {
        "set": False, "retries": 8, "maxRetries": 8, "blocked": False, "powerCycleRequired": False,
        "minPINLength": 4, "forcePINChange": False, "alwaysUv": False}
    doc = control.put(pin_path(key), {"newPin": PIN})
    assert doc["set"] is True and doc["retries"] == 8
    ctap2 = Ctap2(usb.ctap(key["usbip"]["busid"]))
    assert ctap2.info.options["clientPin"] is True
    client_pin = ClientPin(ctap2)
    assert client_pin.get_pin_token(PIN)
    assert control.put(pin_path(key), {"newPin": NEW_PIN}, expect=409)["error"]["code"] == "pin_already_set"

    # Changed by a FIDO client, changed back through the API.
    client_pin.change_pin(PIN, NEW_PIN)
    control.put(pin_path(key), {"currentPin": NEW_PIN, "newPin": PIN})
    assert client_pin.get_pin_token(PIN)
    with pytest.raises(CtapError) as wrong:
        client_pin.get_pin_token(NEW_PIN)
    assert wrong.value.code == CtapError.ERR.PIN_INVALID


def test_wrong_pins_spend_the_retries_clientpin_spends(usb, control, key):
    control.put(pin_path(key), {"newPin": PIN})
    client_pin = ClientPin(Ctap2(usb.ctap(key["usbip"]["busid"])))
    wrong = control.put(pin_path(key), {"currentPin": "wrong-pin", "newPin": NEW_PIN}, expect=403)
    assert wrong["error"]["code"] == "pin_invalid"
    assert "7 retries left" in wrong["error"]["message"]
    assert client_pin.get_pin_retries()[0] == 7
    with pytest.raises(CtapError):
        client_pin.get_pin_token("wrong-pin")
    third = control.put(pin_path(key), {"currentPin": "wrong-pin", "newPin": NEW_PIN}, expect=423)
    assert third["error"]["code"] == "pin_auth_blocked"
    status = control.get(pin_path(key))
    assert status["powerCycleRequired"] is True and status["retries"] == 5
    assert control.put(pin_path(key), {"currentPin": PIN, "newPin": NEW_PIN}, expect=423)

    control.post(f"/v1/keys/{key['name']}/replug")
    assert control.get(pin_path(key))["powerCycleRequired"] is False
    control.put(pin_path(key), {"currentPin": PIN, "newPin": NEW_PIN})
    assert control.get(pin_path(key))["retries"] == 8


def test_pin_policy_and_unicode(usb, control, key):
    refused = control.put(pin_path(key), {"newPin": "123"}, expect=400)["error"]
    assert refused["code"] == "pin_policy_violation" and "at least 4" in refused["message"]
    assert control.put(pin_path(key), {"newPin": "x" * 64}, expect=400)
    assert control.put(pin_path(key), {"currentPin": "1234", "newPin": "5678"}, expect=409)["error"]["code"] \
        == "pin_not_set"
    # Decomposed é (e + U+0301) is stored as NFC, as a platform sends it: the composed PIN works.
    control.put(pin_path(key), {"newPin": "e\u0301" * 4})
    assert ClientPin(Ctap2(usb.ctap(key["usbip"]["busid"]))).get_pin_token("\u00e9" * 4)
    assert control.put(pin_path(key), {"pin": "x"}, expect=400)["error"]["code"] == "bad_request"


def test_settings_show_in_get_info(usb, control, key):
    path = f"/v1/keys/{key['name']}/config"
    assert control.get(path) == {"alwaysUv": False, "minPINLength": 4, "forcePINChange": False,
                                 "minPinLengthRPIDs": []}
    assert control.put(path, {"minPINLength": 6, "alwaysUv": True}) == {
        "alwaysUv": True, "minPINLength": 6, "forcePINChange": False, "minPinLengthRPIDs": []}
    rp_ids = control.put(path, {"minPinLengthRPIDs": ["example.com", "login.example.org"]})
    assert rp_ids["minPinLengthRPIDs"] == ["example.com", "login.example.org"] and rp_ids["minPINLength"] == 6
    too_many = control.put(path, {"minPinLengthRPIDs": [f"rp{i}.example" for i in range(9)]}, expect=409)
    assert too_many["error"]["code"] == "setting_refused" and "at most 8 RP IDs" in too_many["error"]["message"]
    info = Ctap2(usb.ctap(key["usbip"]["busid"])).info
    assert info.options["alwaysUv"] is True and info.min_pin_length == 6
    refused = control.put(path, {"minPINLength": 5}, expect=409)["error"]
    assert refused["code"] == "setting_refused" and "never decreases" in refused["message"]
    assert control.put(path, {"forcePINChange": True}, expect=409)["error"]["code"] == "pin_not_set"
    assert control.put(path, {"forcePINChange": False}, expect=400)
    control.put(path, {"alwaysUv": False})
    control.put(pin_path(key), {"newPin": "123456"})
    assert control.put(path, {"minPINLength": 8})["forcePINChange"] is True, "the PIN is now too short"
    assert control.get(pin_path(key))["forcePINChange"] is True


def test_update_user(usb, control, key):
    client = rp.make_client(usb.ctap(key["usbip"]["busid"]))
    rp.register(client, rp.make_server(), resident_key=True, user=rp.new_user("dora"))
    [cred] = control.get(f"/v1/keys/{key['name']}/credentials")
    path = f"/v1/keys/{key['name']}/credentials/{cred['id']}/user"
    updated = control.put(path, {"name": "dora@example.com"})
    assert updated["userName"] == "dora@example.com" and updated["userDisplayName"] == "Dora"
    assert updated["userId"] == cred["userId"]
    # A removed field is left out of the document, as everywhere in the API.
    assert control.put(path, {"displayName": ""}).get("userDisplayName") is None
    [listed] = control.get(f"/v1/keys/{key['name']}/credentials")
    assert (listed["userName"], listed.get("userDisplayName")) == ("dora@example.com", None)
    assert control.put(path, {"name": "n" * 65}, expect=400)
    missing = f"/v1/keys/{key['name']}/credentials/AAAA/user"
    assert control.put(missing, {"name": "x"}, expect=404)["error"]["code"] == "not_found"


def test_large_blob_size_follows_what_a_client_writes(usb, control, key):
    path = f"/v1/keys/{key['name']}/large-blobs"
    assert control.get(path) == {"serializedSize": 17, "maxSerializedLargeBlobArray": 4096}
    ctap2 = Ctap2(usb.ctap(key["usbip"]["busid"]))
    entry = {1: os.urandom(300), 2: os.urandom(12), 3: 284}
    LargeBlobs(ctap2).write_blob_array([entry])  # no PIN: no token needed
    size = control.get(path)["serializedSize"]
    assert 17 + 300 < size < 17 + 400
    control.post(f"/v1/keys/{key['name']}/reset")
    assert control.get(path)["serializedSize"] == 17, "a reset empties the large-blob array"
    assert control.get("/v1/keys/nope/large-blobs", expect=404)


def test_reset_keeps_the_identity(usb, control, key):
    name = key["name"]
    device = usb.ctap(key["usbip"]["busid"])  # one import at a time: reused below
    rp.register(rp.make_client(device), rp.make_server(), resident_key=True)
    control.put(pin_path(key), {"newPin": PIN})
    control.put(f"/v1/keys/{name}/config", {"minPINLength": 8})
    before = Ctap2(device).info.aaguid

    doc = control.post(f"/v1/keys/{name}/reset")
    assert doc["name"] == name and doc["aaguid"] == key["aaguid"] and doc["credentials"] == 0
    assert control.get(f"/v1/keys/{name}/credentials") == []
    assert control.get(pin_path(key))["set"] is False
    assert control.get(pin_path(key))["minPINLength"] == 4
    info = Ctap2(device).info  # a new Ctap2 asks getInfo again
    assert info.aaguid == before and info.options["clientPin"] is False
    assert control.post("/v1/keys/nope/reset", expect=404)


# ---- latchkeyctl against the real daemon ------------------------------------------------


def test_latchkeyctl_manages_a_real_key(latchkeyctl, daemon, control, key):
    name = key["name"]
    start = daemon.log_size()
    assert latchkeyctl("pin", "set", name, "--pin-stdin", stdin=f"{PIN}\n").returncode == 0
    wrong = latchkeyctl("pin", "change", name, "--pin-stdin", stdin=f"not-{PIN}\n{NEW_PIN}\n")
    assert wrong.returncode == 3, wrong
    assert "wrong PIN (7 retries left)" in wrong.stderr
    changed = latchkeyctl("pin", "change", name, "--pin-stdin", "--json", stdin=f"{PIN}\n{NEW_PIN}\n")
    assert changed.returncode == 0, changed
    assert '"retries": 8' in changed.stdout
    assert latchkeyctl("config", name, "--always-uv", "on").returncode == 0
    assert control.get(pin_path(key))["alwaysUv"] is True
    assert latchkeyctl("reset", name, "--yes").returncode == 0
    assert control.get(pin_path(key))["set"] is False

    log = daemon.log_text(start)
    assert "PIN set" in log and "PIN changed" in log and "PIN change refused" in log
    for secret in (PIN, NEW_PIN):
        assert secret not in log, "the daemon logged a PIN"
