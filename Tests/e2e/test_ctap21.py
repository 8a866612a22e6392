"""CTAP 2.1 through the real daemon: clientPIN (PIN/UV auth protocols One and Two),
pinUvAuthToken permissions, credentialManagement and authenticatorConfig, driven by
python-fido2's own ClientPin, CredentialManagement, Config and Fido2Client over our
USB/IP client; Fido2Server verifies what the relying party sees."""

from __future__ import annotations

import os
import signal
import struct
import subprocess

import pytest
from fido2.client import ClientError, UserInteraction
from fido2.ctap import CtapError
from fido2.ctap1 import ApduError, Ctap1
from fido2.ctap2 import Ctap2
from fido2.ctap2.base import args
from fido2.ctap2.config import Config
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2
from fido2.utils import sha256
from fido2.webauthn import (
    PublicKeyCredentialUserEntity,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

import rp
from conftest import HOST, ControlClient, Opened, as_daemon_account, daemon_binary, free_port, owned_directory, wait_for

ERR = CtapError.ERR
P = ClientPin.PERMISSION
PROTOCOLS = {"v1": PinProtocolV1, "v2": PinProtocolV2}
PIN = "1234"
OTHER_RP = "other.example"
RM = CredentialManagement.RESULT


class PinUser(UserInteraction):
    """A user who touches the key and gives `pin` whenever the client asks for it."""

    def __init__(self, pin: str):
        self.pin = pin
        self.pin_requests = 0

    def prompt_up(self) -> None:
        pass

    def request_pin(self, permissions, rp_id):
        self.pin_requests += 1
        return self.pin

    def request_uv(self, permissions, rp_id) -> bool:
        return True


def ctap_error(call) -> int:
    """The CTAP status `call` fails with; fails the test if it succeeds."""
    with pytest.raises(CtapError) as failure:
        call()
    return failure.value.code


def fresh_info(ctap: Ctap2):
    """getInfo now (python-fido2 caches the first answer in Ctap2.info)."""
    ctap._info = ctap.get_info()
    return ctap._info


def make_credential(ctap: Ctap2, client_pin: ClientPin | None, token: bytes | None, *, rp_id=rp.RP_ID,
                    rk=True, user: PublicKeyCredentialUserEntity | None = None):
    """A raw authenticatorMakeCredential (ES256), with the token's pinUvAuthParam when given."""
    client_data_hash = os.urandom(32)
    user = user or rp.new_user()
    kwargs = {}
    if token is not None:
        kwargs = {"pin_uv_param": client_pin.protocol.authenticate(token, client_data_hash),
                  "pin_uv_protocol": client_pin.protocol.VERSION}
    response = ctap.make_credential(
        client_data_hash, {"id": rp_id, "name": rp_id},
        {"id": user.id, "name": user.name, "displayName": user.display_name}, [{"type": "public-key", "alg": -7}],
        options={"rk": rk}, **kwargs)
    return response.auth_data


def get_assertion(ctap: Ctap2, client_pin: ClientPin | None, token: bytes | None, *, rp_id=rp.RP_ID,
                  allow=None):
    client_data_hash = os.urandom(32)
    kwargs = {}
    if token is not None:
        kwargs = {"pin_uv_param": client_pin.protocol.authenticate(token, client_data_hash),
                  "pin_uv_protocol": client_pin.protocol.VERSION}
    return ctap.get_assertion(rp_id, client_data_hash, allow_list=allow, **kwargs), client_data_hash


@pytest.fixture
def ctap(usb, key) -> Ctap2:
    return Ctap2(usb.ctap(key["usbip"]["busid"]))


@pytest.fixture(params=sorted(PROTOCOLS))
def protocol(request):
    return PROTOCOLS[request.param]


# ---- clientPIN ---------------------------------------------------------------------------


def test_set_pin_tokens_and_change_pin(ctap, protocol):
    info = fresh_info(ctap)
    assert info.options.get("clientPin") is False, "clientPin is false before setPIN"
    assert list(info.pin_uv_protocols) == [2, 1]
    assert info.options.get("pinUvAuthToken") is True
    client_pin = ClientPin(ctap, protocol())
    with pytest.raises(CtapError) as not_set:
        client_pin.get_pin_token(PIN, P.MAKE_CREDENTIAL, rp.RP_ID)
    assert not_set.value.code == ERR.PIN_NOT_SET

    client_pin.set_pin(PIN)
    assert fresh_info(ctap).options.get("clientPin") is True
    assert client_pin.get_pin_retries() == (8, False)
    assert ctap_error(lambda: client_pin.set_pin("5678")) == ERR.PIN_AUTH_INVALID, "a set PIN is changed, not set"

    token = client_pin.get_pin_token(PIN, P.MAKE_CREDENTIAL, rp.RP_ID)
    auth_data = make_credential(ctap, client_pin, token)
    assert auth_data.is_user_verified() and auth_data.is_user_present()
    token = client_pin.get_pin_token(PIN, P.GET_ASSERTION, rp.RP_ID)
    assertion, _ = get_assertion(ctap, client_pin, token)
    assert assertion.auth_data.is_user_verified()
    assert assertion.credential["id"] == auth_data.credential_data.credential_id
    # getPinToken (0x05, no permissions): mc and ga.
    legacy = client_pin.get_pin_token(PIN)
    assert make_credential(ctap, client_pin, legacy, rk=False).is_user_verified()

    client_pin.change_pin(PIN, "98765")
    assert ctap_error(lambda: client_pin.get_pin_token(PIN, P.GET_ASSERTION, rp.RP_ID)) == ERR.PIN_INVALID
    assert client_pin.get_pin_retries() == (7, False)
    client_pin.get_pin_token("98765", P.GET_ASSERTION, rp.RP_ID)
    assert client_pin.get_pin_retries() == (8, False), "a right PIN restores the retries"
    # changePIN with a wrong current PIN costs a retry too
    assert ctap_error(lambda: client_pin.change_pin("00000", "11111")) == ERR.PIN_INVALID
    assert client_pin.get_pin_retries() == (7, False)


def test_three_wrong_pins_block_until_a_replug(usb, control, key):
    name, busid = key["name"], key["usbip"]["busid"]
    ctap = Ctap2(usb.ctap(busid))
    ClientPin(ctap, PinProtocolV2()).set_pin(PIN)
    client_pin = ClientPin(ctap, PinProtocolV1())
    codes = [ctap_error(lambda: client_pin.get_pin_token("0000", P.GET_ASSERTION, rp.RP_ID)) for _ in range(3)]
    assert codes == [ERR.PIN_INVALID, ERR.PIN_INVALID, ERR.PIN_AUTH_BLOCKED]
    assert client_pin.get_pin_retries() == (5, True), "three retries spent; a power cycle is needed"
    # Blocked until a power cycle: even the right PIN is refused, and costs nothing.
    for pin_protocol in (PinProtocolV1, PinProtocolV2):
        code = ctap_error(lambda: ClientPin(ctap, pin_protocol()).get_pin_token(PIN, P.GET_ASSERTION, rp.RP_ID))
        assert code == ERR.PIN_AUTH_BLOCKED
    assert client_pin.get_pin_retries() == (5, True)

    control.post(f"/v1/keys/{name}/replug")
    wait_for(lambda: control.key(name)["usbip"]["attached"] is False, 5, "the replugged key detached")
    ctap = Ctap2(usb.ctap(busid))
    client_pin = ClientPin(ctap, PinProtocolV1())
    assert client_pin.get_pin_retries() == (5, False), "retries persist across a power cycle; the block does not"
    token = client_pin.get_pin_token(PIN, P.MAKE_CREDENTIAL, rp.RP_ID)
    assert make_credential(ctap, client_pin, token).is_user_verified()
    assert client_pin.get_pin_retries() == (8, False)


def test_token_permissions_are_enforced(ctap):
    client_pin = ClientPin(ctap, PinProtocolV2())
    client_pin.set_pin(PIN)
    made = make_credential(ctap, client_pin, client_pin.get_pin_token(PIN, P.MAKE_CREDENTIAL, rp.RP_ID))
    assert made.is_user_verified()

    ga_only = client_pin.get_pin_token(PIN, P.GET_ASSERTION, rp.RP_ID)
    with pytest.raises(CtapError) as credman:
        CredentialManagement(ctap, client_pin.protocol, ga_only).get_metadata()
    assert credman.value.code == ERR.PIN_AUTH_INVALID, "a ga token is no credentialManagement token"
    ga_only = client_pin.get_pin_token(PIN, P.GET_ASSERTION, rp.RP_ID)
    with pytest.raises(CtapError) as config:
        Config(ctap, client_pin.protocol, ga_only).toggle_always_uv()
    assert config.value.code == ERR.PIN_AUTH_INVALID, "a ga token is no authenticatorConfig token"
    ga_only = client_pin.get_pin_token(PIN, P.GET_ASSERTION, rp.RP_ID)
    assert ctap_error(lambda: make_credential(ctap, client_pin, ga_only)) == ERR.PIN_AUTH_INVALID

    mc_only = client_pin.get_pin_token(PIN, P.MAKE_CREDENTIAL, rp.RP_ID)
    assert ctap_error(lambda: get_assertion(ctap, client_pin, mc_only)) == ERR.PIN_AUTH_INVALID
    # A token bound to one RP ID is refused for another.
    other = client_pin.get_pin_token(PIN, P.MAKE_CREDENTIAL, OTHER_RP)
    assert ctap_error(lambda: make_credential(ctap, client_pin, other)) == ERR.PIN_AUTH_INVALID
    # The legacy getPinToken grants mc and ga only.
    legacy = client_pin.get_pin_token(PIN)
    with pytest.raises(CtapError) as legacy_credman:
        CredentialManagement(ctap, client_pin.protocol, legacy).get_metadata()
    assert legacy_credman.value.code == ERR.PIN_AUTH_INVALID
    # mc and ga need a permissions RP ID.
    code = ctap_error(lambda: client_pin.get_pin_token(PIN, P.GET_ASSERTION))
    assert code == ERR.INVALID_PARAMETER
    # A token of one protocol does not authenticate under the other.
    cm_v2 = client_pin.get_pin_token(PIN, P.CREDENTIAL_MGMT)
    with pytest.raises(CtapError) as wrong_protocol:
        CredentialManagement(ctap, PinProtocolV1(), cm_v2).get_metadata()
    assert wrong_protocol.value.code == ERR.PIN_AUTH_INVALID

    # And the right permission works.
    cm = client_pin.get_pin_token(PIN, P.CREDENTIAL_MGMT)
    metadata = CredentialManagement(ctap, client_pin.protocol, cm).get_metadata()
    assert metadata[RM.EXISTING_CRED_COUNT] == 1


def start_daemon(state_dir, log_path):
    """A latchkeyd of this test's own on `state_dir` (kept across restarts): (process, control, port)."""
    binary = daemon_binary()
    if not binary.exists():
        pytest.fail(f"no latchkeyd at {binary}: build it with swift build (or set LATCHKEYD)")
    port = free_port()
    owned_directory(state_dir.parent, 0o750)
    socket_path = state_dir / "control.sock"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            as_daemon_account([binary, "--state-dir", state_dir, "--no-uhid", "--usbip", f"{HOST}:{port}",
                               "--presence", "auto", "--control-socket", socket_path]),
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    control = ControlClient(str(socket_path))
    try:
        wait_for(lambda: process.poll() is None and control.get("/v1/keys/default")["usbip"]["busid"], 20,
                 "latchkeyd's default key on USB/IP")
    except AssertionError:
        stop_daemon(process)
        raise AssertionError(f"latchkeyd did not come up; its log:\n{log_path.read_text(errors='replace')}")
    return process, control, port


def stop_daemon(process) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        assert process.wait(timeout=10) == 0, f"latchkeyd exited with {process.returncode} on SIGTERM"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)
        pytest.fail("latchkeyd did not stop within 10 s of SIGTERM")


