"""Desktop notifications for prompts, against a fake org.freedesktop.Notifications
server (fake_notifications.py) on a private session bus (dbus-daemon): the daemon shows
a notification with Allow and Deny for each prompt, a click answers the request, a
request answered elsewhere closes its notification, and a conditional registration is
announced. Needs dbus-daemon, gdbus and PyGObject (Debian: dbus, libglib2.0-bin,
python3-gi); skipped without them."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2

import rp
from test_control_api import start_in_thread
from conftest import Daemon, Opened, as_daemon_account, daemon_binary, runnable, terminate, wait_for

E2E_DIR = Path(__file__).resolve().parent
FAKE_SERVER = E2E_DIR / "fake_notifications.py"


def python_with_gi() -> str | None:
    """A Python with PyGObject that the daemon's account can run (the bus and the fake
    server run as that account, which a session bus requires of its clients)."""
    for candidate in ("/usr/bin/python3", sys.executable):
        if candidate and Path(candidate).exists():
            probe = subprocess.run(as_daemon_account([candidate, "-c", "from gi.repository import Gio"]),
                                   capture_output=True)
            if probe.returncode == 0:
                return candidate
    return None


def next_from(items: queue.Queue, matches, timeout: float, failure):
    """The next item of `items` that `matches`, waiting at most `timeout` seconds; the
    items before it are dropped. Fails with `failure()`."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, failure()
        try:
            item = items.get(timeout=remaining)
        except queue.Empty:
            continue
        if matches(item):
            return item


