#!/usr/bin/env python3
"""python-fido2 (PyPI `fido2`, 2.x) as the platform for latchkey's
credentialManagement and authenticatorConfig, over stdio: a cross-check against
a client that shares no code with latchkey.

Driven by the Swift test `CTAPTests/PythonPinClientTests`, over the same stdio
exchange as pin_client.py (whose StdioDevice it uses): each request goes out as
`CALL <hex>`, the answer comes back as one hex line. Ends with
`DONE <n> checks` and exit status 0, or a traceback and a non-zero status.

For PIN/UV auth protocol One, then Two, python-fido2's own classes run:
`CredentialManagement` (getCredsMetadata, enumerateRPs, enumerateCredentials,
deleteCredential, updateUserInformation, and the FIDO_2_1_PRE command 0x41 for
metadata), `Config` (toggleAlwaysUv on and off, with getInfo, U2F-less versions
and the PUAT_REQUIRED it brings), and last `Config.set_min_pin_length` with
force_change_pin, after which a token needs a changePIN first.
"""

import struct
import sys

from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2
from fido2.ctap2.base import args
from fido2.ctap2.config import Config
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2
from fido2.utils import sha256
from fido2.webauthn import PublicKeyCredentialUserEntity

from pin_client import StdioDevice, check, expect_error
import pin_client

RP_ID = "example.com"
OTHER_RP = "other.example"
P = ClientPin.PERMISSION
RM = CredentialManagement.RESULT
ERR = CtapError.ERR


def make_credential(ctap, client_pin, token, rp_id, user_id, name, rk=True):
    client_data_hash = sha256(b"make " + user_id)
    kwargs = {}
    if token is not None:
        kwargs = {"pin_uv_param": client_pin.protocol.authenticate(token, client_data_hash),
                  "pin_uv_protocol": client_pin.protocol.VERSION}
    return ctap.make_credential(
        client_data_hash, {"id": rp_id, "name": rp_id},
        {"id": user_id, "name": name, "displayName": name.title()},
        [{"type": "public-key", "alg": -7}], options={"rk": rk}, **kwargs).auth_data


def refresh(ctap):
    ctap._info = ctap.get_info()  # Ctap2.info caches the first getInfo
    return ctap._info


def credential_management(ctap, protocol, pin):
    version = protocol.VERSION
    client_pin = ClientPin(ctap, protocol())
    users = {}
    for rp_id, tag in ((RP_ID, b"a"), (RP_ID, b"b"), (OTHER_RP, b"c")):
        user_id = bytes([version]) + tag
        token = client_pin.get_pin_token(pin, P.MAKE_CREDENTIAL, rp_id)
        auth_data = make_credential(ctap, client_pin, token, rp_id, user_id, f"user{version}{tag.decode()}")
        users[user_id] = auth_data.credential_data

    token = client_pin.get_pin_token(pin, P.CREDENTIAL_MGMT)
    credman = CredentialManagement(ctap, client_pin.protocol, token)
    metadata = credman.get_metadata()
    check(metadata[RM.EXISTING_CRED_COUNT] == 3, f"v{version} metadata: {metadata}")
    check(metadata[RM.MAX_REMAINING_COUNT] == refresh(ctap).remaining_disc_creds,
          f"v{version} maxPossibleRemainingResidentCredentialsCount {metadata}")
    # the prototype command 0x41 answers the same
    sub = CredentialManagement.CMD.GET_CREDS_METADATA
    param = client_pin.protocol.authenticate(token, struct.pack(">B", sub))
    prototype = ctap.send_cbor(Ctap2.CMD.CREDENTIAL_MGMT_PRE, args(sub, None, version, param))
    check(dict(prototype) == dict(metadata), f"v{version} 0x41 metadata {prototype} != {metadata}")

    rps = credman.enumerate_rps()
    check(sorted(r[RM.RP]["id"] for r in rps) == [RP_ID, OTHER_RP], f"v{version} RPs {rps}")
    check(all(r[RM.RP_ID_HASH] == sha256(r[RM.RP]["id"].encode()) for r in rps), f"v{version} rpIDHash")
    creds = credman.enumerate_creds(sha256(RP_ID.encode()))
    ids = {c[RM.USER]["id"] for c in creds}
    check(ids == {bytes([version]) + b"a", bytes([version]) + b"b"}, f"v{version} users {ids}")
    for c in creds:
        stored = users[c[RM.USER]["id"]]
        check(c[RM.CREDENTIAL_ID]["id"] == stored.credential_id, f"v{version} credential id")
        check(dict(c[RM.PUBLIC_KEY]) == dict(stored.public_key), f"v{version} public key")

    gone = users[bytes([version]) + b"a"].credential_id
    credman.delete_cred({"id": gone, "type": "public-key"})
    check(credman.get_metadata()[RM.EXISTING_CRED_COUNT] == 2, f"v{version} count after delete")
    expect_error(ERR.NO_CREDENTIALS, f"v{version} deleting twice",
                 lambda: credman.delete_cred({"id": gone, "type": "public-key"}))

    kept_user = bytes([version]) + b"b"
    kept = users[kept_user].credential_id
    credman.update_user_info({"id": kept, "type": "public-key"},
                             PublicKeyCredentialUserEntity(id=kept_user, name=f"new{version}",
                                                           display_name=f"New {version}"))
    listed = credman.enumerate_creds(sha256(RP_ID.encode()))
    check([c[RM.USER] for c in listed] == [{"id": kept_user, "name": f"new{version}",
                                            "displayName": f"New {version}"}],
          f"v{version} after updateUserInformation: {listed}")
    token = client_pin.get_pin_token(pin, P.GET_ASSERTION, RP_ID)
    client_data_hash = sha256(b"get")
    assertion = ctap.get_assertion(RP_ID, client_data_hash,
                                   pin_uv_param=client_pin.protocol.authenticate(token, client_data_hash),
                                   pin_uv_protocol=version)
    # One account left: the user handle alone, even after UV (CTAP 2.1 §6.2.2).
    check(assertion.user == {"id": kept_user}, f"v{version} assertion's user {assertion.user}")

    # a token without the cm permission is refused
    ga = client_pin.get_pin_token(pin, P.GET_ASSERTION, RP_ID)
    expect_error(ERR.PIN_AUTH_INVALID, f"v{version} credman with a ga token",
                 lambda: CredentialManagement(ctap, client_pin.protocol, ga).get_metadata())

    # clean up for the next protocol: delete what is left
    token = client_pin.get_pin_token(pin, P.CREDENTIAL_MGMT)
    credman = CredentialManagement(ctap, client_pin.protocol, token)
    for r in credman.enumerate_rps():
        for c in credman.enumerate_creds(r[RM.RP_ID_HASH]):
            credman.delete_cred(c[RM.CREDENTIAL_ID])
    check(credman.get_metadata()[RM.EXISTING_CRED_COUNT] == 0, f"v{version} everything deleted")
    check(credman.enumerate_rps() == [], f"v{version} no RPs left")


