"""Who may do what with a key (docs/access.md), against the real latchkeyd run as lk-owner.

The route table comes from the daemon itself (GET /v1/api/routes) and is walked three
times: as the key's owner (lk-owner: nothing refused), as lk-other, another member of the
socket's group (every key route 403 `forbidden` with its rule, and exactly one
access.refused event each on the owner's stream; listings show nothing of the owner's),
and as root (see and manage allowed, use, answer and export refused). Then the pending
presence requests, the export rule (exportable keys, the key's PIN and its retries),
owners given at creation, and curl run as lk-other as the outside client.
"""

from __future__ import annotations

import json
import os
import time

import pytest

import identities
from conftest import wait_for
from sse import EventStream
from test_automation import seed
from test_control_api import ctap2_make_credential, one_pending, start_in_thread

pytestmark = pytest.mark.skipif(identities.available() is not None, reason=str(identities.available()))

OWNER = identities.account("owner")
OTHER = identities.account("other")
PIN = "482193"

# A request body that decodes for each route that takes one (the access check comes
# before the body is read, so for a refused caller any body would do; the owner's and
# root's walks want theirs to get past decoding).
BODIES = {
    ("PUT", "/config"): {},
    ("POST", "/credentials"): None,  # filled in with a fresh credential per call
    ("PUT", "/credentials/{id}/user"): {"name": "renamed"},
    ("POST", "/export"): {"plaintext": True},
    ("POST", "/import"): {"document": {"version": {"major": 1, "minor": 0}}},
    ("POST", "/overrides"): {"action": "approve", "count": 1},
    ("PUT", "/pin"): {"newPin": PIN},
    ("PUT", "/policy"): {},
    ("PUT", "/presence"): {"mode": "auto"},
    ("POST", "/signals/accepted-credentials"): {"rpId": "example.com", "userId": "AA", "allAcceptedCredentialIds": []},
    ("POST", "/signals/current-user-details"): {"rpId": "example.com", "userId": "AA", "name": "a", "displayName": "A"},
    ("POST", "/signals/password-used"): {"rpId": "example.com", "userName": "alice"},
    ("POST", "/signals/unknown-credential"): {"rpId": "example.com", "credentialId": "AA"},
    ("PUT", "/user-verified"): {"isUserVerified": True},
}


def key_routes(control) -> list[dict]:
    """The server's key routes, DELETE of the key itself last; GET credentials/{id} twice,
    the second with ?privateKey=true."""
    routes = [r for r in control.get("/v1/api/routes") if r["path"].startswith("/v1/keys/{name}")]
    routes.sort(key=lambda r: (r["method"], r["path"]) == ("DELETE", "/v1/keys/{name}"))
    walked = []
    for route in routes:
        walked.append({**route, "query": ""})
        if route.get("privateKey"):
            walked.append({**route, "query": "?privateKey=true", "access": route["access"]})
    return walked


def request_for(route: dict, control, name: str, credential_id: str) -> tuple[str, str, object]:
    suffix = route["path"][len("/v1/keys/{name}"):]
    body = BODIES.get((route["method"], suffix))
    if (route["method"], suffix) == ("POST", "/credentials"):
        body = {"credentialId": b64url(os.urandom(16)), "rpId": "example.com", "userHandle": "AQID",
                "privateKey": seed_private_key()}
    path = route["path"].replace("{name}", name).replace("{id}", credential_id) + route["query"]
    return route["method"], path, body


def b64url(data: bytes) -> str:
    import base64
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def seed_private_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    key = ec.generate_private_key(ec.SECP256R1())
    return b64url(key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))


def stream_as(path: str, account: identities.Account | None, key: str | None = None) -> EventStream:
    """The event stream opened by `account` (None: root, the suite's own uid)."""
    if account is None:
        def open_root(socket_path):
            import socket
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(socket_path)
            return sock
        return EventStream(path, key, open_socket=open_root)
    return EventStream(path, key, open_socket=account.connect_unix)


