"""python-fido2's CTAPHID transport over our own USB/IP client.

``open_ctap_device(host, port, busid)`` imports the device, enumerates it the
way a host's USB core and usbhid would (device and configuration descriptors,
strings, SET_CONFIGURATION, SET_IDLE, the HID report descriptor, which must be
the FIDO usage page 0xF1D0), keeps interrupt-IN URBs outstanding, and returns
a ``fido2.hid.CtapHidDevice``: python-fido2's own CTAPHID code (INIT, framing,
KEEPALIVE, CANCEL, busy retries) then runs over USB/IP.

Several ``CtapHidDevice`` may share one import (``UsbipHidInterface.ctap_device()``),
each on its own CTAPHID channel. A hidraw node hands every input report to every
reader; python-fido2 rejects a report for another channel, so here each report
goes to the connection that wrote on its channel (a broadcast INIT answer to the
one whose nonce it echoes). Reports nobody claims are kept in ``stray_reports``.
"""

from __future__ import annotations

import dataclasses
import errno
import queue
import struct
import threading

from fido2.hid import CtapHidDevice
from fido2.hid.base import CtapHidConnection, HidDescriptor, parse_report_descriptor

import usbip_client as usbip

REPORT_SIZE = 64
BROADCAST_CID = b"\xff\xff\xff\xff"
CTAPHID_INIT = 0x86  # TYPE_INIT | CTAPHID_INIT
FIDO_USAGE_PAGE = 0xF1D0


@dataclasses.dataclass
class Enumeration:
    """What a host learnt about the device while enumerating it."""

    device_descriptor: bytes
    configuration: bytes  # the whole GET_DESCRIPTOR(CONFIGURATION) bundle
    hid_descriptor: bytes
    endpoints: dict[int, bytes]  # bEndpointAddress -> endpoint descriptor
    interface: bytes
    languages: list[int]
    manufacturer: str | None
    product: str | None
    serial: str | None
    set_idle_status: int  # 0, or the URB status (a stall is allowed, as usbhid allows it)
    report_descriptor: bytes
    report_sizes: tuple[int, int]  # (input, output) from the report descriptor

    @property
    def vid(self) -> int:
        return struct.unpack_from("<H", self.device_descriptor, 8)[0]

    @property
    def pid(self) -> int:
        return struct.unpack_from("<H", self.device_descriptor, 10)[0]


def enumerate_fido_device(dev: usbip.AttachedDevice) -> Enumeration:
    """Enumerates `dev` like a host and checks it is a FIDO HID device; raises
    ``AssertionError`` with the offending bytes otherwise."""
    desc = dev.get_descriptor(usbip.DT_DEVICE, 0, 18)
    assert len(desc) == 18 and desc[0] == 18 and desc[1] == usbip.DT_DEVICE, f"device descriptor {desc.hex()}"
    vid, pid = struct.unpack_from("<HH", desc, 8)
    assert (vid, pid) == (dev.record.id_vendor, dev.record.id_product), \
        f"descriptor ids {vid:04x}:{pid:04x} differ from the USB/IP record"
    assert desc[17] == dev.record.num_configurations >= 1, f"bNumConfigurations {desc[17]}"
    assert desc[7] in (8, 16, 32, 64), f"bMaxPacketSize0 {desc[7]}"

    head = dev.get_descriptor(usbip.DT_CONFIGURATION, 0, 9)
    assert len(head) == 9 and head[1] == usbip.DT_CONFIGURATION, f"configuration descriptor {head.hex()}"
    (total,) = struct.unpack_from("<H", head, 2)
    config = dev.get_descriptor(usbip.DT_CONFIGURATION, 0, total)
    assert len(config) == total and config[:9] == head, f"configuration bundle {config.hex()}"
    items = usbip.parse_descriptors(config)
    interfaces = [d for t, d in items if t == usbip.DT_INTERFACE]
    hids = [d for t, d in items if t == usbip.DT_HID]
    endpoints = {d[2]: d for t, d in items if t == usbip.DT_ENDPOINT}
    assert len(interfaces) == config[4] == 1, f"interfaces in {config.hex()}"
    interface = interfaces[0]
    assert interface[5] == 3, f"interface class {interface[5]} is not HID"
    assert len(hids) == 1 and len(hids[0]) >= 9 and hids[0][6] == usbip.DT_REPORT, f"HID descriptor in {config.hex()}"
    (report_length,) = struct.unpack_from("<H", hids[0], 7)
    for address in (0x81, 0x01):
        ep = endpoints.get(address)
        assert ep is not None and ep[3] & 0x03 == 0x03, f"no interrupt endpoint 0x{address:02x} in {config.hex()}"
        assert struct.unpack_from("<H", ep, 4)[0] == REPORT_SIZE, f"endpoint {ep.hex()} is not 64 bytes"

    langs_raw = dev.get_descriptor(usbip.DT_STRING, 0, 255)
    assert len(langs_raw) >= 4 and langs_raw[1] == usbip.DT_STRING, f"string descriptor 0 {langs_raw.hex()}"
    languages = [struct.unpack_from("<H", langs_raw, i)[0] for i in range(2, len(langs_raw) - 1, 2)]
    strings = [dev.get_string(i, languages[0]) if i else None for i in desc[14:17]]

    dev.set_configuration(config[5])
    try:
        dev.set_idle(0, 0, interface[2])
        set_idle_status = 0
    except usbip.URBError as e:
        assert e.status == -errno.EPIPE, f"SET_IDLE failed with {e.status}, a device may only stall it"
        set_idle_status = e.status

    report = dev.get_report_descriptor(report_length, interface[2])
    assert len(report) == report_length, f"report descriptor has {len(report)} of {report_length} bytes"
    assert report[:3] == b"\x06\xd0\xf1", f"report descriptor {report.hex()} is not usage page 0xF1D0"
    sizes = parse_report_descriptor(report)  # raises ValueError unless FIDO page and usage 1
    assert sizes == (REPORT_SIZE, REPORT_SIZE), f"report sizes {sizes}"
    return Enumeration(
        device_descriptor=desc, configuration=config, hid_descriptor=hids[0], endpoints=endpoints,
        interface=interface, languages=languages, manufacturer=strings[0], product=strings[1],
        serial=strings[2], set_idle_status=set_idle_status, report_descriptor=report, report_sizes=sizes,
    )