def test_pin_retries_survive_a_daemon_restart(tmp_path):
    state_dir = tmp_path / "state"
    log_path = tmp_path / "latchkeyd.log"
    retries = []
    for run in range(2):
        process, control, port = start_daemon(state_dir, log_path)
        opened = Opened(port, strict=True)
        try:
            ctap = Ctap2(opened.ctap(control.get("/v1/keys/default")["usbip"]["busid"]))
            client_pin = ClientPin(ctap, PinProtocolV2())
            if run == 0:
                client_pin.set_pin(PIN)
                for _ in range(2):
                    assert ctap_error(lambda: client_pin.get_pin_token("0000", P.GET_ASSERTION, rp.RP_ID)) \
                        == ERR.PIN_INVALID
            retries.append(client_pin.get_pin_retries())
            if run == 1:
                client_pin.get_pin_token(PIN, P.GET_ASSERTION, rp.RP_ID)
                retries.append(client_pin.get_pin_retries())
        finally:
            problems = opened.close_and_check()
            stop_daemon(process)
        assert not problems, problems
    assert retries == [(6, False), (6, False), (8, False)], "retries persist; the PIN still works after a restart"


def test_fido2_client_with_pin_and_uv_required(usb, key):
    device = usb.ctap(key["usbip"]["busid"])
    ClientPin(Ctap2(device), PinProtocolV2()).set_pin(PIN)
    user = PinUser(PIN)
    client = rp.make_client(device, user)
    server = rp.make_server()
    person = rp.new_user()
    options, state = server.register_begin(person, resident_key_requirement=ResidentKeyRequirement.REQUIRED,
                                           user_verification=UserVerificationRequirement.REQUIRED)
    registration = server.register_complete(state, client.make_credential(options.public_key))
    assert registration.is_user_verified() and registration.is_user_present()

    options, state = server.authenticate_begin(None, user_verification=UserVerificationRequirement.REQUIRED)
    selection = client.get_assertion(options.public_key)
    response = selection.get_response(0)
    server.authenticate_complete(state, [registration.credential_data], response)
    assert response.response.authenticator_data.is_user_verified()
    assert response.response.user_handle == person.id
    assert user.pin_requests == 2

    # A wrong PIN from the user is the key's PIN_INVALID, through the client.
    client = rp.make_client(device, PinUser("0000"))
    options, state = server.authenticate_begin(None, user_verification=UserVerificationRequirement.REQUIRED)
    with pytest.raises(ClientError) as wrong:
        client.get_assertion(options.public_key)
    assert getattr(wrong.value.cause, "code", None) == ERR.PIN_INVALID, repr(wrong.value)


