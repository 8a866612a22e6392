"""Our USB/IP client and python-fido2 transport against a stand-in server
(standin_usbip.py: PyPI usbip 0.7.0 and a CTAPHID stub answering INIT, PING, WINK and
getInfo). No latchkey code runs here: these tests check the test tools."""

from __future__ import annotations

import errno
import os

import pytest
from fido2.ctap2 import Ctap2

import ctaphid_raw as raw
import usbip_client as usbip
import usbip_hid
from conftest import HOST


def test_devlist_describes_the_fido_device(standin):
    port, busid = standin
    devices = usbip.list_devices(HOST, port)
    assert [d.busid for d in devices] == [busid]
    d = devices[0]
    assert (d.id_vendor, d.id_product) == (0x1209, 0x0002)
    assert d.num_interfaces == 1 and d.interfaces == ((3, 0, 0),)
    assert d.speed == 2  # full speed


def test_import_of_an_unknown_busid_is_refused(standin):
    port, _ = standin
    with pytest.raises(usbip.ImportRefused) as refused:
        usbip.import_device(HOST, port, "9-9")
    assert refused.value.status != 0


def test_enumeration_finds_the_fido_report_descriptor(standin_usb, standin):
    iface = standin_usb.interface(standin[1])
    e = iface.enumeration
    assert e.report_sizes == (64, 64)
    assert e.product == "latchkey stand-in FIDO"
    assert iface.device.get_configuration() == 1


def test_python_fido2_ping_and_get_info(standin_usb, standin):
    dev = standin_usb.ctap(standin[1])
    payload = os.urandom(1000)  # 18 packets each way
    assert dev.ping(payload) == payload
    info = Ctap2(dev).get_info()
    assert "FIDO_2_0" in info.versions
    dev.wink()


def test_held_in_urb_can_be_unlinked_and_a_later_one_gets_the_report(standin_usb, standin):
    dev = standin_usb.attach(standin[1])
    usbip_hid.enumerate_fido_device(dev)
    held = dev.submit(dev.INTERRUPT_IN, usbip.DIR_IN, 64, what="held IN")
    status = dev.unlink(held)
    assert held.unlinked and held.done
    # The stand-in answers 0 where the spec wants -ECONNRESET (recorded as a deviation).
    assert status in (0, -errno.ECONNRESET)
    dev.start_input(1)
    host = raw.HostChannels(dev)
    cid = host.open_channel()
    assert host.call(cid, raw.PING, b"after unlink") == (raw.PING, b"after unlink")


def test_two_channels_on_one_import(standin_usb, standin):
    iface = standin_usb.interface(standin[1])
    a, b = iface.ctap_device(), iface.ctap_device()
    assert a._channel_id != b._channel_id
    assert a.ping(b"a" * 100) == b"a" * 100
    assert b.ping(b"b" * 100) == b"b" * 100
    assert a.ping(b"a") == b"a"
