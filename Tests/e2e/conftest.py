"""Fixtures of the end-to-end suite: the real latchkeyd (or the stand-in USB/IP
server), its control API over the Unix socket, fresh keys per test, and devices opened
through our own USB/IP client.

    LATCHKEYD=.build/debug/latchkeyd python3 -m pytest -q Tests/e2e

The daemon runs once per session with a temporary state directory, USB/IP on a free
loopback port and no uhid; each test makes its own keys through the API and deletes
them afterwards. Run as root (the test command is), the suite starts every latchkeyd
as the unprivileged account lk-owner (scripts/test-accounts.sh), as a person's desktop
or a user unit would, and its control, event and USB/IP connections are opened by that
account (identities.py), so the daemon sees its owner; tests that need another account
or root ask for one. Run unprivileged, everything runs as the current user. Its log (stderr) is kept in a file; a failing test shows the lines
logged while it ran. Every device a test opens is checked afterwards for USB/IP
protocol deviations and unclaimed reports. A daemon that dies is restarted for the next
test and reported; one that needs SIGKILL to stop fails the session's teardown.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

E2E_DIR = Path(__file__).resolve().parent
REPO = E2E_DIR.parents[1]
sys.path.insert(0, str(E2E_DIR))

import ctaphid_raw as raw  # noqa: E402
import identities  # noqa: E402
import sse  # noqa: E402
import usbip_client as usbip  # noqa: E402
import usbip_hid  # noqa: E402
from sse import EventStream  # noqa: E402

HOST = "127.0.0.1"
STANDIN = E2E_DIR / "standin_usbip.py"


# ---- the accounts ---------------------------------------------------------------------

# The account every latchkeyd of the suite runs as, and which opens the suite's own
# connections; None when the suite cannot act as other accounts (not root): then
# everything runs as the current user.
OWNER = identities.account("owner")
if OWNER is not None:
    usbip.OPEN_CONNECTION = lambda host, port, timeout: OWNER.connect_tcp(host, port, timeout)
    sse.OPEN_SOCKET = lambda path: OWNER.connect_unix(path)


def as_daemon_account(argv: list) -> list[str]:
    """`argv` run as the account latchkeyd runs as (setpriv), its program where that
    account can run it; unchanged when the suite runs unprivileged."""
    return [str(a) for a in argv] if OWNER is None else OWNER.command(argv)


def runnable(binary: Path, test: str = "-x") -> Path:
    """`binary`, or a copy lk-owner can run (identities.runnable)."""
    return binary if OWNER is None else identities.runnable(binary, OWNER, test)


def owned_directory(path: Path, mode: int = 0o700) -> Path:
    """Creates `path` for lk-owner (identities.Account.directory), or for the current user
    when the suite runs unprivileged."""
    if OWNER is not None:
        return OWNER.directory(path, mode)
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    return path


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """When the suite acts as lk-owner, its temporary directories live in a directory of
    this run's own, not in /tmp/pytest-of-root: every pytest run as root (another suite,
    another checkout's) resets that one to 0700, which would lock lk-owner out of the
    state directories of a daemon still running."""
    if OWNER is not None and not config.option.basetemp:
        config.option.basetemp = tempfile.mkdtemp(prefix="latchkey-pytest-")


@pytest.fixture(scope="session", autouse=True)
def _accounts():
    yield
    identities.close_all()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, what: str, interval: float = 0.05):
    """Polls `predicate` until it returns something truthy; fails with `what` otherwise."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - remembered for the failure message
            last_error = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}"
                                 + (f" (last error: {last_error!r})" if last_error else ""))
        time.sleep(interval)