# ---- credentialManagement -----------------------------------------------------------------


def test_credential_management(ctap, control, key, protocol):
    client_pin = ClientPin(ctap, protocol())
    client_pin.set_pin(PIN)
    users = [rp.new_user() for _ in range(3)]
    made = {}
    for rp_id, user in ((rp.RP_ID, users[0]), (rp.RP_ID, users[1]), (OTHER_RP, users[2])):
        token = client_pin.get_pin_token(PIN, P.MAKE_CREDENTIAL, rp_id)
        made[user.id] = make_credential(ctap, client_pin, token, rp_id=rp_id, user=user).credential_data
    token = client_pin.get_pin_token(PIN, P.MAKE_CREDENTIAL, rp.RP_ID)
    make_credential(ctap, client_pin, token, rk=False)  # not stored: never listed

    token = client_pin.get_pin_token(PIN, P.CREDENTIAL_MGMT)
    credman = CredentialManagement(ctap, client_pin.protocol, token)
    info = fresh_info(ctap)
    metadata = credman.get_metadata()
    assert metadata[RM.EXISTING_CRED_COUNT] == 3
    assert metadata[RM.MAX_REMAINING_COUNT] == info.remaining_disc_creds, (metadata, info.remaining_disc_creds)

    rps = credman.enumerate_rps()
    assert sorted(r[RM.RP]["id"] for r in rps) == sorted([rp.RP_ID, OTHER_RP])
    for r in rps:
        assert r[RM.RP_ID_HASH] == sha256(r[RM.RP]["id"].encode())
    assert rps[0][RM.TOTAL_RPS] == 2

    creds = credman.enumerate_creds(sha256(rp.RP_ID.encode()))
    assert len(creds) == 2 and creds[0][RM.TOTAL_CREDENTIALS] == 2
    assert {c[RM.USER]["id"] for c in creds} == {users[0].id, users[1].id}
    for c in creds:
        stored = made[c[RM.USER]["id"]]
        assert c[RM.CREDENTIAL_ID]["id"] == stored.credential_id
        assert dict(c[RM.PUBLIC_KEY]) == dict(stored.public_key), "the enumerated public key is the credential's"
        assert c[RM.USER]["name"] in (users[0].name, users[1].name)
    assert len(credman.enumerate_creds(sha256(OTHER_RP.encode()))) == 1
    assert credman.enumerate_creds(sha256(b"nobody.example")) == []

    # delete the first user's credential
    gone = made[users[0].id].credential_id
    credman.delete_cred({"id": gone, "type": "public-key"})
    assert credman.get_metadata()[RM.EXISTING_CRED_COUNT] == 2
    assert [c[RM.USER]["id"] for c in credman.enumerate_creds(sha256(rp.RP_ID.encode()))] == [users[1].id]
    assert ctap_error(lambda: credman.delete_cred({"id": gone, "type": "public-key"})) == ERR.NO_CREDENTIALS
    assert len(control.get(f"/v1/keys/{key['name']}/credentials")) == 2

    # update the second user's name and display name
    kept = made[users[1].id].credential_id
    renamed = PublicKeyCredentialUserEntity(id=users[1].id, name="renamed@example.com", display_name="Renamed")
    credman.update_user_info({"id": kept, "type": "public-key"}, renamed)
    listed = credman.enumerate_creds(sha256(rp.RP_ID.encode()))
    assert listed[0][RM.USER] == {"id": users[1].id, "name": "renamed@example.com", "displayName": "Renamed"}
    with pytest.raises(CtapError) as other_user:
        credman.update_user_info({"id": kept, "type": "public-key"},
                                 PublicKeyCredentialUserEntity(id=b"someone else", name="x"))
    assert other_user.value.code == ERR.INVALID_PARAMETER, "the user id cannot change"

    # The one account left: a user-verified assertion carries its handle alone (CTAP 2.1 §6.2.2).
    assertion, _ = get_assertion(ctap, client_pin, client_pin.get_pin_token(PIN, P.GET_ASSERTION, rp.RP_ID))
    assert assertion.credential["id"] == kept and assertion.number_of_credentials in (None, 1)
    assert assertion.user == {"id": users[1].id}
    # The deleted credential no longer signs.
    code = ctap_error(lambda: get_assertion(ctap, None, None, allow=[{"type": "public-key", "id": gone}]))
    assert code == ERR.NO_CREDENTIALS


