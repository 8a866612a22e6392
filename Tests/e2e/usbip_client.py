"""A small, strict USB/IP client for latchkey's end-to-end tests (stdlib only).

It speaks the protocol of Linux's Documentation/usb/usbip_protocol.rst from the
importing side, as vhci-hcd does:

- ``list_devices(host, port)``: OP_REQ_DEVLIST -> parsed device records,
  including each device's interfaces; the server must then close.
- ``import_device(host, port, busid)``: OP_REQ_IMPORT -> an ``AttachedDevice``
  that submits URBs on that connection: control transfers on endpoint 0,
  interrupt OUT transfers (acknowledged by their RET_SUBMIT) and interrupt IN
  transfers, of which it can keep a few outstanding while a background thread
  demultiplexes every RET_SUBMIT / RET_UNLINK by seqnum; CMD_UNLINK too.

"Strict" means: every reply is checked against what was asked (command code,
a seqnum we are waiting for, lengths, no data after an OUT reply, no ISO
descriptors for a non-ISO URB), and any violation closes the connection with a
``ProtocolError`` that every waiter sees. Things the spec says a server
"shall" do but which a host can live without (zero devid/direction/ep in
replies, zero padding) are recorded in ``AttachedDevice.deviations``, so a test
can insist on them for latchkey's own server and tolerate them elsewhere.

Every blocking call takes a timeout; the reader thread stops by itself when the
connection ends or ``close()`` shuts the socket down.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import queue
import socket
import struct
import threading
import time
from typing import Callable

USBIP_VERSION = 0x0111
OP_REQ_DEVLIST, OP_REP_DEVLIST = 0x8005, 0x0005
OP_REQ_IMPORT, OP_REP_IMPORT = 0x8003, 0x0003
CMD_SUBMIT, CMD_UNLINK, RET_SUBMIT, RET_UNLINK = 1, 2, 3, 4
DIR_OUT, DIR_IN = 0, 1
HEADER_SIZE = 48
NON_ISO = -1  # number_of_packets for a non-ISO URB (0xffffffff)

# OP_REP_DEVLIST / OP_REP_IMPORT device record: path[256], busid[32], busnum,
# devnum, speed (u32), idVendor, idProduct, bcdDevice (u16), six u8 fields.
_DEVICE_RECORD = struct.Struct(">256s32sIIIHHHBBBBBB")
assert _DEVICE_RECORD.size == 0x138

# USB standard requests (USB 2.0 §9.4) and HID class requests (HID 1.11 §7.2).
GET_STATUS, SET_CONFIGURATION, GET_CONFIGURATION, GET_DESCRIPTOR = 0x00, 0x09, 0x08, 0x06
HID_SET_IDLE, HID_GET_IDLE = 0x0A, 0x02
DT_DEVICE, DT_CONFIGURATION, DT_STRING, DT_INTERFACE, DT_ENDPOINT = 1, 2, 3, 4, 5
DT_HID, DT_REPORT = 0x21, 0x22

SPEED_NAMES = {0: "unknown", 1: "low", 2: "full", 3: "high", 4: "wireless", 5: "super", 6: "super-plus"}


class USBIPError(Exception):
    """Base class of this module's errors."""


class ProtocolError(USBIPError):
    """The peer broke the protocol; the connection is closed."""


class ImportRefused(USBIPError):
    """OP_REP_IMPORT carried a non-zero status (1: not available, 2: busy, ...)."""

    def __init__(self, busid: str, status: int):
        super().__init__(f"import of {busid!r} refused with status {status}")
        self.busid = busid
        self.status = status


class URBError(USBIPError):
    """A URB completed with a non-zero status (a negated errno, e.g. -EPIPE: stall)."""

    def __init__(self, what: str, status: int):
        name = errno.errorcode.get(-status, str(status))
        super().__init__(f"{what} failed with status {status} (-{name})")
        self.status = status


class Disconnected(USBIPError):
    """The connection ended while a URB was outstanding (or before it was sent)."""


