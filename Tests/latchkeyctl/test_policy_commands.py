"""latchkeyctl's consent commands against the fake latchkeyd of test_latchkeyctl.py:
`watch` driven through a pseudo-terminal (prompts, y/n answers, requests that vanish,
Ctrl-D and Ctrl-C, no terminal), `policy show|set|explain` and `signal password-used`."""

from __future__ import annotations

import fcntl
import os
import pty
import subprocess
import termios
import threading

import pytest

from test_administration import drain, read_until
from test_latchkeyctl import OK, USAGE, FakeDaemon, Reply, ctl, error, latchkeyctl_fixtures

binary, daemon = latchkeyctl_fixtures()

REQUEST_1 = {"id": "p-7", "key": "default", "operation": "makeCredential", "rpId": "example.com",
             "userName": "alice", "ageMs": 100, "expiresInMs": 29900}
REQUEST_2 = {"id": "p-8", "key": "ci-1", "operation": "getAssertion", "rpId": "example.org",
             "userName": None, "userVerification": True, "ageMs": 100, "expiresInMs": 9900}
REQUEST_3 = {"id": "p-9", "key": "default", "operation": "makeCredential", "rpId": "example.net",
             "userName": "bob", "ageMs": 100, "expiresInMs": 900}




class Board:
    """The fake daemon's pending list, which answers remove requests from."""

    def __init__(self, daemon: FakeDaemon):
        self.lock = threading.Lock()
        self.pending: list[dict] = []
        daemon.route("GET", "/v1/presence/pending", lambda _: Reply(body=self.snapshot()))
        for request in (REQUEST_1, REQUEST_2, REQUEST_3):
            for verb, outcome in (("approve", "approved"), ("deny", "denied")):
                daemon.route("POST", f"/v1/presence/pending/{request['id']}/{verb}",
                             lambda _, id=request["id"], outcome=outcome: self.answer(id, outcome))

    def snapshot(self):
        with self.lock:
            return list(self.pending)

    def add(self, request):
        with self.lock:
            self.pending.append(request)

    def remove(self, id):
        with self.lock:
            self.pending = [p for p in self.pending if p["id"] != id]

    def answer(self, id, outcome):
        with self.lock:
            if not any(p["id"] == id for p in self.pending):
                return error(404, "not_found", f"no pending presence request {id}")
            self.pending = [p for p in self.pending if p["id"] != id]
        return Reply(body={"id": id, "outcome": outcome})


class Watching:
    """latchkeyctl watch on a pseudo-terminal that is its controlling terminal, so that
    Ctrl-C and Ctrl-D typed on it act as they do for a person."""

    def __init__(self, binary: str, daemon: FakeDaemon, *args: str):
        self.master, slave = pty.openpty()

        def take_terminal():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen([binary, "--socket", daemon.path, "watch", "--interval", "0.05", *args],
                                     stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                                     preexec_fn=take_terminal)
        os.close(slave)
        self.screen = b""
        self.cursor = 0  # where the next expect starts looking

    def expect(self, text: str, timeout: float = 10) -> str:
        """Waits for `text` after what earlier expects matched; returns the screen up to it."""
        start = self.cursor
        needle = text.encode()
        if needle not in self.screen[start:]:
            self.screen += read_until(self.master, lambda d: needle in self.screen[start:] + d, timeout)
        self.cursor = self.screen.index(needle, start) + len(needle)
        return self.screen[start:self.cursor].decode(errors="replace")

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def __enter__(self) -> Watching:
        return self

    def __exit__(self, *exc) -> None:
        """Ends a watch the test left running (it failed before finish())."""
        if self.proc.poll() is None:
            self.finish(1)

    def finish(self, timeout: float = 10) -> int:
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)
            self.screen += drain(self.master)
            os.close(self.master)
        return code


def test_watch_prompts_for_each_request_and_answers_it(binary, daemon):
    board = Board(daemon)
    board.add(REQUEST_1)
    with Watching(binary, daemon) as watch:
        shown = watch.expect("Allow? [y/n] ")
        for field in ("p-7", '"default"', "makeCredential", "rp:   example.com", "user: alice"):
            assert field in shown, shown
        watch.type("maybe\n")
        watch.expect("Answer y or n: ")
        watch.type("y\n")
        watch.expect("p-7 approved.")
        assert ("POST", "/v1/presence/pending/p-7/approve") in [(r.method, r.path) for r in daemon.requests]

        board.add(REQUEST_2)
        shown = watch.expect("Allow? [y/n] ")
        assert "p-8" in shown and "getAssertion" in shown and "example.org" in shown and "user:" not in shown
        assert "asks for user verification" in shown
        watch.type("n\n")
        watch.expect("p-8 denied.")
        assert ("POST", "/v1/presence/pending/p-8/deny") in [(r.method, r.path) for r in daemon.requests]

        # A request that times out (or that the host cancels) while the prompt shows it.
        board.add(REQUEST_3)
        watch.expect("p-9 on key")
        watch.expect("Allow? [y/n] ")
        board.remove("p-9")
        watch.expect("p-9 is gone")
        posts = [r.path for r in daemon.requests if r.method == "POST"]
        assert posts == ["/v1/presence/pending/p-7/approve", "/v1/presence/pending/p-8/deny"]

        watch.type("\x04")  # Ctrl-D at the start of a line: end of input
        assert watch.finish() == OK


