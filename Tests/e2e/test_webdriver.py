"""latchkey-webdriver, the WebDriver intermediary, between a WebDriver client and a fake
browser driver (fake_webdriver.py), with the real latchkeyd behind it: ordinary
commands pass through unchanged; WebAuthn §11's virtual authenticator commands are
answered by the intermediary with latchkeyd keys (and never reach the driver), with
§11's errors; a session's keys go when it is deleted, when it falls silent for the idle
timeout, and when the intermediary stops. Selenium's own bindings, when installed,
drive it too.

    LATCHKEYD=.build/debug/latchkeyd LATCHKEY_WEBDRIVER=.build/debug/latchkey-webdriver \\
        python3 -m pytest -q Tests/e2e/test_webdriver.py
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from fido2.ctap2 import Ctap2

import rp
from conftest import HOST, OWNER, Opened, as_daemon_account, built_binary, free_port, wait_for
from fake_webdriver import FakeWebDriver
from test_automation import get_assertion, verify_es256

SELENIUM_DEFAULTS = {"protocol": "ctap2", "transport": "usb", "hasResidentKey": False,
                     "hasUserVerification": False, "isUserConsenting": True, "isUserVerified": False}


def b64url(data: bytes, pad: bool = False) -> str:
    text = base64.urlsafe_b64encode(data).decode()
    return text if pad else text.rstrip("=")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def webdriver_binary() -> Path:
    return built_binary("LATCHKEY_WEBDRIVER", ".build/debug/latchkey-webdriver")


class Intermediary:
    """One latchkey-webdriver process and a WebDriver client of it (plain HTTP)."""

    def __init__(self, socket_path: str, upstream: str, workdir: Path, idle_timeout: float = 300,
                 isolation: str = "off", mode: tuple[str, ...] = ()):
        binary = webdriver_binary()
        if not binary.exists():
            if os.environ.get("LATCHKEY_WEBDRIVER"):
                pytest.fail(f"LATCHKEY_WEBDRIVER={binary} does not exist: build it with swift build")
            pytest.skip(f"no latchkey-webdriver at {binary} (set LATCHKEY_WEBDRIVER)")
        self.port = free_port()
        self.log_path = workdir / f"latchkey-webdriver-{self.port}.log"
        # As the keys' owner, the account the suite's control client speaks as: the keys
        # it makes are its caller's (docs/access.md).
        argv = as_daemon_account([binary, *mode, "--port", self.port, "--upstream", upstream, "--socket", socket_path,
                                  "--idle-timeout", idle_timeout, "--isolation", isolation,
                                  "--log-level", "debug"])
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        wait_for(self._listening, 20, f"latchkey-webdriver on port {self.port} ({self.log_path})")

    def _listening(self) -> bool:
        assert self.proc.poll() is None, f"latchkey-webdriver exited {self.proc.returncode}: {self.log()}"
        conn = http.client.HTTPConnection(HOST, self.port, timeout=2)
        try:
            conn.connect()
            return True
        finally:
            conn.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def raw(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
        """(status, headers, body bytes) of one request."""
        conn = http.client.HTTPConnection(HOST, self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def command(self, method: str, path: str, params=None, expect: int = 200):
        """A WebDriver command: JSON in, `value` out; `expect` is the HTTP status."""
        body = None if params is None else json.dumps(params).encode()
        headers = {"Content-Type": "application/json; charset=utf-8"} if body is not None else {}
        status, response_headers, data = self.raw(method, path, body, headers)
        document = json.loads(data)
        assert status == expect, f"{method} {path} -> {status}: {document}"
        assert set(document) == {"value"}, document
        if status >= 400:
            assert set(document["value"]) == {"error", "message", "stacktrace"}, document
            assert response_headers["content-type"].startswith("application/json"), response_headers
        return document["value"]

    def error(self, method: str, path: str, params=None, expect: int = 400, code: str = "invalid argument") -> str:
        value = self.command(method, path, params, expect=expect)
        assert value["error"] == code, value
        return value["message"]

    def new_session(self) -> str:
        return self.command("POST", "/session", {"capabilities": {"alwaysMatch": {"browserName": "chrome"}}})["sessionId"]

    def add_authenticator(self, session: str, **options) -> str:
        return self.command("POST", f"/session/{session}/webauthn/authenticator", {**SELENIUM_DEFAULTS, **options})

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
                pytest.fail(f"latchkey-webdriver ignored SIGTERM: {self.log()}")
        return self.proc.returncode


@pytest.fixture
def upstream():
    with FakeWebDriver() as fake:
        yield fake
    assert not fake.webauthn_requests(), "a WebAuthn command reached the browser's driver"


@pytest.fixture
def start_intermediary(daemon, upstream, tmp_path):
    """Starts latchkey-webdriver processes against the daemon and the fake driver; stops
    them after the test (each must exit 0 on SIGTERM)."""
    started = []

    def start(idle_timeout: float = 300, isolation: str = "off") -> Intermediary:
        # The fake driver is the suite's (root's) and the intermediary lk-owner's: isolation
        # by account would refuse every key, so these tests turn it off;
        # test_isolation_by_account checks it.
        intermediary = Intermediary(daemon.control.path, upstream.url, tmp_path, idle_timeout, isolation)
        started.append(intermediary)
        return intermediary

    yield start
    for intermediary in started:
        code = intermediary.stop()
        assert code == 0, f"latchkey-webdriver exited {code} on SIGTERM: {intermediary.log()}"


@pytest.fixture
def wd(start_intermediary) -> Intermediary:
    return start_intermediary()


def key_exists(control, name: str) -> bool:
    status, _ = control.request("GET", f"/v1/keys/{name}", expect=None)
    return status == 200


def p256_pkcs8() -> tuple[ec.EllipticCurvePrivateKey, bytes]:
    private_key = ec.generate_private_key(ec.SECP256R1())
    return private_key, private_key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption())


def resident_credential(user_handle: bytes | None = None, sign_count=41, pad=True):
    """Credential Parameters as Selenium's Credential.to_dict() sends them (padded base64url)."""
    private_key, pkcs8 = p256_pkcs8()
    credential_id = os.urandom(32)
    params = {"credentialId": b64url(credential_id, pad), "isResidentCredential": True, "rpId": rp.RP_ID,
              "privateKey": b64url(pkcs8, pad), "signCount": sign_count,
              "userHandle": b64url(user_handle or os.urandom(16), pad)}
    return credential_id, private_key, params


