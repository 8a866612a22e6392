"""End-to-end tests of latchkeyctl against a fake latchkeyd control server.

The fake daemon is Python's http.server on a Unix socket in a temporary
directory: it answers canned JSON per (method, path) and records every
request, so each test checks what latchkeyctl sent, what it printed and how
it exited. Nothing here builds the binary; it comes from $LATCHKEYCTL
(default .build/debug/latchkeyctl, relative to the repository root):

    swift build --product latchkeyctl
    python3 -m pytest -q Tests/latchkeyctl
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import os
import pathlib
import shutil
import signal
import socket
import socketserver
import subprocess
import tempfile
import threading
import time
from typing import Any, Callable

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

# Exit codes, as the root command's help documents them.
OK, REFUSED, NOT_FOUND, USAGE, UNAVAILABLE, PROTOCOL = 0, 1, 4, 64, 69, 70


# --------------------------------------------------------------------------
# The binary


def latchkeyctl_path() -> str:
    """$LATCHKEYCTL, or the debug build; fails the session when it is not there."""
    path = pathlib.Path(os.environ.get("LATCHKEYCTL", ".build/debug/latchkeyctl"))
    if not path.is_absolute():
        path = REPO / path
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"latchkeyctl binary not found at {path}. Build it first with\n"
            f"    swift build --product latchkeyctl\n"
            f"(or `swift build --scratch-path .build-ctl --product latchkeyctl` and "
            f"LATCHKEYCTL=.build-ctl/debug/latchkeyctl).",
            pytrace=False,
        )
    return str(path)


# --------------------------------------------------------------------------
# The fake daemon


@dataclasses.dataclass
class Reply:
    """One canned answer. `mode` says how the body is delimited."""

    status: int = 200
    body: Any = None  # JSON-encodable, or bytes sent as they are
    mode: str = "length"  # length | chunked | close | raw | hang | stream (raw, then hang)

    def payload(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, bytes):
            return self.body
        return json.dumps(self.body).encode()


@dataclasses.dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def error(status: int, code: str, message: str) -> Reply:
    return Reply(status, {"error": {"code": code, "message": message}})


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # a connection that sends nothing ends by itself

    def handle_request(self) -> None:
        daemon: FakeDaemon = self.server.fake  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        recorded = Recorded(self.command, self.path, dict(self.headers.items()), body)
        daemon.requests.append(recorded)
        route = daemon.routes.get((self.command, self.path))
        reply = route(recorded) if callable(route) else route
        if reply is None:
            reply = error(404, "not_found", f"no route for {self.command} {self.path}")
        self.send(reply, daemon)

    do_GET = do_POST = do_PUT = do_DELETE = handle_request

    def send(self, reply: Reply, daemon: "FakeDaemon") -> None:
        payload = reply.payload()
        self.close_connection = True
        if reply.mode in ("raw", "stream"):
            self.wfile.write(payload)
            self.wfile.flush()
            if reply.mode == "stream":
                daemon.stopping.wait(10)
            return
        if reply.mode == "hang":
            daemon.stopping.wait(10)
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        if reply.status == 204:
            self.end_headers()
        elif reply.mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(payload), 7):
                piece = payload[start : start + 7]
                self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")
        elif reply.mode == "close":
            self.end_headers()
            self.wfile.write(payload)
        else:
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class FakeDaemon:
    """A control server on `<dir>/control.sock`; stops when the test ends,
    and in any case after `lifetime` seconds."""

    def __init__(self, directory: pathlib.Path, lifetime: float = 120) -> None:
        self.path = str(directory / "control.sock")
        self.routes: dict[tuple[str, str], Reply | Callable[[Recorded], Reply]] = {}
        self.requests: list[Recorded] = []
        self.stopping = threading.Event()
        self.server = UnixHTTPServer(self.path, Handler)
        self.server.fake = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.watchdog = threading.Timer(lifetime, self.stop)
        self.watchdog.daemon = True
        self.watchdog.start()

    def route(self, method: str, path: str, reply: Reply | Callable[[Recorded], Reply]) -> None:
        self.routes[(method, path)] = reply

    def stop(self) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.watchdog.cancel()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def only(self) -> Recorded:
        assert len(self.requests) == 1, [(r.method, r.path) for r in self.requests]
        return self.requests[0]


@dataclasses.dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run(binary: str, *args: str, socket_path: str | None = None, env: dict[str, str] | None = None,
        timeout: float = 30, prefix: tuple[str, ...] = ()) -> Run:
    environment = {k: v for k, v in os.environ.items() if k not in ("LATCHKEY_SOCKET", "XDG_RUNTIME_DIR")}
    environment.update(env or {})
    command = [*prefix, binary]
    if socket_path is not None:
        command += ["--socket", socket_path]
    proc = subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout, env=environment)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def latchkeyctl_fixtures():
    """The `binary` and `daemon` fixtures, for each file of this suite to define as
    `binary, daemon = latchkeyctl_fixtures()`. Not a conftest.py: when this suite and
    Tests/e2e run in one pytest, Tests/e2e/pytest.ini makes that directory the rootdir,
    a conftest.py here goes unread, and Tests/e2e's `daemon` (a real latchkeyd) would
    take these tests. Each call makes new fixture functions, so no file registers
    another file's fixture a second time."""

    @pytest.fixture(scope="session")
    def binary() -> str:
        return latchkeyctl_path()

    @pytest.fixture
    def daemon(tmp_path: pathlib.Path):
        fake = FakeDaemon(tmp_path)
        try:
            yield fake
        finally:
            fake.stop()

    return binary, daemon