def refusals(stream: EventStream, name: str, count: int) -> list[dict]:
    """The access.refused events of key `name` the stream has carried: exactly `count`
    (checked again after a pause for strays). Read from what the stream saw, so that
    `next` still finds the other events in order."""
    def found():
        return [e for e in stream.seen if e["event"] == "access.refused" and e.get("key") == name]
    wait_for(lambda: len(found()) >= count, 5, f"{count} access.refused events of {name}")
    time.sleep(0.5)
    assert len(found()) == count, found()
    return found()


def test_the_route_table_walked_as_another_account(control, make_key, events):
    """lk-other, in the socket's group, gets 403 on every key route of lk-owner's key, one
    access.refused event each, and sees nothing of the key anywhere."""
    other = control.as_account("other")
    key = make_key(options={"exportable": True})
    name = key["name"]
    credential_id, _, _, _ = seed(control, key)
    owners_stream = events(name)
    others_stream = stream_as(control.path, OTHER)
    try:
        walked = []
        for route in key_routes(control):
            method, path, body = request_for(route, control, name, b64url(credential_id))
            answer = other.request(method, path, body, expect=403)
            error = answer["error"]
            assert error["code"] == "forbidden", (method, path, answer)
            rule = "owner-or-root" if route["access"] in ("see", "manage", "attach") else "owner-only"
            assert error["rule"] == rule, (method, path, answer)
            assert f"uid {OTHER.uid}" in error["message"] and f"uid {OWNER.uid}" in error["message"], answer
            walked.append((route["access"], rule))
        assert len(walked) >= 30, walked
        events_seen = refusals(owners_stream, name, len(walked))
        assert [(e["access"], e["rule"]) for e in events_seen] == walked
        assert all(e["uid"] == OTHER.uid and e["door"] == "control" for e in events_seen), events_seen
        # The owner's key is untouched: its credential, its presence mode, the key itself.
        assert [c["id"] for c in control.get(f"/v1/keys/{name}/credentials")] == [b64url(credential_id)]
        assert control.get(f"/v1/keys/{name}/presence")["mode"] == "auto"

        # Listings show nothing of it; its events are refused, and the full stream had none of them.
        assert name not in [k["name"] for k in other.get("/v1/keys")]
        assert name not in [k["name"] for k in other.get("/v1/status")["keys"]]
        refused = other.get(f"/v1/events?key={name}", expect=403)["error"]
        assert refused["rule"] == "owner-only"
        assert refusals(owners_stream, name, len(walked) + 1)[-1]["access"] == "use"
        control.post(f"/v1/keys/{name}/replug")
        owners_stream.next("key.replugged", key=name)
        assert not [e for e in others_stream.seen if e.get("key") == name], others_stream.seen
    finally:
        others_stream.close()


def test_the_route_table_walked_as_root(control, make_key, events):
    """Root sees and manages lk-owner's key (the last of which deletes it) but is refused
    every use, answer and export route."""
    root = control.as_account("root")
    key = make_key(options={"exportable": True})
    name = key["name"]
    credential_id, _, _, _ = seed(control, key)
    stream = events(name)
    refused = []
    for route in key_routes(control):
        method, path, body = request_for(route, control, name, b64url(credential_id))
        status, answer = root.request(method, path, body, expect=None)
        if route["access"] in ("see", "manage", "attach"):
            assert status != 403, (method, path, answer)
            assert status < 300, (method, path, answer)
        else:
            assert status == 403 and answer["error"]["rule"] == "owner-only", (method, path, answer)
            refused.append(route["access"])
    assert set(refused) == {"use", "export"} and len(refused) >= 20, refused
    assert [e["access"] for e in refusals(stream, name, len(refused))] == refused
    assert control.get(f"/v1/keys/{name}", expect=404), "root's DELETE, last of the walk, deleted it"


def test_the_route_table_walked_as_the_owner(control, make_key):
    """Nothing on the owner's own key is refused."""
    key = make_key(options={"exportable": True})
    name = key["name"]
    credential_id, _, _, _ = seed(control, key)
    for route in key_routes(control):
        method, path, body = request_for(route, control, name, b64url(credential_id))
        status, answer = control.request(method, path, body, expect=None)
        assert status != 403, (method, path, answer)