# ---- forwarding ---------------------------------------------------------------------------


def test_status_answers_as_a_webdriver_node(wd, upstream):
    """GET /status as WebDriver's Status: ready when the driver and latchkeyd are, with the
    WebAuthn capabilities, the driver's own status kept; under a Grid prefix too."""
    for path in ("/status", "/wd/hub/status"):
        status, headers, body = wd.raw("GET", path)
        assert status == 200 and headers["content-type"].startswith("application/json")
        value = json.loads(body)["value"]
        assert value["ready"] is True and "ready" in value["message"]
        assert value["capabilities"]["webauthn:virtualAuthenticators"] is True
        assert value["upstream"] == {"ready": True, "message": "fake driver"}


def test_ordinary_commands_pass_through_unchanged(wd, upstream):

    session = wd.new_session()
    assert session in upstream.sessions
    params = json.dumps({"url": "https://example.com/a?b=c"}).encode()
    status, headers, body = wd.raw("POST", f"/session/{session}/url?x=1&y=%20z", params,
                                   {"Content-Type": "application/json", "X-Test-Header": "kept"})
    assert status == 200, body
    echo = json.loads(body)["value"]
    assert echo == {"method": "POST", "path": f"/session/{session}/url?x=1&y=%20z", "body": params.decode()}
    seen = upstream.requests[-1]
    assert seen.body == params and seen.headers["x-test-header"] == "kept"
    assert seen.headers["content-type"] == "application/json"

    # An error, a non-JSON answer, other methods: status, headers and body as the driver gave them.
    status, headers, body = wd.raw("GET", f"/session/{session}/element/missing")
    assert status == 404
    assert json.loads(body) == {"value": {"error": "no such element", "message": "nothing here", "stacktrace": "fake"}}
    status, headers, body = wd.raw("POST", f"/session/{session}/teapot", b"{}")
    assert (status, headers["content-type"], body) == (418, "text/plain", b"short and stout")
    for method in ("GET", "DELETE", "PUT", "PATCH"):
        status, _, body = wd.raw(method, f"/session/{session}/window/rect", b"{}" if method != "GET" else None)
        assert status == 200 and json.loads(body)["value"]["method"] == method

    status, _, body = wd.raw("DELETE", f"/session/{session}")
    assert status == 200 and json.loads(body) == {"value": None}
    assert session not in upstream.sessions


