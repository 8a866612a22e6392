"""The consent policy through the real daemon over USB/IP with python-fido2: prompts
(approved, denied, timed out, cancelled by the host), conditional registration after a
password-used signal (silent when every condition holds, OPERATION_DENIED at once with
nothing shown otherwise), and the decision record that explains each answer."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2
from fido2.ctap2.pin import ClientPin, PinProtocolV2

import rp
from test_control_api import start_in_thread
from conftest import latchkeyctl_command, wait_for

STATUS_UPNEEDED = 2


def make_credential(device, user_name, *, rp_id=rp.RP_ID, rk=True, event=None, keepalive=None,
                    client_pin=None, token=None):
    client_data_hash = os.urandom(32)
    kwargs = {}
    if token is not None:
        kwargs = {"pin_uv_param": client_pin.protocol.authenticate(token, client_data_hash),
                  "pin_uv_protocol": client_pin.protocol.VERSION}
    return Ctap2(device).make_credential(
        client_data_hash, {"id": rp_id, "name": rp_id},
        {"id": os.urandom(16), "name": user_name, "displayName": user_name.title()},
        [{"type": "public-key", "alg": -7}], options={"rk": rk}, event=event,
        on_keepalive=keepalive, **kwargs)


class PendingWatch:
    """Polls the pending list in the background: did a prompt ever appear for the key?"""

    def __init__(self, control, name):
        self.control, self.name = control, name
        self.seen: list[dict] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            self.seen.extend(self.control.pending(self.name))
            time.sleep(0.01)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)


def set_policy(control, name, **settings) -> dict:
    return control.put(f"/v1/keys/{name}/policy", settings)


def decisions(control, name, limit=None) -> list[dict]:
    query = f"?limit={limit}" if limit else ""
    return control.get(f"/v1/keys/{name}/policy/decisions{query}")


def signal(control, name, user, rp_id=rp.RP_ID) -> dict:
    return control.post(f"/v1/keys/{name}/signals/password-used", {"rpId": rp_id, "userName": user})


def ctap_error(result) -> int:
    error = result.get("error")
    assert isinstance(error, CtapError), f"expected a CTAP error, got {result!r}"
    return error.code


@pytest.fixture
def prompt_key(make_key, control):
    key = make_key(presence="prompt")
    control.put(f"/v1/keys/{key['name']}/presence", {"timeoutSeconds": 15})
    return key


# ---- prompts ---------------------------------------------------------------------------


def test_prompt_approved_with_keepalive_and_recorded(usb, control, prompt_key):
    name = prompt_key["name"]
    device = usb.ctap(prompt_key["usbip"]["busid"])
    statuses = []
    thread, result = start_in_thread(lambda: make_credential(device, "alice", keepalive=statuses.append))
    [entry] = wait_for(lambda: control.pending(name), 5, "a pending request")
    assert (entry["operation"], entry["rpId"], entry["userName"]) == ("makeCredential", rp.RP_ID, "alice")
    time.sleep(0.3)
    control.post(f"/v1/presence/pending/{entry['id']}/approve")
    thread.join(10)
    assert "error" not in result, result
    assert STATUS_UPNEEDED in statuses, f"no KEEPALIVE UPNEEDED while waiting: {statuses}"
    [decision] = decisions(control, name)
    assert decision["operation"] == "makeCredential" and decision["userName"] == "alice"
    assert decision["path"] == "prompt" and decision["outcome"] == "approved"
    assert f"approved by the control API ({entry['id']})" in decision["reason"], decision
    assert decision["durationMs"] >= 250


def test_prompt_denied(usb, control, prompt_key):
    name = prompt_key["name"]
    device = usb.ctap(prompt_key["usbip"]["busid"])
    thread, result = start_in_thread(lambda: make_credential(device, "bob"))
    control.decide(name, "deny")
    thread.join(10)
    assert ctap_error(result) == CtapError.ERR.OPERATION_DENIED
    [decision] = decisions(control, name)
    assert decision["outcome"] == "denied" and "denied by the control API" in decision["reason"]


def test_prompt_timed_out(usb, control, prompt_key):
    name = prompt_key["name"]
    control.put(f"/v1/keys/{name}/presence", {"timeoutSeconds": 1})
    device = usb.ctap(prompt_key["usbip"]["busid"])
    thread, result = start_in_thread(lambda: make_credential(device, "carol"))
    thread.join(10)
    assert ctap_error(result) == CtapError.ERR.USER_ACTION_TIMEOUT
    assert control.pending(name) == []
    [decision] = decisions(control, name)
    assert decision["outcome"] == "timedOut" and "not answered in time" in decision["reason"], decision


def test_prompt_cancelled_by_the_host(usb, control, prompt_key):
    name = prompt_key["name"]
    device = usb.ctap(prompt_key["usbip"]["busid"])
    cancel = threading.Event()
    thread, result = start_in_thread(lambda: make_credential(device, "dave", event=cancel))
    wait_for(lambda: control.pending(name), 5, "a pending request")
    cancel.set()  # python-fido2 sends CTAPHID_CANCEL
    thread.join(10)
    assert ctap_error(result) == CtapError.ERR.KEEPALIVE_CANCEL
    wait_for(lambda: control.pending(name) == [], 5, "the cancelled request to leave the pending list")
    [decision] = wait_for(lambda: decisions(control, name), 5, "the decision")
    assert decision["outcome"] == "cancelled" and "CTAPHID_CANCEL" in decision["reason"], decision
    assert control.key(name)["credentials"] == 0


# ---- conditional registration ---------------------------------------------------------


@pytest.fixture
def silent_key(make_key, control):
    """A person's key (prompt) whose makeCredentials only succeed as conditional registrations."""
    key = make_key(presence="prompt")
    control.put(f"/v1/keys/{key['name']}/presence", {"timeoutSeconds": 3})
    set_policy(control, key["name"], onMismatch="deny")
    return key