@dataclasses.dataclass(frozen=True)
class DeviceRecord:
    """One exported device as OP_REP_DEVLIST or OP_REP_IMPORT describes it."""

    path: str
    busid: str
    busnum: int
    devnum: int
    speed: int
    id_vendor: int
    id_product: int
    bcd_device: int
    device_class: int
    device_subclass: int
    device_protocol: int
    configuration_value: int
    num_configurations: int
    num_interfaces: int
    # (bInterfaceClass, bInterfaceSubClass, bInterfaceProtocol); only OP_REP_DEVLIST has them.
    interfaces: tuple[tuple[int, int, int], ...] = ()

    @property
    def devid(self) -> int:
        return self.busnum << 16 | self.devnum


def _c_string(raw: bytes, what: str) -> str:
    """A zero-terminated, zero-padded string field."""
    end = raw.find(b"\0")
    if end < 0:
        raise ProtocolError(f"{what} is not zero-terminated")
    if any(raw[end:]):
        raise ProtocolError(f"{what} has non-zero bytes after its terminator")
    return raw[:end].decode("utf-8")


def _parse_record(raw: bytes) -> DeviceRecord:
    f = _DEVICE_RECORD.unpack(raw)
    return DeviceRecord(_c_string(f[0], "path"), _c_string(f[1], "busid"), *f[2:])


class _Stream:
    """Exact reads from a socket under a deadline."""

    def __init__(self, sock: socket.socket):
        self.sock = sock

    def read(self, n: int, what: str, deadline: float | None = None) -> bytes:
        chunks, left = [], n
        while left:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"timed out reading {what}")
                self.sock.settimeout(remaining)
            chunk = self.sock.recv(left)
            if not chunk:
                got = n - left
                raise Disconnected(f"connection closed after {got} of {n} bytes of {what}")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


# How a connection is opened: (host, port, timeout) -> socket. The e2e suite's conftest
# replaces it so that the connection is opened by the daemon's account (identities.py),
# whose keys the server exports to it.
OPEN_CONNECTION = lambda host, port, timeout: socket.create_connection((host, port), timeout=timeout)  # noqa: E731