# ---- Add and Remove Virtual Authenticator ------------------------------------------------


def test_add_virtual_authenticator_makes_a_latchkey_key(wd, control):
    session = wd.new_session()
    plain = wd.add_authenticator(session)
    assert isinstance(plain, str) and plain.startswith("wd-")
    key = control.key(plain)
    assert key["presence"] == "auto"
    assert key["options"]["protocol"] == "ctap2.1"
    for option in ("hasResidentKey", "hasUserVerification", "hasLargeBlob", "hasCredBlob", "hasMinPinLength",
                   "hasPrf", "hasThirdPartyPayment"):
        assert key["options"][option] is False, (option, key["options"])

    full = wd.add_authenticator(session, protocol="ctap2_1", hasResidentKey=True, hasUserVerification=True,
                                isUserVerified=True, extensions=["largeBlob", "credBlob", "minPinLength", "prf"])
    options = control.key(full)["options"]
    assert options["hasResidentKey"] and options["hasUserVerification"] and options["isUserVerified"]
    assert options["hasLargeBlob"] and options["hasCredBlob"] and options["hasMinPinLength"] and options["hasPrf"]

    chromedriver_style = wd.add_authenticator(session, hasLargeBlob=True, hasPrf=True)
    options = control.key(chromedriver_style)["options"]
    assert options["hasLargeBlob"] and options["hasPrf"] and not options["hasCredBlob"]

    u2f = wd.add_authenticator(session, protocol="ctap1/u2f")
    assert control.key(u2f)["options"]["protocol"] == "u2f-only"

    refusing = wd.add_authenticator(session, isUserConsenting=False)
    assert control.key(refusing)["presence"] == "deny"

    assert len({plain, full, chromedriver_style, u2f, refusing}) == 5
    wd.command("DELETE", f"/session/{session}")