def always_uv(ctap, protocol, pin):
    version = protocol.VERSION
    client_pin = ClientPin(ctap, protocol())
    Config(ctap, client_pin.protocol, client_pin.get_pin_token(pin, P.AUTHENTICATOR_CFG)).toggle_always_uv()
    info = refresh(ctap)
    check(info.options.get("alwaysUv") is True, f"v{version} alwaysUv on")
    check("U2F_V2" not in info.versions, f"v{version} no U2F_V2 with alwaysUv: {info.versions}")
    check(info.options.get("makeCredUvNotRqd") is False, f"v{version} makeCredUvNotRqd off")
    expect_error(ERR.PUAT_REQUIRED, f"v{version} mc without a token",
                 lambda: make_credential(ctap, None, None, RP_ID, b"x", "x", rk=False))
    token = client_pin.get_pin_token(pin, P.MAKE_CREDENTIAL, RP_ID)
    check(make_credential(ctap, client_pin, token, RP_ID, b"x", "x", rk=False).is_user_verified(),
          f"v{version} mc with a token under alwaysUv")
    expect_error(ERR.PUAT_REQUIRED, f"v{version} config without a token",
                 lambda: Config(ctap).toggle_always_uv())
    Config(ctap, client_pin.protocol, client_pin.get_pin_token(pin, P.AUTHENTICATOR_CFG)).toggle_always_uv()
    info = refresh(ctap)
    check(info.options.get("alwaysUv") is False and "U2F_V2" in info.versions, f"v{version} alwaysUv off")


def main():
    ctap = Ctap2(StdioDevice())
    check(CredentialManagement.is_supported(ctap.info), "credMgmt advertised")
    check(Config.is_supported(ctap.info), "authnrCfg advertised")
    pin = "1234"
    ClientPin(ctap, PinProtocolV2()).set_pin(pin)
    for protocol in (PinProtocolV1, PinProtocolV2):
        credential_management(ctap, protocol, pin)
        always_uv(ctap, protocol, pin)

    # setMinPINLength with forceChangePin, through protocol One; changePIN through Two.
    client_pin = ClientPin(ctap, PinProtocolV1())
    Config(ctap, client_pin.protocol, client_pin.get_pin_token(pin, P.AUTHENTICATOR_CFG)) \
        .set_min_pin_length(6, force_change_pin=True)
    info = refresh(ctap)
    check(info.min_pin_length == 6 and info.force_pin_change is True, f"minPINLength {info.min_pin_length}")
    expect_error(ERR.PIN_POLICY_VIOLATION, "token while a change is forced",
                 lambda: client_pin.get_pin_token(pin, P.GET_ASSERTION, RP_ID))
    expect_error(ERR.PIN_POLICY_VIOLATION, "a new PIN below the minimum",
                 lambda: ClientPin(ctap, PinProtocolV2()).change_pin(pin, "12345"))
    ClientPin(ctap, PinProtocolV2()).change_pin(pin, "654321")
    check(refresh(ctap).force_pin_change is False, "forcePINChange cleared by changePIN")
    ClientPin(ctap, PinProtocolV1()).get_pin_token("654321", P.GET_ASSERTION, RP_ID)

    sys.stdout.write(f"DONE {pin_client.checks} checks\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
