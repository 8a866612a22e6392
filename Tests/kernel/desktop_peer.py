#!/usr/bin/python3
"""What another local account tries against a key that is not its own, with nothing
but the standard library (it runs as that account: /usr/bin/python3, no fido2):

    desktop_peer.py usbip-devlist HOST PORT          the bus ids the server lists
    desktop_peer.py usbip-import HOST PORT BUSID     imports BUSID (OP_REQ_IMPORT)
    desktop_peer.py open PATH                        opens PATH read-write

Prints one line of JSON and exits 0 when it could ask (whatever the answer); 2 on a
usage error. The USB/IP messages are the kernel's (Documentation/usb/usbip_protocol.rst):
a refused import is a reply with a non-zero status, or a connection closed before one.
Used by Tests/kernel/desktop-checks.sh.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import struct
import sys

VERSION = 0x0111
OP_REQ_DEVLIST, OP_REP_DEVLIST = 0x8005, 0x0005
OP_REQ_IMPORT, OP_REP_IMPORT = 0x8003, 0x0003
DEVICE = struct.Struct(">256s32sIIIHHHBBBBBB")  # usbip_usb_device: 312 bytes


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise EOFError(f"connection closed after {len(data)} of {n} bytes")
        data += part
    return data


def connect(host: str, port: int) -> socket.socket:
    return socket.create_connection((host, port), timeout=20)


def busid_of(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("ascii", "replace")


def devlist(host: str, port: int) -> dict:
    with connect(host, port) as sock:
        sock.sendall(struct.pack(">HHI", VERSION, OP_REQ_DEVLIST, 0))
        try:
            version, code, status = struct.unpack(">HHI", recv_exactly(sock, 8))
            if code != OP_REP_DEVLIST or status != 0:
                return {"answered": True, "code": code, "status": status, "busids": []}
            (count,) = struct.unpack(">I", recv_exactly(sock, 4))
            busids = []
            for _ in range(count):
                device = DEVICE.unpack(recv_exactly(sock, DEVICE.size))
                busids.append(busid_of(device[1]))
                recv_exactly(sock, 4 * device[-1])  # the interfaces
            return {"answered": True, "status": 0, "busids": busids}
        except EOFError as e:
            return {"answered": False, "error": str(e), "busids": []}


def import_busid(host: str, port: int, busid: str) -> dict:
    with connect(host, port) as sock:
        sock.sendall(struct.pack(">HHI32s", VERSION, OP_REQ_IMPORT, 0, busid.encode()))
        try:
            version, code, status = struct.unpack(">HHI", recv_exactly(sock, 8))
        except EOFError as e:
            return {"imported": False, "answered": False, "error": str(e)}
        if code != OP_REP_IMPORT or status != 0:
            return {"imported": False, "answered": True, "code": code, "status": status}
        device = DEVICE.unpack(recv_exactly(sock, DEVICE.size))
        return {"imported": True, "busid": busid_of(device[1]),
                "device": f"{device[5]:04x}:{device[6]:04x}"}


def open_rw(path: str) -> dict:
    try:
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    except OSError as e:
        return {"opened": False, "errno": errno.errorcode.get(e.errno, str(e.errno))}
    os.close(fd)
    return {"opened": True}


def main(argv: list[str]) -> int:
    try:
        if len(argv) == 4 and argv[1] == "usbip-devlist":
            result = devlist(argv[2], int(argv[3]))
        elif len(argv) == 5 and argv[1] == "usbip-import":
            result = import_busid(argv[2], int(argv[3]), argv[4])
        elif len(argv) == 3 and argv[1] == "open":
            result = open_rw(argv[2])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except OSError as e:  # refused, reset or timed out before an answer
        result = {"answered": False, "imported": False, "busids": [], "error": str(e)}
    print(json.dumps(dict(result, uid=os.getuid())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
