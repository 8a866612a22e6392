"""latchkey-webdriver --devtools, the DevTools gateway, between a CDP client and a fake
browser debugging port (fake_devtools.py, run as the browser's account), with the real
latchkeyd behind it: discovery answers name the gateway, page and browser WebSockets and
flat sessions pass every message unchanged both ways, every WebAuthn command is answered
from latchkeyd (and none reaches the browser), with CDP's errors; the four credential
events reach the session that owns the key, from the key's real operations over USB/IP;
keys go when their session detaches, the domain is disabled, the WebSocket closes or the
gateway stops; and isolation refuses a browser of another account and a second browser of
the same account.

    LATCHKEYD=.build/debug/latchkeyd LATCHKEY_WEBDRIVER=.build/debug/latchkey-webdriver \\
        python3 -m pytest -q Tests/e2e/test_devtools.py
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from fido2.ctap2 import Ctap2

import identities
import rp
from conftest import HOST, OWNER, Opened, wait_for
from test_automation import get_assertion, make_credential, verify_es256
from test_webdriver import Intermediary, p256_pkcs8

websocket = pytest.importorskip("websocket", reason="pip install websocket-client")

FAKE = Path(__file__).resolve().parent / "fake_devtools.py"
OPTIONS = {"protocol": "ctap2", "transport": "usb", "hasResidentKey": True, "hasUserVerification": True,
           "isUserVerified": True}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


class FakeBrowser:
    """fake_devtools.py as `account` (the browser's; None: the suite's own)."""

    def __init__(self, account: identities.Account | None):
        argv = [sys.executable, "-I", str(FAKE)]
        if account is not None:
            argv = [*account.setpriv(), identities.SYSTEM_PYTHON, "-I",
                    str(identities.runnable(FAKE, account, "-r"))]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     start_new_session=True)
        line = self.proc.stdout.readline().split()
        assert line[:1] == ["READY"], f"fake_devtools.py said {line!r}"
        self.port = int(line[1])
        self.url = f"http://{HOST}:{self.port}"

    def get(self, path: str):
        conn = http.client.HTTPConnection(HOST, self.port, timeout=10)
        try:
            conn.request("GET", path)
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()

    def received(self) -> list[dict]:
        return self.get("/fake/log")

    def stop(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


class Gateway(Intermediary):
    """One latchkey-webdriver --devtools, as the keys' owner."""

    def __init__(self, socket_path: str, upstream: str, workdir: Path, isolation: str = "account"):
        super().__init__(socket_path, upstream, workdir, isolation=isolation, mode=("--devtools",))

    def http(self, method: str, path: str, host: str | None = None):
        conn = http.client.HTTPConnection(HOST, self.port, timeout=20)
        try:
            conn.request(method, path, headers={"Host": host} if host else {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def json(self, path: str, method: str = "GET"):
        status, body = self.http(method, path)
        assert status == 200, (path, status, body)
        return json.loads(body)

    def connect(self, path: str = "/devtools/browser/fake-browser") -> "CDP":
        return CDP(f"ws://{HOST}:{self.port}{path}")


class CDPError(AssertionError):
    def __init__(self, method: str, error: dict):
        super().__init__(f"{method}: {error}")
        self.error = error


class CDP:
    """A raw CDP client: JSON text over a WebSocket, as Puppeteer speaks it."""

    def __init__(self, url: str):
        self.ws = websocket.create_connection(url, timeout=20, suppress_origin=True)
        self.next_id = 1
        self.events: list[dict] = []

    def send_text(self, text: str) -> None:
        self.ws.send(text)

    def receive(self) -> dict:
        return json.loads(self.ws.recv())

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """The command's result; CDPError with its error document otherwise."""
        message = {"id": self.next_id, "method": method}
        self.next_id += 1
        if params is not None:
            message["params"] = params
        if session is not None:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        while True:
            answer = self.receive()
            if answer.get("id") == message["id"]:
                assert answer.get("sessionId") == session, f"answer on the wrong session: {answer}"
                if "error" in answer:
                    raise CDPError(method, answer["error"])
                return answer["result"]
            self.events.append(answer)

    def error(self, method: str, params: dict | None = None, session: str | None = None, code: int = -32000) -> str:
        with pytest.raises(CDPError) as raised:
            self.call(method, params, session)
        assert raised.value.error["code"] == code, raised.value.error
        return raised.value.error["message"] + " " + raised.value.error.get("data", "")

    def event(self, method: str, timeout: float = 10) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {method} within {timeout} s; had {self.events}"
            self.ws.settimeout(remaining)
            try:
                self.events.append(self.receive())
            finally:
                self.ws.settimeout(20)

    def quiet(self, seconds: float) -> list[dict]:
        """Whatever arrives within `seconds`."""
        self.ws.settimeout(seconds)
        try:
            while True:
                self.events.append(self.receive())
        except websocket.WebSocketTimeoutException:
            return self.events
        finally:
            self.ws.settimeout(20)

    def close(self) -> None:
        self.ws.close()


@pytest.fixture
def browser():
    fake = FakeBrowser(OWNER)
    yield fake
    received = [json.loads(m["text"]).get("method", "") for m in fake.received()]
    fake.stop()
    assert not [m for m in received if m.startswith("WebAuthn.")], "a WebAuthn command reached the browser"


@pytest.fixture
def start_gateway(daemon, tmp_path):
    started = []

    def start(upstream: str, isolation: str = "account") -> Gateway:
        gateway = Gateway(daemon.control.path, upstream, tmp_path, isolation)
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        code = gateway.stop()
        assert code == 0, f"latchkey-webdriver --devtools exited {code} on SIGTERM: {gateway.log()}"


@pytest.fixture
def gateway(start_gateway, browser) -> Gateway:
    return start_gateway(browser.url)


def key_exists(control, name: str) -> bool:
    status, _ = control.request("GET", f"/v1/keys/{name}", expect=None)
    return status == 200


def automation_keys(control) -> set[str]:
    return {k["name"] for k in control.get("/v1/keys") if k["name"].startswith("cdp-")}


# ---- pass-through ----------------------------------------------------------------------------


def test_discovery_names_the_gateway(gateway, browser):
    version = gateway.json("/json/version")
    direct = browser.get("/json/version")
    assert version["webSocketDebuggerUrl"] == f"ws://{HOST}:{gateway.port}/devtools/browser/fake-browser"
    assert {k: v for k, v in version.items() if k != "webSocketDebuggerUrl"} == \
        {k: v for k, v in direct.items() if k != "webSocketDebuggerUrl"}
    for path in ("/json", "/json/list"):
        [page] = gateway.json(path)
        assert page["webSocketDebuggerUrl"] == f"ws://{HOST}:{gateway.port}/devtools/page/page-1"
        assert page["devtoolsFrontendUrl"] == f"/devtools/inspector.html?ws={HOST}:{gateway.port}/devtools/page/page-1"
        assert page["url"] == "http://localhost/"
    new = gateway.json("/json/new?http://example.com/", method="PUT")
    assert new["webSocketDebuggerUrl"] == f"ws://{HOST}:{gateway.port}/devtools/page/page-2"
    assert gateway.json("/json/protocol") == browser.get("/json/protocol")
    # The Host the client used is the one the answers name (Chromium does the same).
    status, body = gateway.http("GET", "/json/version", host=f"localhost:{gateway.port}")
    assert status == 200 and json.loads(body)["webSocketDebuggerUrl"].startswith(f"ws://localhost:{gateway.port}/")
    status, _ = gateway.http("GET", "/json/version", host=f"evil.example:{gateway.port}")
    assert status == 403


def test_browser_and_page_sessions_pass_unchanged(gateway, browser):
    client = gateway.connect()
    texts = [
        '{"id":1,"method":"Browser.getVersion"}',
        '{ "id" : 2 , "method" : "Target.setAutoAttach", "params": {"autoAttach": true, "flatten": true,'
        ' "waitForDebuggerOnStart": false}}',
        '{"id":3,"method":"Page.navigate","params":{"url":"https://example.com/WebAuthn\\u002e"}}',
    ]
    for text in texts:
        client.send_text(text)
        answer = client.receive()
        assert answer["result"]["echo"] == json.loads(text)
    session = client.call("Target.attachToTarget", {"targetId": "page-1", "flatten": True})["sessionId"]
    flat = '{"id":50,"method":"Runtime.evaluate","params":{"expression":"\\"é\\" + 1"},"sessionId":"%s"}' % session
    client.send_text(flat)
    answer = client.receive()
    assert answer["sessionId"] == session and answer["result"]["echo"]["params"]["expression"] == '"é" + 1'
    assert client.call("Fake.emit", {"n": 1}, session) == {}
    assert client.event("Fake.event") == {"method": "Fake.event", "params": {"n": 1}, "sessionId": session}
    big = client.call("Fake.big", {"size": 4 << 20})
    assert len(big["data"]) == 4 << 20
    page = gateway.connect("/devtools/page/page-1")
    assert page.call("DOM.getDocument", {"depth": 1})["echo"]["method"] == "DOM.getDocument"
    received = [m for m in browser.received() if m["path"] == "/devtools/browser/fake-browser"]
    # Byte for byte, in order: nothing re-encoded on the way.
    assert [m["text"] for m in received[:3]] == texts
    assert flat in [m["text"] for m in received]
    page.close()
    client.close()


# ---- the WebAuthn domain ------------------------------------------------------------------------


def test_every_command_answered_from_latchkeyd(gateway, browser, control):
    client = gateway.connect()
    session = client.call("Target.attachToTarget", {"targetId": "page-1", "flatten": True})["sessionId"]
    assert "not been enabled" in client.error("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS}, session)
    assert client.call("WebAuthn.enable", {"enableUI": False}, session) == {}
    authenticator = client.call("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS}, session)["authenticatorId"]
    assert authenticator.startswith("cdp-")
    key = control.key(authenticator)
    assert key["owner"]["uid"] == (OWNER.uid if OWNER else os.getuid()) and key["exportable"] is True
    assert key["presence"] == "auto" and key["options"]["hasResidentKey"] and key["options"]["isUserVerified"]
    assert not key["options"]["hasLargeBlob"] and not key["options"]["hasPrf"]

    # addCredential, getCredential(s): the private key comes back as it went in.
    private_key, pkcs8 = p256_pkcs8()
    credential_id, user_handle = os.urandom(32), os.urandom(16)
    credential = {"credentialId": b64(credential_id), "isResidentCredential": True, "rpId": rp.RP_ID,
                  "privateKey": b64(pkcs8), "userHandle": b64(user_handle), "signCount": 41, "userName": "alice"}
    assert client.call("WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": credential},
                       session) == {}
    got = client.call("WebAuthn.getCredential", {"authenticatorId": authenticator,
                                                  "credentialId": b64(credential_id)}, session)["credential"]
    assert unb64(got["credentialId"]) == credential_id and unb64(got["userHandle"]) == user_handle
    assert got["rpId"] == rp.RP_ID and got["signCount"] == 41 and got["isResidentCredential"] is True
    assert got["userName"] == "alice" and got["backupEligibility"] is False and got["backupState"] is False
    again = serialization.load_der_private_key(unb64(got["privateKey"]), None)
    assert again.private_numbers() == private_key.private_numbers()
    [listed] = client.call("WebAuthn.getCredentials", {"authenticatorId": authenticator}, session)["credentials"]
    assert listed == got

    # setUserVerified, setAutomaticPresenceSimulation, setResponseOverrideBits: the key's state.
    client.call("WebAuthn.setUserVerified", {"authenticatorId": authenticator, "isUserVerified": False}, session)
    assert control.get(f"/v1/keys/{authenticator}/user-verified") == {"isUserVerified": False}
    client.call("WebAuthn.setAutomaticPresenceSimulation", {"authenticatorId": authenticator, "enabled": False},
                session)
    assert control.get(f"/v1/keys/{authenticator}/presence")["mode"] == "prompt"
    client.call("WebAuthn.setAutomaticPresenceSimulation", {"authenticatorId": authenticator, "enabled": True},
                session)
    assert control.get(f"/v1/keys/{authenticator}/presence")["mode"] == "auto"
    client.call("WebAuthn.setResponseOverrideBits", {"authenticatorId": authenticator, "isBogusSignature": True,
                                                     "isBadUP": True}, session)
    queued = control.get(f"/v1/keys/{authenticator}/overrides")
    assert sorted(o["action"] for o in queued) == ["bogus-signature", "deny"]
    client.call("WebAuthn.setResponseOverrideBits", {"authenticatorId": authenticator}, session)
    assert control.get(f"/v1/keys/{authenticator}/overrides") == []
    client.call("WebAuthn.setCredentialProperties", {"authenticatorId": authenticator,
                                                     "credentialId": b64(credential_id), "backupState": False},
                session)
    assert "never backup eligible" in client.error(
        "WebAuthn.setCredentialProperties",
        {"authenticatorId": authenticator, "credentialId": b64(credential_id), "backupState": True}, session)

    # removeCredential, clearCredentials.
    client.call("WebAuthn.removeCredential", {"authenticatorId": authenticator, "credentialId": b64(credential_id)},
                session)
    assert client.call("WebAuthn.getCredentials", {"authenticatorId": authenticator}, session) == {"credentials": []}
    assert "Could not find a credential" in client.error(
        "WebAuthn.getCredential", {"authenticatorId": authenticator, "credentialId": b64(credential_id)}, session)
    assert "Could not find a credential" in client.error(
        "WebAuthn.removeCredential", {"authenticatorId": authenticator, "credentialId": b64(credential_id)}, session)
    for _ in range(2):
        _, pkcs8 = p256_pkcs8()
        client.call("WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": {
            **credential, "credentialId": b64(os.urandom(16)), "userHandle": b64(os.urandom(16)),
            "privateKey": b64(pkcs8)}}, session)
    assert len(control.get(f"/v1/keys/{authenticator}/credentials")) == 2
    client.call("WebAuthn.clearCredentials", {"authenticatorId": authenticator}, session)
    assert control.get(f"/v1/keys/{authenticator}/credentials") == []

    # removeVirtualAuthenticator; then it is unknown.
    client.call("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": authenticator}, session)
    assert not key_exists(control, authenticator)
    assert "Could not find a virtual authenticator" in client.error(
        "WebAuthn.getCredentials", {"authenticatorId": authenticator}, session)

    # disable: the session's authenticators go; the domain is off again.
    other = client.call("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS}, session)["authenticatorId"]
    assert client.call("WebAuthn.disable", None, session) == {}
    assert not key_exists(control, other)
    client.error("WebAuthn.getCredentials", {"authenticatorId": other}, session)
    client.close()


def test_errors_have_cdp_shape(gateway, browser, control):
    client = gateway.connect()
    client.call("WebAuthn.enable")
    before = automation_keys(control)
    assert "wasn't found" in client.error("WebAuthn.frobnicate", {}, code=-32601)
    client.error("WebAuthn.enable", {"enableUI": "yes"}, code=-32602)
    client.error("WebAuthn.enable", {"colour": "blue"}, code=-32602)
    client.error("WebAuthn.addVirtualAuthenticator", {}, code=-32602)
    client.error("WebAuthn.addVirtualAuthenticator", {"options": {**OPTIONS, "extensions": ["prf"]}}, code=-32602)
    client.error("WebAuthn.addVirtualAuthenticator", {"options": {**OPTIONS, "hasPrf": 1}}, code=-32602)
    client.error("WebAuthn.addVirtualAuthenticator", {"options": {"transport": "usb"}}, code=-32602)
    assert "USB" in client.error("WebAuthn.addVirtualAuthenticator", {"options": {**OPTIONS, "transport": "internal"}})
    client.error("WebAuthn.addVirtualAuthenticator", {"options": {**OPTIONS, "defaultBackupEligibility": True}})
    client.send_text('{"id":99,"method":"WebAuthn.enable","params":[true]}')
    assert client.receive() == {"id": 99, "error": {"code": -32602, "message": "Invalid parameters",
                                                   "data": "params must be an object, not an array"}}
    assert automation_keys(control) == before, "a refused command made a key"

    authenticator = client.call("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS})["authenticatorId"]
    private_key, pkcs8 = p256_pkcs8()
    good = {"credentialId": b64(os.urandom(16)), "isResidentCredential": True, "rpId": rp.RP_ID,
            "privateKey": b64(pkcs8), "userHandle": b64(os.urandom(8)), "signCount": 0}
    assert "isResidentCredential true" in client.error(
        "WebAuthn.addCredential", {"authenticatorId": authenticator,
                                   "credential": {**good, "isResidentCredential": False}})
    client.error("WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": {**good, "privateKey": "!"}},
                 code=-32602)
    client.error("WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": {**good, "colour": 1}},
                 code=-32602)
    client.error("WebAuthn.addCredential", {"authenticatorId": authenticator,
                                            "credential": {**good, "privateKey": b64(b"not a key")}})
    client.error("WebAuthn.setUserVerified", {"authenticatorId": authenticator}, code=-32602)
    client.error("WebAuthn.setResponseOverrideBits", {"authenticatorId": authenticator, "isBadSignal": True},
                 code=-32602)
    # Not this session's: a configuration key, another connection's authenticator.
    client.error("WebAuthn.getCredentials", {"authenticatorId": "default"})
    other = gateway.connect()
    other.call("WebAuthn.enable")
    other.error("WebAuthn.getCredentials", {"authenticatorId": authenticator})
    other.error("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": authenticator})
    assert key_exists(control, authenticator)
    other.close()
    client.close()