def test_add_virtual_authenticator_errors(wd, control):
    session = wd.new_session()
    path = f"/session/{session}/webauthn/authenticator"
    before = {k["name"] for k in control.get("/v1/keys")}
    assert "USB" in wd.error("POST", path, {**SELENIUM_DEFAULTS, "transport": "internal"})
    wd.error("POST", path, {**SELENIUM_DEFAULTS, "transport": "nfc"})
    wd.error("POST", path, {**SELENIUM_DEFAULTS, "transport": "pigeon"})
    wd.error("POST", path, {k: v for k, v in SELENIUM_DEFAULTS.items() if k != "protocol"})
    wd.error("POST", path, {k: v for k, v in SELENIUM_DEFAULTS.items() if k != "transport"})
    wd.error("POST", path, {**SELENIUM_DEFAULTS, "protocol": "ctap3"})
    wd.error("POST", path, {**SELENIUM_DEFAULTS, "hasResidentKey": "yes"})
    wd.error("POST", path, {**SELENIUM_DEFAULTS, "isUserVerified": 1})
    wd.error("POST", path, {**SELENIUM_DEFAULTS, "colour": "blue"})
    wd.error("POST", path, {**SELENIUM_DEFAULTS, "extensions": "prf"})
    wd.error("POST", path, [SELENIUM_DEFAULTS])
    status, _, body = wd.raw("POST", path, b"{not json")
    assert status == 400 and json.loads(body)["value"]["error"] == "invalid argument"
    wd.error("POST", path, {**SELENIUM_DEFAULTS, "extensions": ["uvm"]}, expect=500, code="unsupported operation")
    wd.error("POST", path, {**SELENIUM_DEFAULTS, "defaultBackupEligibility": True}, expect=500,
             code="unsupported operation")
    wd.error("POST", "/session/no-such-session/webauthn/authenticator", SELENIUM_DEFAULTS, expect=404,
             code="invalid session id")
    assert {k["name"] for k in control.get("/v1/keys")} == before, "a refused command made a key"
    wd.command("DELETE", f"/session/{session}")


def test_remove_virtual_authenticator(wd, control):
    session, other = wd.new_session(), wd.new_session()
    authenticator = wd.add_authenticator(session)
    assert wd.command("DELETE", f"/session/{session}/webauthn/authenticator/{authenticator}") is None
    assert not key_exists(control, authenticator)
    message = wd.error("DELETE", f"/session/{session}/webauthn/authenticator/{authenticator}")
    assert "no such virtual authenticator" in message

    # Only the keys a session added: not another session's, not the daemon's own.
    theirs = wd.add_authenticator(other)
    wd.error("DELETE", f"/session/{session}/webauthn/authenticator/{theirs}")
    assert key_exists(control, theirs)
    wd.error("DELETE", f"/session/{session}/webauthn/authenticator/default")
    wd.error("GET", f"/session/{session}/webauthn/authenticator/{theirs}/credentials")
    for s in (session, other):
        wd.command("DELETE", f"/session/{s}")


# ---- credentials --------------------------------------------------------------------------


def test_credentials_round_trip_and_the_key_signs_with_them(wd, control, daemon):
    session = wd.new_session()
    authenticator = wd.add_authenticator(session, hasResidentKey=True)
    base = f"/session/{session}/webauthn/authenticator/{authenticator}"
    assert wd.command("GET", f"{base}/credentials") == []

    user_handle = os.urandom(16)
    credential_id, private_key, params = resident_credential(user_handle, sign_count=41)
    assert wd.command("POST", f"{base}/credential", {**params, "authenticatorId": authenticator}) is None
    [listed] = wd.command("GET", f"{base}/credentials")
    assert unb64url(listed["credentialId"]) == credential_id
    assert listed["isResidentCredential"] is True and listed["rpId"] == rp.RP_ID
    assert unb64url(listed["userHandle"]) == user_handle and listed["signCount"] == 41
    again = serialization.load_der_private_key(unb64url(listed["privateKey"]), None)
    assert again.private_numbers() == private_key.private_numbers()

    # The browser's side: the key the intermediary made signs with the seeded credential.
    opened = Opened(daemon.port, strict=True)
    try:
        busid = control.key(authenticator)["usbip"]["busid"]
        ctap = Ctap2(opened.ctap(busid))
        cdh = os.urandom(32)
        assertion = get_assertion(ctap, credential_id, client_data_hash=cdh)
        verify_es256(private_key.public_key(), assertion, cdh)
        assert assertion.auth_data.counter > 41
    finally:
        problems = opened.close_and_check()
    assert not problems, problems
    [listed] = wd.command("GET", f"{base}/credentials")
    assert listed["signCount"] == assertion.auth_data.counter

    # Remove Credential takes the ID padded (Selenium's bytearray form) or not.
    assert wd.command("DELETE", f"{base}/credentials/{b64url(credential_id, pad=True).replace('=', '%3D')}") is None
    assert wd.command("GET", f"{base}/credentials") == []
    message = wd.error("DELETE", f"{base}/credentials/{b64url(credential_id)}")
    assert "no such credential" in message
    wd.error("DELETE", f"{base}/credentials/{b64url(os.urandom(16))}")
    wd.error("DELETE", f"{base}/credentials/not*base64")

    for _ in range(2):
        wd.command("POST", f"{base}/credential", resident_credential(pad=False)[2])
    assert len(wd.command("GET", f"{base}/credentials")) == 2
    assert wd.command("DELETE", f"{base}/credentials") is None
    assert wd.command("GET", f"{base}/credentials") == []
    wd.command("DELETE", f"/session/{session}")


