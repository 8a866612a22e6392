"""Acting as other local accounts: sockets the kernel attributes to another uid.

The test command (scripts/test.sh) runs as root and creates two unprivileged accounts
in one group (scripts/test-accounts.sh):

    lk-owner   runs latchkeyd, owns the keys the suite makes (LATCHKEY_TEST_OWNER)
    lk-other   another member of the same group: "the other account" (LATCHKEY_TEST_OTHER)
    lk-test    their group, the control socket's group (LATCHKEY_TEST_GROUP)

The suite itself stays root (it reads the repository and root's Python). To speak as an
account it asks a connector: a small stdlib-only process started as that account
(setpriv, /usr/bin/python3) that opens a Unix or TCP socket on request and hands it
back over a socketpair (SCM_RIGHTS). The kernel records the account that opened a
socket: SO_PEERCRED on the control socket and NETLINK_SOCK_DIAG on a loopback USB/IP
connection name that uid, while python-fido2 in this process drives the socket.

    owner = account("owner")          # None when the accounts do not exist (not root)
    sock = owner.connect_unix(path)   # the daemon's SO_PEERCRED says lk-owner
    sock = owner.connect_tcp(host, port)
    owner.run(["curl", ...])          # a whole program as the account (runuser)
    owner.command([binary, ...])      # argv that runs a program as it, copied where it can run it
    owner.directory(path)             # a directory of its own (below the temporary directory)
"""

from __future__ import annotations

import array
import atexit
import grp
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

ROLES = {
    "owner": os.environ.get("LATCHKEY_TEST_OWNER", "lk-owner"),
    "other": os.environ.get("LATCHKEY_TEST_OTHER", "lk-other"),
}
GROUP = os.environ.get("LATCHKEY_TEST_GROUP", "lk-test")
SYSTEM_PYTHON = "/usr/bin/python3"

# Runs as the account: one request per line ({"unix": PATH} or {"tcp": [HOST, PORT]}),
# answered with one byte (0 ok, 1 failed, then the error text) and the socket's descriptor.
_CONNECTOR = r"""
import json, os, socket, sys
channel = socket.socket(fileno=int(sys.argv[1]))
reader = channel.makefile("rb")
for line in reader:
    request = json.loads(line)
    try:
        if "unix" in request:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(request.get("timeout", 10))
            s.connect(request["unix"])
        else:
            host, port = request["tcp"]
            s = socket.create_connection((host, port), timeout=request.get("timeout", 10))
        s.settimeout(None)
        socket.send_fds(channel, [b"\0"], [s.fileno()])
        s.close()
    except OSError as error:
        channel.sendall(b"\1" + str(error).encode()[:200].ljust(200))
"""


