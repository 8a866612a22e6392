"""The doors of issue 24, tried by outside clients as other accounts: who may reach a key
is what the kernel says about the other end of each connection (NETLINK_SOCK_DIAG,
SO_PEERCRED), never what a client claims.

- USB/IP: lk-other (its connections opened by lk-other) sees none of lk-owner's keys in
  the device list and cannot import one: answered as an unknown bus id (status 1),
  python-fido2 finds nothing; each refused import is one access.refused event (door
  usbip) and one journal line. Root, with plain sockets, still lists and imports.
- The port: latchkeyd will not start on a port another account listens on, on the same
  address or on the other family's loopback, and names who holds it.
- `latchkeyctl attach` runs usbip only when every listener on the key's port is the
  daemon's; `latchkeyctl udev-owner` finds a vhci-attached key's owner through the
  listener the kernel names.
- The state directory: lk-other's /tmp/latchkey (0777), a symbolic link, a group-writable
  directory: refused with exit 78 and a message that says how to fix it.
- latchkey-webdriver: lk-other's connection (plain HTTP, and curl run as lk-other) gets a
  WebDriver error and is closed; a Host that is not loopback is refused; its own account
  and root are served.

    LATCHKEYD=.build/debug/latchkeyd python3 -m pytest -q Tests/e2e/test_doors.py
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fido2.ctap2 import Ctap2

import identities
import usbip_client as usbip
import usbip_hid
from conftest import HOST, as_daemon_account, built_binary, daemon_binary, free_port, latchkeyctl_binary, terminate, \
    wait_for

pytestmark = pytest.mark.skipif(identities.available() is not None,
                                reason=f"needs the test accounts: {identities.available()}")

OWNER = identities.account("owner")
OTHER = identities.account("other")

# A listener of another account: binds, says so, and holds the port until its stdin closes.
_LISTENER = r"""
import socket, sys
family = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(family)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen()
print("listening", flush=True)
sys.stdin.read()
"""


class Listener:
    """A TCP listener opened by `account` on host:port, until closed."""

    def __init__(self, account: identities.Account, host: str, port: int):
        self.proc = subprocess.Popen(
            [*account.setpriv(), identities.SYSTEM_PYTHON, "-I", "-c", _LISTENER, host, str(port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True, cwd="/")
        line = self.proc.stdout.readline()
        assert line.strip() == "listening", f"{account.name} could not listen on {host}:{port}: {self.proc.stderr.read()}"

    def close(self):
        self.proc.stdin.close()
        terminate(self.proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_daemon(*args, timeout: float = 30) -> subprocess.CompletedProcess:
    """latchkeyd as lk-owner with `args`, expected to exit by itself."""
    return subprocess.run(as_daemon_account([daemon_binary(), "--no-uhid", *args]), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def shared_tmp(tmp_path: Path) -> Path:
    """A directory like /tmp: root's, sticky, writable by every account."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    directory.chmod(0o1777)
    identities.traversable(directory)
    return directory


# ---- USB/IP ----------------------------------------------------------------------------


def test_another_account_sees_no_key_of_the_owner_and_cannot_import_one(daemon, make_key, events):
    key = make_key()
    busid = key["usbip"]["busid"]
    stream = events(key["name"])
    log_start = daemon.log_size()

    listed = usbip.list_devices(HOST, daemon.port, sock=OTHER.connect_tcp(HOST, daemon.port))
    assert busid not in [d.busid for d in listed]
    with pytest.raises(usbip.ImportRefused) as refused:
        usbip.import_device(HOST, daemon.port, busid, sock=OTHER.connect_tcp(HOST, daemon.port))
    # As for a bus id the server does not have: nothing tells the key exists.
    assert refused.value.status == 1

    event = stream.next("access.refused", door="usbip")
    assert (event["key"], event["uid"], event["access"], event["rule"]) == (key["name"], OTHER.uid, "attach",
                                                                            "owner-or-root")
    with pytest.raises(AssertionError):
        stream.next("access.refused", timeout=0.5)  # one refusal, one event
    line = wait_for(lambda: [l for l in daemon.log_text(log_start).splitlines() if "access refused" in l], 5,
                    "the journal line")
    assert len(line) == 1 and "door=usbip" in line[0] and f"uid={OTHER.uid}" in line[0], line

    # The owner still lists it (make_key waited for that) and imports it.
    device = usbip.import_device(HOST, daemon.port, busid)
    device.close()


