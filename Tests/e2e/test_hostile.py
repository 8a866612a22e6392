"""Hostile input on the control API (issue 10): key names that try to be paths, on every
`{name}` and `{id}` route, sent as the daemon's own client would, percent-encoded and raw
(path as is, bytes straight onto the Unix socket); names too long or holding NUL; heads,
URLs and bodies over their limits; idle and slow connections crowding out a working
client; methods a path does not take. Each test asserts the answer and that no file of
the state directory changed (their hashes, before and after). The last test checks that
the daemon is alive, its state directory as it was when the module began, and every key
still signs. USB/IP hostile input is in test_hostile_usbip.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

import rp
from conftest import HOST, OWNER, UnixHTTPConnection, assert_error_document
from conftest import Opened

GRAMMAR = "[A-Za-z0-9][A-Za-z0-9._-]{0,63}"

# ---- the state directory ----------------------------------------------------------------


def state_hashes(root: Path) -> dict[str, str]:
    """Every entry under the state directory: a file by its SHA-256, a directory, link or
    socket by its kind. SQLite's -shm files are left out: they are the WAL's shared-memory
    index, which readers write to, not data."""
    hashes = {}
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            hashes[relative] = "link -> " + os.readlink(path)
        elif stat.S_ISDIR(mode):
            hashes[relative] = "directory"
        elif stat.S_ISSOCK(mode):
            hashes[relative] = "socket"
        elif relative.endswith("-shm"):
            continue
        else:
            hashes[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


# ---- raw HTTP over the Unix socket ------------------------------------------------------


class Answer:
    def __init__(self, status: int | None, headers: dict[str, str], body: bytes, closed: bool):
        self.status, self.headers, self.body, self.closed = status, headers, body, closed

    def json(self):
        assert "json" in self.headers.get("content-type", ""), f"not JSON: {self.headers} {self.body[:200]!r}"
        return json.loads(self.body)

    def __repr__(self):
        return f"Answer({self.status}, {self.headers}, {self.body[:300]!r}, closed={self.closed})"


def read_answer(sock: socket.socket, timeout: float = 5.0, closed_within: float = 0, body: bool = True) -> Answer:
    """One HTTP response from `sock` (Content-Length framed; no body when `body` is false, as
    for HEAD), then, when `closed_within` is given, whether the server closed the connection
    within that many seconds (else `closed` is None)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return Answer(None, {}, data, True)
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0")) if body else 0
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    if not closed_within:
        return Answer(status, headers, rest[:length], None)
    sock.settimeout(closed_within)
    try:
        closed = sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        closed = True
    except TimeoutError:
        closed = False
    return Answer(status, headers, rest[:length], closed)


def raw_request(socket_path: str, data: bytes, timeout: float = 5.0, closes: bool = False) -> Answer:
    """Writes `data` as is (a head and maybe a body) and reads the answer; with `closes`,
    also whether the server then closed the connection. A server that answers and closes
    before taking every byte is fine: the answer is read all the same."""
    # As the keys' owner (the daemon's account), so that the daemon's answer is about the
    # request, not about who may make it (docs/access.md).
    if OWNER is not None:
        sock = OWNER.connect_unix(socket_path, timeout)
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(socket_path)
    sock.settimeout(timeout)
    try:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return read_answer(sock, timeout, closed_within=2.0 if closes else 0, body=not data.startswith(b"HEAD "))
    finally:
        sock.close()


def request_bytes(method: str, target: str | bytes, body: bytes | None = None, headers: dict | None = None) -> bytes:
    target = target if isinstance(target, bytes) else target.encode("latin-1")
    lines = [method.encode() + b" " + target + b" HTTP/1.1", b"Host: localhost"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}".encode("latin-1"))
    if body is not None:
        lines.append(b"Content-Type: application/json")
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


