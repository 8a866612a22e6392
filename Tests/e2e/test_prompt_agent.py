"""latchkeyctl agent, the prompt agent of an owner's session (docs/prompts.md), against the
real latchkeyd and a fake notification server (fake_notifications.py) on a private
session bus. The daemon has no session bus (as a system service has none), so the agent,
run as the keys' owner (lk-owner, which the daemon identifies by SO_PEERCRED), shows each
prompt: its notification names the site, the user, the transport and the requester;
Allow completes a registration python-fido2's Fido2Server verifies; Deny refuses and
starts the cooldown; a hostile RP ID and user name arrive escaped; a flood meets the rate
limit; the agent follows a restarted daemon; only the owner may answer. Needs
dbus-daemon, gdbus and PyGObject (Debian: dbus, libglib2.0-bin, python3-gi)."""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
import time

import pytest
from fido2.ctap import CtapError
from fido2.ctap2 import Ctap2

import rp
from conftest import OWNER, Daemon, Opened, as_daemon_account, daemon_binary, latchkeyctl_binary, terminate, wait_for
from test_control_api import start_in_thread
from test_notifications import FakeServer, next_from, python_with_gi, start_session_bus


def skip_without_a_bus() -> str:
    """A Python with PyGObject for the fake server; skips the test without the tools."""
    python = python_with_gi()
    missing = [tool for tool in ("dbus-daemon", "gdbus") if shutil.which(tool) is None]
    if missing or python is None:
        pytest.skip(f"needs dbus-daemon, gdbus and PyGObject (missing: {missing or ['python3-gi']})")
    return python


@pytest.fixture(scope="module")
def session_bus():
    """A private session bus of the keys' owner with the fake notification server on it."""
    python = skip_without_a_bus()
    bus, address = start_session_bus()
    server = None
    try:
        server = FakeServer(python, address)
        yield address, server
    finally:
        if server is not None:
            terminate(server.proc)
        terminate(bus)


class Agent:
    """`latchkeyctl agent` run as the keys' owner on `socket_path`, its log read on a thread."""

    def __init__(self, socket_path: str, bus_address: str):
        argv = as_daemon_account([latchkeyctl_binary(), "--socket", socket_path, "agent", "--log-level", "debug",
                                  "--max-retry-delay", "1"])
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/", "DBUS_SESSION_BUS_ADDRESS": bus_address}
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        self.log: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line)
            self.lines.put(line)

    def wait_for_line(self, text: str, timeout: float = 10.0) -> str:
        return next_from(self.lines, lambda line: text in line, timeout,
                         lambda: f"the agent logged no {text!r} in {timeout} s; its log:\n{''.join(self.log)}")

    def stop(self) -> int:
        terminate(self.proc)
        return self.proc.returncode


def drain(server: FakeServer) -> list[dict]:
    calls = []
    while not server.calls.empty():
        calls.append(server.calls.get())
    return calls


@pytest.fixture
def agent(daemon, session_bus):
    address, server = session_bus
    drain(server)
    process = Agent(daemon.control.path, address)
    try:
        process.wait_for_line("following presence requests")
        yield process, server
    finally:
        code = process.stop()
    assert code == 0, f"the agent exited with {code} on SIGTERM; its log:\n{''.join(process.log)}"


def make_credential(device, rp_id=rp.RP_ID, user_name="alice", display_name=None, event=None):
    return Ctap2(device).make_credential(
        os.urandom(32), {"id": rp_id, "name": "Example"},
        {"id": os.urandom(16), "name": user_name, "displayName": display_name or user_name},
        [{"type": "public-key", "alg": -7}], options={"rk": True}, event=event)


def allow(server: FakeServer, notify: dict, thread: threading.Thread, result: dict):
    """Clicks Allow in the notification; the request it answers succeeds."""
    server.invoke(notify["id"], "allow")
    thread.join(15)
    assert "error" not in result, result
    return result["value"]


def ctap_error(result) -> int | None:
    error = result.get("error")
    return error.code if isinstance(error, CtapError) else None


