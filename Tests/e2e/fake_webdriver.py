"""A tiny stand-in for a browser's WebDriver server (chromedriver), for the
latchkey-webdriver tests: it runs in a thread of the test process on 127.0.0.1,
records every request it gets, and answers New Session, Delete Session, /status,
and anything else with an echo of the request (or the error a path asks for), so a
test can check that the intermediary forwards requests and answers unchanged.

    with FakeWebDriver() as upstream:
        ... upstream.url, upstream.requests ...
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class FakeWebDriver:
    def __init__(self) -> None:
        self.requests: list[Seen] = []
        self.sessions: set[str] = set()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def handle_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fake.requests.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                                          body))
                status, headers, payload = fake.answer(self.command, self.path, body)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = handle_any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        headers = {"Content-Type": "application/json; charset=utf-8", "X-Fake-Driver": "yes"}
        segments = path.split("?")[0].strip("/").split("/")
        if method == "POST" and segments == ["session"]:
            session = uuid.uuid4().hex
            self.sessions.add(session)
            value = {"sessionId": session,
                     "capabilities": {"browserName": "chrome", "browserVersion": "120.0", "platformName": "linux"}}
            return 200, headers, json.dumps({"value": value}).encode()
        if method == "DELETE" and len(segments) == 2 and segments[0] == "session":
            self.sessions.discard(segments[1])
            return 200, headers, b'{"value":null}'
        if segments[-1:] == ["status"] and "session" not in segments:  # /status, Grid's /wd/hub/status
            return 200, headers, b'{"value":{"ready":true,"message":"fake driver"}}'
        if segments[-1:] == ["missing"]:
            error = {"error": "no such element", "message": "nothing here", "stacktrace": "fake"}
            return 404, headers, json.dumps({"value": error}).encode()
        if segments[-1:] == ["teapot"]:
            return 418, {"Content-Type": "text/plain", "X-Fake-Driver": "yes"}, b"short and stout"
        echo = {"method": method, "path": path, "body": body.decode("utf-8", "replace")}
        return 200, headers, json.dumps({"value": echo}).encode()

    def webauthn_requests(self) -> list[Seen]:
        return [r for r in self.requests if "/webauthn" in r.path]

    def __enter__(self) -> "FakeWebDriver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
