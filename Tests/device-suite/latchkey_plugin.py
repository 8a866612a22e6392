"""A pytest plugin that runs Yubico's device suite against latchkeyd.

python-fido2's ``tests/device`` (shipped in the ``fido2==2.2.1`` sdist) was written to
qualify YubiKeys: it looks for a FIDO HID device, asks a person to touch, unplug and plug
it in, and factory-resets it. This plugin is that person and that USB port:

* it starts ``latchkeyd`` (``$LATCHKEYD``) as the unprivileged account lk-owner when it
  runs as root (Tests/e2e/identities.py; scripts/test-accounts.sh makes the account), and
  opens the daemon's control and USB/IP connections as that account, so the key is used
  by its owner as a person's daemon would be; on a temporary state directory with USB/IP on
  a free loopback port, no uhid, presence ``auto`` (the touch) and the default key, which
  offers every feature latchkey has and no user verification configured (the suite
  refuses a key with a PIN or built-in UV); a configuration file adds what is off by
  default: enterprise attestation, with ``EP_RP_ID`` for the vendor-facilitated kind
  (``--ep-rp-id`` tells the suite that RP ID), and the drafted previewSign extension, so
  that test_preview_sign.py and test_sign_extension_v4.py run rather than skip;
* the suite's device discovery (``list_descriptors``, ``open_connection``,
  ``open_device``) sees that key, imported through the project's own USB/IP client
  (Tests/e2e/usbip_client.py, usbip_hid.py) as a python-fido2 ``CtapHidDevice``;
* "Disconnect the Authenticator" ends the USB/IP import and replugs the key through the
  control API (a power cycle: new PIN/UV state, the reset window opens again); "Connect
  the Authenticator" lets the next discovery find it again, so the suite's own reconnect
  and factory reset (within latchkey's 10 s reset window) run unchanged;
* every skip must name a feature latchkey does not advertise (``EXPLAINED_SKIPS``); any
  other skip would be a harness limit and fails the run, as does any failure.

    scripts/device-suite.sh     # fetches and caches the sdist, then runs pytest with -p latchkey_plugin
"""

from __future__ import annotations

import atexit
import dataclasses
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

E2E_DIR = Path(__file__).resolve().parents[1] / "e2e"
sys.path.insert(0, str(E2E_DIR))

import identities  # noqa: E402
import usbip_client as usbip  # noqa: E402
import usbip_hid  # noqa: E402

# The daemon's account, which also opens its connections; None when the run is not root
# (then everything is the current user's).
OWNER = identities.account("owner")
if OWNER is not None:
    usbip.OPEN_CONNECTION = lambda host, port, timeout: OWNER.connect_tcp(host, port, timeout)

HOST = "127.0.0.1"
KEY = "default"
# The RP ID the key gives vendor-facilitated enterprise attestation to (test_ep_vendor).
EP_RP_ID = "ep.example.com"
CONFIG = f"""
[[keys]]
name = "{KEY}"
enterprise-attestation = true
enterprise-attestation-rp-ids = ["{EP_RP_ID}"]
preview-sign = true
"""

# Why a test may skip: each reason the suite gives for a feature latchkey does not
# advertise in getInfo (or a check that only runs on keys with that feature). A skip with
# any other reason fails the run.
EXPLAINED_SKIPS = [
    (r"Algorithm MLDSA44 not supported",
     "no ML-DSA-44: swift-crypto, latchkey's ML-DSA, implements ML-DSA-65 and ML-DSA-87 only"),
    (r"BioEnrollment not supported by authenticator", "no bioEnroll option: no fingerprint sensor"),
]


def explain_skip(reason: str) -> str | None:
    for pattern, why in EXPLAINED_SKIPS:
        if re.search(pattern, reason):
            return why
    return None