def assert_error(answer: Answer, status: int | tuple, code: str | None = None, closed: bool | None = None) -> dict:
    statuses = status if isinstance(status, tuple) else (status,)
    assert answer.status in statuses, answer
    document = answer.json()
    assert_error_document(document)
    if code is not None:
        assert document["error"]["code"] == code, answer
    if closed is not None:
        assert answer.closed == closed, f"connection {'not ' if closed else ''}closed after {answer}"
    return document


# ---- fixtures ---------------------------------------------------------------------------

VICTIMS = ("hostile-a", "hostile-b")


@pytest.fixture(scope="module")
def victims(daemon_process):
    """Two API keys with a discoverable credential each, made once for the module; the
    state directory's hashes once they exist. Deleted at the end of the module."""
    control = daemon_process.control
    if not daemon_process.alive:
        daemon_process.start()
        control = daemon_process.control
    opened = Opened(daemon_process.port, strict=True)
    made = {}
    try:
        for name in VICTIMS:
            doc = control.post("/v1/keys", {"name": name, "uhid": False, "usbip": True, "presence": "auto"},
                               expect=201)
            busid = doc["usbip"]["busid"]
            client = rp.make_client(opened.ctap(busid), rp.NoPinInteraction())
            server = rp.make_server()
            registration = rp.register(client, server, resident_key=True)
            made[name] = (busid, registration.credential)
        problems = opened.close_and_check()
        assert not problems, problems
        # Let SQLite settle (the store checkpoints its WAL) before the snapshot.
        time.sleep(0.5)
        yield {"keys": made, "hashes": state_hashes(daemon_process.state_dir)}
    finally:
        if daemon_process.alive:
            for name in VICTIMS:
                control.delete(f"/v1/keys/{name}", expect=(204, 404))


@pytest.fixture
def unchanged(daemon, victims):
    """Fails the test if any file of the state directory changed during it."""
    before = state_hashes(daemon.state_dir)
    yield daemon
    after = state_hashes(daemon.state_dir)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert not changed, f"the state directory changed: {sorted(changed)}"


@pytest.fixture(scope="module")
def routes(daemon_process) -> list[dict]:
    return daemon_process.control.get("/v1/api/routes")


def concrete(path: str, name: str, ident: str = "AAAA") -> str:
    return path.replace("{name}", name).replace("{id}", ident)


def body_for(method: str) -> bytes | None:
    return b"{}" if method in ("POST", "PUT") else None


# ---- names that try to be paths ---------------------------------------------------------

# As they go on the wire, in the path; each is one segment for the router.
HOSTILE_SEGMENTS = [
    ".", "..", "...", "%2e", "%2e%2e", "%2E%2E", ".%2e", "%2e.", "..%2f..", "..%2F", "%2F", "a%2Fb",
    "%2e%2e%2f%2e%2e%2fmaster-key", "..%5c..", "%252e%252e", "%00", "a%00b", ".hidden", "-rf", "_x",
    "%C3%A9", "a%20b", "%", "%zz", "x" * 65, "y" * 4000,
]


def test_hostile_names_on_every_name_route(unchanged, routes):
    """Every `{name}` route, every method it takes, each hostile segment sent raw: a 400 that
    names the grammar, before any handler runs; nothing on disk changes."""
    name_routes = [r for r in routes if "{name}" in r["path"]]
    assert len(name_routes) >= 30, name_routes
    socket_path = unchanged.control.path
    for route in name_routes:
        for segment in HOSTILE_SEGMENTS:
            target = concrete(route["path"], segment)
            answer = raw_request(socket_path, request_bytes(route["method"], target, body_for(route["method"])))
            document = assert_error(answer, 400, "bad_request")
            message = document["error"]["message"]
            assert GRAMMAR in message or "% escape" in message, (route, segment, answer)


