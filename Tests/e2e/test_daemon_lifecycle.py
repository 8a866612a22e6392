"""latchkeyd as a process: what systemd is told (sd_notify), the state-directory
lock, the socket and file permissions, the refusal to serve USB/IP beyond loopback,
configuration errors, and a clean SIGTERM. Each test runs its own daemon."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ControlClient, as_daemon_account, daemon_binary, free_port, owned_directory, wait_for

HOST = "127.0.0.1"


def start(tmp_path: Path, *extra: str, env: dict | None = None) -> subprocess.Popen:
    binary = daemon_binary()
    if not binary.exists():
        pytest.fail(f"no latchkeyd at {binary}: build it with swift build (or set LATCHKEYD)")
    state = owned_directory(tmp_path, 0o750) / "state"
    args = as_daemon_account([binary, "--state-dir", state, "--no-uhid", "--usbip", f"{HOST}:{free_port()}",
                              "--presence", "auto", *extra])
    log = open(tmp_path / "latchkeyd.log", "ab")
    return subprocess.Popen(args, stdout=log, stderr=log, env={**os.environ, **(env or {})})


def stop(process: subprocess.Popen) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
        pytest.fail("latchkeyd did not stop within 10 s of SIGTERM")


def log_of(tmp_path: Path) -> str:
    return (tmp_path / "latchkeyd.log").read_text(errors="replace")


def test_systemd_is_told_ready_then_stopping_and_the_watchdog_is_fed(tmp_path):
    notify_path = str(tmp_path / "notify.sock")
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(notify_path)
    os.chmod(notify_path, 0o666)  # the daemon's account sends to it
    receiver.settimeout(20)
    process = start(tmp_path, env={"NOTIFY_SOCKET": notify_path, "WATCHDOG_USEC": "400000"})
    try:
        messages: list[str] = []
        deadline = time.monotonic() + 20
        while not any("READY=1" in m for m in messages) and time.monotonic() < deadline:
            messages.append(receiver.recv(4096).decode())
        assert any("READY=1" in m for m in messages), messages
        # Ready means the control socket answers.
        ControlClient(str(tmp_path / "state" / "control.sock")).get("/v1/status")
        watchdog = 0
        while watchdog < 2:
            message = receiver.recv(4096).decode()
            watchdog += message.count("WATCHDOG=1")
        assert stop(process) == 0
        receiver.settimeout(5)
        rest = []
        try:
            while True:
                rest.append(receiver.recv(4096).decode())
        except socket.timeout:
            pass
        assert any("STOPPING=1" in m for m in rest), rest
    finally:
        if process.poll() is None:
            stop(process)
        receiver.close()


def test_two_daemons_never_share_a_state_directory(tmp_path):
    first = start(tmp_path)
    try:
        wait_for(lambda: (tmp_path / "state" / "control.sock").exists(), 20, "the first daemon's socket")
        second = start(tmp_path)
        assert second.wait(timeout=20) == 78
        assert "another latchkeyd is using this state directory" in log_of(tmp_path)
        ControlClient(str(tmp_path / "state" / "control.sock")).get("/v1/status")
    finally:
        stop(first)


def test_files_are_private_and_the_socket_is_group_only(tmp_path):
    process = start(tmp_path)
    try:
        state = tmp_path / "state"
        socket_path = state / "control.sock"
        wait_for(socket_path.exists, 20, "the control socket")
        ControlClient(str(socket_path)).post("/v1/keys", {"name": "perm"}, expect=201)
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o660
        for path in [state / "master-key", state / "keys" / "default" / "credentials.db",
                     state / "keys" / "perm" / "key.json", state / "latchkeyd.lock"]:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        for directory in [state, state / "keys" / "default"]:
            assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
        secret = (state / "master-key").read_bytes()
        assert secret.hex() not in log_of(tmp_path)
    finally:
        stop(process)


def test_usbip_beyond_loopback_is_refused_unless_allowed(tmp_path):
    binary = daemon_binary()
    result = subprocess.run(
        as_daemon_account([binary, "--state-dir", owned_directory(tmp_path) / "s", "--no-uhid",
                           "--usbip", f"0.0.0.0:{free_port()}"]),
        capture_output=True, text=True, timeout=30)
    assert result.returncode == 78
    assert "not a loopback address" in result.stderr and "allow-remote" in result.stderr


def test_a_bad_configuration_file_names_the_file_and_the_key(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('[presence]\nmode = "sometimes"\n')
    owned_directory(tmp_path, 0o750)
    result = subprocess.run(as_daemon_account([daemon_binary(), "--config", config, "--state-dir", tmp_path / "s"]),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 78
    assert "bad.toml" in result.stderr and "mode" in result.stderr


def test_a_live_daemons_socket_is_never_taken_over(tmp_path):
    first = start(tmp_path)
    try:
        socket_path = tmp_path / "state" / "control.sock"
        wait_for(socket_path.exists, 20, "the control socket")
        other = tmp_path / "other"
        second = subprocess.run(
            as_daemon_account([daemon_binary(), "--state-dir", other, "--no-uhid", "--usbip", f"{HOST}:{free_port()}",
                               "--control-socket", socket_path]), capture_output=True, text=True, timeout=30)
        assert second.returncode == 78
        assert "another latchkeyd is serving" in second.stderr
        ControlClient(str(socket_path)).get("/v1/status")
    finally:
        stop(first)


def test_sigterm_stops_cleanly_and_removes_the_socket(tmp_path):
    process = start(tmp_path)
    socket_path = tmp_path / "state" / "control.sock"
    wait_for(socket_path.exists, 20, "the control socket")
    assert stop(process) == 0
    assert not socket_path.exists()
    assert "stopped" in log_of(tmp_path)


def test_help_explains_the_flags():
    result = subprocess.run([str(daemon_binary()), "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    for flag in ["--config", "--state-dir", "--usbip", "--no-uhid", "--presence", "--control-socket"]:
        assert flag in result.stdout
    defaults = subprocess.run([str(daemon_binary()), "--print-default-config"], capture_output=True, text=True,
                              timeout=30)
    assert defaults.returncode == 0 and "[presence]" in defaults.stdout