binary, daemon = latchkeyctl_fixtures()


def ctl(binary: str, daemon: FakeDaemon, *args: str, **kwargs: Any) -> Run:
    return run(binary, *args, socket_path=daemon.path, **kwargs)


def expect_not_found(binary: str, daemon: FakeDaemon, method: str, path: str, message: str, *args: str) -> None:
    """The daemon answers METHOD PATH with a 404 saying MESSAGE: `latchkeyctl ARGS` exits 4
    and prints the message."""
    daemon.route(method, path, error(404, "not_found", message))
    result = ctl(binary, daemon, *args)
    assert result.code == NOT_FOUND, result.err
    assert message in result.err, result.err


# --------------------------------------------------------------------------
# Canned answers

DEFAULT_KEY = {
    "name": "default",
    "aaguid": "6c61746368206b657920766b65790001",
    "presence": "prompt",
    "credentials": 3,
    "uhid": {"state": "opened", "hidraw": "/dev/hidraw3", "error": None},
    "usbip": {"busid": "1-1", "listen": "127.0.0.1:3240"},
}
CI_KEY = {
    "name": "ci-1",
    "aaguid": "6c61746368206b657920766b65790002",
    "presence": "auto",
    "credentials": 0,
    "uhid": {"state": "unavailable", "hidraw": None, "error": "/dev/uhid: No such file or directory"},
    "usbip": None,
}
CREDENTIAL = {
    "id": "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA",
    "rpId": "example.com",
    "rpName": "Example",
    "userId": "dXNlci0x",
    "userName": "alice@example.com",
    "userDisplayName": "Alice Liddell",
    "algorithm": -7,
    "credProtect": 2,
}
PENDING_1 = {"id": "p-7", "key": "default", "operation": "makeCredential", "rpId": "example.com",
             "userName": "alice", "ageMs": 1200, "expiresInMs": 28800}
PENDING_2 = {"id": "p-8", "key": "ci-1", "operation": "getAssertion", "rpId": None, "userName": None,
             "ageMs": 5400, "expiresInMs": 24600}
PENDING_3 = {"id": "p-9", "key": "default", "operation": "touchProbe", "rpId": None, "userName": None,
             "ageMs": 300, "expiresInMs": 29700}


# --------------------------------------------------------------------------
# status and keys


def test_status_prints_version_uptime_and_a_key_table(binary, daemon):
    daemon.route("GET", "/v1/status", Reply(body={"version": "0.1.0", "uptimeSeconds": 3725,
                                                   "keys": [DEFAULT_KEY, CI_KEY]}))
    result = ctl(binary, daemon, "status")
    assert result.code == OK, result.err
    request = daemon.only()
    assert (request.method, request.path, request.body) == ("GET", "/v1/status", b"")
    assert request.headers.get("Connection") == "close"
    assert "latchkeyd 0.1.0, up 1h 02m, 2 keys" in result.out
    lines = result.out.splitlines()
    header = next(line for line in lines if line.startswith("NAME"))
    for column in ("PRESENCE", "CREDENTIALS", "UHID", "USBIP"):
        assert column in header
    row = next(line for line in lines if line.startswith("default"))
    for field in ("prompt", "3", "opened /dev/hidraw3", "1-1 on 127.0.0.1:3240"):
        assert field in row
    ci_row = next(line for line in lines if line.startswith("ci-1 "))
    # Columns are aligned: every cell starts where its header does.
    assert header.index("PRESENCE") == row.index("prompt") == ci_row.index("auto")
    assert header.index("UHID") == row.index("opened") == ci_row.index("unavailable")
    assert "ci-1: uhid: /dev/uhid: No such file or directory" in result.out


def test_status_json_is_the_daemons_json(binary, daemon):
    status = {"version": "0.1.0", "uptimeSeconds": 12, "keys": [DEFAULT_KEY], "extra": {"future": [1.50, []]}}
    daemon.route("GET", "/v1/status", Reply(body=status))
    result = ctl(binary, daemon, "status", "--json")
    assert result.code == OK, result.err
    assert result.json() == status
    # Pretty-printed, key order and number spelling as the daemon sent them.
    assert result.out.startswith('{\n  "version": "0.1.0",\n  "uptimeSeconds": 12,')
    assert '"future": [\n' in result.out and "1.5" in result.out and '[]' in result.out