def test_credential_management_prototype_command(ctap):
    """0x41 (authenticatorCredentialManagement of FIDO_2_1_PRE) answers as 0x0A does."""
    client_pin = ClientPin(ctap, PinProtocolV1())
    client_pin.set_pin(PIN)
    make_credential(ctap, client_pin, client_pin.get_pin_token(PIN, P.MAKE_CREDENTIAL, rp.RP_ID))
    token = client_pin.get_pin_token(PIN, P.CREDENTIAL_MGMT)
    sub = CredentialManagement.CMD.GET_CREDS_METADATA
    param = client_pin.protocol.authenticate(token, struct.pack(">B", sub))
    for command in (Ctap2.CMD.CREDENTIAL_MGMT, Ctap2.CMD.CREDENTIAL_MGMT_PRE):
        metadata = ctap.send_cbor(command, args(sub, None, client_pin.protocol.VERSION, param))
        assert metadata[RM.EXISTING_CRED_COUNT] == 1, (hex(command), metadata)
    # without a pinUvAuthParam: PUAT_REQUIRED on both
    for command in (Ctap2.CMD.CREDENTIAL_MGMT, Ctap2.CMD.CREDENTIAL_MGMT_PRE):
        assert ctap_error(lambda: ctap.send_cbor(command, args(sub))) == ERR.PUAT_REQUIRED


