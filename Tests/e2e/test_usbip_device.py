"""latchkeyd's USB/IP server as a host sees it: the device list, the descriptors, one
import per device, URB unlinking, and keys appearing and disappearing through the API."""

from __future__ import annotations

import dataclasses
import errno
import struct
import time

import pytest
from fido2.ctap2 import Ctap2

import ctaphid_raw as raw
import rp
import usbip_client as usbip
import usbip_hid
from conftest import HOST, wait_for


def status_busids(control) -> dict[str, str]:
    """busid -> key name, for every key the daemon exports."""
    keys = control.get("/v1/status")["keys"]
    return {k["usbip"]["busid"]: k["name"] for k in keys if k.get("usbip")}


def test_devlist_shows_one_busid_per_key(daemon, control, make_key):
    made = [make_key(), make_key(), make_key()]
    devices = usbip.list_devices(HOST, daemon.port)
    busids = [d.busid for d in devices]
    assert len(busids) == len(set(busids)), f"duplicate bus ids {busids}"
    expected = status_busids(control)
    assert set(busids) == set(expected), f"devlist {busids}, keys {expected}"
    for k in made:
        assert expected[k["usbip"]["busid"]] == k["name"]
    for d in devices:
        assert d.interfaces == ((3, 0, 0),), f"{d.busid}: interfaces {d.interfaces}"
        assert d.num_interfaces == 1 and d.num_configurations == 1 and d.configuration_value == 1
        assert d.speed == 2, f"{d.busid}: speed {usbip.SPEED_NAMES.get(d.speed)}"
        assert (d.device_class, d.device_subclass, d.device_protocol) == (0, 0, 0)
        assert d.path and d.busnum <= 0xFFFF and d.devnum <= 0xFFFF
    assert len({d.devid for d in devices}) == len(devices), "two devices share a devid"
    for k in made:
        listen = k["usbip"]["listen"]
        assert listen.endswith(f":{daemon.port}"), f"listen {listen!r}"


def test_descriptors_as_a_host_sees_them(usb, key):
    busid = key["usbip"]["busid"]
    [listed] = [d for d in usbip.list_devices(HOST, usb.port) if d.busid == busid]
    iface = usb.interface(busid)
    dev = iface.device
    # OP_REP_IMPORT carries the same record as the list, without interfaces.
    assert dev.record == dataclasses.replace(listed, interfaces=())

    e = iface.enumeration
    d = e.device_descriptor
    bcd_usb, = struct.unpack_from("<H", d, 2)
    assert bcd_usb in (0x0110, 0x0200), f"bcdUSB {bcd_usb:04x}"
    assert d[4:7] == b"\0\0\0", "class is defined per interface"
    assert (e.vid, e.pid) == (listed.id_vendor, listed.id_product)
    assert struct.unpack_from("<H", d, 12)[0] == listed.bcd_device
    assert e.interface[4] == 2 and e.interface[5:8] == b"\x03\x00\x00", \
        f"interface {e.interface.hex()}: HID, no boot protocol, two endpoints"
    assert e.endpoints[0x81][3] == 0x03 and e.endpoints[0x01][3] == 0x03
    assert e.languages == [0x0409]
    assert e.manufacturer and e.product and e.serial, (e.manufacturer, e.product, e.serial)
    assert e.hid_descriptor[2:4] in (b"\x11\x01", b"\x10\x01"), f"bcdHID {e.hid_descriptor.hex()}"
    assert e.set_idle_status == 0 or e.set_idle_status == -errno.EPIPE
    assert dev.get_configuration() == 1
    # A descriptor the device does not have stalls, as on a real bus, and nothing breaks.
    with pytest.raises(usbip.URBError) as stall:
        dev.get_descriptor(usbip.DT_STRING, 0x77, 255, 0x0409)
    assert stall.value.status == -errno.EPIPE
    assert dev.get_descriptor(usbip.DT_DEVICE, 0, 18) == d
    # A short read gets the first bytes, as hosts rely on (Linux asks for 8 or 64 first).
    assert dev.get_descriptor(usbip.DT_DEVICE, 0, 8) == d[:8]
    assert dev.get_descriptor(usbip.DT_DEVICE, 0, 64) == d

    ctap = iface.ctap_device()
    info = Ctap2(ctap).get_info()
    assert info.aaguid.hex() == key["aaguid"].replace("-", "").lower()


