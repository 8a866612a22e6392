"""The control API (HTTP/JSON on the Unix socket) driving real ceremonies: presence in
prompt mode (approve, deny, time out), credentials (list, delete), and key documents."""

from __future__ import annotations

import base64
import os
import threading
import time

import pytest
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2

import rp
from conftest import wait_for


def b64url_decode(text: str) -> bytes:
    assert "=" not in text and "+" not in text and "/" not in text, f"not unpadded base64url: {text!r}"
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_status_document(control, key):
    status = control.get("/v1/status")
    assert set(status) >= {"version", "uptimeSeconds", "stateDirectory", "keys"}
    assert isinstance(status["version"], str) and status["uptimeSeconds"] >= 0
    [doc] = [k for k in status["keys"] if k["name"] == key["name"]]
    assert set(doc) >= {"name", "aaguid", "presence", "credentials", "uhid", "usbip"}
    assert set(doc["usbip"]) >= {"busid", "listen", "attached"}
    assert set(doc["uhid"]) >= {"state"}
    assert doc["uhid"]["state"] in ("disabled", "unavailable"), "the daemon runs with --no-uhid"


def test_key_creation_errors(control, key):
    assert control.post("/v1/keys", {"name": key["name"]}, expect=409)["error"]["code"] == "conflict"
    assert control.post("/v1/keys", {"name": "no spaces allowed"}, expect=400)["error"]["code"] == "bad_request"
    assert control.post("/v1/keys", {"name": "x", "attestation": "fancy"}, expect=400)
    assert control.post("/v1/keys", {"presence": "auto"}, expect=400), "a key needs a name"
    assert control.get("/v1/keys/nope", expect=404)["error"]["code"] == "not_found"
    assert control.get("/v1/keys/nope/credentials", expect=404)


def test_presence_settings(control, key):
    path = f"/v1/keys/{key['name']}/presence"
    assert control.get(path)["mode"] == "auto"
    assert control.put(path, {"mode": "prompt", "timeoutSeconds": 7}) == {"mode": "prompt", "timeoutSeconds": 7}
    assert control.get(path) == {"mode": "prompt", "timeoutSeconds": 7}
    assert control.key(key["name"])["presence"] == "prompt"
    assert control.put(path, {"timeoutSeconds": 0}, expect=400)["error"]["code"] == "bad_request"
    assert control.put(path, {"mode": "sometimes"}, expect=400)
    assert control.get(path) == {"mode": "prompt", "timeoutSeconds": 7}