def test_watch_ends_cleanly_on_ctrl_c(binary, daemon):
    board = Board(daemon)
    board.add(REQUEST_1)
    with Watching(binary, daemon, "--key", "default") as watch:
        watch.expect("Allow? [y/n] ")
        watch.type("\x03")
        assert watch.finish() == OK
        assert not [r for r in daemon.requests if r.method == "POST"], "Ctrl-C answered nothing"


def test_watch_key_filter(binary, daemon):
    board = Board(daemon)
    board.add(REQUEST_2)
    board.add(REQUEST_1)
    with Watching(binary, daemon, "--key", "default") as watch:
        shown = watch.expect("Allow? [y/n] ")
        assert "p-7" in shown and "p-8" not in shown
        watch.type("\x04")
        assert watch.finish() == OK


def test_watch_without_a_terminal_is_a_usage_error(binary, daemon):
    Board(daemon)
    proc = subprocess.run([binary, "--socket", daemon.path, "watch"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == USAGE
    assert "needs a terminal" in proc.stderr and "approve|deny" in proc.stderr
    assert daemon.requests == []


POLICY = {"presence": "prompt", "userVerification": "deny", "notifications": True,
          "conditionalRegistration": True, "signalWindowSeconds": 300, "onMismatch": "fallback",
          "allowRpIds": [], "denyRpIds": ["*.bank.example"], "requirePin": False, "rateLimitPerHour": 3,
          "openSignals": [{"rpId": "example.com", "userName": "alice", "expiresInMs": 120000}]}


def test_policy_show(binary, daemon):
    daemon.route("GET", "/v1/keys/ci-1/policy", Reply(body=POLICY))
    result = ctl(binary, daemon, "policy", "--key", "ci-1")
    assert result.code == OK, result.err
    for field in ("user verification", "deny", "on mismatch", "fallback", "*.bank.example", "3 per rp per hour",
                  "example.com", "alice", "2m 00s"):
        assert field in result.out, result.out
    assert ctl(binary, daemon, "policy", "show", "--key", "ci-1", "--json").json() == POLICY


def test_policy_set_sends_only_what_is_given(binary, daemon):
    daemon.route("PUT", "/v1/keys/default/policy", Reply(body=POLICY))
    result = ctl(binary, daemon, "policy", "set", "--on-mismatch", "deny", "--allow-rp", "example.com",
                 "--allow-rp", "*.example.org", "--require-pin", "on", "--rate-limit", "1")
    assert result.code == OK, result.err
    assert daemon.only().json() == {"onMismatch": "deny", "allowRpIds": ["example.com", "*.example.org"],
                                    "requirePin": True, "rateLimitPerHour": 1}
    daemon.requests.clear()
    assert ctl(binary, daemon, "policy", "set", "--allow-rp", "").code == OK
    assert daemon.only().json() == {"allowRpIds": []}
    assert ctl(binary, daemon, "policy", "set").code == USAGE
    assert ctl(binary, daemon, "policy", "set", "--user-verification", "maybe").code == USAGE


def test_policy_set_refused(binary, daemon):
    daemon.route("PUT", "/v1/keys/default/policy",
                 error(400, "bad_request", 'user-verification = "auto" needs presence mode "auto"'))
    result = ctl(binary, daemon, "policy", "set", "--user-verification", "auto")
    assert result.code == 1
    assert "needs presence mode" in result.err


DECISIONS = [
    {"id": 2, "time": "2026-11-21T19:00:01.000Z", "operation": "makeCredential", "rpId": "example.com",
     "userName": "alice", "userVerification": False, "path": "conditional", "outcome": "approved",
     "reason": "conditional registration: password used for alice at example.com 3 s ago", "durationMs": 1},
    {"id": 1, "time": "2026-11-21T19:00:00.000Z", "operation": "makeCredential", "rpId": "example.com",
     "userName": "bob", "userVerification": True, "path": "mismatch", "outcome": "denied",
     "reason": "not a conditional registration: no password-used signal for bob at example.com; on-mismatch = deny",
     "durationMs": 0},
]


def test_policy_explain(binary, daemon):
    daemon.route("GET", "/v1/keys/ci-1/policy/decisions?limit=5", Reply(body=DECISIONS))
    result = ctl(binary, daemon, "policy", "explain", "--key", "ci-1", "-n", "5")
    assert result.code == OK, result.err
    lines = result.out.splitlines()
    assert lines[0] == "#2 2026-11-21T19:00:01.000Z  makeCredential for alice at example.com: approved [conditional]"
    assert lines[1].strip() == DECISIONS[0]["reason"]
    assert "(UV asked): denied [mismatch]" in lines[2]
    assert ctl(binary, daemon, "policy", "explain", "--key", "ci-1", "-n", "5", "--json").json() == DECISIONS
    assert ctl(binary, daemon, "policy", "explain", "-n", "0").code == USAGE
    daemon.route("GET", "/v1/keys/default/policy/decisions?limit=10", Reply(body=[]))
    assert "No decisions recorded" in ctl(binary, daemon, "policy", "explain").out


def test_signal_password_used(binary, daemon):
    daemon.route("POST", "/v1/keys/ci-1/signals/password-used",
                 Reply(body={"key": "ci-1", "rpId": "example.com", "userName": "alice", "expiresInMs": 300000}))
    result = ctl(binary, daemon, "signal", "password-used", "--rp", "example.com", "--user", "alice", "--key", "ci-1")
    assert result.code == OK, result.err
    request = daemon.only()
    assert request.json() == {"rpId": "example.com", "userName": "alice"}
    assert 'Conditional registration open for alice at example.com on key "ci-1" for 5m 00s.' in result.out
    assert ctl(binary, daemon, "signal", "password-used", "--rp", "example.com").code == USAGE