def refused_at_once(control, name, call):
    """Runs `call`; checks it is OPERATION_DENIED within a second with no prompt shown."""
    with PendingWatch(control, name) as watch:
        started = time.monotonic()
        with pytest.raises(CtapError) as failure:
            call()
        elapsed = time.monotonic() - started
    assert failure.value.code == CtapError.ERR.OPERATION_DENIED
    assert elapsed < 1.0, f"a refusal took {elapsed:.2f} s"
    assert watch.seen == [], f"a prompt appeared: {watch.seen}"
    return decisions(control, name, 1)[0]


def test_fresh_signal_registers_without_a_prompt(usb, control, events, silent_key):
    name = silent_key["name"]
    device = usb.ctap(silent_key["usbip"]["busid"])
    stream = events(name)
    opened = signal(control, name, "alice")
    assert opened["rpId"] == rp.RP_ID and opened["userName"] == "alice"
    assert 299_000 <= opened["expiresInMs"] <= 300_000
    assert control.get(f"/v1/keys/{name}/policy")["openSignals"][0]["userName"] == "alice"
    statuses = []
    with PendingWatch(control, name) as watch:
        response = make_credential(device, "alice", keepalive=statuses.append)
    assert watch.seen == [], f"a prompt appeared: {watch.seen}"
    assert STATUS_UPNEEDED not in statuses
    assert response.auth_data.is_user_present()
    [cred] = control.get(f"/v1/keys/{name}/credentials")
    assert (cred["rpId"], cred["userName"]) == (rp.RP_ID, "alice")
    [decision] = decisions(control, name)
    assert decision["path"] == "conditional" and decision["outcome"] == "approved"
    assert "password used for alice at example.com" in decision["reason"]
    assert control.get(f"/v1/keys/{name}/policy")["openSignals"] == []
    # The policy's events reach the daemon's event stream: the decision, then one
    # credential.created for the new passkey, saying how it was made and why.
    assert stream.next("policy.decision", path="conditional")["decision"] == str(decision["id"])
    created = stream.next("credential.created", credentialId=cred["id"])
    assert created["origin"] == "makeCredential" and created["reason"] == "conditional"
    assert created["decision"] == str(decision["id"]) and created["userName"] == "alice"

    # One use: the same signal does not register a second passkey.
    decision = refused_at_once(control, name, lambda: make_credential(device, "alice"))
    assert "no password-used signal" not in decision["reason"]
    assert "used already" in decision["reason"], decision


def test_missing_signal_is_denied_at_once(usb, control, silent_key):
    name = silent_key["name"]
    device = usb.ctap(silent_key["usbip"]["busid"])
    signal(control, name, "someone-else")
    decision = refused_at_once(control, name, lambda: make_credential(device, "alice"))
    assert decision["path"] == "mismatch" and decision["outcome"] == "denied"
    assert "no password-used signal for alice at example.com" in decision["reason"]
    assert "on-mismatch = deny" in decision["reason"]
    assert control.key(name)["credentials"] == 0


def test_stale_signal_is_denied_at_once(usb, control, silent_key):
    name = silent_key["name"]
    set_policy(control, name, signalWindowSeconds=1)
    device = usb.ctap(silent_key["usbip"]["busid"])
    signal(control, name, "alice")
    time.sleep(1.2)
    decision = refused_at_once(control, name, lambda: make_credential(device, "alice"))
    assert "expired" in decision["reason"], decision


