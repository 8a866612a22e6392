#!/usr/bin/env python3
"""Firefox and latchkey-webdriver's §11 commands, without geckodriver: neither Debian 12
nor PyPI has a geckodriver (PyPI's "geckodriver" is an empty placeholder), so Selenium
cannot drive Firefox here. What a Selenium test would send, this sends to
latchkey-webdriver's HTTP API itself (WebAuthn L3 §11, the JSON Selenium's bindings
send), while Firefox ESR, driven through Marionette as the browser matrix drives it,
uses the key that the commands made, through the kernel's hidraw.

    webdriver_firefox.py --socket SOCK --intermediary BIN --ctl BIN --lib-dir DIR \\
        --browser-log FILE --work DIR

latchkey-webdriver needs an upstream driver to create a session; with no geckodriver, a
stand-in (Tests/e2e/fake_webdriver.py) answers New Session and Delete Session, so the
session is latchkey-webdriver's own. The checks: Add Virtual Authenticator makes a key
Firefox sees; Add Credential seeds a discoverable ES256 credential that Firefox then
signs in with (Fido2Server verifies with the seeded key); Get Credentials reports the
sign count Firefox's assertion carried; Remove Credential; Remove Virtual Authenticator
takes the key and its hidraw node away; Delete Session. Each is a PASS/FAIL line.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # Tests/kernel: rp.py
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(HERE)), "e2e"))  # fake_webdriver.py (last: e2e has its own rp.py)

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from fido2.cose import ES256  # noqa: E402
from fido2.utils import websafe_decode  # noqa: E402
from fido2.webauthn import Aaguid, AttestedCredentialData, AuthenticatorData  # noqa: E402

import rp  # noqa: E402
from fake_webdriver import FakeWebDriver  # noqa: E402
from firefox import Firefox  # noqa: E402
from matrix import RP_ID, REQUIRED  # noqa: E402
from webdriver_intermediary import Checks, main_with, start_intermediary, stop_intermediary  # noqa: E402


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class WebDriverClient:
    """The JSON a WebDriver client sends, to latchkey-webdriver on 127.0.0.1."""

    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


def run(args, checks: Checks, browser: Firefox) -> None:
    with FakeWebDriver() as upstream:
        port = int(upstream.url.rsplit(":", 1)[1].strip("/"))
        proc, wd_port = start_intermediary(args, port)
        client = WebDriverClient(wd_port)
        state: dict = {}
        try:
            def new_session():
                status, body = client.call("POST", "/session", {"capabilities": {"alwaysMatch": {}}})
                assert status == 200, f"{status} {body}"
                state["session"] = body["value"]["sessionId"]
                return f"session {state['session']} (the stand-in upstream's)"

            if not checks.step("webdriver-firefox: New Session through latchkey-webdriver", new_session):
                return
            session = f"/session/{state['session']}/webauthn"

            def add_authenticator():
                status, body = client.call("POST", f"{session}/authenticator", {
                    "protocol": "ctap2", "transport": "usb", "hasResidentKey": True, "hasUserVerification": True,
                    "isUserConsenting": True, "isUserVerified": True})
                assert status == 200, f"{status} {body}"
                name = body["value"]
                deadline = time.monotonic() + 60
                while True:
                    code, key = checks.ctl("keys", "show", name)
                    hidraw = (key or {}).get("uhid", {}).get("hidraw")
                    if code == 0 and hidraw and os.path.exists(hidraw):
                        state.update(name=name, aaguid=key["aaguid"], hidraw=hidraw)
                        return f"key {name} on {hidraw}"
                    assert time.monotonic() < deadline, f"no hidraw node for {name} within 60 s: {key}"
                    time.sleep(0.2)

            if not checks.step("webdriver-firefox: Add Virtual Authenticator makes a key on hidraw", add_authenticator):
                return
            authenticator = f"{session}/authenticator/{state['name']}"
            time.sleep(2)  # Firefox learns of the device through udev

            private_key = ec.generate_private_key(ec.SECP256R1())
            pkcs8 = private_key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption())
            credential_id, user_handle = os.urandom(32), os.urandom(16)

            def add_credential_and_sign_in():
                status, body = client.call("POST", f"{authenticator}/credential", {
                    "credentialId": b64url(credential_id), "isResidentCredential": True, "rpId": RP_ID,
                    "privateKey": b64url(pkcs8), "userHandle": b64url(user_handle), "signCount": 41})
                assert status == 200, f"Add Credential: {status} {body}"
                attested = AttestedCredentialData.create(
                    Aaguid(bytes.fromhex(state["aaguid"].replace("-", ""))), credential_id,
                    ES256.from_cryptography_key(private_key.public_key()))
                server = rp.make_server(RP_ID)
                options, auth_state = server.authenticate_begin(None, user_verification=REQUIRED)
                public_key = dict(options)["publicKey"]
                public_key["timeout"] = args.timeout_ms
                result = browser.request(public_key, "get", None)
                server.authenticate_complete(auth_state, [attested], result["credential"])
                handle = websafe_decode(result["credential"]["response"].get("userHandle") or "")
                assert handle == user_handle, "the usernameless get did not return the seeded user handle"
                auth_data = AuthenticatorData(websafe_decode(result["credential"]["response"]["authenticatorData"]))
                assert auth_data.counter > 41, f"sign count {auth_data.counter} is not above the seeded 41"
                state["counter"] = auth_data.counter
                return f"{result['ms']} ms in the page, usernameless, signed by the seeded key, sign count {auth_data.counter}"

            checks.step("webdriver-firefox: Add Credential, then a usernameless navigator.credentials.get() in "
                        "Firefox signs with it", add_credential_and_sign_in)

            def get_credentials():
                status, body = client.call("GET", f"{authenticator}/credentials")
                assert status == 200, f"{status} {body}"
                [credential] = body["value"]
                assert websafe_decode(credential["credentialId"]) == credential_id
                assert credential["isResidentCredential"] is True and credential["rpId"] == RP_ID
                assert websafe_decode(credential["userHandle"]) == user_handle
                assert credential["signCount"] == state.get("counter"), \
                    f"signCount {credential['signCount']}, Firefox's assertion carried {state.get('counter')}"
                return f"signCount {credential['signCount']}, as Firefox's assertion said"

            checks.step("webdriver-firefox: Get Credentials reports the sign count of Firefox's assertion",
                        get_credentials)

            def remove_credential():
                status, body = client.call("DELETE", f"{authenticator}/credentials/{b64url(credential_id)}")
                assert status == 200, f"{status} {body}"
                status, body = client.call("GET", f"{authenticator}/credentials")
                assert status == 200 and body["value"] == [], f"{status} {body}"

            checks.step("webdriver-firefox: Remove Credential leaves none", remove_credential)

            def remove_authenticator():
                status, body = client.call("DELETE", authenticator)
                assert status == 200, f"{status} {body}"
                code, _ = checks.ctl("keys", "show", state["name"])
                assert code == 4, f"latchkeyctl keys show {state['name']}: exit {code}, the key is still there"
                deadline = time.monotonic() + 10
                while os.path.exists(state["hidraw"]):
                    assert time.monotonic() < deadline, f"{state['hidraw']} is still there"
                    time.sleep(0.1)

            checks.step("webdriver-firefox: Remove Virtual Authenticator: the key and its hidraw node are gone",
                        remove_authenticator)

            def delete_session():
                status, body = client.call("DELETE", f"/session/{state['session']}")
                assert status == 200, f"{status} {body}"

            checks.step("webdriver-firefox: Delete Session", delete_session)
        finally:
            stop_intermediary(args, checks, proc, "webdriver-firefox: latchkey-webdriver exits 0 on SIGTERM")


def main() -> int:
    return main_with(Firefox, "webdriver-firefox: Firefox up through Marionette, page {url}",
                     lambda args, checks, browser, _url: run(args, checks, browser))


if __name__ == "__main__":
    sys.exit(main())