def test_keys_list(binary, daemon):
    daemon.route("GET", "/v1/keys", Reply(body=[DEFAULT_KEY, CI_KEY]))
    result = ctl(binary, daemon, "keys", "list")
    assert result.code == OK, result.err
    assert (daemon.only().method, daemon.only().path) == ("GET", "/v1/keys")
    assert "default" in result.out and "ci-1" in result.out and "unavailable" in result.out
    assert ctl(binary, daemon, "keys", "list", "--json").json() == [DEFAULT_KEY, CI_KEY]
    # `keys` alone lists.
    assert ctl(binary, daemon, "keys").out == result.out


def test_keys_create_sends_the_flags(binary, daemon):
    daemon.route("POST", "/v1/keys", Reply(201, CI_KEY))
    result = ctl(binary, daemon, "keys", "create", "ci-1", "--presence", "prompt", "--no-usbip")
    assert result.code == OK, result.err
    request = daemon.only()
    assert (request.method, request.path) == ("POST", "/v1/keys")
    assert request.headers.get("Content-Type") == "application/json"
    assert request.json() == {"name": "ci-1", "presence": "prompt", "uhid": True, "usbip": False}
    assert 'Created key "ci-1"' in result.out
    assert "6c61746368206b657920766b65790002" in result.out

    daemon.requests.clear()
    assert ctl(binary, daemon, "keys", "create", "ci-1", "--no-uhid").code == OK
    assert daemon.only().json() == {"name": "ci-1", "uhid": False, "usbip": True}


def test_keys_create_sends_algorithms_and_the_credential_limit(binary, daemon):
    daemon.route("POST", "/v1/keys", Reply(201, CI_KEY))
    result = ctl(binary, daemon, "keys", "create", "ci-1", "--algorithms", "ES256,RS256", "--algorithm", "PS256",
                 "--max-discoverable-credentials", "25")
    assert result.code == OK, result.err
    assert daemon.only().json() == {"name": "ci-1", "uhid": True, "usbip": True,
                                    "algorithms": ["ES256", "RS256", "PS256"], "maxDiscoverableCredentials": 25}


@pytest.mark.parametrize("flags", [
    ["--algorithms", "ES256,,RS256"], ["--algorithms", ""], ["--max-discoverable-credentials", "0"],
    ["--max-discoverable-credentials", "many"],
])
def test_keys_create_refuses_bad_algorithms_and_limits(binary, daemon, flags):
    assert ctl(binary, daemon, "keys", "create", "ci-1", *flags).code == USAGE
    assert daemon.requests == []


def test_keys_create_conflict_exits_1_with_the_daemons_message(binary, daemon):
    daemon.route("POST", "/v1/keys", error(409, "conflict", 'a key named "ci-1" already exists'))
    result = ctl(binary, daemon, "keys", "create", "ci-1")
    assert result.code == REFUSED
    assert 'a key named "ci-1" already exists' in result.err and "409" in result.err
    assert result.out == ""


def test_keys_create_rejects_an_unknown_presence_mode(binary, daemon):
    result = ctl(binary, daemon, "keys", "create", "ci-1", "--presence", "sometimes")
    assert result.code == USAGE
    assert daemon.requests == []


def test_keys_show_and_its_fields(binary, daemon):
    daemon.route("GET", "/v1/keys/default", Reply(body=DEFAULT_KEY))
    result = ctl(binary, daemon, "keys", "show", "default")
    assert result.code == OK, result.err
    for field in ("aaguid", "6c61746368206b657920766b65790001", "prompt", "/dev/hidraw3", "127.0.0.1:3240"):
        assert field in result.out
    assert ctl(binary, daemon, "keys", "show", "default", "--json").json() == DEFAULT_KEY


def test_keys_show_prints_the_algorithms_and_the_credential_limit(binary, daemon):
    options = {"algorithms": ["ES256", "RS256"], "maxDiscoverableCredentials": 25, "hasPrf": True}
    daemon.route("GET", "/v1/keys/default", Reply(body={**DEFAULT_KEY, "options": options}))
    result = ctl(binary, daemon, "keys", "show", "default")
    assert result.code == OK, result.err
    assert "ES256, RS256" in result.out
    assert "25" in result.out


KEY_NAME_GRAMMAR = "[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


@pytest.mark.parametrize("args", [
    ["keys", "show", "a/b c"], ["keys", "show", ".."], ["keys", "delete", ".."], ["keys", "delete", "."],
    ["keys", "create", "../x"], ["keys", "replug", "%2e%2e"], ["keys", "user-verified", ".hidden"],
    ["reset", "..", "--yes"], ["config", "a/b"], ["credentials", "list", "--key", ".."],
    ["credentials", "delete", "AAAA", "--key", "x" * 65], ["presence", "show", "--key", ".."],
    ["pending", "--key", "a/b"], ["events", "--key", ".."], ["export", "--key", "..", "--plaintext"],
    ["policy", "show", "--key", ".."], ["overrides", "list", "--key", ".."], ["large-blob", "size", ".."],
])
def test_a_key_name_outside_the_grammar_is_refused_before_connecting(binary, daemon, args):
    result = ctl(binary, daemon, *args)
    assert result.code == USAGE, result
    assert KEY_NAME_GRAMMAR in result.err, result.err
    assert daemon.requests == []