def terminate(proc: subprocess.Popen) -> None:
    """Stops a helper process started in its own session: SIGTERM, then SIGKILL to the
    session after 5 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


# ---- control API client ------------------------------------------------------------


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float, account: identities.Account | None = None):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path
        self.account = account

    def connect(self) -> None:
        if self.account is not None:
            self.sock = self.account.connect_unix(self.unix_path, self.timeout)
            self.sock.settimeout(self.timeout)
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.unix_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class APIError(AssertionError):
    def __init__(self, method: str, path: str, status: int, body):
        super().__init__(f"{method} {path} -> {status}: {body!r}")
        self.status = status
        self.body = body


# Every exchange any ControlClient of the session made, and every event stream the
# `events` fixture opened: test_zz_openapi.py checks each response and event against
# docs/control-api.openapi.yaml, and that every documented operation was called.
CONTROL_LOG: list[dict] = []
EVENT_STREAMS: list[EventStream] = []


class ControlClient:
    """HTTP/1.1 + JSON on the daemon's control socket; every exchange lands in CONTROL_LOG.
    It connects as `account` (by default lk-owner, the daemon's account; "root" for the
    suite's own uid, or an identities.Account)."""

    def __init__(self, path: str, timeout: float = 10.0, account: identities.Account | str | None = "owner"):
        self.path = path
        self.timeout = timeout
        self.account = identities.account(account) if account in ("owner", "other") else (
            None if account in ("root", None) else account)

    def as_account(self, account: identities.Account | str | None) -> "ControlClient":
        """The same socket, spoken to as another account."""
        return ControlClient(self.path, self.timeout, account)

    def request(self, method: str, path: str, body=None, expect=200):
        conn = UnixHTTPConnection(self.path, self.timeout, self.account)
        try:
            headers = {}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
            status = response.status
            content_type = response.getheader("Content-Type") or ""
            headers = dict(response.getheaders())
        finally:
            conn.close()
        parsed = None
        if raw:
            assert "json" in content_type, f"{method} {path}: Content-Type {content_type!r} for {raw[:200]!r}"
            parsed = json.loads(raw)
        CONTROL_LOG.append({"method": method, "path": path, "request": body, "status": status, "headers": headers,
                            "media": content_type.split(";")[0].strip() if raw else None, "body": parsed})
        expected = expect if isinstance(expect, (tuple, list, set)) else (expect,)
        if expect is not None and status not in expected:
            raise APIError(method, path, status, parsed if parsed is not None else raw)
        if status >= 400:
            assert_error_document(parsed)
        return parsed if expect is not None else (status, parsed)

    def get(self, path, expect=200):
        return self.request("GET", path, expect=expect)

    def post(self, path, body=None, expect=200):
        return self.request("POST", path, body, expect=expect)

    def put(self, path, body, expect=200):
        return self.request("PUT", path, body, expect=expect)

    def delete(self, path, expect=204):
        return self.request("DELETE", path, expect=expect)

    def key(self, name: str) -> dict:
        return self.get(f"/v1/keys/{name}")

    def pending(self, key: str | None = None) -> list[dict]:
        entries = self.get("/v1/presence/pending")
        return [p for p in entries if key is None or p["key"] == key]

    def decide(self, key: str, verdict: str, what: str = "a pending request") -> dict:
        """Waits for the one presence request pending on `key`, then answers it: `verdict`
        is "approve" or "deny". Returns the request."""
        [entry] = wait_for(lambda: self.pending(key), 5, what)
        self.post(f"/v1/presence/pending/{entry['id']}/{verdict}")
        return entry


def assert_error_document(body) -> None:
    assert isinstance(body, dict) and set(body) == {"error"}, f"error body {body!r}"
    error = body["error"]
    assert isinstance(error.get("code"), str) and error["code"], f"error body {body!r}"
    assert isinstance(error.get("message"), str), f"error body {body!r}"


# ---- the daemon -----------------------------------------------------------------------


class Daemon:
    """One latchkeyd process at a time, restartable."""

    def __init__(self, binary: Path, workdir: Path, session_bus: str | None = None):
        self.binary = binary
        self.workdir = workdir
        # The daemon sees a session D-Bus only when a test gives it one: on a
        # desktop the suite must not pop real notifications.
        self.session_bus = session_bus
        self.proc: subprocess.Popen | None = None
        self.runs = itertools.count(1)
        self.log_path: Path | None = None
        self.port = 0
        self.state_dir: Path | None = None
        self.control: ControlClient | None = None
        self.problems: list[str] = []
        self.extra_args: list[str] = []

    def start(self, timeout: float = 20.0) -> None:
        owned_directory(self.workdir, 0o750)
        for _attempt in range(3):
            run = next(self.runs)
            self.port = free_port()
            self.state_dir = owned_directory(self.workdir / f"state{run}")
            # The socket's directory lets the group in (as /run/latchkeyd does), so that
            # another member of it can reach the socket and be refused by the daemon.
            socket_path = owned_directory(self.workdir / f"run{run}", 0o750) / "control.sock"
            self.log_path = self.workdir / f"latchkeyd{run}.log"
            argv = as_daemon_account([
                self.binary, "--state-dir", self.state_dir, "--no-uhid", "--usbip", f"{HOST}:{self.port}",
                "--presence", "auto", "--control-socket", socket_path, *self.extra_args])
            with open(self.log_path, "wb") as log:
                log.write(("$ " + " ".join(argv) + "\n").encode())
                log.flush()
                env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
                env["XDG_RUNTIME_DIR"] = str(self.workdir)  # hides $XDG_RUNTIME_DIR/bus too
                if self.session_bus:
                    env["DBUS_SESSION_BUS_ADDRESS"] = self.session_bus
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, env=env,
                                             stderr=subprocess.STDOUT, start_new_session=True)
            self.control = ControlClient(str(socket_path))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    self.control.get("/v1/status")
                    usbip.list_devices(HOST, self.port, timeout=2)
                    return
                except (OSError, AssertionError, usbip.USBIPError):
                    time.sleep(0.05)
            code = self.proc.poll()
            log_text = self.log_text()
            self.stop()
            if code is not None and "in use" in log_text.lower():
                continue  # lost the race for the free port; try another
            raise RuntimeError(f"latchkeyd did not come up (exit {code}); its log:\n{log_text}")
        raise RuntimeError("latchkeyd could not bind a free port three times")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self, since: int = 0) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(since)
            return f.read().decode("utf-8", "replace")

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path and self.log_path.exists() else 0

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.problems.append(f"latchkeyd ignored SIGTERM for {timeout} s and was killed "
                                 f"(log {self.log_path})")
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
            return
        if proc.returncode not in (0, -signal.SIGTERM, 128 + signal.SIGTERM):
            self.problems.append(f"latchkeyd exited with {proc.returncode} on SIGTERM (log {self.log_path})")