def test_large_blob_goes_in_and_comes_back(wd):
    session = wd.new_session()
    authenticator = wd.add_authenticator(session, hasResidentKey=True, extensions=["largeBlob"])
    base = f"/session/{session}/webauthn/authenticator/{authenticator}"
    _, _, params = resident_credential()
    wd.command("POST", f"{base}/credential", {**params, "largeBlob": b64url(b"a large blob")})
    [listed] = wd.command("GET", f"{base}/credentials")
    assert unb64url(listed["largeBlob"]) == b"a large blob"
    wd.command("DELETE", f"/session/{session}")


def test_add_credential_errors(wd):
    session = wd.new_session()
    authenticator = wd.add_authenticator(session, hasResidentKey=True)
    no_rk = wd.add_authenticator(session, hasResidentKey=False)
    path = f"/session/{session}/webauthn/authenticator/{authenticator}/credential"
    _, _, good = resident_credential()

    def without(key):
        return {k: v for k, v in good.items() if k != key}

    for params in (without("credentialId"), without("isResidentCredential"), without("rpId"),
                   without("privateKey"), without("signCount"), without("userHandle"),
                   {**good, "credentialId": 7}, {**good, "credentialId": "a+b/"}, {**good, "isResidentCredential": "true"},
                   {**good, "rpId": "https://example.com"}, {**good, "privateKey": b64url(b"not a key")},
                   {**good, "signCount": -1}, {**good, "signCount": 2**32}, {**good, "signCount": 1.5},
                   {**good, "userHandle": True}, "a string"):
        wd.error("POST", path, params)
    # A resident credential on a key without resident keys; the same ID twice.
    wd.error("POST", f"/session/{session}/webauthn/authenticator/{no_rk}/credential", good)
    wd.command("POST", path, good)
    wd.error("POST", path, good)
    message = wd.error("POST", path, {**without("userHandle"), "isResidentCredential": False,
                                      "credentialId": b64url(os.urandom(16))},
                       expect=500, code="unsupported operation")
    assert "isResidentCredential true" in message
    wd.error("POST", path, {**good, "backupEligibility": True}, expect=500, code="unsupported operation")
    assert "no such virtual authenticator" in wd.error(
        "POST", f"/session/{session}/webauthn/authenticator/wd-0000000000000000/credential", good)
    wd.command("DELETE", f"/session/{session}")


def test_set_credential_properties(wd):
    """Set Credential Properties: false is what a latchkey credential already is; true
    cannot be (a security key is never backup eligible)."""
    session = wd.new_session()
    authenticator = wd.add_authenticator(session, hasResidentKey=True)
    base = f"/session/{session}/webauthn/authenticator/{authenticator}"
    _, _, params = resident_credential(pad=False)
    wd.command("POST", f"{base}/credential", params)
    props = f"{base}/credentials/{params['credentialId']}/props"
    assert wd.command("POST", props, {"backupEligibility": False, "backupState": False}) is None
    wd.error("POST", props, {"backupState": True}, expect=500, code="unsupported operation")
    wd.error("POST", props, {"backupState": "no"})
    assert "no such credential" in wd.error("POST", f"{base}/credentials/{b64url(os.urandom(8))}/props", {})
    wd.command("DELETE", f"/session/{session}")