def test_keys_show_missing_key_exits_4(binary, daemon):
    expect_not_found(binary, daemon, "GET", "/v1/keys/nope", 'no key named "nope"', "keys", "show", "nope")


def test_keys_delete(binary, daemon):
    daemon.route("DELETE", "/v1/keys/ci-1", Reply(204))
    result = ctl(binary, daemon, "keys", "delete", "ci-1")
    assert result.code == OK, result.err
    assert (daemon.only().method, daemon.only().path) == ("DELETE", "/v1/keys/ci-1")
    assert 'Deleted key "ci-1"' in result.out
    # A 204 has no JSON: --json prints nothing.
    assert ctl(binary, daemon, "keys", "delete", "ci-1", "--json").out == ""


def test_server_error_exits_1(binary, daemon):
    daemon.route("GET", "/v1/keys", error(500, "internal", "store is corrupt"))
    result = ctl(binary, daemon, "keys", "list")
    assert result.code == REFUSED
    assert "store is corrupt" in result.err and "500" in result.err


def test_error_without_a_json_body_still_exits_by_status(binary, daemon):
    daemon.route("DELETE", "/v1/keys/x", Reply(503, b"overloaded"))
    result = ctl(binary, daemon, "keys", "delete", "x")
    assert result.code == REFUSED
    assert "503" in result.err and "overloaded" in result.err
    daemon.route("DELETE", "/v1/keys/y", Reply(404, b""))
    assert ctl(binary, daemon, "keys", "delete", "y").code == NOT_FOUND


# --------------------------------------------------------------------------
# credentials


def test_credentials_list_defaults_to_the_default_key(binary, daemon):
    daemon.route("GET", "/v1/keys/default/credentials", Reply(body=[CREDENTIAL]))
    result = ctl(binary, daemon, "credentials", "list")
    assert result.code == OK, result.err
    assert daemon.only().path == "/v1/keys/default/credentials"
    for field in (CREDENTIAL["id"], "example.com", "alice@example.com", "Alice Liddell", "ES256",
                  "uvOptionalWithList"):
        assert field in result.out
    header, row = result.out.splitlines()
    assert header.index("RP") == row.index("example.com")
    assert header.index("ALG") == row.index("ES256")


def test_credentials_list_for_another_key_and_json(binary, daemon):
    daemon.route("GET", "/v1/keys/ci-1/credentials", Reply(body=[]))
    result = ctl(binary, daemon, "credentials", "list", "--key", "ci-1")
    assert result.code == OK, result.err
    assert 'No credentials on key "ci-1"' in result.out
    assert ctl(binary, daemon, "credentials", "list", "--key", "ci-1", "--json").json() == []


def test_credential_user_names_cannot_drive_the_terminal(binary, daemon):
    hostile = dict(CREDENTIAL, userName="eve\x1b[2J\nrm -rf", userDisplayName="\u202eevil")
    daemon.route("GET", "/v1/keys/default/credentials", Reply(body=[hostile]))
    result = ctl(binary, daemon, "credentials")
    assert result.code == OK, result.err
    assert "\x1b" not in result.out and "\u202e" not in result.out
    assert len(result.out.splitlines()) == 2


def test_credentials_delete(binary, daemon):
    path = f"/v1/keys/ci-1/credentials/{CREDENTIAL['id']}"
    daemon.route("DELETE", path, Reply(204))
    result = ctl(binary, daemon, "credentials", "delete", CREDENTIAL["id"], "--key", "ci-1")
    assert result.code == OK, result.err
    assert (daemon.only().method, daemon.only().path) == ("DELETE", path)


def test_credentials_delete_accepts_standard_base64(binary, daemon):
    daemon.route("DELETE", "/v1/keys/default/credentials/ab-_cd", Reply(204))
    assert ctl(binary, daemon, "credentials", "delete", "ab+/cd==").code == OK
    assert daemon.only().path == "/v1/keys/default/credentials/ab-_cd"


def test_credentials_delete_missing_exits_4(binary, daemon):
    expect_not_found(binary, daemon, "DELETE", "/v1/keys/default/credentials/AAAA", "no such credential",
                     "credentials", "delete", "AAAA")


# --------------------------------------------------------------------------
# presence mode


def test_presence_show(binary, daemon):
    daemon.route("GET", "/v1/keys/default/presence", Reply(body={"mode": "prompt", "timeoutSeconds": 30}))
    result = ctl(binary, daemon, "presence", "show")
    assert result.code == OK, result.err
    assert "prompt" in result.out and "30 s" in result.out
    assert ctl(binary, daemon, "presence", "--json").json() == {"mode": "prompt", "timeoutSeconds": 30}


