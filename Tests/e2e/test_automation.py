"""The CI control plane of the real latchkeyd, seen from python-fido2 over USB/IP: keys
created with WebDriver-style options (getInfo shows them), credentials seeded from a
PKCS#8 key the test makes (the assertion verifies with the seeded public key), the
answer of built-in user verification, queued overrides (deny, timeout, uv-false,
bogus-signature, malformed-response, drop-connection: the client sees each, and the
operation after them works), replug, and the event stream (server-sent events,
parsed here)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import time

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.exceptions import InvalidSignature
from fido2.ctap import CtapError
from fido2.ctap1 import Ctap1
from fido2.ctap2 import Ctap2
from fido2.hid import CAPABILITY

import rp
from conftest import owned_directory, wait_for
from sse import EventStream


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# ---- helpers ----------------------------------------------------------------------------


def ctap2(usb, key) -> Ctap2:
    return Ctap2(usb.ctap(key["usbip"]["busid"]))


def make_credential(ctap: Ctap2, rk=True, uv=False, user_name="auto"):
    options = {"rk": True} if rk else {}
    if uv:
        options["uv"] = True
    return ctap.make_credential(
        os.urandom(32), {"id": rp.RP_ID, "name": "Example"},
        {"id": os.urandom(16), "name": user_name, "displayName": user_name.title()},
        [{"type": "public-key", "alg": -7}], options=options or None)


def get_assertion(ctap: Ctap2, credential_id: bytes | None = None, uv=False, client_data_hash=None):
    allow = [{"type": "public-key", "id": credential_id}] if credential_id else None
    return ctap.get_assertion(rp.RP_ID, client_data_hash or os.urandom(32), allow,
                              options={"uv": True} if uv else None)


def verify_es256(public_key: ec.EllipticCurvePublicKey, assertion, client_data_hash: bytes) -> None:
    public_key.verify(assertion.signature, bytes(assertion.auth_data) + client_data_hash, ec.ECDSA(hashes.SHA256()))


def seed(control, key, *, resident=True, sign_count=41, rp_id=rp.RP_ID, user_handle=None, large_blob=None):
    private_key = ec.generate_private_key(ec.SECP256R1())
    pkcs8 = private_key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
    credential_id = os.urandom(32)
    body = {"credentialId": b64url(credential_id), "isResidentCredential": resident, "rpId": rp_id,
            "privateKey": b64url(pkcs8), "userHandle": b64url(user_handle or os.urandom(16)),
            "signCount": sign_count}
    if large_blob is not None:
        body["largeBlob"] = b64url(large_blob)
    doc = control.post(f"/v1/keys/{key['name']}/credentials", body, expect=201)
    return credential_id, private_key, body, doc


# ---- key options ------------------------------------------------------------------------


def test_default_key_options(control, make_key):
    doc = make_key()
    assert doc["options"] == {
        "protocol": "ctap2.1", "hasResidentKey": True, "hasUserVerification": False, "isUserVerified": False,
        "hasLargeBlob": True, "hasCredBlob": True, "hasMinPinLength": True, "hasPrf": True,
        "hasThirdPartyPayment": True, "hasPersistentToken": True, "hasPreviewSign": False,
        "hasEnterpriseAttestation": False,
        "enterpriseAttestationRpIds": [],
        "algorithms": ["ES256", "EdDSA", "ES384", "RS256", "ES512", "PS256", "ES256K", "ESP256", "ESP384", "ESP512",
                       "Ed25519", "ML-DSA-65", "ML-DSA-87"],
        "maxDiscoverableCredentials": 1000}


def test_key_option_errors(control):
    assert control.post("/v1/keys", {"name": "bad-protocol", "protocol": "ctap3"}, expect=400)
    assert control.post("/v1/keys", {"name": "bad-type", "hasResidentKey": "yes"}, expect=400)
    assert control.get("/v1/keys/bad-protocol", expect=404)


# ---- overrides that need no engine feature ------------------------------------------------


def test_override_queue_api(control, key):
    path = f"/v1/keys/{key['name']}/overrides"
    assert control.get(path) == []
    first = control.post(path, {"action": "deny", "count": 2}, expect=201)
    assert first["action"] == "deny" and first["remaining"] == 2
    assert first["operations"] == ["makeCredential", "getAssertion"]
    second = control.post(path, {"action": "bogus-signature", "operations": ["getAssertion"]}, expect=201)
    assert second["remaining"] == 1 and second["id"] != first["id"]
    assert [o["id"] for o in control.get(path)] == [first["id"], second["id"]]
    assert control.post(path, {"action": "explode"}, expect=400)
    assert control.post(path, {"action": "deny", "count": 0}, expect=400)
    assert control.post(path, {"action": "deny", "operations": ["sing"]}, expect=400)
    assert control.post("/v1/keys/nope/overrides", {"action": "deny"}, expect=404)
    assert control.delete(path) is None
    assert control.get(path) == []


def test_deny_override_then_works_again(usb, control, key):
    ctap = ctap2(usb, key)
    control.post(f"/v1/keys/{key['name']}/overrides", {"action": "deny", "count": 2}, expect=201)
    for _ in range(2):
        with pytest.raises(CtapError) as denied:
            make_credential(ctap)
        assert denied.value.code == CtapError.ERR.OPERATION_DENIED
    assert control.get(f"/v1/keys/{key['name']}/overrides") == []
    assert make_credential(ctap).fmt == "packed"


def test_timeout_override_answers_at_once(usb, control, key):
    ctap = ctap2(usb, key)
    cred = make_credential(ctap).auth_data.credential_data
    control.post(f"/v1/keys/{key['name']}/overrides",
                 {"action": "timeout", "operations": ["getAssertion"]}, expect=201)
    make_credential(ctap)  # not caught: the override is for getAssertion
    started = time.monotonic()
    with pytest.raises(CtapError) as timed_out:
        get_assertion(ctap, cred.credential_id)
    assert timed_out.value.code == CtapError.ERR.USER_ACTION_TIMEOUT
    assert time.monotonic() - started < 2
    get_assertion(ctap, cred.credential_id)


def test_bogus_signature_fails_verification_once(usb, control, key):
    ctap = ctap2(usb, key)
    attestation = make_credential(ctap)
    cred = attestation.auth_data.credential_data
    public_key = cred.public_key
    control.post(f"/v1/keys/{key['name']}/overrides",
                 {"action": "bogus-signature", "operations": ["getAssertion"]}, expect=201)
    cdh = os.urandom(32)
    bad = get_assertion(ctap, cred.credential_id, client_data_hash=cdh)
    with pytest.raises(InvalidSignature):
        public_key.verify(bytes(bad.auth_data) + cdh, bad.signature)
    cdh = os.urandom(32)
    good = get_assertion(ctap, cred.credential_id, client_data_hash=cdh)
    public_key.verify(bytes(good.auth_data) + cdh, good.signature)
    assert good.auth_data.counter > bad.auth_data.counter


def test_bogus_attestation_signature_fails_the_server(usb, control, key):
    client = rp.make_client(usb.ctap(key["usbip"]["busid"]))
    server = rp.make_server()
    control.post(f"/v1/keys/{key['name']}/overrides", {"action": "bogus-signature"}, expect=201)
    with pytest.raises(Exception) as failed:
        rp.register(client, server, resident_key=False)
    assert not isinstance(failed.value, CtapError), "the key answered; the server must be the one that refuses"
    rp.register(client, server, resident_key=False)


def test_malformed_response_is_a_decoding_error(usb, control, key):
    ctap = ctap2(usb, key)
    control.post(f"/v1/keys/{key['name']}/overrides", {"action": "malformed-response"}, expect=201)
    with pytest.raises(Exception) as malformed:
        make_credential(ctap)
    assert not isinstance(malformed.value, CtapError), repr(malformed.value)
    assert make_credential(ctap).fmt == "packed"


def test_drop_connection_closes_the_usbip_connection(usb, control, key, events):
    stream = events(key["name"])
    busid = key["usbip"]["busid"]
    ctap = ctap2(usb, key)
    control.post(f"/v1/keys/{key['name']}/overrides", {"action": "drop-connection"}, expect=201)
    with pytest.raises(Exception) as dropped:
        make_credential(ctap)
    assert not isinstance(dropped.value, CtapError), repr(dropped.value)
    stream.next("override.applied", override="drop-connection")
    stream.next("key.replugged")
    wait_for(lambda: control.key(key["name"])["usbip"]["attached"] is False, 5, "the connection to close")
    fresh = Ctap2(usb.ctap(busid))
    assert make_credential(fresh).fmt == "packed"


def test_replug_drops_the_connection_and_power_cycles(usb, control, key, events):
    stream = events(key["name"])
    name = key["name"]
    control.put(f"/v1/keys/{name}/pin", {"newPin": "1234abcd"})
    for _ in range(3):
        control.put(f"/v1/keys/{name}/pin", {"currentPin": "wrong-pin", "newPin": "abcd1234"}, expect=(403, 423))
    assert control.get(f"/v1/keys/{name}/pin")["powerCycleRequired"] is True
    ctap = ctap2(usb, key)
    ctap.get_info()
    assert control.post(f"/v1/keys/{name}/replug")["name"] == name
    stream.next("key.replugged", reason="control API")
    assert control.get(f"/v1/keys/{name}/pin")["powerCycleRequired"] is False, "a replug is a power cycle"
    with pytest.raises(Exception):
        ctap.get_info()
    assert Ctap2(usb.ctap(key["usbip"]["busid"])).get_info().aaguid


def test_event_stream_sees_a_key_live_and_die(control, make_key, events, daemon):
    stream = events()
    doc = make_key()
    created = stream.next("key.created", key=doc["name"])
    assert created["protocol"] == "ctap2.1" and created["time"].endswith("Z") and isinstance(created["seq"], int)
    control.delete(f"/v1/keys/{doc['name']}")
    deleted = stream.next("key.deleted", key=doc["name"])
    assert deleted["seq"] > created["seq"]


def test_event_stream_filters_by_key(control, make_key, events):
    stream = events("only-this-one")
    make_key()
    doc = make_key(name="only-this-one")
    event = stream.next("key.created")
    assert event["key"] == doc["name"]


def test_presence_events(usb, control, key, events):
    stream = events(key["name"])
    ctap = ctap2(usb, key)
    make_credential(ctap, user_name="eve")
    requested = stream.next("presence.requested", operation="makeCredential")
    assert requested["rpId"] == rp.RP_ID and requested["userName"] == "eve"
    answered = stream.next("presence.answered", operation="makeCredential")
    assert answered["outcome"] == "approved"
    control.post(f"/v1/keys/{key['name']}/overrides", {"action": "deny"}, expect=201)
    with pytest.raises(CtapError):
        make_credential(ctap)
    denied = stream.next("presence.answered", outcome="denied")
    assert denied["override"] == "deny"


def test_credential_get_and_clear(usb, control, key, events):
    name = key["name"]
    stream = events(name)
    ctap = ctap2(usb, key)
    ids = [make_credential(ctap, user_name=f"u{i}").auth_data.credential_data.credential_id for i in range(2)]
    listed = control.get(f"/v1/keys/{name}/credentials")
    assert sorted(unb64url(c["credentialId"]) for c in listed) == sorted(ids)
    one = control.get(f"/v1/keys/{name}/credentials/{b64url(ids[0])}")
    assert one["credentialId"] == one["id"] == b64url(ids[0])
    assert one["isResidentCredential"] is True and one["rpId"] == rp.RP_ID
    assert one["userHandle"] == one["userId"]
    assert "privateKey" not in one or one["privateKey"] is None
    assert control.get(f"/v1/keys/{name}/credentials/{b64url(os.urandom(32))}", expect=404)
    assert control.delete(f"/v1/keys/{name}/credentials") is None
    assert control.get(f"/v1/keys/{name}/credentials") == []
    deleted = {stream.next("credential.deleted")["credentialId"] for _ in ids}
    assert deleted == {b64url(i) for i in ids}
    with pytest.raises(CtapError) as none:
        get_assertion(ctap)
    assert none.value.code == CtapError.ERR.NO_CREDENTIALS


# ---- key options in getInfo ---------------------------------------------------------------


OPTION_CASES = [
    ({}, dict(rk=True, uv=None, large_blobs=True,
              extensions={"credBlob", "largeBlobKey", "minPinLength", "hmac-secret", "credProtect",
                          "thirdPartyPayment"}, missing={"previewSign"})),
    ({"hasResidentKey": False}, dict(rk=False)),
    ({"hasUserVerification": True}, dict(uv=True)),
    ({"hasLargeBlob": False}, dict(large_blobs=None, missing={"largeBlobKey"})),
    ({"hasCredBlob": False}, dict(missing={"credBlob"})),
    ({"hasMinPinLength": False}, dict(missing={"minPinLength"})),
    ({"hasPrf": False}, dict(missing={"hmac-secret", "hmac-secret-mc"})),
    ({"hasThirdPartyPayment": False}, dict(missing={"thirdPartyPayment"})),
    ({"hasPreviewSign": True}, dict(extensions={"previewSign"})),
    ({"hasEnterpriseAttestation": True}, dict(ep=False)),
]


@pytest.mark.parametrize("options,expected", OPTION_CASES, ids=[json.dumps(o) for o, _ in OPTION_CASES])
def test_key_options_show_in_get_info(usb, control, make_key, options, expected):
    doc = make_key(options=options)
    for name, value in options.items():
        assert doc["options"][name] == value, doc["options"]
    info = Ctap2(usb.ctap(doc["usbip"]["busid"])).get_info()
    assert "FIDO_2_1" in info.versions
    if "rk" in expected:
        assert info.options.get("rk") is expected["rk"]
    if "uv" in expected:
        assert info.options.get("uv") is expected["uv"]
    if "ep" in expected:
        assert info.options.get("ep") is expected["ep"]
    if "large_blobs" in expected:
        assert info.options.get("largeBlobs") is expected["large_blobs"]
    assert expected.get("extensions", set()) <= set(info.extensions), info.extensions
    assert not (expected.get("missing", set()) & set(info.extensions)), info.extensions


def test_u2f_only_key(usb, control, make_key):
    doc = make_key(options={"protocol": "u2f-only"})
    assert doc["options"]["protocol"] == "u2f-only"
    device = usb.ctap(doc["usbip"]["busid"])
    assert not device.capabilities & CAPABILITY.CBOR, "CTAPHID_INIT must not offer CBOR"
    ctap1 = Ctap1(device)
    assert ctap1.get_version() == "U2F_V2"
    app_param = hashlib.sha256(rp.RP_ID.encode()).digest()
    client_param = os.urandom(32)
    registration = ctap1.register(client_param, app_param)
    registration.verify(app_param, client_param)
    challenge = os.urandom(32)
    signed = ctap1.authenticate(challenge, app_param, registration.key_handle)
    signed.verify(app_param, challenge, registration.public_key)
    assert signed.user_presence & 1
    webdriver = make_key(options={"protocol": "ctap1/u2f"})
    assert webdriver["options"]["protocol"] == "u2f-only"


# ---- seeded credentials ----------------------------------------------------------------------


def test_seeded_credential_asserts_with_its_key(usb, control, make_key, events):
    key = make_key(options={"exportable": True})  # ?privateKey=true below (docs/access.md)
    name = key["name"]
    stream = events(name)
    user_handle = os.urandom(16)
    credential_id, private_key, body, doc = seed(control, key, sign_count=41, user_handle=user_handle)
    assert doc["credentialId"] == body["credentialId"] and doc["isResidentCredential"] is True
    assert doc["rpId"] == rp.RP_ID and doc["userHandle"] == b64url(user_handle) and doc["signCount"] == 41
    created = stream.next("credential.created", credentialId=body["credentialId"])
    assert created["origin"] == "import" and created["rpId"] == rp.RP_ID

    ctap = ctap2(usb, key)
    cdh = os.urandom(32)
    assertion = get_assertion(ctap, credential_id, client_data_hash=cdh)
    verify_es256(private_key.public_key(), assertion, cdh)
    assert assertion.credential["id"] == credential_id
    assert assertion.auth_data.counter > 41
    asserted = stream.next("credential.asserted", credentialId=body["credentialId"])
    assert asserted["signCount"] == assertion.auth_data.counter

    # Usernameless: the seeded credential is discoverable, with its user handle.
    cdh = os.urandom(32)
    usernameless = get_assertion(ctap, client_data_hash=cdh)
    assert usernameless.user["id"] == user_handle
    verify_es256(private_key.public_key(), usernameless, cdh)
    assert usernameless.auth_data.counter > assertion.auth_data.counter

    listed = control.get(f"/v1/keys/{name}/credentials")
    [entry] = [c for c in listed if c["credentialId"] == body["credentialId"]]
    assert entry["signCount"] == usernameless.auth_data.counter
    exported = control.get(f"/v1/keys/{name}/credentials/{body['credentialId']}?privateKey=true")
    again = serialization.load_der_private_key(unb64url(exported["privateKey"]), None)
    assert again.private_numbers() == private_key.private_numbers()


def test_seeded_credential_through_fido2_server(usb, control, key):
    """The website's side: Fido2Server verifies the assertion against the seeded public key."""
    from fido2.cose import ES256
    from fido2.webauthn import Aaguid, AttestedCredentialData

    credential_id, private_key, _, _ = seed(control, key)
    public = ES256.from_cryptography_key(private_key.public_key())
    stored = AttestedCredentialData.create(Aaguid.NONE, credential_id, public)
    client = rp.make_client(usb.ctap(key["usbip"]["busid"]))
    found = rp.authenticate(client, rp.make_server(), [stored], allow=True)
    assert found.credential_id == credential_id and found.sign_count > 41