def test_existing_passkey_is_denied(usb, control, silent_key):
    name = silent_key["name"]
    device = usb.ctap(silent_key["usbip"]["busid"])
    signal(control, name, "alice")
    make_credential(device, "alice")
    signal(control, name, "alice")
    decision = refused_at_once(control, name, lambda: make_credential(device, "alice"))
    assert "already has a passkey for alice at example.com" in decision["reason"], decision
    assert len(control.get(f"/v1/keys/{name}/credentials")) == 1


def test_disallowed_rp_is_denied(usb, control, silent_key):
    name = silent_key["name"]
    device = usb.ctap(silent_key["usbip"]["busid"])
    set_policy(control, name, allowRpIds=["*.example.org"])
    signal(control, name, "alice")
    decision = refused_at_once(control, name, lambda: make_credential(device, "alice"))
    assert "not in the policy's allowed RPs" in decision["reason"], decision
    set_policy(control, name, allowRpIds=[], denyRpIds=["example.com"])
    decision = refused_at_once(control, name, lambda: make_credential(device, "alice"))
    assert "denied by the policy (example.com)" in decision["reason"], decision
    set_policy(control, name, denyRpIds=[])
    make_credential(device, "alice")  # the signal survived the refusals
    assert decisions(control, name, 1)[0]["path"] == "conditional"


def test_rate_limit_per_rp(usb, control, silent_key):
    name = silent_key["name"]
    device = usb.ctap(silent_key["usbip"]["busid"])
    set_policy(control, name, rateLimitPerHour=1)
    signal(control, name, "u1")
    make_credential(device, "u1")
    signal(control, name, "u2")
    decision = refused_at_once(control, name, lambda: make_credential(device, "u2"))
    assert "rate limit: 1 conditional registration at example.com in the last hour" in decision["reason"]
    signal(control, name, "u2", rp_id="example.org")
    make_credential(device, "u2", rp_id="example.org")


def test_require_pin(usb, control, silent_key):
    name = silent_key["name"]
    device = usb.ctap(silent_key["usbip"]["busid"])
    set_policy(control, name, requirePin=True)
    signal(control, name, "alice")
    decision = refused_at_once(control, name, lambda: make_credential(device, "alice"))
    assert "requires a PIN" in decision["reason"], decision

    control.put(f"/v1/keys/{name}/pin", {"newPin": "4321"})
    client_pin = ClientPin(Ctap2(device), PinProtocolV2())
    token = client_pin.get_pin_token("4321", ClientPin.PERMISSION.MAKE_CREDENTIAL, rp.RP_ID)
    with PendingWatch(control, name) as watch:
        response = make_credential(device, "alice", client_pin=client_pin, token=token)
    assert watch.seen == []
    assert response.auth_data.is_user_verified()
    assert decisions(control, name, 1)[0]["path"] == "conditional"


def test_fallback_prompts_when_no_condition_holds(usb, control, prompt_key):
    name = prompt_key["name"]
    device = usb.ctap(prompt_key["usbip"]["busid"])
    thread, result = start_in_thread(lambda: make_credential(device, "erin"))
    control.decide(name, "approve", "the fallback prompt")
    thread.join(10)
    assert "error" not in result, result
    [decision] = decisions(control, name)
    assert decision["path"] == "prompt"
    assert decision["reason"].startswith("presence prompt; not a conditional registration: no password-used signal")


def test_signal_and_policy_errors(control, key):
    name = key["name"]
    path = f"/v1/keys/{name}/signals/password-used"
    assert control.post(path, {"rpId": "*.example.com", "userName": "a"}, expect=400)["error"]["code"] == "bad_request"
    assert control.post(path, {"rpId": "example.com", "userName": ""}, expect=400)
    assert control.post(path, {"rpId": "example.com"}, expect=400)
    assert control.post("/v1/keys/nope/signals/password-used", {"rpId": "a.com", "userName": "a"}, expect=404)
    policy = f"/v1/keys/{name}/policy"
    assert control.put(policy, {"userVerification": "sometimes"}, expect=400)
    assert control.put(policy, {"allowRpIds": ["exa mple.com"]}, expect=400)
    control.put(f"/v1/keys/{name}/presence", {"mode": "prompt"})
    error = control.put(policy, {"userVerification": "auto"}, expect=400)["error"]
    assert "needs presence mode" in error["message"]
    control.put(f"/v1/keys/{name}/presence", {"mode": "auto"})
    error = control.put(policy, {"userVerification": "auto"}, expect=400)["error"]
    assert "started without built-in UV" in error["message"], error
    assert control.put(policy, {"conditionalRegistration": False})["conditionalRegistration"] is False
    assert control.post(path, {"rpId": "example.com", "userName": "a"}, expect=409)["error"]["code"] == "conflict"
    assert control.get(f"/v1/keys/{name}/policy/decisions?limit=0", expect=400)
    assert control.get(f"/v1/keys/{name}/policy/decisions?limit=101", expect=400)


