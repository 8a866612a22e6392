#!/usr/bin/env python3
"""A stand-in for a browser's --remote-debugging-port, for the DevTools gateway tests
(test_devtools.py): HTTP discovery (/json/version, /json/list, /json/new, /json/protocol)
whose WebSocket URLs are built from the Host header, as Chromium builds them, and
WebSockets on /devtools/browser/ID and /devtools/page/ID that answer every command with
an echo of it (Target.attachToTarget with a new flat session, Target.detachFromTarget
with the Target.detachedFromTarget event, Fake.emit with an event, Fake.big with a
large result). Standard library only, so that it runs as another account:

    python3 fake_devtools.py        # prints "READY PORT", serves until stdin closes

Every WebSocket message it receives is kept; GET /fake/log answers them as JSON
[{"path", "text"}], GET /fake/connections how many WebSockets are open.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
LOG: list[dict] = []
LOCK = threading.Lock()
OPEN = [0]
SESSIONS = iter(range(1, 1 << 30))


def read_exact(reader, n: int) -> bytes:
    data = reader.read(n) if n else b""
    if len(data) < n:
        raise EOFError
    return data


def read_message(reader) -> tuple[int, bytes]:
    """(opcode, payload) of the next whole message; continuation frames joined."""
    opcode, payload = None, b""
    while True:
        b0, b1 = read_exact(reader, 2)
        length = b1 & 0x7F
        if length == 126:
            length = struct.unpack(">H", read_exact(reader, 2))[0]
        elif length == 127:
            length = struct.unpack(">Q", read_exact(reader, 8))[0]
        mask = read_exact(reader, 4) if b1 & 0x80 else None
        data = read_exact(reader, length)
        if mask:
            data = bytes(c ^ mask[i % 4] for i, c in enumerate(data))
        op = b0 & 0x0F
        if op >= 8:  # control frames may come between fragments
            return op, data
        opcode = opcode if op == 0 else op
        payload += data
        if b0 & 0x80:
            return opcode, payload


def write_frame(sock, opcode: int, payload: bytes, lock: threading.Lock) -> None:
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 1 << 16:
        head += bytes([126]) + struct.pack(">H", n)
    else:
        head += bytes([127]) + struct.pack(">Q", n)
    with lock:
        sock.sendall(head + payload)


def answer(command: dict, send) -> None:
    """The fake browser's answer to one command, through send(dict)."""
    method = command.get("method", "")
    session = command.get("sessionId")
    reply = {"id": command.get("id")}
    if session is not None:
        reply["sessionId"] = session
    if method == "Target.attachToTarget":
        reply["result"] = {"sessionId": f"FAKE-SESSION-{next(SESSIONS)}"}
    elif method == "Target.detachFromTarget":
        reply["result"] = {}
        send(reply)
        send({"method": "Target.detachedFromTarget",
              "params": {"sessionId": command.get("params", {}).get("sessionId"), "targetId": "page-1"}})
        return
    elif method == "Fake.emit":
        event = {"method": "Fake.event", "params": command.get("params", {})}
        if session is not None:
            event["sessionId"] = session
        send(event)
        reply["result"] = {}
    elif method == "Fake.big":
        reply["result"] = {"data": "x" * int(command.get("params", {}).get("size", 1 << 20))}
    else:
        reply["result"] = {"echo": command}
    send(reply)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def send_json(self, value, status: int = 200) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def target(self, target_id: str, url: str = "about:blank") -> dict:
        host = self.headers.get("Host", "")
        return {"description": "", "devtoolsFrontendUrl": f"/devtools/inspector.html?ws={host}/devtools/page/{target_id}",
                "id": target_id, "title": url, "type": "page", "url": url,
                "webSocketDebuggerUrl": f"ws://{host}/devtools/page/{target_id}"}

    def do_GET(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        if self.headers.get("Upgrade", "").lower() == "websocket" and path.startswith("/devtools/"):
            return self.websocket(path)
        if path == "/json/version":
            return self.send_json({"Browser": "FakeChrome/1.0", "Protocol-Version": "1.3",
                                   "webSocketDebuggerUrl": f"ws://{self.headers.get('Host')}/devtools/browser/fake-browser"})
        if path in ("/json", "/json/list"):
            return self.send_json([self.target("page-1", "http://localhost/")])
        if path == "/json/protocol":
            return self.send_json({"version": {"major": "1", "minor": "3"}, "domains": [{"domain": "WebAuthn"}]})
        if path == "/fake/log":
            with LOCK:
                return self.send_json(list(LOG))
        if path == "/fake/connections":
            return self.send_json({"open": OPEN[0]})
        self.send_json({"error": f"no {path}"}, 404)

    def do_PUT(self) -> None:
        if self.path.startswith("/json/new"):
            url = self.path.partition("?")[2] or "about:blank"
            return self.send_json(self.target("page-2", url))
        self.send_json({"error": "no"}, 404)

    def websocket(self, path: str) -> None:
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        sock = self.connection
        lock = threading.Lock()
        with LOCK:
            OPEN[0] += 1
        try:
            while True:
                opcode, payload = read_message(self.rfile)
                if opcode == 8:
                    write_frame(sock, 8, payload[:2], lock)
                    return
                if opcode == 9:
                    write_frame(sock, 10, payload, lock)
                    continue
                if opcode != 1:
                    continue
                text = payload.decode()
                with LOCK:
                    LOG.append({"path": path, "text": text})
                try:
                    command = json.loads(text)
                except ValueError:
                    continue
                answer(command, lambda value: write_frame(sock, 1, json.dumps(value).encode(), lock))
        except (EOFError, OSError):
            return
        finally:
            with LOCK:
                OPEN[0] -= 1
            self.close_connection = True


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"READY {server.server_address[1]}", flush=True)
    sys.stdin.read()  # until the test closes our stdin
    server.shutdown()


if __name__ == "__main__":
    main()