def test_seeded_non_resident_credential(usb, control, key):
    credential_id, private_key, body, doc = seed(control, key, resident=False, sign_count=7)
    assert doc["isResidentCredential"] is False
    wrapped = unb64url(doc["credentialId"])
    assert wrapped != credential_id, "a non-discoverable credential's ID is the key's wrapping"
    assert control.get(f"/v1/keys/{key['name']}/credentials") == []
    ctap = ctap2(usb, key)
    cdh = os.urandom(32)
    assertion = get_assertion(ctap, wrapped, client_data_hash=cdh)
    verify_es256(private_key.public_key(), assertion, cdh)
    assert assertion.auth_data.counter > 7


def test_seeded_large_blob_is_what_the_client_reads(usb, control, key):
    from fido2.ctap2.blob import LargeBlobs

    blob = b"seeded large blob " * 20
    credential_id, _, body, doc = seed(control, key, large_blob=blob)
    assert unb64url(doc["largeBlob"]) == blob
    ctap = ctap2(usb, key)
    assertion = ctap.get_assertion(rp.RP_ID, os.urandom(32), [{"type": "public-key", "id": credential_id}],
                                   extensions={"largeBlobKey": True})
    assert assertion.large_blob_key
    assert LargeBlobs(ctap).get_blob(assertion.large_blob_key) == blob