def connect(host: str, port: int, timeout: float = 5.0) -> socket.socket:
    """A TCP connection to a USB/IP server (TCP_NODELAY), to pass as ``sock=`` later: a
    host may connect first and send its request afterwards."""
    sock = OPEN_CONNECTION(host, port, timeout)
    sock.settimeout(timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock



def _op_header(stream: _Stream, expected_code: int, deadline: float) -> int:
    version, code, status = struct.unpack(">HHI", stream.read(8, "OP_REP header", deadline))
    if version != USBIP_VERSION:
        raise ProtocolError(f"reply version 0x{version:04x}, expected 0x{USBIP_VERSION:04x}")
    if code != expected_code:
        raise ProtocolError(f"reply code 0x{code:04x}, expected 0x{expected_code:04x}")
    return status


def _expect_eof(sock: socket.socket, deadline: float, what: str) -> None:
    """The server must close after this reply and send nothing more."""
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        extra = sock.recv(1)
    except socket.timeout:
        raise ProtocolError(f"the server did not close the connection after {what}") from None
    if extra:
        raise ProtocolError(f"trailing bytes after {what}")


def list_devices(host: str, port: int, timeout: float = 5.0,
                 sock: socket.socket | None = None) -> list[DeviceRecord]:
    """OP_REQ_DEVLIST: the exported devices with their interfaces (on `sock` if given)."""
    deadline = time.monotonic() + timeout
    with sock or connect(host, port, timeout) as sock:
        sock.sendall(struct.pack(">HHI", USBIP_VERSION, OP_REQ_DEVLIST, 0))
        stream = _Stream(sock)
        status = _op_header(stream, OP_REP_DEVLIST, deadline)
        if status != 0:
            raise ProtocolError(f"OP_REP_DEVLIST status {status}")
        (count,) = struct.unpack(">I", stream.read(4, "device count", deadline))
        if count > 1024:
            raise ProtocolError(f"implausible device count {count}")
        devices = []
        for i in range(count):
            record = _parse_record(stream.read(_DEVICE_RECORD.size, f"device record {i}", deadline))
            interfaces = []
            for j in range(record.num_interfaces):
                cls, sub, proto, pad = stream.read(4, f"interface {j} of device {i}", deadline)
                if pad != 0:
                    raise ProtocolError(f"interface {j} of {record.busid}: padding byte is {pad}")
                interfaces.append((cls, sub, proto))
            devices.append(dataclasses.replace(record, interfaces=tuple(interfaces)))
        _expect_eof(sock, deadline, "OP_REP_DEVLIST")
        return devices


def import_device(host: str, port: int, busid: str, timeout: float = 5.0,
                  sock: socket.socket | None = None) -> "AttachedDevice":
    """OP_REQ_IMPORT: attaches `busid` and returns the device to submit URBs to (on `sock`
    if given, which is then the device's or closed)."""
    raw_busid = busid.encode("utf-8")
    if not 0 < len(raw_busid) < 32:
        raise ValueError("a bus id has 1 to 31 bytes")
    deadline = time.monotonic() + timeout
    sock = sock or connect(host, port, timeout)
    try:
        sock.sendall(struct.pack(">HHI32s", USBIP_VERSION, OP_REQ_IMPORT, 0, raw_busid))
        stream = _Stream(sock)
        status = _op_header(stream, OP_REP_IMPORT, deadline)
        if status != 0:
            _expect_eof(sock, deadline, "a refused OP_REP_IMPORT")
            raise ImportRefused(busid, status)
        record = _parse_record(stream.read(_DEVICE_RECORD.size, "OP_REP_IMPORT device", deadline))
        if record.busid != busid:
            raise ProtocolError(f"imported {record.busid!r}, asked for {busid!r}")
        sock.settimeout(None)
        # Blocking from here on (the reader thread waits for replies), but a send that cannot
        # make progress for 10 s fails rather than hang a test.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 10, 0))
        return AttachedDevice(sock, record, f"{host}:{port}")
    except BaseException:
        sock.close()
        raise


class URB:
    """One submitted URB; ``wait()`` returns its IN data (or b"" for OUT)."""

    def __init__(self, seqnum: int, ep: int, direction: int, length: int, what: str):
        self.seqnum = seqnum
        self.ep = ep
        self.direction = direction
        self.length = length
        self.what = what
        self.status: int | None = None
        self.actual_length = 0
        self.data = b""
        self.unlinked = False
        self.error: BaseException | None = None
        self.callback: Callable[[URB], None] | None = None
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def _complete(self) -> None:
        self._done.set()
        if self.callback is not None:
            self.callback(self)

    def wait(self, timeout: float) -> bytes:
        if not self._done.wait(timeout):
            raise TimeoutError(f"{self.what} (seqnum {self.seqnum}) not answered in {timeout} s")
        if self.error is not None:
            raise self.error
        if self.unlinked:
            raise URBError(f"{self.what} (unlinked)", -errno.ECONNRESET)
        if self.status != 0:
            raise URBError(self.what, self.status)
        return self.data


class _Unlink:
    def __init__(self, seqnum: int, target: URB):
        self.seqnum = seqnum
        self.target = target
        self.status: int | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()


@dataclasses.dataclass(frozen=True)
class SetupPacket:
    bmRequestType: int
    bRequest: int
    wValue: int
    wIndex: int
    wLength: int

    def pack(self) -> bytes:
        # The setup packet is little-endian on the wire (USB 2.0 §9.3), inside a big-endian header.
        return struct.pack("<BBHHH", self.bmRequestType, self.bRequest, self.wValue, self.wIndex, self.wLength)


class AttachedDevice:
    """An imported device: URBs on one USB/IP connection, answered in any order."""

    # Interrupt endpoints of a FIDO HID device (CTAP 2.1 §11.2.8.1 calls for 64-byte reports).
    INTERRUPT_IN = 0x81
    INTERRUPT_OUT = 0x01
    REPORT_SIZE = 64

    def __init__(self, sock: socket.socket, record: DeviceRecord, peer: str):
        self.sock = sock
        self.record = record
        self.peer = peer
        self.devid = record.devid
        self.deviations: list[str] = []
        self.stray_reports: list[bytes] = []
        self._send_lock = threading.Lock()
        self._batch: list[bytes] | None = None
        self.write_split: int | None = None
        self._lock = threading.Lock()
        self._next_seqnum = 1
        self._pending: dict[int, URB] = {}
        self._unlinks: dict[int, _Unlink] = {}
        self._unlinked_seqnums: set[int] = set()
        self._closed = False
        self._failure: BaseException | None = None
        # Interrupt IN pump: reports in arrival order.
        self._in_reports: "queue.Queue[bytes | BaseException]" = queue.Queue()
        self._in_outstanding: dict[int, URB] = {}
        self._in_depth = 0
        self._in_handler: Callable[[bytes | BaseException], None] | None = None
        self._reader = threading.Thread(
            target=self._read_loop, name=f"usbip-reader-{record.busid}", daemon=True)
        self._reader.start()

    def __repr__(self) -> str:
        return f"AttachedDevice({self.peer} {self.record.busid})"

    def __enter__(self) -> "AttachedDevice":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- sending -------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def failure(self) -> BaseException | None:
        """Why the connection ended, if it ended on an error."""
        return self._failure

    def _take_seqnum(self) -> int:
        seqnum = self._next_seqnum
        self._next_seqnum = (self._next_seqnum + 1) & 0xFFFFFFFF or 1
        return seqnum

    def _send(self, data: bytes) -> None:
        with self._send_lock:
            if self._batch is not None:
                self._batch.append(data)
                return
            try:
                split = self.write_split
                if split:
                    # A host whose writes arrive in pieces: each piece its own TCP segment.
                    for i in range(0, len(data), split):
                        self.sock.sendall(data[i:i + split])
                        time.sleep(0.0005)
                else:
                    self.sock.sendall(data)
            except OSError as e:
                raise Disconnected(f"send failed: {e}") from e

    @contextlib.contextmanager
    def batched(self):
        """Sends every message submitted inside the block in one write, as one TCP segment.
        Submit only inside it: a URB's answer cannot come before the block ends."""
        with self._send_lock:
            self._batch = []
        try:
            yield
        finally:
            with self._send_lock:
                data, self._batch = b"".join(self._batch), None
                try:
                    self.sock.sendall(data)
                except OSError as e:
                    raise Disconnected(f"send failed: {e}") from e

    def send_raw(self, data: bytes) -> None:
        """Bytes that are no well-formed request of ours (for tests of hostile input)."""
        self._send(data)

    def submit(
        self, ep: int, direction: int, length: int, data: bytes = b"",
        setup: SetupPacket | None = None, what: str | None = None,
        callback: Callable[[URB], None] | None = None, interval: int = 0,
    ) -> URB:
        """Sends a USBIP_CMD_SUBMIT and returns the URB to wait on."""
        if direction == DIR_OUT and len(data) != length:
            raise ValueError("an OUT URB carries exactly transfer_buffer_length bytes")
        if direction == DIR_IN and data:
            raise ValueError("an IN URB carries no data")
        with self._lock:
            if self._closed:
                raise Disconnected(f"connection closed ({self._failure or 'by us'})")
            seqnum = self._take_seqnum()
            urb = URB(seqnum, ep, direction, length, what or f"URB ep {ep} {'IN' if direction else 'OUT'}")
            urb.callback = callback
            self._pending[seqnum] = urb
        header = struct.pack(
            ">IIIIIIiiii8s", CMD_SUBMIT, seqnum, self.devid, direction, ep & 0x0F,
            0, length, 0, NON_ISO, interval, setup.pack() if setup else bytes(8))
        try:
            self._send(header + data)
        except Disconnected:
            with self._lock:
                self._pending.pop(seqnum, None)
            raise
        return urb

    def unlink(self, urb: URB, timeout: float = 5.0) -> int:
        """Sends USBIP_CMD_UNLINK for `urb`; returns the RET_UNLINK status
        (-ECONNRESET: it was pending and is gone; 0 or -ENOENT: it had completed)."""
        with self._lock:
            if self._closed:
                raise Disconnected(f"connection closed ({self._failure or 'by us'})")
            seqnum = self._take_seqnum()
            pending = _Unlink(seqnum, urb)
            self._unlinks[seqnum] = pending
        header = struct.pack(">IIIIII24s", CMD_UNLINK, seqnum, self.devid, 0, 0, urb.seqnum, bytes(24))
        self._send(header)
        if not pending.done.wait(timeout):
            raise TimeoutError(f"CMD_UNLINK of seqnum {urb.seqnum} not answered in {timeout} s")
        if pending.error is not None:
            raise pending.error
        return pending.status  # type: ignore[return-value]

    # ---- reading -------------------------------------------------------------

    def _deviation(self, text: str) -> None:
        if len(self.deviations) < 100:
            self.deviations.append(text)

    def _read_loop(self) -> None:
        stream = _Stream(self.sock)
        try:
            while True:
                header = stream.read(HEADER_SIZE, "URB reply header")
                command, seqnum, devid, direction, ep = struct.unpack_from(">IIIII", header)
                if (devid, direction, ep) != (0, 0, 0):
                    self._deviation(
                        f"reply {command} seqnum {seqnum}: devid/direction/ep = "
                        f"0x{devid:x}/{direction}/{ep}, the spec says 0")
                if command == RET_SUBMIT:
                    self._ret_submit(stream, seqnum, header)
                elif command == RET_UNLINK:
                    self._ret_unlink(seqnum, header)
                else:
                    raise ProtocolError(f"unexpected command 0x{command:08x} (seqnum {seqnum}) from the server")
        except BaseException as e:  # noqa: BLE001 - every ending is reported to the waiters
            if isinstance(e, OSError) and self._closed:
                e = Disconnected("closed by the client")
            elif isinstance(e, (ConnectionResetError, BrokenPipeError)):
                e = Disconnected(f"the server dropped the connection ({e})")
            self._fail(e)

    def _ret_submit(self, stream: _Stream, seqnum: int, header: bytes) -> None:
        status, actual, start_frame, packets, error_count = struct.unpack_from(">iiiii", header, 20)
        with self._lock:
            urb = self._pending.pop(seqnum, None)
        if urb is None:
            if seqnum in self._unlinked_seqnums:
                raise ProtocolError(f"RET_SUBMIT for seqnum {seqnum}, which was unlinked (-ECONNRESET)")
            raise ProtocolError(f"RET_SUBMIT for seqnum {seqnum}, which is not outstanding")
        if packets not in (0, NON_ISO):
            raise ProtocolError(f"RET_SUBMIT seqnum {seqnum}: number_of_packets {packets} for a non-ISO URB")
        if start_frame != 0 or error_count != 0:
            self._deviation(f"RET_SUBMIT seqnum {seqnum}: start_frame {start_frame}, error_count {error_count}")
        if any(header[40:48]):
            self._deviation(f"RET_SUBMIT seqnum {seqnum}: non-zero padding")
        if actual < 0 or actual > urb.length:
            raise ProtocolError(
                f"RET_SUBMIT seqnum {seqnum}: actual_length {actual} for a {urb.length}-byte {urb.what}")
        if urb.direction == DIR_IN:
            urb.data = stream.read(actual, f"IN data of seqnum {seqnum}")
        elif status == 0 and actual != urb.length:
            self._deviation(f"RET_SUBMIT seqnum {seqnum}: OUT accepted {actual} of {urb.length} bytes")
        urb.status = status
        urb.actual_length = actual
        urb._complete()

    def _ret_unlink(self, seqnum: int, header: bytes) -> None:
        (status,) = struct.unpack_from(">i", header, 20)
        if any(header[24:48]):
            self._deviation(f"RET_UNLINK seqnum {seqnum}: non-zero padding")
        with self._lock:
            pending = self._unlinks.pop(seqnum, None)
            if pending is None:
                raise ProtocolError(f"RET_UNLINK for seqnum {seqnum}, which is no unlink of ours")
            target = pending.target
            still_pending = self._pending.pop(target.seqnum, None) is not None
            if still_pending:
                self._unlinked_seqnums.add(target.seqnum)
        if still_pending and status != -errno.ECONNRESET:
            # TCP keeps order: a RET_SUBMIT sent before this RET_UNLINK has arrived already.
            self._deviation(
                f"RET_UNLINK seqnum {seqnum}: status {status} for seqnum {target.seqnum}, "
                f"which had no RET_SUBMIT (expected -ECONNRESET)")
        if not still_pending and status == -errno.ECONNRESET:
            raise ProtocolError(
                f"RET_UNLINK seqnum {seqnum}: -ECONNRESET for seqnum {target.seqnum}, which had completed")
        pending.status = status
        if still_pending:
            target.unlinked = True
            target.status = -errno.ECONNRESET
            target._complete()
        pending.done.set()

    def _fail(self, error: BaseException) -> None:
        with self._lock:
            if not self._closed:  # not our own close(): remember why it ended
                self._failure = error
            self._closed = True
            pending = list(self._pending.values())
            unlinks = list(self._unlinks.values())
            self._pending.clear()
            self._unlinks.clear()
        for urb in pending:
            urb.error = error if isinstance(error, USBIPError) else Disconnected(str(error))
            urb._complete()
        for u in unlinks:
            u.error = Disconnected(str(error))
            u.done.set()
        self._deliver_input(error if isinstance(error, USBIPError) else Disconnected(str(error)))
        try:
            self.sock.close()
        except OSError:
            pass

    # ---- control transfers (endpoint 0) --------------------------------------

    def control(self, setup: SetupPacket, data: bytes = b"", timeout: float = 5.0) -> bytes:
        direction = DIR_IN if setup.bmRequestType & 0x80 else DIR_OUT
        if direction == DIR_OUT and len(data) != setup.wLength:
            raise ValueError("OUT data must be wLength bytes")
        what = f"control request 0x{setup.bmRequestType:02x}/0x{setup.bRequest:02x} wValue 0x{setup.wValue:04x}"
        urb = self.submit(0, direction, setup.wLength, data, setup=setup, what=what)
        result = urb.wait(timeout)
        if direction == DIR_IN and len(result) > setup.wLength:
            raise ProtocolError(f"{what}: {len(result)} bytes for wLength {setup.wLength}")
        return result

    def get_descriptor(self, dtype: int, index: int = 0, length: int = 255,
                       language: int = 0, recipient_interface: int | None = None,
                       timeout: float = 5.0) -> bytes:
        """GET_DESCRIPTOR; class descriptors (HID 0x21, report 0x22) go to an interface."""
        if recipient_interface is None:
            setup = SetupPacket(0x80, GET_DESCRIPTOR, dtype << 8 | index, language, length)
        else:
            setup = SetupPacket(0x81, GET_DESCRIPTOR, dtype << 8 | index, recipient_interface, length)
        return self.control(setup, timeout=timeout)

    def get_string(self, index: int, language: int = 0x0409) -> str:
        raw = self.get_descriptor(DT_STRING, index, 255, language)
        if len(raw) < 2 or raw[0] != len(raw) or raw[1] != DT_STRING or len(raw) % 2:
            raise ProtocolError(f"malformed string descriptor {index}: {raw.hex()}")
        return raw[2:].decode("utf-16-le")

    def set_configuration(self, value: int) -> None:
        self.control(SetupPacket(0x00, SET_CONFIGURATION, value, 0, 0))

    def get_configuration(self) -> int:
        return self.control(SetupPacket(0x80, GET_CONFIGURATION, 0, 0, 1))[0]

    def set_idle(self, duration: int = 0, report_id: int = 0, interface: int = 0) -> None:
        """HID SET_IDLE (class request to the interface)."""
        self.control(SetupPacket(0x21, HID_SET_IDLE, duration << 8 | report_id, interface, 0))

    def get_report_descriptor(self, length: int, interface: int = 0) -> bytes:
        return self.get_descriptor(DT_REPORT, 0, length, recipient_interface=interface)

    # ---- interrupt transfers -------------------------------------------------

    def interrupt_out(self, report: bytes, timeout: float = 5.0) -> None:
        """Writes one 64-byte report to EP 0x01 and waits for its RET_SUBMIT."""
        if len(report) != self.REPORT_SIZE:
            raise ValueError(f"an output report has {self.REPORT_SIZE} bytes, not {len(report)}")
        urb = self.submit(self.INTERRUPT_OUT, DIR_OUT, len(report), report, what="interrupt OUT")
        urb.wait(timeout)
        if urb.actual_length != len(report):
            raise ProtocolError(f"interrupt OUT accepted {urb.actual_length} of {len(report)} bytes")

    def interrupt_in(self, length: int = REPORT_SIZE, timeout: float = 5.0) -> bytes:
        """One IN URB on EP 0x81, waited for (not through the pump)."""
        return self.submit(self.INTERRUPT_IN, DIR_IN, length, what="interrupt IN").wait(timeout)

    def start_input(self, depth: int = 2,
                    handler: Callable[[bytes | BaseException], None] | None = None) -> None:
        """Keeps `depth` interrupt-IN URBs outstanding. Each report (or the error that ended
        the pump) goes to `handler`, called on the reader thread, or else to ``read_input()``."""
        with self._lock:
            self._in_depth = depth
            if handler is not None:
                self._in_handler = handler
        self._refill_input()

    def _deliver_input(self, item: bytes | BaseException) -> None:
        handler = self._in_handler
        if handler is not None:
            handler(item)
        else:
            self._in_reports.put(item)

    def _refill_input(self) -> None:
        while True:
            with self._lock:
                if self._closed or len(self._in_outstanding) >= self._in_depth:
                    return
            try:
                urb = self.submit(self.INTERRUPT_IN, DIR_IN, self.REPORT_SIZE, what="interrupt IN",
                                  callback=self._input_done)
            except Disconnected:
                return
            with self._lock:
                if not urb.done:
                    self._in_outstanding[urb.seqnum] = urb

    def _input_done(self, urb: URB) -> None:
        # Runs on the reader thread.
        with self._lock:
            self._in_outstanding.pop(urb.seqnum, None)
        if urb.error is not None or urb.unlinked:
            return
        if urb.status != 0:
            self._deliver_input(URBError("interrupt IN", urb.status))
            return
        if len(urb.data) != self.REPORT_SIZE:
            self._deliver_input(ProtocolError(f"interrupt IN delivered {len(urb.data)} bytes, not 64"))
        else:
            self._deliver_input(urb.data)
        self._refill_input()

    def read_input(self, timeout: float = 5.0) -> bytes:
        """The next input report the pump received."""
        try:
            item = self._in_reports.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no input report in {timeout} s") from None
        if isinstance(item, BaseException):
            self._in_reports.put(item)  # every later reader sees the end too
            raise item
        return item

    def stop_input(self, timeout: float = 5.0) -> list[int]:
        """Unlinks the outstanding IN URBs; returns the RET_UNLINK statuses."""
        with self._lock:
            self._in_depth = 0
            urbs = list(self._in_outstanding.values())
        return [self.unlink(urb, timeout) for urb in urbs]

    @property
    def outstanding_input(self) -> int:
        with self._lock:
            return len(self._in_outstanding)

    # ---- closing -------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Drops the connection (as a host does on detach) and joins the reader."""
        with self._lock:
            already = self._closed
            self._closed = True
        if not already:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._reader.join(timeout)
        if self._reader.is_alive():
            raise RuntimeError("USB/IP reader thread did not stop")
        try:
            self.sock.close()
        except OSError:
            pass


def parse_descriptors(blob: bytes) -> list[tuple[int, bytes]]:
    """Splits a configuration descriptor bundle into (bDescriptorType, bytes) items."""
    items, offset = [], 0
    while offset < len(blob):
        length = blob[offset]
        if length < 2 or offset + length > len(blob):
            raise ProtocolError(f"malformed descriptor at offset {offset} of {blob.hex()}")
        items.append((blob[offset + 1], blob[offset:offset + length]))
        offset += length
    return items