def test_events_reach_the_session_that_owns_the_key(gateway, browser, control, daemon):
    client = gateway.connect()
    session = client.call("Target.attachToTarget", {"targetId": "page-1", "flatten": True})["sessionId"]
    client.call("WebAuthn.enable", None, session)
    authenticator = client.call("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS}, session)["authenticatorId"]
    bystander = gateway.connect()
    bystander.call("WebAuthn.enable")
    busid = control.key(authenticator)["usbip"]["busid"]
    opened = Opened(daemon.port, strict=True)
    try:
        ctap = Ctap2(opened.ctap(busid))
        made = make_credential(ctap, rk=True, user_name="bob")
        credential_id = bytes(made.auth_data.credential_data.credential_id)
        added = client.event("WebAuthn.credentialAdded")
        assert added["sessionId"] == session and added["params"]["authenticatorId"] == authenticator
        credential = added["params"]["credential"]
        assert unb64(credential["credentialId"]) == credential_id and credential["rpId"] == rp.RP_ID
        assert credential["isResidentCredential"] is True and credential["userName"] == "bob"
        # The private key the key made, as getCredentials answers it: it signs as the credential.
        private_key = serialization.load_der_private_key(unb64(credential["privateKey"]), None)
        cdh = os.urandom(32)
        assertion = get_assertion(ctap, credential_id, client_data_hash=cdh)
        verify_es256(private_key.public_key(), assertion, cdh)
        asserted = client.event("WebAuthn.credentialAsserted")
        assert asserted["sessionId"] == session
        assert asserted["params"]["credential"]["signCount"] == assertion.auth_data.counter
        user_id = made.auth_data.credential_data  # noqa: F841 - kept for clarity of the flow
    finally:
        problems = opened.close_and_check()
    assert not problems, problems
    user_handle = unb64(credential["userHandle"])
    handle64 = base64.urlsafe_b64encode(user_handle).decode().rstrip("=")
    id64 = base64.urlsafe_b64encode(credential_id).decode().rstrip("=")
    control.post(f"/v1/keys/{authenticator}/signals/current-user-details",
                 {"rpId": rp.RP_ID, "userId": handle64, "name": "robert", "displayName": "Robert"})
    updated = client.event("WebAuthn.credentialUpdated")
    assert updated["params"]["credential"]["userName"] == "robert"
    control.post(f"/v1/keys/{authenticator}/signals/unknown-credential", {"rpId": rp.RP_ID, "credentialId": id64})
    deleted = client.event("WebAuthn.credentialDeleted")
    assert deleted["params"] == {"authenticatorId": authenticator, "credentialId": b64(credential_id)}
    # A deletion through the domain itself is not announced (Chromium does not either),
    # and nothing of this key reached the other connection.
    _, pkcs8 = p256_pkcs8()
    seeded = b64(os.urandom(16))
    client.call("WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": {
        "credentialId": seeded, "isResidentCredential": True, "rpId": rp.RP_ID, "privateKey": b64(pkcs8),
        "userHandle": b64(os.urandom(8)), "signCount": 0}}, session)
    client.call("WebAuthn.removeCredential", {"authenticatorId": authenticator, "credentialId": seeded}, session)
    assert not [e for e in client.quiet(1.5) if e.get("method", "").startswith("WebAuthn.")]
    assert not [e for e in bystander.quiet(0.5) if e.get("method", "").startswith("WebAuthn.")]
    bystander.close()
    client.close()


