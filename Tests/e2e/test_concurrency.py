"""Several hosts and channels at once.

USB/IP lets a device be imported by one host at a time (latchkeyd refuses a second
import as busy, see test_usbip_device), so concurrency takes two forms: several
CTAPHID channels interleaving on one import, as several programs sharing one hidraw
node do, and several keys imported on several connections. The device runs one
transaction at a time: a second channel is answered ERR_CHANNEL_BUSY or served after
the first, and no message is ever corrupted.
"""

from __future__ import annotations

import os
import threading

from fido2 import cbor
from fido2.ctap2 import Ctap2

import ctaphid_raw as raw
import rp
from conftest import wait_for


def run_threads(targets, timeout: float = 25.0):
    errors: list[BaseException] = []

    def wrap(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a client thread hung"
    if errors:
        raise errors[0]


def register_and_authenticate(device, residents, after_each=lambda: None):
    """A registration and an authentication with it for each of `residents` (a
    discoverable credential or not), on one client; `after_each` runs after each pair."""
    client = rp.make_client(device)
    server = rp.make_server()
    for resident in residents:
        reg = rp.register(client, server, resident_key=resident)
        rp.authenticate(client, server, [reg.credential], allow=True)
        after_each()


def test_second_channel_mid_message_is_busy_or_served_after(usb, key):
    host = usb.channels(key["usbip"]["busid"])
    a, b = host.open_channel(), host.open_channel()
    assert a != b
    payload_a, payload_b = os.urandom(500), os.urandom(300)
    packets_a, packets_b = raw.packets(a, raw.PING, payload_a), raw.packets(b, raw.PING, payload_b)
    # A is half sent when B sends a whole multi-packet message.
    for p in packets_a[:3]:
        host.dev.interrupt_out(p)
    for p in packets_b:
        host.dev.interrupt_out(p)
    for p in packets_a[3:]:
        host.dev.interrupt_out(p)
    assert host.receive(a) == (raw.PING, payload_a), "channel A's message was corrupted"
    cmd, data = host.receive(b)
    if cmd == raw.ERROR:
        assert data == bytes([raw.ERR_CHANNEL_BUSY]), f"B got error {data.hex()}"
        assert host.call(b, raw.PING, payload_b) == (raw.PING, payload_b)
    else:
        assert (cmd, data) == (raw.PING, payload_b), "channel B's message was corrupted"
    host.drain()
    assert not host.partial and not any(host.messages.values()), \
        f"unexpected reports: {[(hex(c), m) for c, m in host.messages.items() if m]}"


def test_other_channel_is_busy_while_a_request_waits_for_presence(usb, control, key):
    name = key["name"]
    control.put(f"/v1/keys/{name}/presence", {"mode": "prompt", "timeoutSeconds": 10})
    host = usb.channels(key["usbip"]["busid"])
    a, b = host.open_channel(), host.open_channel()
    request = bytes([0x01]) + cbor.encode({
        1: os.urandom(32), 2: {"id": rp.RP_ID, "name": "Example"},
        3: {"id": os.urandom(16), "name": "alice"}, 4: [{"type": "public-key", "alg": -7}]})
    host.send(a, raw.CBOR, request)
    wait_for(lambda: control.pending(name), 5, "the pending presence request")
    # B is told the device is busy, and may still open a channel (INIT needs no engine).
    assert host.call(b, raw.CBOR, b"\x04") == (raw.ERROR, bytes([raw.ERR_CHANNEL_BUSY]))
    c = host.open_channel()
    assert c not in (a, b)
    host.wait_keepalive(a, 2)  # STATUS_UPNEEDED, every 100 ms while the person is asked
    [pending] = control.pending(name)
    control.post(f"/v1/presence/pending/{pending['id']}/approve")
    cmd, response = host.receive(a, 10)
    assert cmd == raw.CBOR and response[0] == 0, f"makeCredential answered {response[:1].hex()}"
    cmd, info = host.call(b, raw.CBOR, b"\x04")
    assert cmd == raw.CBOR and info[0] == 0


def test_two_python_fido2_clients_share_one_import(usb, key):
    iface = usb.interface(key["usbip"]["busid"])
    first, second = iface.ctap_device(), iface.ctap_device()
    assert first._channel_id != second._channel_id

    def ceremonies():
        register_and_authenticate(first, (False, True, False))

    def pings():
        for _ in range(15):
            payload = os.urandom(1500)  # 26 packets each way
            assert second.ping(payload) == payload
            Ctap2(second).get_info()

    run_threads([ceremonies, pings])


def test_two_keys_on_two_imports_at_once(usb, make_key):
    keys = [make_key(), make_key()]
    devices = [usb.ctap(k["usbip"]["busid"]) for k in keys]

    def ceremonies(device):
        return lambda: register_and_authenticate(device, (True, False, True), lambda: device.ping(os.urandom(700)))

    run_threads([ceremonies(d) for d in devices])
    infos = [Ctap2(d).get_info() for d in devices]
    assert infos[0].aaguid.hex() == keys[0]["aaguid"] and infos[1].aaguid.hex() == keys[1]["aaguid"]
