#!/usr/bin/env python3
"""python-fido2 against one latchkey key through the guest kernel's hidraw node.

    fido2_checks.py --device /dev/hidrawN [--aaguid HEX] [--label uhid]

Runs inside the rig guest (see guest-checks.sh), one process per device because
importing fido2 costs about 2 s under TCG. Every check prints one line on stdout,
    PASS<TAB>name            or    FAIL<TAB>name<TAB>why
which guest-checks.sh numbers into its `ok N - name` lines; details go to stderr.
A check whose prerequisite failed fails too, saying so. Exit status 0 when every
check passed.

The checks: CtapHidDevice.list_devices() finds the node (hidraw enumeration and the
report descriptor through the kernel), CTAP2 getInfo, a Fido2Client registration
and an assertion with allowCredentials (origin https://example.com), a discoverable
registration and a usernameless assertion, each verified by Fido2Server, one
registration and assertion per credential algorithm the key offers and this
python-fido2 can verify (an RP that accepts only that algorithm), and U2F
register/authenticate through fido2.ctap1.Ctap1.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

from fido2.client import DefaultClientDataCollector, Fido2Client, UserInteraction
from fido2.cose import ES256, CoseKey
from fido2.ctap1 import Ctap1
from fido2.ctap2 import Ctap2
from fido2.hid import CtapHidDevice
from fido2.webauthn import (
    AuthenticatorAttachment,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from checks import RESULTS, check, log
import rp

ORIGIN = "https://example.com"
RP_ID = "example.com"


class AutoUser(UserInteraction):
    """A user who touches the key when asked and has no PIN (the key has none)."""

    def prompt_up(self) -> None:
        pass

    def request_pin(self, permissions, rp_id):
        raise AssertionError("the client asked for a PIN; the key has none and none is needed")

    def request_uv(self, permissions, rp_id) -> bool:
        return True


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", required=True, help="the key's hidraw node")
    ap.add_argument("--aaguid", help="the AAGUID the control API reports (hex)")
    ap.add_argument("--label", default="", help="prefix of every check name (uhid, usbip)")
    args = ap.parse_args()
    p = f"{args.label}: " if args.label else ""
    state: dict = {}

    @check(f"{p}python-fido2 CtapHidDevice.list_devices() finds {args.device}")
    def _():
        found = None
        for dev in CtapHidDevice.list_devices():
            d = dev.descriptor
            log(f"list_devices: {d.path} vid={d.vid:04x} pid={d.pid:04x} product={d.product_name!r} "
                f"serial={d.serial_number!r} ctaphid v{dev.version} caps={dev.capabilities:#x}")
            if d.path == args.device:
                found = dev
            else:
                dev.close()
        assert found is not None, f"{args.device} is not among the FIDO devices python-fido2 lists"
        state["dev"] = found
        echo = os.urandom(300)  # several CTAPHID packets each way
        assert found.ping(echo) == echo, "CTAPHID PING did not echo"
        return f"vid={found.descriptor.vid:04x} pid={found.descriptor.pid:04x}, 300-byte PING echoed"

    @check(f"{p}python-fido2 CTAP2 getInfo (FIDO_2_0, U2F_V2, aaguid)", f"{p}python-fido2 CtapHidDevice.list_devices() finds {args.device}")
    def _():
        info = Ctap2(state["dev"]).get_info()
        log(f"getInfo: versions={info.versions} aaguid={bytes(info.aaguid).hex()} options={dict(info.options)} "
            f"algorithms={[a.get('alg') for a in (info.algorithms or [])]}")
        assert "FIDO_2_0" in info.versions and "U2F_V2" in info.versions, f"versions {info.versions}"
        if args.aaguid:
            assert bytes(info.aaguid).hex() == args.aaguid.lower().replace("-", ""), \
                f"aaguid {bytes(info.aaguid).hex()} != control API {args.aaguid}"

    dev_ok = f"{p}python-fido2 CTAP2 getInfo (FIDO_2_0, U2F_V2, aaguid)"

    @check(f"{p}Fido2Client make_credential (ES256, direct attestation) verified by Fido2Server", dev_ok)
    def _():
        client = Fido2Client(state["dev"], client_data_collector=DefaultClientDataCollector(ORIGIN),
                             user_interaction=AutoUser())
        state["client"] = client
        server = rp.make_server(RP_ID)
        server.allowed_algorithms = [a for a in server.allowed_algorithms if a.alg == ES256.ALGORITHM]
        options, reg_state = server.register_begin(
            rp.new_user(), resident_key_requirement=ResidentKeyRequirement.DISCOURAGED,
            user_verification=UserVerificationRequirement.DISCOURAGED,
            authenticator_attachment=AuthenticatorAttachment.CROSS_PLATFORM)
        response = client.make_credential(options.public_key)
        auth_data = server.register_complete(reg_state, response)
        fmt = response.response.attestation_object.fmt
        assert auth_data.credential_data is not None and auth_data.is_user_present()
        state["server"], state["cred"], state["count"] = server, auth_data.credential_data, auth_data.counter
        return f"fmt={fmt}, credential id {len(auth_data.credential_data.credential_id)} bytes"

    @check(f"{p}Fido2Client get_assertion (allowCredentials) verified by Fido2Server",
           f"{p}Fido2Client make_credential (ES256, direct attestation) verified by Fido2Server")
    def _():
        server = state["server"]
        options, auth_state = server.authenticate_begin(
            [state["cred"]], user_verification=UserVerificationRequirement.DISCOURAGED)
        selection = state["client"].get_assertion(options.public_key)
        response = selection.get_response(0)
        cred = server.authenticate_complete(auth_state, [state["cred"]], response)
        assert cred.credential_id == state["cred"].credential_id
        count = response.response.authenticator_data.counter
        assert count > state["count"], f"sign count {count} did not grow past {state['count']}"
        return f"sign count {count}"

    @check(f"{p}Fido2Client discoverable make_credential + usernameless get_assertion", dev_ok)
    def _():
        client = state["client"]
        server = rp.make_server(RP_ID)
        user = rp.new_user("resident")
        options, reg_state = server.register_begin(
            user, resident_key_requirement=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.DISCOURAGED)
        auth_data = server.register_complete(reg_state, client.make_credential(options.public_key))
        options, auth_state = server.authenticate_begin(
            None, user_verification=UserVerificationRequirement.DISCOURAGED)
        selection = client.get_assertion(options.public_key)
        responses = [selection.get_response(i) for i in range(len(selection.get_assertions()))]
        ours = [r for r in responses if r.response.user_handle == user.id]
        assert ours, f"no assertion names user {user.id.hex()} among {len(responses)}"
        server.authenticate_complete(auth_state, [auth_data.credential_data], ours[0])
        return f"{len(responses)} discoverable assertion(s) for {RP_ID}"

    def one_algorithm(alg: int):
        def run():
            server = rp.make_server(RP_ID)
            server.allowed_algorithms = [a for a in server.allowed_algorithms if a.alg == alg]
            options, reg_state = server.register_begin(
                rp.new_user(f"alg{-alg}"), resident_key_requirement=ResidentKeyRequirement.DISCOURAGED,
                user_verification=UserVerificationRequirement.DISCOURAGED)
            assert [p["alg"] for p in dict(options)["publicKey"]["pubKeyCredParams"]] == [alg]
            credential = server.register_complete(
                reg_state, state["client"].make_credential(options.public_key)).credential_data
            assert credential.public_key.ALGORITHM == alg, f"the credential's key is {credential.public_key!r}"
            options, auth_state = server.authenticate_begin(
                [credential], user_verification=UserVerificationRequirement.DISCOURAGED)
            selection = state["client"].get_assertion(options.public_key)
            server.authenticate_complete(auth_state, [credential], selection.get_response(0))
            return f"{type(credential.public_key).__name__} key, {len(bytes(credential.credential_id))}-byte ID"
        return run

    try:
        offered = [a.get("alg") for a in (Ctap2(state["dev"]).info.algorithms or [])]
    except Exception:  # noqa: BLE001 - the getInfo check above has said why
        offered = []
    for alg in offered:
        if alg == ES256.ALGORITHM or alg not in CoseKey.supported_algorithms():
            continue  # ES256 is above; the rest need a python-fido2 that verifies them
        check(f"{p}Fido2Client make_credential + get_assertion with {CoseKey.for_alg(alg).__name__} ({alg}) only, "
              f"verified by Fido2Server", f"{p}Fido2Client make_credential (ES256, direct attestation) verified by Fido2Server"
              )(one_algorithm(alg))

    @check(f"{p}U2F (Ctap1) version + register, attestation verified", dev_ok)
    def _():
        ctap1 = Ctap1(state["dev"])
        assert ctap1.get_version() == "U2F_V2"
        app_param = hashlib.sha256(RP_ID.encode()).digest()
        client_param = os.urandom(32)
        registration = ctap1.register(client_param, app_param)
        registration.verify(app_param, client_param)  # fido-u2f attestation signature
        state["u2f"] = (ctap1, app_param, registration)
        return f"key handle {len(registration.key_handle)} bytes"

    @check(f"{p}U2F (Ctap1) authenticate twice, signatures verified, counter grows",
           f"{p}U2F (Ctap1) version + register, attestation verified")
    def _():
        ctap1, app_param, registration = state["u2f"]
        counters = []
        for _ in range(2):
            challenge = os.urandom(32)
            signature = ctap1.authenticate(challenge, app_param, registration.key_handle)
            signature.verify(app_param, challenge, registration.public_key)
            assert signature.user_presence & 0x01, "user presence bit not set"
            counters.append(signature.counter)
        assert counters[1] > counters[0], f"counters {counters}"
        return f"counters {counters}"

    dev = state.get("dev")
    if dev is not None:
        dev.close()
    return 0 if all(RESULTS.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