def test_presence_set_mode_and_timeout(binary, daemon):
    daemon.route("PUT", "/v1/keys/ci-1/presence", lambda r: Reply(body={"mode": "auto", "timeoutSeconds": 15}))
    result = ctl(binary, daemon, "presence", "set", "auto", "--key", "ci-1", "--timeout", "15")
    assert result.code == OK, result.err
    request = daemon.only()
    assert (request.method, request.path) == ("PUT", "/v1/keys/ci-1/presence")
    assert request.json() == {"mode": "auto", "timeoutSeconds": 15}
    assert "auto" in result.out and "15 s" in result.out


def test_presence_set_only_mode_or_only_timeout(binary, daemon):
    daemon.route("PUT", "/v1/keys/default/presence", Reply(body={"mode": "deny", "timeoutSeconds": 30}))
    assert ctl(binary, daemon, "presence", "set", "deny").code == OK
    assert daemon.requests[-1].json() == {"mode": "deny"}
    assert ctl(binary, daemon, "presence", "set", "--timeout", "60").code == OK
    assert daemon.requests[-1].json() == {"timeoutSeconds": 60}


@pytest.mark.parametrize("args", [["presence", "set"], ["presence", "set", "maybe"],
                                  ["presence", "set", "auto", "--timeout", "0"]])
def test_presence_set_usage_errors_exit_64(binary, daemon, args):
    result = ctl(binary, daemon, *args)
    assert result.code == USAGE, result
    assert daemon.requests == []


# --------------------------------------------------------------------------
# pending, approve, deny


def test_pending_table(binary, daemon):
    daemon.route("GET", "/v1/presence/pending", Reply(body=[PENDING_1, PENDING_2]))
    result = ctl(binary, daemon, "pending")
    assert result.code == OK, result.err
    assert daemon.only().path == "/v1/presence/pending"
    for field in ("p-7", "makeCredential", "example.com", "alice", "1.2s", "28.8s", "p-8", "getAssertion"):
        assert field in result.out
    assert ctl(binary, daemon, "pending", "--json").json() == [PENDING_1, PENDING_2]


def test_pending_for_one_key(binary, daemon):
    daemon.route("GET", "/v1/presence/pending", Reply(body=[PENDING_1, PENDING_2]))
    result = ctl(binary, daemon, "pending", "--key", "ci-1")
    assert "p-8" in result.out and "p-7" not in result.out
    assert ctl(binary, daemon, "pending", "--key", "ci-1", "--json").json() == [PENDING_2]


def test_pending_empty_is_success_without_wait(binary, daemon):
    daemon.route("GET", "/v1/presence/pending", Reply(body=[]))
    result = ctl(binary, daemon, "pending")
    assert result.code == OK
    assert "No presence requests pending" in result.out


@pytest.mark.parametrize("verb,outcome", [("approve", "approved"), ("deny", "denied")])
def test_decide_by_id(binary, daemon, verb, outcome):
    daemon.route("POST", f"/v1/presence/pending/p-7/{verb}", Reply(body={"id": "p-7", "outcome": outcome}))
    result = ctl(binary, daemon, verb, "p-7")
    assert result.code == OK, result.err
    request = daemon.only()
    assert (request.method, request.path, request.body) == ("POST", f"/v1/presence/pending/p-7/{verb}", b"")
    assert f"p-7: {outcome}" in result.out
    assert ctl(binary, daemon, verb, "p-7", "--json").json() == {"id": "p-7", "outcome": outcome}


@pytest.mark.parametrize("verb,outcome", [("approve", "approved"), ("deny", "denied")])
def test_decide_without_id_picks_the_single_pending_request(binary, daemon, verb, outcome):
    daemon.route("GET", "/v1/presence/pending", Reply(body=[PENDING_1]))
    daemon.route("POST", f"/v1/presence/pending/p-7/{verb}", Reply(body={"id": "p-7", "outcome": outcome}))
    result = ctl(binary, daemon, verb)
    assert result.code == OK, result.err
    assert [(r.method, r.path) for r in daemon.requests] == [
        ("GET", "/v1/presence/pending"), ("POST", f"/v1/presence/pending/p-7/{verb}")]
    assert f"p-7: {outcome}" in result.out and "makeCredential for alice at example.com" in result.out


def test_approve_with_several_pending_needs_an_id_or_oldest(binary, daemon):
    daemon.route("GET", "/v1/presence/pending", Reply(body=[PENDING_1, PENDING_2, PENDING_3]))
    daemon.route("POST", "/v1/presence/pending/p-8/approve", Reply(body={"id": "p-8", "outcome": "approved"}))
    result = ctl(binary, daemon, "approve")
    assert result.code == USAGE
    assert "p-7" in result.err and "p-8" in result.err and "--oldest" in result.err
    assert all(r.method == "GET" for r in daemon.requests)

    result = ctl(binary, daemon, "approve", "--oldest")
    assert result.code == OK, result.err
    assert daemon.requests[-1].path == "/v1/presence/pending/p-8/approve"