# ---- authenticatorConfig --------------------------------------------------------------------


def test_toggle_always_uv(usb, key, protocol):
    device = usb.ctap(key["usbip"]["busid"])
    ctap = Ctap2(device)
    client_pin = ClientPin(ctap, protocol())
    client_pin.set_pin(PIN)
    info = fresh_info(ctap)
    assert "U2F_V2" in info.versions and info.options.get("alwaysUv") is False
    assert Ctap1(device).get_version() == "U2F_V2"

    Config(ctap, client_pin.protocol, client_pin.get_pin_token(PIN, P.AUTHENTICATOR_CFG)).toggle_always_uv()
    info = fresh_info(ctap)
    assert info.options.get("alwaysUv") is True
    assert info.options.get("makeCredUvNotRqd") is False
    assert "U2F_V2" not in info.versions, f"U2F cannot verify the user: versions {info.versions}"
    with pytest.raises(ApduError) as u2f:
        Ctap1(device).get_version()
    assert u2f.value.code == 0x6D00, "SW_INS_NOT_SUPPORTED"
    # Without a token neither a credential nor an assertion, even a non-discoverable one.
    assert ctap_error(lambda: make_credential(ctap, None, None, rk=False)) == ERR.PUAT_REQUIRED
    made = make_credential(ctap, client_pin, client_pin.get_pin_token(PIN, P.MAKE_CREDENTIAL, rp.RP_ID), rk=False)
    allow = [{"type": "public-key", "id": made.credential_data.credential_id}]
    assert ctap_error(lambda: get_assertion(ctap, None, None, allow=allow)) == ERR.PUAT_REQUIRED
    assertion, _ = get_assertion(ctap, client_pin, client_pin.get_pin_token(PIN, P.GET_ASSERTION, rp.RP_ID),
                                 allow=allow)
    assert assertion.auth_data.is_user_verified()
    # A client that sees alwaysUv asks for the PIN even when the RP discourages UV.
    user = PinUser(PIN)
    client = rp.make_client(device, user)
    server = rp.make_server()
    reg = rp.register(client, server, resident_key=False)
    assert reg.user_verified and user.pin_requests == 1
    # Config itself now needs a token, and the toggle turns it off again.
    with pytest.raises(CtapError) as no_token:
        Config(ctap).toggle_always_uv()
    assert no_token.value.code == ERR.PUAT_REQUIRED
    Config(ctap, client_pin.protocol, client_pin.get_pin_token(PIN, P.AUTHENTICATOR_CFG)).toggle_always_uv()
    info = fresh_info(ctap)
    assert info.options.get("alwaysUv") is False and "U2F_V2" in info.versions
    assert Ctap1(device).get_version() == "U2F_V2"
    assert not make_credential(ctap, None, None, rk=False).is_user_verified()