class Account:
    """One local account the suite can speak as."""

    def __init__(self, name: str):
        entry = pwd.getpwnam(name)
        self.name = name
        self.uid = entry.pw_uid
        self.gid = entry.pw_gid
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._channel: socket.socket | None = None

    def __repr__(self) -> str:
        return f"Account({self.name}, uid {self.uid})"

    def setpriv(self) -> list[str]:
        """The command prefix that runs a program as this account, with its groups."""
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--"]

    def _connector(self) -> socket.socket:
        if self._proc is None or self._proc.poll() is not None:
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self._proc = subprocess.Popen(
                [*self.setpriv(), SYSTEM_PYTHON, "-I", "-c", _CONNECTOR, str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, cwd="/", start_new_session=True,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
            theirs.close()
            self._channel = mine
        return self._channel

    def _request(self, request: dict) -> socket.socket:
        with self._lock:
            channel = self._connector()
            channel.sendall(json.dumps(request).encode() + b"\n")
            fds = array.array("i")
            message, ancillary, _flags, _address = channel.recvmsg(
                201, socket.CMSG_LEN(fds.itemsize))
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(data[:fds.itemsize])
            if message[:1] != b"\0" or not fds:
                while len(message) < 201:
                    more = channel.recv(201 - len(message))
                    if not more:
                        break
                    message += more
                raise OSError(f"{self.name} could not connect: {message[1:].decode(errors='replace').strip()}")
            return socket.socket(fileno=fds[0])

    def connect_unix(self, path: str, timeout: float = 10) -> socket.socket:
        """A Unix stream socket connected to `path` by this account."""
        return self._request({"unix": str(path), "timeout": timeout})

    def connect_tcp(self, host: str, port: int, timeout: float = 10) -> socket.socket:
        """A TCP connection to host:port opened by this account."""
        return self._request({"tcp": [host, port], "timeout": timeout})

    def run(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        """Runs a program as this account (its groups, no environment of ours but PATH)."""
        kw.setdefault("env", {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/"})
        kw.setdefault("capture_output", True)
        kw.setdefault("timeout", 30)
        return subprocess.run([*self.setpriv(), *argv], **kw)

    def command(self, argv: list) -> list[str]:
        """`argv` run as this account (setpriv), its program where the account can run it."""
        argv = [str(a) for a in argv]
        program = argv[0] if "/" not in argv[0] else str(runnable(Path(argv[0]), self))
        return [*self.setpriv(), program, *argv[1:]]

    def directory(self, path: Path, mode: int = 0o700) -> Path:
        """Creates `path` (below the system's temporary directory) for this account: its
        owner with group lk-test and `mode`; ancestors root made 0700 below the temporary
        directory (pytest's) become traversable (0711), never listable or writable."""
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, self.uid, group_id())
        traversable(path)
        path.chmod(mode)
        return path

    def close(self) -> None:
        with self._lock:
            if self._channel is not None:
                self._channel.close()
                self._channel = None
            if self._proc is not None:
                try:
                    self._proc.wait(5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(5)
                self._proc = None


_accounts: dict[str, Account | None] = {}
_runnable: dict[Path, Path] = {}
_shared: Path | None = None


def traversable(path: Path) -> None:
    """Lets every account through the directories above `path` that root made 0700 below
    the system's temporary directory (pytest's): search only (0711), never list or write."""
    temporary = Path(tempfile.gettempdir()).resolve()
    for parent in path.resolve().parents:
        if parent == temporary or temporary not in parent.parents:
            break
        info = parent.stat()
        if info.st_uid == 0 and not info.st_mode & 0o001:
            parent.chmod((info.st_mode & 0o7777) | 0o711)


def runnable(binary: Path, account: Account, test: str = "-x") -> Path:
    """`binary`, or a copy `account` can run (`test` "-r": read, for a script): a checkout
    in root's home (0700) is out of its reach. Copies go to one directory per process,
    removed at exit."""
    global _shared
    if binary not in _runnable:
        if account.run(["test", test, str(binary)]).returncode == 0:
            _runnable[binary] = binary
        else:
            if _shared is None:
                _shared = Path(tempfile.mkdtemp(prefix="latchkey-e2e-"))
                _shared.chmod(0o755)
                atexit.register(shutil.rmtree, _shared, True)
            directory = _shared / "bin"
            directory.mkdir(mode=0o755, exist_ok=True)
            copy = directory / f"{len(_runnable)}-{binary.name}"
            shutil.copy2(binary, copy)
            copy.chmod(0o755)
            _runnable[binary] = copy
    return _runnable[binary]


def available() -> str | None:
    """None when the suite can act as the test accounts, else why not."""
    if os.geteuid() != 0:
        return "the suite does not run as root, so it cannot act as other accounts"
    if shutil.which("setpriv") is None or not os.path.exists(SYSTEM_PYTHON):
        return "setpriv or /usr/bin/python3 is missing"
    for name in ROLES.values():
        try:
            pwd.getpwnam(name)
        except KeyError:
            return f"account {name} does not exist (scripts/test-accounts.sh creates it)"
    try:
        grp.getgrnam(GROUP)
    except KeyError:
        return f"group {GROUP} does not exist (scripts/test-accounts.sh creates it)"
    return None


def account(role: str) -> Account | None:
    """The account playing `role` ("owner" or "other"), or None when unavailable."""
    if role not in _accounts:
        _accounts[role] = Account(ROLES[role]) if available() is None else None
    return _accounts[role]


def group_id() -> int:
    return grp.getgrnam(GROUP).gr_gid


def close_all() -> None:
    for acct in _accounts.values():
        if acct is not None:
            acct.close()