_daemon: Daemon | None = None


def built_binary(variable: str, default: str) -> Path:
    """The binary `$variable` names, else `default`; a relative path from the working
    directory, else from the repository."""
    path = Path(os.environ.get(variable, default))
    if not path.is_absolute():
        cwd_path = Path.cwd() / path
        path = cwd_path if cwd_path.exists() else REPO / path
    return path


def daemon_binary() -> Path:
    return built_binary("LATCHKEYD", ".build/debug/latchkeyd")


def latchkeyctl_binary() -> Path:
    """$LATCHKEYCTL, else latchkeyctl beside the daemon's binary; skips (fails, when the
    variable names it) a test when there is none."""
    path = built_binary("LATCHKEYCTL", str(daemon_binary().parent / "latchkeyctl"))
    if not path.exists():
        if os.environ.get("LATCHKEYCTL"):
            pytest.fail(f"LATCHKEYCTL={path} does not exist: build it with swift build")
        pytest.skip(f"no latchkeyctl at {path} (set LATCHKEYCTL)")
    return path


def latchkeyctl_command(socket_path: str) -> list[str]:
    """latchkeyctl on `socket_path`, run as the daemon's account (the keys' owner)."""
    return as_daemon_account([latchkeyctl_binary(), "--socket", socket_path])


