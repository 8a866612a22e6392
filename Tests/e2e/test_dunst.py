"""latchkeyctl agent with Debian's real notification server, dunst, rather than the fake:
a private session bus, an Xvfb display and dunst on it, all as the keys' owner
(lk-owner). A USB/IP makeCredential shows a prompt in dunst; Allow is invoked through
dunst itself, `dunstctl context`, whose menu command (dunst's `dmenu` setting) is a
script that picks the allow action as a click would (Tests/kernel/desktop-checks.sh
drives dunst the same way); the registration completes and python-fido2's Fido2Server
verifies it. dunst sends ActionInvoked only to the connection that called Notify, so a
notifier that shows on one connection and listens on another fails here. Needs dunst,
dunstctl, Xvfb, dbus-daemon and dbus-send (Debian: dunst, xvfb, dbus); skipped without
them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import rp
from conftest import as_daemon_account, owned_directory, terminate, wait_for
from test_control_api import start_in_thread
from test_notifications import start_session_bus
from test_prompt_agent import Agent

TOOLS = ("dunst", "dunstctl", "Xvfb", "dbus-daemon", "dbus-send")

PICK_ACTION = """#!/bin/sh
# dunst's menu command (dmenu): stdin lists "#LABEL (SUMMARY) [ID,KEY]" lines; picks KEY=$1
menu=$(cat)
printf '%s\\n' "$menu" >> "{home}/menu.log"
printf '%s\\n' "$menu" | grep -m 1 ",$1\\]\\$"
"""

RECORD = """#!/bin/sh
# a dunst rule's script: one line per notification shown (id, app, summary)
printf '%s\\t%s\\t%s\\n' "$DUNST_ID" "$DUNST_APP_NAME" "$DUNST_SUMMARY" >> "{home}/shown.log"
"""

DUNSTRC = """[global]
    dmenu = {home}/pick-action allow
    always_run_script = true
[lk-record]
    summary = "*"
    script = {home}/record
"""


class Desktop:
    """A private session bus, Xvfb and dunst, as the daemon's account."""

    def __init__(self, home: Path):
        self.home = home
        self.procs: list[subprocess.Popen] = []
        bus, self.address = start_session_bus()
        self.procs.append(bus)
        # timeout(1): each ends by itself even if this process dies before its teardown.
        xvfb = self._start(["timeout", "300", "Xvfb", "-displayfd", "1", "-screen", "0", "800x600x24",
                            "-nolisten", "tcp"], {})
        number = xvfb.stdout.readline().strip()
        assert number.isdigit(), f"Xvfb printed {number!r}"
        self.env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(home), "DISPLAY": f":{number}",
                    "DBUS_SESSION_BUS_ADDRESS": self.address}
        self.dunst = self._start(["timeout", "300", "dunst", "-config", str(home / "dunstrc")], self.env,
                                 output=home / "dunst.log")
        wait_for(lambda: self.dunstctl("count", "displayed").returncode == 0, 10,
                 "dunst on the session bus (dunstctl count displayed)", interval=0.1)

    def _start(self, argv: list[str], env: dict, output: Path | None = None) -> subprocess.Popen:
        out = open(output, "w") if output else subprocess.PIPE
        proc = subprocess.Popen(as_daemon_account(argv), env=env or {"PATH": "/usr/bin:/bin"},
                                stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT if output else subprocess.DEVNULL, text=True,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def dunstctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(as_daemon_account(["dunstctl", *args]), env=self.env, capture_output=True,
                              text=True, timeout=20)

    def lines(self, name: str) -> list[str]:
        path = self.home / name
        return path.read_text().splitlines() if path.exists() else []

    def stop(self) -> None:
        for proc in reversed(self.procs):
            terminate(proc)


@pytest.fixture(scope="module")
def desktop(tmp_path_factory):
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs dunst and Xvfb (Debian: dunst, xvfb, dbus); missing: {missing}")
    home = owned_directory(tmp_path_factory.mktemp("dunst") / "home")
    for name, text, mode in (("pick-action", PICK_ACTION, 0o755), ("record", RECORD, 0o755),
                             ("dunstrc", DUNSTRC, 0o644)):
        (home / name).write_text(text.replace("{home}", str(home)))
        (home / name).chmod(mode)
    desktop = None
    try:
        desktop = Desktop(home)
        yield desktop
    finally:
        if desktop is not None:
            desktop.stop()


def test_allow_in_dunst_completes_a_registration(daemon, desktop, usb, make_key, control):
    key = make_key(presence="prompt")
    name = key["name"]
    agent = Agent(daemon.control.path, desktop.address)
    try:
        agent.wait_for_line("following presence requests")
        website = rp.make_server()
        client = rp.make_client(usb.ctap(key["usbip"]["busid"]))
        thread, result = start_in_thread(
            lambda: rp.register(client, website, resident_key=True, user=rp.new_user("alice")))

        [shown] = wait_for(lambda: desktop.lines("shown.log"), 15, "dunst showing the prompt")
        [entry] = control.pending(name)
        assert entry["notification"] == "agent", entry
        _, app, summary = shown.split("\t")
        assert (app, summary) == ("latchkey", f"Create a passkey for {rp.RP_ID}?"), shown
        agent.wait_for_line("prompt shown")

        # What a click on Allow does: dunst's context menu, answered by the menu script.
        context = desktop.dunstctl("context")
        assert context.returncode == 0, context
        thread.join(15)
        assert "error" not in result, (result, desktop.lines("menu.log"), "".join(agent.log))
        assert result["value"].user_present  # rp.register: Fido2Server.register_complete verified it
        assert any(line.endswith(",allow]") for line in desktop.lines("menu.log")), desktop.lines("menu.log")
        agent.wait_for_line("answered from the notification")
        assert control.pending(name) == []
        [decision] = control.get(f"/v1/keys/{name}/policy/decisions")
        assert decision["outcome"] == "approved" and decision["path"] == "prompt", decision
    finally:
        assert agent.stop() == 0, "".join(agent.log)
