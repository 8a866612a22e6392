"""CTAPHID framing by hand (CTAP 2.1 §11.2.4), for tests that must control every packet:
interleaving two channels, or walking away in the middle of a message.

``HostChannels`` reads the input reports of an ``AttachedDevice`` (its pump, via
``read_input``) and reassembles each channel's messages, keeping the ones that
belong to another channel for later, so a test can drive several channels at once
and check that no report was lost, duplicated or mixed.
"""

from __future__ import annotations

import os
import struct
import time

import usbip_client as usbip

REPORT_SIZE = 64
INIT_DATA = REPORT_SIZE - 7
CONT_DATA = REPORT_SIZE - 5
BROADCAST = 0xFFFFFFFF

PING, MSG, LOCK, INIT, WINK, CBOR, CANCEL, KEEPALIVE, ERROR = (
    0x01, 0x03, 0x04, 0x06, 0x08, 0x10, 0x11, 0x3B, 0x3F)
ERR_INVALID_CMD, ERR_INVALID_PAR, ERR_INVALID_LEN, ERR_INVALID_SEQ = 0x01, 0x02, 0x03, 0x04
ERR_MSG_TIMEOUT, ERR_CHANNEL_BUSY, ERR_INVALID_CHANNEL = 0x05, 0x06, 0x0B


def packets(cid: int, cmd: int, payload: bytes) -> list[bytes]:
    """The 64-byte reports of one message: an initialization packet and continuations."""
    out = [(struct.pack(">IBH", cid, 0x80 | cmd, len(payload)) + payload[:INIT_DATA]).ljust(REPORT_SIZE, b"\0")]
    rest, seq = payload[INIT_DATA:], 0
    while rest:
        out.append((struct.pack(">IB", cid, seq) + rest[:CONT_DATA]).ljust(REPORT_SIZE, b"\0"))
        rest, seq = rest[CONT_DATA:], seq + 1
    return out


class HostChannels:
    """Reassembles the device's messages per channel from the input pump of `dev`."""

    def __init__(self, dev: usbip.AttachedDevice):
        self.dev = dev
        self.partial: dict[int, list] = {}  # cid -> [cmd, length, bytearray, next_seq]
        self.messages: dict[int, list[tuple[int, bytes]]] = {}
        self.keepalives: dict[int, list[int]] = {}
        self.keepalive_times: dict[int, list[float]] = {}  # time.monotonic() of each
        self.log: list[bytes] = []  # every report, in arrival order

    def send(self, cid: int, cmd: int, payload: bytes) -> None:
        for report in packets(cid, cmd, payload):
            self.dev.interrupt_out(report)

    def _take(self, report: bytes) -> None:
        self.log.append(report)
        cid = struct.unpack_from(">I", report)[0]
        kind = report[4]
        if kind & 0x80:
            cmd, length = kind & 0x7F, struct.unpack_from(">H", report, 5)[0]
            assert cid not in self.partial, \
                f"new message on channel {cid:08x} before the last one was complete: {report.hex()}"
            if cmd == KEEPALIVE:
                assert length == 1, f"KEEPALIVE of length {length}: {report.hex()}"
                self.keepalives.setdefault(cid, []).append(report[7])
                self.keepalive_times.setdefault(cid, []).append(time.monotonic())
                return
            data = bytearray(report[7:7 + min(length, INIT_DATA)])
            if len(data) >= length:
                self.messages.setdefault(cid, []).append((cmd, bytes(data)))
            else:
                self.partial[cid] = [cmd, length, data, 0]
        else:
            assert cid in self.partial, f"continuation on channel {cid:08x} with no message: {report.hex()}"
            entry = self.partial[cid]
            assert kind == entry[3], f"continuation seq {kind}, expected {entry[3]}: {report.hex()}"
            entry[2] += report[5:5 + min(entry[1] - len(entry[2]), CONT_DATA)]
            entry[3] += 1
            if len(entry[2]) >= entry[1]:
                del self.partial[cid]
                self.messages.setdefault(cid, []).append((entry[0], bytes(entry[2])))

    def receive(self, cid: int, timeout: float = 5.0) -> tuple[int, bytes]:
        """The next complete message on `cid` (KEEPALIVEs are recorded, not returned)."""
        deadline = time.monotonic() + timeout
        while not self.messages.get(cid):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no message on channel {cid:08x} in {timeout} s; reports: "
                                   + " ".join(r[:8].hex() for r in self.log[-8:]))
            self._take(self.dev.read_input(remaining))
        return self.messages[cid].pop(0)

    def wait_keepalive(self, cid: int, status: int, timeout: float = 2.0) -> None:
        """Reads until a KEEPALIVE with `status` has arrived on `cid`."""
        deadline = time.monotonic() + timeout
        while status not in self.keepalives.get(cid, []):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no KEEPALIVE {status} on channel {cid:08x} in {timeout} s "
                                   f"(saw {self.keepalives.get(cid, [])})")
            self._take(self.dev.read_input(remaining))

    def read_for(self, seconds: float) -> None:
        """Takes every report that arrives in the next `seconds`."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                self._take(self.dev.read_input(remaining))
            except TimeoutError:
                return

    def drain(self, quiet: float = 0.3) -> None:
        """Reads until no report arrives for `quiet` seconds."""
        while True:
            try:
                self._take(self.dev.read_input(quiet))
            except TimeoutError:
                return

    def open_channel(self, timeout: float = 5.0) -> int:
        """CTAPHID_INIT on the broadcast channel; returns the new channel id."""
        nonce = os.urandom(8)
        self.send(BROADCAST, INIT, nonce)
        while True:
            cmd, payload = self.receive(BROADCAST, timeout)
            assert cmd == INIT, f"INIT answered with command 0x{cmd:02x}: {payload.hex()}"
            assert len(payload) >= 17, f"INIT response of {len(payload)} bytes"
            if payload[:8] == nonce:
                cid = struct.unpack_from(">I", payload, 8)[0]
                assert cid not in (0, BROADCAST), f"allocated channel {cid:08x}"
                return cid

    def call(self, cid: int, cmd: int, payload: bytes, timeout: float = 10.0) -> tuple[int, bytes]:
        self.send(cid, cmd, payload)
        return self.receive(cid, timeout)
