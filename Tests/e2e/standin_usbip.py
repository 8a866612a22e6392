#!/usr/bin/env python3
"""A stand-in USB/IP server for test_standin.py: a full-speed USB HID device with the
FIDO usage page, served by PyPI ``usbip`` 0.7.0 (a USB/IP and USB stack written
elsewhere), answering CTAPHID INIT, PING, WINK and CBOR authenticatorGetInfo and an
error to anything else. It checks the tests' own USB/IP client and python-fido2
transport against a server that shares no code with latchkeyd. Not an authenticator.

    standin_usbip.py [--host 127.0.0.1] [--port 3240]

Prints "READY <busid>" once it listens; stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import signal
import struct
import threading

from fido2 import cbor
from usbip.classes.device import hid as usb_hid
from usbip.device import USBDevice
from usbip.transport import USBIP

import ctaphid_raw as raw

VENDOR_ID, PRODUCT_ID = 0x1209, 0x0002
PRODUCT = "latchkey stand-in FIDO"
CAPABILITIES = 0x01 | 0x04 | 0x08  # WINK, CBOR, NMSG (CTAP 2.1 §11.2.9.1.3)
GET_INFO = {1: ["FIDO_2_0"], 3: b"latchkey-standin", 4: {"rk": False, "up": True}, 5: 1200}
# CTAP 2.1 §11.2.8.1: usage page 0xF1D0, usage 0x01; 64-byte input (usage 0x20) and output
# (usage 0x21) reports, each with its own report size and count (python-fido2 reads them so)
REPORT_DESCRIPTOR = b"".join([
    usb_hid.usage_page(0xF1D0), usb_hid.usage(0x01), usb_hid.collection(0x01),
    usb_hid.usage(0x20), usb_hid.logical_min(0), usb_hid.logical_max(255), usb_hid.report_size(8),
    usb_hid.report_count(raw.REPORT_SIZE), usb_hid.input_(0x02),
    usb_hid.usage(0x21), usb_hid.logical_min(0), usb_hid.logical_max(255), usb_hid.report_size(8),
    usb_hid.report_count(raw.REPORT_SIZE), usb_hid.output(0x02),
    usb_hid.end_collection(),
])


class Responder:
    """CTAPHID on the device side: feed it output reports, it sends input reports."""

    def __init__(self, send):
        self.send = send
        self.next_channel = 1
        self.pending: tuple[int, int, int, bytearray, int] | None = None  # cid, cmd, length, data, seq
        self.lock = threading.Lock()

    def output(self, report: bytes) -> None:
        report = bytes(report)[-raw.REPORT_SIZE:]
        cid = struct.unpack_from(">I", report)[0]
        with self.lock:
            if report[4] & 0x80:
                cmd, length = report[4] & 0x7F, struct.unpack_from(">H", report, 5)[0]
                self.pending = (cid, cmd, length, bytearray(report[7:7 + length]), 0)
            elif self.pending and self.pending[0] == cid and report[4] == self.pending[4]:
                _, cmd, length, data, seq = self.pending
                data += report[5:5 + length - len(data)]
                self.pending = (cid, cmd, length, data, seq + 1)
            else:
                self.pending = None
                return self.reply(cid, raw.ERROR, bytes([raw.ERR_INVALID_SEQ]))
            _, cmd, length, data, _ = self.pending
            if len(data) >= length:
                self.pending = None
                self.answer(cid, cmd, bytes(data))

    def answer(self, cid: int, cmd: int, data: bytes) -> None:
        if cmd == raw.INIT:
            if len(data) != 8:
                return self.reply(cid, raw.ERROR, bytes([raw.ERR_INVALID_LEN]))
            channel = cid
            if cid == raw.BROADCAST:
                channel, self.next_channel = self.next_channel, self.next_channel + 1
            return self.reply(cid, raw.INIT, data + struct.pack(">IBBBBB", channel, 2, 0, 1, 0, CAPABILITIES))
        if cid in (0, raw.BROADCAST):
            return self.reply(cid, raw.ERROR, bytes([raw.ERR_INVALID_CHANNEL]))
        if cmd in (raw.PING, raw.WINK):
            return self.reply(cid, cmd, data if cmd == raw.PING else b"")
        if cmd == raw.CBOR and data[:1] == b"\x04":
            return self.reply(cid, raw.CBOR, b"\x00" + cbor.encode(GET_INFO))
        if cmd == raw.CBOR:
            return self.reply(cid, raw.CBOR, b"\x01")  # CTAP1_ERR_INVALID_COMMAND
        return self.reply(cid, raw.ERROR, bytes([raw.ERR_INVALID_CMD]))

    def reply(self, cid: int, cmd: int, payload: bytes) -> None:
        for report in raw.packets(cid, cmd, payload):
            self.send(report)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=3240)
    args = ap.parse_args()

    device = USBDevice(VENDOR_ID, PRODUCT_ID, manufacturer="latchkey tests", product=PRODUCT, serial="standin")
    hid = None
    responder = Responder(lambda report: hid.send_report(report))
    hid = usb_hid.HID(REPORT_DESCRIPTOR, in_ep=0x81, in_mps=raw.REPORT_SIZE, in_interval=5,
                      out_ep=0x01, out_mps=raw.REPORT_SIZE, out_interval=5, on_output=responder.output)
    device.add(hid)
    device.plug(via=USBIP(args.host, args.port))
    print("READY", device.busid, flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    device.unplug()


if __name__ == "__main__":
    main()