def test_listings_show_each_account_its_own_keys_and_root_all(control, make_key):
    mine = make_key()["name"]
    other = control.as_account("other")
    theirs = other.post("/v1/keys", {"name": f"{mine}-theirs", "uhid": False, "usbip": True}, expect=201)
    try:
        assert theirs["owner"] == {"uid": OTHER.uid, "name": OTHER.name}
        assert mine not in [k["name"] for k in other.get("/v1/keys")]
        assert theirs["name"] in [k["name"] for k in other.get("/v1/keys")]
        assert theirs["name"] not in [k["name"] for k in control.get("/v1/keys")]
        everything = [k["name"] for k in control.as_account("root").get("/v1/keys")]
        assert mine in everything and theirs["name"] in everything
        assert control.get(f"/v1/keys/{theirs['name']}/credentials", expect=403)["error"]["rule"] == "owner-only"
    finally:
        other.delete(f"/v1/keys/{theirs['name']}")


def test_pending_requests_are_answered_by_the_owner_alone(usb, control, key, events):
    """Root and lk-other do not see the owner's pending request and may not approve or
    deny it (403, one access.refused each); the owner's answer goes through."""
    name = key["name"]
    control.put(f"/v1/keys/{name}/presence", {"mode": "prompt", "timeoutSeconds": 15})
    stream = events(name)
    device = usb.ctap(key["usbip"]["busid"])
    thread, result = start_in_thread(lambda: ctap2_make_credential(device, "carol"))
    entry = one_pending(control, name)
    refused = 0
    for account in ("other", "root"):
        client = control.as_account(account)
        assert [p for p in client.get("/v1/presence/pending") if p["key"] == name] == []
        for verdict in ("approve", "deny"):
            answer = client.post(f"/v1/presence/pending/{entry['id']}/{verdict}", expect=403)
            assert answer["error"]["rule"] == "owner-only", answer
            refused += 1
    assert [e["access"] for e in refusals(stream, name, refused)] == ["answer"] * refused
    assert thread.is_alive(), "no refused answer reached the ceremony"
    control.post(f"/v1/presence/pending/{entry['id']}/approve")
    thread.join(10)
    assert "error" not in result, repr(result.get("error"))