def test_seed_errors(control, key, make_key):
    path = f"/v1/keys/{key['name']}/credentials"
    _, _, body, _ = seed(control, key)
    assert control.post(path, body, expect=409)["error"]["code"] == "duplicate"
    bad = dict(body, credentialId=b64url(os.urandom(32)), userHandle=b64url(os.urandom(8)), privateKey=b64url(b"nope"))
    assert control.post(path, bad, expect=400)
    assert control.post(path, dict(body, credentialId="***"), expect=400)
    no_user = {k: v for k, v in body.items() if k != "userHandle"}
    assert control.post(path, dict(no_user, credentialId=b64url(os.urandom(32))), expect=400)
    assert control.post(path, dict(body, isResidentCredential=False, largeBlob=b64url(b"x")), expect=400)
    no_rk = make_key(options={"hasResidentKey": False})
    assert control.post(f"/v1/keys/{no_rk['name']}/credentials", body, expect=400)


# ---- user verification ----------------------------------------------------------------------------


def test_is_user_verified_decides_built_in_uv(usb, control, make_key, events):
    doc = make_key(options={"hasUserVerification": True, "isUserVerified": True})
    name = doc["name"]
    stream = events(name)
    assert control.get(f"/v1/keys/{name}/user-verified") == {"isUserVerified": True}
    ctap = ctap2(usb, doc)
    assert ctap.info.options.get("uv") is True
    made = make_credential(ctap, uv=True)
    assert made.auth_data.is_user_verified()
    cred = made.auth_data.credential_data
    assert get_assertion(ctap, cred.credential_id, uv=True).auth_data.is_user_verified()
    answered = stream.next("presence.answered", operation="getAssertion")
    assert answered["outcome"] == "verified" and answered["userVerification"] is True

    assert control.put(f"/v1/keys/{name}/user-verified", {"isUserVerified": False}) == {"isUserVerified": False}
    assert control.key(name)["options"]["isUserVerified"] is False
    with pytest.raises(CtapError) as failed:
        get_assertion(ctap, cred.credential_id, uv=True)
    assert failed.value.code == CtapError.ERR.UV_INVALID
    # Without uv the key still answers, with UV clear.
    assert not get_assertion(ctap, cred.credential_id).auth_data.is_user_verified()

    control.put(f"/v1/keys/{name}/user-verified", {"isUserVerified": True})
    control.post(f"/v1/keys/{name}/overrides", {"action": "uv-false"}, expect=201)
    get_assertion(ctap, cred.credential_id)  # no UV asked: the override waits
    with pytest.raises(CtapError) as uv_false:
        get_assertion(ctap, cred.credential_id, uv=True)
    assert uv_false.value.code == CtapError.ERR.UV_INVALID
    assert get_assertion(ctap, cred.credential_id, uv=True).auth_data.is_user_verified()
    assert control.put(f"/v1/keys/{name}/user-verified", {"isUserVerified": "yes"}, expect=400)
    assert control.put("/v1/keys/nope/user-verified", {"isUserVerified": True}, expect=404)