def test_raw_traversal_paths_never_reach_a_key(unchanged, routes):
    """Paths a client that normalizes would never send (`--path-as-is`): `..` that would climb
    out of /v1/keys, separators inside what should be one segment, empty segments."""
    socket_path = unchanged.control.path
    targets = [
        ("DELETE", "/v1/keys/.."), ("DELETE", "/v1/keys/."), ("DELETE", "/v1/keys/../.."),
        ("DELETE", "/v1/keys/../../master-key"), ("DELETE", "/v1/keys/hostile-a/.."),
        ("DELETE", "/v1/keys/hostile-a/../hostile-b"), ("DELETE", "/v1/keys//"), ("DELETE", "/v1/keys/"),
        ("GET", "/v1/keys/../keys/hostile-a"), ("POST", "/v1/keys/../reset"), ("POST", "/v1/keys/hostile-a/../../reset"),
        ("DELETE", "/v1/keys/%2e%2e/credentials"), ("DELETE", "/v1/keys/hostile-a/credentials/.."),
        ("DELETE", "/v1/keys/hostile-a/credentials/%2e%2e"), ("DELETE", "/v1/keys/hostile-a/credentials/..%2f..%2fx"),
        ("GET", "/v1/keys/hostile-a/credentials/%2F"), ("PUT", "/v1/keys/hostile-a/credentials/../user"),
        ("DELETE", "/v1/keys/hostile-a/credentials/."), ("DELETE", "/v1/keys/hostile-a/overrides/.."),
        ("POST", "/v1/presence/pending/../approve"), ("POST", "/v1/presence/pending/%2e%2e/deny"),
        ("POST", "/v1/presence/pending/p-1%2F..%2F/approve"), ("GET", "/v1/../v1/status/.."),
    ]
    for method, target in targets:
        answer = raw_request(socket_path, request_bytes(method, target, body_for(method)))
        # 400 (a bad name or id), 404 (no such route, credential or request) or 405 (the
        # path exists, not with this method): never a success.
        assert_error(answer, (400, 404, 405))
    for name in VICTIMS:
        assert unchanged.control.key(name)["name"] == name


def test_hostile_ids_on_every_id_route(unchanged, routes):
    socket_path = unchanged.control.path
    id_routes = [r for r in routes if "{id}" in r["path"]]
    assert id_routes
    for route in id_routes:
        for ident in ["..", ".", "%2e%2e", "%2F", "..%2F..", "%00", "a" * 4000, "%zz", "p-1%2F.."]:
            name = "hostile-a" if "{name}" in route["path"] else "unused"
            target = concrete(route["path"], name, ident)
            answer = raw_request(socket_path, request_bytes(route["method"], target, body_for(route["method"])))
            assert_error(answer, (400, 404))


def test_hostile_names_through_the_client(unchanged, control):
    """The way the suite's client sends them (http.client, percent-encoded by us)."""
    for name in ["..", ".", "%2e%2e", "a%2Fb", "x" * 65, ".hidden", "%00"]:
        control.get(f"/v1/keys/{name}", expect=400)
        control.delete(f"/v1/keys/{name}", expect=400)
        control.post(f"/v1/keys/{name}/reset", expect=400)


@pytest.mark.parametrize("name", [".", "..", "../x", "a/b", "a/../b", "a\u0000b", "\u0000", "x" * 65, "", ".hidden",
                                  "-x", "%2e%2e", "é", "a b", "a\nb", "keys/../..", "y" * 60_000], ids=lambda name: repr(name)[:24])
def test_creating_a_key_with_a_hostile_name(unchanged, control, name):
    answer = control.post("/v1/keys", {"name": name, "usbip": False, "uhid": False}, expect=400)
    assert GRAMMAR in answer["error"]["message"], answer
    assert all(k["name"] != name for k in control.get("/v1/keys"))


def test_a_hostile_event_filter(unchanged, control):
    for name in ["..", "%2e%2e", "a%2Fb", "x" * 65, "%00"]:
        answer = raw_request(control.path, request_bytes("GET", f"/v1/events?key={name}"))
        assert GRAMMAR in assert_error(answer, 400, "bad_request")["error"]["message"]