class UnixConnection(http.client.HTTPConnection):
    """HTTP over the daemon's control socket."""

    def __init__(self, path: str):
        super().__init__("localhost", timeout=10)
        self.socket_path = path

    def connect(self) -> None:
        if OWNER is not None:
            self.sock = OWNER.connect_unix(self.socket_path, self.timeout)
            self.sock.settimeout(self.timeout)
            return
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


class Latchkeyd:
    """One latchkeyd with its default key on USB/IP, and the key's place in the USB port."""

    def __init__(self, binary: Path):
        self.binary = binary
        self.workdir = Path(tempfile.mkdtemp(prefix="latchkey-device-suite-"))
        if OWNER is not None:
            OWNER.directory(self.workdir)
        self.state_dir = self.workdir / "state"
        self.socket_path = self.workdir / "control.sock"
        self.log_path = self.workdir / "latchkeyd.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.busid = ""
        self.plugged = True
        self.generation = 1
        self.interfaces: list[usbip_hid.UsbipHidInterface] = []
        self.descriptor = None
        self.stopped = False

    # -- the process ---------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        with socket.socket() as s:
            s.bind((HOST, 0))
            self.port = s.getsockname()[1]
        config = self.workdir / "latchkeyd.toml"
        config.write_text(CONFIG)
        argv = [str(self.binary), "--config", str(config), "--state-dir", str(self.state_dir), "--no-uhid",
                "--usbip", f"{HOST}:{self.port}", "--presence", "auto",
                "--control-socket", str(self.socket_path)]
        if OWNER is not None:
            argv = OWNER.command(argv)
        env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
        env["XDG_RUNTIME_DIR"] = str(self.workdir)  # no desktop notifications from a test run
        with open(self.log_path, "wb") as log:
            log.write(("$ " + " ".join(argv) + "\n").encode())
            log.flush()
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                key = self.control("GET", f"/v1/keys/{KEY}")
                self.busid = key["usbip"]["busid"]
                if any(d.busid == self.busid for d in usbip.list_devices(HOST, self.port, timeout=2)):
                    probe = self.import_key()
                    self.descriptor = probe.descriptor
                    probe.close()
                    return
            except (OSError, KeyError, TypeError, usbip.USBIPError, AssertionError):
                pass
            time.sleep(0.1)
        log = self.log_path.read_text(errors="replace")
        self.stop(keep_log=True)
        raise RuntimeError(f"latchkeyd did not come up (exit {self.proc and self.proc.returncode}); its log:\n{log}")

    def stop(self, keep_log: bool = False) -> None:
        if self.stopped:
            return
        self.stopped = True
        for interface in self.interfaces:
            interface.close()
        self.interfaces.clear()
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        if not keep_log:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def control(self, method: str, path: str):
        connection = UnixConnection(str(self.socket_path))
        try:
            connection.request(method, path)
            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
        if response.status >= 300:
            raise AssertionError(f"{method} {path} -> {response.status}: {body[:300]!r}")
        return json.loads(body) if body else None

    # -- the USB port, as python-fido2's discovery sees it ------------------------------

    @property
    def path(self) -> str:
        # A new path per plug-in, as a host's hidraw node would get.
        return f"usbip://{HOST}:{self.port}/{self.busid}#{self.generation}"

    def list_descriptors(self):
        # What the first enumeration learnt: a busid is imported by one client at a time,
        # so discovery cannot probe while the suite holds the key open.
        if not self.plugged or self.descriptor is None:
            return []
        return [dataclasses.replace(self.descriptor, path=self.path)]

    def open_connection(self, descriptor):
        if not self.plugged or descriptor.path != self.path:
            raise OSError(f"no device at {descriptor.path}")
        interface = self.import_key()
        self.interfaces.append(interface)
        return interface.open_connection(read_timeout=30.0)

    def import_key(self, timeout: float = 5.0) -> usbip_hid.UsbipHidInterface:
        """Imports and enumerates the key; the server refuses a second import until it has
        seen the previous one end, which takes a moment after a close."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return usbip_hid.UsbipHidInterface(HOST, self.port, self.busid)
            except usbip.ImportRefused:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def open_device(self, path):
        from fido2.hid import CtapHidDevice

        descriptor = next((d for d in self.list_descriptors() if d.path == path), None)
        if descriptor is None:
            raise OSError(f"no device at {path}")
        return CtapHidDevice(descriptor, self.open_connection(descriptor))

    def unplug(self) -> None:
        """The person pulls the key: every import ends, and the key powers down and up."""
        for interface in self.interfaces:
            interface.close()
        self.interfaces.clear()
        self.plugged = False
        self.control("POST", f"/v1/keys/{KEY}/replug")

    def plug(self) -> None:
        self.generation += 1
        self.plugged = True


_daemon: Latchkeyd | None = None
_skips: list[tuple[str, str]] = []


def _install(daemon: Latchkeyd) -> None:
    """Points the suite's device discovery and its prompts at `daemon`."""
    import tests.device as suite
    import tests.device.conftest as suite_conftest

    suite_conftest.list_descriptors = daemon.list_descriptors
    suite_conftest.open_connection = daemon.open_connection
    suite_conftest.open_device = daemon.open_device

    printer = suite.Printer
    plain_print = printer.print

    def remove(self, nfc=False):
        plain_print(self, "🚫 latchkey: unplugging the key (USB/IP import closed, control API replug)")
        daemon.unplug()

    def insert(self, nfc=False):
        plain_print(self, "♻️  latchkey: plugging the key in again")
        daemon.plug()

    printer.remove = remove
    printer.insert = insert
    # `--presence auto` is the touch; the suite's reminder would repeat for every request.
    printer.touch = lambda self: None