def test_a_device_is_imported_once_at_a_time(usb, control, key):
    busid = key["usbip"]["busid"]
    first = usb.attach(busid)
    wait_for(lambda: control.key(key["name"])["usbip"]["attached"], 5, "usbip.attached after the import")
    with pytest.raises(usbip.ImportRefused) as refused:
        usbip.import_device(HOST, usb.port, busid)
    assert refused.value.status == 2, "a second import of an attached device is refused as busy"
    # The first import keeps working.
    usbip_hid.enumerate_fido_device(first)
    first.close()
    wait_for(lambda: not control.key(key["name"])["usbip"]["attached"], 5, "usbip.attached false after detach")
    usb.ctap(busid).ping(b"again")


def test_unknown_busid_is_refused(usb):
    with pytest.raises(usbip.ImportRefused) as refused:
        usbip.import_device(HOST, usb.port, "31-31")
    assert refused.value.status == 1


def test_unlinked_in_urb_never_completes_and_the_next_one_gets_the_report(usb, key):
    dev = usb.attach(key["usbip"]["busid"])
    usbip_hid.enumerate_fido_device(dev)
    held = [dev.submit(dev.INTERRUPT_IN, usbip.DIR_IN, 64, what="held IN") for _ in range(3)]
    time.sleep(0.1)
    assert not any(u.done for u in held), "an IN URB completed with no report to send"
    assert dev.unlink(held[1]) == -errno.ECONNRESET
    assert held[1].unlinked
    # Unlinking a URB that has completed (a control transfer) answers 0 or -ENOENT.
    control_urb = dev.submit(0, usbip.DIR_IN, 18, setup=usbip.SetupPacket(0x80, 6, 0x0100, 0, 18))
    control_urb.wait(5)
    assert dev.unlink(control_urb) in (0, -errno.ENOENT)
    # Reports go to the held URBs oldest first, skipping the unlinked one; a RET_SUBMIT for
    # it would fail the connection (the client checks).
    host = raw.HostChannels(dev)
    nonce = b"12345678"
    dev.interrupt_out(raw.packets(raw.BROADCAST, raw.INIT, nonce)[0])
    report = held[0].wait(5)
    assert report[:7] == b"\xff\xff\xff\xff\x86\x00\x11" and report[7:15] == nonce
    assert not held[2].done
    cid = struct.unpack_from(">I", report, 15)[0]
    dev.interrupt_out(raw.packets(cid, raw.PING, b"p")[0])
    assert held[2].wait(5)[:8] == struct.pack(">IBH", cid, 0x81, 1) + b"p"
    dev.start_input(2)
    assert host.call(cid, raw.PING, b"still in step") == (raw.PING, b"still in step")
    assert dev.failure is None


def test_short_in_urb_is_not_given_half_a_report(usb, key):
    dev = usb.attach(key["usbip"]["busid"])
    usbip_hid.enumerate_fido_device(dev)
    with pytest.raises(usbip.URBError) as short:
        dev.submit(dev.INTERRUPT_IN, usbip.DIR_IN, 32).wait(5)
    assert short.value.status == -errno.EOVERFLOW
    dev.start_input(1)
    host = raw.HostChannels(dev)
    cid = host.open_channel()
    assert host.call(cid, raw.PING, b"x" * 100) == (raw.PING, b"x" * 100)


def test_created_key_appears_in_devlist_and_deleted_key_disappears(daemon, control, make_key):
    doc = make_key()
    name, busid = doc["name"], doc["usbip"]["busid"]
    assert doc["usbip"]["attached"] is False
    assert doc["presence"] == "auto" and doc["credentials"] == 0
    assert len(doc["aaguid"]) == 32 and int(doc["aaguid"], 16) >= 0
    assert busid in {d.busid for d in usbip.list_devices(HOST, daemon.port)}
    assert control.key(name) == doc
    assert name in [k["name"] for k in control.get("/v1/keys")]

    control.delete(f"/v1/keys/{name}")
    assert busid not in {d.busid for d in usbip.list_devices(HOST, daemon.port)}
    with pytest.raises(usbip.ImportRefused) as refused:
        usbip.import_device(HOST, daemon.port, busid)
    assert refused.value.status == 1
    assert control.get(f"/v1/keys/{name}", expect=404)["error"]["code"] == "not_found"
    control.delete(f"/v1/keys/{name}", expect=404)
    assert name not in [k["name"] for k in control.get("/v1/keys")]