def test_a_raw_nul_and_control_bytes_in_the_path(unchanged, control):
    for target in [b"/v1/keys/a\x00b", b"/v1/keys/\x00", b"/v1/keys/a\x01b/reset", b"/v1/keys/a\x7fb"]:
        answer = raw_request(control.path, request_bytes("DELETE", target), closes=True)
        assert_error(answer, 400, "bad_request", closed=True)


# ---- limits -----------------------------------------------------------------------------


def test_a_huge_header_line_is_431_then_close(unchanged, control):
    answer = raw_request(control.path, request_bytes("GET", "/v1/status", headers={"X-Big": "a" * (1 << 20)}), closes=True)
    assert_error(answer, 431, "headers_too_large", closed=True)


def test_too_many_headers_is_431_then_close(unchanged, control):
    headers = {f"X-H{i}": "v" for i in range(150)}
    answer = raw_request(control.path, request_bytes("GET", "/v1/status", headers=headers), closes=True)
    assert_error(answer, 431, "headers_too_large", closed=True)


def test_a_head_over_32_kib_is_431_then_close(unchanged, control):
    headers = {f"X-H{i}": "v" * 1000 for i in range(40)}
    answer = raw_request(control.path, request_bytes("GET", "/v1/status", headers=headers), closes=True)
    assert_error(answer, 431, "headers_too_large", closed=True)


@pytest.mark.parametrize("length", [9 * 1024, 20 * 1024, 1 << 20])
def test_a_huge_url_is_414_then_close(unchanged, control, length):
    answer = raw_request(control.path, request_bytes("GET", "/v1/keys/" + "a" * length), closes=True)
    assert_error(answer, 414, "uri_too_long", closed=True)


def test_a_body_over_the_route_limit_is_413_then_close(unchanged, control):
    body = json.dumps({"name": "x" * (64 * 1024)}).encode()
    answer = raw_request(control.path, request_bytes("POST", "/v1/keys", body), closes=True)
    assert_error(answer, 413, "too_large", closed=True)


def test_a_content_length_over_the_limit_is_refused_before_the_body(unchanged, control):
    """The head alone, announcing 17 MiB: the answer comes without a byte of body sent."""
    for target in ["/v1/keys/hostile-a/import", "/v1/keys", "/v1/status"]:
        head = request_bytes("POST", target, headers={"Content-Type": "application/json",
                                                      "Content-Length": str(17 << 20)})
        answer = raw_request(control.path, head, closes=True)
        assert_error(answer, 413, "too_large", closed=True)


def test_a_chunked_body_over_the_limit_is_413_then_close(unchanged, control):
    chunk = b"x" * 65536
    body = b"".join(b"%x\r\n" % len(chunk) + chunk + b"\r\n" for _ in range(2)) + b"0\r\n\r\n"
    head = request_bytes("POST", "/v1/keys", headers={"Content-Type": "application/json",
                                                      "Transfer-Encoding": "chunked"})
    answer = raw_request(control.path, head + body, closes=True)
    assert_error(answer, 413, "too_large", closed=True)


def test_garbage_is_400_then_close(unchanged, control):
    for data in [b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64), b"GET / HTTP/9.9\r\n\r\n",
                 b"BREW /v1/status HTTP/1.1\r\n\r\n", b"GET /v1/status HTTP/1.1\r\nContent-Length: -1\r\n\r\n"]:
        answer = raw_request(control.path, data, closes=True)
        assert_error(answer, 400, "bad_request", closed=True)