# ---- credential events --------------------------------------------------------------------------


def test_credential_events(usb, control, key, events):
    name = key["name"]
    stream = events(name)
    ctap = ctap2(usb, key)
    made = make_credential(ctap, user_name="frank")
    cid = b64url(made.auth_data.credential_data.credential_id)
    created = stream.next("credential.created", credentialId=cid)
    assert created["rpId"] == rp.RP_ID and created["userName"] == "frank" and created["discoverable"] is True
    assert created["origin"] == "makeCredential" and isinstance(created["signCount"], int)
    get_assertion(ctap, made.auth_data.credential_data.credential_id)
    asserted = stream.next("credential.asserted", credentialId=cid)
    assert asserted["rpId"] == rp.RP_ID
    control.put(f"/v1/keys/{name}/credentials/{cid}/user", {"name": "franklin"})
    updated = stream.next("credential.updated", credentialId=cid)
    assert updated["userName"] == "franklin"
    control.delete(f"/v1/keys/{name}/credentials/{cid}")
    stream.next("credential.deleted", credentialId=cid)


# ---- latchkeyctl ---------------------------------------------------------------------------------

def test_latchkeyctl_events_and_overrides(latchkeyctl, usb, control, key):
    name = key["name"]
    queued = latchkeyctl("overrides", "add", "deny", "--count", "1", "--operation", "makeCredential", "--key", name)
    assert queued.returncode == 0, queued.stderr
    assert "deny" in queued.stdout and "makeCredential" in queued.stdout
    listed = latchkeyctl("overrides", "list", "--key", name, "--json")
    [entry] = json.loads(listed.stdout)
    assert entry["action"] == "deny" and entry["remaining"] == 1

    argv = [*latchkeyctl.command, "events", "--key", name, "--count", "4", "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)  # let it subscribe
        with pytest.raises(CtapError):
            make_credential(ctap2(usb, key))
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    names = [json.loads(line)["event"] for line in out.splitlines()]
    assert names == ["presence.requested", "policy.decision", "override.applied", "presence.answered"], out

    assert latchkeyctl("overrides", "clear", "--key", name).returncode == 0
    assert "No overrides" in latchkeyctl("overrides", "list", "--key", name).stdout
    assert latchkeyctl("overrides", "add", "explode", "--key", name).returncode == 1


def test_sigterm_ends_open_event_streams(tmp_path):
    """An open event stream must not hold up the daemon's shutdown."""
    from conftest import Daemon, daemon_binary

    binary = daemon_binary()
    if not binary.exists():
        pytest.skip(f"no latchkeyd at {binary}")
    own = Daemon(binary, tmp_path)
    own.start()
    try:
        stream = EventStream(own.control.path)
        started = time.monotonic()
        own.stop(timeout=8)
        assert time.monotonic() - started < 5, "SIGTERM waited for the event stream"
        assert not own.problems, own.problems
        assert stream.events.get(timeout=5) is None, "the stream ends with the daemon"
        stream.close()
    finally:
        own.stop()


def test_latchkeyctl_creates_keys_with_options(latchkeyctl, control):
    name = f"ctl-options-{os.getpid()}"
    made = latchkeyctl("keys", "create", name, "--no-uhid", "--protocol", "u2f-only", "--no-resident-keys",
                       "--user-verification", "--user-verified", "--no-prf", "--json")
    try:
        assert made.returncode == 0, made.stderr
        assert json.loads(made.stdout)["options"] == {
            "protocol": "u2f-only", "hasResidentKey": False, "hasUserVerification": True, "isUserVerified": True,
            "hasLargeBlob": True, "hasCredBlob": True, "hasMinPinLength": True, "hasPrf": False,
            "hasThirdPartyPayment": True, "hasPersistentToken": True, "hasPreviewSign": False,
        "hasEnterpriseAttestation": False,
            "enterpriseAttestationRpIds": [],
            "algorithms": ["ES256", "EdDSA", "ES384", "RS256", "ES512", "PS256", "ES256K", "ESP256", "ESP384",
                           "ESP512", "Ed25519", "ML-DSA-65", "ML-DSA-87"],
            "maxDiscoverableCredentials": 1000}
        turned = latchkeyctl("keys", "user-verified", name, "off")
        assert turned.returncode == 0 and "fails" in turned.stdout, turned
        assert control.get(f"/v1/keys/{name}/user-verified") == {"isUserVerified": False}
        shown = latchkeyctl("keys", "user-verified", name, "--json")
        assert json.loads(shown.stdout) == {"isUserVerified": False}
        assert latchkeyctl("keys", "create", "x", "--protocol", "ctap3").returncode == 64
    finally:
        control.delete(f"/v1/keys/{name}", expect=(204, 404))


def test_uv_false_needs_built_in_uv(control, key):
    refused = control.post(f"/v1/keys/{key['name']}/overrides", {"action": "uv-false"}, expect=400)
    assert "hasUserVerification" in refused["error"]["message"]


def test_replug_opens_the_reset_window(tmp_path):
    """authenticatorReset is allowed only shortly after power-up; a replug is a power-up."""
    from conftest import Daemon, daemon_binary, HOST
    from usbip_hid import UsbipHidInterface

    binary = daemon_binary()
    if not binary.exists():
        pytest.skip(f"no latchkeyd at {binary}")
    config = tmp_path / "latchkeyd.toml"
    config.write_text("reset-window-seconds = 1\n")
    own = Daemon(binary, tmp_path)
    own.extra_args = ["--config", str(config)]
    own.start()
    interfaces = []
    try:
        doc = own.control.post("/v1/keys", {"name": "window", "uhid": False, "usbip": True}, expect=201)

        def ctap() -> Ctap2:
            iface = UsbipHidInterface(HOST, own.port, doc["usbip"]["busid"], close_with_last_connection=False)
            interfaces.append(iface)
            return Ctap2(iface.ctap_device(10))

        time.sleep(1.5)
        with pytest.raises(CtapError) as late:
            ctap().reset()
        assert late.value.code == CtapError.ERR.NOT_ALLOWED
        for iface in interfaces:
            iface.close()
        own.control.post("/v1/keys/window/replug")
        ctap().reset()
    finally:
        for iface in interfaces:
            iface.close()
        own.stop()
    assert not own.problems, own.problems


def test_latchkeyctl_seeds_and_shows_a_credential(latchkeyctl, usb, control, make_key, tmp_path):
    key = make_key(options={"exportable": True})  # --private-key below (docs/access.md)
    private_key = ec.generate_private_key(ec.SECP256R1())
    pem = owned_directory(tmp_path, 0o750) / "seed.pem"  # latchkeyctl reads it as the owner
    pem.write_bytes(private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
    # An ID whose base64url begins with "-", which must still be read as a value.
    credential_id = base64.urlsafe_b64decode("-" + b64url(os.urandom(32))[1:] + "=")
    added = latchkeyctl("credentials", "add", key["name"], "--rp-id", rp.RP_ID, "--private-key", str(pem),
                        "--credential-id", b64url(credential_id), "--user-handle", b64url(b"ctl-user"),
                        "--sign-count", "9", "--json")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["credentialId"] == b64url(credential_id)
    cdh = os.urandom(32)
    assertion = get_assertion(ctap2(usb, key), credential_id, client_data_hash=cdh)
    verify_es256(private_key.public_key(), assertion, cdh)
    # "--": a base64url ID may begin with "-".
    shown = latchkeyctl("credentials", "show", key["name"], "--", b64url(credential_id))
    assert shown.returncode == 0 and f"{assertion.auth_data.counter}" in shown.stdout, shown.stdout
    exported = json.loads(latchkeyctl("credentials", "show", key["name"], "--private-key", "--json", "--",
                                      b64url(credential_id)).stdout)
    assert serialization.load_der_private_key(unb64url(exported["privateKey"]), None).private_numbers() \
        == private_key.private_numbers()
    missing = latchkeyctl("credentials", "add", key["name"], "--rp-id", rp.RP_ID, "--private-key", str(tmp_path / "none"))
    assert missing.returncode == 64


def test_approve_override_lets_a_prompt_key_through(usb, control, key):
    name = key["name"]
    control.put(f"/v1/keys/{name}/presence", {"mode": "prompt", "timeoutSeconds": 2})
    control.post(f"/v1/keys/{name}/overrides", {"action": "approve"}, expect=201)
    ctap = ctap2(usb, key)
    assert make_credential(ctap).fmt == "packed", "approved without anyone answering"
    assert control.pending(name) == []
    with pytest.raises(CtapError) as timed_out:
        make_credential(ctap)
    assert timed_out.value.code == CtapError.ERR.USER_ACTION_TIMEOUT, "the prompt mode again"
