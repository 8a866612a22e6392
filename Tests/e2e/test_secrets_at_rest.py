"""Secrets at rest (issue 26) with the real latchkeyd, run as lk-owner: each master key
source fails closed (a missing, corrupt or locked key stops the daemon with exit 78 and
makes no key), the Secret Service source against the real gnome-keyring on a private
session bus, the migration of a plaintext key into a sealed source (`--seal-master-key`,
twice), systemd's credential as LoadCredentialEncrypted= would hand it over
($CREDENTIALS_DIRECTORY), a store file that names no site or account after registrations,
and a daemon the same account cannot trace or read through /proc."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fido2.ctap2 import Ctap2

from conftest import (OWNER, ControlClient, as_daemon_account, daemon_binary, free_port, owned_directory,
                      terminate, wait_for)

HOST = "127.0.0.1"


def environment(**extra: str) -> dict:
    """The daemon's environment: ours without a session bus or credentials, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DBUS_SESSION_BUS_ADDRESS", "CREDENTIALS_DIRECTORY", "XDG_RUNTIME_DIR")}
    env.update(extra)
    return env


class Run:
    """latchkeyd on one state directory: started in the background or run to its end."""

    def __init__(self, tmp_path: Path):
        self.base = owned_directory(tmp_path / "daemon", 0o750)
        self.state = self.base / "state"
        self.log = self.base / "latchkeyd.log"

    def argv(self, *extra) -> list[str]:
        return as_daemon_account([daemon_binary(), "--state-dir", self.state, "--no-uhid",
                                  "--usbip", f"{HOST}:{free_port()}", "--presence", "auto", *extra])

    def start(self, *extra, env: dict | None = None) -> subprocess.Popen:
        with open(self.log, "ab") as log:
            return subprocess.Popen(self.argv(*extra), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    env=env or environment(), start_new_session=True)

    def until_ready(self, process: subprocess.Popen) -> ControlClient:
        control = ControlClient(str(self.state / "control.sock"))
        wait_for(lambda: process.poll() is not None or control.get("/v1/status"), 30, "the control socket")
        assert process.poll() is None, f"latchkeyd exited {process.returncode}:\n{self.text()}"
        return control

    def stop(self, process: subprocess.Popen) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0, self.text()

    def refused(self, *extra, env: dict | None = None) -> str:
        """Runs the daemon, expects exit 78, and returns what it logged."""
        result = subprocess.run(self.argv(*extra), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                env=env or environment(), timeout=60)
        assert result.returncode == 78, f"exit {result.returncode}:\n{result.stdout}{result.stderr}"
        return result.stdout + result.stderr

    def seal(self, source: str, *extra, env: dict | None = None, as_root: bool = False) -> subprocess.CompletedProcess:
        argv = [str(daemon_binary()), "--state-dir", str(self.state), "--master-key", source, "--seal-master-key",
                *map(str, extra)]
        return subprocess.run(argv if as_root else as_daemon_account(argv), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, env=env or environment(), timeout=60)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def credentials_directory(tmp_path: Path, content: bytes | None) -> Path:
    """A directory as systemd's $CREDENTIALS_DIRECTORY, readable by the daemon's account."""
    directory = owned_directory(tmp_path / "credentials", 0o700)
    if content is not None:
        (directory / "master-key").write_bytes(content)
        if OWNER is not None:
            os.chown(directory / "master-key", OWNER.uid, OWNER.gid)
        (directory / "master-key").chmod(0o400)
    return directory


# ---- systemd credentials ---------------------------------------------------------------


@pytest.mark.parametrize("content, says", [
    (None, "does not exist"), (b"", "holds 0 bytes"), (os.urandom(31), "holds 31 bytes"),
    (os.urandom(33), "more than 32"),
])
def test_a_missing_or_corrupt_credential_stops_the_daemon(tmp_path, content, says):
    run = Run(tmp_path)
    directory = credentials_directory(tmp_path, content)
    log = run.refused("--master-key", "systemd-credential", env=environment(CREDENTIALS_DIRECTORY=str(directory)))
    assert says in log and "master key" in log
    assert not (run.state / "master-key").exists(), "a plaintext key was made after all"


def test_without_credentials_from_systemd_the_credential_source_stops_the_daemon(tmp_path):
    run = Run(tmp_path)
    log = run.refused("--master-key", "systemd-credential")
    assert "LoadCredentialEncrypted=master-key:" in log
    assert not (run.state / "master-key").exists()


def test_a_credential_beside_the_file_source_is_refused_not_ignored(tmp_path):
    run = Run(tmp_path)
    directory = credentials_directory(tmp_path, os.urandom(32))
    log = run.refused(env=environment(CREDENTIALS_DIRECTORY=str(directory)))
    assert 'source = "systemd-credential"' in log


@pytest.mark.skipif(shutil.which("systemd-creds") is None or os.geteuid() != 0,
                    reason="needs systemd-creds and root (the host key)")
