"""Conversation state belongs to the CTAPHID channel and the USB/IP connection that began it.

Two channels on one key interleave getAssertion / getNextAssertion sequences and
credentialManagement enumerations many times (Tests/kernel/two_channels.py, the same
check the VM rig runs over hidraw): every assertion is verified and belongs to the asking
channel's sequence, every enumerated item to the asking channel's enumeration. Then the
transport: a new USB/IP connection starts its channels at the same numbers, and must not
continue the previous connection's sequence; a CTAPHID_INIT on a channel ends its own.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from fido2.ctap import CtapError
from fido2.ctap2.credman import CredentialManagement
from fido2.ctap2.pin import ClientPin, PinProtocolV2
from fido2.hid import CTAPHID, CtapHidDevice

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kernel"))

import usbip_client as usbip  # noqa: E402
from two_channels import Client, OwnChannelOnly, TwoChannels  # noqa: E402

PIN = "two-channels-1234"


def reimport(usb, busid: str, timeout: float = 5.0):
    """A new USB/IP connection to `busid`, once the server has seen the previous one end."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return usb.interface(busid)
        except usbip.ImportRefused:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def test_two_channels_interleaved_never_cross(usb, key):
    interface = usb.interface(key["usbip"]["busid"])
    # Through the script's own channel filter, as over hidraw (here nothing is left to drop).
    devices = [CtapHidDevice(interface.descriptor, OwnChannelOnly(interface.open_connection(20.0))) for _ in "AB"]
    a = Client("A", devices[0], "a.two-channels.latchkey.test")
    b = Client("B", devices[1], "b.two-channels.latchkey.test")
    assert a.channel != b.channel
    seed = int.from_bytes(os.urandom(4), "big")
    check = TwoChannels(a, b, PIN, seed=seed, log=lambda *_: None)
    problems = check.run(rounds=60)
    assert not problems, f"seed {seed}:\n" + "\n".join(problems)
    assert check.assertions == 60 * 7
    assert check.enumerated >= 60 * 4
    assert all(device._connection.dropped == 0 for device in devices)


def credential_management(client: Client) -> CredentialManagement:
    """Credential management on `client`'s channel with a fresh token (cm permission)."""
    client_pin = ClientPin(client.ctap)
    token = client_pin.get_pin_token(PIN, ClientPin.PERMISSION.CREDENTIAL_MGMT)
    return CredentialManagement(client.ctap, client_pin.protocol, token)


def expect_not_allowed(call, what: str) -> None:
    with pytest.raises(CtapError) as raised:
        result = call()
        pytest.fail(f"{what} continued another conversation: {result!r:.200}")
    assert raised.value.code == CtapError.ERR.NOT_ALLOWED, f"{what}: {raised.value.code.name}"


def test_a_new_usbip_connection_does_not_continue_the_last_ones_sequences(usb, key):
    busid = key["usbip"]["busid"]
    first = usb.interface(busid)
    a = Client("A", first.ctap_device(), "a.two-channels.latchkey.test")
    check = TwoChannels(a, a, PIN, seed=1)
    check.ensure_pin()
    check.make_credentials(a, 3)

    # A getAssertion sequence, then the connection ends (the host detaches).
    a.ctap.get_assertion(a.rp_id, os.urandom(32))
    channel = a.channel
    first.close()
    second = reimport(usb, busid)
    b = Client("B", second.ctap_device(), a.rp_id)
    assert b.channel == channel, "a new connection starts its channels where the last one did"
    expect_not_allowed(b.ctap.get_next_assertion, "getNextAssertion on a new connection")

    # The same for an enumeration.
    credman = credential_management(b)
    assert credman.enumerate_creds_begin(b.rp_id_hash)[CredentialManagement.RESULT.TOTAL_CREDENTIALS] == 3
    second.close()
    third = reimport(usb, busid)
    c = Client("C", third.ctap_device(), a.rp_id)
    assert c.channel == channel
    # GetNext carries no pinUvAuthParam: nothing but the conversation state could answer it.
    unauthenticated = CredentialManagement(c.ctap, PinProtocolV2(), bytes(32))
    expect_not_allowed(unauthenticated.enumerate_creds_next,
                       "enumerateCredentialsGetNextCredential on a new connection")
    c.credentials = a.credentials
    check.delete_credentials(c)


def test_ctaphid_init_on_a_channel_ends_its_sequence(usb, key):
    interface = usb.interface(key["usbip"]["busid"])
    a = Client("A", interface.ctap_device(), "a.two-channels.latchkey.test")
    check = TwoChannels(a, a, PIN, seed=1)
    check.ensure_pin()
    check.make_credentials(a, 2)
    a.ctap.get_assertion(a.rp_id, os.urandom(32))
    nonce = os.urandom(8)
    answer = a.device.call(CTAPHID.INIT, nonce)  # re-synchronizes the channel (CTAP 2.1 §11.2.9.1.3)
    assert answer[:8] == nonce and int.from_bytes(answer[8:12], "big") == a.channel
    expect_not_allowed(a.ctap.get_next_assertion, "getNextAssertion after INIT on the channel")
    check.delete_credentials(a)