def pytest_configure(config):
    # test_ep_vendor needs the RP ID the key was configured with.
    if not config.getoption("ep_rp_id", None):
        config.option.ep_rp_id = EP_RP_ID


def pytest_collection_finish(session):
    global _daemon
    if session.config.getoption("collectonly") or not session.items:
        return
    binary = Path(os.environ.get("LATCHKEYD", ".build/debug/latchkeyd")).resolve()
    if not binary.exists():
        raise pytest.UsageError(f"LATCHKEYD={binary} does not exist: build it with swift build")
    _daemon = Latchkeyd(binary)
    # Stopped at the end of the session; this covers an interrupted one too.
    atexit.register(_daemon.stop)
    _daemon.start()
    _install(_daemon)


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skips.append((report.nodeid, reason.removeprefix("Skipped: ")))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _daemon is not None and _daemon.log_path.exists():
        report.sections.append(("latchkeyd log (last 8000 characters)",
                                _daemon.log_path.read_text(errors="replace")[-8000:]))


def pytest_sessionfinish(session, exitstatus):
    global _daemon
    if _daemon is not None:
        if session.testsfailed:
            print(f"\nlatchkeyd's log is kept in {_daemon.log_path}")
        _daemon.stop(keep_log=bool(session.testsfailed))
        _daemon = None
    identities.close_all()
    unexplained = [(nodeid, reason) for nodeid, reason in _skips if explain_skip(reason) is None]
    if unexplained:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        session.config._latchkey_unexplained = unexplained


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _skips:
        return
    reasons: dict[str, int] = {}
    for _nodeid, reason in _skips:
        reasons[reason] = reasons.get(reason, 0) + 1
    terminalreporter.section("latchkey: why each skip is expected")
    for reason, count in sorted(reasons.items()):
        why = explain_skip(reason)
        terminalreporter.write_line(f"{count:4d} x {reason}: " + (why or "UNEXPLAINED (a harness limit?)"))
    for nodeid, reason in getattr(config, "_latchkey_unexplained", []):
        terminalreporter.write_line(f"FAIL: {nodeid} skipped for a reason latchkey does not explain: {reason}",
                                    red=True)
