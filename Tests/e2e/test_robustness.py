"""Hosts that misbehave, at both layers. USB/IP: writes that arrive in pieces or
several to a segment, and hostile bytes, which close that connection only; the key
stays importable. CTAPHID and CTAP2: every command byte gets an answer and the key
keeps working."""

from __future__ import annotations

import os
import struct

import pytest
from fido2 import cbor

import ctaphid_raw as raw
import rp
import usbip_client as usbip
import usbip_hid
from conftest import HOST, wait_for


def test_urbs_written_in_pieces_and_batched_together(usb, key):
    dev = usb.attach(key["usbip"]["busid"])
    dev.write_split = 7  # every header and report crosses TCP segments
    usbip_hid.enumerate_fido_device(dev)
    dev.start_input(2)
    host = raw.HostChannels(dev)
    cid = host.open_channel()
    payload = os.urandom(150)
    assert host.call(cid, raw.PING, payload) == (raw.PING, payload)

    dev.write_split = None
    payload = os.urandom(1000)
    with dev.batched():  # 17 OUT URBs and 2 more IN URBs in one segment
        outs = [dev.submit(dev.INTERRUPT_OUT, usbip.DIR_OUT, 64, p) for p in raw.packets(cid, raw.PING, payload)]
        dev.start_input(4)
    for urb in outs:
        urb.wait(5)
        assert urb.actual_length == 64
    assert host.receive(cid) == (raw.PING, payload)


def bad_command():
    return struct.pack(">IIIII", 0xDEADBEEF, 99, 0, 0, 0) + bytes(28)


def wrong_devid(devid):
    return struct.pack(">IIIIIIiiii8s", usbip.CMD_SUBMIT, 99, devid ^ 0x00FF00FF, 1, 1, 0, 64, 0, -1, 0, bytes(8))


def huge_out(devid):
    return struct.pack(">IIIIIIiiii8s", usbip.CMD_SUBMIT, 99, devid, 0, 1, 0, 0x7FFFFFFF, 0, -1, 0, bytes(8))


def reused_seqnum(devid):
    held = struct.pack(">IIIIIIiiii8s", usbip.CMD_SUBMIT, 0x7777, devid, 1, 1, 0, 64, 0, -1, 0, bytes(8))
    return held + held


@pytest.mark.parametrize("hostile", [bad_command, wrong_devid, huge_out, reused_seqnum],
                         ids=["unknown-command", "wrong-devid", "huge-transfer", "reused-seqnum"])
def test_hostile_urb_closes_that_connection_only(usb, control, key, hostile):
    busid = key["usbip"]["busid"]
    dev = usb.attach(busid)
    usbip_hid.enumerate_fido_device(dev)
    data = hostile() if hostile is bad_command else hostile(dev.devid)
    dev.send_raw(data)
    wait_for(lambda: dev.closed, 5, f"the server to close the connection after {data[:48].hex()}")
    wait_for(lambda: control.key(key["name"])["usbip"]["attached"] is False, 5, "usbip.attached false")
    assert usb.ctap(busid).ping(b"still here") == b"still here"


@pytest.mark.parametrize("request_bytes", [
    struct.pack(">HHI", 0x0111, 0x1234, 0),  # no such operation
    struct.pack(">HHI", 0x0111, 0x8003, 0) + b"1-",  # half an OP_REQ_IMPORT, then gone
    b"\x00",
], ids=["unknown-op", "half-import", "one-byte"])
def test_hostile_handshake_leaves_the_server_serving(daemon, key, request_bytes):
    sock = usbip.connect(HOST, daemon.port)
    try:
        sock.sendall(request_bytes)
        sock.settimeout(0.5)
        try:
            reply = sock.recv(64)
        except TimeoutError:
            reply = None  # still waiting for the rest: fine, we hang up
        assert not reply, f"the server answered {reply.hex()} to {request_bytes.hex()}"
    finally:
        sock.close()
    busids = {d.busid for d in usbip.list_devices(HOST, daemon.port)}
    assert key["usbip"]["busid"] in busids
    dev = usbip.import_device(HOST, daemon.port, key["usbip"]["busid"])
    dev.close()