@pytest.fixture
def latchkeyctl(daemon):
    """Runs latchkeyctl against the session's daemon as its owner: (*args, stdin="") -> CompletedProcess."""
    command = latchkeyctl_command(daemon.control.path)

    def run(*args: str, stdin: str = "", timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run([*command, *args], input=stdin, capture_output=True, text=True, timeout=timeout)

    run.command = command
    return run


@pytest.fixture(scope="session")
def daemon_process(tmp_path_factory):
    global _daemon
    binary = daemon_binary()
    if not binary.exists():
        if os.environ.get("LATCHKEYD"):
            pytest.fail(f"LATCHKEYD={binary} does not exist: build it with swift build")
        pytest.skip(f"no latchkeyd at {binary} (set LATCHKEYD)")
    daemon = Daemon(binary, tmp_path_factory.mktemp("latchkeyd"))
    daemon.start()
    _daemon = daemon
    yield daemon
    _daemon = None
    daemon.stop()
    if daemon.problems:
        pytest.fail("; ".join(daemon.problems) + "\n" + daemon.log_text()[-4000:])


@pytest.fixture
def daemon(daemon_process):
    """The running daemon; one that died during an earlier test is restarted first.
    The test fails if the daemon dies during it."""
    if not daemon_process.alive:
        daemon_process.start()
    yield daemon_process
    if not daemon_process.alive:
        code = daemon_process.proc.returncode if daemon_process.proc else None
        pytest.fail(f"latchkeyd died during the test (exit {code}); its log:\n"
                    + daemon_process.log_text()[-6000:])


@pytest.fixture
def control(daemon) -> ControlClient:
    return daemon.control


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    daemon = _daemon
    if call.when == "setup":
        item._latchkeyd_log_start = (daemon.log_path, daemon.log_size()) if daemon else (None, 0)
    if report.failed and daemon is not None:
        path, start = getattr(item, "_latchkeyd_log_start", (None, 0))
        text = daemon.log_text(start if path == daemon.log_path else 0)
        if len(text) > 20000:
            text = "...\n" + text[-20000:]
        report.sections.append(("latchkeyd log during the test", text or "(nothing logged)"))


@pytest.fixture
def events(daemon):
    """Opens the daemon's event stream (every key's, or one key's); closed after the test."""
    streams = []

    def open_stream(key: str | None = None) -> EventStream:
        stream = EventStream(daemon.control.path, key)
        streams.append(stream)
        EVENT_STREAMS.append(stream)
        CONTROL_LOG.append({"method": "GET", "path": stream.target, "request": None, "status": 200,
                            "headers": stream.headers, "media": stream.headers["content-type"].split(";")[0].strip(),
                            "body": None})
        return stream

    yield open_stream
    for stream in streams:
        stream.close()


_key_names = itertools.count(1)


@pytest.fixture
def make_key(control, daemon, request):
    """Creates keys through the control API (USB/IP only); deletes them after the test."""
    created = []

    def make(presence: str | None = None, attestation: str | None = None, name: str | None = None,
             options: dict | None = None) -> dict:
        if name is None:
            stem = re.sub(r"[^A-Za-z0-9_.-]", "-", request.node.name)[:40]
            name = f"k{next(_key_names)}-{stem}"
        body = {"name": name, "uhid": False, "usbip": True}
        if presence is not None:
            body["presence"] = presence
        if attestation is not None:
            body["attestation"] = attestation
        body.update(options or {})
        doc = control.post("/v1/keys", body, expect=201)
        created.append(name)
        assert doc["name"] == name, doc
        assert doc["usbip"] and doc["usbip"]["busid"], f"key without a USB/IP export: {doc}"
        busid = doc["usbip"]["busid"]
        wait_for(lambda: any(d.busid == busid for d in usbip.list_devices(HOST, daemon.port)),
                 5, f"{busid} in the USB/IP device list")
        return doc

    yield make
    if daemon.alive:
        for name in created:
            control.delete(f"/v1/keys/{name}", expect=(204, 404))


@pytest.fixture
def key(make_key) -> dict:
    return make_key()


class Opened:
    """Tracks what a test opened over USB/IP, closes it, and checks it afterwards."""

    def __init__(self, port: int, strict: bool):
        self.port = port
        self.strict = strict
        self.interfaces: list[usbip_hid.UsbipHidInterface] = []
        self.raw: list[usbip.AttachedDevice] = []

    def interface(self, busid: str, **kw) -> usbip_hid.UsbipHidInterface:
        iface = usbip_hid.UsbipHidInterface(HOST, self.port, busid, close_with_last_connection=False, **kw)
        self.interfaces.append(iface)
        return iface

    def ctap(self, busid: str, read_timeout: float = 20.0):
        """python-fido2's CtapHidDevice on a fresh import of `busid`."""
        return self.interface(busid).ctap_device(read_timeout)

    def attach(self, busid: str) -> usbip.AttachedDevice:
        dev = usbip.import_device(HOST, self.port, busid)
        self.raw.append(dev)
        return dev

    def channels(self, busid: str) -> raw.HostChannels:
        """Raw CTAPHID on a fresh import of `busid`: enumerated, two IN URBs queued."""
        dev = self.attach(busid)
        usbip_hid.enumerate_fido_device(dev)
        dev.start_input(2)
        return raw.HostChannels(dev)

    def close_and_check(self) -> list[str]:
        problems = []
        devices = [(i.device, i) for i in self.interfaces] + [(d, None) for d in self.raw]
        for dev, iface in devices:
            if self.strict and dev.deviations:
                problems.append(f"{dev.record.busid}: USB/IP deviations: {dev.deviations[:5]}")
            if dev.failure is not None and not isinstance(dev.failure, usbip.Disconnected):
                problems.append(f"{dev.record.busid}: USB/IP connection failed: {dev.failure!r}")
            if iface is not None and iface.stray_reports:
                problems.append(f"{dev.record.busid}: reports for no channel: "
                                + " ".join(r[:8].hex() for r in iface.stray_reports[:5]))
        for iface in self.interfaces:
            iface.close()
        for dev in self.raw:
            dev.close()
        return problems


@pytest.fixture
def usb(daemon, make_key):
    """Opens latchkeyd's devices over our USB/IP client; strict about the protocol.
    (It needs `make_key` so that it is torn down first: devices close and are checked
    before their keys are deleted.)"""
    opened = Opened(daemon.port, strict=True)
    yield opened
    problems = opened.close_and_check()
    if problems:
        pytest.fail("; ".join(problems))


# ---- the rig's stand-in server ---------------------------------------------------------


@pytest.fixture(scope="module")
def standin():
    """The stand-in USB/IP server (standin_usbip.py, on PyPI usbip 0.7.0): (port, busid)."""
    pytest.importorskip("usbip", reason="pip install usbip==0.7.0 for the stand-in server")
    if not STANDIN.exists():
        pytest.skip(f"no stand-in server at {STANDIN}")
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(STANDIN), "--host", HOST, "--port", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        line = proc.stdout.readline().split()
        assert line[:1] == ["READY"], f"stand-in said {line!r}: {proc.stderr.read() if proc.poll() is not None else ''}"
        yield port, line[1]
    finally:
        terminate(proc)


@pytest.fixture
def standin_usb(standin):
    """Like `usb`, for the stand-in, which echoes devid/direction/ep (tolerated)."""
    opened = Opened(standin[0], strict=False)
    yield opened
    problems = opened.close_and_check()
    if problems:
        pytest.fail("; ".join(problems))