def test_approve_key_filter_narrows_to_one(binary, daemon):
    daemon.route("GET", "/v1/presence/pending", Reply(body=[PENDING_1, PENDING_2]))
    daemon.route("POST", "/v1/presence/pending/p-7/approve", Reply(body={"id": "p-7", "outcome": "approved"}))
    result = ctl(binary, daemon, "approve", "--key", "default")
    assert result.code == OK, result.err
    assert daemon.requests[-1].path == "/v1/presence/pending/p-7/approve"


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_decide_with_nothing_pending_exits_4(binary, daemon, verb):
    daemon.route("GET", "/v1/presence/pending", Reply(body=[]))
    result = ctl(binary, daemon, verb)
    assert result.code == NOT_FOUND
    assert "no presence request pending" in result.err
    assert [r.method for r in daemon.requests] == ["GET"]


def test_approve_unknown_id_exits_4(binary, daemon):
    expect_not_found(binary, daemon, "POST", "/v1/presence/pending/p-1/approve", "no pending request p-1",
                     "approve", "p-1")


@pytest.mark.parametrize("command", [["approve"], ["deny"], ["pending"]])
def test_wait_times_out_with_4(binary, daemon, command):
    daemon.route("GET", "/v1/presence/pending", Reply(body=[]))
    started = time.monotonic()
    result = ctl(binary, daemon, *command, "--wait", "0.6")
    elapsed = time.monotonic() - started
    assert result.code == NOT_FOUND, result
    assert "after waiting" in result.err
    assert 0.6 <= elapsed < 10
    assert len(daemon.requests) >= 3  # it polled
    assert all(r.method == "GET" for r in daemon.requests)


def test_wait_approves_the_request_once_it_arrives(binary, daemon):
    polls = []

    def pending(_: Recorded) -> Reply:
        polls.append(time.monotonic())
        return Reply(body=[PENDING_1] if len(polls) >= 4 else [])

    daemon.route("GET", "/v1/presence/pending", pending)
    daemon.route("POST", "/v1/presence/pending/p-7/approve", Reply(body={"id": "p-7", "outcome": "approved"}))
    result = ctl(binary, daemon, "approve", "--wait", "10")
    assert result.code == OK, result.err
    assert len(polls) == 4
    assert daemon.requests[-1].path == "/v1/presence/pending/p-7/approve"


def test_wait_for_a_given_id(binary, daemon):
    polls = []

    def pending(_: Recorded) -> Reply:
        polls.append(1)
        return Reply(body=[PENDING_2] + ([PENDING_1] if len(polls) >= 3 else []))

    daemon.route("GET", "/v1/presence/pending", pending)
    daemon.route("POST", "/v1/presence/pending/p-7/deny", Reply(body={"id": "p-7", "outcome": "denied"}))
    result = ctl(binary, daemon, "deny", "p-7", "--wait", "10")
    assert result.code == OK, result.err
    assert len(polls) == 3
    assert daemon.requests[-1].path == "/v1/presence/pending/p-7/deny"


def test_id_and_oldest_together_is_a_usage_error(binary, daemon):
    assert ctl(binary, daemon, "approve", "p-7", "--oldest").code == USAGE
    assert daemon.requests == []


# --------------------------------------------------------------------------
# HTTP framing and malformed answers


@pytest.mark.parametrize("mode", ["length", "chunked", "close"])
def test_body_framings(binary, daemon, mode):
    daemon.route("GET", "/v1/keys", Reply(body=[DEFAULT_KEY, CI_KEY], mode=mode))
    result = ctl(binary, daemon, "keys", "list", "--json")
    assert result.code == OK, result.err
    assert result.json() == [DEFAULT_KEY, CI_KEY]


def test_large_chunked_answer(binary, daemon):
    many = [dict(CREDENTIAL, id=f"cred-{i:05d}", userName=f"user{i}") for i in range(3000)]
    daemon.route("GET", "/v1/keys/default/credentials", Reply(body=many, mode="chunked"))
    result = ctl(binary, daemon, "credentials")
    assert result.code == OK, result.err
    assert len(result.out.splitlines()) == 3001 and "cred-02999" in result.out


def test_interim_100_continue_is_skipped(binary, daemon):
    body = json.dumps({"mode": "auto", "timeoutSeconds": 30}).encode()
    raw = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    daemon.route("GET", "/v1/keys/default/presence", Reply(body=raw, mode="raw"))
    result = ctl(binary, daemon, "presence")
    assert result.code == OK, result.err
    assert "auto" in result.out


