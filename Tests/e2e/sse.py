"""The daemon's event stream (GET /v1/events, server-sent events) read as a client
would: the HTTP head, chunked transfer coding, then text/event-stream; each event's JSON
lands in a queue that `next` searches. Shared by the tests that watch events."""

from __future__ import annotations

import json
import queue
import socket
import threading
import time

# How the control socket is opened: path -> connected socket. The e2e suite's conftest
# replaces it so that the stream is opened by the daemon's account (identities.py).
OPEN_SOCKET = None


class EventStream:
    """GET /v1/events read on a thread: the HTTP head, chunked transfer coding, then
    text/event-stream; each event's JSON lands in a queue."""

    def __init__(self, socket_path: str, key: str | None = None, open_socket=None):
        self.events: queue.Queue = queue.Queue()
        self.seen: list[dict] = []  # every event, for test_zz_openapi.py's check against the spec
        open_socket = open_socket or OPEN_SOCKET
        if open_socket is not None:
            self.sock = open_socket(socket_path)
        else:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(5)
            self.sock.connect(socket_path)
        self.sock.settimeout(5)
        target = "/v1/events" + (f"?key={key}" if key else "")
        self.sock.sendall(f"GET {target} HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            assert chunk, f"the daemon closed the event stream before its head: {head!r}"
            head += chunk
        head, self.buffer = head.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        assert lines[0].split()[1] == "200", lines[0]
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        assert headers["content-type"].startswith("text/event-stream"), headers
        self.target, self.headers = target, headers
        self.chunked = "chunked" in headers.get("transfer-encoding", "")
        self.sock.settimeout(None)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _body(self):
        data = self.buffer
        while True:
            if not self.chunked:
                if data:
                    yield data
                data = self.sock.recv(65536)
                if not data:
                    return
                continue
            while b"\r\n" not in data:
                more = self.sock.recv(65536)
                if not more:
                    return
                data += more
            size_line, data = data.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                return
            while len(data) < size + 2:
                more = self.sock.recv(65536)
                if not more:
                    return
                data += more
            yield data[:size]
            data = data[size + 2:]

    def _run(self):
        text = b""
        try:
            for piece in self._body():
                text += piece
                while b"\n\n" in text:
                    block, text = text.split(b"\n\n", 1)
                    name, data = None, []
                    for line in block.decode().split("\n"):
                        if line.startswith(":"):
                            continue
                        if line.startswith("event:"):
                            name = line[6:].strip()
                        elif line.startswith("data:"):
                            data.append(line[5:].lstrip())
                    if data:
                        event = json.loads("\n".join(data))
                        assert event["event"] == name, (name, event)
                        self.seen.append(event)
                        self.events.put(event)
        except OSError:
            pass
        finally:
            self.events.put(None)

    def next(self, name: str, timeout: float = 5.0, **fields) -> dict:
        """The next event called `name` with these field values (others are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {name} event with {fields} within {timeout} s")
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            assert event is not None, f"the event stream ended while waiting for {name}"
            if event["event"] == name and all(event.get(k) == v for k, v in fields.items()):
                return event

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)