def test_a_plaintext_key_moves_into_a_systemd_credential_and_the_daemon_runs_on_it(tmp_path):
    run = Run(tmp_path)
    process = run.start()
    control = run.until_ready(process)
    control.post("/v1/keys", {"name": "kept", "uhid": False, "usbip": True}, expect=201)
    run.stop(process)
    plaintext = (run.state / "master-key").read_bytes()
    config = tmp_path / "seal.toml"
    config.write_text('[master-key]\nwith-key = "host"\n')
    # The test's own host key, never the machine's /var/lib/systemd/credential.secret.
    env = environment(SYSTEMD_CREDENTIAL_SECRET=str(tmp_path / "host.secret"))
    for expected in ("moved", "nothing to move"):
        result = run.seal("systemd-credential", "--config", config, env=env, as_root=True)
        assert result.returncode == 0, result.stderr
        assert expected in result.stdout, result.stdout
        assert not (run.state / "master-key").exists()
    credential = run.state / "master-key.cred"
    assert plaintext not in credential.read_bytes()
    # What systemd does for LoadCredentialEncrypted=: decrypt into $CREDENTIALS_DIRECTORY.
    decrypted = subprocess.run(["systemd-creds", "decrypt", "--name=master-key", str(credential), "-"],
                               capture_output=True, env=env, timeout=30, check=True).stdout
    assert decrypted == plaintext
    directory = credentials_directory(tmp_path, decrypted)
    log_start = len(run.text())
    process = run.start("--master-key", "systemd-credential",
                        env=environment(CREDENTIALS_DIRECTORY=str(directory)))
    control = run.until_ready(process)
    assert any(k["name"] == "kept" for k in control.get("/v1/keys"))
    run.stop(process)
    logged = run.text()[log_start:]
    assert "source=systemd-credential" in logged and "sealed-with=host" in logged
    assert "host key only" in logged
    assert plaintext.hex() not in logged


# ---- the Secret Service (gnome-keyring) ------------------------------------------------