def test_deleting_an_attached_key_ends_its_usbip_connection(usb, control, make_key):
    doc = make_key()
    dev = usb.interface(doc["usbip"]["busid"]).ctap_device()
    assert dev.ping(b"before") == b"before"
    control.delete(f"/v1/keys/{doc['name']}")
    iface = usb.interfaces[-1]
    wait_for(lambda: iface.device.closed, 5, "the server to close the connection of a deleted key")
    with pytest.raises(usbip.USBIPError):
        dev.ping(b"after")


def test_import_on_a_connection_opened_before_another_host_took_the_device(usb, key):
    """A host may connect, then send OP_REQ_IMPORT later; whether the device is free is
    decided when the import arrives, and a refusal is an OP_REP_IMPORT with status 2
    (busy), never a silently closed connection."""
    busid = key["usbip"]["busid"]
    early = usbip.connect(HOST, usb.port)
    try:
        time.sleep(0.1)  # the server has accepted it
        usb.attach(busid)
        with pytest.raises(usbip.ImportRefused) as refused:
            usbip.import_device(HOST, usb.port, busid, sock=early)
        assert refused.value.status == 2
    finally:
        early.close()


def test_connection_opened_before_a_key_was_created_sees_it(daemon, make_key):
    """The device list and imports reflect the exports when the request arrives."""
    early_list, early_import = usbip.connect(HOST, daemon.port), usbip.connect(HOST, daemon.port)
    try:
        time.sleep(0.1)
        busid = make_key()["usbip"]["busid"]
        assert busid in {d.busid for d in usbip.list_devices(HOST, daemon.port, sock=early_list)}
        dev = usbip.import_device(HOST, daemon.port, busid, sock=early_import)
        try:
            usbip_hid.enumerate_fido_device(dev)
        finally:
            dev.close()
    finally:
        early_list.close()
        early_import.close()


def test_connection_opened_before_a_key_was_deleted_is_refused_cleanly(daemon, control, make_key):
    doc = make_key()
    early_list, early_import = usbip.connect(HOST, daemon.port), usbip.connect(HOST, daemon.port)
    try:
        time.sleep(0.1)
        control.delete(f"/v1/keys/{doc['name']}")
        busid = doc["usbip"]["busid"]
        assert busid not in {d.busid for d in usbip.list_devices(HOST, daemon.port, sock=early_list)}
        with pytest.raises(usbip.ImportRefused) as refused:
            usbip.import_device(HOST, daemon.port, busid, sock=early_import)
        assert refused.value.status == 1
    finally:
        early_list.close()
        early_import.close()


def test_replug_drops_the_host_and_keeps_the_credentials(usb, control, key):
    name, busid = key["name"], key["usbip"]["busid"]
    iface = usb.interface(busid)
    client = rp.make_client(iface.ctap_device())
    server = rp.make_server()
    reg = rp.register(client, server, resident_key=True)
    doc = control.post(f"/v1/keys/{name}/replug")
    assert doc["name"] == name and doc["usbip"]["busid"] == busid
    assert doc["uhid"] == key["uhid"], "a key without a uhid device has none to destroy on replug"
    wait_for(lambda: iface.device.closed, 5, "the replugged key's USB/IP connection to close")
    wait_for(lambda: control.key(name)["usbip"]["attached"] is False, 5, "usbip.attached false after replug")
    assert busid in {d.busid for d in usbip.list_devices(HOST, usb.port)}
    client = rp.make_client(usb.ctap(busid))
    found = rp.authenticate(client, server, [reg.credential], allow=False)
    assert found.credential_id == reg.credential.credential_id