def test_export_needs_an_exportable_key_or_its_pin(control, make_key, events, latchkeyctl):
    name = make_key()["name"]
    stream = events(name)
    path = f"/v1/keys/{name}/export"
    assert control.key(name)["exportable"] is False
    refused = control.post(path, {"plaintext": True}, expect=403)["error"]
    assert refused["rule"] == "not-exportable" and "exportable" in refused["message"] and "PIN" in refused["message"]
    assert control.put(f"/v1/keys/{name}/config", {"exportable": True}, expect=400)["error"]["code"] == "bad_request"
    control.put(f"/v1/keys/{name}/pin", {"newPin": PIN})
    assert control.post(path, {"plaintext": True}, expect=403)["error"]["rule"] == "export-needs-pin"
    wrong = control.post(path, {"plaintext": True, "pin": "000000"}, expect=403)["error"]
    assert wrong["rule"] == "export-pin-refused" and "7 retries left" in wrong["message"], wrong
    assert control.get(f"/v1/keys/{name}/pin")["retries"] == 7
    root = control.as_account("root").post(path, {"plaintext": True, "pin": "000000"}, expect=403)["error"]
    assert root["rule"] == "owner-only"
    assert control.get(f"/v1/keys/{name}/pin")["retries"] == 7, "a refused caller spends no retry"
    credential_id = b64url(seed(control, {"name": name})[0])
    single = control.get(f"/v1/keys/{name}/credentials/{credential_id}?privateKey=true", expect=403)["error"]
    assert single["rule"] == "export-needs-pin", "a GET carries no PIN"
    cxf = control.post(path, {"plaintext": True, "pin": PIN})
    assert len(cxf["accounts"][0]["items"]) == 1
    assert control.get(f"/v1/keys/{name}/pin")["retries"] == 8
    assert [e["rule"] for e in refusals(stream, name, 5)] == [
        "not-exportable", "export-needs-pin", "export-pin-refused", "owner-only", "export-needs-pin"]
    exported = stream.next("key.exported", key=name)
    assert (exported["grant"], exported["format"], exported["count"], exported["uid"]) == ("pin", "cxf", 1, OWNER.uid)
    assert PIN not in json.dumps(exported)

    # latchkeyctl, as the owner, with the PIN on standard input before the passphrase.
    done = latchkeyctl("export", "--key", name, "--pin-stdin", "--passphrase-stdin", stdin=f"{PIN}\ncorrect horse\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["format"] == "latchkey-cxf-scrypt-aes256gcm-v1"
    assert stream.next("key.exported", key=name)["format"] == "cxf-encrypted"
    bad = latchkeyctl("export", "--key", name, "--pin-stdin", "--plaintext", stdin="999999\n")
    assert bad.returncode == 3 and "retries left" in bad.stderr, bad.stderr


def test_an_exportable_key_exports_without_a_pin(control, make_key, events):
    key = make_key(options={"exportable": True})
    name = key["name"]
    assert key["exportable"] is True
    stream = events(name)
    credential_id, private_key, _, _ = seed(control, key)
    single = control.get(f"/v1/keys/{name}/credentials/{b64url(credential_id)}?privateKey=true")
    assert single["privateKey"]
    assert (stream.next("key.exported", key=name)["grant"], "pkcs8") == ("exportable", "pkcs8")
    cxf = control.post(f"/v1/keys/{name}/export", {"plaintext": True})
    assert len(cxf["accounts"][0]["items"]) == 1
    exported = stream.next("key.exported", key=name)
    assert (exported["grant"], exported["format"]) == ("exportable", "cxf")
    assert control.as_account("root").post(f"/v1/keys/{name}/export", {"plaintext": True},
                                           expect=403)["error"]["rule"] == "owner-only"


def test_root_makes_a_key_for_an_owner_and_no_one_else_does(control):
    root, other = control.as_account("root"), control.as_account("other")
    name = "access-made-by-root"
    refused = other.post("/v1/keys", {"name": name, "owner": OWNER.name, "uhid": False}, expect=403)["error"]
    assert refused["rule"] == "root-names-owner"
    assert other.post("/v1/keys", {"name": name, "owner": "no-such-account-here"}, expect=400)
    made = root.post("/v1/keys", {"name": name, "owner": OWNER.name, "uhid": False, "usbip": True}, expect=201)
    try:
        assert made["owner"] == {"uid": OWNER.uid, "name": OWNER.name} and made["exportable"] is False
        assert control.get(f"/v1/keys/{name}/credentials") == [], "its owner uses it"
        assert root.get(f"/v1/keys/{name}/credentials", expect=403)["error"]["rule"] == "owner-only"
        by_uid = root.post("/v1/keys", {"name": f"{name}-2", "owner": OTHER.uid, "usbip": False, "uhid": False},
                           expect=201)
        assert by_uid["owner"]["uid"] == OTHER.uid
        root.delete(f"/v1/keys/{name}-2")
    finally:
        root.delete(f"/v1/keys/{name}")


def test_curl_as_another_account_is_refused(control, make_key):
    """The outside client: curl, run as lk-other, on the daemon's socket."""
    name = make_key()["name"]
    url = f"http://localhost/v1/keys/{name}/credentials"
    run = OTHER.run(["curl", "-sS", "--unix-socket", control.path, "-w", "\n%{http_code}", url])
    assert run.returncode == 0, run.stderr
    body, status = run.stdout.decode().rsplit("\n", 1)
    assert status == "403", run.stdout
    error = json.loads(body)["error"]
    assert error["code"] == "forbidden" and error["rule"] == "owner-only"
    assert f"uid {OTHER.uid} ({OTHER.name})" in error["message"]
    listing = OTHER.run(["curl", "-sS", "--unix-socket", control.path, "http://localhost/v1/keys"])
    assert name not in [k["name"] for k in json.loads(listing.stdout)]