def no_call(server: FakeServer, name: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            call = server.calls.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            continue
        assert call["call"] != name, f"the server got {call}"


def test_allow_in_the_agents_notification_completes_a_registration(agent, usb, make_key, control):
    process, server = agent
    key = make_key(presence="prompt")
    name = key["name"]
    website = rp.make_server()
    client = rp.make_client(usb.ctap(key["usbip"]["busid"]))
    user = rp.new_user("alice")
    thread, result = start_in_thread(lambda: rp.register(client, website, resident_key=True, user=user))

    notify = server.next_call("Notify", timeout=10)
    [entry] = control.pending(name)
    assert entry["notification"] == "agent", entry
    assert notify["summary"] == f"Create a passkey for {rp.RP_ID}?", notify
    assert notify["actions"] == ["allow", "Allow", "deny", "Deny"]
    body = notify["body"].split("\n")
    assert f"Site: {rp.RP_ID}, as the requesting program names it." in body, body
    assert "User: alice (Alice)" in body, body
    assert f"Key {name}, request {entry['id']}: or answer with latchkeyctl approve|deny {entry['id']}." in body
    assert 0 < notify["timeout"] <= 30_000
    process.wait_for_line(f"prompt shown")

    registration = allow(server, notify, thread, result)  # rp.register: Fido2Server.register_complete verified it
    assert registration.user_present
    process.wait_for_line("answered from the notification")
    assert control.pending(name) == []
    [decision] = control.get(f"/v1/keys/{name}/policy/decisions")
    assert decision["outcome"] == "approved" and decision["path"] == "prompt", decision


def test_the_agents_notification_names_the_transport_and_requester(agent, usb, make_key, control):
    process, server = agent
    key = make_key(presence="prompt")
    device = usb.ctap(key["usbip"]["busid"])
    thread, result = start_in_thread(lambda: make_credential(device, user_name="bob"))
    notify = server.next_call("Notify", timeout=10)
    [entry] = control.pending(key["name"])
    assert entry["transport"] == "usbip", entry
    # The suite's USB/IP connections are opened by lk-owner (identities.py): the kernel names it.
    expected = f"Asked over USB/IP by uid {entry['requesterUid']}"
    if OWNER is not None:
        assert entry["requesterUid"] == OWNER.uid and entry["requesterUser"] == OWNER.name, entry
        expected += f" ({OWNER.name})"
    assert expected in notify["body"], notify["body"]
    allow(server, notify, thread, result)


def test_deny_refuses_and_starts_the_cooldown(agent, usb, make_key, control):
    process, server = agent
    key = make_key(presence="prompt")
    name = key["name"]
    control.put(f"/v1/keys/{name}/policy", {"denyCooldownSeconds": 3})
    device = usb.ctap(key["usbip"]["busid"])

    thread, result = start_in_thread(lambda: make_credential(device, user_name="carol"))
    notify = server.next_call("Notify", timeout=10)
    server.invoke(notify["id"], "deny")
    thread.join(10)
    assert ctap_error(result) == CtapError.ERR.OPERATION_DENIED
    denied_at = time.monotonic()

    # In the cooldown: refused at once, nothing shown.
    with pytest.raises(CtapError) as refused:
        make_credential(device, user_name="carol")
    assert refused.value.code == CtapError.ERR.OPERATION_DENIED
    assert time.monotonic() - denied_at < 3, "the refusal came after the cooldown; the test proves nothing"
    no_call(server, "Notify", 0.5)
    assert control.pending(name) == []
    latest = control.get(f"/v1/keys/{name}/policy/decisions")[0]  # newest first
    assert latest["path"] == "cooldown" and latest["outcome"] == "denied", latest
    assert "refused without a prompt: a prompt was denied" in latest["reason"]
    assert "(deny-cooldown-seconds = 3)" in latest["reason"], latest

    # After it, the key asks again.
    time.sleep(max(0.0, 3.2 - (time.monotonic() - denied_at)))
    thread, result = start_in_thread(lambda: make_credential(device, user_name="carol"))
    notify = server.next_call("Notify", timeout=10)
    allow(server, notify, thread, result)


def test_a_hostile_rp_id_and_user_name_arrive_escaped(agent, usb, make_key, control):
    process, server = agent
    key = make_key(presence="prompt")
    device = usb.ctap(key["usbip"]["busid"])
    hostile_rp = "<b>bank</b>&co\u202emoc.evil"
    thread, result = start_in_thread(lambda: make_credential(
        device, rp_id=hostile_rp, user_name="<i>root</i>\u202e\u200b & co",
        display_name="Alice <a href=\"https://evil.example\">here</a>\nline two"))
    notify = server.next_call("Notify", timeout=10)
    [entry] = control.pending(key["name"])
    assert entry["rpId"] == hostile_rp, "the API gives the RP ID as the requester sent it"
    summary, body = notify["summary"], notify["body"]
    assert summary == "Create a passkey for a site with an unusual name (see below)?", summary
    assert "Site: \u201c&lt;b&gt;bank&lt;/b&gt;&amp;comoc.evil\u201d" in body, body
    assert "User: &lt;i&gt;root&lt;/i&gt; &amp; co (Alice &lt;a href=\"https://evil.example\"&gt;here&lt;/a&gt; line two)" \
        in body.split("\n"), body
    for text in (summary, body):
        for forbidden in ("<b>", "<i>", "<a ", "\u202e", "\u200b"):
            assert forbidden not in text, (forbidden, text)
    allow(server, notify, thread, result)


def test_a_flood_of_requests_meets_the_rate_limit(agent, usb, make_key, control):
    """A requester that asks and cancels again and again gets prompts-per-minute prompts,
    then refusals that show nothing; each cancelled prompt's notification is closed."""
    process, server = agent
    key = make_key(presence="prompt")
    name = key["name"]
    control.put(f"/v1/keys/{name}/policy", {"promptsPerMinute": 3})
    device = usb.ctap(key["usbip"]["busid"])
    shown = []
    for _ in range(3):
        cancel = threading.Event()
        thread, result = start_in_thread(lambda cancel=cancel: make_credential(device, user_name="dave", event=cancel))
        notify = server.next_call("Notify", timeout=10)
        shown.append(notify["id"])
        cancel.set()  # CTAPHID_CANCEL
        thread.join(10)
        assert ctap_error(result) == CtapError.ERR.KEEPALIVE_CANCEL, result
        assert server.next_call("CloseNotification", timeout=10)["id"] == notify["id"]
    started = time.monotonic()
    for _ in range(5):
        with pytest.raises(CtapError) as refused:
            make_credential(device, user_name="dave")
        assert refused.value.code == CtapError.ERR.OPERATION_DENIED
    assert time.monotonic() - started < 5, "refusals come at once, without waiting for anyone"
    no_call(server, "Notify", 0.5)
    decisions = control.get(f"/v1/keys/{name}/policy/decisions")  # newest first
    assert [d["path"] for d in decisions] == ["rateLimit"] * 5 + ["prompt"] * 3, decisions
    assert "(prompts-per-minute = 3)" in decisions[0]["reason"], decisions[0]


def test_what_waited_before_the_agent_is_shown_and_what_ends_elsewhere_is_closed(daemon, session_bus, usb,
                                                                                 make_key, control):
    """A prompt pending when the agent starts is shown (it reads the pending list once
    connected); one answered through the control API, and one that times out, close."""
    address, server = session_bus
    drain(server)
    key = make_key(presence="prompt")
    name = key["name"]
    device = usb.ctap(key["usbip"]["busid"])
    thread, result = start_in_thread(lambda: make_credential(device, user_name="gina"))
    [entry] = wait_for(lambda: control.pending(name), 5, "a pending request")
    process = Agent(daemon.control.path, address)
    try:
        notify = server.next_call("Notify", timeout=10)
        assert entry["id"] in notify["body"], notify
        control.post(f"/v1/presence/pending/{entry['id']}/approve")
        thread.join(10)
        assert "error" not in result, result
        assert server.next_call("CloseNotification", timeout=10)["id"] == notify["id"]
        process.wait_for_line("prompt closed: answered elsewhere")

        control.put(f"/v1/keys/{name}/presence", {"timeoutSeconds": 1})
        thread, result = start_in_thread(lambda: make_credential(device, user_name="gina"))
        notify = server.next_call("Notify", timeout=10)
        thread.join(10)
        assert ctap_error(result) == CtapError.ERR.USER_ACTION_TIMEOUT
        assert server.next_call("CloseNotification", timeout=10)["id"] == notify["id"]
    finally:
        assert process.stop() == 0, "".join(process.log)


def test_a_server_that_starts_later_shows_what_waits(daemon, usb, make_key, control):
    """The agent starts before any notification server (a session may start dunst after
    it): the prompt waits, and is shown once a server takes the name; when that server
    goes and another comes, the prompt is shown again with the time it has left, and
    the new server's Allow answers it."""
    python = skip_without_a_bus()
    bus, address = start_session_bus()
    process = Agent(daemon.control.path, address)
    servers = []
    try:
        process.wait_for_line("following presence requests")
        key = make_key(presence="prompt")
        control.put(f"/v1/keys/{key['name']}/presence", {"timeoutSeconds": 20})
        device = usb.ctap(key["usbip"]["busid"])
        thread, result = start_in_thread(lambda: make_credential(device, user_name="ivan"))
        process.wait_for_line("no notification server on the session bus")
        servers.append(FakeServer(python, address))
        first = servers[-1].next_call("Notify", timeout=10)
        terminate(servers[-1].proc)
        servers.append(FakeServer(python, address))
        again = servers[-1].next_call("Notify", timeout=10)
        assert again["summary"] == first["summary"] and again["body"] == first["body"]
        assert 0 < again["timeout"] <= first["timeout"] <= 20_000, (first["timeout"], again["timeout"])
        allow(servers[-1], again, thread, result)
    finally:
        code = process.stop()
        for server in servers:
            terminate(server.proc)
        terminate(bus)
    assert code == 0, "".join(process.log)


def test_the_agent_follows_a_restarted_daemon(session_bus, tmp_path_factory):
    """The daemon stops and starts again: the agent connects again and shows the new
    daemon's prompts. Its socket path stays (a link to each run's socket)."""
    address, server = session_bus
    binary = daemon_binary()
    daemon = Daemon(binary, tmp_path_factory.mktemp("latchkeyd-agent"))
    daemon.start()
    link = daemon.workdir / "control.sock"
    link.symlink_to(daemon.control.path)
    process = Agent(str(link), address)
    opened = None
    try:
        process.wait_for_line("following presence requests")
        daemon.stop()
        process.wait_for_line("latchkeyd closed the event stream")
        daemon.start()
        link.unlink()
        link.symlink_to(daemon.control.path)
        process.wait_for_line("following presence requests", timeout=15)
        drain(server)
        doc = daemon.control.post("/v1/keys", {"name": "agent-restart", "uhid": False, "usbip": True,
                                               "presence": "prompt"}, expect=201)
        opened = Opened(daemon.port, strict=True)
        device = opened.ctap(doc["usbip"]["busid"])
        thread, result = start_in_thread(lambda: make_credential(device, user_name="erin"))
        notify = server.next_call("Notify", timeout=10)
        allow(server, notify, thread, result)
    finally:
        if opened is not None:
            assert not opened.close_and_check()
        assert process.stop() == 0, "".join(process.log)
        daemon.stop()
    assert not daemon.problems, daemon.problems


def test_only_the_owner_answers_its_prompts(usb, make_key, control):
    """Another member of the socket's group, and root, are refused the owner's prompt
    (tier `answer`, Keys/Access.swift); the owner's answer counts."""
    key = make_key(presence="prompt")
    name = key["name"]
    device = usb.ctap(key["usbip"]["busid"])
    thread, result = start_in_thread(lambda: make_credential(device, user_name="frank"))
    [entry] = wait_for(lambda: control.pending(name), 5, "a pending request")
    other = control.as_account("other") if OWNER is not None else None
    try:
        if other is None:
            pytest.skip("the suite cannot act as another account (not root)")
        assert all(p["id"] != entry["id"] for p in other.get("/v1/presence/pending")), "another owner's prompt"
        for stranger in (other, control.as_account("root")):
            refusal = stranger.post(f"/v1/presence/pending/{entry['id']}/approve", expect=403)
            assert refusal["error"]["code"] == "forbidden" and "owner-only" in refusal["error"]["message"]
        assert [p["id"] for p in control.pending(name)] == [entry["id"]], "a refused answer leaves the prompt"
    finally:
        control.post(f"/v1/presence/pending/{entry['id']}/approve", expect=(200, 404))
        thread.join(10)
    assert "error" not in result, result