# ---- connections ------------------------------------------------------------------------


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed `sock` (a pending byte or nothing yet: no)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_idle_and_slow_connections_never_hold_a_slot(unchanged, control):
    """100 connections that never send a byte and one whose head trickles in (slowloris)
    while a working client is served at once, every time; then the daemon closes every one
    of them by its read deadline (10 s without a complete request), the trickler included."""
    idle = []
    trickler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        trickler.connect(control.path)
        trickler.sendall(b"GET /v1/status HTTP/1.1\r\nHost: localhost\r\n")
        for _ in range(100):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(control.path)
            idle.append(sock)
        opened = time.monotonic()
        for _ in range(20):
            started = time.monotonic()
            control.get("/v1/status")
            control.get("/v1/keys/hostile-a")
            assert time.monotonic() - started < 2.0, "a working client waited behind idle connections"
        trickler_closed = False
        while time.monotonic() - opened < 16 and not (trickler_closed and all(map(closed_by_server, idle))):
            try:
                trickler.sendall(b"X-Slow: 1\r\n")
            except (BrokenPipeError, ConnectionResetError):
                trickler_closed = True
            time.sleep(0.5)
        open_ones = sum(not closed_by_server(sock) for sock in idle)
        assert trickler_closed, "a head trickling in kept its connection past the read deadline"
        assert open_ones == 0, f"{open_ones} idle connections still open 16 s later"
        control.get("/v1/status")
    finally:
        trickler.close()
        for sock in idle:
            sock.close()


# ---- methods and unknown paths ----------------------------------------------------------


def test_a_wrong_method_is_405_with_allow(unchanged, control, routes):
    by_path: dict[str, set[str]] = {}
    for route in routes:
        by_path.setdefault(route["path"], set()).add(route["method"])
    for path, methods in by_path.items():
        for method in {"GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS"} - methods:
            target = concrete(path, "hostile-a", "p-1")
            answer = raw_request(control.path, request_bytes(method, target, body_for(method)))
            assert answer.status == 405, (method, target, answer)
            assert set(answer.headers["allow"].split(", ")) == methods, (method, target, answer.headers)
            if method != "HEAD":
                assert_error(answer, 405, "method_not_allowed")


def test_an_unknown_path_is_a_404_document(unchanged, control):
    for target in ["/", "/v2/keys", "/v1/keys/hostile-a/nope", "/v1/keys/hostile-a/credentials/x/y/z", "/v1"]:
        answer = raw_request(control.path, request_bytes("GET", target))
        assert_error(answer, 404, "not_found")


# ---- memory -----------------------------------------------------------------------------


def vm_rss_kib(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", text, re.M).group(1))


def test_rss_comes_back_after_100_large_bodies(unchanged, control):
    """100 import bodies of 4 MiB (JSON the daemon parses and refuses: not CXF); the
    daemon's resident memory afterwards is within 2 MiB of what it was before."""
    pid = unchanged.proc.pid
    body = json.dumps({"document": {"padding": "x" * (4 << 20)}}).encode()
    data = request_bytes("POST", "/v1/keys/hostile-a/import", body)

    def send():
        answer = raw_request(control.path, data, timeout=30)
        assert_error(answer, 400, "bad_request")

    control.get("/v1/status")
    time.sleep(0.5)
    before = vm_rss_kib(pid)
    for _ in range(100):
        send()
    time.sleep(0.5)
    after = vm_rss_kib(pid)
    print(f"VmRSS before {before} KiB, after 100 bodies of {len(body)} bytes {after} KiB")
    assert after - before <= 2048, f"VmRSS grew from {before} to {after} KiB"


# ---- afterwards -------------------------------------------------------------------------


def test_zz_afterwards_the_daemon_lives_its_files_are_intact_and_every_key_signs(daemon, victims):
    assert daemon.alive
    now = state_hashes(daemon.state_dir)
    changed = {k for k in victims["hashes"].keys() | now.keys() if victims["hashes"].get(k) != now.get(k)}
    assert not changed, f"the state directory changed during the module: {sorted(changed)}"
    names = {k["name"] for k in daemon.control.get("/v1/keys")}
    assert set(VICTIMS) <= names
    opened = Opened(daemon.port, strict=True)
    try:
        for name, (busid, credential) in victims["keys"].items():
            client = rp.make_client(opened.ctap(busid), rp.NoPinInteraction())
            signed = rp.authenticate(client, rp.make_server(), [credential], allow=True)
            assert signed.credential_id == credential.credential_id, name
    finally:
        problems = opened.close_and_check()
    assert not problems, problems
