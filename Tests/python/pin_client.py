#!/usr/bin/env python3
"""python-fido2 (PyPI `fido2`, 2.x) as the platform for latchkey's clientPIN,
over stdio: a cross-check of PIN/UV auth protocols One and Two against a client
that shares no code with latchkey.

Driven by the Swift test `CTAPTests/PythonPinClientTests`. Each CTAPHID_CBOR
request goes out on stdout as one line `CALL <hex of command byte + CBOR>`; the
test answers on stdin with one line, the hex of the authenticator's response
(status byte first). Everything else printed is a log line. Ends with
`DONE <n> checks` and exit status 0, or a traceback and a non-zero status.

With `ClientPin` (`fido2.ctap2.pin`) and `PinProtocolV1`/`PinProtocolV2` it sets
a PIN, gets tokens with and without permissions, makes and asserts credentials
with them (checking the UV flag and the user's names), changes the PIN and
checks retries and wrong PINs; then `Fido2Client` with user verification
required registers and authenticates through `Fido2Server`, which insists on UV.
"""

import sys

from fido2.client import DefaultClientDataCollector, Fido2Client, UserInteraction
from fido2.ctap import CtapDevice, CtapError
from fido2.ctap2 import Ctap2
from fido2.ctap2.pin import ClientPin, PinProtocolV1, PinProtocolV2
from fido2.hid import CAPABILITY, CTAPHID
from fido2.server import Fido2Server
from fido2.utils import sha256
from fido2.webauthn import (
    PublicKeyCredentialRpEntity,
    PublicKeyCredentialUserEntity,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

ORIGIN = "https://example.com"
RP_ID = "example.com"
checks = 0


def check(condition, what):
    global checks
    if not condition:
        raise AssertionError(what)
    checks += 1


def expect_error(code, what, call):
    try:
        call()
    except CtapError as error:
        check(error.code == code, f"{what}: expected {code!r}, got {error.code!r}")
        return
    raise AssertionError(f"{what}: succeeded, expected {code!r}")


class StdioDevice(CtapDevice):
    """A CTAP2 device whose every CTAPHID_CBOR message goes to the Swift test."""

    @property
    def capabilities(self):
        return CAPABILITY.CBOR

    def call(self, cmd, data=b"", event=None, on_keepalive=None):
        assert cmd == CTAPHID.CBOR, f"only CTAPHID_CBOR goes to the test, not {cmd:#x}"
        sys.stdout.write("CALL " + bytes(data).hex() + "\n")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            raise EOFError("the test closed the channel")
        return bytes.fromhex(line.strip())

    @classmethod
    def list_devices(cls):
        return iter(())


class PinInteraction(UserInteraction):
    def __init__(self, pin):
        self.pin = pin
        self.pin_requests = 0

    def prompt_up(self):
        pass

    def request_pin(self, permissions, rp_id):
        self.pin_requests += 1
        return self.pin

    def request_uv(self, permissions, rp_id):
        return True


def make_credential(ctap, client_pin, token, *, rk, user_id, name):
    client_data_hash = sha256(b"make " + user_id)
    response = ctap.make_credential(
        client_data_hash,
        {"id": RP_ID, "name": "Example"},
        {"id": user_id, "name": name, "displayName": name.title()},
        [{"type": "public-key", "alg": -7}],
        options={"rk": rk},
        pin_uv_param=client_pin.protocol.authenticate(token, client_data_hash),
        pin_uv_protocol=client_pin.protocol.VERSION,
    )
    return response.auth_data


def main():
    device = StdioDevice()
    ctap = Ctap2(device)
    info = ctap.info
    check(info.options.get("clientPin") is False, f"clientPin is {info.options.get('clientPin')!r} before setPIN")
    check(info.options.get("pinUvAuthToken") is True, "pinUvAuthToken advertised")
    check(list(info.pin_uv_protocols) == [2, 1], f"pinUvAuthProtocols {info.pin_uv_protocols}")
    check(info.min_pin_length == 4, f"minPINLength {info.min_pin_length}")
    check(info.force_pin_change is False, "forcePINChange false")

    ClientPin(ctap, PinProtocolV1()).set_pin("1234")
    check(ctap.get_info().options.get("clientPin") is True, "clientPin true after setPIN")
    check(ClientPin(ctap, PinProtocolV2()).get_pin_retries() == (8, False), "8 retries, no power cycle")

    mc = ClientPin.PERMISSION.MAKE_CREDENTIAL
    ga = ClientPin.PERMISSION.GET_ASSERTION
    for protocol in (PinProtocolV1, PinProtocolV2):
        client_pin = ClientPin(ctap, protocol())
        version = protocol.VERSION
        token = client_pin.get_pin_token("1234", mc, RP_ID)
        auth_data = make_credential(ctap, client_pin, token, rk=True, user_id=bytes([version]),
                                    name=f"user{version}")
        check(auth_data.is_user_present() and auth_data.is_user_verified(), f"v{version} mc: UP and UV")

        token = client_pin.get_pin_token("1234", ga, RP_ID)
        client_data_hash = sha256(b"get")
        assertion = ctap.get_assertion(
            RP_ID, client_data_hash, options={"up": True},
            pin_uv_param=client_pin.protocol.authenticate(token, client_data_hash),
            pin_uv_protocol=version)
        check(assertion.auth_data.is_user_verified(), f"v{version} ga: UV")
        # CTAP 2.1 §6.2.2: one account (protocol 1's turn) gets the user handle alone, even
        # after UV; with several (protocol 2's turn adds one) the verified user is named for
        # the account chooser, newest first.
        expected = {"id": bytes([version])}
        if version == 2:
            expected.update(name="user2", displayName="User2")
        check(assertion.user == expected, f"v{version} ga: user {assertion.user}, expected {expected}")

        # getPinToken (0x05): mc and ga for any RP, no permissions sent.
        legacy = client_pin.get_pin_token("1234")
        auth_data = make_credential(ctap, client_pin, legacy, rk=False, user_id=b"legacy", name="legacy")
        check(auth_data.is_user_verified(), f"v{version} legacy token: UV")

        expect_error(CtapError.ERR.PIN_INVALID, f"v{version} wrong PIN",
                     lambda: client_pin.get_pin_token("0000", mc, RP_ID))
        check(client_pin.get_pin_retries()[0] == 7, f"v{version}: one retry spent")
        client_pin.get_pin_token("1234", mc, RP_ID)
        check(client_pin.get_pin_retries()[0] == 8, f"v{version}: retries restored")

    ClientPin(ctap, PinProtocolV2()).change_pin("1234", "98765")
    expect_error(CtapError.ERR.PIN_INVALID, "old PIN after changePIN",
                 lambda: ClientPin(ctap, PinProtocolV1()).get_pin_token("1234", mc, RP_ID))
    ClientPin(ctap, PinProtocolV1()).get_pin_token("98765", mc, RP_ID)
    checks_before = checks

    # A browser-like client that requires user verification; the server checks UV.
    interaction = PinInteraction("98765")
    client = Fido2Client(device, client_data_collector=DefaultClientDataCollector(ORIGIN),
                         user_interaction=interaction)
    server = Fido2Server(PublicKeyCredentialRpEntity(name="Example", id=RP_ID))
    user = PublicKeyCredentialUserEntity(id=b"fido2client", name="carol", display_name="Carol")
    options, state = server.register_begin(
        user, resident_key_requirement=ResidentKeyRequirement.REQUIRED,
        user_verification=UserVerificationRequirement.REQUIRED)
    registration = server.register_complete(state, client.make_credential(options.public_key))
    check(registration.is_user_verified(), "Fido2Client registration: UV")
    options, state = server.authenticate_begin(None, user_verification=UserVerificationRequirement.REQUIRED)
    selection = client.get_assertion(options.public_key)
    responses = [selection.get_response(i) for i in range(len(selection.get_assertions()))]
    mine = [r for r in responses if r.response.user_handle == b"fido2client"]
    check(len(mine) == 1, "the usernameless get offers carol's credential")
    server.authenticate_complete(state, [registration.credential_data], mine[0])
    check(interaction.pin_requests == 2, f"the client asked for the PIN twice, not {interaction.pin_requests}")
    check(checks > checks_before, "Fido2Client checks ran")

    sys.stdout.write(f"DONE {checks} checks\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