def test_python_fido2_as_another_account_finds_nothing_and_root_still_attaches(daemon, make_key, monkeypatch):
    busid = make_key()["usbip"]["busid"]
    monkeypatch.setattr(usbip, "OPEN_CONNECTION", lambda host, port, timeout: OTHER.connect_tcp(host, port, timeout))
    assert busid not in [d.busid for d in usbip.list_devices(HOST, daemon.port)]
    with pytest.raises(usbip.ImportRefused):
        usbip_hid.UsbipHidInterface(HOST, daemon.port, busid)

    # Root holds attach on every key: `usbip attach` by root works, here with plain sockets.
    import socket
    monkeypatch.setattr(usbip, "OPEN_CONNECTION", lambda host, port, timeout: socket.create_connection(
        (host, port), timeout=timeout))
    assert busid in [d.busid for d in usbip.list_devices(HOST, daemon.port)]
    interface = usbip_hid.UsbipHidInterface(HOST, daemon.port, busid)
    try:
        info = Ctap2(interface.ctap_device(10)).get_info()
        assert "FIDO_2_0" in info.versions
    finally:
        interface.close()


@pytest.mark.parametrize("squat_host", ["127.0.0.1", "::1"])
def test_latchkeyd_refuses_a_port_another_account_holds(tmp_path, squat_host):
    port = free_port()
    state = tmp_path / "state"
    OWNER.directory(tmp_path)
    with Listener(OTHER, squat_host, port):
        result = run_daemon("--state-dir", state, "--usbip", f"{HOST}:{port}")
    assert result.returncode == 78, result.stderr
    assert f"port {port} is already in use by uid {OTHER.uid} ({OTHER.name})" in result.stderr, result.stderr
    assert "--usbip 127.0.0.1:PORT" in result.stderr


# ---- latchkeyctl attach and udev-owner ---------------------------------------------------


def fake_usbip(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in for usbip that records its arguments."""
    record = tmp_path / "usbip-args"
    script = tmp_path / "usbip"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {record}\n")
    script.chmod(0o755)
    return script, record


def test_attach_runs_usbip_only_when_the_daemon_alone_holds_the_port(daemon, make_key, tmp_path):
    key = make_key()
    usbip_tool, record = fake_usbip(tmp_path)
    attach = [latchkeyctl_binary(), "--socket", daemon.control.path, "attach", key["name"], "--usbip", usbip_tool]

    result = subprocess.run(attach, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert record.read_text().split() == ["--tcp-port", str(daemon.port), "attach", "-r", HOST, "-b",
                                          key["usbip"]["busid"]]
    record.unlink()

    # A squatter beside the daemon, on the other family's loopback: clients of "localhost"
    # could reach it.
    with Listener(OTHER, "::1", daemon.port):
        result = subprocess.run(attach, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1, result.stderr
    assert f"also held by uid {OTHER.uid} ({OTHER.name})" in result.stderr, result.stderr
    assert not record.exists()


def fake_vhci(tmp_path: Path, serial: str, port: int, busid: str) -> tuple[Path, Path, str]:
    """A sysfs with one USB/IP-attached device on vhci port 5, and usbip's record of it."""
    sysfs, records = tmp_path / "sys", tmp_path / "vhci_hcd"
    device = sysfs / "devices/platform/vhci_hcd.0/usb3/3-1"
    device.mkdir(parents=True)
    (device / "busnum").write_text("3\n")
    (device / "serial").write_text(serial + "\n")
    (sysfs / "devices/platform/vhci_hcd.0/status").write_text(
        "hub port sta spd dev      sockfd local_busid\n"
        "hs  0004 004 000 00000000 000000 0-0\n"
        "hs  0005 006 002 00030002 000004 3-1\n")
    records.mkdir()
    (records / "port5").write_text(f"127.0.0.1 {port} {busid}\n")
    return sysfs, records, "/devices/platform/vhci_hcd.0/usb3/3-1/3-1:1.0/0003:1209:0001.0005/hidraw/hidraw4"


def udev_owner(sysfs: Path, records: Path, devpath: str) -> subprocess.CompletedProcess:
    return subprocess.run([latchkeyctl_binary(), "udev-owner", "--sysfs", sysfs, "--vhci-records", records,
                           "--wait", "0", devpath], capture_output=True, text=True, timeout=30)


def test_udev_owner_names_the_owner_the_serving_daemon_gives(daemon, make_key, tmp_path):
    key = make_key()
    serial = f"latchkey-{key['aaguid'][:8]}-{key['name']}"[:63]
    sysfs, records, devpath = fake_vhci(tmp_path, serial, daemon.port, key["usbip"]["busid"])
    result = udev_owner(sysfs, records, devpath)
    assert result.returncode == 0, result.stderr
    owner = key.get("owner", {}).get("uid", OWNER.uid)
    assert result.stdout.splitlines() == [f"LATCHKEY_KEY={key['name']}", f"LATCHKEY_OWNER_UID={owner}"]

    # A key no daemon serves, and a port nobody but a stranger holds: nothing is printed.
    sysfs2, records2, _ = fake_vhci(tmp_path / "b", "latchkey-00000000-nobody", daemon.port, "1-99")
    assert (result := udev_owner(sysfs2, records2, devpath)).returncode != 0 and result.stdout == ""
    port = free_port()
    with Listener(OTHER, HOST, port):
        sysfs3, records3, _ = fake_vhci(tmp_path / "c", serial, port, key["usbip"]["busid"])
        result = udev_owner(sysfs3, records3, devpath)
    assert result.returncode != 0 and result.stdout == "", result.stdout


# ---- the state directory -----------------------------------------------------------------


def test_a_state_directory_another_account_made_is_refused(tmp_path):
    squat = shared_tmp(tmp_path) / "latchkey"
    assert OTHER.run(["mkdir", "-m", "0777", str(squat)]).returncode == 0
    result = run_daemon("--state-dir", squat, "--usbip", f"{HOST}:{free_port()}")
    assert result.returncode == 78, result.stderr
    assert f"refusing the state directory {squat}: it belongs to uid {OTHER.uid} ({OTHER.name})" in result.stderr
    assert "Remove it" in result.stderr
    assert list(squat.iterdir()) == []  # nothing of the daemon's went into it

    # The control socket's directory is held to the same rule.
    state = OWNER.directory(tmp_path / "own") / "state"
    result = run_daemon("--state-dir", state, "--control-socket", squat / "control.sock",
                        "--usbip", f"{HOST}:{free_port()}")
    assert result.returncode == 78 and "refusing the control socket's directory" in result.stderr, result.stderr
    assert list(squat.iterdir()) == []


def test_a_linked_or_group_writable_state_directory_is_refused(tmp_path):
    shared = shared_tmp(tmp_path)
    mine = OWNER.directory(tmp_path / "mine")
    link = shared / "latchkey"
    assert OTHER.run(["ln", "-s", str(mine), str(link)]).returncode == 0
    result = run_daemon("--state-dir", link, "--usbip", f"{HOST}:{free_port()}")
    assert result.returncode == 78 and f"the state directory {link} is a symbolic link" in result.stderr, \
        result.stderr

    mine.chmod(0o770)
    result = run_daemon("--state-dir", mine, "--usbip", f"{HOST}:{free_port()}")
    assert result.returncode == 78 and f"chmod go-w {mine}" in result.stderr, result.stderr


# ---- latchkey-webdriver -----------------------------------------------------------------


@pytest.fixture
def webdriver(daemon, tmp_path):
    """latchkey-webdriver run by lk-owner against the session's daemon: its port."""
    binary = built_binary("LATCHKEY_WEBDRIVER", ".build/debug/latchkey-webdriver")
    if not binary.exists():
        pytest.skip(f"no latchkey-webdriver at {binary} (set LATCHKEY_WEBDRIVER)")
    port = free_port()
    log_path = tmp_path / "latchkey-webdriver.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            as_daemon_account([binary, "--port", port, "--upstream", "http://127.0.0.1:9", "--socket",
                               daemon.control.path]),
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: OWNER.connect_tcp(HOST, port, 2).close() or True, 20, "latchkey-webdriver listening")
        yield port, log_path
    finally:
        terminate(proc)