def test_set_min_pin_length_and_force_a_pin_change(ctap, protocol):
    client_pin = ClientPin(ctap, protocol())
    client_pin.set_pin(PIN)
    assert fresh_info(ctap).min_pin_length == 4
    config = Config(ctap, client_pin.protocol, client_pin.get_pin_token(PIN, P.AUTHENTICATOR_CFG))
    config.set_min_pin_length(6, force_change_pin=True)
    info = fresh_info(ctap)
    assert info.min_pin_length == 6 and info.force_pin_change is True

    code = ctap_error(lambda: client_pin.get_pin_token(PIN, P.GET_ASSERTION, rp.RP_ID))
    assert code == ERR.PIN_POLICY_VIOLATION, "the PIN is right but must be changed first"
    assert client_pin.get_pin_retries() == (8, False), "a right PIN costs no retry"
    assert ctap_error(lambda: client_pin.get_pin_token(PIN)) == ERR.PIN_INVALID, "getPinToken (CTAP 2.0)"
    assert ctap_error(lambda: client_pin.get_pin_token("9999", P.GET_ASSERTION, rp.RP_ID)) == ERR.PIN_INVALID
    assert ctap_error(lambda: client_pin.change_pin(PIN, "12345")) == ERR.PIN_POLICY_VIOLATION, "5 < 6"

    client_pin.change_pin(PIN, "123456")
    assert fresh_info(ctap).force_pin_change is False
    token = client_pin.get_pin_token("123456", P.MAKE_CREDENTIAL, rp.RP_ID)
    assert make_credential(ctap, client_pin, token).is_user_verified()
    # The minimum never decreases.
    config = Config(ctap, client_pin.protocol, client_pin.get_pin_token("123456", P.AUTHENTICATOR_CFG))
    assert ctap_error(lambda: config.set_min_pin_length(4)) == ERR.PIN_POLICY_VIOLATION
    assert fresh_info(ctap).min_pin_length == 6


def test_config_without_a_pin_and_unknown_subcommands(ctap):
    # An unprotected key is configured without a token (a minimum before the PIN is set).
    Config(ctap).set_min_pin_length(5)
    assert fresh_info(ctap).min_pin_length == 5
    client_pin = ClientPin(ctap, PinProtocolV2())
    assert ctap_error(lambda: client_pin.set_pin("1234")) == ERR.PIN_POLICY_VIOLATION
    client_pin.set_pin("12345")
    # enableEnterpriseAttestation (0x01) and vendorPrototype (0xff) are not offered
    for sub in (0x01, 0xFF):
        code = ctap_error(lambda: ctap.send_cbor(Ctap2.CMD.CONFIG, args(sub)))
        assert code == ERR.INVALID_SUBCOMMAND, hex(sub)