# ---- built-in user verification ---------------------------------------------------------


def create_key(control, make_key, presence, user_verification):
    """A key created with a policy (built-in UV is fixed when a key starts)."""
    name = make_key(presence=presence)["name"]
    control.delete(f"/v1/keys/{name}")
    doc = control.post("/v1/keys", {"name": name, "uhid": False, "usbip": True, "presence": presence,
                                    "policy": {"userVerification": user_verification}}, expect=201)
    return doc


def make_uv_credential(device):
    return Ctap2(device).make_credential(
        os.urandom(32), {"id": rp.RP_ID, "name": rp.RP_ID}, {"id": os.urandom(16), "name": "ci", "displayName": "CI"},
        [{"type": "public-key", "alg": -7}], options={"rk": True, "uv": True})


def test_user_verification_auto_for_ci(usb, control, make_key):
    key = create_key(control, make_key, "auto", "auto")
    device = usb.ctap(key["usbip"]["busid"])
    assert Ctap2(device).get_info().options.get("uv") is True
    response = make_uv_credential(device)
    assert response.auth_data.is_user_verified() and response.auth_data.is_user_present()
    [decision] = decisions(control, key["name"])
    assert decision["outcome"] == "verified" and decision["userVerification"] is True
    assert "built-in UV granted (user-verification = auto)" in decision["reason"]


def test_user_verification_prompt_needs_a_persons_approval(usb, control, make_key):
    key = create_key(control, make_key, "prompt", "prompt")
    name = key["name"]
    device = usb.ctap(key["usbip"]["busid"])
    thread, result = start_in_thread(lambda: make_uv_credential(device))
    control.decide(name, "approve", "the UV prompt")
    thread.join(10)
    assert "error" not in result, result
    assert result["value"].auth_data.is_user_verified()
    assert decisions(control, name, 1)[0]["outcome"] == "verified"


def test_user_verification_deny_by_default(usb, control, key):
    device = usb.ctap(key["usbip"]["busid"])
    assert not Ctap2(device).get_info().options.get("uv")
    with pytest.raises(CtapError) as refused:
        make_uv_credential(device)
    assert refused.value.code == CtapError.ERR.INVALID_OPTION


def test_user_verification_auto_is_refused_for_a_person(control, make_key):
    name = make_key()["name"]
    control.delete(f"/v1/keys/{name}")
    error = control.post("/v1/keys", {"name": name, "presence": "prompt", "policy": {"userVerification": "auto"}},
                         expect=400)["error"]
    assert "needs presence mode" in error["message"], error


def test_policy_explain_shows_each_decision(usb, control, daemon, silent_key):
    name = silent_key["name"]
    device = usb.ctap(silent_key["usbip"]["busid"])
    with pytest.raises(CtapError):
        make_credential(device, "nobody")
    signal(control, name, "alice")
    make_credential(device, "alice")
    control.put(f"/v1/keys/{name}/presence", {"mode": "auto"})
    Ctap2(device).get_assertion(rp.RP_ID, os.urandom(32))

    listed = decisions(control, name)
    assert [d["path"] for d in listed] == ["auto", "conditional", "mismatch"]
    assert [d["id"] for d in listed] == sorted((d["id"] for d in listed), reverse=True)
    assert decisions(control, name, 2) == listed[:2]

    ctl = latchkeyctl_command(daemon.control.path)
    out = subprocess.run([*ctl, "policy", "explain", "--key", name, "-n", "3"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "getAssertion for alice at example.com: approved [auto]" in lines[0]
    assert "makeCredential for alice at example.com: approved [conditional]" in lines[2]
    assert "conditional registration: password used for alice at example.com" in lines[3]
    assert "makeCredential for nobody at example.com: denied [mismatch]" in lines[4]
    assert "no password-used signal for nobody at example.com; on-mismatch = deny" in lines[5]
    signalled = subprocess.run([*ctl, "signal", "password-used", "--rp", "example.com",
                                "--user", "bob", "--key", name], capture_output=True, text=True, timeout=30)
    assert signalled.returncode == 0, signalled.stderr
    assert "Conditional registration open for bob at example.com" in signalled.stdout
    assert control.get(f"/v1/keys/{name}/policy")["openSignals"][0]["userName"] == "bob"