def exchange(sock, port: int, host: str | None = None) -> tuple[int, dict, bytes]:
    """One request on `sock`: GET of a WebAuthn path the intermediary answers itself."""
    watch = sock.dup()  # http.client closes its own after a "Connection: close" answer
    connection = http.client.HTTPConnection(HOST, port, timeout=10)
    connection.sock = sock
    connection.putrequest("GET", "/session/s1/webauthn/unknown", skip_host=True)
    connection.putheader("Host", host or f"{HOST}:{port}")
    connection.endheaders()
    response = connection.getresponse()
    body = json.loads(response.read())
    connection.close()
    rest = None
    if response.getheader("Connection") == "close":
        watch.settimeout(5)
        rest = watch.recv(1)  # b"": the intermediary closed it
    watch.close()
    return response.status, body["value"], rest


def test_webdriver_serves_its_account_and_root_only(webdriver):
    port, log_path = webdriver
    import socket

    # Its own account and root reach the intermediary (which answers this path itself).
    for sock in (OWNER.connect_tcp(HOST, port), socket.create_connection((HOST, port))):
        status, value, _ = exchange(sock, port)
        assert (status, value["error"]) == (404, "unknown command"), value

    status, value, rest = exchange(OTHER.connect_tcp(HOST, port), port)
    assert (status, value["error"]) == (403, "unknown error")
    assert f"this connection is from uid {OTHER.uid} ({OTHER.name})" in value["message"]
    assert rest == b""

    # curl, as lk-other: the same.
    result = OTHER.run(["curl", "-sS", "-w", "\n%{http_code}", f"http://{HOST}:{port}/session/s1/webauthn/unknown"])
    body, code = result.stdout.decode().rsplit("\n", 1)
    assert code == "403" and "serves that account and root only" in json.loads(body)["value"]["message"]

    # DNS rebinding: the owner's own browser, on a page of another name.
    status, value, _ = exchange(OWNER.connect_tcp(HOST, port), port, host=f"attacker.example:{port}")
    assert status == 403 and "is not this intermediary's loopback address" in value["message"]

    assert log_path.read_text().count("connection refused") == 3