# ---- keys go with their session ---------------------------------------------------------------


def test_keys_go_when_the_session_or_connection_ends(gateway, browser, control):
    client = gateway.connect()
    session = client.call("Target.attachToTarget", {"targetId": "page-1", "flatten": True})["sessionId"]
    client.call("WebAuthn.enable", None, session)
    client.call("WebAuthn.enable")
    on_session = client.call("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS}, session)["authenticatorId"]
    on_connection = client.call("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS})["authenticatorId"]
    client.call("Target.detachFromTarget", {"sessionId": session})
    assert client.event("Target.detachedFromTarget")["params"]["sessionId"] == session
    wait_for(lambda: not key_exists(control, on_session), 10, "the detached session's key to go")
    assert key_exists(control, on_connection)
    client.close()
    wait_for(lambda: not key_exists(control, on_connection), 10, "the closed connection's key to go")


def test_keys_go_when_the_gateway_stops(start_gateway, browser, control):
    gateway = start_gateway(browser.url)
    client = gateway.connect()
    client.call("WebAuthn.enable")
    keys = [client.call("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS})["authenticatorId"] for _ in range(2)]
    assert gateway.stop() == 0
    assert not any(key_exists(control, k) for k in keys)


# ---- isolation ---------------------------------------------------------------------------------


@pytest.mark.skipif(OWNER is None, reason="needs the test accounts (run as root)")
def test_isolation_refuses_a_browser_of_another_account(start_gateway, control):
    theirs = FakeBrowser(None)  # root's: not the gateway's account
    try:
        gateway = start_gateway(theirs.url)
        client = gateway.connect()
        client.call("WebAuthn.enable")
        message = client.error("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS})
        assert "runs as uid 0" in message and OWNER.name in message, message
        assert not automation_keys(control)
        client.close()
        # Without isolation, the same browser gets a key.
        open_gateway = start_gateway(theirs.url, isolation="off")
        client = open_gateway.connect()
        client.call("WebAuthn.enable")
        assert client.call("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS})["authenticatorId"]
        client.close()
    finally:
        theirs.stop()


def test_isolation_one_browser_per_account(start_gateway, browser, control):
    second_browser = FakeBrowser(OWNER)
    try:
        first = start_gateway(browser.url)
        second = start_gateway(second_browser.url)
        a = first.connect()
        a.call("WebAuthn.enable")
        mine = a.call("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS})["authenticatorId"]
        # The same browser may have several.
        also_mine = a.call("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS})["authenticatorId"]
        b = second.connect()
        b.call("WebAuthn.enable")
        message = b.error("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS})
        assert mine in message and "another browser" in message, message
        assert automation_keys(control) == {mine, also_mine}
        a.close()
        wait_for(lambda: not automation_keys(control), 10, "the first browser's keys to go")
        assert b.call("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS})["authenticatorId"]
        b.close()
    finally:
        second_browser.stop()


@pytest.mark.skipif(OWNER is None, reason="needs the test accounts (run as root)")
def test_other_accounts_are_refused(gateway):
    other = identities.account("other")
    sock = other.connect_tcp(HOST, gateway.port)
    try:
        sock.sendall(f"GET /json/version HTTP/1.1\r\nHost: {HOST}:{gateway.port}\r\n\r\n".encode())
        head = sock.recv(4096)
    finally:
        sock.close()
    assert head.startswith(b"HTTP/1.1 403"), head[:200]
    sock = other.connect_tcp(HOST, gateway.port)
    try:
        sock.sendall((f"GET /devtools/browser/fake-browser HTTP/1.1\r\nHost: {HOST}:{gateway.port}\r\n"
                      "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n").encode())
        head = sock.recv(4096)
    finally:
        sock.close()
    # A refused WebSocket upgrade: no handshake (hummingbird-websocket answers 400 and closes).
    assert head.startswith(b"HTTP/1.1 400"), head[:200]