class UsbipCtapHidConnection(CtapHidConnection):
    """One reader/writer of an imported FIDO HID device (what an open hidraw fd is)."""

    def __init__(self, interface: "UsbipHidInterface", read_timeout: float):
        self._interface = interface
        self._reports: "queue.Queue[bytes | BaseException]" = queue.Queue()
        self.read_timeout = read_timeout
        self.channels: set[bytes] = set()
        self.init_nonces: set[bytes] = set()
        self.closed = False

    def write_packet(self, data: bytes) -> None:
        if self.closed:
            raise OSError(errno.EBADF, "connection closed")
        data = bytes(data)
        if len(data) != REPORT_SIZE:
            raise ValueError(f"a CTAPHID packet has {REPORT_SIZE} bytes, not {len(data)}")
        with self._interface.lock:
            self.channels.add(data[:4])
            if data[:4] == BROADCAST_CID and data[4] == CTAPHID_INIT:
                self.init_nonces.add(data[7:15])
        self._interface.device.interrupt_out(data)

    def read_packet(self) -> bytes:
        if self.closed:
            raise OSError(errno.EBADF, "connection closed")
        try:
            item = self._reports.get(timeout=self.read_timeout)
        except queue.Empty:
            raise TimeoutError(f"no CTAPHID packet in {self.read_timeout} s") from None
        if isinstance(item, BaseException):
            self._reports.put(item)
            raise item
        return item

    def _deliver(self, item: bytes | BaseException) -> None:
        self._reports.put(item)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._interface._connection_closed(self)


class UsbipHidInterface:
    """An imported, enumerated FIDO HID device and the connections opened on it."""

    def __init__(self, host: str, port: int, busid: str, *, timeout: float = 5.0,
                 input_depth: int = 2, close_with_last_connection: bool = True):
        self.host, self.port, self.busid = host, port, busid
        self.device = usbip.import_device(host, port, busid, timeout)
        self.lock = threading.Lock()
        self.connections: list[UsbipCtapHidConnection] = []
        self.stray_reports: list[bytes] = []
        self.close_with_last_connection = close_with_last_connection
        try:
            self.enumeration = enumerate_fido_device(self.device)
            self.device.start_input(input_depth, handler=self._route)
        except BaseException:
            self.device.close()
            raise

    @property
    def descriptor(self) -> HidDescriptor:
        e = self.enumeration
        return HidDescriptor(
            f"usbip://{self.host}:{self.port}/{self.busid}", e.vid, e.pid,
            e.report_sizes[0], e.report_sizes[1], e.product, e.serial)

    def open_connection(self, read_timeout: float = 30.0) -> UsbipCtapHidConnection:
        connection = UsbipCtapHidConnection(self, read_timeout)
        with self.lock:
            self.connections.append(connection)
        return connection

    def ctap_device(self, read_timeout: float = 30.0) -> CtapHidDevice:
        """A python-fido2 device on its own connection (and, after its INIT, its own channel)."""
        connection = self.open_connection(read_timeout)
        try:
            return CtapHidDevice(self.descriptor, connection)
        except BaseException:
            connection.close()
            raise

    def _route(self, item: bytes | BaseException) -> None:
        with self.lock:
            connections = list(self.connections)
            if isinstance(item, BaseException):
                targets = connections
            else:
                cid = item[:4]
                targets = [c for c in connections if cid in c.channels]
                if cid == BROADCAST_CID and item[4] == CTAPHID_INIT:
                    targets = [c for c in targets if item[7:15] in c.init_nonces]
                    for c in targets:
                        c.init_nonces.discard(item[7:15])
                if not targets:
                    self.stray_reports.append(item)
        for c in targets:
            c._deliver(item)

    def _connection_closed(self, connection: UsbipCtapHidConnection) -> None:
        with self.lock:
            if connection in self.connections:
                self.connections.remove(connection)
            last = not self.connections
        if last and self.close_with_last_connection:
            self.close()

    def close(self) -> None:
        with self.lock:
            connections = list(self.connections)
            self.connections.clear()
        for c in connections:
            c.closed = True
        self.device.close()


def open_ctap_device(host: str, port: int, busid: str, *, timeout: float = 5.0,
                     read_timeout: float = 30.0) -> CtapHidDevice:
    """Imports and enumerates `busid`, and returns python-fido2's CtapHidDevice on it; its
    ``close()`` ends the import."""
    interface = UsbipHidInterface(host, port, busid, timeout=timeout)
    try:
        return interface.ctap_device(read_timeout)
    except BaseException:
        interface.close()
        raise