def start_session_bus() -> tuple[subprocess.Popen, str]:
    """A private session bus (dbus-daemon) of the daemon's account, and its address.
    timeout(1): the bus ends by itself even if this process dies before its teardown.
    Without a display in its environment: a notification server the bus would start
    (dunst, D-Bus activated) cannot come up in place of the test's own."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    bus = subprocess.Popen(as_daemon_account(["timeout", "900", "dbus-daemon", "--session", "--nofork",
                                              "--print-address=1"]),
                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, start_new_session=True)
    address = bus.stdout.readline().strip()
    if not address.startswith("unix:"):
        terminate(bus)
        raise AssertionError(f"dbus-daemon printed {address!r}")
    return bus, address


class FakeServer:
    def __init__(self, python: str, address: str):
        env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=address)
        self.proc = subprocess.Popen(
            as_daemon_account([python, runnable(FAKE_SERVER, "-r"), "--max-seconds", "300"]), env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.address = address
        self.calls: queue.Queue = queue.Queue()
        first = self.proc.stdout.readline().strip()
        assert first == "READY", f"fake server said {first!r}: {self.proc.stderr.read() if self.proc.poll() else ''}"
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.calls.put(json.loads(line))

    def next_call(self, name: str, timeout: float = 5.0) -> dict:
        return next_from(self.calls, lambda call: call["call"] == name, timeout,
                         lambda: f"the fake notification server got no {name} in {timeout} s")

    def invoke(self, notification_id: int, action: str) -> None:
        subprocess.run(as_daemon_account(["gdbus", "call", "--session", "--dest", "org.freedesktop.Notifications",
                        "--object-path", "/org/freedesktop/Notifications", "--method", "org.latchkey.Test.Invoke",
                        f"uint32 {notification_id}", f"'{action}'"]),
                       env=dict(os.environ, DBUS_SESSION_BUS_ADDRESS=self.address), check=True,
                       capture_output=True, timeout=10)


@pytest.fixture(scope="module")
def desktop(tmp_path_factory):
    """A private session bus with the fake server, and a latchkeyd that uses it."""
    python = python_with_gi()
    missing = [tool for tool in ("dbus-daemon", "gdbus") if shutil.which(tool) is None]
    if missing or python is None:
        pytest.skip(f"needs dbus-daemon, gdbus and PyGObject (missing: {missing or ['python3-gi']})")
    binary = daemon_binary()
    if not binary.exists():
        pytest.skip(f"no latchkeyd at {binary}")
    bus, address = start_session_bus()
    server = daemon = None
    try:
        server = FakeServer(python, address)
        daemon = Daemon(binary, tmp_path_factory.mktemp("latchkeyd-desktop"), session_bus=address)
        daemon.start()
        yield daemon, server
    finally:
        if daemon is not None:
            daemon.stop()
        if server is not None:
            terminate(server.proc)
        terminate(bus)
    assert not daemon.problems, daemon.problems


@pytest.fixture
def prompt_device(desktop, request):
    daemon, server = desktop
    name = f"n-{request.node.name[:40]}".replace("[", "-").replace("]", "")
    doc = daemon.control.post("/v1/keys", {"name": name, "uhid": False, "usbip": True, "presence": "prompt"},
                              expect=201)
    daemon.control.put(f"/v1/keys/{name}/presence", {"timeoutSeconds": 15})
    opened = Opened(daemon.port, strict=True)
    try:
        device = opened.ctap(doc["usbip"]["busid"])
        yield daemon, server, name, device
    finally:
        problems = opened.close_and_check()
        daemon.control.delete(f"/v1/keys/{name}", expect=(204, 404))
        assert not problems, problems


def make_credential(device, user_name):
    return Ctap2(device).make_credential(
        os.urandom(32), {"id": rp.RP_ID, "name": "Example"},
        {"id": os.urandom(16), "name": user_name, "displayName": user_name},
        [{"type": "public-key", "alg": -7}], options={"rk": True})


def test_allow_in_the_notification_approves(prompt_device):
    daemon, server, name, device = prompt_device
    thread, result = start_in_thread(lambda: make_credential(device, "alice"))
    notify = server.next_call("Notify")
    assert notify["actions"] == ["allow", "Allow", "deny", "Deny"]
    assert rp.RP_ID in notify["summary"] and "alice" in notify["body"] and name in notify["body"]
    [pending] = daemon.control.pending(name)
    assert pending["id"] in notify["body"]
    server.invoke(notify["id"], "allow")
    thread.join(10)
    assert "error" not in result, result
    assert daemon.control.pending(name) == []
    [decision] = daemon.control.get(f"/v1/keys/{name}/policy/decisions")
    assert decision["outcome"] == "approved" and "by the desktop notification" in decision["reason"], decision


def test_deny_in_the_notification_denies(prompt_device):
    daemon, server, name, device = prompt_device
    thread, result = start_in_thread(lambda: make_credential(device, "bob"))
    notify = server.next_call("Notify")
    server.invoke(notify["id"], "deny")
    thread.join(10)
    assert isinstance(result.get("error"), CtapError) and result["error"].code == CtapError.ERR.OPERATION_DENIED


def test_an_answer_elsewhere_closes_the_notification(prompt_device):
    daemon, server, name, device = prompt_device
    thread, result = start_in_thread(lambda: make_credential(device, "carol"))
    notify = server.next_call("Notify")
    [pending] = daemon.control.pending(name)
    daemon.control.post(f"/v1/presence/pending/{pending['id']}/approve")
    thread.join(10)
    assert "error" not in result, result
    assert server.next_call("CloseNotification")["id"] == notify["id"]


def test_notifications_off_shows_nothing(prompt_device):
    daemon, server, name, device = prompt_device
    daemon.control.put(f"/v1/keys/{name}/policy", {"notifications": False})
    thread, result = start_in_thread(lambda: make_credential(device, "dave"))
    [pending] = wait_for(lambda: daemon.control.pending(name), 5, "a pending request")
    time.sleep(0.5)
    daemon.control.post(f"/v1/presence/pending/{pending['id']}/approve")
    thread.join(10)
    assert "error" not in result, result
    calls = []
    while not server.calls.empty():
        calls.append(server.calls.get())
    assert [c for c in calls if c["call"] == "Notify"] == [], calls


def test_a_conditional_registration_is_announced(prompt_device):
    daemon, server, name, device = prompt_device
    daemon.control.post(f"/v1/keys/{name}/signals/password-used", {"rpId": rp.RP_ID, "userName": "erin"})
    make_credential(device, "erin")
    notify = server.next_call("Notify")
    assert notify["summary"] == "Passkey created" and notify["actions"] == []
    assert "erin" in notify["body"] and rp.RP_ID in notify["body"]


def test_a_cancelled_request_closes_its_notification(prompt_device):
    daemon, server, name, device = prompt_device
    cancel = threading.Event()

    def create():
        return Ctap2(device).make_credential(
            os.urandom(32), {"id": rp.RP_ID, "name": "Example"}, {"id": os.urandom(16), "name": "frank"},
            [{"type": "public-key", "alg": -7}], options={"rk": True}, event=cancel)

    thread, result = start_in_thread(create)
    notify = server.next_call("Notify")
    cancel.set()  # CTAPHID_CANCEL
    thread.join(10)
    assert isinstance(result.get("error"), CtapError) and result["error"].code == CtapError.ERR.KEEPALIVE_CANCEL
    assert server.next_call("CloseNotification")["id"] == notify["id"]


def test_without_a_session_bus_prompts_work_and_it_is_logged_once(usb, control, daemon, make_key):
    """The suite's shared daemon, which conftest starts without a session bus."""
    key = make_key(presence="prompt")
    device = usb.ctap(key["usbip"]["busid"])
    for user in ("gina", "hank"):
        thread, result = start_in_thread(lambda: make_credential(device, user))
        control.decide(key["name"], "approve")
        thread.join(10)
        assert "error" not in result, result
    assert daemon.log_text().count("desktop notifications are off: no session D-Bus") == 1