def test_set_user_verified(wd, control):
    session = wd.new_session()
    authenticator = wd.add_authenticator(session, hasUserVerification=True, isUserVerified=True)
    path = f"/session/{session}/webauthn/authenticator/{authenticator}/uv"
    assert control.get(f"/v1/keys/{authenticator}/user-verified") == {"isUserVerified": True}
    assert wd.command("POST", path, {"isUserVerified": False}) is None
    assert control.get(f"/v1/keys/{authenticator}/user-verified") == {"isUserVerified": False}
    assert wd.command("POST", path, {"isUserVerified": True, "authenticatorId": authenticator}) is None
    assert control.get(f"/v1/keys/{authenticator}/user-verified") == {"isUserVerified": True}
    wd.error("POST", path, {})
    wd.error("POST", path, {"isUserVerified": "no"})
    wd.error("POST", f"/session/{session}/webauthn/authenticator/nope/uv", {"isUserVerified": True})
    wd.command("DELETE", f"/session/{session}")


def test_unknown_webauthn_commands_stay_here(wd):
    session = wd.new_session()
    wd.error("GET", f"/session/{session}/webauthn/authenticator", expect=405, code="unknown method")
    wd.error("PUT", f"/session/{session}/webauthn/authenticator/x/credentials", {}, expect=405,
             code="unknown method")
    wd.error("POST", f"/session/{session}/webauthn/virtual", {}, expect=404, code="unknown command")
    wd.command("DELETE", f"/session/{session}")


# ---- a session's keys go with it ----------------------------------------------------------


def test_deleting_the_session_removes_its_keys(wd, control, upstream):
    session, other = wd.new_session(), wd.new_session()
    mine = [wd.add_authenticator(session) for _ in range(2)]
    theirs = wd.add_authenticator(other)
    assert all(key_exists(control, name) for name in mine + [theirs])
    assert wd.command("DELETE", f"/session/{session}") is None
    assert any(r.method == "DELETE" and r.path == f"/session/{session}" for r in upstream.requests)
    assert not any(key_exists(control, name) for name in mine)
    assert key_exists(control, theirs)
    wd.error("POST", f"/session/{session}/webauthn/authenticator", SELENIUM_DEFAULTS, expect=404,
             code="invalid session id")
    wd.command("DELETE", f"/session/{other}")
    assert not key_exists(control, theirs)


def test_idle_timeout_removes_the_keys_of_a_client_that_died(start_intermediary, control):
    wd = start_intermediary(idle_timeout=3)
    dead, alive = wd.new_session(), wd.new_session()
    dead_key = wd.add_authenticator(dead)
    alive_key = wd.add_authenticator(alive)
    # The live client keeps talking (ordinary commands count); the dead one says nothing.
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        wd.raw("GET", f"/session/{alive}/title")
        time.sleep(0.3)
    assert not key_exists(control, dead_key), wd.log()
    assert key_exists(control, alive_key)
    assert "idle timeout" in wd.log()
    wait_for(lambda: not key_exists(control, alive_key), 10, "the live session's key to go once it is silent")


def test_stopping_the_intermediary_removes_every_key(start_intermediary, control):
    wd = start_intermediary()
    session = wd.new_session()
    keys = [wd.add_authenticator(session) for _ in range(2)]
    assert wd.stop() == 0
    assert not any(key_exists(control, name) for name in keys), wd.log()