class Keyring:
    """A private session bus with gnome-keyring-daemon's Secret Service on it, unlocked with
    a password, all run as the daemon's account with a home of its own."""

    def __init__(self, tmp_path: Path):
        self.home = owned_directory(tmp_path / "home", 0o700)
        self.runtime = owned_directory(tmp_path / "runtime", 0o700)
        self.bus = subprocess.Popen(
            as_daemon_account(["timeout", "900", "dbus-daemon", "--session", "--nofork", "--print-address=1"]),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True, env=self.env())
        self.address = self.bus.stdout.readline().strip()
        assert self.address.startswith("unix:"), self.address
        self.keyring = subprocess.Popen(
            as_daemon_account(["timeout", "900", "gnome-keyring-daemon", "--foreground", "--unlock",
                               "--components=secrets"]),
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, env=self.env())
        self.keyring.stdin.write(b"login password")
        self.keyring.stdin.close()
        # The login keyring is made from the password a moment after the name is taken.
        wait_for(lambda: self.owns_name() and "collection/login" in self.collections(), 20,
                 "the Secret Service's login keyring on the bus")

    def env(self, **extra) -> dict:
        env = environment(HOME=str(self.home), XDG_RUNTIME_DIR=str(self.runtime),
                          XDG_DATA_HOME=str(self.home / "data"), **extra)
        if getattr(self, "address", None):
            env["DBUS_SESSION_BUS_ADDRESS"] = self.address
        return env

    def tool(self, argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(as_daemon_account(argv), capture_output=True, text=True, env=self.env(), timeout=30)

    def owns_name(self) -> bool:
        result = self.tool(["gdbus", "call", "--session", "--dest", "org.freedesktop.DBus", "--object-path",
                            "/org/freedesktop/DBus", "--method", "org.freedesktop.DBus.NameHasOwner",
                            "org.freedesktop.secrets"])
        return "true" in result.stdout

    def collections(self) -> str:
        return self.tool(["gdbus", "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path",
                          "/org/freedesktop/secrets", "--method", "org.freedesktop.DBus.Properties.Get",
                          "org.freedesktop.Secret.Service", "Collections"]).stdout

    def item(self, state: Path) -> str:
        result = self.tool(["secret-tool", "lookup", "application", "latchkey", "state-directory", str(state)])
        return result.stdout.strip()

    def lock(self) -> None:
        result = self.tool(["gdbus", "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path",
                            "/org/freedesktop/secrets", "--method", "org.freedesktop.Secret.Service.Lock",
                            "['/org/freedesktop/secrets/collection/login']"])
        assert result.returncode == 0, result.stderr

    def close(self) -> None:
        terminate(self.keyring)
        terminate(self.bus)


@pytest.fixture
def keyring(tmp_path):
    missing = [t for t in ("dbus-daemon", "gdbus", "gnome-keyring-daemon", "secret-tool") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (Debian: dbus, libglib2.0-bin, gnome-keyring, libsecret-tools)")
    ring = Keyring(tmp_path)
    yield ring
    ring.close()


def test_the_secret_service_source_makes_the_key_in_the_keyring_and_fails_closed_when_locked(tmp_path, keyring):
    run = Run(tmp_path)
    process = run.start("--master-key", "secret-service", env=keyring.env())
    control = run.until_ready(process)
    control.post("/v1/keys", {"name": "kept", "uhid": False, "usbip": True}, expect=201)
    run.stop(process)
    assert "master key created" in run.text() and "source=secret-service" in run.text()
    assert not (run.state / "master-key").exists(), "a sealed source never writes the key to disk"
    stored = keyring.item(run.state)
    assert len(stored) == 64
    assert stored not in run.text()
    # The second start reads the same key: the stores open.
    process = run.start("--master-key", "secret-service", env=keyring.env())
    control = run.until_ready(process)
    assert any(k["name"] == "kept" for k in control.get("/v1/keys"))
    run.stop(process)
    assert "master key loaded" in run.text()
    # Locked (the session ended): the daemon stops, and makes nothing in its place.
    keyring.lock()
    log = run.refused("--master-key", "secret-service", env=keyring.env())
    assert "locked" in log
    assert not (run.state / "master-key").exists()
    # Without a session bus at all: the same.
    log = run.refused("--master-key", "secret-service")
    assert "no session bus" in log


def test_a_plaintext_key_moves_into_the_keyring_and_the_file_is_removed(tmp_path, keyring):
    run = Run(tmp_path)
    process = run.start(env=keyring.env())
    control = run.until_ready(process)
    control.post("/v1/keys", {"name": "kept", "uhid": False, "usbip": True}, expect=201)
    run.stop(process)
    plaintext = (run.state / "master-key").read_bytes()
    # A sealed source refuses to start beside the plaintext file, and names the migration.
    assert "--seal-master-key" in run.refused("--master-key", "secret-service", env=keyring.env())
    result = run.seal("secret-service", env=keyring.env())
    assert result.returncode == 0, result.stderr
    assert "moved" in result.stdout and "removed" in result.stdout
    assert not (run.state / "master-key").exists()
    assert bytes.fromhex(keyring.item(run.state)) == plaintext
    again = run.seal("secret-service", env=keyring.env())
    assert again.returncode == 0 and "nothing to move" in again.stdout, again.stdout + again.stderr
    process = run.start("--master-key", "secret-service", env=keyring.env())
    control = run.until_ready(process)
    assert any(k["name"] == "kept" for k in control.get("/v1/keys"))
    run.stop(process)


def test_the_migration_keeps_the_plaintext_file_when_the_keyring_is_locked(tmp_path, keyring):
    run = Run(tmp_path)
    process = run.start(env=keyring.env())
    run.until_ready(process)
    run.stop(process)
    keyring.lock()
    result = run.seal("secret-service", env=keyring.env())
    assert result.returncode == 78, result.stdout + result.stderr
    assert (run.state / "master-key").exists()


# ---- what a copy of the store shows, and what the same account can see -------------------


def test_a_copy_of_the_store_names_no_site_and_no_account(usb, daemon, make_key):
    key = make_key()
    ctap = Ctap2(usb.ctap(key["usbip"]["busid"]))
    names = []
    for index in range(3):
        rp_id, user, handle = f"bank-{index}.e2e.example", f"person-{index}@mail.example", os.urandom(16)
        names += [rp_id.encode(), user.encode(), f"Person Number {index}".encode(), handle]
        ctap.make_credential(os.urandom(32), {"id": rp_id, "name": f"Bank {index}"},
                             {"id": handle, "name": user, "displayName": f"Person Number {index}"},
                             [{"type": "public-key", "alg": -7}], options={"rk": True})
    directory = daemon.state_dir / "keys" / key["name"]
    for name in ("credentials.db", "credentials.db-wal"):
        path = directory / name
        content = path.read_bytes() if path.exists() else b""
        for needle in names:
            assert needle not in content, f"{name} shows {needle!r} in clear"
    # The daemon still finds them by relying party.
    listed = daemon.control.get(f"/v1/keys/{key['name']}/credentials")
    assert {c["rpId"] for c in listed} >= {"bank-0.e2e.example", "bank-1.e2e.example", "bank-2.e2e.example"}


def test_the_daemon_cannot_be_traced_or_read_by_its_own_account(daemon):
    pid = daemon.proc.pid
    if OWNER is not None:
        # setpriv execs latchkeyd in place, so the child is the daemon.
        status = Path(f"/proc/{pid}/status").read_text()
        assert f"Uid:\t{OWNER.uid}" in status, status
    # Not dumpable: the kernel makes the files in its /proc directory root's, whatever
    # account runs it.
    assert os.stat(f"/proc/{pid}/environ").st_uid == 0
    assert os.stat(f"/proc/{pid}/mem").st_uid == 0
    limits = Path(f"/proc/{pid}/limits").read_text()
    assert any(line.startswith("Max core file size") and line.split()[4:6] == ["0", "0"]
               for line in limits.splitlines()), limits
    if OWNER is not None:
        environ = OWNER.run(["cat", f"/proc/{pid}/environ"])
        assert environ.returncode != 0 and "Permission denied" in environ.stderr.decode()