@pytest.mark.parametrize("reply", [
    Reply(body=b"{not json"),
    Reply(body={"version": "0.1.0"}),                                  # fields missing
    Reply(body=[1, 2, 3]),                                             # wrong shape
    Reply(body=b"garbage\r\n\r\n", mode="raw"),                       # not HTTP
    Reply(body=b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{}", mode="raw"),  # truncated
    Reply(body=b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", mode="raw"),
    Reply(body=b"HTTP/1.1 302 Found\r\nContent-Length: 0\r\n\r\n", mode="raw"),
], ids=["not-json", "missing-fields", "wrong-shape", "not-http", "truncated", "bad-chunk", "redirect"])
def test_malformed_answers_exit_70(binary, daemon, reply):
    daemon.route("GET", "/v1/status", reply)
    result = ctl(binary, daemon, "status")
    assert result.code == PROTOCOL, result
    assert "malformed" in result.err or "unexpected" in result.err


def test_json_mode_still_rejects_non_json(binary, daemon):
    daemon.route("GET", "/v1/status", Reply(body=b"<html>"))
    assert ctl(binary, daemon, "status", "--json").code == PROTOCOL


# --------------------------------------------------------------------------
# events: a server-sent event stream, read as it arrives

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def sse_chunk(text: str) -> bytes:
    data = text.encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_event(name: str, seq: int, **fields: Any) -> bytes:
    body = {"event": name, "key": "ci-1", "time": f"2026-01-01T00:00:0{seq}Z", "seq": seq, **fields}
    return sse_chunk(f"event: {name}\nid: {seq}\ndata: {json.dumps(body)}\n\n")


def test_events_print_each_event_until_the_daemon_closes(binary, daemon):
    stream = (SSE_HEAD + sse_chunk(": latchkeyd events\n\n") + sse_event("key.created", 1)
              + sse_event("presence.requested", 2, operation="makeCredential"))
    daemon.route("GET", "/v1/events?key=ci-1", Reply(body=stream, mode="raw"))  # closes mid-stream
    result = ctl(binary, daemon, "events", "--key", "ci-1")
    assert result.code == OK, result
    assert result.out.splitlines() == [
        "2026-01-01T00:00:01Z  key.created  ci-1",
        "2026-01-01T00:00:02Z  presence.requested  ci-1  operation=makeCredential",
    ]
    assert daemon.only().headers.get("Accept") == "text/event-stream"


def test_events_end_at_the_last_chunk(binary, daemon):
    daemon.route("GET", "/v1/events", Reply(body=SSE_HEAD + sse_event("key.deleted", 1) + b"0\r\n\r\n", mode="stream"))
    started = time.monotonic()
    result = ctl(binary, daemon, "events", "--json")
    assert result.code == OK, result
    assert [json.loads(line)["event"] for line in result.out.splitlines()] == ["key.deleted"]
    assert time.monotonic() - started < 5


def test_events_count_stops_a_stream_that_goes_on(binary, daemon):
    stream = SSE_HEAD + sse_event("a", 1) + sse_event("b", 2) + sse_event("c", 3)
    daemon.route("GET", "/v1/events", Reply(body=stream, mode="stream"))
    started = time.monotonic()
    result = ctl(binary, daemon, "events", "--count", "2", "--json")
    assert result.code == OK, result
    assert [json.loads(line)["event"] for line in result.out.splitlines()] == ["a", "b"]
    assert time.monotonic() - started < 5


def test_events_are_printed_as_they_arrive_and_ctrl_c_ends_them(binary, daemon):
    daemon.route("GET", "/v1/events", Reply(body=SSE_HEAD + sse_event("first", 1), mode="stream"))
    # Ctrl-C at a terminal: SIGINT with its default action, which a run started in
    # the background of a non-interactive shell (as CI may be) would inherit ignored
    proc = subprocess.Popen([binary, "--socket", daemon.path, "events", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = proc.stdout.readline()  # while the daemon keeps the stream open
        assert json.loads(line)["event"] == "first"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(5) == -signal.SIGINT
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_events_refused_by_the_daemon(binary, daemon):
    daemon.route("GET", "/v1/events?key=ci-1", error(400, "bad_request", "key: no"))
    result = ctl(binary, daemon, "events", "--key", "ci-1")
    assert result.code == REFUSED, result
    assert "latchkeyd refused GET /v1/events?key=ci-1: HTTP 400" in result.err and "key: no" in result.err
    result = ctl(binary, daemon, "events")  # no route: 404
    assert result.code == NOT_FOUND, result


def test_events_without_a_daemon_exit_69(binary, tmp_path):
    path = str(tmp_path / "nowhere.sock")
    result = run(binary, "events", socket_path=path)
    assert result.code == UNAVAILABLE, result
    assert result.err == f"Error: cannot connect to latchkeyd at {path}: connect failed: No such file or directory (errno 2)\n"


# --------------------------------------------------------------------------
# Reaching the daemon


def test_missing_socket_exits_69_naming_the_path(binary, tmp_path):
    path = str(tmp_path / "nowhere" / "control.sock")
    result = run(binary, "status", socket_path=path)
    assert result.code == UNAVAILABLE
    assert path in result.err and "no socket" in result.err


def test_refused_connection_exits_69(binary, tmp_path):
    path = str(tmp_path / "stale.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)  # bound, never listening: connect is refused
    try:
        result = run(binary, "keys", socket_path=path)
    finally:
        stale.close()
    assert result.code == UNAVAILABLE
    assert path in result.err and "refused" in result.err


def test_permission_denied_exits_69(binary):
    directory = pathlib.Path(tempfile.mkdtemp(prefix="latchkeyctl-perm-"))
    try:
        directory.chmod(0o755)
        fake = FakeDaemon(directory)
        try:
            os.chmod(fake.path, 0o660)
            prefix: tuple[str, ...] = ()
            if os.geteuid() == 0:
                # root ignores file modes: ask as nobody instead.
                setpriv = shutil.which("setpriv")
                assert setpriv, "setpriv (util-linux) is needed to test permissions as root"
                prefix = (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups")
            else:
                os.chmod(fake.path, 0o000)
            result = run(binary, "status", socket_path=fake.path, prefix=prefix)
        finally:
            fake.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert result.code == UNAVAILABLE, result
    assert "permission denied" in result.err and fake.path in result.err


def test_a_daemon_that_never_answers_times_out_with_69(binary, daemon):
    daemon.route("GET", "/v1/status", Reply(mode="hang"))
    started = time.monotonic()
    result = ctl(binary, daemon, "status", "--request-timeout", "0.5")
    assert result.code == UNAVAILABLE
    assert "did not answer" in result.err and daemon.path in result.err
    assert time.monotonic() - started < 5


def test_a_daemon_that_closes_without_answering_exits_69(binary, daemon):
    daemon.route("GET", "/v1/status", Reply(body=b"", mode="raw"))
    result = ctl(binary, daemon, "status")
    assert result.code == UNAVAILABLE
    assert "closed the connection" in result.err


def test_socket_from_environment(binary, daemon, tmp_path):
    daemon.route("GET", "/v1/keys", Reply(body=[]))
    assert run(binary, "keys", env={"LATCHKEY_SOCKET": daemon.path}).code == OK
    # --socket wins over the environment.
    result = run(binary, "keys", socket_path=str(tmp_path / "other.sock"), env={"LATCHKEY_SOCKET": daemon.path})
    assert result.code == UNAVAILABLE and "other.sock" in result.err


def test_socket_from_xdg_runtime_dir(binary, daemon, tmp_path):
    if os.path.exists("/run/latchkeyd/control.sock"):
        pytest.fail("a real latchkeyd socket exists at /run/latchkeyd/control.sock; this test needs it absent")
    runtime = tmp_path / "runtime"
    (runtime / "latchkeyd").mkdir(parents=True)
    os.symlink(daemon.path, runtime / "latchkeyd" / "control.sock")
    daemon.route("GET", "/v1/keys", Reply(body=[]))
    assert run(binary, "keys", env={"XDG_RUNTIME_DIR": str(runtime)}).code == OK
    result = run(binary, "keys", env={"XDG_RUNTIME_DIR": str(tmp_path / "empty")})
    assert result.code == UNAVAILABLE and str(tmp_path / "empty" / "latchkeyd" / "control.sock") in result.err


def test_global_options_go_before_or_after_the_subcommand(binary, daemon):
    daemon.route("GET", "/v1/keys", Reply(body=[DEFAULT_KEY]))
    before = run(binary, "--socket", daemon.path, "--json", "keys", "list")
    after = run(binary, "keys", "list", "--socket", daemon.path, "--json")
    assert before.code == after.code == OK
    assert before.json() == after.json() == [DEFAULT_KEY]


def test_requests_identify_themselves(binary, daemon):
    daemon.route("GET", "/v1/status", Reply(body={"version": "0.1.0", "uptimeSeconds": 1, "keys": []}))
    assert ctl(binary, daemon, "status").code == OK
    headers = daemon.only().headers
    assert headers.get("Host") == "localhost"
    assert headers.get("Accept") == "application/json"
    assert headers.get("User-Agent", "").startswith("latchkeyctl/")


# --------------------------------------------------------------------------
# Help and usage

SUBCOMMANDS = [
    [], ["status"], ["keys"], ["keys", "list"], ["keys", "create"], ["keys", "show"], ["keys", "delete"],
    ["credentials"], ["credentials", "list"], ["credentials", "delete"],
    ["presence"], ["presence", "show"], ["presence", "set"],
    ["pending"], ["approve"], ["deny"],
]


@pytest.mark.parametrize("command", SUBCOMMANDS, ids=lambda c: " ".join(c) or "root")
def test_help_of_every_command_exits_0_with_examples(binary, command):
    result = run(binary, *command, "--help")
    assert result.code == OK, result.err
    assert "USAGE:" in result.out
    assert "Examples:" in result.out


def test_root_help_documents_exit_codes(binary):
    out = run(binary, "--help").out
    for line in ("0   success", "1   the daemon refused", "4   not found", "64  usage error",
                 "69  the daemon is unavailable", "70  internal or protocol error"):
        assert line in out


def test_unknown_option_is_a_usage_error(binary, daemon):
    assert ctl(binary, daemon, "status", "--frobnicate").code == USAGE
    assert ctl(binary, daemon, "keys", "show").code == USAGE  # NAME missing
    assert ctl(binary, daemon, "status", "--request-timeout", "0").code == USAGE
    assert daemon.requests == []
