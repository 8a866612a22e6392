"""Hostile and malformed USB/IP requests over raw sockets (issue 10).

Every OP_REQ_* the server can read far enough to know its code gets the protocol's reply
with status 1 (ST_NA, usbip_protocol.rst's "1 for error") and then the close: imports whose
bus id has no terminating zero or is not UTF-8, requests of another protocol version,
request codes latchkey does not implement, and requests the client cut short and then shut
its side down. Bytes that are no request at all are closed without a reply. After each,
the daemon is alive, the state directory's files are unchanged, the key imports again and
it still registers a credential and signs with it.
"""

from __future__ import annotations

import hashlib
import socket
import struct
import time
from pathlib import Path

import pytest

import rp
import usbip_client as usbip
from conftest import HOST

VERSION = usbip.USBIP_VERSION
ST_NA = 1


def op(version: int, code: int, status: int = 0) -> bytes:
    return struct.pack(">HHI", version, code, status)


def import_request(busid_field: bytes, version: int = VERSION) -> bytes:
    assert len(busid_field) == 32
    return op(version, usbip.OP_REQ_IMPORT) + busid_field


FAILED_IMPORT = op(VERSION, usbip.OP_REP_IMPORT, ST_NA)
FAILED_DEVLIST = op(VERSION, usbip.OP_REP_DEVLIST, ST_NA) + struct.pack(">I", 0)

# (request bytes, whether the client shuts its side down after them, the whole reply)
ANSWERED = {
    "import-busid-without-nul": (import_request(b"A" * 32), False, FAILED_IMPORT),
    "import-busid-not-utf8": (import_request(b"\xff\xfe-1" + bytes(28)), False, FAILED_IMPORT),
    "import-busid-lone-continuation-byte": (import_request(b"\x80" + bytes(31)), False, FAILED_IMPORT),
    "import-other-version": (import_request(b"1-1" + bytes(29), version=0x0106), False, FAILED_IMPORT),
    "devlist-other-version": (op(0x0106, usbip.OP_REQ_DEVLIST), False, FAILED_DEVLIST),
    "devlist-version-0": (op(0x0000, usbip.OP_REQ_DEVLIST), False, FAILED_DEVLIST),
    "unknown-request-0x8002": (op(VERSION, 0x8002), False, op(VERSION, 0x0002, ST_NA)),
    "unknown-request-0xffff": (op(VERSION, 0xFFFF), False, op(VERSION, 0x7FFF, ST_NA)),
    "truncated-import-header": (op(VERSION, usbip.OP_REQ_IMPORT)[:4], True, FAILED_IMPORT),
    "truncated-import-busid": (op(VERSION, usbip.OP_REQ_IMPORT) + b"1-", True, FAILED_IMPORT),
    "truncated-import-39-bytes": (import_request(b"1-1" + bytes(29))[:39], True, FAILED_IMPORT),
    "truncated-devlist": (op(VERSION, usbip.OP_REQ_DEVLIST)[:6], True, FAILED_DEVLIST),
}

# Bytes that are no request: closed without a reply.
UNANSWERED = {
    "reply-code-sent-to-server": (op(VERSION, usbip.OP_REP_IMPORT), False),
    "non-request-code": (op(VERSION, 0x1234), False),
    "http": (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", False),
    "urb-before-import": (struct.pack(">IIIII", usbip.CMD_SUBMIT, 1, 0x10002, 1, 1) + bytes(28), False),
    "three-bytes-then-shutdown": (op(VERSION, usbip.OP_REQ_IMPORT)[:3], True),
    "nothing-then-shutdown": (b"", True),
}


def exchange(port: int, request: bytes, half_close: bool, timeout: float = 5.0) -> tuple[bytes, bool]:
    """Sends `request` on a fresh connection (then shuts the sending side down if asked) and
    reads until the server closes: (every byte it sent, whether it closed within `timeout`)."""
    deadline = time.monotonic() + timeout
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(request)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        while True:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                return received, False
            except ConnectionResetError:
                return received, True
            if not chunk:
                return received, True
            received += chunk


def state_hashes(state_dir: Path) -> dict[str, str]:
    """The SHA-256 of every regular file under the state directory (the socket excluded)."""
    return {str(path.relative_to(state_dir)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(state_dir.rglob("*")) if path.is_file()}


def assert_key_still_works(daemon, usb, key) -> None:
    assert daemon.alive, "latchkeyd died"
    busid = key["usbip"]["busid"]
    assert busid in {d.busid for d in usbip.list_devices(HOST, daemon.port)}
    client = rp.make_client(usb.ctap(busid))
    server = rp.make_server()
    registration = rp.register(client, server, resident_key=False)
    found = rp.authenticate(client, server, [registration.credential], allow=True)
    assert found.credential_id == registration.credential.credential_id


@pytest.mark.parametrize("name", list(ANSWERED))
def test_a_request_whose_code_is_known_gets_an_error_reply(daemon, usb, key, name):
    request, half_close, expected = ANSWERED[name]
    before = state_hashes(daemon.state_dir)
    reply, closed = exchange(daemon.port, request, half_close)
    assert reply == expected, f"{name}: {reply.hex()} (expected {expected.hex()})"
    assert closed, f"{name}: the server kept the connection open after its reply"
    assert state_hashes(daemon.state_dir) == before
    assert_key_still_works(daemon, usb, key)


@pytest.mark.parametrize("name", list(UNANSWERED))
def test_bytes_that_are_no_request_are_closed_without_a_reply(daemon, usb, key, name):
    request, half_close = UNANSWERED[name]
    before = state_hashes(daemon.state_dir)
    reply, closed = exchange(daemon.port, request, half_close)
    assert reply == b"", f"{name}: the server answered {reply.hex()}"
    assert closed, f"{name}: the server kept the connection open"
    assert state_hashes(daemon.state_dir) == before
    assert_key_still_works(daemon, usb, key)


def test_a_refused_import_does_not_hold_the_key(daemon, usb, key):
    """The malformed import names no key; the real one right after it is served."""
    reply, _ = exchange(daemon.port, import_request(b"1-1" + b"\xff" * 29), False)
    assert reply == FAILED_IMPORT
    dev = usb.attach(key["usbip"]["busid"])
    assert dev.record.busid == key["usbip"]["busid"]

