"""Hosts that vanish: a TCP connection dropped in the middle of a CTAPHID message, or
while a request waits for a person. The daemon forgets that connection's state and
serves the next one at once."""

from __future__ import annotations

import os

from fido2 import cbor

import ctaphid_raw as raw
import rp
from conftest import wait_for


def make_credential_request() -> bytes:
    return bytes([0x01]) + cbor.encode({
        1: os.urandom(32), 2: {"id": rp.RP_ID, "name": "Example"},
        3: {"id": os.urandom(16), "name": "vanishing", "displayName": "Vanishing User"},
        4: [{"type": "public-key", "alg": -7}], 7: {"rk": True}})


def wait_detached(control, name):
    wait_for(lambda: control.key(name)["usbip"]["attached"] is False, 5,
             "the daemon to notice the connection is gone (usbip.attached false)")


def assert_serves_at_once(usb, control, key):
    """A new import is served at once: its first request is answered, not ERR_CHANNEL_BUSY."""
    host = usb.channels(key["usbip"]["busid"])
    cid = host.open_channel()
    assert host.call(cid, raw.PING, b"first") == (raw.PING, b"first")
    cmd, response = host.call(cid, raw.CBOR, make_credential_request(), timeout=10)
    assert cmd == raw.CBOR and response[0] == 0, f"makeCredential answered {response[:1].hex()}"
    host.dev.close()
    wait_detached(control, key["name"])
    client = rp.make_client(usb.ctap(key["usbip"]["busid"]))
    server = rp.make_server()
    reg = rp.register(client, server, resident_key=True)
    rp.authenticate(client, server, [reg.credential], allow=False)


def test_client_vanishes_mid_message(usb, control, key):
    host = usb.channels(key["usbip"]["busid"])
    assert control.key(key["name"])["usbip"]["attached"] is True
    cid = host.open_channel()
    packets = raw.packets(cid, raw.CBOR, make_credential_request())
    assert len(packets) >= 3
    host.dev.interrupt_out(packets[0])  # the first packet only
    host.dev.close()  # and the TCP connection is gone
    wait_detached(control, key["name"])
    assert_serves_at_once(usb, control, key)
    assert control.key(key["name"])["credentials"] == 2


def test_client_vanishes_with_in_urbs_outstanding_and_reports_queued(usb, control, key):
    host = usb.channels(key["usbip"]["busid"])
    cid = host.open_channel()
    host.dev.stop_input()
    # Answers the host will never read: they wait in the device's queue.
    for i in range(5):
        host.send(cid, raw.PING, os.urandom(200))
    host.dev.submit(host.dev.INTERRUPT_IN, 1, 64)
    host.dev.close()
    wait_detached(control, key["name"])
    assert_serves_at_once(usb, control, key)


def test_client_vanishes_while_presence_is_pending(usb, control, key):
    name = key["name"]
    control.put(f"/v1/keys/{name}/presence", {"mode": "prompt", "timeoutSeconds": 20})
    host = usb.channels(key["usbip"]["busid"])
    cid = host.open_channel()
    host.send(cid, raw.CBOR, make_credential_request())
    wait_for(lambda: control.pending(name), 5, "the pending presence request")
    host.wait_keepalive(cid, 2)  # STATUS_UPNEEDED
    host.read_for(1.0)
    times = host.keepalive_times[cid]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert len(times) >= 6 and max(gaps) < 0.5, \
        f"KEEPALIVE every 100 ms while waiting (clients give up after ~2 s); gaps {gaps}"
    host.dev.close()
    wait_for(lambda: not control.pending(name), 5, "the abandoned request to leave /v1/presence/pending")
    wait_detached(control, name)
    assert control.key(name)["credentials"] == 0, "an abandoned makeCredential made a credential"
    control.put(f"/v1/keys/{name}/presence", {"mode": "auto"})
    assert_serves_at_once(usb, control, key)