def start_in_thread(fn):
    result: dict = {}

    def run():
        try:
            result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - examined by the test
            result["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def one_pending(control, name, timeout=5.0) -> dict:
    [entry] = wait_for(lambda: control.pending(name), timeout, f"a pending presence request for {name}")
    return entry


def ctap2_make_credential(device, user_name="prompted"):
    return Ctap2(device).make_credential(
        os.urandom(32), {"id": rp.RP_ID, "name": "Example"},
        {"id": os.urandom(16), "name": user_name, "displayName": user_name.title()},
        [{"type": "public-key", "alg": -7}], options={"rk": True})


def test_prompt_approve_lets_the_ceremony_finish(usb, control, key):
    name = key["name"]
    control.put(f"/v1/keys/{name}/presence", {"mode": "prompt", "timeoutSeconds": 15})
    interaction = rp.NoPinInteraction()
    client = rp.make_client(usb.ctap(key["usbip"]["busid"]), interaction)
    server = rp.make_server()
    user = rp.new_user("alice")

    thread, result = start_in_thread(lambda: rp.register(client, server, resident_key=True, user=user))
    entry = one_pending(control, name)
    assert entry["key"] == name and entry["rpId"] == rp.RP_ID and entry["userName"] == "alice"
    assert isinstance(entry["operation"], str) and entry["operation"]
    assert entry["ageMs"] >= 0 and 0 < entry["expiresInMs"] <= 15000
    time.sleep(0.3)  # long enough for KEEPALIVE(UPNEEDED), sent every 100 ms
    assert thread.is_alive(), f"the ceremony ended without an answer: {result}"
    answer = control.post(f"/v1/presence/pending/{entry['id']}/approve")
    assert answer == {"id": entry["id"], "outcome": "approved"}
    thread.join(10)
    assert "error" not in result, repr(result.get("error"))
    reg = result["value"]
    assert reg.user_present
    assert interaction.presence_prompts >= 1, "the client never saw KEEPALIVE UPNEEDED"
    assert control.pending(name) == []
    assert control.post(f"/v1/presence/pending/{entry['id']}/approve", expect=404)["error"]["code"] == "not_found"

    thread, result = start_in_thread(lambda: rp.authenticate(client, server, [reg.credential], allow=False))
    entry = one_pending(control, name)
    assert entry["rpId"] == rp.RP_ID
    control.post(f"/v1/presence/pending/{entry['id']}/approve")
    thread.join(10)
    assert "error" not in result, repr(result.get("error"))
    assert result["value"].credential_id == reg.credential.credential_id


def test_prompt_deny_is_operation_denied(usb, control, key):
    name = key["name"]
    control.put(f"/v1/keys/{name}/presence", {"mode": "prompt", "timeoutSeconds": 15})
    device = usb.ctap(key["usbip"]["busid"])
    thread, result = start_in_thread(lambda: ctap2_make_credential(device, "bob"))
    entry = one_pending(control, name)
    assert entry["userName"] == "bob"
    assert control.post(f"/v1/presence/pending/{entry['id']}/deny") == {"id": entry["id"], "outcome": "denied"}
    thread.join(10)
    error = result.get("error")
    assert isinstance(error, CtapError) and error.code == CtapError.ERR.OPERATION_DENIED, repr(result)
    assert control.pending(name) == []
    assert control.key(name)["credentials"] == 0


def test_prompt_timeout_is_user_action_timeout(usb, control, key):
    name = key["name"]
    control.put(f"/v1/keys/{name}/presence", {"mode": "prompt", "timeoutSeconds": 1})
    device = usb.ctap(key["usbip"]["busid"])
    started = time.monotonic()
    thread, result = start_in_thread(lambda: ctap2_make_credential(device))
    one_pending(control, name)
    thread.join(10)
    elapsed = time.monotonic() - started
    error = result.get("error")
    assert isinstance(error, CtapError) and error.code == CtapError.ERR.USER_ACTION_TIMEOUT, repr(result)
    assert 0.9 <= elapsed <= 4, f"a 1 s presence timeout took {elapsed:.2f} s"
    assert control.pending(name) == []
    assert control.key(name)["credentials"] == 0


def test_deny_mode_and_back_to_auto(usb, control, key):
    name = key["name"]
    device = usb.ctap(key["usbip"]["busid"])
    control.put(f"/v1/keys/{name}/presence", {"mode": "deny"})
    with pytest.raises(CtapError) as denied:
        ctap2_make_credential(device)
    assert denied.value.code == CtapError.ERR.OPERATION_DENIED
    control.put(f"/v1/keys/{name}/presence", {"mode": "auto"})
    assert ctap2_make_credential(device).fmt == "packed"


def test_list_and_delete_credentials(usb, control, key):
    name = key["name"]
    device = usb.ctap(key["usbip"]["busid"])
    client = rp.make_client(device)
    server = rp.make_server(rp.ALGORITHMS["EdDSA"])
    user = rp.new_user("carol")
    reg = rp.register(client, server, resident_key=True, user=user)
    rp.register(client, server, resident_key=False)  # not stored, not listed

    [cred] = control.get(f"/v1/keys/{name}/credentials")
    assert b64url_decode(cred["id"]) == reg.credential.credential_id
    assert cred["rpId"] == rp.RP_ID
    assert b64url_decode(cred["userId"]) == user.id
    assert cred["userName"] == "carol" and cred["userDisplayName"] == "Carol"
    assert cred["rpName"] in (None, rp.RP.name)
    assert cred["algorithm"] == rp.ALGORITHMS["EdDSA"]
    assert isinstance(cred["credProtect"], int)
    assert control.key(name)["credentials"] == 1

    found = rp.authenticate(client, server, [reg.credential], allow=False)
    assert found.user_handle == user.id

    assert control.delete(f"/v1/keys/{name}/credentials/{cred['id']}") is None
    assert control.get(f"/v1/keys/{name}/credentials") == []
    assert control.key(name)["credentials"] == 0
    with pytest.raises(CtapError) as none:
        Ctap2(device).get_assertion(rp.RP_ID, os.urandom(32))
    assert none.value.code == CtapError.ERR.NO_CREDENTIALS
    assert control.delete(f"/v1/keys/{name}/credentials/{cred['id']}", expect=404)["error"]["code"] == "not_found"
    assert control.delete(f"/v1/keys/{name}/credentials/%24%24", expect=(400, 404))