def test_every_ctaphid_command_byte_is_answered(usb, key):
    host = usb.channels(key["usbip"]["busid"])
    cid = host.open_channel()
    for command in range(0x80):
        if command == raw.CANCEL:
            continue  # never answered (CTAP 2.1 §11.2.9.1.5)
        host.send(cid, command, b"")
        answer, data = host.receive(cid, 5)
        assert answer in (command, raw.ERROR), f"command 0x{command:02x} answered with 0x{answer:02x}"
        if answer == raw.ERROR:
            assert len(data) == 1, f"command 0x{command:02x}: ERROR {data.hex()}"
    host.drain(0.2)
    assert not any(host.messages.values()), f"extra answers: {host.messages}"
    assert host.call(cid, raw.PING, b"alive") == (raw.PING, b"alive")


def test_every_ctap2_command_byte_gets_a_status(usb, key):
    host = usb.channels(key["usbip"]["busid"])
    cid = host.open_channel()
    for command in range(0x100):
        answer, data = host.call(cid, raw.CBOR, bytes([command]), timeout=10)
        assert answer == raw.CBOR and len(data) >= 1, f"CTAP2 command 0x{command:02x}: {answer:02x} {data.hex()}"
    answer, info = host.call(cid, raw.CBOR, b"\x04")
    assert answer == raw.CBOR and info[0] == 0 and "FIDO_2_0" in cbor.decode(info[1:])[1]


def test_libfido2_touch_probe_gets_pin_not_set(usb, key):
    """libfido2 asks for a touch with a makeCredential carrying an empty pinUvAuthParam;
    a key with no PIN answers CTAP2_ERR_PIN_NOT_SET after the touch (CTAP 2.1 §6.1.2)."""
    host = usb.channels(key["usbip"]["busid"])
    cid = host.open_channel()
    request = bytes([0x01]) + cbor.encode({
        1: os.urandom(32), 2: {"id": rp.RP_ID}, 3: {"id": b"\x01", "name": "probe"},
        4: [{"type": "public-key", "alg": -7}], 8: b""})
    answer, data = host.call(cid, raw.CBOR, request)
    assert (answer, data) == (raw.CBOR, b"\x35")


def _closed_by_peer(sock, timeout: float) -> bool:
    """Whether the server closes `sock` within `timeout` (EOF or reset)."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_connections_beyond_the_limit_are_refused_and_slots_come_back(daemon, key):
    import socket
    limit = 64
    held = [socket.create_connection((HOST, daemon.port), timeout=5) for _ in range(limit)]
    try:
        extra = socket.create_connection((HOST, daemon.port), timeout=5)
        assert _closed_by_peer(extra, 5), "the 65th connection is closed at accept"
        extra.close()
        assert "connections are open" in daemon.log_text()
        for sock in held[:4]:
            sock.close()
        # Closed slots are counted out again: the device list answers.
        wait_for(lambda: any(d.busid == key["usbip"]["busid"]
                             for d in usbip.list_devices(HOST, daemon.port, timeout=2)),
                 5, "a device list once slots are free")
    finally:
        for sock in held:
            sock.close()


def test_a_connection_that_never_imports_is_closed_after_30_s(daemon, usb, key):
    import socket
    idle = socket.create_connection((HOST, daemon.port), timeout=5)
    dev = usb.attach(key["usbip"]["busid"])  # an imported key is never timed out
    try:
        assert not _closed_by_peer(idle, 25), "closed too early"
        assert _closed_by_peer(idle, 10), "an idle connection holds its slot forever"
        usbip_hid.enumerate_fido_device(dev)
        dev.start_input(2)
        host = raw.HostChannels(dev)
        cid = host.open_channel()
        assert host.call(cid, raw.PING, b"still here") == (raw.PING, b"still here")
    finally:
        idle.close()