def test_help_says_how():
    binary = webdriver_binary()
    if not binary.exists():
        pytest.skip(f"no latchkey-webdriver at {binary}")
    out = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    for text in ("--port", "--upstream", "--socket", "--idle-timeout", "127.0.0.1", "add_virtual_authenticator"):
        assert text in out.stdout, text
    bad = subprocess.run([str(binary), "--upstream", "ftp://x"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 64 and "--upstream" in bad.stderr


# ---- Selenium's own bindings ---------------------------------------------------------------


def test_selenium_bindings_drive_the_intermediary(wd, control, upstream):
    """Selenium's VirtualAuthenticatorOptions and Credential, through webdriver.Remote,
    against the fake driver: their request shapes parse and their answers load."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.common.exceptions import InvalidArgumentException, WebDriverException
    from selenium.webdriver.common.virtual_authenticator import Credential, VirtualAuthenticatorOptions

    driver = webdriver.Remote(command_executor=f"http://{HOST}:{wd.port}", options=webdriver.ChromeOptions())
    try:
        options = VirtualAuthenticatorOptions()
        options.has_resident_key = True
        options.has_user_verification = True
        options.is_user_verified = True
        driver.add_virtual_authenticator(options)
        name = driver.virtual_authenticator_id
        assert control.key(name)["options"]["hasResidentKey"] is True

        private_key, pkcs8 = p256_pkcs8()
        credential_id = bytearray(os.urandom(32))
        user_handle = os.urandom(16)
        driver.add_credential(Credential.create_resident_credential(credential_id, rp.RP_ID, user_handle, pkcs8, 7))
        [credential] = driver.get_credentials()
        assert credential.id == base64.urlsafe_b64encode(credential_id).decode()
        assert credential.is_resident_credential and credential.rp_id == rp.RP_ID
        assert credential.user_handle == base64.urlsafe_b64encode(user_handle).decode()
        assert credential.sign_count == 7
        assert serialization.load_der_private_key(unb64url(credential.private_key), None).private_numbers() \
            == private_key.private_numbers()

        with pytest.raises(WebDriverException, match="isResidentCredential true"):
            driver.add_credential(Credential.create_non_resident_credential(os.urandom(16), rp.RP_ID, pkcs8, 0))
        with pytest.raises(InvalidArgumentException, match="no such credential"):
            driver.remove_credential(bytearray(os.urandom(16)))

        driver.set_user_verified(False)
        assert control.get(f"/v1/keys/{name}/user-verified") == {"isUserVerified": False}
        driver.remove_credential(credential_id)
        assert driver.get_credentials() == []
        driver.add_credential(Credential.create_resident_credential(os.urandom(8), rp.RP_ID, b"u", pkcs8, 0))
        driver.remove_all_credentials()
        assert driver.get_credentials() == []
        driver.remove_virtual_authenticator()
        assert not key_exists(control, name)

        with pytest.raises(InvalidArgumentException, match="USB"):
            driver.add_virtual_authenticator(VirtualAuthenticatorOptions(transport="internal"))
        driver.add_virtual_authenticator(VirtualAuthenticatorOptions(protocol="ctap1/u2f"))
        left = driver.virtual_authenticator_id
        assert key_exists(control, left)
        assert driver.title is not None  # an ordinary command, through to the fake driver
    finally:
        driver.quit()
    assert not key_exists(control, left), "quit (Delete Session) left the session's key"
    assert not upstream.sessions


@pytest.mark.skipif(OWNER is None, reason="needs the test accounts (run as root)")
def test_isolation_by_account(start_intermediary, control):
    """With isolation (the default), a driver of another account than latchkey-webdriver's
    (here the suite's own, root) gets no key: its browser could not open it."""
    wd = start_intermediary(isolation="account")
    session = wd.new_session()
    before = {k["name"] for k in control.get("/v1/keys")}
    message = wd.error("POST", f"/session/{session}/webauthn/authenticator", SELENIUM_DEFAULTS, expect=500,
                       code="unknown error")
    assert "runs as uid 0" in message and OWNER.name in message, message
    assert {k["name"] for k in control.get("/v1/keys")} == before
    wd.command("DELETE", f"/session/{session}")
